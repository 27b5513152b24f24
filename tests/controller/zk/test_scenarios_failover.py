"""Controller failover (SPEC §7.2, §19.10, §19.15)."""

from __future__ import annotations

import json

from controller.simulator import RawEvent, Simulator
from schemas.tables import STATE_TABLES
from tests.support.scenario import Cluster, entries, lai

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"


def test_leader_election_test_example() -> None:
    """§7.2 example (LeaderElectionTest): [0,1], leader 0, ISR [0,1], epoch 0; broker 0 (the
    old controller) dies with it; broker 1 takes over: step 8 -> leader -1, ISR [1], epoch 1;
    step 9 -> leader 1, ISR [1], epoch 2. Every request carries the new controller epoch."""
    c = Cluster(brokers=[0, 1])
    c.create("t", {0: [0, 1]})
    out = c.failover(controller=1, failed=[0])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 2, 2)
    assert c.partition("t", 0)["controller_epoch"] == 2
    assert c.broker(0)["status"] == "dead"
    assert c.replicas("t", 0) == {0: "OfflineReplica", 1: "OnlineReplica"}
    assert out.sent() == [
        (UM, 1, True),  # step 7: brokers only
        (LAI, 1, True),  # step 8: online replicas -> Online (current state)
        (UM, 1, True),
        (LAI, 1, True),  # step 8: offline replicas -> Offline (ISR shrink)
        (UM, 1, True),
        (SR, 0, False),
        (LAI, 1, True),  # step 9: the election
        (UM, 1, True),
    ]
    assert out.requests[0]["partitions"] == []
    assert all(r["controller_epoch"] == 2 for r in out.requests)
    online, shrink, election = (entries(r)[("t", 0)] for r in out.of(LAI, 1))
    assert (lai(online), online["controller_epoch"]) == ((0, 0, [0, 1], 0), 1)  # §19.8
    assert (lai(shrink), shrink["controller_epoch"]) == ((-1, 1, [1], 1), 2)
    assert (lai(election), election["controller_epoch"]) == ((1, 2, [1], 2), 2)
    partition_changes = [
        (s["from_state"], s["to_state"], s["ok"]) for s in out.changes("partition")
    ]
    assert partition_changes == [("OfflinePartition", "OnlinePartition", True)]


def test_failover_without_changes_only_resends_state() -> None:
    """§7.2: with every broker live nothing is written: no epoch changes, the replicas get
    their current state again under the new controller epoch."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    out = c.failover()
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 0, 0)
    assert c.partition("t", 0)["controller_epoch"] == 1
    assert out.sent() == [
        (UM, 1, True),
        (UM, 2, True),
        (LAI, 1, True),
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
    ]
    assert {r["controller_epoch"] for r in out.requests} == {2}


def test_failover_forgets_controlled_shutdowns() -> None:
    """§7.2 step 4e / §19.15: shuttingDownBrokerIds is cleared on failover: the broker is live
    again for elections and ISR eligibility."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [2, 1]})
    c.shutdown(2)
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 1, 1)
    assert c.broker(2)["status"] == "shutting_down"
    c.failover()
    assert c.broker(2)["status"] == "live"
    assert c.replica("t", 0, 2) == "OnlineReplica"
    out = c.isr("t", 0, [1, 2])
    assert out.result("t", 0)["error"] is None
    c.elect("preferred", [("t", 0)])
    assert c.state("t", 0) == ("OnlinePartition", 2, [1, 2], 2, 3)


def test_failover_resumes_reassignment_with_another_bump() -> None:
    """§7.2 step 10 / §14.4 / §19.10: an in-flight reassignment is resumed by the new
    controller: another A1 bump; A2's NewReplica is invalid (the replica is Online after the
    replica state machine's startup)."""
    c = Cluster(brokers=[0, 1])
    c.create("t", {0: [0]})
    c.reassign("t", 0, [1])
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 1, 1)
    out = c.failover()
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 2, 2)
    assert c.partition("t", 0)["adding_replicas"] == [1]
    assert c.replica("t", 0, 1) == "OnlineReplica"
    invalid = out.changes("replica", ok=False)
    assert [(s["broker"], s["from_state"], s["to_state"]) for s in invalid] == [
        (1, "OnlineReplica", "NewReplica")
    ]
    c.isr("t", 0, [0, 1])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 4, 5)
    assert c.partition("t", 0)["replicas"] == [1]


def test_failover_restarts_topic_deletion() -> None:
    """§7.2 steps 5, 6, 11 / §15.5: queued topics are reloaded; deletion restarts: replicas
    that were Started get StopReplica(delete=true) again."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.delete("t")
    c.stop_replica_response("t", 0, 1)
    out = c.failover()
    assert c.topic("t")["deletion"] == "queued"
    assert c.replicas("t", 0) == {1: "ReplicaDeletionStarted", 2: "ReplicaDeletionStarted"}
    deletes = [r["broker"] for r in out.of(SR) if entries(r)[("t", 0)]["delete_partition"] is True]
    assert deletes == [1, 2]
    c.stop_replica_response("t", 0, 1)
    c.stop_replica_response("t", 0, 2)
    assert c.topic("t") is None


def test_failover_with_queued_topic_and_dead_broker_is_ineligible() -> None:
    """§7.2 steps 5, 8, 11: ineligible = queued topics with a replica not online; the replica
    state machine's startup moves the live replica Online and the dead one Offline, and the
    halted topic is not restarted."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)
    c.delete("t")
    c.failover()
    assert c.topic("t")["deletion"] == "ineligible"
    assert c.replica("t", 0, 2) == "OfflineReplica"
    assert c.replica("t", 0, 1) == "OnlineReplica"


def test_controller_epoch_counts_failovers() -> None:
    """CONTRACT: first controller epoch 1, each failover adds one."""
    c = Cluster(brokers=[1])
    c.create("t", {0: [1]})
    c.failover()
    out = c.failover()
    assert {r["controller_epoch"] for r in out.requests} == {3}


def test_failover_reloads_the_controller_epoch_stored_with_leader_and_isr() -> None:
    """§6.3 / §7.2 step 4g: an ISR removal that finds the replica already out of the ISR
    writes nothing, yet re-caches the leader and ISR under the controller's own epoch (its
    requests carry it). ZooKeeper keeps the epoch of the last writer, and a new controller
    loads that one: partition_state.controller_epoch is ZooKeeper's, and every failover
    (two here) starts again from it. A restart of the same controller keeps its cache."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    c.isr("t", 0, [1, 2])  # written by controller epoch 1: ZK (L1, E0, [1,2], v1, c1)
    c.failover()  # epoch 2: all live, nothing written
    assert c.partition("t", 0)["controller_epoch"] == 1

    out = c.fail(3)  # replica 3 -> Offline; 3 is not in the ISR: no write
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 0, 1)
    assert c.partition("t", 0)["controller_epoch"] == 1  # ZK's
    assert c.cluster_row()["restamped_partitions"] == [{"topic": "t", "partition": 0}]
    assert out.sent() == [
        (LAI, 1, True),
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
        (SR, 3, False),
    ]
    for request in out.of(LAI) + out.of(UM):
        entry = entries(request)[("t", 0)]
        assert (lai(entry), entry["controller_epoch"]) == ((1, 0, [1, 2], 1), 2)  # the cache

    c.restart()  # the same controller: its re-stamped cache survives the tables
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
    carried = [entries(r)[("t", 0)]["controller_epoch"] for r in out.requests if r["partitions"]]
    assert carried == [2] * 5

    out = c.failover()  # epoch 3 loads ZK: controller epoch 1, not the old cache's 2
    assert c.cluster_row()["restamped_partitions"] == []
    assert out.sent() == [
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
        (LAI, 1, True),
        (LAI, 2, True),
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
    ]
    for request in out.requests[3:]:
        assert request["controller_epoch"] == 3
        entry = entries(request)[("t", 0)]
        assert (lai(entry), entry["controller_epoch"]) == ((1, 0, [1, 2], 1), 1)

    c.fail(3)  # re-stamped again, by epoch 3
    assert c.partition("t", 0)["controller_epoch"] == 1
    out = c.failover()  # epoch 4: step 8 sends ZK's epoch 1, then re-stamps with 4 (3 dead)
    assert out.sent() == [
        (UM, 1, True),
        (UM, 2, True),
        (LAI, 1, True),  # online replicas -> Online: the loaded state
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
        (LAI, 1, True),  # replica 3 -> Offline: no write, re-stamped
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
        (SR, 3, False),
    ]
    carried = [entries(r)[("t", 0)]["controller_epoch"] for r in out.requests[2:10]]
    assert carried == [1, 1, 1, 1, 4, 4, 4, 4]
    assert c.partition("t", 0)["controller_epoch"] == 1
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 0, 1)

    c.start(3)
    c.isr("t", 0, [1, 2, 3])  # a write: stored and cached agree again
    assert c.partition("t", 0)["controller_epoch"] == 4
    assert c.cluster_row()["restamped_partitions"] == []


def test_restart_then_rejected_event_keeps_the_cluster() -> None:
    """CONTRACT §2 (rejected_events): a rejected event changes nothing. After a restart
    the reloaded cluster has applied events (read from applied_events): a rejected event
    must not drop it, its seq goes on from the stored one, and an applied event id stays a
    duplicate."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.send({"type": "broker_failure", "broker": 2, "event_id": "fail-2"})
    c.restart()
    out = c.fail(9)  # never registered
    assert [r["reason"] for r in out.rejected] == [
        "unknown broker 9: the cluster has never seen it"
    ]
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 1, 1)
    assert c.broker(2)["status"] == "dead"
    out = c.send({"type": "broker_startup", "broker": 2, "event_id": "fail-2"})
    assert [r["reason"] for r in out.rejected] == ["duplicate event_id 'fail-2': already applied"]
    out = c.start(2)
    assert out.rejected == []
    assert c.context.last_seq == 5  # 2 startups, creation, failure, startup: rejected skip


def test_cluster_restored_without_applied_events_is_never_dropped() -> None:
    """A cluster restored from its state tables alone (no applied_events rows: nothing says
    which event came last) still exists after a rejected event, with its state."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    tables = {t.name: list(c.simulator.table_rows(t.name)) for t in STATE_TABLES}
    simulator = Simulator.from_tables(c.settings, tables)
    output = simulator.apply([RawEvent(json.dumps({"type": "broker_failure", "broker": 9}), "x:1")])
    assert len(output.appends["rejected_events"]) == 1
    assert simulator.clusters() == ["default"]
    assert list(simulator.table_rows("partition_state")) == tables["partition_state"]
    output = simulator.apply([RawEvent(json.dumps({"type": "broker_failure", "broker": 2}), "x:2")])
    assert output.appends["rejected_events"] == []
    assert [r["seq"] for r in output.appends["applied_events"]] == [1]
