"""The workloads the benchmarks share: a cluster's state rows built directly (no replay of
its creation), and the event lists of the scenarios they time.

Run a benchmark from the repository root with kcsim importable (`pip install -e .`, or
`PYTHONPATH=$PWD`): `python benchmarks/synthetic/bench_core.py ...`. Python puts the script's own
folder first on sys.path, so each benchmark imports this module as `workloads`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator

from controller.columns import Columns
from controller.config import Settings
from controller.simulator import RawEvent, Simulator

CLUSTER = "bench"


PARTITIONS_PER_TOPIC = 1000


def topic_partition(index: int) -> tuple[str, int]:
    """The synthetic cluster's `index`-th partition."""
    return f"topic-{index // PARTITIONS_PER_TOPIC:05d}", index % PARTITIONS_PER_TOPIC


def replicas_of(index: int, brokers: int, rf: int) -> list[int]:
    """Kafka's rack-unaware placement with start index 0: a round-robin first replica and
    a shift that varies every `brokers` partitions."""
    first = index % brokers
    shift = 1 + (index // brokers) % (brokers - 1)
    return list(dict.fromkeys([first] + [(first + shift * k) % brokers for k in range(1, rf)]))


def cluster_rows(
    brokers: int, partitions: int, rf: int, cluster: str = CLUSTER
) -> dict[str, list[dict]]:
    """Every partition online, led by its preferred replica, ISR = replicas."""
    partition_rows, replica_rows, topic_rows = [], [], []
    for index in range(partitions):
        topic, partition = topic_partition(index)
        if partition == 0:
            topic_rows.append({"cluster": cluster, "topic": topic, "configs": {}, "deletion": None})
        replicas = replicas_of(index, brokers, rf)
        partition_rows.append(
            {
                "cluster": cluster,
                "topic": topic,
                "partition": partition,
                "state": "OnlinePartition",
                "leader": replicas[0],
                "leader_epoch": 0,
                "isr": replicas,
                "partition_epoch": 0,
                "leader_recovery_state": "RECOVERED",
                "controller_epoch": 1,
                "replicas": replicas,
                "adding_replicas": [],
                "removing_replicas": [],
                "last_event_id": None,
            }
        )
        for broker in replicas:
            replica_rows.append(
                {
                    "cluster": cluster,
                    "topic": topic,
                    "partition": partition,
                    "broker": broker,
                    "state": "OnlineReplica",
                    "last_event_id": None,
                }
            )
    return {
        "applied_events": [],
        "partition_state": partition_rows,
        "replica_state": replica_rows,
        "topics": topic_rows,
        "brokers": [
            {"cluster": cluster, "broker": b, "rack": None, "status": "live", "broker_epoch": b + 1}
            for b in range(brokers)
        ],
        "clusters": [
            {
                "cluster": cluster,
                "controller_epoch": 1,
                "controller": 0,
            }
        ],
    }


PARTITION_COLUMNS = (
    "cluster", "topic", "partition", "state", "leader", "leader_epoch", "isr",
    "partition_epoch", "leader_recovery_state", "controller_epoch", "replicas",
    "adding_replicas", "removing_replicas", "last_event_id", "elr", "last_known_elr",
)  # fmt: skip


def engine_cluster_rows(
    settings: Settings, brokers: int, partitions: int, rf: int, cluster: str = CLUSTER
) -> dict[str, object]:
    """`cluster_rows` for either engine (`settings.engine`), the state tables as columns
    (no dict per row: at 1M partitions the rows would outweigh the cluster).

    Under `kraft` the brokers are registered and unfenced through the engine itself (a
    `broker_startup` each: registration + unfence), and its clusters row carries their
    `kraft_state`; the partitions are the same as under `zk`, with empty ELRs."""
    empty: list[int] = []
    topics, numbers, replica_lists = [], [], []
    for index in range(partitions):
        topic, partition = topic_partition(index)
        topics.append(topic)
        numbers.append(partition)
        replica_lists.append(replicas_of(index, brokers, rf))
    n = partitions
    columns = {
        "cluster": [cluster] * n, "topic": topics, "partition": numbers,
        "state": ["OnlinePartition"] * n, "leader": [r[0] for r in replica_lists],
        "leader_epoch": [0] * n, "isr": replica_lists, "partition_epoch": [0] * n,
        "leader_recovery_state": ["RECOVERED"] * n, "controller_epoch": [1] * n,
        "replicas": replica_lists, "adding_replicas": [empty] * n,
        "removing_replicas": [empty] * n, "last_event_id": [None] * n,
        "elr": [empty] * n, "last_known_elr": [empty] * n,
    }  # fmt: skip
    partition_state = Columns(PARTITION_COLUMNS, tuple(columns[c] for c in PARTITION_COLUMNS))
    topic_rows = [
        {"cluster": cluster, "topic": t, "configs": {}, "deletion": None}
        for t in dict.fromkeys(topics)
    ]
    if settings.engine != "kraft":
        replica_cols: dict[str, list] = {c: [] for c in ("cluster", "topic", "partition", "broker")}
        for topic, partition, replicas in zip(topics, numbers, replica_lists, strict=True):
            for broker in replicas:
                replica_cols["topic"].append(topic)
                replica_cols["partition"].append(partition)
                replica_cols["broker"].append(broker)
        size = len(replica_cols["broker"])
        replica_cols["cluster"] = [cluster] * size
        names = ("cluster", "topic", "partition", "broker", "state", "last_event_id")
        replica_cols["state"] = ["OnlineReplica"] * size
        replica_cols["last_event_id"] = [None] * size
        rows = cluster_rows(brokers, 0, rf, cluster)
        rows["partition_state"] = partition_state  # type: ignore[assignment]
        rows["replica_state"] = Columns(names, tuple(replica_cols[c] for c in names))  # type: ignore[assignment]
        rows["topics"] = topic_rows
        return rows  # type: ignore[return-value]
    registrar = Simulator(settings)
    startups = [{"type": "broker_startup", "broker": b} for b in range(brokers)]
    registrar.apply([RawEvent(json.dumps({"cluster": cluster, **e}), "bench:0") for e in startups])
    return {
        "applied_events": [],
        "partition_state": partition_state,
        "topics": topic_rows,
        "brokers": list(registrar.table_rows("brokers")),
        "clusters": list(registrar.table_rows("clusters")),
    }


def events(items: list[dict]) -> list[RawEvent]:
    return [
        RawEvent(json.dumps({"cluster": CLUSTER, **e}), f"bench:{i + 1}")
        for i, e in enumerate(items)
    ]


def broker_failure(args: argparse.Namespace) -> list[dict]:
    return [{"type": "broker_failure", "broker": 1}]


def rolling_restart(args: argparse.Namespace) -> list[dict]:
    out: list[dict] = []
    for broker in range(min(args.brokers, args.restart_brokers)):
        out += [
            {"type": "controlled_shutdown", "broker": broker},
            {"type": "broker_failure", "broker": broker},
            {"type": "broker_startup", "broker": broker},
        ]
    return out


def controlled_shutdown(args: argparse.Namespace) -> list[dict]:
    return [{"type": "controlled_shutdown", "broker": 2}]


def reassignment_wave(args: argparse.Namespace) -> list[dict]:
    moves = []
    for index in range(min(args.reassignments, args.partitions)):
        topic = f"topic-{index // PARTITIONS_PER_TOPIC:05d}"
        first = (index + 7) % args.brokers
        target = list(
            dict.fromkeys([first, (first + 1) % args.brokers, (first + 2) % args.brokers])
        )[: args.rf]
        moves.append(
            {
                "type": "partition_reassignment",
                "topic": topic,
                "partition": index % PARTITIONS_PER_TOPIC,
                "replicas": target,
            }
        )
    return moves


def topic_churn(args: argparse.Namespace) -> list[dict]:
    out: list[dict] = []
    for n in range(args.churn_topics):
        topic = f"churn-{n}"
        out.append(
            {
                "type": "topic_creation",
                "topic": topic,
                "partitions": 100,
                "replication_factor": min(3, args.brokers),
            }
        )
        out.append({"type": "topic_deletion", "topic": topic})
    return out


def isr_events(
    count: int,
    start: int,
    brokers: int,
    partitions: int,
    cluster: str = CLUSTER,
    epochs: bool = True,
) -> list[str]:
    """ISR shrink then expand, partition after partition; event k of the cluster's run
    is `start + k`, so consecutive batches continue the cycle. `epochs=False`: the
    events give no epochs (CONTRACT §1: the current ones), so that either engine takes
    them (a KRaft ISR change moves the epochs otherwise than a ZooKeeper one)."""
    lines = []
    for k in range(start, start + count):
        index = (k // 2) % partitions
        replicas = replicas_of(index, brokers, 3)
        topic, partition = topic_partition(index)
        cycle = (k // 2) // partitions
        isr = replicas[:2] if k % 2 == 0 else replicas
        event = {
            "type": "isr_change", "cluster": cluster, "topic": topic,
            "partition": partition, "isr": isr, "leader_epoch": 0,
            "partition_epoch": 2 * cycle + k % 2,
        }  # fmt: skip
        if not epochs:
            del event["leader_epoch"], event["partition_epoch"]
        lines.append(json.dumps(event, separators=(",", ":")))
    return lines


def fleet_rows(clusters: list[str], args: argparse.Namespace) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for cluster in clusters:
        for name, table in cluster_rows(args.brokers, args.partitions, 3, cluster).items():
            rows.setdefault(name, []).extend(table)
    return rows


def workload(brokers: int, partitions: int) -> Iterator[dict]:
    for broker in range(brokers):
        yield {"type": "broker_startup", "broker": broker}
    for start in range(0, partitions, PARTITIONS_PER_TOPIC):
        yield {
            "type": "topic_creation",
            "topic": f"topic-{start // PARTITIONS_PER_TOPIC:05d}",
            "partitions": min(PARTITIONS_PER_TOPIC, partitions - start),
            "replication_factor": min(3, brokers),
        }
    for broker in range(brokers):
        yield {"type": "controlled_shutdown", "broker": broker}
        yield {"type": "broker_failure", "broker": broker}
        yield {"type": "broker_startup", "broker": broker}
