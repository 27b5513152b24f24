"""The `health` figures counted the slow way: over a cluster's whole state tables, for the
tests to hold the incremental counters (controller.health) against after every event."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Row = Mapping[str, Any]
# the columns that describe the state after the event (the others describe the event)
STATE_COLUMNS = (
    "partitions",
    "offline",
    "under_replicated",
    "at_min_isr",
    "not_preferred",
    "max_broker_imbalance",
    "live_brokers",
)


def recount(
    partitions: Iterable[Row], topics: Iterable[Row], brokers: Iterable[Row]
) -> dict[str, Any]:
    """STATE_COLUMNS from one cluster's partition_state, topics and brokers rows."""
    partitions, topics = list(partitions), list(topics)
    configs = {t["topic"]: t["configs"] or {} for t in topics}
    queued = {t["topic"] for t in topics if t["deletion"] is not None}
    led = [p for p in partitions if p["leader_epoch"] is not None]

    def min_isr(topic: str) -> int:
        return int(str(configs[topic].get("min.insync.replicas", "1")).strip())

    total: dict[int, int] = {}
    not_leading: dict[int, int] = {}
    for p in partitions:
        if p["topic"] in queued or not p["replicas"]:
            continue
        preferred = p["replicas"][0]
        total[preferred] = total.get(preferred, 0) + 1
        if p["leader_epoch"] is not None and p["leader"] != preferred:
            not_leading[preferred] = not_leading.get(preferred, 0) + 1
    return {
        "partitions": len(partitions),
        "offline": sum(
            1
            for p in partitions
            if p["topic"] not in queued
            and (p["leader_epoch"] is None or p["leader"] < 0 or p["state"] != "OnlinePartition")
        ),
        "under_replicated": sum(1 for p in led if len(p["isr"]) < len(p["replicas"])),
        "at_min_isr": sum(1 for p in led if len(p["isr"]) <= min_isr(p["topic"])),
        "not_preferred": sum(1 for p in led if 0 <= p["leader"] != p["replicas"][0]),
        "max_broker_imbalance": max(
            (not_leading.get(b, 0) / count for b, count in total.items()), default=0.0
        ),
        "live_brokers": sum(1 for b in brokers if b["status"] == "live"),
    }


def leader_changes(before: Iterable[Row], after: Iterable[Row]) -> int:
    """Partitions present after an event whose leader differs from before it (-1: none)."""
    leaders = {(p["topic"], p["partition"]): p["leader"] for p in before}
    return sum(1 for p in after if leaders.get((p["topic"], p["partition"]), -1) != p["leader"])
