"""`kcsim history`'s default view: a partition's changes event by event, from
`state_changes` (each transition of the partition or of one of its replicas) and
`event_results` (each answer about it), with each event's time and type
(`applied_events`). Read without Spark where the lake is local (`show.read_table`)."""

from __future__ import annotations

import json
from typing import Any, TextIO

from streaming.insight.lake_tables import event_time, read_table, since
from streaming.insight.state import render
from streaming.lake.spark_schemas import arrow_to_rows

COLUMNS = (
    "time",
    "seq",
    "event",
    "event_id",
    "what",
    "from",
    "to",
    "leader",
    "leader_epoch",
    "isr",
    "note",
)


def event_history(
    lake: str,
    cluster: str,
    topic: str,
    partition: int,
    start: str | None = None,
    end: str | None = None,
    master: str = "local[2]",
) -> list[dict[str, Any]]:
    """One dict a line (COLUMNS), in seq order; transitions before answers within an
    event, each in the order the controller wrote them."""
    key = {"cluster": cluster, "topic": topic, "partition": partition}

    def rows(table: str) -> list[dict[str, Any]]:
        found = arrow_to_rows(read_table(lake, table, master, False), table)
        return [r for r in found if all(r.get(k) == v for k, v in key.items())]

    applied = arrow_to_rows(read_table(lake, "applied_events", master, False), "applied_events")
    events = {r["event_id"]: r for r in applied if r["cluster"] == cluster}
    lines: list[tuple[int, int, int, dict[str, Any]]] = []
    for order, row in enumerate(rows("state_changes")):
        what = "partition" if row["entity"] == "partition" else f"replica {row['broker']}"
        note = row["error"] or ("unclean election" if row.get("unclean") else None)
        if row.get("ok") is False and not note:
            note = "failed"
        line = _line(row, events, what, row["from_state"], row["to_state"], note)
        lines.append((row["seq"] or 0, 0, order, line))
    for order, row in enumerate(rows("event_results")):
        note = f"{row['error']}: {row['message']}" if row["error"] else row["message"]
        lines.append((row["seq"] or 0, 1, order, _line(row, events, "answer", None, None, note)))
    lines.sort(key=lambda t: t[:3])
    first, last = since(start), since(end)
    chosen = [line for *_, line in lines]
    if first is not None or last is not None:
        chosen = [
            line
            for line in chosen
            if line["ts"] is not None
            and (first is None or line["ts"] >= first)
            and (last is None or line["ts"] < last)
        ]
    return chosen


def _line(
    row: dict[str, Any],
    events: dict[str, dict[str, Any]],
    what: str,
    before: str | None,
    after: str | None,
    note: str | None,
) -> dict[str, Any]:
    event = events.get(row["event_id"], {})
    ts = row.get("ts") if row.get("ts") is not None else event.get("ts")
    return {
        "ts": ts,
        "time": event_time(ts),
        "seq": row["seq"],
        "event": event.get("type"),
        "event_id": row["event_id"],
        "what": what,
        "from": before,
        "to": after,
        "leader": row.get("leader"),
        "leader_epoch": row.get("leader_epoch"),
        "isr": row.get("isr"),
        "note": note,
    }


def write_events(lines: list[dict[str, Any]], as_json: bool, out: TextIO) -> None:
    if as_json:
        for line in lines:
            out.write(json.dumps({k: v for k, v in line.items() if k != "time"}) + "\n")
        return
    if not lines:
        out.write("no changes recorded for this partition\n")
        return
    out.write(render(lines, COLUMNS))
