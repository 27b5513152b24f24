"""Core benchmark: synthetic clusters and workloads through `Simulator.apply`.

Run by hand (not a test):  python benchmarks/bench_core.py --brokers 300 --partitions 1000000

A cluster is built from synthetic state-table rows (`Simulator.from_tables`, the same path
a restart takes), every partition online with leader = preferred replica. Each workload is
then timed through the core alone, output rows included (not written to disk). Printed per
workload: events, seconds, events/s, partition and replica transitions/s (state_changes
rows), requests; and the resident memory the cluster costs per partition.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


WORKLOADS: dict[str, Callable[[argparse.Namespace], list[dict]]] = {
    "broker_failure": broker_failure,
    "controlled_shutdown": controlled_shutdown,
    "rolling_restart": rolling_restart,
    "reassignment_wave": reassignment_wave,
    "topic_churn": topic_churn,
}


def run(args: argparse.Namespace) -> Iterator[str]:
    settings = Settings(simulate_brokers=True)
    rows = cluster_rows(args.brokers, args.partitions, args.rf)
    gc.collect()
    # tracemalloc counts what the context itself holds (RSS would also count the freed
    # input rows, which the allocator keeps)
    tracemalloc.start()
    started = time.perf_counter()
    simulator = Simulator.from_tables(settings, rows)
    build_seconds = time.perf_counter() - started
    del rows
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    yield (
        f"cluster: {args.brokers} brokers, {args.partitions:,} partitions, RF {args.rf}; "
        f"loaded in {build_seconds:.1f} s (traced); context holds "
        f"{held / args.partitions:,.0f} bytes/partition"
    )
    for name in args.workloads:
        batch = events(WORKLOADS[name](args))
        started = time.perf_counter()
        output = simulator.apply(batch)
        seconds = time.perf_counter() - started
        changes = output.appends["state_changes"]
        partition_changes = sum(1 for r in changes if r["entity"] == "partition")
        replica_changes = len(changes) - partition_changes
        requests = output.appends["controller_requests"]
        entries = sum(len(r["partitions"]) for r in requests)
        yield (
            f"{name:20s} events {len(batch):7,d}  {seconds:8.3f} s  "
            f"{len(batch) / seconds:10,.0f} events/s  "
            f"partition transitions {partition_changes:9,d} "
            f"({partition_changes / seconds:10,.0f}/s)  "
            f"replica transitions {replica_changes:9,d} ({replica_changes / seconds:10,.0f}/s)  "
            f"requests {len(requests):7,d} ({entries:,} partition entries)"
        )
        del output
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    yield f"peak RSS {peak / 2**20:,.0f} MiB ({peak / args.partitions:,.0f} bytes/partition)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--restart-brokers", type=int, default=5)
    parser.add_argument("--reassignments", type=int, default=1000)
    parser.add_argument("--churn-topics", type=int, default=20)
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    args = parser.parse_args()
    for line in run(args):
        print(line, flush=True)


if __name__ == "__main__":
    main()
