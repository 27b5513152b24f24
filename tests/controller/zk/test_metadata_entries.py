"""UpdateMetadata entries reused while unchanged (controller.zk.metadata_entries), their JSON
texts found by identity (controller.replay.table_files.EntryTexts), and the request batch
that shares them (SPEC §3.2, §3.4, §8.2)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.config import Settings
from controller.model import (
    BrokerStatus,
    LeaderAndIsr,
    PartitionState,
    ReplicaAssignment,
    TopicPartition,
)
from controller.replay import table_files as replay
from controller.zk.context import ControllerContext, Partition
from controller.zk.metadata_entries import FullBody, MetadataEntries
from schemas import TABLES
from tests.support.machines import Machines, lai
from tests.support.scenario import Cluster

Row = dict[str, Any]
TP = TopicPartition("t", 0)


def _context(brokers: tuple[int, ...] = (1, 2, 3)) -> tuple[ControllerContext, Partition]:
    context = ControllerContext("c")
    for broker in brokers:
        context.register_broker(broker, None, 100 + broker)
    context.add_topic("t", {})
    record = context.add_partition(TP, ReplicaAssignment((1, 2, 3)))
    context.set_leadership(record, LeaderAndIsr(1, 0, (1, 2, 3), 0))
    return context, record


def _entry(entries: MetadataEntries, context: ControllerContext, record: Partition) -> Row:
    out: dict[TopicPartition, Row] = {}
    entries.add_to(out, [record], context.topics_to_be_deleted, context.live_broker_set())
    return out[TP]


def test_an_unchanged_partition_gets_the_same_entry_and_every_input_change_a_new_one() -> None:
    """§3.4: an entry says the partition's leadership, replicas, offline replicas and
    deletion as they are at add time. A kept entry is handed out again only while none of
    them changed; each change below must show in the next entry, and an entry handed out
    before keeps what it said."""
    context, record = _context()
    entries = MetadataEntries()
    first = _entry(entries, context, record)
    assert (first["leader"], first["isr"], first["offline_replicas"]) == (1, [1, 2, 3], [])
    assert _entry(entries, context, record) is first

    context.set_leadership(record, LeaderAndIsr(2, 1, (2, 3), 1))  # a new leader
    led = _entry(entries, context, record)
    assert (led["leader"], led["leader_epoch"], led["isr"], led["partition_epoch"]) == (
        2,
        1,
        [2, 3],
        1,
    )
    assert (first["leader"], first["isr"]) == (1, [1, 2, 3])  # never changed once built

    context.set_broker_status(3, BrokerStatus.DEAD)  # a replica goes offline
    offline = _entry(entries, context, record)
    assert offline["offline_replicas"] == [3]
    assert offline is not led

    context.register_broker(4, None, 104)  # the live set is replaced, not this partition's
    assert _entry(entries, context, record) is offline

    context.set_assignment(record, ReplicaAssignment((2, 3, 4)))  # reassigned
    moved = _entry(entries, context, record)
    assert (moved["replicas"], moved["offline_replicas"]) == ([2, 3, 4], [3])

    context.topics_to_be_deleted.add("t")  # queued for deletion: leader -2, epochs 0
    deleting = _entry(entries, context, record)
    assert (deleting["leader"], deleting["leader_epoch"], deleting["partition_epoch"]) == (
        -2,
        0,
        0,
    )
    context.topics_to_be_deleted.discard("t")
    assert _entry(entries, context, record)["leader"] == 2


def test_a_recreated_partition_gets_its_own_entry_held_by_its_new_record() -> None:
    """A topic deleted and created again has new records: none gets the old topic's entry.
    An entry is held by its partition's record, so the deleted records take theirs with
    them (no table of entries to prune)."""
    context, _ = _context()
    entries = MetadataEntries()
    records = []
    for partition in range(1, 11):
        record = context.add_partition(TopicPartition("t", partition), ReplicaAssignment((1,)))
        context.set_leadership(record, LeaderAndIsr(1, 5, (1,), 5))
        records.append(record)
    out: dict[TopicPartition, Row] = {}
    entries.add_to(out, records, set(), context.live_broker_set())
    old = out[TopicPartition("t", 1)]
    assert records[0].metadata_entry is old
    context.remove_topic("t")
    context.add_topic("t", {})
    again = context.add_partition(TopicPartition("t", 1), ReplicaAssignment((2,)))
    context.set_leadership(again, LeaderAndIsr(2, 0, (2,), 0))
    out = {}
    entries.add_to(out, [again], set(), context.live_broker_set())
    assert out[TopicPartition("t", 1)] is not old
    assert out[TopicPartition("t", 1)]["leader"] == 2
    assert again.metadata_entry is out[TopicPartition("t", 1)]


def test_a_record_keeps_its_entry_until_its_leadership_or_replica_set_is_replaced() -> None:
    """The context drops a record's entry when it replaces the leadership or the replica
    set, and only then: writing back the same objects keeps it, so the next body reuses
    it; an entry for a topic queued for deletion is never kept (it changes with no change
    of the record)."""
    context, record = _context()
    entries = MetadataEntries()
    first = _entry(entries, context, record)
    assert record.metadata_entry is first
    context.set_leadership(record, record.leadership)  # the same object: no change
    context.set_assignment(record, ReplicaAssignment((1, 2, 3)))  # an equal replica set
    context.set_partition_state(record, PartitionState.ONLINE)
    assert record.metadata_entry is first
    assert _entry(entries, context, record) is first

    context.set_leadership(record, LeaderAndIsr(1, 0, (1, 2, 3), 0))  # equal, not the same
    assert record.metadata_entry is None
    second = _entry(entries, context, record)
    assert second is not first and second == first

    context.set_assignment(record, ReplicaAssignment((1, 2, 3, 4)))
    assert record.metadata_entry is None
    assert _entry(entries, context, record)["replicas"] == [1, 2, 3, 4]

    context.topics_to_be_deleted.add("t")
    kept = record.metadata_entry
    assert _entry(entries, context, record)["leader"] == -2
    assert record.metadata_entry is kept  # the queued topic's entry was not kept


def test_new_brokers_get_every_partition_as_it_is_after_a_rolling_restart() -> None:
    """§8.2: each broker startup sends the new broker an UpdateMetadata of every partition
    with a leader. Across a rolling restart (§11 controlled shutdown, §8.3 failure, §8.2
    startup) the entries of one body are reused in the next where unchanged: every entry
    must still say the partition's state at send time, and what the earlier body said is
    left as it was."""
    # brokers let restarted replicas back into the ISR (§13.1)
    cluster = Cluster(Settings(simulate_brokers=True), brokers=(1, 2, 3, 4))
    pairs = [[1, 2], [3, 4], [4, 3]]
    for topic in ("a", "b"):
        cluster.create(topic, {p: pairs[p % 3] for p in range(6)})
    bodies: list[list[Row]] = []
    snapshots: list[str] = []
    for broker in (1, 2, 3, 4):
        cluster.shutdown(broker)
        cluster.fail(broker)
        # the body is the first thing the startup sends: the state as the failure left it
        before = {(t, p): cluster.state(t, p)[1:] for t in ("a", "b") for p in range(6)}
        out = cluster.start(broker)
        (request,) = [r for r in out.of("UpdateMetadata", broker) if len(r["partitions"]) == 12]
        for entry in request["partitions"]:
            leader, isr, epoch, partition_epoch = before[entry["topic"], entry["partition"]]
            assert (entry["leader"], entry["isr"], entry["leader_epoch"]) == (leader, isr, epoch)
            assert entry["partition_epoch"] == partition_epoch
            assert entry["offline_replicas"] == []  # every broker is live again
        bodies.append(request["partitions"])
        snapshots.append(json.dumps(request["partitions"]))
    for body, text in zip(bodies, snapshots, strict=True):
        assert json.dumps(body) == text  # a later body changed no entry of an earlier one
    # between the startups of 3 and 4 the partitions on 1 and 2 did not change: their
    # entries are the ones sent before; the others' are new
    unchanged = [(a is b) == (a["replicas"] == [1, 2]) for a, b in zip(*bodies[2:], strict=True)]
    assert all(unchanged)


def test_a_leader_and_isr_entry_is_shared_by_its_recipients_but_is_new_stays_sticky() -> None:
    """§3.2: recipients of one add share its entry; a broker that already had an isNew
    entry for the partition in this batch keeps isNew = true."""
    m = Machines()
    record = m.add(leadership=lai(1, 0, (1,), 0), state=PartitionState.ONLINE)
    m.batch.new_batch()
    m.batch.add_leader_and_isr([2], TP, lai(1, 0, (1,), 0), record.assignment, is_new=True)
    m.batch.add_leader_and_isr([2, 3], TP, lai(1, 1, (1, 2), 1), record.assignment, False)
    m.batch.send()
    assert m.entry("LeaderAndIsr", 2)["is_new"] is True
    assert m.entry("LeaderAndIsr", 3)["is_new"] is False
    assert m.entry("LeaderAndIsr", 2)["leader_epoch"] == m.entry("LeaderAndIsr", 3)["leader_epoch"]


_SCALARS = st.none() | st.booleans() | st.integers() | st.text()
_JSON = st.recursive(
    _SCALARS | st.floats(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
# what the core's rows and request entries hold: no floats (a double column's table is
# encoded exactly, below); integers past 64 bits, lone surrogates and integer keys go
# orjson's error path
_NO_FLOATS = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text() | st.integers(), inner, max_size=4)
    ),
    max_leaves=12,
)


def _json_dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _file_bytes(text: str) -> bytes:
    """A text as the writer puts it in a file: UTF-8, a lone surrogate as its escape."""
    return text.encode("utf-8", "backslashreplace")


@given(_JSON)
def test_the_writers_exact_encoder_gives_json_dumps_text(value: object) -> None:
    """The writer's exact encoder (one C encoder made once) writes what json.dumps with
    the writer's options writes, lone surrogates and non-finite floats included."""
    assert replay._dumps_exact(value) == _json_dumps(value)
    assert replay._dumps_exact("\udcff") == json.dumps("\udcff", ensure_ascii=False)


@given(_NO_FLOATS)
def test_the_writers_fast_encoder_gives_json_dumps_text_without_floats(value: object) -> None:
    """The writer's fast encoder (orjson, falling back to the exact one on what orjson
    refuses) writes json.dumps's text, as UTF-8 bytes, for anything without a float."""
    assert replay._encode(value) == _file_bytes(_json_dumps(value))
    assert replay._encode_exact(value) == _file_bytes(_json_dumps(value))


@pytest.mark.parametrize(
    "value", ["\udcff", {"a": ["x\ud800y"]}, 2**64, -(2**70), {1: "a"}, [{"k": 2**63}]]
)
def test_what_orjson_refuses_is_written_as_json_dumps_does(value: object) -> None:
    assert replay._encode(value) == _file_bytes(_json_dumps(value))


def test_a_table_with_a_double_column_is_encoded_exactly() -> None:
    """orjson writes 1e-05 as 0.00001 and NaN as null: the health table (a double column)
    and only such tables take the exact encoder."""
    assert replay._encode(1e-05) != _file_bytes(_json_dumps(1e-05))  # why the exact one
    assert replay._encode_exact(1e-05) == _file_bytes(_json_dumps(1e-05))
    assert replay._encoder_of(TABLES["health"]) is replay._encode_exact
    assert replay._encoder_of(TABLES["state_changes"]) is replay._encode
    assert replay._encoder_of(TABLES["request_payloads"]) is replay._encode


# --------------------------------------------- the full body and the context's caches


def _leader_records(context: ControllerContext) -> list[Partition]:
    """records_with_leaders worked out from scratch: no cache."""
    deleting = context.topics_to_be_deleted
    return [
        record
        for name in sorted(context.topics)
        if name not in deleting
        for _, record in sorted(context.topics[name].partitions.items())
        if record.leadership is not None
    ]


def _fresh_body(context: ControllerContext) -> list[Row]:
    """What a new broker's body holds, built by a MetadataEntries with nothing kept."""
    out: dict[TopicPartition, Row] = {}
    MetadataEntries().add_to(
        out, _leader_records(context), context.topics_to_be_deleted, context.live_broker_set()
    )
    return list(out.values())


def _check_full_body(entries: MetadataEntries, context: ControllerContext) -> list[Row]:
    assert context.all_partitions() == [
        record
        for name in sorted(context.topics)
        for _, record in sorted(context.topics[name].partitions.items())
    ]
    assert context.records_with_leaders() == _leader_records(context)
    tps, body = entries.full_body(context)
    assert body == _fresh_body(context)
    assert tps == [record.tp for record in _leader_records(context)]
    return body


def test_the_full_body_redoes_every_partition_changed_since_the_last_one() -> None:
    """§8.2: each new broker is sent every partition with a leader as it is now. The body
    keeps the previous body's entries and redoes only the partitions changed since: a
    leadership, an assignment, a replica's broker going down or up, a partition gaining
    or losing its leader, a record reloaded, a topic queued for deletion or deleted. Each
    body must equal one built from nothing; an untouched partition's entry is reused."""
    context = ControllerContext("c")
    for broker in (1, 2, 3, 4):
        context.register_broker(broker, None, 100 + broker)
    records: dict[TopicPartition, Partition] = {}
    for topic in ("a", "b"):
        context.add_topic(topic, {})
        for partition in range(3):
            tp = TopicPartition(topic, partition)
            replicas = (1 + partition, 2 + partition, 1 + (partition + 2) % 4)
            records[tp] = context.add_partition(tp, ReplicaAssignment(replicas))
            context.set_leadership(records[tp], LeaderAndIsr(replicas[0], 0, replicas, 0))
    entries = MetadataEntries()
    first = _check_full_body(entries, context)
    assert len(first) == 6

    a0, a1, b2 = (records[TopicPartition(t, p)] for t, p in (("a", 0), ("a", 1), ("b", 2)))
    context.set_leadership(a0, LeaderAndIsr(2, 1, (2, 3), 1))  # a new leader
    led = _check_full_body(entries, context)
    assert led[0]["leader"] == 2
    assert led[1] is first[1]  # a-1 untouched: the same entry

    context.set_assignment(a1, ReplicaAssignment((3, 4, 1)))  # reassigned
    moved = _check_full_body(entries, context)
    assert moved[1]["replicas"] == [3, 4, 1]
    assert moved[2] is first[2]

    context.set_broker_status(4, BrokerStatus.SHUTTING_DOWN)  # broker 4 no longer live
    down = _check_full_body(entries, context)
    assert down[1]["offline_replicas"] == [4]
    context.register_broker(4, None, 110)  # and back
    assert _check_full_body(entries, context)[1]["offline_replicas"] == []

    context.set_leadership(b2, None)  # loses its leader: no entry
    assert len(_check_full_body(entries, context)) == 5
    context.set_leadership(b2, LeaderAndIsr(3, 2, (3,), 2))  # has one again
    assert _check_full_body(entries, context)[5]["leader"] == 3

    tp = TopicPartition("a", 3)  # a new partition with a leader
    records[tp] = context.add_partition(tp, ReplicaAssignment((1, 2)))
    context.set_leadership(records[tp], LeaderAndIsr(1, 0, (1, 2), 0))
    assert _check_full_body(entries, context)[3]["partition"] == 3

    reloaded = context.load_partition(  # the same partition, a new record
        a1.tp, ReplicaAssignment((3, 4)), LeaderAndIsr(4, 7, (4,), 9), PartitionState.ONLINE, None
    )
    body = _check_full_body(entries, context)
    assert (body[1]["leader"], body[1]["replicas"]) == (4, [3, 4])
    assert reloaded is context.records_with_leaders()[1]

    context.topics_to_be_deleted.add("b")  # queued: its partitions leave the body
    assert len(_check_full_body(entries, context)) == 4
    context.set_leadership(a0, LeaderAndIsr(3, 2, (3,), 2))  # changed meanwhile
    context.remove_topic("b")
    assert not context.topics_to_be_deleted
    assert _check_full_body(entries, context)[0]["leader"] == 3
    # changes are logged only while a body is kept to compare with
    assert context.take_metadata_changes(log_next=False) is not None
    context.topics_to_be_deleted.add("a")
    _check_full_body(entries, context)
    assert context.take_metadata_changes(log_next=False) is None


def test_a_full_body_names_the_places_changed_since_the_body_before_and_the_writer_uses_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each full body made right after another says which places hold another entry than
    that one (`FullBody.changed`), and exactly those: the replay writer, which keeps the
    earlier body's texts, encodes only them and makes no pass over the body. A body built
    afresh (a topic queued for deletion) says nothing, and is compared item by item."""
    monkeypatch.setattr(replay, "_LONG_LIST", 2)
    context = ControllerContext("c")
    for broker in (1, 2, 3):
        context.register_broker(broker, None, 100 + broker)
    records = []
    for topic in ("a", "b"):
        context.add_topic(topic, {})
        for partition in range(5):
            record = context.add_partition(
                TopicPartition(topic, partition), ReplicaAssignment((1, 2, 3))
            )
            context.set_leadership(record, LeaderAndIsr(1, 0, (1, 2, 3), 0))
            records.append(record)
    entries = MetadataEntries()
    texts = replay.EntryTexts()
    encoded: list[object] = []
    encode = replay._encode
    monkeypatch.setattr(replay, "_encode", lambda value: encoded.append(value) or encode(value))
    monkeypatch.setattr(replay, "compress", None)  # the pass item by item: not taken here

    def next_body() -> FullBody:
        _, body = entries.full_body(context)
        encoded.clear()
        assert (
            b"".join(texts.pieces(body)).decode() == json.dumps(body, separators=(",", ":"))[1:-1]
        )
        return body

    previous = next_body()
    assert previous.since is None and len(encoded) == 10
    changes = [  # each with the places it changes
        (lambda: context.set_leadership(records[3], LeaderAndIsr(2, 1, (2, 3), 1)), [3]),
        (lambda: context.set_broker_status(3, BrokerStatus.SHUTTING_DOWN), list(range(10))),
        (lambda: context.set_assignment(records[7], ReplicaAssignment((2, 1))), [7]),
        (lambda: context.set_leadership(records[0], records[0].leadership), []),
    ]
    for change, places in changes:
        change()
        body = next_body()
        assert body.since is previous.token
        # (in the order the changes were logged)
        assert sorted(body.changed) == places
        assert places == [i for i in range(10) if body[i] is not previous[i]]
        assert encoded == [body[i] for i in body.changed]
        previous = body
    context.topics_to_be_deleted.add("b")
    fresh = next_body()
    assert fresh.since is None and len(fresh) == 5


def test_a_body_finds_the_partitions_of_a_topic_with_gaps_one_by_one() -> None:
    """A body places partition p of a topic at the topic's start + p while the topic's
    partitions with a leader are 0..n-1; a topic with a gap (a partition without a leader,
    a partition number missing) has its partitions placed one by one. A change to any
    partition of either kind lands on its own entry."""
    context = ControllerContext("c")
    for broker in (1, 2, 3):
        context.register_broker(broker, None, 100 + broker)
    records: dict[TopicPartition, Partition] = {}
    for topic, partitions in (("a", (0, 1, 2, 3)), ("b", (1, 2)), ("c", (0, 1))):
        context.add_topic(topic, {})
        for partition in partitions:
            tp = TopicPartition(topic, partition)
            records[tp] = context.add_partition(tp, ReplicaAssignment((1, 2, 3)))
            context.set_leadership(records[tp], LeaderAndIsr(1, 0, (1, 2, 3), 0))
    context.set_leadership(records[TopicPartition("a", 1)], None)  # a gap in "a"
    entries = MetadataEntries()
    _check_full_body(entries, context)
    body = entries._body
    assert body is not None
    assert body.positions.runs == {"c": (5, 2)}  # "a" is 0,2,3 and "b" 1,2: one by one
    assert body.positions.get(TopicPartition("a", 3)) == 2
    assert body.positions.get(TopicPartition("a", 1)) is None
    assert body.positions.get(TopicPartition("c", 2)) is None
    for leader, tp in enumerate([TopicPartition(t, int(p)) for t, p in ("a3", "b1", "c1", "a0")]):
        context.set_leadership(records[tp], LeaderAndIsr(2 + leader % 2, 1 + leader, (2, 3), 1))
        body_now = _check_full_body(entries, context)
        assert entries._body is body  # kept: only the changed entry redone
        assert body_now[body.positions.get(tp)]["leader"] == 2 + leader % 2


def test_records_with_leaders_is_one_list_until_the_partitions_with_a_leader_change() -> None:
    """The cached list is handed out again only while no partition gained or lost a
    leader, no record came or went, and no topic is queued for deletion."""
    context, record = _context()
    cached = context.records_with_leaders()
    assert cached == [record] and context.records_with_leaders() is cached
    context.set_leadership(record, LeaderAndIsr(2, 1, (2, 3), 1))  # still has a leader
    assert context.records_with_leaders() is cached
    other = context.add_partition(TopicPartition("t", 1), ReplicaAssignment((1,)))
    assert context.records_with_leaders() == [record]
    context.set_leadership(other, LeaderAndIsr(1, 0, (1,), 0))
    assert context.records_with_leaders() == [record, other]
    context.set_leadership(record, None)
    assert context.records_with_leaders() == [other]
    context.topics_to_be_deleted.add("t")
    assert context.records_with_leaders() == []
    context.remove_topic("t")
    assert context.records_with_leaders() == [] and context.all_partitions() == []
    context.add_topic("t", {})  # re-created: its new records only
    again = context.add_partition(TopicPartition("t", 0), ReplicaAssignment((1,)))
    context.set_leadership(again, LeaderAndIsr(1, 0, (1,), 0))
    assert context.records_with_leaders() == [again] and context.all_partitions() == [again]
