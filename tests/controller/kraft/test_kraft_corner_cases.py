"""SPEC-KRAFT §25: one test per corner case, each citing its bullet (and the section it
follows). Records are compared type by type and field by field, in order."""

from __future__ import annotations

from controller.kraft import KRaftSettings, QuorumController
from controller.kraft.partition_change_builder import PartitionChangeBuilder
from controller.kraft.partition_registration import PartitionRegistration
from tests.support.kraft.kraft_scenario import (
    PCR,
    create,
    epoch,
    fence,
    make,
    pcr,
    records,
    state,
    unfence,
)


def test_25_01_every_change_bumps_pe_and_a_set_leader_bumps_le_even_the_same():
    """§25.1 (§3.2, §3.3): a reassignment removing a follower sets leader to the same broker."""
    qc = make(3)
    create(qc, "t", [1, 2, 3])
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [1, 2]}
    )
    assert records(out) == [pcr("t", 0, isr=[1, 2], leader=1, replicas=[1, 2])]
    assert state(qc)["le"] == 1 and state(qc)["pe"] == 1 and state(qc)["leader"] == 1


def test_25_02_isr_shrink_never_bumps_le_from_3_6_but_does_before():
    """§25.2 (§4.2 step 7)."""
    qc = make(3)
    create(qc, "t", [1, 2, 3])
    out = qc.apply({"type": "broker_failure", "broker": 3})
    assert records(out) == [pcr("t", 0, isr=[1, 2]), fence(3, 4)]
    assert state(qc)["le"] == 0 and state(qc)["pe"] == 1
    old = make(3, elr=0, mv="3.5-IV2")
    create(old, "t", [1, 2, 3])
    out = old.apply({"type": "broker_failure", "broker": 3})
    assert records(out) == [pcr("t", 0, isr=[1, 2], leader=1), fence(3, 4)]
    assert state(old)["le"] == 1


def test_25_03_a_record_carries_only_what_changed():
    """§25.3 (§3.1, §3.4): [no ELR] an RF 1 leader's fence writes leader -1 and nothing else."""
    qc = make(1, elr=0)
    create(qc, "t", [1])
    out = qc.apply({"type": "broker_failure", "broker": 1})
    assert records(out) == [pcr("t", 0, leader=-1), fence(1, 0)]
    assert "isr" not in out.records[0].fields and "leaderRecoveryState" not in out.records[0].fields


def test_25_04_nobody_where_nobody_was_writes_nothing():
    """§25.4 (§4.2 steps 3, 11)."""
    qc = make(2, elr=0)
    create(qc, "t", [1])
    qc.apply({"type": "broker_failure", "broker": 1})
    qc.apply({"type": "broker_failure", "broker": 2})
    out = qc.apply({"type": "broker_unfence", "broker": 2})
    assert records(out) == [unfence(2, 2)]


def test_25_05_controlled_shutdown_takes_leadership_at_its_start_even_with_no_successor():
    """§25.5 (§9): RF 1, [ELR] ISR [] and the broker in the ELR and LKE."""
    qc = make(1)
    create(qc, "t", [1])
    out = qc.apply({"type": "controlled_shutdown", "broker": 1})
    assert records(out) == [
        (
            "BrokerRegistrationChangeRecord",
            {"brokerId": 1, "brokerEpoch": 0, "inControlledShutdown": 1},
        ),
        pcr("t", 0, isr=[], leader=-1, elr=[1], lke=[1]),
    ]
    assert [(r.error, r.message) for r in out.results] == [(None, "CONTROLLED_SHUTDOWN")]
    assert qc.broker(1).status == "shutting_down"


def test_25_06_controlled_shutdown_of_a_broker_leading_nothing_fences_at_once():
    """§25.6 (§9)."""
    qc = make(2)
    create(qc, "t", [1, 2])
    out = qc.apply({"type": "controlled_shutdown", "broker": 2})
    assert records(out) == [pcr("t", 0, isr=[1]), fence(2, 2)]
    assert out.results[0].message == "SHUTDOWN_NOW"
    assert qc.broker(2).status == "fenced"


def test_25_07_fencing_a_fenced_broker_writes_the_no_op_fence():
    """§25.7 (§8)."""
    qc = make(3)
    create(qc, "t", [1, 2, 3])
    qc.apply({"type": "broker_failure", "broker": 3})
    out = qc.apply({"type": "broker_failure", "broker": 3})
    assert records(out) == [fence(3, 4)]
    assert out.changed_brokers == ()


def test_25_08_and_17_unfence_elects_everywhere_also_other_brokers_and_configs_elect_nothing():
    """§25.8 (§7) and §25.17 (§15.3, §16): [no ELR] a dynamically enabled unclean election
    waits; the unfence of an unrelated broker then elects broker 2 uncleanly."""
    qc = make(3, elr=0)
    create(qc, "t", [1, 2])
    qc.apply({"type": "broker_failure", "broker": 2})
    qc.apply({"type": "broker_failure", "broker": 1})
    assert state(qc)["leader"] == -1 and state(qc)["isr"] == [1]
    out = qc.apply({"type": "broker_startup", "broker": 2})
    assert [r.type for r in out.records] == [
        "RegisterBrokerRecord",
        "BrokerRegistrationChangeRecord",
    ]
    out = qc.apply(
        {
            "type": "topic_config_change",
            "topic": "t",
            "configs": {"unclean.leader.election.enable": "true"},
        }
    )
    assert records(out) == [
        (
            "ConfigRecord",
            {
                "resourceType": 2,
                "resourceName": "t",
                "name": "unclean.leader.election.enable",
                "value": "true",
            },
        )
    ]
    qc.apply({"type": "broker_failure", "broker": 3})
    out = qc.apply({"type": "broker_unfence", "broker": 3})
    assert records(out) == [unfence(3, 4), pcr("t", 0, isr=[2], leader=2, lrs=1)]
    assert out.unclean_elections == 1 and out.changes[0].unclean


def test_25_09_a_returning_broker_rejoins_isrs_only_through_alter_partition():
    """§25.9 (§7, §14)."""
    qc = make(3)
    create(qc, "t", [1, 2, 3])
    qc.apply({"type": "broker_failure", "broker": 3})
    out = qc.apply({"type": "broker_startup", "broker": 3})
    assert [r.type for r in out.records] == [
        "RegisterBrokerRecord",
        "BrokerRegistrationChangeRecord",
    ]
    assert state(qc)["isr"] == [1, 2]
    out = qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2, 3]})
    assert records(out) == [pcr("t", 0, isr=[1, 2, 3])]
    assert out.results[0].error is None and out.results[0].isr == (1, 2, 3)


def test_25_10_last_known_leader_elected_uncleanly_with_unclean_disabled():
    """§25.10 (§4.3, §6.1, §7)."""
    qc = make(1)
    create(qc, "t", [1])
    out = qc.apply({"type": "broker_failure", "broker": 1})
    assert records(out) == [pcr("t", 0, isr=[], leader=-1, elr=[1], lke=[1]), fence(1, 0)]
    out = qc.apply({"type": "broker_startup", "broker": 1})
    assert records(out) == [
        pcr("t", 0, elr=[]),
        (
            "RegisterBrokerRecord",
            {
                "brokerId": 1,
                "brokerEpoch": 6,
                "fenced": True,
                "inControlledShutdown": False,
            },
        ),
        unfence(1, 6),
        pcr("t", 0, isr=[1], leader=1, lrs=1, lke=[]),
    ]
    assert state(qc) == {
        "leader": 1,
        "le": 2,
        "pe": 3,
        "isr": [1],
        "elr": [],
        "lke": [],
        "lrs": "RECOVERING",
    }
    assert out.last_known_leader_elections == 1 and out.unclean_elections == 1


def test_25_11_a_non_empty_elr_blocks_the_last_known_leader():
    """§25.11 (§4.3, §7)."""
    qc = make(3, min_isr=2)
    create(qc, "t", [1, 2, 3])
    qc.apply({"type": "broker_failure", "broker": 1})
    qc.apply({"type": "broker_failure", "broker": 2})
    qc.apply({"type": "broker_failure", "broker": 3})
    assert state(qc)["elr"] == [2, 3] and state(qc)["lke"] == [3]
    out = qc.apply({"type": "broker_startup", "broker": 3})
    assert records(out)[0] == pcr("t", 0, elr=[2])
    assert records(out)[2:] == [unfence(3, records(out)[1][1]["brokerEpoch"])]
    assert state(qc)["leader"] == -1


def test_25_12_elr_members_are_tried_in_replica_order():
    """§25.12 (§4.3): ELR [1, 2], replicas [3, 2, 1]: 2 wins, not 1."""
    qc = make(3, min_isr=3)
    create(qc, "t", [3, 2, 1])
    assert records(qc.apply({"type": "broker_failure", "broker": 1}))[0] == pcr(
        "t", 0, isr=[3, 2], elr=[1]
    )
    assert records(qc.apply({"type": "broker_failure", "broker": 2}))[0] == pcr(
        "t", 0, isr=[3], elr=[1, 2]
    )
    for b in (1, 2):
        out = qc.apply(
            {"type": "broker_registration", "broker": b, "previous_broker_epoch": epoch(qc, b)}
        )
        assert [r.type for r in out.records] == ["RegisterBrokerRecord"]  # clean: stays in ELR
        qc.apply({"type": "broker_unfence", "broker": b})
    out = qc.apply({"type": "broker_failure", "broker": 3})
    assert records(out)[0] == pcr("t", 0, isr=[2], leader=2, elr=[1, 3])
    assert out.elr_elections == 1 and not out.changes[0].unclean


def test_25_13_elr_in_java_hash_set_order_and_a_reorder_is_a_change():
    """§25.13 (§22.2): [17, 2] stays in that order; ELR (2, 17) rewritten as [17, 2]."""
    p = PartitionRegistration((17, 2, 5), (17, 2), (), (), 17, 0, 4, 7)
    builder = PartitionChangeBuilder(p, "t", 0, lambda r: False, 27, 3, True)
    builder.target_isr = ()
    result = builder.build()
    assert result.fields["eligibleLeaderReplicas"] == [17, 2]
    q = PartitionRegistration((17, 2, 5), (), (), (), -1, 0, 4, 7, (2, 17), (17,))
    result = PartitionChangeBuilder(q, "t", 0, lambda r: False, 27, 3, True).build()
    assert result.fields == {"partitionId": 0, "topic": "t", "eligibleLeaderReplicas": [17, 2]}


def test_25_14_clear_elr_bumps_pe_where_it_clears_only():
    """§25.14 (§3.1, §19)."""
    qc = make(2, min_isr=2)
    create(qc, "a", [1, 2])
    create(qc, "b", [1, 2])
    qc.apply({"type": "isr_change", "topic": "b", "partition": 0, "isr": [1]})
    assert state(qc, "b")["elr"] == [2]
    out = qc.apply({"type": "cluster_config_change", "configs": {"min.insync.replicas": "2"}})
    assert records(out) == [
        (
            "ConfigRecord",
            {"resourceType": 4, "resourceName": "", "name": "min.insync.replicas", "value": "2"},
        ),
        ("ClearElrRecord", {"topicName": ""}),
    ]
    assert state(qc, "b")["elr"] == [] and state(qc, "b")["pe"] == 2
    assert state(qc, "a")["pe"] == 0
    assert out.changed_partitions == (("b", 0),)


def test_25_15_cluster_min_isr_set_to_its_value_still_writes_config_and_clear_elr():
    """§25.15 (§16)."""
    qc = make(1, min_isr=2)
    out = qc.apply({"type": "cluster_config_change", "configs": {"min.insync.replicas": "2"}})
    assert [r.type for r in out.records] == ["ConfigRecord", "ClearElrRecord"]


def test_25_16_topic_creation_with_min_isr_writes_clear_elr_before_partitions():
    """§25.16 (§11.1)."""
    qc = make(2)
    out = create(qc, "t", [1, 2], configs={"min.insync.replicas": "2"})
    assert records(out) == [
        ("TopicRecord", {"name": "t", "topic": "t"}),
        (
            "ConfigRecord",
            {"resourceType": 2, "resourceName": "t", "name": "min.insync.replicas", "value": "2"},
        ),
        ("ClearElrRecord", {"topicName": "t"}),
        (
            "PartitionRecord",
            {
                "partitionId": 0,
                "topic": "t",
                "replicas": [1, 2],
                "isr": [1, 2],
                "removingReplicas": [],
                "addingReplicas": [],
                "leader": 1,
                "leaderEpoch": 0,
                "partitionEpoch": 0,
            },
        ),
    ]


def test_25_18_elr_off_writes_no_clear_elr_next_build_clears_elr_lke_stays():
    """§25.18 (§17): the stale ELR member is still electable; the LKE stays."""
    qc = make(2, min_isr=2)
    create(qc, "u", [2])
    qc.apply({"type": "broker_failure", "broker": 2})
    assert state(qc, "u") == {
        "leader": -1,
        "le": 1,
        "pe": 1,
        "isr": [],
        "elr": [2],
        "lke": [2],
        "lrs": "RECOVERED",
    }
    out = qc.apply({"type": "feature_update", "features": {"eligible.leader.replicas.version": 0}})
    assert records(out) == [
        ("FeatureLevelRecord", {"name": "eligible.leader.replicas.version", "featureLevel": 0})
    ]
    out = qc.apply({"type": "broker_startup", "broker": 2})
    assert records(out)[-1] == pcr("u", 0, isr=[2], leader=2, elr=[])
    assert state(qc, "u")["lke"] == [2]


def test_25_19_unregistration_keeps_and_can_add_elr_members():
    """§25.19 (§10) and §25.42 (§6.1): a later registration of the id is unclean."""
    qc = make(3, min_isr=2)
    create(qc, "t", [1, 2, 3])
    qc.apply({"type": "broker_failure", "broker": 2})
    out = qc.apply({"type": "broker_unregistration", "broker": 3})
    assert records(out) == [
        pcr("t", 0, isr=[1], elr=[3]),
        ("UnregisterBrokerRecord", {"brokerId": 3, "brokerEpoch": 4}),
    ]
    assert qc.broker(3) is None and state(qc)["elr"] == [3]
    out = qc.apply({"type": "broker_registration", "broker": 3, "previous_broker_epoch": 4})
    assert records(out)[0] == pcr("t", 0, elr=[])


def test_25_20_clear_elr_leaves_b2e_stale_twice_written_record_and_deleted_topic_failure():
    """§25.20 (§2.3, §10)."""
    qc = make(3, min_isr=2)
    create(qc, "t", [1, 2, 3])
    qc.apply({"type": "broker_failure", "broker": 2})
    qc.apply({"type": "broker_failure", "broker": 3})
    assert state(qc)["elr"] == [3]
    qc.apply({"type": "cluster_config_change", "configs": {"min.insync.replicas": "2"}})
    assert state(qc)["elr"] == []
    qc.apply({"type": "broker_registration", "broker": 3, "previous_broker_epoch": 4})
    qc.apply({"type": "broker_unfence", "broker": 3})
    qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 3]})
    before = state(qc)["pe"]
    out = qc.apply({"type": "broker_unregistration", "broker": 3})
    twice = pcr("t", 0, isr=[1], elr=[3])
    assert records(out)[:2] == [twice, twice]
    assert state(qc)["pe"] == before + 2
    # a stale entry of a deleted topic makes the unregistration fail
    qc2 = make(3, min_isr=2)
    create(qc2, "t", [1, 2, 3])
    qc2.apply({"type": "broker_failure", "broker": 2})
    qc2.apply({"type": "broker_failure", "broker": 3})
    qc2.apply({"type": "cluster_config_change", "configs": {"min.insync.replicas": "2"}})
    qc2.apply({"type": "topic_deletion", "topic": "t"})
    out = qc2.apply({"type": "broker_unregistration", "broker": 3})
    assert out.records == () and out.results[0].error == "UNKNOWN_SERVER_ERROR"
    assert qc2.broker(3) is not None


def test_25_21_reassignment_start_orders_and_bumps_only_pe():
    """§25.21 (§13.2)."""
    qc = make(5)
    create(qc, "t", [1, 2, 3])
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [5, 4, 1]}
    )
    assert records(out) == [pcr("t", 0, replicas=[5, 4, 1, 2, 3], removing=[2, 3], adding=[4, 5])]
    assert state(qc)["le"] == 0 and state(qc)["pe"] == 1
    assert out.results[0].error is None and out.results[0].partition_epoch == 1


def test_25_22_reassignment_covered_by_the_isr_completes_in_one_record():
    """§25.22 (§13.2): a reorder."""
    qc = make(3)
    create(qc, "t", [1, 2, 3])
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [3, 2, 1]}
    )
    assert records(out) == [pcr("t", 0, replicas=[3, 2, 1])]
    assert state(qc)["le"] == 0


def test_25_23_target_equal_to_the_full_current_list_keeps_the_reassignment():
    """§25.23 (§13.2)."""
    qc = make(5)
    create(qc, "t", [1, 2, 3])
    qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [4, 5, 1]}
    )
    out = qc.apply(
        {
            "type": "partition_reassignment",
            "topic": "t",
            "partition": 0,
            "replicas": [1, 2, 3, 4, 5],
        }
    )
    assert records(out) == [pcr("t", 0, replicas=[1, 2, 3, 4, 5])]
    view = qc.partition("t", 0)
    assert view.adding_replicas == (4, 5) and view.removing_replicas == (2, 3)


def test_25_24_any_build_completes_a_reassignment():
    """§25.24 (§4.2 step 1): a fence-style build (target ISR without 3) completes."""
    p = PartitionRegistration((1, 2, 3), (1, 2, 3), (3,), (), 1, 0, 0, 1)
    builder = PartitionChangeBuilder(p, "t", 0, lambda r: r != 3, 27, 1, True)
    builder.target_isr = (1, 2)
    assert builder.build().fields == {
        "partitionId": 0,
        "topic": "t",
        "isr": [1, 2],
        "leader": 1,
        "replicas": [1, 2],
        "removingReplicas": [],
    }


def test_25_25_cancel_reverts_in_current_order_and_a_forced_member_is_not_recovering():
    """§25.25 (§13.4)."""
    qc = make(4)
    create(qc, "t", [3, 1, 2])
    qc.apply({"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [4, 1]})
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": None}
    )
    assert records(out) == [pcr("t", 0, leader=3, replicas=[1, 2, 3], removing=[], adding=[])]
    assert state(qc)["le"] == 1
    qc = make(3)
    create(qc, "t", [1], configs={"unclean.leader.election.enable": "true"})
    qc.apply({"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [2, 3]})
    qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2]})
    qc.apply({"type": "broker_failure", "broker": 1})
    assert state(qc)["isr"] == [2] and state(qc)["leader"] == 2
    qc.apply({"type": "broker_startup", "broker": 1})
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": None}
    )
    assert records(out) == [pcr("t", 0, isr=[1], leader=1, replicas=[1], removing=[], adding=[])]
    assert state(qc)["lrs"] == "RECOVERED"


def test_25_25_forced_revert_refused_without_unclean():
    """§25.25 (§13.4): the forced revert is refused unless unclean election is allowed."""
    qc = make(3)
    create(qc, "t", [1])
    qc.apply({"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [2, 3]})
    qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2]})
    qc.apply({"type": "broker_failure", "broker": 1})
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": None}
    )
    assert out.records == ()
    assert (out.results[0].topic, out.results[0].error) == ("t", "INVALID_REPLICA_ASSIGNMENT")
    assert "unclean leader election" in out.results[0].message


def test_25_26_reassignment_accepts_fenced_brokers_but_not_unregistered_ones():
    """§25.26 (§13.1)."""
    qc = make(3)
    create(qc, "t", [1, 2])
    qc.apply({"type": "broker_failure", "broker": 3})
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [1, 3]}
    )
    assert records(out) == [pcr("t", 0, replicas=[1, 3, 2], removing=[2], adding=[3])]
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [1, 9]}
    )
    assert out.records == ()
    assert out.results[0].error == "INVALID_REPLICA_ASSIGNMENT"
    assert out.results[0].message == (
        "The manual partition assignment includes broker 9, but no such broker is registered."
    )


def test_25_27_alter_partition_completing_and_moving_the_leader_answers_new_leader_elected():
    """§25.27 (§14.1)."""
    qc = make(3)
    create(qc, "t", [1, 2])
    qc.apply({"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [2, 3]})
    out = qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2, 3]})
    assert records(out) == [
        pcr("t", 0, isr=[2, 3], leader=2, replicas=[2, 3], removing=[], adding=[])
    ]
    assert out.results[0].error == "NEW_LEADER_ELECTED"


def test_25_28_alter_partition_epochs():
    """§25.28 (§14.1): above -> NOT_CONTROLLER; a lower LE -> FENCED_LEADER_EPOCH before the
    requester is checked."""
    qc = make(3)
    create(qc, "t", [1, 2, 3])
    qc.apply({"type": "broker_failure", "broker": 1})  # leader 2, LE 1
    base = {"type": "isr_change", "topic": "t", "partition": 0, "isr": [2, 3]}
    assert qc.apply({**base, "leader_epoch": 5}).results[0].error == "NOT_CONTROLLER"
    assert qc.apply({**base, "partition_epoch": 9}).results[0].error == "NOT_CONTROLLER"
    assert (
        qc.apply({**base, "leader": 1, "leader_epoch": 0}).results[0].error == "FENCED_LEADER_EPOCH"
    )
    assert qc.apply({**base, "leader": 3}).results[0].error == "INVALID_REQUEST"
    assert qc.apply({**base, "partition_epoch": 0}).results[0].error == "INVALID_UPDATE_VERSION"


def test_25_29_alter_partition_reorder_is_a_change():
    """§25.29 (§14.1)."""
    qc = make(3)
    create(qc, "t", [1, 2, 3])
    out = qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [2, 1, 3]})
    assert records(out) == [pcr("t", 0, isr=[2, 1, 3])]
    assert state(qc)["pe"] == 1


def _leaderless_with_valid_follower() -> QuorumController:
    qc = make(2)
    qc.apply({"type": "broker_failure", "broker": 1})
    stored = {
        "0": {
            "leader": -1,
            "leader_epoch": 3,
            "isr": [2],
            "partition_epoch": 5,
            "controller_epoch": 1,
        }
    }
    create(qc, "t", [1, 2], state=stored)
    return qc


def test_25_30_preferred_election_on_a_leaderless_partition_elects_a_non_preferred_replica():
    """§25.30 (§15.1)."""
    qc = _leaderless_with_valid_follower()
    out = qc.apply(
        {
            "type": "leader_election",
            "election": "preferred",
            "partitions": [{"topic": "t", "partition": 0}],
        }
    )
    assert records(out) == [pcr("t", 0, leader=2)]
    assert out.results[0].error is None and out.results[0].leader == 2


def test_25_31_unclean_election_ignores_config_and_never_moves_a_live_leader():
    """§25.31 (§15.1)."""
    qc = make(2, elr=0)
    create(qc, "t", [1, 2])
    qc.apply({"type": "broker_failure", "broker": 2})
    qc.apply({"type": "broker_failure", "broker": 1})
    qc.apply({"type": "broker_startup", "broker": 2})
    ref = [{"topic": "t", "partition": 0}]
    out = qc.apply({"type": "leader_election", "election": "unclean", "partitions": ref})
    assert records(out) == [pcr("t", 0, isr=[2], leader=2, lrs=1)]
    out = qc.apply({"type": "leader_election", "election": "unclean", "partitions": ref})
    assert out.records == () and out.results[0].error == "ELECTION_NOT_NEEDED"


def test_25_32_rebalance_has_no_ratio_and_includes_leaderless_partitions():
    """§25.32 (§15.2): a leaderless partition gets its valid non-preferred replica; a led
    one its preferred replica once that is in the ISR."""
    qc = _leaderless_with_valid_follower()
    out = qc.apply({"type": "auto_rebalance_check"})
    assert records(out) == [pcr("t", 0, leader=2)]
    qc = make(2)
    create(qc, "v", [1, 2])
    qc.apply({"type": "broker_failure", "broker": 1})
    qc.apply({"type": "broker_startup", "broker": 1})
    assert records(qc.apply({"type": "auto_rebalance_check"})) == []  # 1 is not in the ISR
    qc.apply({"type": "isr_change", "topic": "v", "partition": 0, "isr": [2, 1]})
    out = qc.apply({"type": "auto_rebalance_check"})
    assert records(out) == [pcr("v", 0, leader=1)]


def test_25_33_effective_min_isr_uses_partition_0():
    """§25.33 (§1.4): partition 1 (RF 3) under min ISR 3 uses partition 0's RF 2."""
    qc = make(3, min_isr=3)
    create(qc, "t", [1, 2], [1, 2, 3])
    out = qc.apply({"type": "broker_failure", "broker": 3})
    assert records(out) == [pcr("t", 1, isr=[1, 2]), fence(3, 4)]


def test_25_34_broker_epoch_is_the_first_record_of_the_operation_and_same_incarnation_keeps_it():
    """§25.34 (§6.1)."""
    qc = make(1)
    create(qc, "t", [1])
    qc.apply({"type": "broker_failure", "broker": 1})  # offsets 4, 5
    out = qc.apply({"type": "broker_registration", "broker": 1, "incarnation": "a"})
    assert records(out)[0] == pcr("t", 0, elr=[])  # offset 6
    assert records(out)[1][1]["brokerEpoch"] == 6 and epoch(qc, 1) == 6
    out = qc.apply({"type": "broker_registration", "broker": 1, "incarnation": "a"})
    assert records(out) == [
        (
            "RegisterBrokerRecord",
            {
                "brokerId": 1,
                "incarnationId": "a",
                "brokerEpoch": 6,
                "fenced": True,
                "inControlledShutdown": False,
            },
        )
    ]


def test_25_35_re_registration_clears_the_shutdown_flag_a_fence_does_not():
    """§25.35 (§2.1, §6.1)."""
    qc = make(2)
    create(qc, "t", [2, 1])
    qc.apply({"type": "controlled_shutdown", "broker": 2})
    qc.apply({"type": "broker_failure", "broker": 2})
    assert qc.cluster_control.registrations[2].in_controlled_shutdown
    assert qc.broker(2).status == "fenced"
    out = qc.apply({"type": "broker_registration", "broker": 2})
    assert records(out)[-1][1]["inControlledShutdown"] is False
    assert not qc.cluster_control.registrations[2].in_controlled_shutdown


def test_25_36_no_elr_never_writes_an_empty_isr():
    """§25.36 (§4.2 step 6)."""
    qc = make(2, elr=0)
    create(qc, "t", [1, 2])
    qc.apply({"type": "broker_failure", "broker": 2})
    out = qc.apply({"type": "broker_failure", "broker": 1})
    assert records(out)[0] == pcr("t", 0, leader=-1)
    assert state(qc)["isr"] == [1]


def test_25_37_leaderless_partition_with_empty_lke_whose_replicas_shrink_gets_minus_one():
    """§25.37 (§4.2 step 8)."""
    qc = make(3)
    create(qc, "t", [1, 2], configs={"unclean.leader.election.enable": "true"})
    qc.apply({"type": "broker_failure", "broker": 2})
    # unclean allowed: 1's fence finds nobody (2 fenced), ISR []
    qc.apply({"type": "broker_failure", "broker": 1})
    qc.apply({"type": "cluster_config_change", "configs": {"min.insync.replicas": "1"}})
    assert state(qc)["lke"] == [] and state(qc)["elr"] == [] and state(qc)["leader"] == -1
    qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [1, 2, 3]}
    )
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": None}
    )
    assert records(out) == [pcr("t", 0, isr=[1], leader=-1, replicas=[1, 2], adding=[], lke=[-1])]


def test_25_38_reassignment_completing_below_min_isr_puts_removed_replicas_in_elr():
    """§25.38 (§13.3)."""
    qc = make(3, min_isr=3)
    create(qc, "t", [1, 2, 3])
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [1, 2]}
    )
    assert records(out) == [pcr("t", 0, isr=[1, 2], leader=1, replicas=[1, 2], elr=[3])]


def test_25_39_placer_uses_fenced_brokers_never_first_and_skips_shutting_down():
    """§25.39 (§11.2)."""
    qc = make(3)
    qc.apply({"type": "broker_failure", "broker": 3})
    out = qc.apply(
        {"type": "topic_creation", "topic": "u", "partitions": 6, "replication_factor": 3}
    )
    assert out.results == ()
    for view in qc.partitions():
        assert view.replicas[0] != 3 and 3 in view.replicas and 3 not in view.isr
    qc = make(4)
    create(qc, "t", [4])
    qc.apply({"type": "controlled_shutdown", "broker": 4})
    qc.apply({"type": "topic_creation", "topic": "u", "partitions": 6, "replication_factor": 3})
    assert all(4 not in v.replicas for v in qc.partitions() if v.topic == "u")


def test_25_40_failover_writes_nothing_resets_shutdown_and_switches_node_configs():
    """§25.40 (§18, §2.4)."""
    qc = make(4)
    create(qc, "t", [4])
    qc.apply({"type": "controlled_shutdown", "broker": 4})
    qc.apply(
        {
            "type": "cluster_config_change",
            "broker": 7,
            "configs": {"unclean.leader.election.enable": "true"},
        }
    )
    assert not qc.configuration_control.unclean_allowed("t")
    out = qc.apply({"type": "controller_failover", "controller": 7})
    assert out.records == () and qc.controller_epoch == 2
    assert qc.configuration_control.unclean_allowed("t")
    assert 4 in [b for b, _, _ in qc.cluster_control.usable_brokers()]
    # the next wantShutDown: UNFENCED again, leads nothing -> SHUTDOWN_NOW
    out = qc.apply({"type": "controlled_shutdown", "broker": 4})
    assert [r.type for r in out.records] == ["BrokerRegistrationChangeRecord"]
    assert out.results[0].message == "SHUTDOWN_NOW"


def test_25_41_an_operations_records_are_contiguous():
    """§25.41 (§3.5, §8): brokers of one failure are fenced one operation each, in order."""
    qc = make(3, min_isr=2)
    create(qc, "t", [1, 2, 3])
    out = qc.apply({"type": "broker_failure", "brokers": [1, 2]})
    assert records(out) == [
        pcr("t", 0, isr=[2, 3], leader=2),
        fence(1, 0),
        pcr("t", 0, isr=[3], leader=3, elr=[2]),
        fence(2, 2),
    ]


def test_25_42_a_broker_with_no_registration_is_never_clean():
    """§25.42 (§6.1): the stored epoch of a missing registration is -2."""
    qc = QuorumController(KRaftSettings())
    out = qc.apply({"type": "broker_registration", "broker": 1, "previous_broker_epoch": -2})
    assert [r.type for r in out.records] == ["RegisterBrokerRecord"]
    assert qc.broker(1).status == "fenced"
    assert PCR == "PartitionChangeRecord"
