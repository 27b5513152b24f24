"""`kcsim history --lake DIR --topic T --partition P [--cluster C]`: a partition's
changes, event by event.

By default one line per state transition the controller made to the partition or to one
of its replicas (`state_changes`) and per answer it gave about it (`event_results`), in
`seq` order: the event's time (`ts`, ISO-8601 UTC; `-` for an event without one), its
`seq`, type and id, what changed (the partition, or `replica B`), the states from and to,
the leader, leader epoch and ISR after it, and a note (an error, an unclean election).
`--json` prints the same as JSON lines. With one cluster in the lake `--cluster` may be
left out; with several the error names them.

`--commits` gives the older view, one line per Delta commit of `partition_state` (from
its Change Data Feed):

One line per change the lake recorded (a micro-batch that changed the partition): its
Delta version and time, the new state, leader, leader epoch, ISR and partition epoch, the
event that last changed the partition in that batch (`last_event_id`) and every event of
the batch that touched it (a partition or replica transition in `state_changes`, an
answer in `event_results`; matched by `seq`).

A cluster the KRaft engine ran (its `clusters` row's engine) also shows each change's ELR,
last known ELR and leader recovery state, and which of the partition's replicas were on a
broker not live then (fenced, shutting_down, or not registered), from the `brokers`
table's change feed as of the end of the same batch.

A local lake is read without Spark (`streaming.lake.local_reader`), a lake elsewhere, or a table
that reader does not handle, through Spark; both print the same text.
"""

from __future__ import annotations

import argparse
import io
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from streaming.insight.state import render
from streaming.lake.time_travel import Commit, consistent_cut

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.lake.local_reader import LakeReader

CHANGES = ("insert", "update_postimage", "delete")
FEED_COLUMNS = (
    "state",
    "leader",
    "leader_epoch",
    "isr",
    "partition_epoch",
    "last_event_id",
    "_change_type",
    "_commit_version",
    "replicas",
    "elr",
    "last_known_elr",
    "leader_recovery_state",
)
BROKER_FEED_COLUMNS = ("broker", "status", "_change_type", "_commit_version")


class BrokerFeed(NamedTuple):
    """What a KRaft partition's history needs of the brokers table: its change feed rows
    for the cluster and the two tables' commits (to cut the brokers as of a batch)."""

    rows: list[dict[str, Any]]
    partition_commits: list[Commit]
    broker_commits: list[Commit]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", required=True, help="Delta lake directory")
    parser.add_argument("--topic", required=True, help="the partition's topic")
    parser.add_argument("--partition", type=int, required=True, help="the partition's number")
    parser.add_argument(
        "--cluster", help="the partition's cluster (default: the lake's one cluster)"
    )
    parser.add_argument(
        "--since",
        metavar="TIME",
        help="only events at or after TIME: ISO-8601 or epoch ms (default: from the first)",
    )
    parser.add_argument(
        "--until", metavar="TIME", help="only events before TIME (default: to the last)"
    )
    parser.add_argument(
        "--json", action="store_true", help="JSON lines (default: an aligned table)"
    )
    parser.add_argument(
        "--commits",
        action="store_true",
        help="one line per Delta commit of partition_state instead of one per event",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master, for a lake elsewhere")


def main(args: argparse.Namespace) -> int:
    from streaming.insight.events_history import event_history, write_events
    from streaming.insight.lake_tables import lake_cluster

    try:
        cluster = args.cluster or lake_cluster(args.lake, args.master)
        if not args.commits:
            lines = event_history(
                args.lake, cluster, args.topic, args.partition, args.since, args.until, args.master
            )
            write_events(lines, args.json, sys.stdout)
            return 0 if lines else 1
    except ValueError as error:
        print(f"kcsim history: {error}", file=sys.stderr)
        return 2
    key = (cluster, args.topic, args.partition)
    try:
        changes = native_history(args.lake, *key)
    except ValueError as error:
        print(f"kcsim history: {error}", file=sys.stderr)
        return 2
    if changes is None:
        from streaming.lake.spark_session import build_session

        spark = build_session("kcsim-history", args.master, verbose=getattr(args, "verbose", False))
        try:
            changes = partition_history(spark, args.lake, *key)
        finally:
            spark.stop()
    text = io.StringIO()
    show_history(changes, text)
    sys.stdout.write(text.getvalue())
    return 0 if changes else 1


def native_history(
    lake_dir: str, cluster: str, topic: str, partition: int
) -> list[dict[str, Any]] | None:
    """The history read without Spark; None when the lake is not local or a table is not
    read that way (`lake_reader.NotNative`: a note on stderr)."""
    from streaming.lake.local_reader import LakeReader, NotNative, local_root

    root = local_root(lake_dir)
    if root is None:
        return None
    try:
        return read_history(LakeReader(root), cluster, topic, partition)
    except NotNative as reason:
        print(f"kcsim history: reading through Spark: {reason}", file=sys.stderr)
        return None


def read_history(
    reader: LakeReader, cluster: str, topic: str, partition: int
) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    from streaming.lake.local_reader import matching

    key = {"cluster": cluster, "topic": topic, "partition": partition}
    feed = matching(reader.changes("partition_state"), **key, _change_type=CHANGES)
    feed = feed.take(pc.sort_indices(feed.column("_commit_version")))
    rows = feed.select(FEED_COLUMNS).to_pylist()
    times = {version: time for version, time, _ in reader.history("partition_state")}
    for row in rows:
        row["time"] = times[row["_commit_version"]]
    applied = reader.read("applied_events", columns=["cluster", "event_id", "seq"])
    applied = matching(applied, cluster=cluster).select(["event_id", "seq"])
    touched = pa.concat_tables(
        matching(reader.read(table, columns=[*key, "seq", "event_id"]), **key).select(
            ["seq", "event_id"]
        )
        for table in ("state_changes", "event_results")
    )
    brokers = None
    if _native_engine(reader, cluster) == "kraft":
        feed_rows = matching(reader.changes("brokers"), cluster=cluster, _change_type=CHANGES)
        brokers = BrokerFeed(
            feed_rows.select(BROKER_FEED_COLUMNS).to_pylist(),
            reader.history("partition_state"),
            reader.history("brokers"),
        )
    return changes_from(rows, applied.to_pylist(), touched.to_pylist(), brokers)


def _native_engine(reader: LakeReader, cluster: str) -> str:
    from streaming.lake.local_reader import matching

    clusters = matching(reader.read("clusters", columns=["cluster", "engine"]), cluster=cluster)
    engines = [e for e in clusters.column("engine").to_pylist() if e]
    return engines[-1] if engines else "zk"


def partition_history(
    spark: SparkSession, lake_dir: str, cluster: str, topic: str, partition: int
) -> list[dict[str, Any]]:
    """The history read through Spark."""
    from pyspark.sql import functions as F

    from streaming.lake.tables import Lake

    lake = Lake(spark, lake_dir)
    key = (F.col("cluster") == cluster) & (F.col("topic") == topic)
    feed = [
        {**row.asDict(), "time": row["_commit_timestamp"].timestamp()}
        for row in spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(lake.path("partition_state"))
        .where(key & (F.col("partition") == partition) & F.col("_change_type").isin(*CHANGES))
        .orderBy("_commit_version")
        .collect()
    ]
    applied = (
        lake.read("applied_events")
        .where(F.col("cluster") == cluster)
        .select("event_id", "seq")
        .toArrow()
        .to_pylist()
    )
    touched = [
        r
        for table in ("state_changes", "event_results")
        for r in lake.read(table)
        .where(key & (F.col("partition") == partition))
        .select("seq", "event_id")
        .toArrow()
        .to_pylist()
    ]
    engines = [
        r["engine"]
        for r in lake.read("clusters").where(F.col("cluster") == cluster).select("engine").collect()
        if r["engine"]
    ]
    brokers = None
    if engines and engines[-1] == "kraft":
        rows = [
            row.asDict()
            for row in spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", 0)
            .load(lake.path("brokers"))
            .where((F.col("cluster") == cluster) & F.col("_change_type").isin(*CHANGES))
            .select(*BROKER_FEED_COLUMNS)
            .collect()
        ]
        brokers = BrokerFeed(rows, lake.history("partition_state"), lake.history("brokers"))
    return changes_from(feed, applied, touched, brokers)


def changes_from(
    feed: list[dict[str, Any]],
    applied: list[dict[str, Any]],
    touched_rows: list[dict[str, Any]],
    brokers: BrokerFeed | None = None,
) -> list[dict[str, Any]]:
    """The partition's changes: `feed` its change feed rows in version order (`time`: the
    commit's epoch seconds), `applied` the cluster's (event_id, seq), `touched_rows` the
    (seq, event_id) of every event that touched the partition; `brokers` for a KRaft
    cluster (its changes then say ELR, last known ELR, recovery state and the replicas
    not live)."""
    seqs = {r["event_id"]: r["seq"] for r in applied}
    statuses = BrokerStatuses(brokers) if brokers is not None else None
    touched = sorted({(r["seq"], r["event_id"]) for r in touched_rows})
    changes: list[dict[str, Any]] = []
    previous = -1
    for index, row in enumerate(feed):
        if row["_change_type"] == "delete":
            following = feed[index + 1] if index + 1 < len(feed) else None
            upto = seqs.get(following["last_event_id"], 2**63) - 1 if following else 2**63
            upto = max([s for s, _ in touched if previous < s <= upto], default=previous)
        else:
            upto = seqs.get(row["last_event_id"], previous)
        change = {
            "version": row["_commit_version"],
            "time": datetime.fromtimestamp(row["time"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "change": {"update_postimage": "update"}.get(row["_change_type"], row["_change_type"]),
            "state": row["state"],
            "leader": row["leader"],
            "leader_epoch": row["leader_epoch"],
            "isr": list(row["isr"] or []),
        }
        if statuses is not None:
            status = statuses.at(row["_commit_version"])
            change["elr"] = list(row.get("elr") or [])
            change["last_known_elr"] = list(row.get("last_known_elr") or [])
            change["recovery"] = row.get("leader_recovery_state")
            change["replicas_not_live"] = " ".join(
                f"{r}:{status.get(r, 'unregistered')}"
                for r in row.get("replicas") or []
                if status.get(r) != "live"
            )
        change["partition_epoch"] = row["partition_epoch"]
        change["event_id"] = row["last_event_id"]
        change["events"] = [e for s, e in touched if previous < s <= upto]
        changes.append(change)
        previous = upto
    return changes


class BrokerStatuses:
    """Each broker's status as of the end of the batch that wrote a partition_state
    version: the brokers table's change feed replayed up to the version of that batch's
    cut (versions asked for in increasing order, as a history asks)."""

    def __init__(self, feed: BrokerFeed) -> None:
        self._feed = feed
        self._rows = sorted(feed.rows, key=lambda r: r["_commit_version"])
        self._next = 0
        self._status: dict[int, str] = {}

    def at(self, version: int) -> dict[int, str]:
        cut = consistent_cut(
            str(version), self._feed.partition_commits, {"brokers": self._feed.broker_commits}
        )["brokers"]
        while self._next < len(self._rows) and self._rows[self._next]["_commit_version"] <= cut:
            row = self._rows[self._next]
            if row["_change_type"] == "delete":
                self._status.pop(row["broker"], None)
            else:
                self._status[row["broker"]] = row["status"]
            self._next += 1
        return self._status


def show_history(changes: list[dict[str, Any]], out: TextIO) -> None:
    if not changes:
        out.write("no changes recorded for this partition\n")
        return
    columns = list(changes[0])
    out.write(render([{**c, "events": " ".join(c["events"])} for c in changes], columns))
