"""`kcsim show TABLE --lake DIR`: one table of the lake, read without Python code: as an
aligned table on the terminal, or as JSON lines with `--json` (one object a row, every
column, for `jq` and scripts).

TABLE is any table of the lake (`schemas.TABLES`); the ones a user reads first have short
names too: `rejected` (rejected_events), `results` (event_results), `requests`
(controller_requests), `records` (metadata_records). Rows can be filtered by `--cluster`,
`--topic`, `--partition`, `--broker` (the table's column of that name; a table without it
is an error, not an empty answer) and by event time, `--since`/`--until` (the rows' `ts`,
epoch ms, against an ISO-8601 time or epoch ms; a row without `ts` is left out when a time
is asked). Rows come in `seq` order (per cluster) where the table has one; the terminal shows `ts`
as ISO-8601 UTC, JSON as the lake holds it (epoch ms).

A local lake is read without Spark (`streaming.lake.local_reader`); a lake elsewhere, or a
table that reader does not handle, through Spark. Both print the same text.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from schemas import TABLES
from streaming.insight.lake_tables import event_time, read_table, since
from streaming.insight.state import render
from streaming.lake.spark_schemas import arrow_to_rows

if TYPE_CHECKING:
    pass

ALIASES = {
    "rejected": "rejected_events",
    "results": "event_results",
    "requests": "controller_requests",
    "records": "metadata_records",
}
FILTERS = ("cluster", "topic", "partition", "broker")
WIDEST = 80  # a cell's characters in the terminal table (--json gives every character)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "table",
        metavar="TABLE",
        choices=sorted([*TABLES, *ALIASES]),
        help="divergences, violations, rejected (rejected_events), results (event_results), "
        "requests (controller_requests), records (metadata_records), health, state_changes, "
        "or any other table of the lake",
    )
    parser.add_argument("--lake", required=True, help="Delta lake directory")
    parser.add_argument("--cluster", help="only this cluster's rows (default: every cluster)")
    parser.add_argument("--topic", help="only this topic's rows (default: every topic)")
    parser.add_argument(
        "--partition", type=int, help="only this partition's rows (default: every partition)"
    )
    parser.add_argument("--broker", type=int, help="only this broker's rows (default: every one)")
    parser.add_argument(
        "--since",
        metavar="TIME",
        help="only rows whose event time (ts) is at or after TIME: ISO-8601 or epoch ms "
        "(default: from the first)",
    )
    parser.add_argument(
        "--until",
        metavar="TIME",
        help="only rows whose event time (ts) is before TIME (default: to the last)",
    )
    parser.add_argument(
        "--limit", type=int, metavar="N", help="the first N rows only (default: every row)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="JSON lines, one object a row (default: an aligned table, long cells cut)",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master, for a lake elsewhere")


def main(args: argparse.Namespace) -> int:
    table = ALIASES.get(args.table, args.table)
    try:
        wanted = filters(args, TABLES[table].column_names)
        data = read_table(args.lake, table, args.master, getattr(args, "verbose", False))
        rows = select(arrow_to_rows(data, table), wanted, since(args.since), since(args.until))
    except ValueError as error:
        print(f"kcsim show: {error}", file=sys.stderr)
        return 2
    if args.limit is not None:
        rows = rows[: args.limit]
    write_rows(rows, TABLES[table].column_names, args.json, sys.stdout)
    return 0


def filters(args: argparse.Namespace, columns: Sequence[str]) -> dict[str, Any]:
    """The equality filters asked for; a ValueError naming one the table cannot take."""
    wanted = {name: getattr(args, name) for name in FILTERS if getattr(args, name) is not None}
    for name in wanted:
        if name not in columns:
            raise ValueError(f"{args.table} has no {name} column: drop --{name}")
    if (args.since or args.until) and "ts" not in columns:
        raise ValueError(f"{args.table} has no event time (ts): drop --since/--until")
    return wanted


def select(
    rows: list[dict[str, Any]], wanted: dict[str, Any], start: int | None, end: int | None
) -> list[dict[str, Any]]:
    """The rows matching every filter, in seq order where there is one."""
    chosen = [
        row
        for row in rows
        if all(row.get(k) == v for k, v in wanted.items())
        and (start is None or (row.get("ts") is not None and row["ts"] >= start))
        and (end is None or (row.get("ts") is not None and row["ts"] < end))
    ]
    if rows and "seq" in rows[0]:
        chosen.sort(key=lambda r: (r.get("cluster") or "", r["seq"] is None, r["seq"] or 0))
    return chosen


def write_rows(
    rows: list[dict[str, Any]], columns: Sequence[str], as_json: bool, out: TextIO
) -> None:
    if as_json:
        for row in rows:
            out.write(json.dumps({c: row.get(c) for c in columns}, default=str) + "\n")
        return
    cut = [
        {c: event_time(row[c]) if c == "ts" else _cut(row.get(c)) for c in columns} for row in rows
    ]
    out.write(render(cut, columns))
    out.write(f"({len(rows)} rows)\n")


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > WIDEST:
        return value[: WIDEST - 3] + "..."
    return value
