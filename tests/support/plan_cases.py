"""Small clusters for the planner's tests, built through the front door from events."""

from __future__ import annotations

import json
from typing import Any

from controller.config import Settings
from controller.plan.planner import PlanRun, run_plan
from controller.plan.state import cluster_tables, replayed_state
from controller.plan.steps import Step
from controller.plan.view import ClusterView
from controller.simulator import RawEvent

CLUSTER = "default"
PLAN_SETTINGS = Settings(simulate_brokers=True)  # the command's default for a plan


def tables_of(*events: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    raws = [RawEvent(json.dumps(e), f"case:{n}") for n, e in enumerate(events, 1)]
    replayed = replayed_state(Settings(), raws)
    assert replayed.rejected == []
    return cluster_tables(replayed.tables, CLUSTER)


def view_of(tables: dict[str, list[dict[str, Any]]]) -> ClusterView:
    return ClusterView.of_tables(CLUSTER, tables, 1)


def plan(tables: dict[str, list[dict[str, Any]]], steps: list[Step]) -> PlanRun:
    return run_plan(PLAN_SETTINGS, tables, CLUSTER, steps)


def figures(run: PlanRun) -> list[tuple[Any, ...]]:
    """Per step: label, offline, under min ISR (names), URP, leader moves, not preferred."""
    return [
        (s.label, s.offline, s.under_min_isr, s.under_replicated, s.leader_moves, s.not_preferred)
        for s in run.steps
    ]


def topic(name: str, assignment: dict[int, list[int]], min_isr: int | None = None) -> dict:
    event: dict[str, Any] = {
        "type": "topic_creation",
        "topic": name,
        "assignment": {str(p): r for p, r in assignment.items()},
    }
    if min_isr is not None:
        event["configs"] = {"min.insync.replicas": str(min_isr)}
    return event


def brokers(*ids: int) -> dict:
    return {"type": "broker_startup", "brokers": list(ids)}
