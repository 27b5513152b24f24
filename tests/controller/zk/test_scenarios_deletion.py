"""Topic deletion (SPEC §15, §19.13, §19.14)."""

from __future__ import annotations

from controller.config import Settings
from tests.support.scenario import Cluster, Output, entries

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"


def stops(out: Output, delete: bool) -> list[tuple[int, bool, int]]:
    """(broker, delivered, leader_epoch) of the StopReplica requests with that delete flag."""
    found = []
    for request in out.of(SR):
        entry = entries(request)[("t", 0)]
        if entry["delete_partition"] is delete:
            found.append((request["broker"], request["delivered"], entry["leader_epoch"]))
    return found


def test_deletion_with_broker_offline() -> None:
    """§15.5 scenario 1 (TopicDeletionManagerTest.testDeletionWithBrokerOffline), §19.14:
    broker 2 down; enqueue -> live replicas Started, broker-2 replica Ineligible, topic
    ineligible; live replicas succeed -> the retry moves Ineligible -> Offline although the
    topic is still ineligible; broker 2 returns -> its replica is deleted; on success the
    topic is removed."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    c.fail(2)
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 3], 1, 1)

    out = c.delete("t")
    assert c.topic("t")["deletion"] == "ineligible"
    assert c.partition("t", 0)["state"] == "NonExistentPartition"
    assert c.replicas("t", 0) == {
        1: "ReplicaDeletionStarted",
        2: "ReplicaDeletionIneligible",
        3: "ReplicaDeletionStarted",
    }
    # the ISR removals are still written (epoch bumps), but no LeaderAndIsr is sent
    assert c.state("t", 0) == ("NonExistentPartition", -1, [3], 3, 3)
    assert out.sent() == [
        (UM, 1, True),
        (UM, 3, True),
        (SR, 1, True),
        (SR, 3, True),
        (SR, 1, True),
        (SR, 3, True),
    ]
    um = entries(out.of(UM, 1)[0])[("t", 0)]
    assert (um["leader"], um["leader_epoch"], um["partition_epoch"], um["isr"]) == (
        -2,
        0,
        0,
        [1, 3],
    )
    assert um["offline_replicas"] == [2]
    assert stops(out, delete=False) == [(1, True, -2), (3, True, -2)]
    assert stops(out, delete=True) == [(1, True, -2), (3, True, -2)]
    partition_changes = [(s["from_state"], s["to_state"]) for s in out.changes("partition")]
    assert partition_changes == [
        ("OnlinePartition", "OfflinePartition"),
        ("OfflinePartition", "NonExistentPartition"),
    ]

    out = c.stop_replica_response("t", 0, 1)
    assert c.replica("t", 0, 1) == "ReplicaDeletionSuccessful"
    assert out.requests == []

    out = c.stop_replica_response("t", 0, 3)
    assert c.replica("t", 0, 3) == "ReplicaDeletionSuccessful"
    assert c.replica("t", 0, 2) == "OfflineReplica"  # §19.14
    assert c.topic("t")["deletion"] == "ineligible"
    assert out.sent() == [(SR, 2, False)]
    assert stops(out, delete=False) == [(2, False, -2)]

    out = c.start(2)
    assert c.replica("t", 0, 2) == "ReplicaDeletionStarted"
    assert c.topic("t")["deletion"] == "queued"
    assert stops(out, delete=True) == [(2, True, -2)]
    # the queued topic is left out of the new broker's full UpdateMetadata (§8.2 step 3)
    assert out.of(UM, 2)[0]["partitions"] == []

    c.stop_replica_response("t", 0, 2)
    assert c.topic("t") is None
    assert c.partition("t", 0) is None
    assert c.replicas("t", 0) == {}


def test_broker_failure_after_deletion_started() -> None:
    """§15.5 scenario 2 (TopicDeletionManagerTest.testBrokerFailureAfterDeletionStarted):
    all Started; broker 2 fails -> its replica Ineligible, topic ineligible. Through the full
    controller, broker 2's return first moves its replica Online (onBrokerStartup step 4:
    Ineligible -> Online is valid), then clears the ineligibility; once the others succeed
    the remaining replica is restarted (Offline -> Started) and the topic completes."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    out = c.delete("t")
    assert c.topic("t")["deletion"] == "queued"
    assert set(c.replicas("t", 0).values()) == {"ReplicaDeletionStarted"}
    # broker 1 (leader) removed first: leader -1, then 2, then 3 kept as the last member
    assert c.state("t", 0) == ("NonExistentPartition", -1, [3], 3, 3)
    assert stops(out, delete=False) == [(1, True, -2), (2, True, -2), (3, True, -2)]

    out = c.fail(2)
    assert c.replica("t", 0, 2) == "ReplicaDeletionIneligible"
    assert c.topic("t")["deletion"] == "ineligible"
    # §9.1 step 7: nothing not-for-deletion went offline -> broker-only UpdateMetadata
    assert out.sent() == [(UM, 1, True), (UM, 3, True)]
    assert all(r["partitions"] == [] for r in out.requests)

    c.start(2)
    assert c.topic("t")["deletion"] == "queued"
    assert c.replica("t", 0, 2) == "OnlineReplica"
    assert c.replica("t", 0, 1) == "ReplicaDeletionStarted"

    c.stop_replica_response("t", 0, 1)
    out = c.stop_replica_response("t", 0, 3)
    assert c.replica("t", 0, 2) == "ReplicaDeletionStarted"
    assert stops(out, delete=True) == [(2, True, -2)]
    c.stop_replica_response("t", 0, 2)
    assert c.topic("t") is None


def test_failed_stop_replica_response_makes_topic_ineligible() -> None:
    """§15.4: an error -> ReplicaDeletionIneligible and the topic halted; retried (Offline ->
    Started) once no replica is Started any more."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.delete("t")
    c.stop_replica_response("t", 0, 1, "KAFKA_STORAGE_ERROR")
    assert c.replica("t", 0, 1) == "ReplicaDeletionIneligible"
    assert c.topic("t")["deletion"] == "ineligible"
    out = c.stop_replica_response("t", 0, 2)
    # retry: Ineligible -> Offline (StopReplica delete=false); still ineligible: not restarted
    assert c.replica("t", 0, 1) == "OfflineReplica"
    assert c.replica("t", 0, 2) == "ReplicaDeletionSuccessful"
    assert out.sent() == [(SR, 1, True)]


def test_first_time_deletion_during_reassignment_starts() -> None:
    """§15.1 / §19.13: marking ineligible is a no-op for a topic not yet queued, so a
    first-time deletion starts even while a partition is being reassigned."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.reassign("t", 0, [3])
    out = c.delete("t")
    assert c.topic("t")["deletion"] == "queued"
    assert set(c.replicas("t", 0).values()) == {"ReplicaDeletionStarted"}
    assert [b for b, _, _ in stops(out, delete=True)] == [1, 2, 3]


def test_a_later_deletion_request_halts_queued_topics_being_reassigned() -> None:
    """§15.1: TopicDeletion reads every /admin/delete_topics entry, and an entry stays
    until its deletion completes; so a request to delete another topic marks an already
    queued topic with a partition being reassigned ineligible. Here that keeps 'a' from
    restarting the deletion of its replica on broker 2 once its other replicas are gone:
    the replica stays OnlineReplica and nothing is sent for it."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("a", {0: [1, 2]})
    c.create("b", {0: [1, 3]})
    c.reassign("a", 0, [1, 2, 3])
    c.delete("a")  # a first-time deletion starts despite the reassignment (§19.13)
    c.fail(2)  # a's replica on 2 becomes Ineligible, 'a' is halted ...
    c.start(2)  # ... and resumed; its replica is Online again, the others still Started
    assert c.topic("a")["deletion"] == "queued"
    c.delete("b")
    assert c.topic("a")["deletion"] == "ineligible"
    assert c.topic("b")["deletion"] == "queued"
    epochs = c.state("a", 0)[3:]
    c.stop_replica_response("a", 0, 1)
    out = c.stop_replica_response("a", 0, 3)
    assert c.replica("a", 0, 2) == "OnlineReplica"  # back since broker 2's startup
    assert out.of(SR, broker=2) == [] and out.of(LAI) == []
    assert c.state("a", 0)[3:] == epochs


def test_deleting_a_queued_topic_again_changes_nothing() -> None:
    """§15.1: the topic's /admin/delete_topics entry already exists, so Kafka answers
    the DeleteTopics request with NONE and no TopicDeletion event fires: no retry, no
    request, no epoch bump."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [2, 3]})
    c.fail(2)
    c.fail(3)
    c.delete("t")
    before = (c.state("t", 0), c.replicas("t", 0), c.topic("t"))
    out = c.delete("t")
    assert out.rejected == [] and out.requests == [] and out.state_changes == []
    assert (c.state("t", 0), c.replicas("t", 0), c.topic("t")) == before


def test_recreated_topic_inherits_the_deleted_topics_reassignment_entry() -> None:
    """§15.2 / §19.13 / §14.4: a deletion that completes mid-reassignment leaves the
    partition in partitionsBeingReassigned (removeTopic does not touch that set). A topic
    re-created under the name finds it there, so its first successful AlterPartition
    completes that "reassignment": phase B bumps the leader epoch and sends the
    assignment again. A restart from the tables keeps the entry (clusters table)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.reassign("t", 0, [1, 3])
    c.delete("t")
    for broker in (1, 2, 3):
        c.stop_replica_response("t", 0, broker)
    assert c.topic("t") is None
    c.create("t", {0: [1, 2]})
    c.restart()
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 0, 0)
    out = c.isr("t", 0, [1])
    assert out.result("t", 0)["error"] is None
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 1, 2)
    assert out.sent() == [
        (UM, 1, True), (UM, 2, True), (UM, 3, True),  # the AlterPartition's
        (LAI, 1, True), (LAI, 2, True), (UM, 1, True), (UM, 2, True), (UM, 3, True),  # B2
        (UM, 1, True), (UM, 2, True), (UM, 3, True),  # B8
    ]  # fmt: skip
    assert c.context.partitions_being_reassigned == set()
    # the entry is gone: the next AlterPartition is an ordinary one
    out = c.isr("t", 0, [1, 2])
    assert out.sent() == [(UM, 1, True), (UM, 2, True), (UM, 3, True)]


def test_delete_and_complete() -> None:
    """§15.2-§15.4: every replica succeeds -> completeDeleteTopic removes the topic's rows."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.create("u", {0: [1, 2]})
    c.delete("t")
    c.stop_replica_response("t", 0, 1)
    out = c.stop_replica_response("t", 0, 2)
    replica_changes = [(s["broker"], s["to_state"]) for s in out.changes("replica")]
    assert replica_changes == [
        (2, "ReplicaDeletionSuccessful"),
        (1, "NonExistentReplica"),
        (2, "NonExistentReplica"),
    ]
    assert c.topic("t") is None and c.partition("t", 0) is None
    assert c.state("u", 0) == ("OnlinePartition", 1, [1, 2], 0, 0)


def test_simulated_brokers_delete_at_once() -> None:
    """CONTRACT kcsim.simulate.brokers: a StopReplica(delete) to a live broker succeeds at once."""
    c = Cluster(settings=Settings(simulate_brokers=True), brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.delete("t")
    assert c.topic("t") is None


def test_deletion_disabled_is_rejected() -> None:
    """CONTRACT delete.topic.enable=false: topic_deletion is rejected."""
    c = Cluster(settings=Settings(delete_topic_enable=False), brokers=[1])
    c.create("t", {0: [1]})
    out = c.delete("t")
    assert len(out.rejected) == 1
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 0, 0)


def test_broker_failure_of_deleting_topic_excludes_it_from_elections() -> None:
    """§9.1 / §1.2 / §15.4 / §19.3: partitions of queued topics are not offline-leader
    partitions and are not re-elected; their replicas go through failReplicaDeletion, whose
    retry (Ineligible -> Offline) removes the last ISR member again (epoch bump, no
    LeaderAndIsr)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)
    c.delete("t")  # halted: broker 2 is down
    assert c.state("t", 0) == ("NonExistentPartition", -1, [1], 2, 2)
    out = c.fail(1)
    assert c.state("t", 0) == ("NonExistentPartition", -1, [1], 3, 3)
    assert c.replicas("t", 0) == {1: "OfflineReplica", 2: "OfflineReplica"}
    transitions = [(s["broker"], s["from_state"], s["to_state"]) for s in out.changes("replica")]
    assert transitions == [
        (1, "ReplicaDeletionStarted", "ReplicaDeletionIneligible"),
        (1, "ReplicaDeletionIneligible", "OfflineReplica"),
        (2, "ReplicaDeletionIneligible", "OfflineReplica"),
    ]
    assert out.of(LAI) == []
    # then §9.1 step 7: the broker-only UpdateMetadata
    assert out.sent() == [(SR, 1, False), (SR, 2, False), (UM, 3, True)]


def test_a_response_for_a_replica_the_state_machine_lacks_is_an_invalid_transition() -> None:
    """§15.4 / §6.2: the deletion manager hands a response's replica to the replica state
    machine, which records a replica it does not hold as NonExistentReplica first, so a
    partition the topic lacks, or a broker with no replica of it, is Kafka's invalid
    transition (a failed state_changes row) and nothing else changes. For a topic not
    queued for deletion the deletion manager drops the response without a word, as
    Kafka's does."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.create("u", {0: [1]})
    c.fail(2)
    c.delete("t")
    before = c.replicas("t", 0)
    for partition, broker in ((9, 1), (0, 3)):
        out = c.stop_replica_response("t", partition, broker, error="KAFKA_STORAGE_ERROR")
        assert out.rejected == [] and out.requests == [] and out.results == []
        (row,) = out.state_changes
        assert (row["partition"], row["broker"], row["ok"]) == (partition, broker, False)
        assert row["error"] == (
            f"Replica {broker} for partition t-{partition} cannot move to "
            "ReplicaDeletionIneligible state. It should be in one of OfflineReplica,"
            "ReplicaDeletionStarted states. Instead it is in NonExistentReplica state"
        )
    assert c.replicas("t", 0) == before
    out = c.stop_replica_response("u", 0, 1)
    assert (out.rejected, out.requests, out.state_changes, out.results) == ([], [], [], [])
    assert c.replica("u", 0, 1) == "OnlineReplica"
