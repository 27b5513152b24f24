"""Snapshot events from kcsim's own state tables: what a shadow beside a running cluster
writes first (CONTRACT §1 `state`, `controller_epoch`), built here from a simulated one.

A `broker_startup` (with its rack) per registered broker, a `topic_creation` per topic
with its assignment, configs, the stored state of every partition that has one and
`deletion` "queued" for a topic queued for deletion, then one `controller_failover` whose
startup (SPEC §7.2) re-runs on the loaded state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Row = dict[str, Any]


def snapshot_events(
    tables: dict[str, Iterable[Row]], controller: int, controller_epoch: int
) -> list[Row]:
    events: list[Row] = []
    for row in sorted(tables["brokers"], key=lambda r: r["broker"]):
        if row["status"] != "dead":
            event = {"type": "broker_startup", "broker": row["broker"]}
            if row["rack"] is not None:
                event["rack"] = row["rack"]
            events.append(event)
    partitions: dict[str, list[Row]] = {}
    for row in tables["partition_state"]:
        partitions.setdefault(row["topic"], []).append(row)
    for topic in sorted(tables["topics"], key=lambda r: r["topic"]):
        rows = sorted(partitions.get(topic["topic"], ()), key=lambda r: r["partition"])
        event: Row = {
            "type": "topic_creation",
            "topic": topic["topic"],
            "assignment": {str(r["partition"]): r["replicas"] for r in rows},
            "state": {str(r["partition"]): stored_state(r) for r in rows if r["isr"] is not None},
        }
        if topic["configs"]:
            event["configs"] = topic["configs"]
        if topic["deletion"] is not None:  # queued or ineligible: the entry is stored
            event["deletion"] = "queued"
        events.append(event)
    events.append(
        {
            "type": "controller_failover",
            "controller": controller,
            "controller_epoch": controller_epoch,
        }
    )
    return events


def stored_state(row: Row) -> Row:
    """A partition_state row's state znode."""
    return {
        "leader": row["leader"],
        "leader_epoch": row["leader_epoch"],
        "isr": row["isr"],
        "partition_epoch": row["partition_epoch"],
        "controller_epoch": row["controller_epoch"],
        "leader_recovery_state": row["leader_recovery_state"],
    }
