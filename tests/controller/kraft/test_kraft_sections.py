"""Scenario tests following SPEC-KRAFT §4-§20, section by section (what §25's corner-case
tests do not already pin)."""

from __future__ import annotations

import json

import pytest

from controller.kraft import KRaftRejection, KRaftSettings, QuorumController
from controller.kraft.java_collections import JavaRandom
from controller.kraft.partition_change_builder import Election, PartitionChangeBuilder
from controller.kraft.partition_registration import PartitionRegistration
from controller.kraft.striped_replica_placer import place
from tests.support.kraft.kraft_scenario import (
    create,
    epoch,
    fence,
    make,
    pcr,
    records,
    state,
    unfence,
)


def _p(replicas, isr, leader, elr=(), lke=(), lrs=0, removing=(), adding=()):
    return PartitionRegistration(
        tuple(replicas),
        tuple(isr),
        tuple(removing),
        tuple(adding),
        leader,
        lrs,
        3,
        7,
        tuple(elr),
        tuple(lke),
    )


def _build(p, active, *, isr=None, election=Election.ONLINE, min_isr=1, elr=True, mv=27, **targets):
    b = PartitionChangeBuilder(p, "t", 0, lambda r: r in active, mv, min_isr, elr)
    if isr is not None:
        b.target_isr = tuple(isr)
    b.election = election
    for k, v in targets.items():
        setattr(b, k, v)
    return b.build()


# -- §4: PartitionChangeBuilder ----------------------------------------------------------


def test_s4_4_outcomes_table():
    """§4.4: the outcomes worth knowing by heart."""
    f = _build(_p([1, 2, 3], [1, 2, 3], 1), {1, 2}, isr=[1, 2], min_isr=2).fields
    assert f == {"partitionId": 0, "topic": "t", "isr": [1, 2]}
    f = _build(_p([1, 2, 3], [1, 2], 1), {1}, isr=[1], min_isr=2).fields
    assert f["isr"] == [1] and f["eligibleLeaderReplicas"] == [2] and "leader" not in f
    f = _build(_p([1, 2, 3], [1, 2, 3], 1), {2, 3}, isr=[2, 3]).fields
    assert f == {"partitionId": 0, "topic": "t", "isr": [2, 3], "leader": 2}
    f = _build(_p([1], [1], 1), set(), isr=[], elr=False).fields
    assert f == {"partitionId": 0, "topic": "t", "leader": -1}
    f = _build(_p([1, 2], [1], 1), set(), isr=[], min_isr=2).fields
    assert f == {
        "partitionId": 0,
        "topic": "t",
        "isr": [],
        "leader": -1,
        "eligibleLeaderReplicas": [1],
        "lastKnownElr": [1],
    }
    r = _build(_p([1, 2], [1], 1), {2}, isr=[], election=Election.UNCLEAN, min_isr=2)
    assert r.unclean
    assert r.fields == {
        "partitionId": 0,
        "topic": "t",
        "isr": [2],
        "leader": 2,
        "leaderRecoveryState": 1,
    }
    r = _build(_p([1, 2, 3], [], -1, elr=[2, 3], lke=[1]), {3}, min_isr=2)
    assert r.fields == {
        "partitionId": 0,
        "topic": "t",
        "isr": [3],
        "leader": 3,
        "eligibleLeaderReplicas": [2],
        "lastKnownElr": [],
    }
    assert r.elr_election and not r.unclean
    r = _build(_p([1, 2], [], -1, lke=[2]), {2}, min_isr=2)
    assert r.fields == {
        "partitionId": 0,
        "topic": "t",
        "isr": [2],
        "leader": 2,
        "leaderRecoveryState": 1,
        "lastKnownElr": [],
    }
    assert r.unclean and r.lke_election


def test_s4_3_preferred_keeps_a_valid_leader_when_the_preferred_cannot_lead():
    """§4.3: PREFERRED falls back to P.leader: no record."""
    assert _build(_p([1, 2], [1, 2], 2), {2}, election=Election.PREFERRED).fields is None
    assert _build(_p([1, 2], [1, 2], 2), {1, 2}, election=Election.PREFERRED).fields == {
        "partitionId": 0,
        "topic": "t",
        "leader": 1,
    }


def test_s4_3_unclean_pick_is_any_acceptable_replica_in_replica_order():
    """§4.3: an UNCLEAN pick ignores ISR and ELR; RECOVERING unless already."""
    r = _build(_p([3, 2, 1], [1], -1), {2, 3}, election=Election.UNCLEAN, elr=False)
    assert r.fields == {
        "partitionId": 0,
        "topic": "t",
        "isr": [3],
        "leader": 3,
        "leaderRecoveryState": 1,
    }
    r = _build(_p([3, 2, 1], [1], -1, lrs=1), {2, 3}, election=Election.UNCLEAN, elr=False)
    assert "leaderRecoveryState" not in r.fields


def test_s4_2_step5_elr_off_writes_empty_elr_even_when_nothing_else_changes():
    """§4.2 step 5: [no ELR] a stale ELR is cleared by any build."""
    assert _build(_p([1, 2], [1, 2], 1, elr=[3]), {1, 2}, elr=False).fields == {
        "partitionId": 0,
        "topic": "t",
        "eligibleLeaderReplicas": [],
    }


def test_s4_2_step2_unclean_shutdown_replicas_leave_the_elr():
    """§4.2 step 2."""
    r = _build(
        _p([1, 2, 3], [], -1, elr=[2, 3], lke=[1]), set(), min_isr=2, unclean_shutdown_replicas=(3,)
    )
    assert r.fields == {"partitionId": 0, "topic": "t", "eligibleLeaderReplicas": [2]}


def test_s4_acceptable_non_replica_throws_as_kafka_does():
    """§4.3 / RCM.LeaderAcceptor: an acceptable last known leader that is not a replica
    makes Kafka's directory lookup throw."""
    from controller.kraft.errors import UnexpectedError

    with pytest.raises(UnexpectedError):
        _build(_p([1, 2], [], -1, lke=[9]), {9}, min_isr=2)


# -- §6: registration --------------------------------------------------------------------


def test_s6_2_registering_a_live_broker_fences_it_first():
    """§6.2 step 2.1 and §6.3: a bounce of a live broker is an unclean restart."""
    qc = make(3, min_isr=2)
    create(qc, "t", [1, 2, 3])
    out = qc.apply({"type": "broker_startup", "broker": 1})
    assert records(out)[:2] == [pcr("t", 0, isr=[2, 3], leader=2), fence(1, 0)]
    assert records(out)[2][0] == "RegisterBrokerRecord" and records(out)[2][1]["brokerEpoch"] == 10
    assert records(out)[3] == unfence(1, 10)


def test_s6_3_startup_after_a_controlled_shutdown_is_clean():
    """§6.3: clean restart keeps the broker in the ELR; a crash takes it out."""
    for shutdown, expected_elr in ((True, [1, 2]), (False, [2])):
        qc = make(2, min_isr=2)
        create(qc, "t", [1, 2])
        qc.apply({"type": "broker_failure", "broker": 2})
        if shutdown:
            qc.apply({"type": "controlled_shutdown", "broker": 1})
        qc.apply({"type": "broker_failure", "broker": 1})
        assert state(qc)["elr"] == [1, 2]
        qc.apply(
            {
                "type": "broker_registration",
                "broker": 1,
                "previous_broker_epoch": epoch(qc, 1) if shutdown else None,
            }
        )
        assert state(qc)["elr"] == expected_elr


def test_s6_1_a_refused_registration_sends_no_heartbeat():
    """§6.1, §6.3: a stale B2E entry of a deleted topic makes the unclean registration throw
    (UNKNOWN_SERVER_ERROR, no records); the broker then retries its registration and sends
    no heartbeat (core BrokerLifecycleManager.scala :430-439 heartbeats only after a
    registration succeeded), so broker_startup leaves it fenced at its old epoch."""
    qc = make(3, min_isr=2)
    create(qc, "t", [1, 2])
    qc.apply({"type": "broker_failure", "broker": 1})
    assert state(qc)["elr"] == [1]
    qc.apply({"type": "cluster_config_change", "configs": {"min.insync.replicas": "1"}})
    qc.apply({"type": "topic_deletion", "topic": "t"})
    out = qc.apply({"type": "broker_startup", "broker": 1})
    assert out.records == ()
    assert [r.error for r in out.results] == ["UNKNOWN_SERVER_ERROR"]
    assert (qc.broker(1).status, epoch(qc, 1)) == ("fenced", 0)


def test_s6_1_registration_keeps_rack_and_writes_incarnation():
    """§6.1, §3.4: a RegisterBrokerRecord's fields."""
    qc = QuorumController(KRaftSettings())
    out = qc.apply(
        {
            "type": "broker_registration",
            "broker": 5,
            "rack": "r1",
            "incarnation": "x",
            "broker_epoch": 100,
        }
    )
    assert records(out) == [
        (
            "RegisterBrokerRecord",
            {
                "brokerId": 5,
                "incarnationId": "x",
                "brokerEpoch": 100,
                "rack": "r1",
                "fenced": True,
                "inControlledShutdown": False,
            },
        )
    ]
    assert qc.broker(5).status == "fenced" and qc.broker(5).broker_epoch == 100


# -- §7, §8, §9, §10 ---------------------------------------------------------------------


def test_s7_unfence_of_a_live_broker_and_of_an_unknown_one():
    """§7: a live broker: no records; unknown: rejected."""
    qc = make(1)
    out = qc.apply({"type": "broker_unfence", "broker": 1})
    assert out.records == () and out.results[0].error is None
    with pytest.raises(KRaftRejection):
        qc.apply({"type": "broker_unfence", "broker": 9})


def test_s8_fencing_order_decides_the_elr():
    """§8: RF 4, min ISR 3, fencing 1, 2, 3 leaves ELR [2, 3]."""
    qc = make(4, min_isr=3)
    create(qc, "t", [1, 2, 3, 4])
    qc.apply({"type": "broker_failure", "brokers": [1, 2, 3]})
    assert state(qc)["elr"] == [2, 3] and state(qc)["isr"] == [4]


def test_s8_unknown_broker_rejected_before_anything_changes():
    """§8: a broker never registered is rejected."""
    qc = make(2)
    with pytest.raises(KRaftRejection):
        qc.apply({"type": "broker_failure", "brokers": [1, 7]})
    assert qc.broker(1).status == "live"


def test_s9_stale_broker_epoch_and_the_repeated_event():
    """§9 steps 1-2."""
    qc = make(2)
    create(qc, "t", [1, 2])
    out = qc.apply({"type": "controlled_shutdown", "broker": 1, "broker_epoch": 99})
    assert out.records == () and out.results[0].error == "STALE_BROKER_EPOCH"
    out = qc.apply({"type": "controlled_shutdown", "broker": 1, "broker_epoch": 0})
    assert records(out) == [
        (
            "BrokerRegistrationChangeRecord",
            {"brokerId": 1, "brokerEpoch": 0, "inControlledShutdown": 1},
        ),
        pcr("t", 0, isr=[2], leader=2),
    ]
    out = qc.apply({"type": "controlled_shutdown", "broker": 1})
    assert records(out) == [fence(1, 0)] and out.results[0].message == "SHUTDOWN_NOW"


def test_s9_shutting_down_broker_is_ineligible_for_isr():
    """§9, §14.1 check 7."""
    qc = make(3)
    create(qc, "t", [1, 2, 3])
    create(qc, "u", [3])
    qc.apply({"type": "controlled_shutdown", "broker": 3})
    out = qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2, 3]})
    assert out.results[0].error == "INELIGIBLE_REPLICA" and out.records == ()


def test_s10_unregistration_walks_the_isr_index_then_the_elr_index():
    """§10, §22.1: RCM.handleBrokerUnregistered :1385 builds over B2I(b), then over B2E(b);
    each walk in (topic, partition) order, the B2E walk after the whole B2I walk (t2's ISR
    records before t1's ELR record, though t1 sorts first)."""
    qc = make(0, min_isr=2)
    qc.apply({"type": "broker_startup", "brokers": [1, 2, 4]})
    create(qc, "t1", [4, 2, 1])
    qc.apply({"type": "partition_reassignment", "topic": "t1", "partition": 0, "replicas": [4]})
    assert state(qc, "t1")["elr"] == [1, 2]
    qc.apply({"type": "topic_creation", "topic": "t2", "partitions": 3, "replication_factor": 3})
    out = qc.apply({"type": "broker_unregistration", "broker": 1})
    assert [(t, f.get("topic"), f.get("partitionId")) for t, f in records(out)] == [
        ("PartitionChangeRecord", "t2", 0),
        ("PartitionChangeRecord", "t2", 1),
        ("PartitionChangeRecord", "t2", 2),
        ("PartitionChangeRecord", "t1", 0),
        ("UnregisterBrokerRecord", None, None),
    ]
    assert records(out)[3] == pcr("t1", 0, elr=[])


def test_s10_unregistering_twice():
    """§10: BROKER_ID_NOT_REGISTERED for an id seen before; rejected for a new one."""
    qc = make(2)
    qc.apply({"type": "broker_unregistration", "broker": 2})
    out = qc.apply({"type": "broker_unregistration", "broker": 2})
    assert out.results[0].error == "BROKER_ID_NOT_REGISTERED"
    assert out.results[0].message == "Broker ID 2 is not currently registered"
    with pytest.raises(KRaftRejection):
        qc.apply({"type": "broker_unregistration", "broker": 9})


# -- §11, §12 ----------------------------------------------------------------------------


def test_s11_1_lenient_assignment_and_its_one_refusal():
    """§11.1: replicas on unknown brokers are offline; no active replica refuses."""
    qc = make(2)
    out = create(qc, "t", [9, 2, 1])
    assert records(out)[1][1]["isr"] == [2, 1] and records(out)[1][1]["leader"] == 2
    out = create(qc, "u", [1], [7, 8])
    # CreateTopics answers per topic: the refusal names it (CreatableTopicResult.name)
    assert out.records == ()
    assert (out.results[0].topic, out.results[0].error) == ("u", "INVALID_REPLICA_ASSIGNMENT")
    assert out.results[0].message == (
        "All brokers specified in the manual partition assignment for partition 1 are fenced "
        "or in controlled shutdown."
    )
    assert create(qc, "t", [1]).results[0].error == "TOPIC_ALREADY_EXISTS"
    create(qc, "a.b", [1])
    out = create(qc, "a_b", [1])
    assert (out.results[0].error, out.results[0].message) == (
        "INVALID_TOPIC_EXCEPTION",
        "Topic 'a_b' collides with existing topic: a.b",
    )


def test_s11_2_placer_refusals():
    """§11.2: the order of the placer's refusals and its messages."""
    qc = make(2)
    out = qc.apply(
        {"type": "topic_creation", "topic": "u", "partitions": 1, "replication_factor": 3}
    )
    assert (out.results[0].topic, out.results[0].error) == ("u", "INVALID_REPLICATION_FACTOR")
    assert out.results[0].message == (
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 "
        "cannot be reached because only 2 broker(s) are registered."
    )
    qc.apply({"type": "broker_failure", "brokers": [1, 2]})
    out = qc.apply(
        {"type": "topic_creation", "topic": "u", "partitions": 1, "replication_factor": 3}
    )
    assert (
        out.results[0].message
        == "Unable to replicate the partition 3 time(s): All brokers are currently fenced."
    )
    out = qc.apply(
        {"type": "topic_creation", "topic": "u", "partitions": 0, "replication_factor": 1}
    )
    assert out.results[0].error == "INVALID_PARTITIONS"


def test_s11_3_placer_is_deterministic_striped_and_valid():
    """§11.3: seeded by the controller count; racks striped; distinct replicas."""
    usable = [(b, f"r{b % 3}", False) for b in range(1, 10)]
    a = place(JavaRandom(1), usable, 12, 3)
    assert a == place(JavaRandom(1), usable, 12, 3)
    for replicas in a:
        assert len(set(replicas)) == 3
        assert len({f"r{b % 3}" for b in replicas}) == 3
    # what Kafka 4.1.1's StripedReplicaPlacer gives with new Random(1) on these brokers
    assert a == [[6, 4, 2], [7, 5, 9], [8, 3, 1]] * 3 + [[1, 9, 2], [6, 5, 4], [8, 7, 3]]
    fenced = [(b, f"r{b % 3}", b == 5) for b in range(1, 7)]  # broker 5 fenced
    assert place(JavaRandom(2), fenced, 4, 3) == [[6, 1, 2], [4, 2, 3], [2, 6, 1], [3, 4, 2]]
    one = make(3)
    two = make(3)
    for qc in (one, two):
        qc.apply({"type": "topic_creation", "topic": "u", "partitions": 5, "replication_factor": 2})
    assert [v.replicas for v in one.partitions()] == [v.replicas for v in two.partitions()]


def test_s11_4_partition_creation():
    """§11.4: PartitionRecords of the new partitions only, ascending."""
    qc = make(2)
    create(qc, "t", [1, 2])
    out = qc.apply(
        {"type": "partition_creation", "topic": "t", "assignment": {"2": [2, 1], "1": [1]}}
    )
    assert [(t, f["partitionId"], f["leader"]) for t, f in records(out)] == [
        ("PartitionRecord", 1, 1),
        ("PartitionRecord", 2, 2),
    ]
    out = qc.apply({"type": "partition_creation", "topic": "t", "assignment": {"1": [1]}})
    # CreatePartitionsTopicResult carries the topic's name
    assert (out.results[0].topic, out.results[0].error) == ("t", "INVALID_PARTITIONS")
    # naming an existing partition is no increase, refused before any assignment is looked
    # at (RCM.createPartition :1840): broker 9 is unknown, yet the answer is INVALID_PARTITIONS
    out = qc.apply({"type": "partition_creation", "topic": "t", "assignment": {"2": [9], "3": [1]}})
    assert (out.results[0].topic, out.results[0].error) == ("t", "INVALID_PARTITIONS")
    assert out.records == ()


def test_s12_deletion_is_one_record_whoever_is_down():
    """§12: RemoveTopicRecord at once; re-creation starts at epoch 0; stop_replica_response
    changes nothing."""
    qc = make(3, min_isr=2)
    create(qc, "t", [1, 2, 3], configs={"retention.ms": "5"})
    qc.apply({"type": "broker_failure", "brokers": [2, 3]})
    out = qc.apply({"type": "topic_deletion", "topic": "t"})
    assert records(out) == [("RemoveTopicRecord", {"topic": "t"})]
    assert out.removed_partitions == (("t", 0),) and out.removed_topics == ("t",)
    assert qc.partition("t", 0) is None and qc.configuration_control.topic_configs("t") == {}
    out = qc.apply(
        {"type": "stop_replica_response", "topic": "t", "partition": 0, "broker": 2, "error": None}
    )
    assert out.records == () and out.results[0].error is None
    create(qc, "t", [1])
    assert state(qc)["le"] == 0 and state(qc)["pe"] == 0
    with pytest.raises(KRaftRejection):
        qc.apply({"type": "topic_deletion", "topic": "nope"})


# -- §13, §14, §15 -----------------------------------------------------------------------


def test_s13_3_alter_partition_completes_with_the_same_leader():
    """§13.3: the completing record with LE+1 and the same leader."""
    qc = make(4)
    create(qc, "t", [1, 2, 3])
    qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [1, 2, 4]}
    )
    out = qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2, 3, 4]})
    assert records(out) == [
        pcr("t", 0, isr=[1, 2, 4], leader=1, replicas=[1, 2, 4], removing=[], adding=[])
    ]
    assert out.results[0].error is None and state(qc)["le"] == 1


def test_s13_4_cancel_without_a_reassignment():
    """§13.4."""
    qc = make(2)
    create(qc, "t", [1, 2])
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": None}
    )
    assert out.results[0].error == "NO_REASSIGNMENT_IN_PROGRESS"
    out = qc.apply(
        {"type": "partition_reassignment", "topic": "t", "partition": 5, "replicas": [1]}
    )
    assert out.results[0].error == "UNKNOWN_TOPIC_OR_PARTITION"


def test_s14_validation_order():
    """§14.1 checks 6-7."""
    qc = make(3)
    create(qc, "t", [1, 2])
    base = {"type": "isr_change", "topic": "t", "partition": 0}
    assert qc.apply({**base, "isr": [1, 3]}).results[0].error == "INVALID_REQUEST"
    assert qc.apply({**base, "isr": [2]}).results[0].error == "INVALID_REQUEST"
    assert qc.apply({**base, "isr": [1, 1]}).results[0].error == "INVALID_REQUEST"
    assert (
        qc.apply({**base, "isr": [1], "leader_recovery_state": "RECOVERING"}).results[0].error
        == "INVALID_REQUEST"
    )
    out = qc.apply({**base, "isr": [1, 2], "broker_epochs": {"2": 77}})
    assert out.results[0].error == "INELIGIBLE_REPLICA"
    out = qc.apply({**base, "isr": [1, 2], "broker_epochs": {"1": 77}})
    assert out.results[0].error == "STALE_BROKER_EPOCH"
    out = qc.apply({**base, "isr": [1, 2]})
    assert out.records == () and out.results[0].error is None and out.results[0].leader == 1


def test_s14_elr_shrink_and_expansion():
    """§14.1: a shrink below min ISR writes the ELR; an expansion clears it."""
    qc = make(3, min_isr=2)
    create(qc, "t", [1, 2, 3])
    assert records(qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1]})) == [
        pcr("t", 0, isr=[1], elr=[2, 3])
    ]
    assert records(
        qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 3]})
    ) == [pcr("t", 0, isr=[1, 3], elr=[])]


def test_s20_alter_partition_ends_a_recovery():
    """§20: RECOVERING kept by clean elections; cleared only by the leader's AlterPartition."""
    qc = make(1)
    create(qc, "t", [1])
    qc.apply({"type": "broker_failure", "broker": 1})
    qc.apply({"type": "broker_startup", "broker": 1})
    assert state(qc)["lrs"] == "RECOVERING"
    out = qc.apply(
        {
            "type": "isr_change",
            "topic": "t",
            "partition": 0,
            "isr": [1],
            "leader_recovery_state": "RECOVERED",
        }
    )
    assert records(out) == [pcr("t", 0, lrs=0)]
    assert state(qc)["lrs"] == "RECOVERED"


def test_s15_1_elect_leaders_answers():
    """§15.1: unknown partitions, not needed, all partitions leaving out ELECTION_NOT_NEEDED."""
    qc = make(2)
    create(qc, "t", [1, 2])
    out = qc.apply(
        {
            "type": "leader_election",
            "election": "preferred",
            "partitions": [
                {"topic": "t", "partition": 0},
                {"topic": "t", "partition": 3},
                {"topic": "x", "partition": 0},
            ],
        }
    )
    assert [(r.error, r.message) for r in out.results] == [
        ("ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."),
        ("UNKNOWN_TOPIC_OR_PARTITION", "No such partition as t-3"),
        ("UNKNOWN_TOPIC_OR_PARTITION", "No such topic as x"),
    ]
    assert qc.apply({"type": "leader_election", "election": "preferred"}).results == ()
    qc.apply({"type": "broker_failure", "broker": 1})
    out = qc.apply({"type": "leader_election", "election": "preferred"})
    assert out.results[0].error == "PREFERRED_LEADER_NOT_AVAILABLE"


def test_s15_1_named_partitions_are_elected_topic_by_topic():
    """§15.1: one ElectLeaders request holds its partitions per topic, topics in the order
    first named (RCM.electLeaders :1530-1540): records and answers follow that order."""
    qc = make(2)
    create(qc, "a", [1, 2], [1, 2])
    create(qc, "b", [1, 2])
    qc.apply({"type": "broker_failure", "broker": 1})
    qc.apply({"type": "broker_startup", "broker": 1})
    for topic, partition in (("a", 0), ("a", 1), ("b", 0)):
        qc.apply({"type": "isr_change", "topic": topic, "partition": partition, "isr": [2, 1]})
    out = qc.apply(
        {
            "type": "leader_election",
            "election": "preferred",
            "partitions": [
                {"topic": "a", "partition": 1},
                {"topic": "b", "partition": 0},
                {"topic": "a", "partition": 0},
            ],
        }
    )
    assert [(t, f["partitionId"]) for t, f in records(out)] == [
        ("PartitionChangeRecord", 1),
        ("PartitionChangeRecord", 0),
        ("PartitionChangeRecord", 0),
    ]
    assert [f["topic"] for _, f in records(out)] == ["a", "a", "b"]
    assert [(r.topic, r.partition, r.error) for r in out.results] == [
        ("a", 1, None),
        ("a", 0, None),
        ("b", 0, None),
    ]


def test_s15_2_rebalance_disabled():
    """§15.2: with auto.leader.rebalance.enable=false the check does nothing."""
    qc = QuorumController(KRaftSettings.from_properties({"auto.leader.rebalance.enable": "false"}))
    out = qc.apply({"type": "auto_rebalance_check"})
    assert out.records == () and "false" in out.results[0].message


def test_s15_2_rebalance_cap_repeats_within_the_event():
    """§15.2: runs of at most 1000 records, repeated while capped."""
    qc = make(2)
    assignment = {str(i): [1, 2] for i in range(1200)}
    qc.apply({"type": "topic_creation", "topic": "t", "assignment": assignment})
    qc.apply({"type": "broker_failure", "broker": 1})
    qc.apply({"type": "broker_startup", "broker": 1})
    for i in range(1200):
        qc.apply({"type": "isr_change", "topic": "t", "partition": i, "isr": [2, 1]})
    out = qc.apply({"type": "auto_rebalance_check"})
    assert len(out.records) == 1200 and all(v.leader == 1 for v in qc.partitions())


def test_s15_3_periodic_unclean_election_only_where_allowed():
    """§15.3."""
    qc = make(3, elr=0)
    create(qc, "t", [1, 2])
    create(qc, "u", [1, 2])
    qc.apply({"type": "broker_failure", "brokers": [2, 1]})
    qc.apply({"type": "broker_startup", "broker": 2})
    qc.apply(
        {
            "type": "topic_config_change",
            "topic": "u",
            "configs": {"unclean.leader.election.enable": True},
        }
    )
    out = qc.apply({"type": "unclean_election_check"})
    assert records(out) == [pcr("u", 0, isr=[2], leader=2, lrs=1)]
    assert state(qc, "t")["leader"] == -1


# -- §16, §17, §18 -----------------------------------------------------------------------


def test_s16_topic_config_writes_only_changes_and_node_min_isr_is_refused():
    """§16."""
    qc = make(1, min_isr=2)
    create(qc, "t", [1])
    out = qc.apply(
        {"type": "topic_config_change", "topic": "t", "configs": {"min.insync.replicas": "1"}}
    )
    assert [r.type for r in out.records] == ["ConfigRecord", "ClearElrRecord"]
    out = qc.apply(
        {"type": "topic_config_change", "topic": "t", "configs": {"min.insync.replicas": "1"}}
    )
    assert out.records == ()
    out = qc.apply(
        {"type": "cluster_config_change", "broker": 1, "configs": {"min.insync.replicas": "1"}}
    )
    assert out.records == () and out.results[0].error == "INVALID_CONFIG"
    with pytest.raises(KRaftRejection):
        qc.apply(
            {
                "type": "topic_config_change",
                "topic": "t",
                "configs": {"min.insync.replicas": "zero"},
            }
        )


def test_s22_3_config_records_in_java_hash_map_order_not_the_request_order():
    """§22.3, §16, §11: a resource's ConfigRecords come out in java.util.HashMap order of the
    keys (core ControllerApis.scala :746 for IncrementalAlterConfigs, RCM.computeConfigChanges
    :908 for CreateTopics): min.insync.replicas before unclean.leader.election.enable,
    whichever the event names first."""
    qc = make(2)
    both = {"unclean.leader.election.enable": "true", "min.insync.replicas": "2"}
    order = ["min.insync.replicas", "unclean.leader.election.enable"]
    out = create(qc, "t", [1, 2], configs=both)
    assert [f["name"] for t, f in records(out) if t == "ConfigRecord"] == order
    for event in (
        {
            "type": "topic_config_change",
            "topic": "t",
            "configs": {"unclean.leader.election.enable": "false", "min.insync.replicas": "1"},
        },
        {"type": "cluster_config_change", "configs": both},
    ):
        out = qc.apply(event)
        assert [f["name"] for t, f in records(out) if t == "ConfigRecord"] == order


def test_s17_turning_elr_on_writes_the_safety_records():
    """§17: cluster min ISR when missing, node-level ones deleted, then the level."""
    qc = make(1, elr=0, min_isr=2)
    qc.apply(
        {"type": "cluster_config_change", "broker": 3, "configs": {"min.insync.replicas": "1"}}
    )
    out = qc.apply({"type": "feature_update", "features": {"eligible.leader.replicas.version": 1}})
    assert records(out) == [
        (
            "ConfigRecord",
            {"resourceType": 4, "resourceName": "", "name": "min.insync.replicas", "value": "2"},
        ),
        (
            "ConfigRecord",
            {"resourceType": 4, "resourceName": "3", "name": "min.insync.replicas", "value": None},
        ),
        ("FeatureLevelRecord", {"name": "eligible.leader.replicas.version", "featureLevel": 1}),
    ]
    assert qc.elr_enabled
    out = qc.apply({"type": "feature_update", "features": {"eligible.leader.replicas.version": 2}})
    assert out.records == () and out.results[0].error == "INVALID_UPDATE_VERSION"


def test_s18_failover_fences_failed_brokers_and_reseeds_the_placer():
    """§18."""
    qc = make(3)
    create(qc, "t", [1, 2])
    out = qc.apply({"type": "controller_failover", "controller": 3000, "failed_brokers": [1]})
    assert records(out) == [pcr("t", 0, isr=[2], leader=2), fence(1, 0)]
    assert qc.controller_epoch == 2 and qc.active_controller == 3000


def _elr_walk_after_a_stale_entry(qc: QuorumController, failovers: list[int]) -> list:
    """RF 2, min.insync.replicas 2, controller 5 active. Broker 3's fence puts it in t-0's
    ELR, a min.insync.replicas change clears that ELR (B2E keeps 3 listed, §2.3), 3 returns
    to the ISR; `failovers` happen; 3 is fenced again (ELR [3], listed once more) and
    re-registers after a crash (the unclean path, §6.1). The PartitionChangeRecords of that
    registration."""
    qc.apply({"type": "controller_failover", "controller": 5})
    create(qc, "t", [3, 1])
    qc.apply({"type": "broker_failure", "broker": 3})
    assert state(qc)["elr"] == [3]
    min_isr = {"type": "topic_config_change", "topic": "t"}
    qc.apply(min_isr | {"configs": {"min.insync.replicas": "1"}})
    assert state(qc)["elr"] == []
    qc.apply({"type": "broker_registration", "broker": 3, "previous_broker_epoch": epoch(qc, 3)})
    qc.apply({"type": "broker_unfence", "broker": 3})
    qc.apply({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 3]})
    qc.apply(min_isr | {"configs": {"min.insync.replicas": "2"}})
    for controller in failovers:
        qc.apply({"type": "controller_failover", "controller": controller})
    qc.apply({"type": "broker_failure", "broker": 3})
    assert state(qc)["elr"] == [3]
    out = qc.apply({"type": "broker_registration", "broker": 3})
    return [r for r in records(out) if r[0] == "PartitionChangeRecord"]


def test_s18_a_deposed_controller_restarts_with_an_elr_index_without_stale_entries():
    """§18, §2.3, §6.1, §23.5: controller 5 is deposed (4 takes over), restarts and loads a
    snapshot, which rebuilds its broker -> ELR index from the partitions' ELRs: the stale
    entry is gone. Back in charge, its unclean-registration walk visits t-0 once. The
    controller that never restarted visits it twice: the same record twice (PE+2). A
    seeded soak against a real 4.1.1 cluster showed both (10 records for 5 partitions where
    the active controller had replayed a ClearElrRecord since its snapshot, 1 per
    partition elsewhere)."""
    once = pcr("t", 0, elr=[])
    qc = make(3, min_isr=2)
    assert _elr_walk_after_a_stale_entry(qc, [4, 5]) == [once]
    assert state(qc)["pe"] == 5
    never_restarted = make(3, min_isr=2)
    assert _elr_walk_after_a_stale_entry(never_restarted, []) == [once, once]
    assert state(never_restarted)["pe"] == 6
    # the node that took over meanwhile never restarted either: it walks the entry twice
    other = make(3, min_isr=2)
    assert _elr_walk_after_a_stale_entry(other, [4]) == [once, once]


# -- persistence and settings -----------------------------------------------------------


def test_s18_each_controllers_elr_index_survives_dump_and_restore():
    """§18, §2.3: the stale entries of the whole history's index and of each deposed
    controller's index are kept by dump()/load() and by soft_state()/restore(): a copy
    continues with the walks the original makes."""
    qc = make(3, min_isr=2)
    _elr_walk_after_a_stale_entry(qc, [4, 5])
    min_isr = {"type": "topic_config_change", "topic": "t"}
    for event in (
        {"type": "broker_unfence", "broker": 3},
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 3]},
        {"type": "controller_failover", "controller": 6},
        {"type": "controller_failover", "controller": 5},
        {"type": "broker_failure", "broker": 3},
        min_isr | {"configs": {"min.insync.replicas": "1"}},
        {"type": "broker_registration", "broker": 3, "previous_broker_epoch": epoch(qc, 3)},
        {"type": "broker_unfence", "broker": 3},
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 3]},
        min_isr | {"configs": {"min.insync.replicas": "2"}},
        {"type": "broker_failure", "broker": 3},
    ):
        qc.apply(event)
    rc = qc.replication_control
    # t-0 listed once per entry: a phantom 0 left by a removal counts as t-0 too
    assert rc.b2e_history == {3: {"t": [0, 0, 0]}}
    assert rc.b2e_nodes == {5: {3: {"t": [0, 0]}}, 4: {3: {"t": [0, 0]}}, 6: {3: {"t": [0, 0]}}}
    loaded = QuorumController.load(qc.settings, json.loads(json.dumps(qc.dump())))
    restored = QuorumController.restore(
        qc.settings,
        json.loads(json.dumps(qc.soft_state())),
        {t: qc.configuration_control.topic_configs(t) for t in rc.topics},
        [(t, pid, p) for t, parts in rc.topics.items() for pid, p in parts.items()],
    )
    walks = []
    for event in (
        {"type": "broker_registration", "broker": 3},  # 5's walk
        {"type": "controller_failover", "controller": 7},
        {"type": "broker_registration", "broker": 3, "previous_broker_epoch": 0},  # 3 in no ELR
        {"type": "broker_unfence", "broker": 3},
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 3]},
        {"type": "broker_failure", "broker": 3},
        {"type": "broker_registration", "broker": 3},  # 7's walk: the whole history's
    ):
        expected = records(qc.apply(event))
        assert records(loaded.apply(event)) == expected, event
        assert records(restored.apply(event)) == expected, event
        if event["type"] == "broker_registration" and "previous_broker_epoch" not in event:
            walks.append([r for r in expected if r[0] == "PartitionChangeRecord"])
    assert [len(w) for w in walks] == [2, 3]
    assert state(qc)["pe"] == state(restored)["pe"] == state(loaded)["pe"]


def test_dump_and_load_continue_exactly():
    """§2: dump()/load() keep the whole state of §2 (the placer's seed included): a restored
    controller continues as the original."""
    qc = make(4, min_isr=2)
    create(qc, "t", [1, 2, 3])
    qc.apply({"type": "broker_failure", "brokers": [2, 3]})
    qc.apply({"type": "cluster_config_change", "configs": {"min.insync.replicas": "2"}})
    qc.apply({"type": "controlled_shutdown", "broker": 1})
    data = json.loads(json.dumps(qc.dump()))
    copy = QuorumController.load(qc.settings, data)
    for event in (
        {"type": "topic_creation", "topic": "u", "partitions": 4, "replication_factor": 2},
        {"type": "broker_unregistration", "broker": 3},
        {"type": "broker_startup", "broker": 2},
    ):
        assert records(qc.apply(event)) == records(copy.apply(event))
    assert list(qc.partitions()) == list(copy.partitions()) and list(qc.brokers()) == list(
        copy.brokers()
    )


def test_settings_refuse_bad_values_naming_the_key():
    """§1.1, §1.2."""
    with pytest.raises(ValueError, match=r"metadata\.version"):
        KRaftSettings.from_properties({"metadata.version": "3.2-IV0"})
    with pytest.raises(ValueError, match=r"eligible\.leader\.replicas\.version"):
        KRaftSettings.from_properties({"eligible.leader.replicas.version": "2"})
    with pytest.raises(ValueError, match=r"eligible\.leader\.replicas\.version"):
        KRaftSettings.from_properties({"metadata.version": "3.9-IV0"})
    assert (
        KRaftSettings.from_properties(
            {"metadata.version": "3.9", "eligible.leader.replicas.version": "0"}
        ).metadata_version
        == "3.9-IV0"
    )
