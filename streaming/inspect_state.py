"""`kcsim state --lake DIR [--as-of VERSION|TIMESTAMP] [--cluster C]`: cluster state from the
lake, now or as it was (Delta time travel).

VERSION is a version of `partition_state` (`DESCRIBE HISTORY` lists them); every other
table is read as of the end of the same micro-batch, so the picture is consistent.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streaming.lake import Lake
from streaming.spark_schemas import arrow_to_rows

SHOWN: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("brokers", "brokers", ("cluster", "broker")),
    ("topics", "topics", ("cluster", "topic")),
    ("partitions", "partition_state", ("cluster", "topic", "partition")),
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lake", required=True, help="Delta lake directory")
    parser.add_argument("--as-of", help="a partition_state version, or an ISO-8601 time")
    parser.add_argument("--cluster", help="only this cluster")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")


def main(args: argparse.Namespace) -> int:
    from streaming.session import build_session

    spark = build_session("kcsim-state", args.master, verbose=getattr(args, "verbose", False))
    try:
        show_state(spark, args.lake, args.as_of, args.cluster, sys.stdout)
    except ValueError as error:
        print(f"kcsim state: {error}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    return 0


def show_state(
    spark: SparkSession, lake_dir: str, as_of: str | None, cluster: str | None, out: TextIO
) -> None:
    lake = Lake(spark, lake_dir)
    tables = [table for _, table, _ in SHOWN]
    versions = lake.versions_as_of(as_of, tables) if as_of else {}
    if versions:
        cut = ", ".join(f"{t} v{v}" for t, v in versions.items())
        out.write(f"as of {as_of}: {cut}\n")
    for title, table, order in SHOWN:
        frame = lake.read(table, versions.get(table))
        if cluster is not None:
            frame = frame.where(F.col("cluster") == cluster)
        rows = sorted(arrow_to_rows(frame.toArrow(), table), key=lambda r: [r[k] for k in order])
        out.write(f"\n{title} ({len(rows)})\n")
        out.write(render(rows, [c for c in frame.columns]))


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
