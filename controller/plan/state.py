"""A cluster's present state as the state tables' rows: what the planner starts from."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.config import Settings
from controller.plan.steps import PlanInputError
from controller.simulator import RawEvent, Simulator

Row = Mapping[str, Any]

# the tables `Simulator.from_tables` rebuilds a cluster from (applied_events left out: the
# plan's own events are numbered after none, and are never duplicates of the log's)
STATE_TABLE_NAMES = ("partition_state", "replica_state", "brokers", "topics", "clusters")


@dataclass(frozen=True, slots=True)
class Replayed:
    tables: dict[str, list[dict[str, Any]]]
    events: int
    rejected: list[dict[str, Any]]  # rejected_events rows of the log


def replayed_state(settings: Settings, events: Iterable[RawEvent]) -> Replayed:
    """An event log applied through the front door; its state tables' rows after."""
    simulator = Simulator(settings, state_rows=False)
    rejected: list[dict[str, Any]] = []
    count = 0
    batch: list[RawEvent] = []
    for event in events:
        batch.append(event)
        if len(batch) == 10_000:
            count += _apply(simulator, batch, rejected)
    count += _apply(simulator, batch, rejected)
    tables = {name: list(simulator.table_rows(name)) for name in STATE_TABLE_NAMES}
    return Replayed(tables, count, rejected)


def _apply(simulator: Simulator, batch: list[RawEvent], rejected: list[dict[str, Any]]) -> int:
    if not batch:
        return 0
    output = simulator.apply(batch)
    rejected.extend(output.appends["rejected_events"])
    taken = len(batch)
    batch.clear()
    return taken


def clusters_of(tables: Mapping[str, Sequence[Row]]) -> list[str]:
    return sorted({row["cluster"] for row in tables.get("clusters", ())})


def choose_cluster(tables: Mapping[str, Sequence[Row]], wanted: str | None) -> str:
    """The cluster to plan for: `wanted`, or the only one there is."""
    names = clusters_of(tables)
    if wanted is not None:
        if wanted not in names:
            raise PlanInputError(
                f"the state has no cluster {wanted!r} (it has {', '.join(names) or 'none'})"
            )
        return wanted
    if not names:
        raise PlanInputError("the state holds no cluster (no broker or topic was ever seen)")
    if len(names) > 1:
        raise PlanInputError(
            f"the state holds {len(names)} clusters ({', '.join(names)}): choose one with --cluster"
        )
    return names[0]


def cluster_tables(
    tables: Mapping[str, Sequence[Row]], cluster: str
) -> dict[str, list[dict[str, Any]]]:
    """One cluster's rows of the state tables (copied: the planner never holds the
    caller's lists)."""
    return {
        name: [dict(row) for row in tables.get(name, ()) if row["cluster"] == cluster]
        for name in STATE_TABLE_NAMES
    }
