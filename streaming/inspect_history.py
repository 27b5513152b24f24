"""`kcsim history --lake DIR --topic T --partition P [--cluster C]`: a partition's
leader/ISR/epoch changes, from the Change Data Feed of `partition_state`.

One line per change the lake recorded (a micro-batch that changed the partition): its
Delta version and time, the new state, leader, leader epoch, ISR and partition epoch, the
event that last changed the partition in that batch (`last_event_id`) and every event of
the batch that touched it (a partition or replica transition in `state_changes`, an
answer in `event_results`; matched by `seq`).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streaming.inspect_state import render
from streaming.lake import Lake

CHANGES = ("insert", "update_postimage", "delete")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", required=True, help="Delta lake directory")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, required=True)
    parser.add_argument("--cluster", default="default", help='default: "default"')
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")


def main(args: argparse.Namespace) -> int:
    from streaming.session import build_session

    spark = build_session("kcsim-history", args.master, verbose=getattr(args, "verbose", False))
    try:
        changes = partition_history(spark, args.lake, args.cluster, args.topic, args.partition)
        show_history(changes, sys.stdout)
    finally:
        spark.stop()
    return 0 if changes else 1


def partition_history(
    spark: SparkSession, lake_dir: str, cluster: str, topic: str, partition: int
) -> list[dict[str, Any]]:
    lake = Lake(spark, lake_dir)
    key = (F.col("cluster") == cluster) & (F.col("topic") == topic)
    feed = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(lake.path("partition_state"))
        .where(key & (F.col("partition") == partition) & F.col("_change_type").isin(*CHANGES))
        .orderBy("_commit_version")
        .collect()
    )
    applied = (
        lake.read("applied_events")
        .where(F.col("cluster") == cluster)
        .select("event_id", "seq")
        .toArrow()
        .to_pylist()
    )
    seqs = {r["event_id"]: r["seq"] for r in applied}
    touched = sorted(
        {
            (r["seq"], r["event_id"])
            for table in ("state_changes", "event_results")
            for r in lake.read(table)
            .where(key & (F.col("partition") == partition))
            .select("seq", "event_id")
            .toArrow()
            .to_pylist()
        }
    )
    changes: list[dict[str, Any]] = []
    previous = -1
    for index, row in enumerate(feed):
        if row["_change_type"] == "delete":
            following = feed[index + 1] if index + 1 < len(feed) else None
            upto = seqs.get(following["last_event_id"], 2**63) - 1 if following else 2**63
            upto = max([s for s, _ in touched if previous < s <= upto], default=previous)
        else:
            upto = seqs.get(row["last_event_id"], previous)
        changes.append(
            {
                "version": row["_commit_version"],
                "time": datetime.fromtimestamp(row["_commit_timestamp"].timestamp(), UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
                "change": {"update_postimage": "update"}.get(
                    row["_change_type"], row["_change_type"]
                ),
                "state": row["state"],
                "leader": row["leader"],
                "leader_epoch": row["leader_epoch"],
                "isr": list(row["isr"] or []),
                "partition_epoch": row["partition_epoch"],
                "event_id": row["last_event_id"],
                "events": [e for s, e in touched if previous < s <= upto],
            }
        )
        previous = upto
    return changes


def show_history(changes: list[dict[str, Any]], out: TextIO) -> None:
    if not changes:
        out.write("no changes recorded for this partition\n")
        return
    columns = list(changes[0])
    out.write(render([{**c, "events": " ".join(c["events"])} for c in changes], columns))
