"""The context's compact layout: what it stores once must read back per replica and per
partition exactly as a plain dict per partition would (the replica_state and health rows
depend on it)."""

from __future__ import annotations

from dataclasses import astuple, fields

from controller.model import (
    LeaderAndIsr,
    PartitionState,
    RecoveryState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from controller.zk.context import (
    ControllerContext,
    Partition,
    ReplicaStateMaps,
    sorted_partitions,
    sorted_replicas,
)

RS = ReplicaState


def _partition() -> Partition:
    return Partition(TopicPartition("t", 0), ReplicaAssignment((1, 2, 3)))


def test_replica_event_ids_agreeing_are_held_once_and_read_per_broker() -> None:
    record = _partition()
    for broker in (1, 2, 3):
        record.set_replica(broker, RS.NEW, "e1")
    assert record.replica_event_ids == "e1"  # one id, no dict
    record.set_replica(2, RS.OFFLINE, "e2")
    assert [record.replica_event_id(b) for b in (1, 2, 3)] == ["e1", "e2", "e1"]
    assert record.replica_states == {1: RS.NEW, 2: RS.OFFLINE, 3: RS.NEW}
    record.set_replica(1, RS.ONLINE, "e2")
    record.set_replica(3, RS.ONLINE, "e2")
    assert record.replica_event_ids == "e2"  # agreeing again: one id
    record.set_replica(3, RS.OFFLINE, "e3")
    record.remove_replica(3)
    assert record.replica_event_ids == "e2" and 3 not in record.replica_states
    record.set_replica(4, RS.NEW, "e4")  # a replica added later
    assert [record.replica_event_id(b) for b in (1, 2, 4)] == ["e2", "e2", "e4"]
    for broker in (1, 2, 4):
        record.remove_replica(broker)
    assert record.replica_states == {} and record.replica_event_ids is None


def test_partitions_in_the_same_replica_states_share_one_map_and_change_apart() -> None:
    """The context's replica-state maps are shared (ReplicaStateMaps): equal maps are one
    object, a change gives another map and leaves the one other partitions hold as it
    was, and a replica whose state changes keeps its place (replica_state rows follow
    it)."""
    maps = ReplicaStateMaps()
    one, two = _partition(), Partition(TopicPartition("t", 1), ReplicaAssignment((1, 2, 3)))
    for record in (one, two):
        for broker in (1, 2, 3):
            record.set_replica(broker, RS.ONLINE, "e1", maps)
    assert one.replica_states is two.replica_states
    held = one.replica_states
    one.set_replica(2, RS.OFFLINE, "e2", maps)
    assert held == {1: RS.ONLINE, 2: RS.ONLINE, 3: RS.ONLINE} and two.replica_states is held
    assert list(one.replica_states.items()) == [(1, RS.ONLINE), (2, RS.OFFLINE), (3, RS.ONLINE)]
    two.set_replica(2, RS.OFFLINE, "e2", maps)
    assert two.replica_states is one.replica_states  # the same change, found again
    one.remove_replica(3, maps)
    assert one.replica_states == {1: RS.ONLINE, 2: RS.OFFLINE}
    assert two.replica_states == {1: RS.ONLINE, 2: RS.OFFLINE, 3: RS.ONLINE}
    for broker in (1, 2):
        one.remove_replica(broker, maps)
    assert one.replica_states == {} and one.replica_event_ids is None


def test_a_first_replica_takes_its_event_id_whatever_the_partition_held() -> None:
    record = _partition()
    record.set_replica(1, RS.NEW, None)  # a row loaded without an event id
    assert record.replica_event_id(1) is None
    record.remove_replica(1)
    record.set_replica(2, RS.NEW, "e5")
    assert record.replica_event_ids == "e5"


# ---- ordering and lookups in bulk --------------------------------------------------------

# topics whose order as strings differs from their order by length or by number, names
# sharing a prefix, and partition numbers whose order differs from their digits' order
_TOPICS = ("b", "a.b", "a_b", "a", "topic-10", "topic-9", "topic-1", "Z", "é", "ab")
_PARTITIONS = (0, 1, 2, 9, 10, 11, 100, 257, 1000, 99999)


def _mixed_partitions() -> list[TopicPartition]:
    # equal values as distinct objects too (rows bring their own copies of names)
    return [
        TopicPartition("".join(list(topic)), int(str(p)))
        for i, topic in enumerate(_TOPICS)
        for p in _PARTITIONS[i % 3 :: 2]
    ]


def test_sorted_partitions_is_sorted() -> None:
    tps = _mixed_partitions()
    for order in (tps, tps[::-1], tps[3:] + tps[:3]):
        assert sorted_partitions(order) == sorted(tps)
        assert sorted_partitions(set(order)) == sorted(tps)
    assert sorted_partitions([]) == []


def test_sorted_replicas_is_sorted() -> None:
    replicas = [(tp, b) for tp in _mixed_partitions() for b in (3, 1, 300, 2)]
    for order in (replicas, replicas[::-1]):
        assert sorted_replicas(order) == sorted(replicas)
        assert sorted_replicas(set(order)) == sorted(replicas)


def test_records_of_finds_what_partition_finds() -> None:
    context = ControllerContext("c")
    for topic in ("a", "b"):
        context.add_topic(topic, {})
        for p in (0, 1, 2):
            context.add_partition(TopicPartition(topic, p), ReplicaAssignment((1, 2)))
    asked = [
        TopicPartition("a", 0),
        TopicPartition("a", 0),  # the same partition again, as an equal object
        TopicPartition("a", 2),
        TopicPartition("a", 7),  # no such partition
        TopicPartition("b", 1),
        TopicPartition("gone", 0),  # no such topic
        TopicPartition("b", 2),
        TopicPartition("a", 1),  # a topic seen before, again after another
    ]
    found = list(context.records_of(asked))
    assert [tp for tp, _ in found] == asked
    assert [record for _, record in found] == [context.partition(tp) for tp in asked]
    assert all(record is None or record.tp == tp for tp, record in found), (
        "a record for another partition"
    )


def test_equal_assignments_are_one_object_and_stay_per_partition() -> None:
    context = ControllerContext("c")
    context.add_topic("t", {})
    one, two = TopicPartition("t", 0), TopicPartition("t", 1)
    first = context.add_partition(one, ReplicaAssignment((1, 2, 3)))
    second = context.add_partition(two, ReplicaAssignment(tuple([1, 2, 3])))
    assert first.assignment is second.assignment  # shared, not copied
    context.set_assignment(first, first.assignment.reassign_to((4, 5, 6)))
    assert first.assignment == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert second.assignment == ReplicaAssignment((1, 2, 3))  # the other keeps its own
    assert context.partitions_on_broker(4) == [one]
    assert context.partitions_on_broker(1) == [one, two]


def test_a_queued_topics_counted_replica_states_follow_every_change() -> None:
    """SPEC §15.2: the deletion's checks of a queued topic (counted by state, not walked)
    see each replica's change, a replica added to a replica list, a partition added, and
    a state removed."""
    context = ControllerContext("c")
    context.add_topic("t", {})
    records = [
        context.add_partition(TopicPartition("t", p), ReplicaAssignment((1, 2))) for p in (0, 1)
    ]
    for record in records:
        for broker in (1, 2):
            context.set_replica_state(record, broker, RS.OFFLINE)
    context.topics_to_be_deleted.add("t")
    assert context.are_all_replicas_in_state("t", RS.OFFLINE)  # (counted from here)
    context.set_replica_state(records[0], 2, RS.DELETION_STARTED)
    assert context.is_any_replica_in_state("t", RS.DELETION_STARTED)
    assert not context.are_all_replicas_in_state("t", RS.OFFLINE)
    context.set_replica_state(records[0], 2, RS.OFFLINE)
    assert context.are_all_replicas_in_state("t", RS.OFFLINE)
    context.set_assignment(records[1], ReplicaAssignment((1, 2, 3)))  # 3: no state yet
    assert not context.are_all_replicas_in_state("t", RS.OFFLINE)
    context.set_replica_state(records[1], 3, RS.OFFLINE)
    context.set_replica_state(records[1], 4, RS.ONLINE)  # not in its list: not counted
    assert context.are_all_replicas_in_state("t", RS.OFFLINE)
    added = context.add_partition(TopicPartition("t", 2), ReplicaAssignment((1,)))
    assert not context.are_all_replicas_in_state("t", RS.OFFLINE)
    context.set_replica_state(added, 1, RS.OFFLINE)
    assert context.are_all_replicas_in_state("t", RS.OFFLINE)
    context.remove_replica_state(records[0], 1)
    assert not context.are_all_replicas_in_state("t", RS.OFFLINE)
    assert context.replicas_in_state("t", RS.OFFLINE) == [
        (TopicPartition("t", 0), 2), (TopicPartition("t", 1), 1), (TopicPartition("t", 1), 2),
        (TopicPartition("t", 1), 3), (TopicPartition("t", 2), 1),
    ]  # fmt: skip


def test_a_context_that_marks_no_rows_changes_the_same_and_leaves_its_dirty_sets_empty() -> None:
    """`marks_rows=False` (kcsim replay's contexts, whose state tables are written from
    the whole context at its end): the same records, the same event partitions for the
    health counters, and no partition or replica marked dirty, a topic's removal too."""
    contexts = [ControllerContext("c"), ControllerContext("c", marks_rows=False)]
    for context in contexts:
        context.event_id = "e1"
        context.add_topic("t", {})
        record = context.add_partition(TopicPartition("t", 0), ReplicaAssignment((1, 2)))
        context.set_leadership(record, LeaderAndIsr(1, 0, (1, 2), 0))
        context.set_partition_state(record, PartitionState.ONLINE)
        for broker in (1, 2):
            context.set_replica_state(record, broker, RS.ONLINE)
        context.remove_replica_state(record, 2)
    marking, not_marking = contexts
    assert marking.dirty_partitions == {TopicPartition("t", 0)}
    assert marking.dirty_replicas == {(TopicPartition("t", 0), 1), (TopicPartition("t", 0), 2)}
    assert not_marking.dirty_partitions == set() and not_marking.dirty_replicas == set()
    assert (
        list(not_marking.event_partitions)
        == list(marking.event_partitions)
        == [TopicPartition("t", 0)]
    )
    [kept] = not_marking.all_partitions()
    assert (kept.leadership, kept.state, kept.replica_states, kept.last_event_id) == (
        LeaderAndIsr(1, 0, (1, 2), 0),
        PartitionState.ONLINE,
        {1: RS.ONLINE},
        "e1",
    )
    not_marking.remove_topic("t")
    assert not_marking.dirty_partitions == set() and not_marking.dirty_replicas == set()
    assert not_marking.dirty_topics == {"t"}


def test_leader_and_isr_sets_every_field_as_the_dataclass_constructor_would() -> None:
    """LeaderAndIsr has its own __init__ (faster than the frozen dataclass's): every field,
    in the declared order, positionally and by name, with the declared defaults."""
    declared = fields(LeaderAndIsr)
    values = (1, 2, (1, 3), 4, RecoveryState.RECOVERING, 5, 6)
    assert len(values) == len(declared)
    by_position = LeaderAndIsr(*values)
    by_name = LeaderAndIsr(**{f.name: v for f, v in zip(declared, values, strict=True)})
    assert astuple(by_position) == astuple(by_name) == values
    shortest = LeaderAndIsr(1, 2, (1,), 4)
    assert [getattr(shortest, f.name) for f in declared[4:]] == [f.default for f in declared[4:]]


def test_a_leadership_written_back_unchanged_moves_only_the_rows_event_id() -> None:
    """§6.3: an ISR removal that finds nothing to remove writes the cached leadership back
    as it was (3,000 partitions when a broker fails after its controlled shutdown). The
    partition row takes the event's id, as for any write, but the event has not changed
    the partition: its health figures are not taken again and its UpdateMetadata entry is
    kept. An equal but new leadership is a change."""
    context = ControllerContext("c")
    context.register_broker(1, None, 101)
    context.add_topic("t", {})
    tp = TopicPartition("t", 0)
    record = context.add_partition(tp, ReplicaAssignment((1,)))
    leadership = LeaderAndIsr(1, 0, (1,), 0)
    context.set_leadership(record, leadership)
    context.clear_dirty()
    entry = {"leader": 1}
    record.metadata_entry = entry

    context.event_id = "e2"
    context.set_leadership(record, leadership)
    assert record.last_event_id == "e2"
    assert context.dirty_partitions == {tp}
    assert dict(context.event_partitions) == {}
    assert record.metadata_entry is entry

    context.event_id = "e3"
    context.set_leadership(record, LeaderAndIsr(1, 0, (1,), 0))
    assert record.last_event_id == "e3"
    assert dict(context.event_partitions) == {tp: record}
    assert record.metadata_entry is None
