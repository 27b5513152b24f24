"""Broker membership: startup, failure, bounce (SPEC §8, §9.1)."""

from __future__ import annotations

from tests.support.scenario import Cluster, entries, lai

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"


def leader_failure_cluster() -> Cluster:
    """§9.1 starting point: brokers {1,2,3}, t-0 RS [2,3], leader 2, ISR [2,3], epoch 0, ver 0."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [2, 3]})
    assert c.state("t", 0) == ("OnlinePartition", 2, [2, 3], 0, 0)
    return c


def test_leader_failure_worked_example() -> None:
    """§9.1 worked example (leader failure) and §19.1: the new leader gets two LeaderAndIsr
    with the same epoch; StopReplica to the dead broker is not delivered."""
    c = leader_failure_cluster()
    out = c.fail(2)
    assert c.state("t", 0) == ("OnlinePartition", 3, [3], 1, 1)
    assert c.replica("t", 0, 2) == "OfflineReplica"
    assert c.replica("t", 0, 3) == "OnlineReplica"
    assert c.broker(2)["status"] == "dead"
    assert out.sent() == [
        # step 4: the election
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 3, True),
        # step 5: replica (t-0, 2) -> Offline
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 3, True),
        (SR, 2, False),
    ]
    first, second = out.of(LAI, 3)
    for request in (first, second):
        entry = entries(request)[("t", 0)]
        assert lai(entry) == (3, 1, [3], 1)
        assert entry["is_new"] is False
        assert entry["replicas"] == [2, 3]
    um = entries(out.of(UM, 1)[0])[("t", 0)]
    assert um["offline_replicas"] == [2]
    assert um["leader"] == 3
    stop = entries(out.of(SR, 2)[0])[("t", 0)]
    assert stop["delete_partition"] is False
    assert stop["leader_epoch"] == 1
    # step 7: no broker-only UpdateMetadata (notForDeletion non-empty)
    assert all(r["partitions"] for r in out.of(UM))
    partition_changes = [
        (s["from_state"], s["to_state"], s["ok"]) for s in out.changes("partition")
    ]
    assert partition_changes == [
        ("OnlinePartition", "OfflinePartition", True),
        ("OfflinePartition", "OnlinePartition", True),
    ]


def test_follower_failure_worked_example() -> None:
    """§9.1 worked example (follower failure) and §19.2: the controller's ISR shrink bumps
    the leader epoch."""
    c = leader_failure_cluster()
    out = c.fail(3)
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 1, 1)
    assert c.replica("t", 0, 3) == "OfflineReplica"
    assert out.sent() == [(LAI, 2, True), (UM, 1, True), (UM, 2, True), (SR, 3, False)]
    entry = entries(out.of(LAI, 2)[0])[("t", 0)]
    assert lai(entry) == (2, 1, [2], 1)
    assert entry["is_new"] is False
    assert [s["to_state"] for s in out.changes("partition")] == []


def test_broker_without_replicas_failing_sends_broker_only_update_metadata() -> None:
    """§9.1 step 7 (3.1+): nothing for deletion-free replicas and no election results ->
    UpdateMetadata without partitions to every registered broker."""
    c = leader_failure_cluster()
    c.start(4)
    out = c.fail(4)
    assert out.sent() == [(UM, 1, True), (UM, 2, True), (UM, 3, True)]
    assert all(r["partitions"] == [] for r in out.requests)
    assert all(r["live_brokers"] == [1, 2, 3] for r in out.requests)


def test_new_broker_startup_without_replicas() -> None:
    """§8.2: UpdateMetadata (no partitions) to the existing brokers, then UpdateMetadata with
    every partition that has a leader to the new broker."""
    c = leader_failure_cluster()
    out = c.start(4)
    assert out.sent() == [(UM, 1, True), (UM, 2, True), (UM, 3, True), (UM, 4, True)]
    assert [r["partitions"] for r in out.of(UM)[:3]] == [[], [], []]
    (entry,) = out.of(UM, 4)[0]["partitions"]
    assert (entry["topic"], entry["partition"], entry["leader"]) == ("t", 0, 2)
    assert out.of(UM, 4)[0]["live_brokers"] == [1, 2, 3, 4]
    assert c.broker(4)["status"] == "live"


def test_restarted_follower_gets_current_state_is_new_false() -> None:
    """§8.2 step 4: Offline -> Online replica: LeaderAndIsr(current cached state, isNew=false)
    to that broker + UpdateMetadata to all. No ISR change by the controller."""
    c = leader_failure_cluster()
    c.fail(3)
    out = c.start(3)
    assert out.sent() == [
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
    ]
    entry = entries(out.of(LAI, 3)[0])[("t", 0)]
    assert lai(entry) == (2, 1, [2], 1)
    assert entry["is_new"] is False
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 1, 1)
    assert c.replica("t", 0, 3) == "OnlineReplica"


def test_single_replica_partition_goes_offline_and_returns() -> None:
    """§9.1 + §6.3 + §19.3: RS [2]; leader 2 dies: election fails (stays Offline), replica
    Offline removes the last ISR member as leader -> leader -1, ISR [2], epoch 1. On restart
    the Offline partition is elected again: leader 2, epoch 2."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [2]})
    out = c.fail(2)
    assert c.state("t", 0) == ("OfflinePartition", -1, [2], 1, 1)
    failed = out.changes("partition", ok=False)
    assert [(s["from_state"], s["to_state"]) for s in failed] == [
        ("OfflinePartition", "OnlinePartition")
    ]
    # the ISR shrink's LeaderAndIsr has no recipient (RS minus 2 is empty) but the
    # UpdateMetadata it implies still goes to every registered broker
    assert out.sent() == [(UM, 1, True), (UM, 3, True), (SR, 2, False)]
    um = entries(out.of(UM, 1)[0])[("t", 0)]
    assert (um["leader"], um["leader_epoch"], um["offline_replicas"]) == (-1, 1, [2])

    out = c.start(2)
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 2, 2)
    assert out.sent() == [
        (UM, 1, True),
        (UM, 3, True),
        (UM, 2, True),
        # replica Online: the cached (leaderless) state
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
        # triggerOnlinePartitionStateChange: the election
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
    ]
    first, second = (entries(r)[("t", 0)] for r in out.of(LAI, 2))
    assert lai(first) == (-1, 1, [2], 1)
    assert lai(second) == (2, 2, [2], 2)


def test_bounce_is_failure_then_startup_with_a_new_epoch() -> None:
    """CONTRACT broker_startup / §8.1 bounced: onBrokerFailure then onBrokerStartup, broker
    epoch strictly increases."""
    c = leader_failure_cluster()
    epoch_before = c.broker(3)["broker_epoch"]
    c.start(3)
    assert c.broker(3)["broker_epoch"] > epoch_before
    assert c.broker(3)["status"] == "live"
    # the failure half shrank the ISR (epoch 1); the startup half sent the current state
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 1, 1)
    assert c.replica("t", 0, 3) == "OnlineReplica"


def test_failure_of_dead_broker_changes_nothing() -> None:
    """§8.1: a broker already gone shows no change in ZooKeeper: no requests, no changes."""
    c = leader_failure_cluster()
    c.fail(3)
    out = c.fail(3)
    assert out.requests == [] and out.state_changes == [] and out.rejected == []


def test_failure_of_unknown_broker_is_rejected() -> None:
    """CONTRACT §1: a broker the cluster does not know is a rejected event."""
    c = leader_failure_cluster()
    out = c.fail(9)
    assert len(out.rejected) == 1
    assert out.requests == []


def test_leader_failure_with_offline_isr_members_filters_isr() -> None:
    """§5.1 / §9.1: the new ISR is the old ISR filtered to live replicas (old ISR order);
    leader = first live ISR member in assignment order."""
    c = Cluster(brokers=[1, 2, 3, 4])
    c.create("t", {0: [1, 2, 3, 4]})
    c.isr("t", 0, [1, 4, 3, 2])  # leader 1 reorders its ISR (AlterPartition, epoch unchanged)
    c.fail(2)
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 4, 3], 1, 2)
    out = c.fail(1)
    # live ISR members in RS order: 3 comes before 4
    assert c.state("t", 0) == ("OnlinePartition", 3, [4, 3], 2, 3)
    assert out.recipients(LAI) == [3, 4, 2, 3, 4]
