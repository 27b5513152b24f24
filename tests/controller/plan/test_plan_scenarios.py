"""The planner on small clusters: exact per-step figures and partition names (ZooKeeper
mode, SPEC §8 broker startup and failure, §11 controlled shutdown, §14 reassignment; the
catch-up is the simulated brokers' AlterPartition, SPEC §13)."""

from __future__ import annotations

import json

import pytest

from controller.plan.search import describe_roll, propose_decommission, search_roll
from controller.plan.steps import (
    ImpossibleStep,
    PlanInputError,
    parse_event_lines,
    parse_reassignment_json,
    parse_roll,
    reassign_steps,
    reassignment_json,
    roll_steps,
)
from tests.support.plan_cases import brokers, figures, plan, tables_of, topic, view_of


def rf3() -> dict:
    return tables_of(brokers(1, 2, 3), topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, 2))


def test_rf3_min_isr_2_roll_is_safe_step_by_step() -> None:
    tables = rf3()
    run = plan(tables, roll_steps([1, 2, 3], view_of(tables)))
    # a stop takes the broker out of every ISR (3 under-replicated, at min ISR 2, none
    # under) and moves what it leads to the first live in-sync replica of the assignment
    # (§11); the start brings it back into every ISR, with no leader moving back (no
    # preferred election without an auto_rebalance_check)
    assert figures(run) == [
        ("stop 1", [], [], 3, 1, 1),  # t-0: 1 -> 2
        ("start 1", [], [], 0, 0, 1),
        ("stop 2", [], [], 3, 2, 1),  # t-0: 2 -> 1, t-1: 2 -> 3
        ("start 2", [], [], 0, 0, 1),
        ("stop 3", [], [], 3, 2, 1),  # t-1: 3 -> 2, t-2: 3 -> 1
        ("start 3", [], [], 0, 0, 1),
    ]
    assert run.safe and run.before.offline == [] and run.before.under_replicated == 0
    assert run.leaders_before == {1: 1, 2: 1, 3: 1}
    assert run.leaders_after == {1: 2, 2: 1, 3: 0}
    # the controller's requests: a stop's StopReplica, LeaderAndIsr and UpdateMetadata to
    # the three registered brokers; each counted once per recipient, with its bytes
    assert [s.output_count for s in run.steps] == [17, 13, 17, 13, 17, 13]
    assert all(s.output_bytes > 100 * s.output_count for s in run.steps)


def test_rf2_min_isr_2_roll_is_unsafe_naming_the_partitions() -> None:
    tables = tables_of(brokers(1, 2, 3), topic("a", {0: [1, 2], 1: [2, 3]}, 2))
    run = plan(tables, roll_steps([1, 2, 3], view_of(tables)))
    assert figures(run) == [
        ("stop 1", [], ["a-0"], 1, 1, 1),
        ("start 1", [], [], 0, 0, 1),
        ("stop 2", [], ["a-0", "a-1"], 2, 2, 1),
        ("start 2", [], [], 0, 0, 1),
        ("stop 3", [], ["a-1"], 1, 1, 0),  # a-1: 3 -> 2, its preferred leader again
        ("start 3", [], [], 0, 0, 0),
    ]
    assert not run.safe
    assert run.worst is not None and run.worst.label == "stop 2"
    proposal = search_roll(view_of(tables), [1, 2, 3])
    assert not proposal.exists
    assert describe_roll(proposal, [1, 2, 3])[1:] == [
        "  a-0: 2 live replicas [1, 2], min ISR 2: stopping any of them leaves it under min ISR",
        "  a-1: 2 live replicas [2, 3], min ISR 2: stopping any of them leaves it under min ISR",
    ]


def test_rf1_has_no_safe_order_and_goes_offline() -> None:
    tables = tables_of(brokers(1, 2), topic("solo", {0: [1], 1: [2]}), topic("t", {0: [1, 2]}))
    run = plan(tables, roll_steps([2, 1], view_of(tables)))
    assert [(s.label, s.offline, s.under_min_isr) for s in run.steps] == [
        ("stop 2", ["solo-1"], []),
        ("start 2", [], []),  # back: its only replica leads again
        ("stop 1", ["solo-0"], []),
        ("start 1", [], []),
    ]
    proposal = search_roll(view_of(tables), [2, 1])
    assert sorted(proposal.impossible) == [("solo", 0), ("solo", 1)]
    assert "without a leader" in proposal.impossible[("solo", 0)]


def lagging() -> dict:
    # t-0's replica on 3 out of the ISR (the leader shrank it): stopping 1 or 2 first
    # leaves one in-sync replica, under min ISR 2
    return tables_of(
        brokers(1, 2, 3),
        topic("t", {0: [1, 2, 3]}, 2),
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2]},
    )


def test_a_lagging_replica_rolled_first_makes_the_order_safe() -> None:
    tables = lagging()
    view = view_of(tables)
    run = plan(tables, roll_steps([1, 2, 3], view))
    assert [(s.label, s.under_min_isr) for s in run.steps if s.unsafe] == [("stop 1", ["t-0"])]
    proposal = search_roll(view, [1, 2, 3])
    assert (proposal.order, proposal.holds) == ([3, 1, 2], {})
    assert describe_roll(proposal, [1, 2, 3]) == ["safe order: roll:3,1,2"]
    again = plan(tables, roll_steps(proposal.order, view))
    assert again.safe
    assert [s.label for s in again.steps][:2] == ["stop 3", "start 3"]


def test_a_hold_when_no_order_suffices() -> None:
    tables = lagging()
    view = view_of(tables)
    proposal = search_roll(view, [1])  # 3 is not in the roll: only waiting mends t-0
    assert (proposal.order, proposal.holds) == ([1], {1: [("t", 0)]})
    run = plan(tables, roll_steps(proposal.order, view, "clean", proposal.holds))
    assert [(s.label, s.under_min_isr, s.under_replicated) for s in run.steps] == [
        ("hold before 1: 1 partition catch up", [], 0),
        ("stop 1", [], 1),
        ("start 1", [], 0),
    ]
    assert run.safe


def test_crash_roll_has_no_controlled_shutdown() -> None:
    tables = rf3()
    run = plan(tables, roll_steps([1], view_of(tables), "crash"))
    assert [(s.label, s.events, s.offline, s.leader_moves) for s in run.steps] == [
        ("crash 1", 1, [], 1),  # the failure elects t-0's next leader at once
        ("start 1", 1, [], 0),
    ]


def test_reassignment_runs_to_completion() -> None:
    tables = tables_of(brokers(1, 2, 3, 4), topic("t", {0: [1, 2, 3], 1: [2, 3, 4]}, 2))
    run = plan(tables, reassign_steps([("t", 0, (4, 2, 3))]))
    # completed in its step: replicas [4, 2, 3], the leader (1, removed) replaced by the
    # first in-sync target replica, 4; nothing under-replicated after
    assert figures(run) == [("move t-0 to [4, 2, 3]", [], [], 0, 1, 0)]
    assert run.steps[0].notes == []
    assert run.leaders_after == {1: 0, 2: 1, 3: 0, 4: 1}


def decommission_case() -> dict:
    return tables_of(
        brokers(1, 2, 3, 4, 5),
        topic("t", {0: [1, 2, 3], 1: [2, 1, 4], 2: [3, 4, 1], 3: [2, 3, 4]}, 2),
        {"type": "broker_failure", "broker": 5},
    )


def test_decommission_proposal_is_kafka_json_off_the_broker_and_onto_live_ones() -> None:
    tables = decommission_case()
    view = view_of(tables)
    proposal = propose_decommission(view, 1)
    assert proposal.moves == [("t", 0, (2, 3, 4)), ("t", 1, (2, 4, 3)), ("t", 2, (3, 4, 2))]
    assert proposal.leader_moves == 1  # t-0, which 1 leads
    text = json.dumps(reassignment_json(proposal.moves))
    assert json.loads(text)["partitions"][0] == {
        "topic": "t",
        "partition": 0,
        "replicas": [2, 3, 4],
        "log_dirs": ["any", "any", "any"],
    }
    assert parse_reassignment_json(text, "proposal") == proposal.moves  # Kafka's format
    assert all(5 not in replicas for _, _, replicas in proposal.moves)  # 5 is dead
    steps = reassign_steps(proposal.moves) + roll_steps([1], view)[:1]
    run = plan(tables, steps)
    assert run.safe
    assert sum(s.leader_moves for s in run.steps) == 1
    last = run.steps[-1]
    assert (last.label, last.leader_moves, last.under_replicated) == ("stop 1", 0, 0)
    assert run.replicas_after == {2: 4, 3: 4, 4: 4}  # none left on 1


def test_decommission_with_nowhere_to_go_is_bad_input() -> None:
    tables = tables_of(brokers(1, 2, 3), topic("t", {0: [1, 2, 3]}))
    with pytest.raises(PlanInputError, match=r"t-0 have nowhere to go"):
        propose_decommission(view_of(tables), 1)


# ---- bad input -------------------------------------------------------------------------


def test_roll_of_unknown_or_dead_brokers_is_refused() -> None:
    tables = tables_of(
        brokers(1, 2, 3), {"type": "broker_failure", "broker": 3}, topic("t", {0: [1, 2]})
    )
    view = view_of(tables)
    with pytest.raises(
        PlanInputError, match=r"roll: unknown brokers 7, 9 \(the state knows 1, 2, 3\)"
    ):
        parse_roll("roll:1,7,9", view)
    with pytest.raises(PlanInputError, match=r"not live: 3 \(dead\)"):
        parse_roll("roll:1,3", view)
    with pytest.raises(PlanInputError, match="broker 1 listed more than once"):
        parse_roll("roll:1,2,1", view)
    with pytest.raises(PlanInputError, match="'x' is not a broker id"):
        parse_roll("roll:1,x", view)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"version":2,"partitions":[]}', "f: version: 2 is not supported"),
        ('{"version":1}', "f: partitions: missing"),
        ('{"version":1,"partitions":{}}', "f: partitions: expected a list"),
        ('{"partitions":[{"topic":"t","partiton":0,"replicas":[1]}]}',
         "f: partitions[0].partiton: not a field of kafka-reassign-partitions' format "
         "(did you mean partition?)"),
        ('{"partitions":[{"topic":"t","partition":0}]}', r"f: partitions[0].replicas: missing"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
         r"f: partitions[0].replicas: expected a non-empty list"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}',
         r"partitions[0].replicas: a broker listed twice"),
        ('{"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}',
         r"partitions[0].partition: expected a partition number, got -1"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["any","any"]}]}',
         r"partitions[0].log_dirs: 2 entries for 1 replicas"),
        ('[1]', "expected a JSON object"),
        ("{", "f: not JSON"),
    ],
)  # fmt: skip
def test_reassignment_json_errors_name_the_field(text: str, message: str) -> None:
    with pytest.raises(PlanInputError) as raised:
        parse_reassignment_json(text, "f")
    assert message in str(raised.value)


def test_reassignment_of_unknown_partitions_and_brokers_lists_them() -> None:
    from controller.plan.steps import check_moves

    view = view_of(rf3())
    with pytest.raises(PlanInputError, match="unknown topics: nope, zz"):
        check_moves([("nope", 0, (1,)), ("zz", 0, (1,)), ("t", 0, (1,))], view, "f")
    with pytest.raises(PlanInputError, match="unknown partitions: t-7, t-9"):
        check_moves([("t", 7, (1,)), ("t", 9, (1,))], view, "f")
    with pytest.raises(PlanInputError, match="unknown broker: 8"):
        check_moves([("t", 0, (1, 2, 8))], view, "f")
    # every kind of mistake in one message, so one pass over the file fixes them all
    with pytest.raises(PlanInputError) as raised:
        check_moves([("nope", 0, (1,)), ("t", 7, (1,)), ("t", 0, (1, 9))], view, "f")
    assert str(raised.value) == (
        "f: unknown topic: nope; unknown partition: t-7; unknown broker: 9"
    )


def test_starting_a_live_broker_is_an_impossible_step() -> None:
    tables = rf3()
    steps = parse_event_lines(
        '{"type":"broker_failure","broker":1}\n{"type":"broker_startup","broker":2}\n',
        "steps.jsonl",
        "default",
        view_of(tables),
    )
    with pytest.raises(ImpossibleStep) as raised:
        plan(tables, steps)
    assert str(raised.value) == (
        "step 2 (line 2: broker_startup broker=2) is impossible: broker 2 is live: starting "
        "it would bounce a running broker; stop it in an earlier step"
    )


def test_a_reassignment_the_controller_refuses_is_an_impossible_step() -> None:
    tables = tables_of(
        brokers(1, 2, 3, 4), {"type": "broker_failure", "broker": 4}, topic("t", {0: [1, 2, 3]})
    )
    with pytest.raises(
        ImpossibleStep,
        match=r"step 1 \(move t-0 to \[4, 2, 3\]\) is impossible: the controller answers",
    ):
        plan(tables, reassign_steps([("t", 0, (4, 2, 3))]))


def test_event_steps_with_unknown_topics_are_listed_together() -> None:
    with pytest.raises(PlanInputError) as raised:
        parse_event_lines(
            '{"type":"isr_change","topic":"x","partition":0,"isr":[1]}\n'
            '{"type":"topic_creation","topic":"new","partitions":2,"replication_factor":1}\n'
            '{"type":"isr_change","topic":"new","partition":1,"isr":[1]}\n'
            '{"type":"isr_change","topic":"t","partition":5,"isr":[1]}\n',
            "s.jsonl",
            "default",
            view_of(rf3()),
        )
    assert str(raised.value) == (
        "unknown topics or partitions:\n  s.jsonl:1: topic x\n  s.jsonl:4: partition t-5"
    )
