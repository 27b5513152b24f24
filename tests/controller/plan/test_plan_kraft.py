"""The planner under the kraft engine: exact per-step figures and partition names, and
where they differ from zk's (SPEC-KRAFT §9 controlled shutdown, §8 fencing, §6-§7
registration and unfence, §14 AlterPartition, §19 ELR, §13.3 reassignment completion).

A KRaft roll step: `stop B` is the controlled-shutdown heartbeat (B leaves every ISR and
its leaderships move at once, §9), then the fence that ends it (§8); `start B` is the
registration and the unfence (elections over leaderless partitions, §7), then the
catch-up: the kraft engine simulates no broker, so the planner sends the leaders'
AlterPartitions (a returning broker never rejoins an ISR by itself, §7)."""

from __future__ import annotations

import json

import pytest

from controller.parse import parse_event
from controller.plan.planner import alter_partition_event
from controller.plan.steps import parse_event_lines, reassign_steps, roll_steps
from tests.support.plan_cases import CLUSTER, brokers, figures, plan, tables_of, topic, view_of

KRAFT = "kraft"


def rf3(engine: str = KRAFT) -> dict:
    return tables_of(
        brokers(1, 2, 3),
        topic("t", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, 2),
        engine=engine,
    )


def test_kraft_rf3_min_isr_2_roll_is_safe_and_counts_records() -> None:
    tables = rf3()
    run = plan(tables, roll_steps([1, 2, 3], view_of(tables)), KRAFT)
    # the same figures as zk: the stop takes B out of all three ISRs (at min ISR 2, not
    # under) and moves what it leads; the start's catch-up restores every ISR
    assert figures(run) == [
        ("stop 1", [], [], 3, 1, 1),
        ("start 1", [], [], 0, 0, 1),
        ("stop 2", [], [], 3, 2, 1),
        ("start 2", [], [], 0, 0, 1),
        ("stop 3", [], [], 3, 2, 1),
        ("start 3", [], [], 0, 0, 1),
    ]
    assert run.safe and run.output_kind == "records"
    assert run.leaders_after == {1: 2, 2: 1, 3: 0}
    # stop: BrokerRegistrationChange (in controlled shutdown), 3 PartitionChangeRecords
    # (B out of each ISR), BrokerRegistrationChange (fenced); start: RegisterBrokerRecord,
    # BrokerRegistrationChange (unfenced), 3 PartitionChangeRecords (B back in each ISR)
    assert [(s.events, s.output_count) for s in run.steps] == [(2, 5), (4, 5)] * 3
    assert all(s.output_bytes > 30 * s.output_count for s in run.steps)


def test_kraft_rf2_min_isr_2_roll_names_the_partitions_under_min_isr() -> None:
    tables = tables_of(brokers(1, 2, 3), topic("a", {0: [1, 2], 1: [2, 3]}, 2), engine=KRAFT)
    run = plan(tables, roll_steps([1, 2, 3], view_of(tables)), KRAFT)
    assert figures(run) == [
        ("stop 1", [], ["a-0"], 1, 1, 1),
        ("start 1", [], [], 0, 0, 1),
        ("stop 2", [], ["a-0", "a-1"], 2, 2, 1),
        ("start 2", [], [], 0, 0, 1),
        ("stop 3", [], ["a-1"], 1, 1, 0),
        ("start 3", [], [], 0, 0, 0),
    ]
    assert run.worst is not None and run.worst.label == "stop 2"


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        # zk: a controlled shutdown leaves a partition with no other in-sync replica led
        # by the broker until it fails (SPEC §11)
        ("zk", [("controlled_shutdown", [], 1), ("broker_failure", ["solo-0"], 1)]),
        # kraft: the shutdown's start takes every leadership away at once; with no other
        # candidate the partition is leaderless from that moment (SPEC-KRAFT §9)
        ("kraft", [("controlled_shutdown", ["solo-0"], 2), ("broker_failure", ["solo-0"], 0)]),
    ],
)
def test_a_sole_isr_leader_loses_leadership_at_the_start_of_its_shutdown_under_kraft(
    engine: str, expected: list
) -> None:
    tables = tables_of(
        brokers(1, 2), topic("solo", {0: [1]}), topic("t", {0: [1, 2]}), engine=engine
    )
    steps = parse_event_lines(
        '{"type":"controlled_shutdown","broker":1}\n{"type":"broker_failure","broker":1}\n',
        "steps.jsonl",
        CLUSTER,
        view_of(tables),
    )
    run = plan(tables, steps, engine)
    assert [(s.label.split()[2], s.offline, s.leader_moves) for s in run.steps] == expected


def test_kraft_roll_of_an_rf1_partitions_broker_is_offline_at_its_stop() -> None:
    tables = tables_of(
        brokers(1, 2), topic("solo", {0: [1], 1: [2]}), topic("t", {0: [1, 2]}), engine=KRAFT
    )
    run = plan(tables, roll_steps([2, 1], view_of(tables)), KRAFT)
    assert [(s.label, s.offline, s.under_min_isr, s.leader_moves) for s in run.steps] == [
        ("stop 2", ["solo-1"], [], 1),
        ("start 2", [], [], 1),  # the unfence elects 2, the last ISR member, again (§7)
        ("stop 1", ["solo-0"], [], 2),  # solo-0 to none and t-0 to 2, both at once
        ("start 1", [], [], 1),
    ]


def shrunk(engine: str) -> dict:
    # RF 3, min ISR 2; the leader shrinks the ISR to itself: under kraft the two replicas
    # that left enter the ELR (SPEC-KRAFT §14, §19), under zk they are simply out
    return tables_of(
        brokers(1, 2, 3),
        topic("t", {0: [1, 2, 3]}, 2),
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [1]},
        engine=engine,
    )


def test_elr_keeps_the_partition_led_through_its_sole_isr_leaders_stop() -> None:
    kraft = shrunk(KRAFT)
    assert [(r["isr"], r["elr"]) for r in kraft["partition_state"]] == [([1], [2, 3])]
    run = plan(kraft, roll_steps([1], view_of(kraft)), KRAFT)
    # 1 leaves the ISR at the start of its shutdown; the election takes 2 from the ELR,
    # cleanly: led all along, but with one in-sync replica, under min ISR
    assert [(s.label, s.offline, s.under_min_isr, s.leader_moves) for s in run.steps] == [
        ("stop 1", [], ["t-0"], 1),
        ("start 1", [], [], 0),
    ]
    assert run.leaders_after == {1: 0, 2: 1, 3: 0}
    zk = shrunk("zk")
    run = plan(zk, roll_steps([1], view_of(zk)), "zk")
    # zk: no ELR; the sole in-sync replica's failure leaves it without a leader
    assert [(s.label, s.offline, s.under_min_isr) for s in run.steps] == [
        ("stop 1", ["t-0"], ["t-0"]),
        ("start 1", [], []),
    ]


def two_down(engine: str) -> dict:
    # RF 3, min ISR 2; 3 then 2 fail: under kraft t-0 has ISR [1] and ELR [2] (2 left the
    # ISR below min ISR, 3 did not: §8)
    return tables_of(
        brokers(1, 2, 3),
        topic("t", {0: [1, 2, 3]}, 2),
        {"type": "broker_failure", "broker": 3},
        {"type": "broker_failure", "broker": 2},
        engine=engine,
    )


@pytest.mark.parametrize(
    ("engine", "kind", "expected"),
    [
        ("zk", "clean", [("stop 1", ["t-0"], ["t-0"]), ("start 1", [], ["t-0"])]),
        ("zk", "crash", [("crash 1", ["t-0"], []), ("start 1", [], ["t-0"])]),
        # a clean stop: 1 joins the ELR; at its return the unfence elects it from the ELR
        ("kraft", "clean", [("stop 1", ["t-0"], []), ("start 1", [], ["t-0"])]),
        # a crash: the unclean registration takes 1 out of the ELR, and the ELR left ([2],
        # fenced) blocks the last-known-leader election: t-0 stays without a leader after
        # 1 is back (§6.1, §7), where zk elects 1, the sole ISR member, again
        ("kraft", "crash", [("crash 1", ["t-0"], []), ("start 1", ["t-0"], [])]),
    ],
)
def test_elr_a_crash_of_the_last_isr_member_keeps_it_offline_under_kraft(
    engine: str, kind: str, expected: list
) -> None:
    tables = two_down(engine)
    run = plan(tables, roll_steps([1], view_of(tables), kind), engine)
    assert [(s.label, s.offline, s.under_min_isr) for s in run.steps] == expected
    assert not run.safe


def test_a_broker_leading_nothing_shuts_down_at_once_under_kraft() -> None:
    # t-0's ISR is [1]: 2 and 3 lead nothing, so their controlled shutdown is answered
    # SHUTDOWN_NOW and fences them at once (§9); the stop's failure is then the
    # redundant fence of the expired session (§8), one record, not an impossible step
    tables = tables_of(
        brokers(1, 2, 3),
        topic("t", {0: [1, 2, 3]}, 1),
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [1]},
        engine=KRAFT,
    )
    run = plan(tables, roll_steps([2, 3], view_of(tables)), KRAFT)
    assert [(s.label, s.offline, s.under_replicated, s.output_count) for s in run.steps] == [
        # fenced at once (in no ISR: no PartitionChangeRecord), then the redundant fence
        ("stop 2", [], 1, 2),
        # registered and unfenced; the catch-up: 1 adds every live replica, [1, 2, 3]
        ("start 2", [], 0, 3),
        # 3 is in the ISR now but still leads nothing: SHUTDOWN_NOW, which takes it out
        # of the ISR as it fences it, then the redundant fence
        ("stop 3", [], 1, 3),
        ("start 3", [], 0, 3),
    ]


def test_kraft_reassignment_runs_to_completion_with_the_leaders_alterpartition() -> None:
    tables = tables_of(
        brokers(1, 2, 3, 4), topic("t", {0: [1, 2, 3], 1: [2, 3, 4]}, 2), engine=KRAFT
    )
    run = plan(tables, reassign_steps([("t", 0, (4, 2, 3))]), KRAFT)
    # the reassignment's record (adding 4), then 1's AlterPartition adding 4 to the ISR,
    # which completes it and moves the leadership off 1 (answered NEW_LEADER_ELECTED,
    # the record written: §13.3, §14.1)
    assert figures(run) == [("move t-0 to [4, 2, 3]", [], [], 0, 1, 0)]
    assert (run.steps[0].events, run.steps[0].output_count, run.steps[0].notes) == (2, 2, [])
    assert run.leaders_after == {1: 0, 2: 1, 3: 0, 4: 1}
    assert run.replicas_after == {2: 2, 3: 2, 4: 2}


def test_the_catch_up_goes_to_the_core_as_the_events_its_lines_parse_to() -> None:
    """The derived AlterPartitions are given parsed (`alter_partition_event`): each is the
    event its line gives, with and without the leader's recovery state."""
    for body in (
        {"type": "isr_change", "topic": "t", "partition": 2, "isr": [3, 1, 2]},
        {
            "type": "isr_change",
            "topic": "t",
            "partition": 0,
            "isr": [1, 2],
            "leader_recovery_state": "RECOVERED",
        },
    ):
        text = json.dumps({"cluster": CLUSTER, **body}, separators=(",", ":"))
        assert alter_partition_event(CLUSTER, body, text, "plan step 2") == parse_event(
            text, "plan step 2"
        )
