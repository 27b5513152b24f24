"""Controlled shutdown (SPEC §11) and shutting-down brokers elsewhere (§19.4, §19.9, §19.17)."""

from __future__ import annotations

from tests.support.scenario import Cluster, entries, lai

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"


def three_replica_cluster() -> Cluster:
    """ControllerIntegrationTest.testControlledShutdown: t-0 RS [0,1,2], leader 0, ISR [0,1,2]."""
    c = Cluster(brokers=[0, 1, 2])
    c.create("t", {0: [0, 1, 2]})
    assert c.state("t", 0) == ("OnlinePartition", 0, [0, 1, 2], 0, 0)
    return c


def test_controlled_shutdown_integration_example() -> None:
    """§11 example (ControllerIntegrationTest.testControlledShutdown) and §19.9: followers
    get StopReplica(delete=false) twice and go OfflineReplica while still alive; the leader
    cannot move once no ISR member is left that is not shutting down."""
    c = three_replica_cluster()

    out = c.shutdown(2)
    assert c.state("t", 0) == ("OnlinePartition", 0, [0, 1], 1, 1)
    assert c.broker(2)["status"] == "shutting_down"
    assert c.replica("t", 0, 2) == "OfflineReplica"
    assert out.sent() == [
        (SR, 2, True),  # step 7
        (LAI, 0, True),  # step 8: RSM OfflineReplica
        (LAI, 1, True),
        (UM, 0, True),
        (UM, 1, True),
        (UM, 2, True),  # a shutting-down broker still receives
        (SR, 2, True),
    ]
    for request in out.of(SR, 2):
        stop = entries(request)[("t", 0)]
        assert (stop["delete_partition"], stop["leader_epoch"]) == (False, 0)
    assert lai(entries(out.of(LAI, 1)[0])[("t", 0)]) == (0, 1, [0, 1], 1)
    assert entries(out.of(UM, 0)[0])[("t", 0)]["offline_replicas"] == [2]
    assert [(r["topic"], r["error"]) for r in out.results] == [(None, None)]

    out = c.shutdown(1)
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 2, 2)
    assert c.replica("t", 0, 1) == "OfflineReplica"
    assert entries(out.of(UM, 0)[0])[("t", 0)]["offline_replicas"] == [1, 2]
    assert [(r["topic"], r["error"]) for r in out.results] == [(None, None)]

    out = c.shutdown(0)
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 2, 2)
    assert c.replica("t", 0, 0) == "OnlineReplica"
    assert out.requests == []
    failed = out.changes("partition", ok=False)
    assert len(failed) == 1
    assert "ControlledShutdownPartitionLeaderElectionStrategy" in failed[0]["error"]
    row = out.result("t", 0)
    assert (row["error"], row["leader"], row["leader_epoch"], row["isr"]) == (None, 0, 2, [0])


def test_controlled_shutdown_of_leader_moves_leadership() -> None:
    """§11 step 6 / §5.4: new leader = first RS replica in ISR not shutting down; ISR minus the
    shutting-down broker; LeaderAndIsr to registered replicas including the one leaving. The
    led partition's replica keeps its state; no StopReplica."""
    c = three_replica_cluster()
    out = c.shutdown(0)
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 1, 1)
    assert c.replica("t", 0, 0) == "OnlineReplica"
    assert out.sent() == [
        (LAI, 0, True),
        (LAI, 1, True),
        (LAI, 2, True),
        (UM, 0, True),
        (UM, 1, True),
        (UM, 2, True),
    ]
    assert all(lai(entries(r)[("t", 0)]) == (1, 1, [1, 2], 1) for r in out.of(LAI))
    assert [(r["topic"], r["error"]) for r in out.results] == [(None, None)]


def test_controlled_shutdown_ignores_single_replica_partitions() -> None:
    """§11 step 5/9: partitions with |RS| = 1 are never acted on and never reported."""
    c = Cluster(brokers=[0, 1])
    c.create("t", {0: [0]})
    out = c.shutdown(0)
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 0, 0)
    assert out.requests == []
    assert [(r["topic"], r["error"]) for r in out.results] == [(None, None)]


def test_controlled_shutdown_stale_broker_epoch() -> None:
    """§11 step 2: an older broker epoch fails with STALE_BROKER_EPOCH and changes nothing;
    a newer one is accepted."""
    c = three_replica_cluster()
    epoch = c.broker(2)["broker_epoch"]
    out = c.shutdown(2, broker_epoch=epoch - 1)
    assert out.result()["error"] == "STALE_BROKER_EPOCH"
    assert out.requests == []
    assert c.broker(2)["status"] == "live"
    out = c.shutdown(2, broker_epoch=epoch + 1)
    assert out.result()["error"] is None
    assert c.broker(2)["status"] == "shutting_down"


def test_controlled_shutdown_of_dead_broker_with_epoch_is_no_such_element() -> None:
    """§19.17: an unknown (unregistered) broker with a real epoch fails with
    NoSuchElementException, not BrokerNotAvailableException; without an epoch it is
    BROKER_NOT_AVAILABLE."""
    c = three_replica_cluster()
    c.fail(2)
    out = c.shutdown(2, broker_epoch=7)
    row = out.result()
    assert row["error"] == "UNKNOWN_SERVER_ERROR"
    assert "NoSuchElementException" in row["message"]
    out = c.shutdown(2)
    assert out.result()["error"] == "BROKER_NOT_AVAILABLE"
    out = c.shutdown(2, broker_epoch=-1)
    assert out.result()["error"] == "BROKER_NOT_AVAILABLE"
    assert out.requests == []


def test_failure_after_controlled_shutdown_clears_shutting_down() -> None:
    """§8.3 step 1: the registration disappearing removes the broker from shuttingDown."""
    c = three_replica_cluster()
    c.shutdown(2)
    out = c.fail(2)
    assert c.broker(2)["status"] == "dead"
    # replica (t-0,2) Offline -> Offline: 2 is no longer in the ISR, so no write
    assert c.state("t", 0) == ("OnlinePartition", 0, [0, 1], 1, 1)
    assert out.sent() == [
        (LAI, 0, True),
        (LAI, 1, True),
        (UM, 0, True),
        (UM, 1, True),
        (SR, 2, False),
    ]


def test_shutting_down_broker_excluded_from_new_partition_isr() -> None:
    """§19.4 / §4.3: a shutting-down broker is not live for a new partition's ISR and gets no
    isNew LeaderAndIsr, but still gets the UpdateMetadata."""
    c = Cluster(brokers=[1, 2, 3])
    c.shutdown(2)
    out = c.create("t", {0: [2, 1]})
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 0, 0)
    assert out.sent() == [(LAI, 1, True), (UM, 1, True), (UM, 2, True), (UM, 3, True)]
    assert entries(out.of(LAI, 1)[0])[("t", 0)]["is_new"] is True
    assert entries(out.of(UM, 2)[0])[("t", 0)]["offline_replicas"] == [2]
    assert c.replica("t", 0, 2) == "OnlineReplica"


def test_shutting_down_broker_cannot_join_isr() -> None:
    """§19.4 / §13.1 rule 8: an ISR member that is shutting down is INELIGIBLE_REPLICA."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)
    c.start(2)
    c.shutdown(2)
    out = c.isr("t", 0, [1, 2])
    assert out.result("t", 0)["error"] == "INELIGIBLE_REPLICA"
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 1, 1)
    # every partition of the request is re-announced, rejected or not
    assert out.sent() == [(UM, 1, True), (UM, 2, True), (UM, 3, True)]


def test_unclean_admin_election_treats_shutting_down_leader_as_dead() -> None:
    """§19.4 / §12.2: UNCLEAN is electable when the leader is shutting down; the offline
    strategy skips it (and gives it no LeaderAndIsr: recipients are live replicas)."""
    c = Cluster(brokers=[0, 1])
    c.create("t", {0: [0, 1]})
    c.fail(1)
    c.start(1)
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 1, 1)
    out = c.shutdown(0)
    assert out.result("t", 0)["leader"] == 0  # still led: no ISR member to move to
    out = c.elect("unclean", [("t", 0)])
    row = out.result("t", 0)
    assert (row["error"], row["leader"], row["leader_epoch"], row["isr"]) == (None, 1, 2, [1])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 2, 2)
    assert c.partition("t", 0)["leader_recovery_state"] == "RECOVERING"
    assert out.sent() == [(LAI, 1, True), (UM, 0, True), (UM, 1, True)]
    assert out.changes("partition")[0]["unclean"] is True


def test_partition_led_by_shutting_down_broker_counts_as_offline_leader() -> None:
    """§1.2 partitionsWithOfflineLeader / §9.1 step 2-4 / §19.4: a shutting-down leader is not
    online, so any later broker failure moves its partition to OfflinePartition and tries an
    offline election (fails: no live ISR member, unclean off); then the broker-only
    UpdateMetadata of step 7 is sent."""
    c = three_replica_cluster()
    c.shutdown(2)
    c.shutdown(1)
    c.shutdown(0)
    c.start(3)
    out = c.fail(3)
    assert c.state("t", 0) == ("OfflinePartition", 0, [0], 2, 2)
    changes = [(s["from_state"], s["to_state"], s["ok"]) for s in out.changes("partition")]
    assert changes == [
        ("OnlinePartition", "OfflinePartition", True),
        ("OfflinePartition", "OnlinePartition", False),
    ]
    assert out.sent() == [(UM, 0, True), (UM, 1, True), (UM, 2, True)]
    assert all(r["partitions"] == [] for r in out.requests)
