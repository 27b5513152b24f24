"""Topic creation and partition expansion (SPEC §10, §19.5, §19.6)."""

from __future__ import annotations

from controller.config import Settings
from tests.support.scenario import Cluster, entries, lai

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"


def test_topic_creation_all_live() -> None:
    """§10.3: leader = first live replica, ISR = live replicas, epochs 0; LeaderAndIsr
    isNew=true to the ISR; UpdateMetadata to all; partition and replicas Online."""
    c = Cluster(brokers=[1, 2, 3])
    out = c.create("t", {0: [2, 3], 1: [3, 1]})
    assert c.state("t", 0) == ("OnlinePartition", 2, [2, 3], 0, 0)
    assert c.state("t", 1) == ("OnlinePartition", 3, [3, 1], 0, 0)
    assert c.replicas("t", 0) == {2: "OnlineReplica", 3: "OnlineReplica"}
    assert c.partition("t", 0)["controller_epoch"] == 1
    assert c.partition("t", 0)["leader_recovery_state"] == "RECOVERED"
    assert out.sent() == [
        (LAI, 1, True),
        (LAI, 2, True),
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
    ]
    to_3 = entries(out.of(LAI, 3)[0])
    assert set(to_3) == {("t", 0), ("t", 1)}
    assert all(e["is_new"] is True for e in to_3.values())
    assert lai(to_3[("t", 1)]) == (3, 0, [3, 1], 0)
    assert to_3[("t", 1)]["controller_epoch"] == 1
    assert len(out.of(UM, 1)[0]["partitions"]) == 2
    transitions = [(s["entity"], s["from_state"], s["to_state"]) for s in out.state_changes]
    # four batches: New partitions, New replicas, Online partitions, Online replicas
    assert transitions[:2] == [
        ("partition", "NonExistentPartition", "NewPartition"),
        ("partition", "NonExistentPartition", "NewPartition"),
    ]
    assert [t for t in transitions if t[0] == "replica"][:4] == [
        ("replica", "NonExistentReplica", "NewReplica")
    ] * 4
    assert transitions[-4:] == [("replica", "NewReplica", "OnlineReplica")] * 4


def test_creation_with_dead_replica() -> None:
    """§19.5 / §19.6: the initial LeaderAndIsr (isNew=true) goes only to live replicas; the
    replica on a dead broker still becomes OnlineReplica; when its broker starts it gets a
    LeaderAndIsr with isNew=false."""
    c = Cluster(brokers=[1, 2, 3])
    c.fail(3)
    out = c.create("t", {0: [3, 1, 2]})
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 0, 0)
    assert c.replica("t", 0, 3) == "OnlineReplica"
    assert out.sent() == [(LAI, 1, True), (LAI, 2, True), (UM, 1, True), (UM, 2, True)]
    assert entries(out.of(UM, 1)[0])[("t", 0)]["offline_replicas"] == [3]

    out = c.start(3)
    (request,) = out.of(LAI, 3)
    entry = entries(request)[("t", 0)]
    assert entry["is_new"] is False
    assert lai(entry) == (1, 0, [1, 2], 0)
    # no election, no ISR change by the controller
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 0, 0)


def test_creation_with_no_live_replica_stays_new_until_a_broker_starts() -> None:
    """§10.3 step 4 / §4.3: no live replica -> NewPartition, retried by the next
    triggerOnlinePartitionStateChange (broker startup): then leader = the started broker,
    epochs 0, isNew=true."""
    c = Cluster(brokers=[1, 2, 3])
    c.fail(2)
    c.fail(3)
    out = c.create("t", {0: [2, 3]})
    row = c.partition("t", 0)
    assert (row["state"], row["leader"], row["leader_epoch"], row["isr"]) == (
        "NewPartition",
        -1,
        None,
        None,
    )
    assert c.replicas("t", 0) == {2: "OnlineReplica", 3: "OnlineReplica"}
    failed = out.changes("partition", ok=False)
    assert len(failed) == 1 and "No assigned replica is alive" in failed[0]["error"]
    assert out.requests == []

    out = c.start(3)
    assert c.state("t", 0) == ("OnlinePartition", 3, [3], 0, 0)
    entry = entries(out.of(LAI, 3)[0])[("t", 0)]
    assert entry["is_new"] is True
    # batch 2 of onBrokerStartup: no partition has leadership yet
    assert out.of(UM, 3)[0]["partitions"] == []
    assert out.sent() == [
        (UM, 1, True),
        (UM, 3, True),
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 3, True),
    ]


def test_partition_creation_adds_partitions() -> None:
    """§10.2 / §10.3: new partitions of an existing topic are created like a new topic's."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    out = c.send({"type": "partition_creation", "topic": "t", "assignment": {"1": [2, 1]}})
    assert c.state("t", 1) == ("OnlinePartition", 2, [2, 1], 0, 0)
    assert out.sent() == [(LAI, 1, True), (LAI, 2, True), (UM, 1, True), (UM, 2, True)]
    assert list(entries(out.of(UM, 1)[0])) == [("t", 1)]


def test_partition_creation_numbers_on_and_takes_any_replication_factor() -> None:
    """§10.2: CreatePartitions asks for a new partition count, so new partitions are
    numbered on from the existing ones (any other numbering cannot reach the topic znode).
    Replica counts are the znode's (CONTRACT §1): a partition may have more or fewer
    replicas than partition 0, as real topics do after reassignments."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    out = c.send({"type": "partition_creation", "topic": "t", "assignment": {"5": [1, 2]}})
    assert [r["reason"] for r in out.rejected] == [
        "topic 't' has 1 partitions, so new ones are numbered [1], got [5]"
    ]
    assert out.requests == [] and out.state_changes == []
    assert c.partition("t", 1) is None
    out = c.send(
        {"type": "partition_creation", "topic": "t", "assignment": {"2": [3], "1": [3, 1, 2]}}
    )
    assert out.rejected == []
    assert c.state("t", 1) == ("OnlinePartition", 3, [3, 1, 2], 0, 0)
    assert c.state("t", 2) == ("OnlinePartition", 3, [3], 0, 0)
    assert c.partition("t", 1)["replicas"] == [3, 1, 2]


def test_partition_creation_for_topic_being_deleted_is_rejected() -> None:
    """§10.2 via the admin path: CreatePartitions for a topic queued for deletion is
    refused by KafkaApis before anything is written ("The topic is queued for deletion.",
    INVALID_TOPIC_EXCEPTION), so the controller's discard of such additions (which only
    partitions written to ZooKeeper directly reach) never comes into play."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)  # keeps the deletion from completing
    c.delete("t")
    out = c.send({"type": "partition_creation", "topic": "t", "assignment": {"1": [1, 3]}})
    assert [r["reason"] for r in out.rejected] == ["The topic is queued for deletion."]
    assert c.partition("t", 1) is None
    assert out.requests == [] and out.state_changes == []


def test_creation_of_existing_topic() -> None:
    """§10.1 / CONTRACT §4: TopicChange only handles topic names the controller does not
    know, so an explicit assignment of a known topic (a log that starts mid-life names it
    again) changes nothing for its existing partitions; partitions the znode has and the
    controller lacks are added as PartitionModifications adds them (§10.2). The admin form
    (partitions + replication_factor) is CreateTopics, refused with TopicExistsException."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1]})
    out = c.create("t", {0: [2, 1]})
    assert out.rejected == [] and out.requests == [] and out.state_changes == []
    assert c.partition("t", 0)["replicas"] == [1]
    out = c.create("t", {0: [2, 1], 1: [2, 1]})
    assert c.partition("t", 0)["replicas"] == [1]
    assert c.state("t", 1) == ("OnlinePartition", 2, [2, 1], 0, 0)
    assert out.sent() == [(LAI, 1, True), (LAI, 2, True), (UM, 1, True), (UM, 2, True)]
    out = c.send({"type": "topic_creation", "topic": "t", "partitions": 1, "replication_factor": 1})
    assert [r["reason"] for r in out.rejected] == ["Topic 't' already exists."]


def test_creation_of_existing_topic_with_stored_states() -> None:
    """§10.1 / §7.2 step 4 / CONTRACT §4: a snapshot names a known topic again with `state`
    for an existing partition and a new one. The existing partition's stored state changes
    nothing (its own state stands); the new one is loaded from its stored state, as a
    failover loads it: no election, no request."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1]})
    stored = {"leader": 2, "leader_epoch": 4, "isr": [2], "partition_epoch": 6,
              "controller_epoch": 1}  # fmt: skip
    out = c.send(
        {
            "type": "topic_creation",
            "topic": "t",
            "assignment": {"0": [2], "1": [2, 1]},
            "state": {"0": stored, "1": stored},
        }
    )
    assert out.rejected == [] and out.requests == [] and out.state_changes == []
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 0, 0)
    assert c.state("t", 1) == ("OnlinePartition", 2, [2], 4, 6)


def test_creation_with_replication_factor_uses_live_brokers() -> None:
    """CONTRACT topic_creation: partitions + replication_factor -> Kafka's assignment over the
    registered brokers; every partition is Online with epochs 0."""
    c = Cluster(brokers=[1, 2, 3])
    c.send({"type": "topic_creation", "topic": "t", "partitions": 3, "replication_factor": 2})
    for p in range(3):
        row = c.partition("t", p)
        assert row is not None
        assert len(row["replicas"]) == 2
        assert row["state"] == "OnlinePartition"
        assert (row["leader"], row["isr"], row["leader_epoch"], row["partition_epoch"]) == (
            row["replicas"][0],
            row["replicas"],
            0,
            0,
        )


def test_partition_creation_on_dead_and_unknown_brokers() -> None:
    """§10.2 / §10.3 / §4.3: the znode's assignment is applied as the controller applies
    it, whatever its brokers (CONTRACT §1): a replica on a dead broker, or on one the log
    never registered, starts offline: the first live replica leads, the ISR is the live
    ones, and only they get the LeaderAndIsr (isNew=true)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(3)
    out = c.send({"type": "partition_creation", "topic": "t", "assignment": {"1": [3, 9, 1]}})
    assert out.rejected == []
    assert c.state("t", 1) == ("OnlinePartition", 1, [1], 0, 0)
    assert c.replicas("t", 1) == {3: "OnlineReplica", 9: "OnlineReplica", 1: "OnlineReplica"}
    assert out.sent() == [(LAI, 1, True), (UM, 1, True), (UM, 2, True)]
    um = entries(out.of(UM, 1)[0])[("t", 1)]
    assert (um["replicas"], um["offline_replicas"]) == ([3, 9, 1], [3, 9])
    # broker 9 registers for the first time: its replica gets the current state, isNew=false
    out = c.start(9)
    entry = entries(out.of(LAI, 9)[0])[("t", 1)]
    assert (lai(entry), entry["is_new"]) == ((1, 0, [1], 0), False)


def test_creation_on_brokers_never_registered_fails_initialization() -> None:
    """§4.3 / §10.3: a partition with no live replica fails initialization with the error
    Kafka logs (a state_changes row ok=false) and stays NewPartition; its replicas still
    become OnlineReplica."""
    c = Cluster(brokers=[1])
    out = c.create("t", {0: [7, 8]})
    assert out.rejected == [] and out.requests == []
    assert c.partition("t", 0)["state"] == "NewPartition"
    (failed,) = out.changes("partition", ok=False)
    assert failed["error"] == (
        "Controller None epoch 1 encountered error during state change of partition t-0 "
        "from New to Online, assigned replicas are [7,8], live brokers are [1]. No "
        "assigned replica is alive."
    )
    assert c.replicas("t", 0) == {7: "OnlineReplica", 8: "OnlineReplica"}


def test_partition_creation_on_shutting_down_broker_is_accepted() -> None:
    """§10.3 / §4.3: a shutting-down broker keeps its registration, so CreatePartitions
    accepts it; it is not live, so it is neither leader nor in the ISR and gets no
    LeaderAndIsr, but it still gets the UpdateMetadata and its replica becomes Online."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.shutdown(3)
    out = c.send({"type": "partition_creation", "topic": "t", "assignment": {"1": [3, 1]}})
    assert out.rejected == []
    assert c.state("t", 1) == ("OnlinePartition", 1, [1], 0, 0)
    assert c.replicas("t", 1) == {3: "OnlineReplica", 1: "OnlineReplica"}
    assert out.sent() == [(LAI, 1, True), (UM, 1, True), (UM, 2, True), (UM, 3, True)]
    entry = entries(out.of(LAI, 1)[0])[("t", 1)]
    assert (lai(entry), entry["is_new"], entry["replicas"]) == ((1, 0, [1], 0), True, [3, 1])
    assert entries(out.of(UM, 3)[0])[("t", 1)]["offline_replicas"] == [3]


def test_topic_creation_on_dead_broker_is_accepted() -> None:
    """§10.1 / §10.3 via the admin path: unlike CreatePartitions, Kafka's CreateTopics does
    not check an explicit assignment's brokers (ZkAdminManager.createTopics: "we don't check
    that replicaAssignment contains unknown brokers"), so a dead broker is accepted and the
    controller creates the partition around it (CONTRACT §1: the assignment is the znode)."""
    c = Cluster(brokers=[1, 2, 3])
    c.fail(3)
    out = c.create("t", {0: [3, 1], 1: [3, 2]})
    assert out.rejected == []
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 0, 0)
    assert c.state("t", 1) == ("OnlinePartition", 2, [2], 0, 0)
    assert c.replicas("t", 0) == {3: "OnlineReplica", 1: "OnlineReplica"}
    assert out.sent() == [(LAI, 1, True), (LAI, 2, True), (UM, 1, True), (UM, 2, True)]
    # a broker the log never registered: applied alike, its replica offline
    out = c.create("u", {0: [1, 9]})
    assert out.rejected == []
    assert c.state("u", 0) == ("OnlinePartition", 1, [1], 0, 0)


def test_partition_creation_during_reassignment_is_rejected() -> None:
    """§10.2 via the admin path: CreatePartitions reads the topic's stored assignment and
    refuses the topic while any of its partitions is being reassigned
    (ZkAdminManager.createPartitions, REASSIGNMENT_IN_PROGRESS), before the controller sees
    anything. Once the reassignment completes the same request is accepted."""
    c = Cluster(brokers=[1, 2, 3, 4])
    c.create("t", {0: [1, 2], 1: [2, 3]})
    c.reassign("t", 1, [3, 4])  # 4 must catch up: stays in progress
    assert c.partition("t", 1)["adding_replicas"] == [4]
    event = {"type": "partition_creation", "topic": "t", "assignment": {"2": [1, 2]}}
    out = c.send(event)
    (rejected,) = out.rejected
    assert rejected["reason"] == "A partition reassignment is in progress for the topic 't'"
    assert out.requests == [] and out.state_changes == [] and out.results == []
    assert c.partition("t", 2) is None
    # 4 joins the ISR: the reassignment completes, and partitions can be added again
    c.isr("t", 1, [2, 3, 4])
    assert c.partition("t", 1)["adding_replicas"] == []
    out = c.send({**event})
    assert out.rejected == []
    assert c.state("t", 2) == ("OnlinePartition", 1, [1, 2], 0, 0)


def test_colliding_topic_names_follow_creation_and_deletion() -> None:
    """CreateTopics before §10: a name equal to an existing topic's once '.' reads as '_' is
    refused (CONTRACT §1: a rejected_events row), naming the first such topic; once that
    topic's deletion completes, the name is free, and a restart from the stored tables
    knows the names again."""
    c = Cluster(settings=Settings(simulate_brokers=True), brokers=[1, 2])
    assert not c.create("a.b", {0: [1, 2]}).rejected
    assert not c.create("x", {0: [1]}).rejected
    refused = c.create("a_b", {0: [1]}).rejected
    assert [r["reason"] for r in refused] == ["Topic 'a_b' collides with existing topic: a.b"]
    c.delete("a.b")  # the brokers answer the StopReplicas: the deletion completes
    assert c.topic("a.b") is None
    assert not c.create("a_b", {0: [2]}).rejected
    assert c.state("a_b", 0)[1] == 2
    c.restart()
    refused = c.create("a.b", {0: [1]}).rejected
    assert [r["reason"] for r in refused] == ["Topic 'a.b' collides with existing topic: a_b"]
