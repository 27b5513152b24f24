"""`kcsim state --lake DIR [--as-of VERSION|TIMESTAMP] [--cluster C]`: cluster state from the
lake, now or as it was (Delta time travel).

VERSION is a version of `partition_state` (`DESCRIBE HISTORY` lists them); every other
table is read as of the end of the same micro-batch, so the picture is consistent.

Each cluster's engine comes first (its `clusters` row). Brokers show their status (a
KRaft cluster's: live, fenced or shutting_down); partitions show the ISR with, beside it,
the ELR, the last known ELR and the leader recovery state (SPEC-KRAFT §4). The ELR
columns are left out when no cluster shown ran the KRaft engine (they are always empty
under the ZooKeeper engine).

Below the state, the counts of `divergences`, `violations` and `rejected_events` as of the
same cut: what a user checks first ("did the shadow find anything?").

`--topic T`, `--under-replicated`, `--unavailable` and `--under-min-isr` print Kafka's
describe view instead (`describe`), in the layout `kafka-topics --describe` prints.

A local lake is read without Spark (`streaming.lake.local_reader`), in about a second instead of
Spark's start-up; a lake elsewhere, or a table that reader does not handle, through Spark.
Both print the same text.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from streaming.lake.spark_schemas import arrow_to_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streaming.lake.local_reader import LakeReader

SHOWN: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("clusters", "clusters", ("cluster",)),
    ("brokers", "brokers", ("cluster", "broker")),
    ("topics", "topics", ("cluster", "topic")),
    ("partitions", "partition_state", ("cluster", "topic", "partition")),
)
# the clusters row's columns shown (the rest is the engines' own restart state)
CLUSTER_COLUMNS = ("cluster", "engine", "controller", "controller_epoch", "cluster_configs")
KRAFT_COLUMNS = ("elr", "last_known_elr")
# the result tables counted below the state
COUNTED = ("divergences", "violations", "rejected_events")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", required=True, help="Delta lake directory")
    parser.add_argument(
        "--as-of",
        help="a partition_state version, or an ISO-8601 time (default: the latest state)",
    )
    parser.add_argument("--cluster", help="only this cluster (default: every cluster)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    describe = parser.add_argument_group(
        "Kafka's describe views (kafka-topics --describe); the latest state"
    )
    describe.add_argument("--topic", help="this topic's partitions, after its topic line")
    describe.add_argument(
        "--under-replicated",
        action="store_true",
        help="partitions whose ISR is smaller than their replicas",
    )
    describe.add_argument(
        "--unavailable",
        action="store_true",
        help="partitions without a leader, or whose leader is not a live broker",
    )
    describe.add_argument(
        "--under-min-isr",
        action="store_true",
        help="partitions whose ISR is smaller than their min.insync.replicas",
    )
    describe.add_argument(
        "--min-isr",
        type=int,
        default=1,
        metavar="N",
        help="the brokers' min.insync.replicas where neither the topic nor the cluster "
        "configs set one (Kafka's default: 1)",
    )


Rows = tuple[list[dict[str, Any]], list[str]]  # a table's rows, and its columns in order
# (table, version or None for the latest, cluster or None for all, columns or None for
# all) -> its rows
TableRead = Callable[[str, int | None, str | None, Sequence[str] | None], Rows]


def main(args: argparse.Namespace) -> int:
    if args.topic or args.under_replicated or args.unavailable or args.under_min_isr:
        from streaming.insight.describe import describe

        try:
            if args.as_of:
                raise ValueError("the describe views show the latest state: drop --as-of")
            describe(args, sys.stdout)
        except ValueError as error:
            print(f"kcsim state: {error}", file=sys.stderr)
            return 2
        return 0
    try:
        if native_state(args.lake, args.as_of, args.cluster, sys.stdout):
            return 0
        from streaming.lake.spark_session import build_session

        spark = build_session("kcsim-state", args.master, verbose=getattr(args, "verbose", False))
        try:
            show_state(spark, args.lake, args.as_of, args.cluster, sys.stdout)
        finally:
            spark.stop()
    except ValueError as error:
        print(f"kcsim state: {error}", file=sys.stderr)
        return 2
    return 0


def native_state(lake_dir: str, as_of: str | None, cluster: str | None, out: TextIO) -> bool:
    """Print the state read without Spark; False (nothing printed) when the lake is not
    local or a table is not read that way (`lake_reader.NotNative`: a note on stderr)."""
    from streaming.lake.local_reader import LakeReader, NotNative, local_root

    root = local_root(lake_dir)
    if root is None:
        return False
    text = io.StringIO()  # printed whole, so a fallback half-way prints nothing twice
    try:
        show_state_native(LakeReader(root), as_of, cluster, text)
    except NotNative as reason:
        print(f"kcsim state: reading through Spark: {reason}", file=sys.stderr)
        return False
    out.write(text.getvalue())
    return True


def show_state_native(
    reader: LakeReader, as_of: str | None, cluster: str | None, out: TextIO
) -> None:
    from streaming.lake.local_reader import matching
    from streaming.lake.time_travel import consistent_cut

    versions: dict[str, int] = {}
    if as_of:
        tables = [table for _, table, _ in SHOWN] + list(COUNTED)
        histories = {table: reader.history(table) for table in tables}
        versions = consistent_cut(as_of, histories["partition_state"], histories)

    def read(
        table: str, version: int | None, cluster: str | None, columns: Sequence[str] | None
    ) -> Rows:
        names = reader.columns(table, version)
        if columns is not None:
            names = [c for c in names if c in columns]
        data = reader.read(table, version, columns=names)
        if cluster is not None:
            data = matching(data, cluster=cluster)
        return arrow_to_rows(data, table, partial=True), names

    counts = {}
    for table in COUNTED:
        data = reader.read(table, versions.get(table), columns=["cluster"])
        counts[table] = (data if cluster is None else matching(data, cluster=cluster)).num_rows
    write_state(read, {t: v for t, v in versions.items() if t not in COUNTED}, as_of, cluster, out)
    write_counts(counts, out)


def show_state(
    spark: SparkSession, lake_dir: str, as_of: str | None, cluster: str | None, out: TextIO
) -> None:
    """The state read through Spark."""
    from pyspark.sql import functions as F

    from streaming.lake.tables import Lake

    lake = Lake(spark, lake_dir)
    tables = [table for _, table, _ in SHOWN] + list(COUNTED)
    versions = lake.versions_as_of(as_of, tables) if as_of else {}

    def read(
        table: str, version: int | None, cluster: str | None, columns: Sequence[str] | None
    ) -> Rows:
        frame = lake.read(table, version)
        if columns is not None:
            frame = frame.select(*[c for c in frame.columns if c in columns])
        if cluster is not None:
            frame = frame.where(F.col("cluster") == cluster)
        return arrow_to_rows(frame.toArrow(), table, partial=True), list(frame.columns)

    counts = {}
    for table in COUNTED:
        frame = lake.read(table, versions.get(table))
        if cluster is not None:
            frame = frame.where(F.col("cluster") == cluster)
        counts[table] = frame.count()
    write_state(read, {t: v for t, v in versions.items() if t not in COUNTED}, as_of, cluster, out)
    write_counts(counts, out)


def write_counts(counts: dict[str, int], out: TextIO) -> None:
    """The result tables' counts, one line (see `kcsim show TABLE` for their rows)."""
    text = ", ".join(f"{table} {count}" for table, count in counts.items())
    out.write(f"\nresults: {text} (rows: kcsim show TABLE)\n")


def write_state(
    read: TableRead, versions: dict[str, int], as_of: str | None, cluster: str | None, out: TextIO
) -> None:
    if versions:
        cut = ", ".join(f"{t} v{v}" for t, v in versions.items())
        out.write(f"as of {as_of}: {cut}\n")
    kraft = False
    for title, table, order in SHOWN:
        wanted = CLUSTER_COLUMNS if table == "clusters" else None
        rows, columns = read(table, versions.get(table), cluster, wanted)
        rows.sort(key=lambda r: [r[k] for k in order])
        if table == "clusters":
            kraft = any(r.get("engine") == "kraft" for r in rows)
            columns = [c for c in CLUSTER_COLUMNS if c in columns]
        elif table == "partition_state":
            columns = partition_columns(columns, kraft)
        out.write(f"\n{title} ({len(rows)})\n")
        out.write(render(rows, columns))


def partition_columns(columns: Sequence[str], kraft: bool) -> list[str]:
    """partition_state's columns as shown: the ELR, last known ELR and recovery state
    right after the ISR (with a KRaft cluster shown; else no ELR columns)."""
    beside = [c for c in (*KRAFT_COLUMNS, "leader_recovery_state") if c in columns]
    if not kraft:
        beside = [c for c in beside if c not in KRAFT_COLUMNS]
    rest = [c for c in columns if c not in (*KRAFT_COLUMNS, "leader_recovery_state")]
    at = rest.index("isr") + 1 if "isr" in rest else len(rest)
    return [*rest[:at], *beside, *rest[at:]]


def render(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """A plain text table."""
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return "[" + ",".join(_cell(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}={_cell(v)}" for k, v in sorted(value.items())) + "}"
    return str(value)
