"""Properties of the planner on random small clusters: it never changes the state it is
given, and a roll it proposes is safe when planned again through the controller."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.config import Settings
from controller.plan.planner import run_plan
from controller.plan.search import search_roll
from controller.plan.state import cluster_tables, replayed_state
from controller.plan.steps import roll_steps
from controller.simulator import RawEvent
from tests.support.plan_cases import CLUSTER, PLAN_SETTINGS, view_of


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int], str]:
    count = draw(st.integers(3, 5))
    ids = list(range(1, count + 1))
    events: list[dict[str, Any]] = [{"type": "broker_startup", "brokers": ids}]
    for t in range(draw(st.integers(1, 3))):
        assignment = {}
        for p in range(draw(st.integers(1, 4))):
            rf = draw(st.integers(1, 3))
            assignment[str(p)] = draw(st.permutations(ids))[:rf]
        min_isr = draw(st.integers(1, 3))
        events.append(
            {
                "type": "topic_creation",
                "topic": f"t{t}",
                "assignment": assignment,
                "configs": {"min.insync.replicas": str(min_isr)},
            }
        )
        for p, replicas in assignment.items():
            if len(replicas) > 1 and draw(st.booleans()):
                # the leader (the first replica) shrinks the ISR: a lagging follower
                kept = [replicas[0], *draw(st.lists(st.sampled_from(replicas[1:]), unique=True))]
                if len(kept) < len(replicas):
                    events.append(
                        {"type": "isr_change", "topic": f"t{t}", "partition": int(p), "isr": kept}
                    )
    down = draw(st.sampled_from([None, *ids]))
    if down is not None:
        events.append({"type": "broker_failure", "broker": down})
    live = [b for b in ids if b != down]
    roll = draw(st.permutations(live))[: draw(st.integers(1, len(live)))]
    return events, roll, draw(st.sampled_from(["clean", "crash"]))


def tables_of(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    raws = [RawEvent(json.dumps(e), f"p:{n}") for n, e in enumerate(events, 1)]
    replayed = replayed_state(Settings(), raws)
    assert replayed.rejected == []
    return cluster_tables(replayed.tables, CLUSTER)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_plan_never_changes_its_input_and_a_proposed_roll_is_safe(case) -> None:
    events, roll, kind = case
    tables = tables_of(events)
    kept = copy.deepcopy(tables)
    view = view_of(tables)
    run = run_plan(PLAN_SETTINGS, tables, CLUSTER, roll_steps(roll, view, kind))
    assert tables == kept
    proposal = search_roll(view_of(tables), roll)
    assert tables == kept
    if proposal.exists:
        assert sorted(proposal.order) == sorted(roll)
        again = run_plan(
            PLAN_SETTINGS, tables, CLUSTER, roll_steps(proposal.order, view, kind, proposal.holds)
        )
        unsafe = [(s.label, s.offline, s.under_min_isr) for s in again.steps if s.unsafe]
        assert unsafe == []
        if run.safe:  # a safe roll needs nothing: the requested order, no wait
            assert (proposal.order, proposal.holds) == (list(roll), {})
    else:
        assert not run.safe  # what no order mends fails the requested order too
    assert tables == kept
