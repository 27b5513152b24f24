"""`kcsim state --topic T | --under-replicated | --unavailable | --under-min-isr`: the lake's
latest state in the layout `kafka-topics --describe` prints, so an operator reads the
simulated cluster as they read a real one.

Each partition line is tab-separated `Topic: Partition: Leader: Replicas: Isr:` (the
leader `none` when there is none), then `Adding Replicas:`/`Removing Replicas:` while a
reassignment is under way, `Elr:`/`LastKnownElr:` for a KRaft cluster (Kafka 4.1 prints
them), and `MarkedForDeletion: true` for a topic being deleted. `--topic T` alone starts
with the topic's own line (partition count, replication factor, configs); the three
filters print partition lines only, as Kafka's do, a partition when it is any of the kinds
asked for. The filters mean what Kafka's tool means:
  - under-replicated: the ISR is smaller than the replication factor (the replicas less
    those a reassignment is adding);
  - unavailable: no leader, or a leader that is not a live broker (a broker counts as live
    while registered and not fenced: `live` or `shutting_down`);
  - under-min-isr: no leader, or an ISR smaller than `min.insync.replicas` (the topic's
    config, else the cluster's dynamic default, else `--min-isr`).
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from controller.plan.view import topic_min_isr
from streaming.insight.lake_tables import lake_cluster, read_table
from streaming.lake.spark_schemas import arrow_to_rows

LIVE = ("live", "shutting_down")


def describe(args: argparse.Namespace, out: TextIO) -> None:
    cluster = args.cluster or lake_cluster(args.lake, args.master)

    def rows(table: str) -> list[dict[str, Any]]:
        found = arrow_to_rows(read_table(args.lake, table, args.master, False), table)
        return [r for r in found if r["cluster"] == cluster]

    clusters = rows("clusters")
    if not clusters:
        raise ValueError(f"the lake holds no cluster {cluster!r}")
    kraft = clusters[0].get("engine") == "kraft"
    cluster_default = topic_min_isr(clusters[0].get("cluster_configs"), args.min_isr)
    topics = {r["topic"]: r for r in rows("topics")}
    live = {r["broker"] for r in rows("brokers") if r["status"] in LIVE}
    partitions = sorted(rows("partition_state"), key=lambda r: (r["topic"], r["partition"]))
    if args.topic is not None:
        partitions = [p for p in partitions if p["topic"] == args.topic]
        if args.topic not in topics and not partitions:
            raise ValueError(f"cluster {cluster!r} has no topic {args.topic!r}")
    filtered = args.under_replicated or args.unavailable or args.under_min_isr
    if args.topic is not None and not filtered:
        out.write(topic_line(args.topic, topics.get(args.topic), partitions))
    for row in partitions:
        isr = len(row["isr"] or [])
        min_isr = topic_min_isr((topics.get(row["topic"]) or {}).get("configs"), cluster_default)
        leader = row["leader"] if row["leader"] is not None and row["leader"] >= 0 else None
        # as Kafka's: a partition is printed when it is any of the kinds asked for
        if filtered and not (
            (args.under_replicated and isr < replication_factor(row))
            or (args.unavailable and (leader is None or leader not in live))
            or (args.under_min_isr and (leader is None or isr < min_isr))
        ):
            continue
        out.write(partition_line(row, kraft, topics.get(row["topic"])))


def replication_factor(row: dict[str, Any]) -> int:
    """The replicas less those a reassignment is adding, as Kafka's tool counts them."""
    return len(row["replicas"] or []) - len(row.get("adding_replicas") or [])


def _ids(values: list[int] | None) -> str:
    return ",".join(str(v) for v in values or [])


def topic_line(topic: str, row: dict[str, Any] | None, partitions: list[dict[str, Any]]) -> str:
    configs = (row or {}).get("configs") or {}
    factor = replication_factor(partitions[0]) if partitions else 0
    shown = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
    return (
        f"Topic: {topic}\tPartitionCount: {len(partitions)}\tReplicationFactor: {factor}\t"
        f"Configs: {shown}\n"
    )


def partition_line(row: dict[str, Any], kraft: bool, topic: dict[str, Any] | None) -> str:
    leader = row["leader"] if row["leader"] is not None and row["leader"] >= 0 else "none"
    text = (
        f"\tTopic: {row['topic']}\tPartition: {row['partition']}\tLeader: {leader}\t"
        f"Replicas: {_ids(row['replicas'])}\tIsr: {_ids(row['isr'])}"
    )
    if row.get("adding_replicas") or row.get("removing_replicas"):
        text += (
            f"\tAdding Replicas: {_ids(row.get('adding_replicas'))}"
            f"\tRemoving Replicas: {_ids(row.get('removing_replicas'))}"
        )
    if kraft:
        text += f"\tElr: {_ids(row.get('elr'))}\tLastKnownElr: {_ids(row.get('last_known_elr'))}"
    if topic is not None and topic.get("deletion"):
        text += "\tMarkedForDeletion: true"
    return text + "\n"


__all__ = ["describe", "partition_line", "topic_line"]
