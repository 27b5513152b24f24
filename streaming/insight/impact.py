"""What each kind of event cost the cluster in one run, for `kcsim whatif`'s comparison
by event type (a migration preview: `--vs kcsim.engine=kraft`).

Every applied event (`applied_events`: its type and time) is charged with what followed it
until the next event of its cluster (`health`): the partitions left offline for that
long, the leader changes it made, and the unclean, ELR and last-known-leader elections it
caused (the differences of `health`'s running counts). Offline time is in
partition-seconds when every event of the cluster has a time (`ts`, milliseconds) and in
partition-events otherwise (one event is one unit, as the totals count it); the last
event of a cluster is charged nothing, there being no next event to measure to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

IMPACT_TABLES = {
    "impact_health": ("health", (
        ("cluster", pa.string()), ("seq", pa.int64()), ("offline", pa.int64()),
        ("leader_changes", pa.int64()), ("unclean_elections", pa.int64()),
        ("elr_elections", pa.int64()), ("last_known_leader_elections", pa.int64()),
    )),
    "impact_events": ("applied_events", (
        ("cluster", pa.string()), ("seq", pa.int64()), ("type", pa.string()),
        ("ts", pa.int64()),
    )),
}  # fmt: skip


@dataclass(slots=True)
class Impact:
    """One event type's charges in one run."""

    events: int = 0
    offline: float = 0.0  # partition-seconds, or partition-events without times
    leader_changes: int = 0
    unclean_elections: int = 0
    elr_elections: int = 0  # ELR and last-known-leader elections (KRaft)


@dataclass(frozen=True, slots=True)
class Impacts:
    by_type: Mapping[str, Impact]
    timed: bool  # offline is in partition-seconds (every event had a time)


def impacts(tables: Mapping[str, pa.Table]) -> Impacts:
    """Charge each applied event of a run's tables (IMPACT_TABLES) to its type."""
    health = {(row["cluster"], row["seq"]): row for row in tables["impact_health"].to_pylist()}
    events = sorted(
        tables["impact_events"].to_pylist(), key=lambda row: (row["cluster"], row["seq"])
    )
    timed = bool(events) and all(row["ts"] is not None for row in events)
    by_type: dict[str, Impact] = {}
    so_far: dict[str, tuple[int, int]] = {}  # cluster -> unclean, ELR elections so far
    for n, event in enumerate(events):
        cluster = event["cluster"]
        row = health.get((cluster, event["seq"]))
        impact = by_type.setdefault(event["type"], Impact())
        impact.events += 1
        if row is None:
            continue
        unclean = row["unclean_elections"] or 0
        elr = (row["elr_elections"] or 0) + (row["last_known_leader_elections"] or 0)
        before = so_far.get(cluster, (0, 0))
        so_far[cluster] = (unclean, elr)
        impact.unclean_elections += unclean - before[0]
        impact.elr_elections += elr - before[1]
        impact.leader_changes += row["leader_changes"] or 0
        following = events[n + 1] if n + 1 < len(events) else None
        if following is None or following["cluster"] != cluster:
            continue
        span = (following["ts"] - event["ts"]) / 1000 if timed else 1
        impact.offline += (row["offline"] or 0) * max(span, 0)
    return Impacts(dict(sorted(by_type.items())), timed)


def impact_rows(runs: Sequence[Impacts]) -> tuple[list[str], list[list[object]]]:
    """One row per event type: its count, then its offline time, leader changes, unclean
    and ELR elections, each cell every run's value in run order ("a / b"); the types
    whose charges differ between runs first."""
    unit = "partition-s" if all(run.timed for run in runs) else "partition-events"
    header = ["event type", "events", f"offline {unit}", "leader changes", "unclean",
              "ELR/LKL elections"]  # fmt: skip
    types = sorted(set().union(*(run.by_type for run in runs)))
    rows: list[tuple[bool, list[object]]] = []
    for name in types:
        charges = [run.by_type.get(name, Impact()) for run in runs]
        columns = [
            [_number(c.offline) for c in charges],
            [str(c.leader_changes) for c in charges],
            [str(c.unclean_elections) for c in charges],
            [str(c.elr_elections) for c in charges],
        ]
        row: list[object] = [name, max(c.events for c in charges)]
        row += [" / ".join(values) for values in columns]
        rows.append((any(len(set(values)) > 1 for values in columns), row))
    rows.sort(key=lambda item: not item[0])  # stable: by name within each half
    return header, [row for _, row in rows]


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"
