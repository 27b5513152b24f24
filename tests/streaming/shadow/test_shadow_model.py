"""The shadow's pure model: recorded ZooKeeper change sequences → CONTRACT §1 events.

The sequences follow what a Kafka 3.7.1 controller writes (SPEC §8 broker changes, §10
creation, §11 controlled shutdown, §13.1 AlterPartition, §14 reassignment, §15 deletion,
§7.2 failover); the znode texts are the ones Kafka writes (checked against a real cluster).
"""

from __future__ import annotations

import json

import pytest

from controller.config import Settings
from controller.replay.command import replay
from streaming.shadow.model import SEQ_SHIFT, ShadowModel
from streaming.shadow.znodes import (
    BadZnode,
    Broker,
    Change,
    Controller,
    PartitionState,
    Snapshot,
    Topic,
    ZnodeError,
    parse_broker,
    parse_controller,
    parse_state,
    parse_topic,
)

BROKER_JSON = (
    b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
    b'"endpoints":["PLAINTEXT://127.0.0.1:52345"],"rack":"r1","jmx_port":-1,"port":52345,'
    b'"host":"127.0.0.1","version":5,"timestamp":"1795535357778"}'
)


def state(leader: int, epoch: int, isr: list[int], version: int, cepoch: int = 1):
    return PartitionState(leader, epoch, tuple(isr), cepoch, version, "RECOVERED")


def topic(assignment: dict[int, list[int]], adding=None, removing=None) -> Topic:
    def conv(m):
        return {p: tuple(r) for p, r in (m or {}).items()}

    return Topic(conv(assignment), conv(adding), conv(removing))


def started(brokers=(1, 2, 3), topics=None, states=None, controller=1) -> ShadowModel:
    """A model bootstrapped from a snapshot at zxid 0x100."""
    snap = Snapshot(zxid=0x100)
    snap.brokers = {b: Broker(0x10 + b, f"r{b}", 5) for b in brokers}
    snap.topics = {t: (v, 0x20) for t, v in (topics or {}).items()}
    snap.states = {k: (v, 0x30) for k, v in (states or {}).items()}
    snap.controller = (Controller(controller, 1, -1), 0x40)
    model = ShadowModel("c")
    model.bootstrap(snap)
    return model


T = {"t": topic({0: [1, 2], 1: [2, 3], 2: [3, 1]})}
S = {
    ("t", 0): state(1, 0, [1, 2], 0),
    ("t", 1): state(2, 0, [2, 3], 0),
    ("t", 2): state(3, 0, [3, 1], 0),
}


def observed(event) -> dict:
    return {(r["topic"], r["partition"]): r for r in event["observed"]["partitions"]}


# ------------------------------------------------------------------ znode parsing


def test_znode_texts_as_kafka_writes_them():
    assert parse_broker(BROKER_JSON, 59, "/brokers/ids/1") == Broker(59, "r1", 5)
    topic_json = (
        b'{"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"x",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    assert parse_topic(topic_json, "p").assignment == {0: (1, 2), 1: (2, 3)}
    state_json = (
        b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":4,'
        b'"isr":[1,2],"leader_recovery_state":0}'
    )
    assert parse_state(state_json, 7, "p") == state(1, 4, [1, 2], 7)
    controller_json = b'{"version":2,"brokerid":1,"timestamp":"1","kraftControllerEpoch":-1}'
    assert parse_controller(controller_json, b"3", "p") == Controller(1, 3, -1)


@pytest.mark.parametrize(
    "data",
    [b"not json", b"[1]", b'{"leader":"x","leader_epoch":0,"isr":[],"controller_epoch":1}'],
)
def test_garbage_state_is_a_znode_error(data):
    with pytest.raises(ZnodeError):
        parse_state(data, 0, "/brokers/topics/t/partitions/0/state")


# ------------------------------------------------------------------------- start


def test_bootstrap_loads_brokers_topics_state_then_fails_over():
    """SPEC §7.2: a topic queued for deletion is queued before the failover's state
    machines start (steps 5-6 before 8-9), so its `topic_creation` carries the stored
    queue (`deletion`) and the failover, not a later `topic_deletion`, finds it queued."""
    snap = Snapshot(zxid=0x100)
    snap.brokers = {2: Broker(0x12, None, 5), 1: Broker(0x11, "a", 5)}
    snap.topics = {"t": (T["t"], 0x20)}
    snap.states = {k: (v, 0x30) for k, v in S.items()}
    snap.controller = (Controller(2, 4, -1), 0x40)
    snap.deletes = {"t": 0x50}
    events = ShadowModel("c").bootstrap(snap)
    assert [e["type"] for e in events] == [
        "broker_startup",
        "broker_startup",
        "topic_creation",
        "controller_failover",
    ]
    assert events[2]["deletion"] == "queued"
    assert events[0]["broker"] == 1 and events[0]["rack"] == "a" and "rack" not in events[1]
    assert events[2]["assignment"] == {"0": [1, 2], "1": [2, 3], "2": [3, 1]}
    assert events[2]["state"]["1"] == {
        "leader": 2,
        "leader_epoch": 0,
        "isr": [2, 3],
        "partition_epoch": 0,
        "controller_epoch": 1,
        "leader_recovery_state": "RECOVERED",
    }
    failover = events[3]
    assert (failover["controller"], failover["controller_epoch"]) == (2, 4)
    assert len(failover["observed"]["partitions"]) == 3
    assert [e["event_id"] for e in events] == [f"c:zx100:{n}" for n in range(4)]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and seqs[0] == 0x100 << SEQ_SHIFT


# ---------------------------------------------------------------- broker changes


def test_broker_failure_collects_the_controllers_writes():
    """SPEC §9.1: broker 3 fails; t-1 and t-2 lose a replica, t-0 is untouched."""
    model = started(topics=T, states=S)
    model.apply(
        [
            Change(0x200, "broker", 3),
            Change(0x201, "state", ("t", 2), state(1, 1, [1], 1)),
            Change(0x202, "state", ("t", 1), state(2, 1, [2], 1)),
        ]
    )
    [event] = model.flush()
    assert event["type"] == "broker_failure" and event["broker"] == 3
    assert event["event_id"] == "c:zx200:0"
    assert set(observed(event)) == {("t", 1), ("t", 2)}
    assert observed(event)["t", 2]["leader"] == 1
    assert observed(event)["t", 2]["replicas"] == [3, 1]


def test_several_registrations_before_any_write_are_one_broker_change():
    model = started(topics=T, states=S)
    model.apply(
        [
            Change(0x200, "broker", 2),
            Change(0x201, "broker", 3),
            Change(0x202, "state", ("t", 1), state(-1, 1, [2], 1)),
        ]
    )
    [event] = model.flush()
    assert event["type"] == "broker_failure" and event["brokers"] == [2, 3]
    assert "broker" not in event


def test_replaced_registration_is_a_bounce():
    model = started(topics=T, states=S)
    model.apply([Change(0x300, "broker", 2, Broker(0x300, "r2", 5))])
    [event] = model.flush()
    assert (event["type"], event["broker"], event["rack"]) == ("broker_startup", 2, "r2")


def test_controlled_shutdown_is_inferred_before_the_failure():
    """SPEC §11: broker 2 stops gracefully: the controller moves its leadership and shrinks
    ISRs while 2 is still registered; its registration vanishes later."""
    model = started(topics=T, states=S)
    model.apply(
        [
            Change(0x200, "state", ("t", 1), state(3, 1, [3], 1)),
            Change(0x201, "state", ("t", 0), state(1, 1, [1], 1)),
            Change(0x210, "broker", 2),
        ]
    )
    shutdown, failure = model.flush()
    assert shutdown["type"] == "controlled_shutdown" and shutdown["broker"] == 2
    assert shutdown["broker_epoch"] == 0x12
    assert set(observed(shutdown)) == {("t", 0), ("t", 1)}
    assert failure["type"] == "broker_failure" and failure["observed"] == {"partitions": []}
    assert shutdown["seq"] < failure["seq"]


def test_alter_partition_keeps_the_leader_epoch():
    """SPEC §13.1: a leader adds a caught-up replica: version + 1, same leader epoch."""
    model = started(topics=T, states={**S, ("t", 1): state(2, 1, [2], 1)})
    model.apply([Change(0x200, "state", ("t", 1), state(2, 1, [2, 3], 2))])
    [event] = model.flush()
    assert {k: event[k] for k in ("type", "topic", "partition", "isr", "leader_epoch")} == {
        "type": "isr_change",
        "topic": "t",
        "partition": 1,
        "isr": [2, 3],
        "leader_epoch": 1,
    }
    assert event["partition_epoch"] == 1  # the request's base: the previous version
    assert observed(event)["t", 1]["partition_epoch"] == 2


def test_preferred_elections_in_a_row_are_one_event():
    states = {**S, ("t", 0): state(2, 1, [2, 1], 1), ("t", 1): state(3, 1, [3, 2], 1)}
    model = started(topics=T, states=states)
    model.apply(
        [
            Change(0x200, "state", ("t", 0), state(1, 2, [2, 1], 2)),
            Change(0x201, "state", ("t", 1), state(2, 2, [3, 2], 2)),
        ]
    )
    [event] = model.flush()
    assert event["type"] == "leader_election" and event["election"] == "preferred"
    assert event["partitions"] == [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]


def test_unclean_election_follows_its_config_change():
    """SPEC §16: enabling unclean election on a topic elects the offline partition's
    leader from outside the ISR; the config change is the cause."""
    states = {**S, ("t", 1): state(-1, 1, [2], 1)}  # 2 dead, 3 alive but not in the ISR
    model = started(brokers=(1, 3), topics=T, states=states)
    configs = {"unclean.leader.election.enable": "true"}
    model.apply(
        [
            Change(0x200, "config", "t", configs),
            Change(0x201, "state", ("t", 1), state(3, 2, [3], 2)),
        ]
    )
    [event] = model.flush()
    assert event["type"] == "topic_config_change" and event["configs"] == configs
    assert observed(event)["t", 1]["leader"] == 3


# --------------------------------------------------------------- topics


def test_topic_creation_and_partition_creation_with_their_writes():
    model = started()
    model.apply(
        [
            Change(0x200, "topic", "n", topic({0: [1, 2]})),
            Change(0x201, "state", ("n", 0), state(1, 0, [1, 2], 0)),
            Change(0x300, "topic", "n", topic({0: [1, 2], 1: [3, 1]})),
            Change(0x301, "state", ("n", 1), state(3, 0, [3, 1], 0)),
        ]
    )
    creation, added = model.flush()
    assert creation["type"] == "topic_creation" and creation["assignment"] == {"0": [1, 2]}
    assert "state" not in creation  # a live creation: kcsim elects, observed says what Kafka did
    assert set(observed(creation)) == {("n", 0)}
    assert added["type"] == "partition_creation" and added["assignment"] == {"1": [3, 1]}
    # a partition creation's scope is its topic: the partition it did not write is
    # observed as it was (kcsim compares the whole topic)
    assert set(observed(added)) == {("n", 0), ("n", 1)}
    assert observed(added)["n", 0]["partition_epoch"] == 0


def test_a_shutdown_inside_a_creations_window_is_not_the_creations():
    """SPEC §10.3, §11: a creation only creates state znodes; a write of an existing one
    that drops a registered broker from the ISR is that broker's ControlledShutdown, even
    while the creation is still pending. Each event observes its own writes."""
    model = started()
    model.apply(
        [
            Change(0x200, "topic", "n", topic({0: [1, 2]})),
            Change(0x201, "state", ("n", 0), state(1, 0, [1, 2], 0)),
            Change(0x210, "state", ("n", 0), state(2, 1, [2], 1)),
        ]
    )
    creation, shutdown = model.flush()
    assert observed(creation)["n", 0]["leader"] == 1
    assert (shutdown["type"], shutdown["broker"]) == ("controlled_shutdown", 1)
    assert observed(shutdown)["n", 0]["isr"] == [2]


def test_causes_of_one_zxid_get_distinct_event_ids():
    """A registration and a topic znode's removal read with one zxid are two causes; their
    events' ids still differ (a repeated id is a duplicate kcsim rejects)."""
    model = started(topics={"d": topic({0: [1, 2]})})
    model.apply([Change(0x300, "broker", 4, Broker(0x300, None, 5)), Change(0x300, "topic", "d")])
    emitted = model.flush()
    assert [e["type"] for e in emitted] == [
        "broker_startup",
        "topic_deletion",
        "stop_replica_response",
        "stop_replica_response",
    ]
    ids = [e["event_id"] for e in emitted]
    assert len(set(ids)) == 4


def test_reassignment_then_completion_on_the_alter_partition():
    """SPEC §14: [1,2] → [2,3]: phase A bumps the epoch; 3 joins the ISR (AlterPartition);
    the controller completes: new leader or epoch bump, 1 removed, topic znode rewritten."""
    model = started(topics=T, states=S)
    moving = topic({0: [2, 3, 1], 1: [2, 3], 2: [3, 1]}, adding={0: [3]}, removing={0: [1]})
    model.apply(
        [
            Change(0x200, "topic", "t", moving),
            Change(0x201, "state", ("t", 0), state(1, 1, [1, 2], 1)),
            Change(0x210, "state", ("t", 0), state(1, 1, [1, 2, 3], 2)),
            Change(0x211, "state", ("t", 0), state(2, 3, [2, 3], 4)),
            Change(0x212, "topic", "t", topic({0: [2, 3], 1: [2, 3], 2: [3, 1]})),
        ]
    )
    reassignment, alter = model.flush()
    assert reassignment["type"] == "partition_reassignment"
    assert (reassignment["partition"], reassignment["replicas"]) == (0, [2, 3])
    # each event's observed is the state its own writes left (phase A), not the final one
    assert observed(reassignment)["t", 0]["leader_epoch"] == 1
    assert observed(reassignment)["t", 0]["replicas"] == [2, 3, 1]
    assert observed(alter)["t", 0]["leader_epoch"] == 3
    assert alter["type"] == "isr_change" and alter["isr"] == [1, 2, 3]
    assert observed(alter)["t", 0]["replicas"] == [2, 3]


def test_deletion_completes_with_stop_replica_answers_of_live_brokers():
    """SPEC §15: the controller deletes the topic znode once every replica answered."""
    model = started(brokers=(1, 2, 3), topics={"d": topic({0: [1, 2]})})
    model.apply([Change(0x200, "delete", "d", True), Change(0x210, "topic", "d")])
    deletion, *answers = model.flush()
    assert deletion["type"] == "topic_deletion"
    assert [(a["type"], a["partition"], a["broker"], a["error"]) for a in answers] == [
        ("stop_replica_response", 0, 1, None),
        ("stop_replica_response", 0, 2, None),
    ]
    assert answers[-1]["observed"] == {"partitions": [], "deleted_topics": ["d"]}
    assert [a["event_id"] for a in answers] == ["c:zx200:1", "c:zx200:2"]


def test_a_replica_on_a_down_broker_answers_only_when_the_deletion_completes():
    """SPEC §15.3/§15.4: the live replicas answer StopReplica(delete) at once; the one on a
    down broker is ineligible until its broker is back, and answers last."""
    model = started(brokers=(2, 3), topics={"d": topic({0: [1, 2], 1: [2, 3]})})
    model.apply([Change(0x200, "delete", "d", True)])
    deletion, *answers = model.flush()
    assert deletion["type"] == "topic_deletion"
    assert [(a["partition"], a["broker"]) for a in answers] == [(0, 2), (1, 2), (1, 3)]
    assert all("observed" not in a for a in answers)  # the deletion is not complete yet
    model.apply([Change(0x300, "broker", 1, Broker(0x300, None, 5)), Change(0x310, "topic", "d")])
    startup, last = model.flush()
    assert startup["type"] == "broker_startup"
    assert (last["type"], last["partition"], last["broker"]) == ("stop_replica_response", 0, 1)
    assert last["observed"] == {"partitions": [], "deleted_topics": ["d"]}
    assert ("d", 0) not in model.states


def test_a_deletion_completed_before_its_writes_were_read_observes_nothing():
    """SPEC §15.3: onTopicDeletion removes every live replica from the ISR (epoch bumps),
    then the topic's znodes go. Several topics deleted at once complete before the shadow
    reads their state znodes: it read them gone (stamped with the last zxid it knew, below
    the request's) and never saw the deletion's writes. The deletion carries no observed
    (the state its writes left is unknown; its pre-deletion state would be a false
    difference), and the last answer still observes the completion."""
    model = started(topics={"d": topic({0: [1, 2]}), "e": topic({0: [2, 3]})})
    model.apply([Change(0x120, "state", ("d", 0), state(1, 0, [1, 2], 0))])
    model.apply([Change(0x121, "state", ("e", 0), state(2, 0, [2, 3], 0))])
    model.flush()
    last = model.last_zxid
    model.apply(
        [
            Change(last, "state", ("d", 0)),
            Change(0x200, "delete", "d", True),
            Change(0x201, "delete", "e", True),
            Change(0x210, "topic", "d"),
        ]
    )
    model.apply([Change(model.last_zxid, "state", ("e", 0)), Change(0x220, "topic", "e")])
    events = model.flush()
    deletions = [e for e in events if e["type"] == "topic_deletion"]
    assert [e["topic"] for e in deletions] == ["d", "e"]
    assert all("observed" not in e for e in deletions)
    answers = [e for e in events if "observed" in e]
    assert [e["observed"]["deleted_topics"] for e in answers] == [["d"], ["e"]]
    assert all(e["observed"]["partitions"] == [] for e in answers)


def test_a_deletion_whose_writes_were_read_keeps_its_observed():
    """SPEC §15.3: the ISR removal read before the znodes go is what the deletion left:
    its observed stands when the state znode then vanishes with the topic."""
    model = started(topics={"d": topic({0: [1, 2]})}, states={("d", 0): state(1, 0, [1, 2], 0)})
    model.apply([Change(0x200, "delete", "d", True)])
    model.apply([Change(0x202, "state", ("d", 0), state(-1, 2, [2], 2))])
    model.apply([Change(model.last_zxid, "state", ("d", 0)), Change(0x210, "topic", "d")])
    deletion, *_ = model.flush()
    assert observed(deletion)["d", 0]["leader_epoch"] == 2


def test_an_alter_partition_written_after_a_deletion_request_but_before_its_writes():
    """SPEC §15.1-15.3, §13.1, recorded in the chaos run (seed 12): the DeleteTopics request
    creates /admin/delete_topics/d (0x229), a leader's AlterPartition adding 3 back is
    written (0x22b), then the deletion's ISR removals (0x22d). The controller handled the
    AlterPartition first (the deletion's writes build on it), so it goes before the
    deletion, and the deletion's writes stay the deletion's."""
    model = started(topics={"d": topic({0: [1, 3]})}, states={("d", 0): state(1, 1, [1], 3)})
    model.apply([Change(0x229, "delete", "d", True)])
    model.apply([Change(0x22B, "state", ("d", 0), state(1, 1, [1, 3], 4))])
    model.apply([Change(0x22D, "state", ("d", 0), state(-1, 3, [3], 6))])
    alter, deletion, *answers = model.flush()
    assert (alter["type"], alter["isr"], alter["partition_epoch"]) == ("isr_change", [1, 3], 3)
    assert observed(alter)["d", 0]["partition_epoch"] == 4
    assert deletion["type"] == "topic_deletion"
    assert observed(deletion)["d", 0]["partition_epoch"] == 6
    assert [a["type"] for a in answers] == ["stop_replica_response"] * 2
    seqs = [e["seq"] for e in (alter, deletion, *answers)]
    assert seqs == sorted(seqs) and len({e["event_id"] for e in (alter, deletion)}) == 2


def test_a_deletion_queued_at_start_is_answered_by_every_replica_at_completion():
    """SPEC §7.2, §15.5: a topic queued when the shadow starts was loaded by the failover
    with its replicas' deletion states forgotten (Online / Offline), so the deletion the
    returning broker resumes sends StopReplica(delete) to every replica, and all answer
    when it completes (the earlier answers went to the controller that was then running)."""
    snap = Snapshot(zxid=0x100)
    snap.brokers = {2: Broker(0x12, None, 5), 3: Broker(0x13, None, 5)}
    snap.topics = {"d": (topic({0: [1, 2], 1: [2, 3]}), 0x20)}
    snap.states = {("d", p): (state(-1, 1, [2 + p], 1), 0x30) for p in (0, 1)}
    snap.controller = (Controller(2, 4, -1), 0x40)
    snap.deletes = {"d": 0x50}
    model = ShadowModel("c")
    creation = next(e for e in model.bootstrap(snap) if e["type"] == "topic_creation")
    assert creation["deletion"] == "queued" and model.deleting == {"d"}
    model.apply([Change(0x300, "broker", 1, Broker(0x300, None, 5)), Change(0x310, "topic", "d")])
    startup, *answers = model.flush()
    assert startup["type"] == "broker_startup"
    assert [(a["partition"], a["broker"]) for a in answers] == [(0, 1), (0, 2), (1, 2), (1, 3)]
    assert answers[-1]["observed"] == {"partitions": [], "deleted_topics": ["d"]}
    assert model.deleting == set() and "d" not in model.topics


def test_new_controller_takes_the_old_ones_registration_as_failed():
    """SPEC §7.2: the old controller's session ends: /controller and its registration
    vanish together; the new controller loads with it dead."""
    model = started(topics=T, states=S, controller=1)
    model.apply(
        [
            Change(0x200, "broker", 1),
            Change(0x200, "controller", None, None),
            Change(0x205, "controller", None, Controller(2, 2, -1)),
            Change(0x206, "state", ("t", 0), state(2, 1, [2], 1, cepoch=2)),
        ]
    )
    [event] = model.flush()
    assert event["type"] == "controller_failover" and event["failed_brokers"] == [1]
    assert (event["controller"], event["controller_epoch"]) == (2, 2)
    assert observed(event)["t", 0]["controller_epoch"] == 2


# --------------------------------------------------------- order, ids, restart


def test_events_follow_zxid_order_whatever_the_arrival_order():
    model = started(topics=T, states=S)
    model.apply(
        [
            Change(0x300, "state", ("t", 1), state(2, 0, [2], 1)),
            Change(0x2FF, "broker", 3),
        ]
    )
    failure, alter = model.flush()
    assert failure["type"] == "broker_failure" and alter["type"] == "isr_change"
    assert failure["seq"] < alter["seq"]


def test_restart_diff_emits_only_what_changed_and_seqs_keep_increasing():
    model = started(topics=T, states=S)
    last = model.last_seq
    saved = json.loads(json.dumps(model.to_json()))
    restarted = ShadowModel.from_json(saved)
    snap = Snapshot(zxid=0x400)
    snap.brokers = {1: Broker(0x11, "r1", 5), 2: Broker(0x12, "r2", 5)}  # 3 gone
    snap.brokers_pzxid = 0x400
    snap.topics = {"t": (T["t"], 0x20)}
    snap.states = {k: (v, 0x30) for k, v in S.items()}
    snap.states["t", 2] = (state(1, 1, [1], 1), 0x401)
    snap.controller = (Controller(1, 1, -1), 0x40)
    restarted.apply(restarted.diff(snap))
    [event] = restarted.flush()
    assert event["type"] == "broker_failure" and event["broker"] == 3
    assert event["seq"] > last and set(observed(event)) == {("t", 2)}
    assert restarted.diff(snap) == []


def test_garbage_znode_becomes_a_line_kcsim_rejects():
    model = started()
    bad = BadZnode("/brokers/ids/7", "garbage{", "not JSON", "broker_startup")
    model.apply([Change(0x200, "bad", "/brokers/ids/7", bad)])
    [event] = model.flush()
    assert event["type"] == "broker_startup" and "broker" not in event
    assert event["znode_data"] == "garbage{" and event["znode"] == "/brokers/ids/7"
    assert event["event_id"] == "c:zx200:0" and event["seq"] == 0x200 << SEQ_SHIFT
    # the same version read again (a sibling's watch re-reads /brokers/ids): no second line
    model.apply([Change(0x200, "bad", "/brokers/ids/7", bad)])
    assert model.flush() == []


def test_a_garbled_controller_znode_is_a_line_kcsim_rejects_not_a_failover(tmp_path):
    """controller_failover's fields are all optional: the line carries the znode's text as
    its `controller`, a mistyped field, so the replay rejects it (no epoch bump)."""
    model = started()
    bad = BadZnode("/controller", "{brokerid", "not JSON", "controller_failover")
    model.apply([Change(0x200, "bad", "/controller", bad)])
    [line] = model.flush()
    assert (line["type"], line["controller"], line["znode"]) == (
        "controller_failover",
        "{brokerid",
        "/controller",
    )
    events = tmp_path / "events.jsonl"
    startup = {"type": "broker_startup", "cluster": "c", "broker": 1, "seq": 1}
    events.write_text(json.dumps(startup) + "\n" + json.dumps(line) + "\n")
    replay(Settings.load(None, ()), events, tmp_path / "out")
    [rejected] = [json.loads(x) for x in (tmp_path / "out/rejected_events.jsonl").open()]
    assert rejected["reason"].startswith("field 'controller' must be")
    requests = [json.loads(x) for x in (tmp_path / "out/controller_requests.jsonl").open()]
    assert {r["controller_epoch"] for r in requests} == {1}


def test_unreadable_znodes_are_stamped_and_a_restart_writes_them_once():
    """The bootstrap's lines for unreadable znodes get ids and seqs after its events, so an
    output that holds them is known to (by seq); a restarted model re-reading the same
    versions writes nothing, a new version of one gets one line, and one gone or readable
    again is forgotten."""
    broker = Change(
        0x90,
        "bad",
        "/brokers/ids/7",
        BadZnode("/brokers/ids/7", "x{", "not JSON", "broker_startup"),
    )
    path = "/brokers/topics/t/partitions/0/state"
    garbled = Change(0xA0, "bad", path, BadZnode(path, "[1]", "not an object", "isr_change"))
    snap = Snapshot(zxid=0x100, brokers={1: Broker(0x11, None, 5)})
    snap.controller = (Controller(1, 1, -1), 0x40)
    snap.bad = [broker, garbled]
    model = ShadowModel("c")
    out = model.bootstrap(snap)
    assert [e["type"] for e in out] == [
        "broker_startup",
        "controller_failover",
        "broker_startup",
        "isr_change",
    ]
    assert [e["event_id"] for e in out] == [f"c:zx100:{n}" for n in range(4)]
    assert [e["seq"] for e in out] == [(0x100 << SEQ_SHIFT) + n for n in range(4)]
    assert [e.get("znode") for e in out[2:]] == ["/brokers/ids/7", path]
    assert "observed" not in out[3]

    restarted = ShadowModel.from_json(json.loads(json.dumps(model.to_json())))
    restarted.apply(restarted.diff(snap))
    assert restarted.flush() == []
    # broker 7 rewritten, still garbage; the state znode readable again (as the model has it)
    again = Change(
        0x300,
        "bad",
        "/brokers/ids/7",
        BadZnode("/brokers/ids/7", "y{", "not JSON", "broker_startup"),
    )
    snap.bad = [again]
    restarted.apply(restarted.diff(snap))
    [event] = restarted.flush()
    assert (event["znode_data"], event["event_id"]) == ("y{", "c:zx300:0")
    assert event["seq"] == 0x300 << SEQ_SHIFT
    assert restarted.bad == {"/brokers/ids/7": 0x300}
    assert restarted.diff(snap) == []


def test_writes_read_before_the_new_controller_belong_to_it():
    """SPEC §7.2: the old controller's broker vanished with it; state writes read before the
    new /controller are the new controller's (a dead controller writes nothing): one
    failover with failed_brokers, observing them."""
    model = started(topics=T, states=S, controller=2)
    model.apply([Change(0x730, "broker", 2), Change(0x730, "controller", None, None)])
    model.apply([Change(0x733, "state", ("t", 1), state(3, 1, [3], 1, 2))])
    model.apply([Change(0x731, "controller", None, Controller(1, 2, -1))])
    [failover] = model.flush()
    assert (failover["type"], failover["failed_brokers"]) == ("controller_failover", [2])
    assert observed(failover)["t", 1]["leader"] == 3


def test_a_reassignment_to_a_new_order_is_seen_on_the_topic_znode():
    """SPEC §14.3: [1, 2] → [2, 1] adds and removes nothing: the controller writes the new
    assignment and bumps the leader epoch at once; no adding/removing replicas show."""
    model = started(topics={"t": topic({0: [1, 2]})}, states={("t", 0): state(1, 0, [1, 2], 0)})
    model.apply(
        [
            Change(0x200, "topic", "t", topic({0: [2, 1]})),
            Change(0x201, "state", ("t", 0), state(1, 1, [1, 2], 1)),
        ]
    )
    [reassignment] = model.flush()
    assert (reassignment["type"], reassignment["replicas"]) == ("partition_reassignment", [2, 1])
    assert observed(reassignment)["t", 0]["leader_epoch"] == 1
    assert model.unexplained == 0


def test_a_reassignments_unseen_alter_partition_is_inferred():
    """SPEC §14.3/§14.4: [1, 2] → [3, 1, 2] read once at the end (phase A, 3's
    AlterPartition and the completion coalesced): the AlterPartition adding 3 is inferred,
    and the final state is its outcome."""
    model = started(topics={"t": topic({0: [1, 2]})}, states={("t", 0): state(1, 0, [1, 2], 0)})
    moving = topic({0: [3, 1, 2]}, adding={0: [3]})
    model.apply(
        [
            Change(0x200, "topic", "t", moving),
            Change(0x203, "state", ("t", 0), state(1, 2, [1, 2, 3], 3)),
            Change(0x204, "topic", "t", topic({0: [3, 1, 2]})),
        ]
    )
    reassignment, alter = model.flush()
    assert reassignment["type"] == "partition_reassignment"
    # its write went to the AlterPartition: no observed (an empty one says "no partition")
    assert "observed" not in reassignment
    assert (alter["type"], alter["isr"]) == ("isr_change", [1, 2, 3])
    assert "partition_epoch" not in alter  # the base kcsim holds after phase A
    assert observed(alter)["t", 0]["partition_epoch"] == 3


def test_two_replicas_catching_up_one_after_the_other_are_two_alter_partitions():
    """SPEC §14.3/§14.4, §19.2, recorded in the chaos run (seed 12): t-0 [1] → [3, 2].
    Phase A (version 1) is read; 3 and 2 then join the ISR by two AlterPartitions
    (versions 2, 3) and the completion elects 3 and removes 1 (versions 4, 5), all read at
    once. Four versions, two of them leader-epoch bumps: two AlterPartitions, so that kcsim
    counts the same versions (one AlterPartition of both gave version 4, not 5)."""
    model = started(topics={"t": topic({0: [1]})}, states={("t", 0): state(1, 0, [1], 0)})
    moving = topic({0: [3, 2, 1]}, adding={0: [3, 2]}, removing={0: [1]})
    model.apply([Change(0x378, "topic", "t", moving)])
    model.apply([Change(0x379, "state", ("t", 0), state(1, 1, [1], 1))])
    [reassignment] = model.flush()
    assert observed(reassignment)["t", 0]["partition_epoch"] == 1
    model.apply([Change(0x37C, "state", ("t", 0), state(3, 3, [3, 2], 5))])
    model.apply([Change(0x37D, "topic", "t", topic({0: [3, 2]}))])
    first, second = model.flush()
    assert [(e["type"], e["isr"]) for e in (first, second)] == [
        ("isr_change", [1, 3]),
        ("isr_change", [1, 3, 2]),
    ]
    assert "observed" not in first and observed(second)["t", 0]["partition_epoch"] == 5


def test_a_reassignment_read_only_at_its_end_takes_its_state_writes():
    """SPEC §14.3 phase B: [2, 1] → [1] (1 in the ISR) elects 1 and drops 2 before the
    topic znode's final write; read in that order, the state write first looked like a
    controlled shutdown of 2. It is the reassignment's."""
    model = started(topics={"t": topic({0: [2, 1]})}, states={("t", 0): state(2, 0, [2, 1], 0)})
    model.apply(
        [
            Change(0x200, "state", ("t", 0), state(1, 2, [1], 2)),
            Change(0x201, "topic", "t", topic({0: [1]})),
        ]
    )
    [reassignment] = model.flush()
    assert (reassignment["type"], reassignment["replicas"]) == ("partition_reassignment", [1])
    assert observed(reassignment)["t", 0]["isr"] == [1]


def test_writes_with_the_new_controllers_epoch_are_its_own():
    """SPEC §7.2: a write stamped with controller epoch 2 cannot be the epoch-1
    controller's handling of an earlier cause: it belongs to the failover that won epoch 2,
    even when read before the new /controller."""
    model = started(topics=T, states=S, controller=1)
    model.apply([Change(0x300, "broker", 3)])
    model.apply([Change(0x305, "state", ("t", 2), state(1, 1, [1], 1, 2))])
    model.apply([Change(0x302, "controller", None, Controller(2, 2, -1))])
    failure, failover = model.flush()
    assert failure["type"] == "broker_failure" and failure["observed"]["partitions"] == []
    assert observed(failover)["t", 2]["controller_epoch"] == 2


# ------------------------------------------- attribution by zxid, not by read order


def test_a_late_controller_takes_only_the_writes_made_after_its_election():
    """SPEC §7.2, §8.2: controller 1 dies (0x300), broker 2 wins epoch 2 (/controller czxid
    0x302) and takes t-2 offline (0x305); broker 3 registers (0x310) and the controller
    elects it for t-1 (0x312). /controller is read last: the failover takes the write made
    between its election and the registration, the registration keeps the one after it
    (both carry epoch 2)."""
    states = {**S, ("t", 1): state(-1, 1, [3], 1), ("t", 2): state(1, 1, [1], 1)}
    model = started(brokers=(1, 2), topics=T, states=states, controller=1)
    model.apply([Change(0x300, "broker", 1), Change(0x300, "controller", None, None)])
    model.apply([Change(0x305, "state", ("t", 2), state(-1, 2, [1], 2, cepoch=2))])
    model.apply([Change(0x310, "broker", 3, Broker(0x310, "r3", 5))])
    model.apply([Change(0x312, "state", ("t", 1), state(3, 2, [3], 2, cepoch=2))])
    model.apply([Change(0x302, "controller", None, Controller(2, 2, -1))])
    failover, startup = model.flush()
    assert (failover["type"], failover["failed_brokers"]) == ("controller_failover", [1])
    assert set(observed(failover)) == {("t", 2)}
    assert observed(failover)["t", 2]["leader"] == -1
    assert (startup["type"], startup["broker"]) == ("broker_startup", 3)
    assert set(observed(startup)) == {("t", 1)}
    assert observed(startup)["t", 1]["leader"] == 3
    assert failover["seq"] < startup["seq"]


def test_a_late_controller_claims_a_write_no_cause_explained_when_read():
    """SPEC §7.2: the new controller (czxid 0x402) moves t-0's leadership away from broker
    1, which is not registered: read before /controller, no pending cause could have made
    it (held unexplained); /controller's czxid is below its mzxid, so it is the
    failover's."""
    states = {**S, ("t", 0): state(1, 1, [1, 2], 1)}
    model = started(brokers=(2, 3), topics=T, states=states, controller=3)
    model.apply([Change(0x405, "state", ("t", 0), state(2, 2, [2], 2, cepoch=2))])
    model.apply([Change(0x402, "controller", None, Controller(2, 2, -1))])
    [failover] = model.flush()
    assert failover["type"] == "controller_failover"
    assert observed(failover)["t", 0]["leader"] == 2
    assert model.unexplained == 0


def test_a_failure_read_after_its_writes_takes_them_back_from_an_inferred_shutdown():
    """SPEC §9.1: broker 2 is killed (its registration gone at 0x500); the controller moves
    t-1's leadership to 3 and drops 2 from the ISR (0x502). The state write is read first,
    while 2 still looks registered, so it reads as a controlled shutdown of 2; the
    registration's zxid is below the write's: the failure made it, no shutdown was asked."""
    model = started(topics=T, states=S)
    model.apply([Change(0x502, "state", ("t", 1), state(3, 1, [3], 1))])
    model.apply([Change(0x500, "broker", 2)])
    [failure] = model.flush()
    assert (failure["type"], failure["broker"]) == ("broker_failure", 2)
    assert observed(failure)["t", 1]["leader"] == 3


def test_two_quick_operations_on_one_partition_split_by_zxid():
    """SPEC §13.1 then §14.3: t-1's leader adds 3 back to the ISR (AlterPartition, 0x600),
    then a reassignment of t-1 to [2, 3, 1] is requested (topic znode, 0x602) and the
    controller bumps the leader epoch for it (0x603). The epoch bump is read before the
    topic znode and first goes to the AlterPartition (the only cause then pending for
    t-1); the reassignment, read later with a zxid below the write's, takes it."""
    states = {**S, ("t", 1): state(2, 1, [2], 1)}
    model = started(topics=T, states=states)
    model.apply([Change(0x600, "state", ("t", 1), state(2, 1, [2, 3], 2))])
    model.apply([Change(0x603, "state", ("t", 1), state(2, 2, [2, 3], 3))])
    reassigning = topic({0: [1, 2], 1: [2, 3, 1], 2: [3, 1]}, adding={1: [1]})
    model.apply([Change(0x602, "topic", "t", reassigning)])
    alter, reassignment = model.flush()
    assert alter["type"] == "isr_change" and alter["isr"] == [2, 3]
    assert observed(alter)["t", 1]["partition_epoch"] == 2
    assert reassignment["type"] == "partition_reassignment"
    assert reassignment["replicas"] == [2, 3, 1]
    assert observed(reassignment)["t", 1]["leader_epoch"] == 2


def test_an_alter_partition_coalesced_with_a_completion_after_the_reassignment_was_written():
    """SPEC §14.3/§14.4, recorded in the chaos run: t-0 [3, 2] → [2, 1]. Phase A's write
    (leader epoch 1) is read and written out; replica 1 takes longer than the settle window
    to catch up, then its AlterPartition (version 3) and the completion (leader 2, 3 out of
    the ISR, version 5) come within one read. 3 is still registered, but it left the ISR
    because the reassignment removed it, not by a controlled shutdown: the topic znode
    still shows the reassignment running, so the AlterPartition adding 1 is inferred."""
    model = started(topics={"t": topic({0: [3, 2]})}, states={("t", 0): state(3, 0, [3, 2], 1)})
    moving = topic({0: [2, 1, 3]}, adding={0: [1]}, removing={0: [3]})
    model.apply([Change(0x22F, "topic", "t", moving)])
    model.apply([Change(0x230, "state", ("t", 0), state(3, 1, [3, 2], 2))])
    [reassignment] = model.flush()
    assert reassignment["type"] == "partition_reassignment"
    model.apply([Change(0x234, "state", ("t", 0), state(2, 3, [2, 1], 5))])
    model.apply([Change(0x235, "topic", "t", topic({0: [2, 1]}))])
    [alter] = model.flush()
    assert (alter["type"], alter["isr"]) == ("isr_change", [3, 2, 1])
    assert observed(alter)["t", 0]["leader"] == 2
    assert observed(alter)["t", 0]["replicas"] == [2, 1]


def test_the_controllers_failure_waits_for_a_slow_election():
    """SPEC §7.2, recorded in the chaos run: controller 2 is killed (its registration and
    /controller gone at 0x1ef) and the next election comes after the settle window. The
    failure is held, not written as one the old controller handled: it becomes the
    failover's failed_brokers when /controller reappears."""
    model = started(topics=T, states=S, controller=2)
    model.apply([Change(0x1EF, "broker", 2), Change(0x1EF, "controller", None, None)])
    assert model.flush() == []
    model.apply([Change(0x1F0, "controller", None, Controller(3, 2, -1))])
    model.apply([Change(0x1F2, "state", ("t", 1), state(3, 1, [3], 1, cepoch=2))])
    [failover] = model.flush()
    assert (failover["type"], failover["failed_brokers"]) == ("controller_failover", [2])
    assert observed(failover)["t", 1]["leader"] == 3


def test_the_old_controllers_registration_read_after_the_new_controller():
    """SPEC §7.2, recorded in the chaos run: controller 1 shuts down; its session's end
    removes its registration and /controller (0x10c), broker 3 is elected (0x10d). The
    /controller watch's read comes first, the registration's after it: the failure is
    still the failover's failed_brokers, not a failure the old controller handled."""
    model = started(topics=T, states=S, controller=1)
    model.apply([Change(0x10D, "controller", None, Controller(3, 2, -1))])
    model.apply([Change(0x10E, "state", ("t", 0), state(2, 1, [2], 1, cepoch=2))])
    model.apply([Change(0x10C, "broker", 1)])
    [failover] = model.flush()
    assert (failover["type"], failover["failed_brokers"]) == ("controller_failover", [1])
    assert observed(failover)["t", 0]["leader"] == 2


def test_a_deletion_of_a_topic_with_a_partition_never_started_keeps_its_observed():
    """SPEC §10 / §15.3: a partition created with every replica down has no state znode
    (NewPartition); it is no sign that the deletion completed before its writes were read,
    so the deletion still carries observed for the partitions that have state."""
    model = started(
        brokers=(1, 2, 3),
        topics={"d": topic({0: [1, 2], 1: [7, 8]})},
        states={("d", 0): state(1, 0, [1, 2], 0)},
    )
    model.apply([Change(0x200, "delete", "d", True)])
    model.apply([Change(0x202, "state", ("d", 0), state(-1, 2, [2], 2))])
    deletion, *_ = model.flush()
    assert deletion["type"] == "topic_deletion"
    assert observed(deletion)["d", 0]["leader_epoch"] == 2
