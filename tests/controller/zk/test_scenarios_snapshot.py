"""Starting beside a running cluster: its present state as events (CONTRACT §1 `state`,
`controller_epoch`; SPEC §7.2, §6.4).

A cluster with history is simulated; its state tables become snapshot events
(`snapshot_events`); a fresh simulator replays them and the new controller's failover
runs on the loaded state. The original takes the same failover. Both must then hold the
same state, and the failover must send the same requests.
"""

from __future__ import annotations

from typing import Any

from schemas.tables import STATE_TABLES
from tests.support.scenario import Cluster, Output, entries, lai
from tests.support.snapshot_events import snapshot_events, stored_state

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"
Row = dict[str, Any]


def cluster_with_history() -> Cluster:
    """Epochs above 0 everywhere: failures, returns, ISR changes, elections, a controlled
    shutdown, a failover; at the end broker 5 is dead, 2 shutting down, and `late` has
    never been initialized (its only replica's broker is dead)."""
    c = Cluster()
    for broker in range(1, 6):
        c.send({"type": "broker_startup", "broker": broker, "rack": "ab"[broker % 2]})
    c.send({"type": "topic_creation", "topic": "a", "partitions": 4, "replication_factor": 3})
    c.create("b", {0: [1, 2], 1: [2, 3, 4]}, configs={"unclean.leader.election.enable": True})
    c.fail(1)
    c.start(1)
    for p in range(4):
        row = c.partition("a", p)
        if 1 in row["replicas"] and 1 not in row["isr"]:
            c.isr("a", p, [*row["isr"], 1])
    c.isr("b", 0, [2, 1])
    c.elect("preferred")
    c.send({"type": "broker_failure", "brokers": [3, 4]})
    c.failover(controller=1)
    c.start(3)
    c.isr("b", 1, [2, 3])
    c.shutdown(2)
    c.fail(5)
    c.create("late", {0: [5]})
    assert c.cluster_row()["controller_epoch"] == 2
    assert c.partition("late", 0)["state"] == "NewPartition"
    assert max(c.partition("a", p)["leader_epoch"] for p in range(4)) >= 3
    return c


def tables(c: Cluster) -> dict[str, list[Row]]:
    return {t.name: list(c.simulator.table_rows(t.name)) for t in STATE_TABLES}


def without_event_ids(rows: list[Row]) -> list[Row]:
    return [{k: v for k, v in row.items() if k != "last_event_id"} for row in rows]


def requests(out: Output) -> list[tuple]:
    """Every request of an event, payload included, without the event's own ids."""
    return [
        (
            r["type"],
            r["broker"],
            r["delivered"],
            r["controller_epoch"],
            [tuple(sorted(p.items())) for p in r["partitions"]],
            r.get("live_brokers"),
        )
        for r in out.requests
    ]


def test_snapshot_replays_to_the_same_state_and_failover() -> None:
    original = cluster_with_history()
    events = snapshot_events(tables(original), controller=3, controller_epoch=7)
    shadow = Cluster()
    outs = [shadow.send(event) for event in events]
    assert all(out.rejected == [] for out in outs)
    # loading existing partitions elects nothing and sends nothing
    starts = sum(event["type"] == "broker_startup" for event in events)
    creations = outs[starts:-1]
    assert [len(out.requests) for out in creations] == [0, 0, 0]
    assert all(
        s["topic"] == "late"  # the one partition never initialized: created as new
        for out in creations
        for s in out.state_changes
    )
    failover = outs[-1]

    reference = original.failover(controller=3)  # epoch 3 there: only the number differs
    assert original.cluster_row()["controller_epoch"] == 3
    assert shadow.cluster_row()["controller_epoch"] == 7
    assert shadow.cluster_row()["controller"] == 3

    ours, theirs = tables(shadow), tables(original)
    for row in theirs["partition_state"]:
        if row["controller_epoch"] == 3:
            row["controller_epoch"] = 7  # written by the failover itself
    assert without_event_ids(ours["partition_state"]) == without_event_ids(
        theirs["partition_state"]
    )
    assert without_event_ids(ours["replica_state"]) == without_event_ids(theirs["replica_state"])
    assert ours["topics"] == theirs["topics"]
    registered = [r["broker"] for r in theirs["brokers"] if r["status"] != "dead"]
    assert [r["broker"] for r in ours["brokers"]] == registered == [1, 2, 3]

    def renumbered(rows: list[tuple]) -> list[tuple]:
        return [
            (
                t,
                b,
                d,
                7 if e == 3 else e,
                [
                    tuple((k, 7 if k == "controller_epoch" and v == 3 else v) for k, v in p)
                    for p in ps
                ],
                live,
            )
            for t, b, d, e, ps, live in rows
        ]

    assert requests(failover) == renumbered(requests(reference))


def test_failover_after_snapshot_elects_offline_and_shrinks_dead_replicas() -> None:
    """What the new controller's startup does to a loaded snapshot (§7.2 steps 7-9): an
    UpdateMetadata of the live brokers; the current state to every live replica; each dead
    replica still in an ISR removed from it (epoch + 1); each partition whose leader is not
    live elected (epoch + 1). Here t-0 [1, 2, 3] is stored led by 2 with ISR [2, 3] and 2
    is not registered: step 8 gives leader -1, ISR [3], epoch 6; step 9 leader 3, epoch 7.
    Everything the new controller writes carries its epoch, 9."""
    c = Cluster(brokers=[1, 3])
    stored = {
        "leader": 2,
        "leader_epoch": 5,
        "isr": [2, 3],
        "partition_epoch": 11,
        "controller_epoch": 8,
    }
    out = c.send(
        {
            "type": "topic_creation",
            "topic": "t",
            "assignment": {"0": [1, 2, 3]},
            "state": {"0": stored},
        }
    )
    assert out.requests == [] and out.state_changes == []
    assert c.state("t", 0) == ("OfflinePartition", 2, [2, 3], 5, 11)
    assert c.partition("t", 0)["controller_epoch"] == 8
    assert c.replicas("t", 0) == {1: "OnlineReplica", 2: "OfflineReplica", 3: "OnlineReplica"}
    assert stored_state(c.partition("t", 0)) == {**stored, "leader_recovery_state": "RECOVERED"}

    out = c.send({"type": "controller_failover", "controller": 1, "controller_epoch": 9})
    assert c.state("t", 0) == ("OnlinePartition", 3, [3], 7, 13)
    assert c.partition("t", 0)["controller_epoch"] == 9
    assert c.replicas("t", 0) == {1: "OnlineReplica", 2: "OfflineReplica", 3: "OnlineReplica"}
    assert out.sent() == [
        (UM, 1, True),
        (UM, 3, True),
        (LAI, 1, True),
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 3, True),
        (LAI, 1, True),
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 3, True),
        (SR, 2, False),
        (LAI, 1, True),
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 3, True),
    ]
    assert {r["controller_epoch"] for r in out.requests} == {9}
    resent, shrink, election = (entries(r)[("t", 0)] for r in out.of(LAI, 3))
    # §19.8: the per-partition epoch is the writer's: 8 until this controller writes
    assert (lai(resent), resent["controller_epoch"]) == ((2, 5, [2, 3], 11), 8)
    assert (lai(shrink), shrink["controller_epoch"]) == ((-1, 6, [3], 12), 9)
    assert (lai(election), election["controller_epoch"]) == ((3, 7, [3], 13), 9)


def test_controller_epoch_must_grow() -> None:
    """§7.1: a controller wins /controller_epoch = old + 1; an event naming an epoch that
    is not greater than the current one is rejected and changes nothing."""
    c = Cluster(brokers=[1])
    c.send({"type": "controller_failover", "controller": 1, "controller_epoch": 4})
    assert c.cluster_row()["controller_epoch"] == 4
    out = c.send({"type": "controller_failover", "controller": 1, "controller_epoch": 4})
    assert [r["reason"] for r in out.rejected] == [
        "controller_epoch 4 is not greater than the current controller epoch 4: a new "
        "controller's epoch always is"
    ]
    assert out.requests == []
    c.failover(controller=1)
    assert c.cluster_row()["controller_epoch"] == 5


def test_snapshot_of_the_first_controller_keeps_epoch_1() -> None:
    """§7.1/§7.2: a cluster whose controller won epoch 1 (it never failed over) is
    snapshotted as that controller's failover with controller_epoch 1: the controller kcsim
    had before (unnamed, epoch 1) is the same one, so the event is applied at epoch 1, and
    the state it loaded keeps its stored epoch. Once a controller is named, 1 is refused."""
    c = Cluster(brokers=[1, 2])
    state = {"0": {"leader": 1, "leader_epoch": 0, "isr": [1, 2], "partition_epoch": 0}}
    state["0"]["controller_epoch"] = 1
    c.send({"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2]}, "state": state})
    out = c.send({"type": "controller_failover", "controller": 2, "controller_epoch": 1})
    assert out.rejected == []
    assert c.cluster_row()["controller_epoch"] == 1
    assert [(r["type"], r["controller_epoch"]) for r in out.requests][:1] == [("UpdateMetadata", 1)]
    row = c.partition("t", 0)
    assert (row["leader"], row["leader_epoch"], row["controller_epoch"]) == (1, 0, 1)
    again = c.send({"type": "controller_failover", "controller": 1, "controller_epoch": 1})
    assert [r["reason"] for r in again.rejected] == [
        "controller_epoch 1 is not greater than the current controller epoch 1: a new "
        "controller's epoch always is"
    ]


def test_partition_creation_with_state_and_new_partitions_together() -> None:
    """Partitions of the assignment without `state` are new partitions, created as before
    (§10.3); those with one are loaded. A stored leader that is live leaves the partition
    Online, with no request."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    stored = {
        "leader": 2,
        "leader_epoch": 3,
        "isr": [2, 1],
        "partition_epoch": 4,
        "controller_epoch": 1,
    }
    out = c.send(
        {
            "type": "partition_creation",
            "topic": "t",
            "assignment": {"1": [2, 1], "2": [1, 2]},
            "state": {"1": stored},
        }
    )
    assert c.state("t", 1) == ("OnlinePartition", 2, [2, 1], 3, 4)
    assert c.state("t", 2) == ("OnlinePartition", 1, [1, 2], 0, 0)
    assert sorted({tp for r in out.of(LAI) for tp in entries(r)}) == [("t", 2)]
    assert {(s["topic"], s["partition"]) for s in out.state_changes} == {("t", 2)}


def cluster_deleting_with_a_broker_down() -> Cluster:
    """`gone` [1, 2], [2, 3] with broker 2 dead, then deleted: its live replicas are
    removed from the ISRs (epochs + 1) and answer, the replicas on broker 2 keep the topic
    ineligible (SPEC §15.3, §15.4). `kept` [2, 1] stays led by 1."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("gone", {0: [1, 2], 1: [2, 3]})
    c.create("kept", {0: [2, 1]})
    c.fail(2)
    c.delete("gone")
    c.stop_replica_response("gone", 0, 1)
    c.stop_replica_response("gone", 1, 3)
    assert c.topic("gone")["deletion"] == "ineligible"
    assert c.state("gone", 0) == ("NonExistentPartition", -1, [1], 2, 2)
    return c


def test_snapshot_of_a_queued_deletion_replays_to_the_same_failover() -> None:
    """§7.2 steps 5-6 come before the state machines' startup (steps 8-9): a topic queued
    for deletion when a snapshot is taken is queued before the failover's election, which
    leaves its offline partitions alone (§7.2 step 9), so the snapshot carries the queue
    (`deletion`: "queued" on its `topic_creation`) as it carries the state znodes. Replayed
    into a fresh simulator, the failover and the broker's return leave the same rows and
    send the same requests as in the original cluster, up to the deletion's completion."""
    original = cluster_deleting_with_a_broker_down()
    events = snapshot_events(tables(original), controller=3, controller_epoch=2)
    gone = next(e for e in events if e.get("topic") == "gone")
    assert gone["deletion"] == "queued" and "deletion" not in events[-2]
    shadow = Cluster()
    outs = [shadow.send(event) for event in events]
    assert all(out.rejected == [] for out in outs)
    loaded = outs[-3]  # `gone`: loaded queued, nothing run
    assert (loaded.requests, loaded.state_changes) == ([], [])
    assert shadow.topic("gone")["deletion"] == "ineligible"
    reference = original.failover(controller=3)
    ours, theirs = tables(shadow), tables(original)
    for table in ("partition_state", "replica_state"):
        assert without_event_ids(ours[table]) == without_event_ids(theirs[table]), table
    assert ours["topics"] == theirs["topics"]
    assert requests(outs[-1]) == requests(reference)
    # the failover left `gone` unelected, as Kafka does
    assert shadow.state("kept", 0)[:2] == ("OnlinePartition", 1)
    assert shadow.state("gone", 0) == ("OfflinePartition", -1, [1], 2, 2)
    assert shadow.state("gone", 1)[:2] == ("OfflinePartition", -1)
    # §8.2 step 7 / §15.5: broker 2 back resumes the deletion; the answers complete it
    for c in (shadow, original):
        back = c.start(2)
        # one per broker of each batch: OfflineReplica (delete=false), then Started (§15.3)
        assert sorted(back.recipients("StopReplica")) == [1, 1, 2, 2, 3, 3]
        for p, broker in ((0, 1), (0, 2), (1, 2), (1, 3)):
            c.stop_replica_response("gone", p, broker)
        assert c.topic("gone") is None and c.partition("gone", 0) is None
    ours, theirs = tables(shadow), tables(original)
    assert without_event_ids(ours["partition_state"]) == without_event_ids(
        theirs["partition_state"]
    )


def test_failover_leaves_a_queued_topics_offline_partitions_unelected() -> None:
    """§7.2: the queue is read (steps 5-6) before the partition state machine's startup,
    whose election skips topics queued for deletion (step 9). t-0 [1, 2] is stored as
    the deletion left it (leader -1, ISR [1]: the live replica removed, the last member
    kept) with broker 2 down: the failover elects nothing and writes nothing, and the
    topic stays ineligible. Broker 2's return resumes it (§15.5): onTopicDeletion removes
    1 from the ISR again (epoch + 1, §19.3) and sends StopReplica(delete) to both."""
    c = Cluster(brokers=[1])
    stored = {"leader": -1, "leader_epoch": 4, "isr": [1], "partition_epoch": 6}
    stored["controller_epoch"] = 2
    event = {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2]}}
    out = c.send(event | {"state": {"0": stored}, "deletion": "queued"})
    assert (out.requests, out.state_changes, out.rejected) == ([], [], [])
    assert c.topic("t")["deletion"] == "ineligible"
    out = c.send({"type": "controller_failover", "controller": 1, "controller_epoch": 3})
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 4, 6)
    assert [s for s in out.state_changes if s["entity"] == "partition"] == []
    assert c.topic("t")["deletion"] == "ineligible"
    assert c.replicas("t", 0) == {1: "OnlineReplica", 2: "OfflineReplica"}
    c.send({"type": "broker_startup", "broker": 2})
    assert c.state("t", 0) == ("NonExistentPartition", -1, [1], 5, 7)
    assert c.replicas("t", 0) == {1: "ReplicaDeletionStarted", 2: "ReplicaDeletionStarted"}
    c.stop_replica_response("t", 0, 1)
    c.stop_replica_response("t", 0, 2)
    assert c.topic("t") is None


def test_queued_topic_without_state_is_not_initialized() -> None:
    """A queued topic's partition with no state znode was never initialized; loaded, it
    is NewPartition, and neither the failover nor a broker startup initializes it while
    the topic is queued (§7.2 step 9, §8.2 step 5). `deletion` needs an assignment, and
    "queued" is its only value (ineligibility is the loading controller's to compute)."""
    c = Cluster(brokers=[1])
    event = {"type": "topic_creation", "topic": "t", "assignment": {"0": [1]}}
    c.send(event | {"deletion": "queued"})
    assert c.partition("t", 0)["state"] == "NewPartition"
    assert c.topic("t")["deletion"] == "queued"
    c.send({"type": "broker_startup", "broker": 2})  # no replica there: nothing resumes
    assert c.partition("t", 0)["state"] == "NewPartition"
    out = c.send({"type": "controller_failover", "controller": 1, "controller_epoch": 2})
    # every replica live: the failover's tryTopicDeletion starts it (§7.2 step 11)
    assert c.partition("t", 0)["state"] == "NonExistentPartition"
    assert c.replicas("t", 0) == {1: "ReplicaDeletionStarted"}
    assert out.recipients("StopReplica") == [1, 1]
    c.stop_replica_response("t", 0, 1)
    assert c.topic("t") is None
    ineligible = {"type": "topic_creation", "topic": "u", "assignment": {"0": [1]}}
    out = c.send(ineligible | {"deletion": "ineligible"})
    assert 'field \'deletion\' must be "queued", got "ineligible"' in out.rejected[0]["reason"]
    by_count = {"type": "topic_creation", "topic": "u", "partitions": 1, "replication_factor": 1}
    out = c.send(by_count | {"deletion": "queued"})
    assert "field 'deletion' needs an 'assignment'" in out.rejected[0]["reason"]
    assert c.topic("u") is None
