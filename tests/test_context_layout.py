"""The context's compact layout: what it stores once must read back per replica and per
partition exactly as a plain dict per partition would (the replica_state and health rows
depend on it)."""

from __future__ import annotations

from controller.context import Partition
from controller.model import ReplicaAssignment, ReplicaState, TopicPartition

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


def test_a_first_replica_takes_its_event_id_whatever_the_partition_held() -> None:
    record = _partition()
    record.set_replica(1, RS.NEW, None)  # a row loaded without an event id
    assert record.replica_event_id(1) is None
    record.remove_replica(1)
    record.set_replica(2, RS.NEW, "e5")
    assert record.replica_event_ids == "e5"
