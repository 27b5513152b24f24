"""The KRaft oracle checked on its own, against records SPEC-KRAFT spells out, so that the
harness mapping events to Kafka's entry points cannot drift unnoticed (the differential
test trusts it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.kraft.kraft_oracle import OracleStep, run_one

pytestmark = pytest.mark.oracle

PCR = "PartitionChangeRecord"
BRCR = "BrokerRegistrationChangeRecord"


def records(step: OracleStep) -> list[tuple[str, dict[str, Any]]]:
    assert step.error is None, step.error
    return [(r["type"], r["record"]) for r in step.records]


def partition(step: OracleStep, topic: str, p: int) -> dict[str, Any]:
    return next(x for x in step.partitions if x["topic"] == topic and x["partition"] == p)


def test_fences_one_by_one_fill_the_elr_in_order() -> None:
    """SPEC-KRAFT §8: RF 4, min ISR 3, ISR [1,2,3,4]; fencing 1, 2, 3 leaves ELR [2, 3]."""
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2, 3, 4]},
            {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2, 3, 4]}},
            {"type": "broker_failure", "brokers": [1, 2, 3]},
        ],
        {"min.insync.replicas": "3"},
    )
    assert records(steps[2]) == [
        (PCR, {"partitionId": 0, "topic": "t", "isr": [2, 3, 4], "leader": 2}),
        (BRCR, {"brokerId": 1, "brokerEpoch": 0, "fenced": 1}),
        (PCR, {"partitionId": 0, "topic": "t", "isr": [3, 4], "leader": 3,
               "eligibleLeaderReplicas": [2]}),
        (BRCR, {"brokerId": 2, "brokerEpoch": 2, "fenced": 1}),
        (PCR, {"partitionId": 0, "topic": "t", "isr": [4], "leader": 4,
               "eligibleLeaderReplicas": [2, 3]}),
        (BRCR, {"brokerId": 3, "brokerEpoch": 4, "fenced": 1}),
    ]  # fmt: skip
    state = partition(steps[2], "t", 0)
    assert (state["leader"], state["leader_epoch"], state["partition_epoch"]) == (4, 3, 3)
    assert state["elr"] == [2, 3]


def test_fencing_a_fenced_broker_writes_the_no_op_record() -> None:
    """SPEC-KRAFT §8, §25 item 7."""
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2]},
            {"type": "broker_failure", "broker": 2},
            {"type": "broker_failure", "broker": 2},
        ]
    )
    assert records(steps[2]) == [(BRCR, {"brokerId": 2, "brokerEpoch": 2, "fenced": 1})]


def test_controlled_shutdown_of_a_sole_leader_takes_leadership_at_its_start() -> None:
    """SPEC-KRAFT §9, §25 item 5: RF 1, ELR on, min ISR 1: leader -1 at once, ISR [],
    the broker in the ELR and remembered as the last known leader."""
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2]},
            {"type": "topic_creation", "topic": "t", "assignment": {"0": [1]}},
            {"type": "controlled_shutdown", "broker": 1},
        ]
    )
    assert records(steps[2]) == [
        (BRCR, {"brokerId": 1, "brokerEpoch": 0, "inControlledShutdown": 1}),
        (PCR, {"partitionId": 0, "topic": "t", "isr": [], "leader": -1,
               "eligibleLeaderReplicas": [1], "lastKnownElr": [1]}),
    ]  # fmt: skip
    assert [r["message"] for r in steps[2].results] == ["CONTROLLED_SHUTDOWN"]
    assert {b["broker"]: b["status"] for b in steps[2].brokers}[1] == "shutting_down"
    # A repeated request ends the shutdown: SHUTDOWN_NOW, the fence (SPEC-KRAFT §9 step 2).
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2]},
            {"type": "topic_creation", "topic": "t", "assignment": {"0": [1]}},
            {"type": "controlled_shutdown", "broker": 1},
            {"type": "controlled_shutdown", "broker": 1},
        ]
    )
    assert records(steps[3]) == [(BRCR, {"brokerId": 1, "brokerEpoch": 0, "fenced": 1})]
    assert [r["message"] for r in steps[3].results] == ["SHUTDOWN_NOW"]


def test_controlled_shutdown_of_a_broker_leading_nothing_fences_it_at_once() -> None:
    """SPEC-KRAFT §9, §25 item 6: no controlled-shutdown record."""
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2]},
            {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2]}},
            {"type": "controlled_shutdown", "broker": 2},
        ],
        {"min.insync.replicas": "1"},
    )
    assert records(steps[2]) == [
        (PCR, {"partitionId": 0, "topic": "t", "isr": [1]}),
        (BRCR, {"brokerId": 2, "brokerEpoch": 2, "fenced": 1}),
    ]
    assert [r["message"] for r in steps[2].results] == ["SHUTDOWN_NOW"]


def test_unclean_return_of_the_last_leader_is_an_unclean_election() -> None:
    """SPEC-KRAFT §6.1, §7, §25 items 10 and 34: the crash-restart's cleanup takes the broker
    out of the ELR (its epoch is the offset of that first cleanup record); its unfence
    elects it as the last known leader, RECOVERING, with unclean election disabled."""
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2]},
            {"type": "topic_creation", "topic": "t", "assignment": {"0": [1]}},
            {"type": "broker_failure", "broker": 1},
            {"type": "broker_startup", "broker": 1},
        ]
    )
    assert records(steps[2]) == [
        (PCR, {"partitionId": 0, "topic": "t", "isr": [], "leader": -1,
               "eligibleLeaderReplicas": [1], "lastKnownElr": [1]}),
        (BRCR, {"brokerId": 1, "brokerEpoch": 0, "fenced": 1}),
    ]  # fmt: skip
    offset = sum(len(s.records) for s in steps[:3])
    assert records(steps[3]) == [
        (PCR, {"partitionId": 0, "topic": "t", "eligibleLeaderReplicas": []}),
        ("RegisterBrokerRecord", {
            "brokerId": 1, "brokerEpoch": offset, "fenced": True, "inControlledShutdown": False}),
        (BRCR, {"brokerId": 1, "brokerEpoch": offset, "fenced": -1}),
        (PCR, {"partitionId": 0, "topic": "t", "isr": [1], "leader": 1,
               "leaderRecoveryState": 1, "lastKnownElr": []}),
    ]  # fmt: skip


def test_clean_restart_after_controlled_shutdown_keeps_the_elr() -> None:
    """SPEC-KRAFT §6.3: a restart after a shutdown it asked for is clean (no cleanup
    of the ELR); its unfence elects it from the ELR, cleanly."""
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2]},
            {"type": "topic_creation", "topic": "t", "assignment": {"0": [1]}},
            {"type": "controlled_shutdown", "broker": 1},
            {"type": "broker_failure", "broker": 1},
            {"type": "broker_startup", "broker": 1},
        ]
    )
    kinds = [t for t, _ in records(steps[4])]
    assert kinds == ["RegisterBrokerRecord", BRCR, PCR]
    assert records(steps[4])[2][1] == {
        "partitionId": 0, "topic": "t", "isr": [1], "leader": 1,
        "eligibleLeaderReplicas": [], "lastKnownElr": [],
    }  # fmt: skip


def test_cluster_min_isr_unchanged_still_writes_config_and_clear_elr() -> None:
    """SPEC-KRAFT §16, §25 item 15."""
    steps = run_one(
        [{"type": "cluster_config_change", "configs": {"min.insync.replicas": "1"}}],
        {"min.insync.replicas": "1"},
    )
    assert records(steps[0]) == [
        ("ConfigRecord", {"resourceType": 4, "resourceName": "", "name": "min.insync.replicas",
                          "value": "1"}),
        ("ClearElrRecord", {"topicName": ""}),
    ]  # fmt: skip


def test_topic_creation_with_min_isr_writes_clear_elr_before_partitions() -> None:
    """SPEC-KRAFT §11.1, §25 item 16."""
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2]},
            {"type": "topic_creation", "topic": "t", "assignment": {"0": [2, 1]},
             "configs": {"min.insync.replicas": "2"}},
        ]
    )  # fmt: skip
    assert records(steps[1]) == [
        ("TopicRecord", {"name": "t", "topic": "t"}),
        ("ConfigRecord", {"resourceType": 2, "resourceName": "t", "name": "min.insync.replicas",
                          "value": "2"}),
        ("ClearElrRecord", {"topicName": "t"}),
        ("PartitionRecord", {"partitionId": 0, "topic": "t", "replicas": [2, 1], "isr": [2, 1],
                             "removingReplicas": [], "addingReplicas": [], "leader": 2,
                             "leaderEpoch": 0, "partitionEpoch": 0}),
    ]  # fmt: skip


def test_alter_partition_epoch_checks() -> None:
    """SPEC-KRAFT §14.1, §25 item 28: a higher leader epoch is NOT_CONTROLLER, a lower one
    FENCED_LEADER_EPOCH; a reorder is a change (PE+1)."""
    base = [
        {"type": "broker_startup", "brokers": [1, 2, 3]},
        {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2, 3]}},
        {"type": "broker_failure", "broker": 1},
    ]
    steps = run_one(
        [
            *base,
            {"type": "isr_change", "topic": "t", "partition": 0, "isr": [2, 3], "leader_epoch": 5},
            {"type": "isr_change", "topic": "t", "partition": 0, "isr": [2, 3], "leader_epoch": 0},
            {"type": "isr_change", "topic": "t", "partition": 0, "isr": [3, 2]},
        ]
    )
    assert [r["error"] for r in steps[3].results] == ["NOT_CONTROLLER"]
    assert [r["error"] for r in steps[4].results] == ["FENCED_LEADER_EPOCH"]
    assert records(steps[5]) == [(PCR, {"partitionId": 0, "topic": "t", "isr": [3, 2]})]
    row = steps[5].results[0]
    answer = (row["error"], row["leader"], row["leader_epoch"], row["isr"], row["partition_epoch"])
    assert answer == (None, 2, 1, [3, 2], 2)


def test_reassignment_orders_replicas_target_then_sorted_removing() -> None:
    """SPEC-KRAFT §13.2, §25 item 21: replicas = target ++ sorted(removing), no epoch bump
    but PE; a cancel reverts to replicas - adding with LE+1 (§13.4)."""
    steps = run_one(
        [
            {"type": "broker_startup", "brokers": [1, 2, 3, 4, 5]},
            {"type": "topic_creation", "topic": "t", "assignment": {"0": [3, 1, 2]}},
            {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [5, 4, 1]},
            {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": None},
        ]
    )
    assert records(steps[2]) == [
        (PCR, {"partitionId": 0, "topic": "t", "replicas": [5, 4, 1, 2, 3],
               "removingReplicas": [2, 3], "addingReplicas": [4, 5]}),
    ]  # fmt: skip
    assert records(steps[3]) == [
        (PCR, {"partitionId": 0, "topic": "t", "leader": 3, "replicas": [1, 2, 3],
               "removingReplicas": [], "addingReplicas": []}),
    ]  # fmt: skip
    assert partition(steps[3], "t", 0)["leader_epoch"] == 1


def test_every_event_type_runs_without_a_harness_error() -> None:
    steps = run_one(
        [
            {"type": "broker_registration", "broker": 1, "rack": "a", "incarnation": "x"},
            {"type": "broker_registration", "broker": 1, "rack": "a", "incarnation": "x"},
            {"type": "broker_unfence", "broker": 1},
            {"type": "broker_startup", "brokers": [2, 3]},
            {"type": "topic_creation", "topic": "p", "partitions": 3, "replication_factor": 2},
            {"type": "partition_creation", "topic": "p", "assignment": {"3": [1, 2]}},
            {"type": "leader_election", "election": "preferred"},
            {"type": "auto_rebalance_check"},
            {"type": "unclean_election_check"},
            {"type": "topic_config_change", "topic": "p", "configs": {"min.insync.replicas": "2"}},
            {"type": "feature_update", "features": {"eligible.leader.replicas.version": 0}},
            {"type": "feature_update", "features": {"eligible.leader.replicas.version": 1}},
            {"type": "controller_failover", "controller": 3000, "failed_brokers": [3]},
            {"type": "stop_replica_response", "topic": "p", "partition": 0, "broker": 1,
             "error": None},
            {"type": "topic_deletion", "topic": "p"},
            {"type": "broker_unregistration", "broker": 3},
        ]
    )  # fmt: skip
    assert [s.error for s in steps] == [None] * len(steps)
    # the amendment keeps the epoch and writes one RegisterBrokerRecord (§6.1 step 2)
    assert records(steps[1]) == [
        ("RegisterBrokerRecord", {"brokerId": 1, "incarnationId": "x", "brokerEpoch": 0,
                                  "rack": "a", "fenced": True, "inControlledShutdown": False}),
    ]  # fmt: skip
    # ELR on again: the FeatureLevelRecord after nothing else, the cluster min ISR exists
    assert records(steps[11]) == [
        ("FeatureLevelRecord", {"name": "eligible.leader.replicas.version", "featureLevel": 1})
    ]
    # the failover writes no record of its own; the failed broker's fence comes last
    assert {t for t, _ in records(steps[12])} <= {PCR, BRCR}
    assert records(steps[12])[-1] == (BRCR, {"brokerId": 3, "brokerEpoch": 5, "fenced": 1})
    assert [b["status"] for b in steps[12].brokers if b["broker"] == 3] == ["fenced"]
