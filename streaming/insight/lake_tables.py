"""Reading one lake table for the CLI readers (`kcsim show`, `history`, `state`'s describe
views): without Spark where the lake is local and plain (`streaming.lake.local_reader`),
else through Spark; and the times they take and print."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from streaming.lake.spark_schemas import arrow_to_rows
from streaming.lake.time_travel import timestamp

if TYPE_CHECKING:
    import pyarrow as pa


def read_table(lake: str, table: str, master: str, verbose: bool) -> pa.Table:
    """The table's latest rows, without Spark where the lake is local and plain."""
    from streaming.lake.local_reader import LakeReader, NotNative, local_root

    root = local_root(lake)
    if root is not None:
        try:
            return LakeReader(root).read(table)
        except NotNative as reason:
            print(f"kcsim: reading {table} through Spark: {reason}", file=sys.stderr)
    from streaming.lake.spark_session import build_session
    from streaming.lake.tables import Lake

    spark = build_session("kcsim-read", master, verbose=verbose)
    try:
        return Lake(spark, lake).read(table).toArrow()
    finally:
        spark.stop()


def lake_cluster(lake: str, master: str) -> str:
    """The lake's one cluster; a ValueError naming them when it holds several (or none)."""
    names = sorted(
        {
            r["cluster"]
            for r in arrow_to_rows(read_table(lake, "clusters", master, False), "clusters")
        }
    )
    if len(names) == 1:
        return str(names[0])
    if not names:
        raise ValueError("the lake holds no cluster yet")
    raise ValueError(f"the lake holds clusters {', '.join(names)}: give --cluster NAME")


def since(text: str | None) -> int | None:
    """A time of --since/--until as epoch ms."""
    if text is None:
        return None
    if text.lstrip("-").isdigit():
        return int(text)
    return round(timestamp(text) * 1000)


def event_time(ms: int | None) -> str | None:
    """An event time as the terminal shows it: ISO-8601 UTC, to the ms."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
