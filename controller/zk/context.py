"""The controller's cache of cluster state (Kafka's ControllerContext), for one cluster.

Every mutation goes through a method here so that two things stay true cheaply:
the indexes (replicas by broker, partitions by leader, New/Offline partitions) match the
data, and every changed row is marked dirty for the batch's table output. An event's cost
then grows with the partitions it touches, not with the cluster.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from controller.model import (
    BrokerStatus,
    LeaderAndIsr,
    PartitionState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)

# Every list returned below is sorted by (topic, partition) or broker id: Kafka iterates
# hash sets, in no particular order; sorting makes each run deterministic and independent
# of history, which the state round-trip (stop, reload from tables, continue) relies on.


@dataclass(slots=True)
class Broker:
    broker: int
    rack: str | None
    epoch: int
    status: BrokerStatus


ReplicaStates = dict[int, ReplicaState]
# the replica states of a partition with none: shared, so never changed (as every map a
# partition holds: ReplicaStateMaps)
NO_REPLICA_STATES: ReplicaStates = {}


class ReplicaStateMaps:
    """One dict per distinct map of replica states (broker -> state, in its order), shared
    by every partition whose replicas are in those states: at a million partitions, a
    few tens of thousands of maps instead of a dict per partition (~220 bytes each, with
    its table). A map a partition holds is never changed: a change gives the map it
    becomes, found by the change itself (the map's id, the broker, the state's id: ints,
    hashed in C), so a replica's change costs one lookup, not a walk of its map."""

    __slots__ = ("_changes", "_maps")

    def __init__(self) -> None:
        self._maps: dict[tuple[tuple[int, ReplicaState], ...], ReplicaStates] = {}
        # (id(map), broker, id(state)) -> (that map, the map it becomes): the first held,
        # so that its id stays its own while the entry exists
        self._changes: dict[tuple[int, int, int], tuple[ReplicaStates, ReplicaStates]] = {}

    def with_state(self, states: ReplicaStates, broker: int, state: ReplicaState) -> ReplicaStates:
        """`states` with `broker` in `state` (a broker already there keeps its place)."""
        key = (id(states), broker, id(state))
        change = self._changes.get(key)
        if change is not None and change[0] is states:
            return change[1]
        changed = dict(states)
        changed[broker] = state
        result = self.shared(changed)
        if len(self._changes) >= _MAX_SHARED_STATE_MAPS:
            self._changes.clear()  # changes of maps no partition holds do not pile up
        self._changes[key] = (states, result)
        return result

    def without(self, states: ReplicaStates, broker: int) -> ReplicaStates:
        """`states` without `broker` (a reassignment's or a deletion's rare change)."""
        changed = dict(states)
        del changed[broker]
        return self.shared(changed)

    def shared(self, states: ReplicaStates) -> ReplicaStates:
        """The shared map equal to `states` in content and order (`states` if none yet)."""
        if not states:
            return NO_REPLICA_STATES
        maps = self._maps
        if len(maps) >= _MAX_SHARED_STATE_MAPS:
            maps.clear()
        return maps.setdefault(tuple(states.items()), states)


@dataclass(slots=True)
class Partition:
    """Assignment, stored leadership and states of one partition (and its replicas)."""

    tp: TopicPartition
    assignment: ReplicaAssignment
    leadership: LeaderAndIsr | None = None
    state: PartitionState = PartitionState.NON_EXISTENT
    # shared with other partitions (ReplicaStateMaps): read it, never change it in place
    replica_states: ReplicaStates = field(default_factory=lambda: NO_REPLICA_STATES)
    last_event_id: str | None = None
    # the event that last changed each replica's state: one id for all of them when they
    # agree (most partitions: their replicas change together), so a partition holds no
    # second dict (~160 bytes) for it; a dict by broker otherwise
    replica_event_ids: str | dict[int, str | None] | None = None
    # Derived values kept with the record, so that a touched partition costs no lookup in a
    # table of every partition (each a cache miss at 100k partitions); not part of its
    # state. Its UpdateMetadata entry (controller.zk.metadata_entries), built from its
    # leadership and replica set: dropped when either is replaced.
    metadata_entry: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    # its part of the health counters (controller.health.Vitals, which this layer does not
    # import; None: not counted)
    vitals: Any = field(default=None, compare=False, repr=False)

    def replica_event_id(self, broker: int) -> str | None:
        ids = self.replica_event_ids
        return ids.get(broker) if isinstance(ids, dict) else ids

    def set_replica(
        self,
        broker: int,
        state: ReplicaState,
        event_id: str | None,
        maps: ReplicaStateMaps | None = None,
    ) -> None:
        """`maps`: the context's shared maps (None: a map of this partition's own)."""
        states = self.replica_states
        ids = self.replica_event_ids
        if isinstance(ids, dict):
            ids[broker] = event_id
            self.replica_event_ids = _one_or_all(ids)
        elif ids != event_id and len(states) > (broker in states):  # another replica
            ids = {b: ids for b in states}
            ids[broker] = event_id
            self.replica_event_ids = ids
        else:  # the same id, or the only replica
            self.replica_event_ids = event_id
        if maps is None:
            self.replica_states = {**states, broker: state}
        else:
            self.replica_states = maps.with_state(states, broker, state)

    def remove_replica(self, broker: int, maps: ReplicaStateMaps | None = None) -> None:
        states = self.replica_states
        if broker in states:
            if maps is None:
                self.replica_states = {b: s for b, s in states.items() if b != broker}
            else:
                self.replica_states = maps.without(states, broker)
        ids = self.replica_event_ids
        if not self.replica_states:
            self.replica_event_ids = None
        elif isinstance(ids, dict):
            ids.pop(broker, None)
            self.replica_event_ids = _one_or_all(ids)


@dataclass(slots=True)
class Topic:
    name: str
    configs: dict[str, str]
    partitions: dict[int, Partition] = field(default_factory=dict)


class ControllerContext:
    def __init__(self, cluster: str, marks_rows: bool = True) -> None:
        """`marks_rows=False`: no partition or replica is marked dirty (their sets stay
        empty), for a caller that writes the state tables from the whole context once, as
        `kcsim replay` does at its end; the marks were a tuple, a hash and a set entry per
        replica transition (1.7M in a rolling restart of 100k partitions) for nothing."""
        self.cluster = cluster
        self.marks_rows = marks_rows
        self.epoch = 1
        self.controller_id: int | None = None
        self.last_seq: int | None = None  # None: no event applied yet
        self.last_event_id: str | None = None
        self.event_id: str | None = None  # the event being applied: stamped on changed rows
        self.brokers: dict[int, Broker] = {}  # every broker ever seen; change via methods
        # replaced, never mutated, on every broker change: callers may hold them
        self._live: frozenset[int] = frozenset()
        self._registered: frozenset[int] = frozenset()
        self._registered_sorted: tuple[int, ...] = ()
        self.shutting_down: set[int] = set()
        self.topics: dict[str, Topic] = {}
        # the dynamic cluster-default broker configs (/config/brokers/<default>): what a
        # cluster_config_change set; kept in the clusters table
        self.cluster_configs: dict[str, str] = {}
        # each topic's records by partition number and the topic names in order, built on
        # demand and dropped when a topic or a partition comes or goes: a new broker's
        # UpdateMetadata walks every record in this order, and sorting them each time
        # cost more than the walk
        self._sorted_records: dict[str, list[Partition]] = {}
        self._sorted_topics: list[str] | None = None
        # records_with_leaders while no topic is queued for deletion, until a partition
        # gains or loses its leadership or a record comes or goes
        self._with_leaders: list[Partition] | None = None
        # partitions whose leadership or assignment changed since the last full
        # UpdateMetadata body took them (take_metadata_changes): that body redoes only these.
        # None: not logged (no body kept to compare with: none sent yet, or the last one
        # was not kept), so a cluster that keeps none holds no log either
        self._metadata_changes: set[TopicPartition] | None = None
        # topic names by their name with '.' read as '_' (in creation order), so a new
        # topic's collision check is a lookup, not a scan of every topic
        self._topics_by_normalized: dict[str, dict[str, None]] = {}
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()
        self.partitions_being_reassigned: set[TopicPartition] = set()
        # partitions whose cached leadership carries this controller's epoch while the
        # stored one is older (a no-write ISR removal, SPEC §6.3): maintained by set_leadership
        self.restamped_partitions: set[TopicPartition] = set()
        # indexes
        # partitions with a leadership whose leader is not their first replica: a
        # whole-cluster preferred election's candidates, found without a walk of every
        # partition (records_not_led_by_preferred)
        self._not_preferred: set[TopicPartition] = set()
        self._replicas_on_broker: dict[int, set[TopicPartition]] = {}
        self._led_by: dict[int, set[TopicPartition]] = {}
        self._new_or_offline: set[TopicPartition] = set()
        # topics queued for deletion: their assigned replicas counted by state (None: no
        # state), built on first use (_deletion_state_counts) and kept by every change of
        # a replica's state; a change of the topic's partitions or replica lists drops it.
        # A deletion's checks run on every StopReplica answer (a broker's share of the
        # topic): counted, they cost that share, not a walk of the whole topic each time
        self._deletion_counts: dict[str, Counter[ReplicaState | None]] = {}
        # one object per distinct assignment (immutable): most partitions share theirs with
        # many others (a million partitions on 300 brokers have ~45k distinct replica
        # lists), so a partition does not hold its own (~140 bytes with its tuple)
        self._assignments: dict[ReplicaAssignment, ReplicaAssignment] = {}
        # the same for the partitions' replica states
        self.replica_state_maps = ReplicaStateMaps()
        # rows changed since the last drain, for the batch's table output
        self.dirty_partitions: set[TopicPartition] = set()
        self.dirty_replicas: set[tuple[TopicPartition, int]] = set()
        self.dirty_brokers: set[int] = set()
        self.dirty_topics: set[str] = set()
        # partitions (with their records) and topics changed by the event being applied
        # (the dirty sets above gather a whole batch): the health counters and invariant
        # checks take them after each event (controller.health) and clear them; the records
        # the event removed (their topic deleted) apart, with what they held
        self.event_partitions: dict[TopicPartition, Partition] = {}
        self.event_topics: set[str] = set()
        self.event_removed: list[Partition] = []

    def clear_dirty(self) -> None:
        """Every changed row has been output (or the context was just loaded)."""
        self.dirty_partitions.clear()
        self.dirty_replicas.clear()
        self.dirty_brokers.clear()
        self.dirty_topics.clear()
        self.clear_event_marks()

    def clear_event_marks(self) -> None:
        """The event's changed partitions, topics and removed records, let go (the checks
        take them after each event; without checks nothing does)."""
        self.event_partitions.clear()
        self.event_topics.clear()
        self.event_removed.clear()

    # ---- brokers -------------------------------------------------------------------------

    def is_registered(self, broker: int) -> bool:
        """liveOrShuttingDown: has a registration."""
        return broker in self._registered

    def is_live(self, broker: int) -> bool:
        """liveBrokerIds: registered and not shutting down (also `isReplicaOnline`, since
        kcsim does not model log-directory failures)."""
        return broker in self._live

    def live_broker_ids(self) -> list[int]:
        return sorted(self._live)

    def live_broker_set(self) -> frozenset[int]:
        """The live brokers, for membership tests in bulk (as is_live, without a call per
        broker)."""
        return self._live

    def registered_broker_set(self) -> frozenset[int]:
        """The registered brokers, for membership tests in bulk (as is_registered)."""
        return self._registered

    def registered_broker_ids(self) -> tuple[int, ...]:
        return self._registered_sorted

    def _refresh_broker_views(self) -> None:
        # membership tests run for every replica of every touched partition: keep them O(1)
        self._live = frozenset(
            b for b, info in self.brokers.items() if info.status is BrokerStatus.LIVE
        )
        self._registered = frozenset(
            b for b, info in self.brokers.items() if info.status is not BrokerStatus.DEAD
        )
        self._registered_sorted = tuple(sorted(self._registered))

    def next_broker_epoch(self) -> int:
        # a broker epoch is its registration znode's czxid: cluster-wide increasing
        return max((info.epoch for info in self.brokers.values()), default=0) + 1

    def register_broker(self, broker: int, rack: str | None, epoch: int) -> None:
        self.brokers[broker] = Broker(broker, rack, epoch, BrokerStatus.LIVE)
        self.shutting_down.discard(broker)
        self.dirty_brokers.add(broker)
        self._refresh_broker_views()

    def set_broker_status(self, broker: int, status: BrokerStatus) -> None:
        info = self.brokers[broker]
        info.status = status
        if status is BrokerStatus.SHUTTING_DOWN:
            self.shutting_down.add(broker)
        else:
            self.shutting_down.discard(broker)
        self.dirty_brokers.add(broker)
        self._refresh_broker_views()

    # ---- topics and partitions -----------------------------------------------------------

    def partition(self, tp: TopicPartition) -> Partition | None:
        topic = self.topics.get(tp.topic)
        return None if topic is None else topic.partitions.get(tp.partition)

    def records_of(
        self, tps: Iterable[TopicPartition]
    ) -> Iterator[tuple[TopicPartition, Partition | None]]:
        """Each partition with its record (None: not in the context), as `partition` finds
        it. For partitions grouped by topic (sorted_partitions' order): a topic is looked
        up once per run of its partitions, and a partition repeated in a row (a replica
        per broker) once, not per item: at a million partitions each lookup is a cache
        miss."""
        topics = self.topics
        topic: str | None = None
        partitions: dict[int, Partition] = {}
        last: TopicPartition | None = None
        record: Partition | None = None
        for tp in tps:
            if tp is not last:
                if tp[0] != topic:  # tp.topic
                    topic = tp[0]
                    info = topics.get(topic)
                    partitions = {} if info is None else info.partitions
                record = partitions.get(tp[1])  # tp.partition
                last = tp
            yield tp, record

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        record = self.partition(tp)
        return record.assignment if record is not None else ReplicaAssignment(())

    def leadership(self, tp: TopicPartition) -> LeaderAndIsr | None:
        record = self.partition(tp)
        return None if record is None else record.leadership

    def all_partitions(self) -> list[Partition]:
        return [p for t in self._topic_names_sorted() for p in self._records_sorted(t)]

    def partitions_of_topic(self, topic: str) -> list[TopicPartition]:
        info = self.topics.get(topic)
        if info is None:
            return []
        return [record.tp for record in self._records_sorted(topic)]

    def has_reassignment_in_progress(self, topic: str) -> bool:
        """Whether any partition's stored assignment has adding or removing replicas (what
        CreatePartitions reads)."""
        info = self.topics.get(topic)
        return info is not None and any(
            p.assignment.is_being_reassigned for p in info.partitions.values()
        )

    def add_topic(self, name: str, configs: dict[str, str]) -> Topic:
        topic = Topic(name, dict(configs))
        self.topics[name] = topic
        self._sorted_topics = None
        self._topics_by_normalized.setdefault(_normalized(name), {})[name] = None
        self.dirty_topics.add(name)
        self.event_topics.add(name)
        return topic

    def colliding_topic(self, name: str) -> str | None:
        """The first existing topic (in creation order) other than `name` whose name equals
        it once '.' is read as '_': Kafka refuses to create `name` then."""
        for existing in self._topics_by_normalized.get(_normalized(name), ()):
            if existing != name:
                return existing
        return None

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics[name].configs = dict(configs)
        self.dirty_topics.add(name)
        self.event_topics.add(name)

    def add_partition(self, tp: TopicPartition, assignment: ReplicaAssignment) -> Partition:
        record = Partition(tp, ReplicaAssignment(()))
        self.topics[tp.topic].partitions[tp.partition] = record
        self._sorted_records.pop(tp.topic, None)
        self._with_leaders = None
        self.set_assignment(record, assignment)  # (drops the topic's deletion counts)
        return record

    def load_partition(
        self,
        tp: TopicPartition,
        assignment: ReplicaAssignment,
        leadership: LeaderAndIsr | None,
        state: PartitionState,
        last_event_id: str | None,
    ) -> Partition:
        """A partition read back from the tables, new to the context: what add_partition,
        set_leadership and set_partition_state leave, without their checks of a previous
        value and without marking it dirty (a load costs what it reads)."""
        record = Partition(
            tp, self._shared(assignment), leadership, state, NO_REPLICA_STATES, last_event_id
        )
        self.topics[tp.topic].partitions[tp.partition] = record
        self._sorted_records.pop(tp.topic, None)
        self._deletion_counts.pop(tp.topic, None)
        self._with_leaders = None
        hosted = self._replicas_on_broker
        for broker in assignment.replicas:
            on_broker = hosted.get(broker)
            if on_broker is None:
                on_broker = hosted[broker] = set()
            on_broker.add(tp)
        if leadership is not None:
            led = self._led_by.get(leadership.leader)
            if led is None:
                led = self._led_by[leadership.leader] = set()
            led.add(tp)
            if leadership.is_restamped:
                self.restamped_partitions.add(tp)
        if state is PartitionState.NEW or state is PartitionState.OFFLINE:
            self._new_or_offline.add(tp)
        self._index_preferred(record)
        return record

    def remove_topic(self, name: str) -> None:
        """Kafka's removeTopic: assignments and leadership go; the partition rows go with
        them (a NonExistentPartition state is the same as none). partitionsBeingReassigned
        keeps the topic's partitions (a deletion may complete mid-reassignment, §19.13):
        a re-created topic of that name finds them there (SPEC §15.2)."""
        topic = self.topics.pop(name)
        self._sorted_records.pop(name, None)
        self._deletion_counts.pop(name, None)
        self._sorted_topics = None
        self._with_leaders = None
        same = self._topics_by_normalized[_normalized(name)]
        del same[name]
        if not same:
            del self._topics_by_normalized[_normalized(name)]
        for record in topic.partitions.values():
            self.set_leadership(record, None)
            for broker in record.assignment.replicas:
                self._unindex_replica(record.tp, broker)
            self._new_or_offline.discard(record.tp)
            self.event_partitions.pop(record.tp, None)
            self.event_removed.append(record)
            if self.marks_rows:
                self.dirty_partitions.add(record.tp)
                for broker in record.replica_states:
                    self.dirty_replicas.add((record.tp, broker))
        self.topics_to_be_deleted.discard(name)
        self.topics_with_deletion_started.discard(name)
        self.dirty_topics.add(name)
        self.event_topics.add(name)

    def set_assignment(self, record: Partition, assignment: ReplicaAssignment) -> None:
        old = record.assignment.replicas
        new = assignment.replicas
        if old != new:
            self._deletion_counts.pop(record.tp.topic, None)
            for broker in old:
                if broker not in new:
                    self._unindex_replica(record.tp, broker)
            for broker in new:
                self._replicas_on_broker.setdefault(broker, set()).add(record.tp)
        shared = self._shared(assignment)
        if shared.replicas is not record.assignment.replicas:
            record.metadata_entry = None
        record.assignment = shared
        self._index_preferred(record)
        if self._metadata_changes is not None:
            self._metadata_changes.add(record.tp)
        self._touch(record)

    def _index_preferred(self, record: Partition) -> None:
        """Keep `_not_preferred` true of the record's new leadership or assignment."""
        leadership = record.leadership
        replicas = record.assignment.replicas
        if leadership is not None and (not replicas or leadership.leader != replicas[0]):
            self._not_preferred.add(record.tp)
        elif self._not_preferred:  # (often empty: no hash of the partition then)
            self._not_preferred.discard(record.tp)

    def _shared(self, assignment: ReplicaAssignment) -> ReplicaAssignment:
        shared = self._assignments
        if len(shared) >= _MAX_SHARED_ASSIGNMENTS:
            shared.clear()  # old values no partition holds any more cannot pile up
        return shared.setdefault(assignment, assignment)

    def _unindex_replica(self, tp: TopicPartition, broker: int) -> None:
        hosted = self._replicas_on_broker.get(broker)
        if hosted is not None:
            hosted.discard(tp)
            if not hosted:
                del self._replicas_on_broker[broker]

    def take_metadata_changes(self, log_next: bool) -> set[TopicPartition] | None:
        """The partitions whose leadership or assignment changed since the last call (for
        the one caller: a new broker's full UpdateMetadata body); None if they were not
        logged. `log_next`: log them until the next call."""
        changes = self._metadata_changes
        self._metadata_changes = set() if log_next else None
        return changes

    def set_leadership(self, record: Partition, leadership: LeaderAndIsr | None) -> None:
        old = record.leadership
        if leadership is old:
            # written back as it was (an ISR removal that found nothing to remove: 3,000
            # partitions a broker failure after a controlled shutdown): no index, entry or
            # health figure can change, only the row's event id
            self._touch_row(record)
            return
        if old is not None and (leadership is None or old.leader != leadership.leader):
            led = self._led_by[old.leader]
            led.discard(record.tp)
            if not led:
                del self._led_by[old.leader]
        if leadership is not None and (old is None or old.leader != leadership.leader):
            self._led_by.setdefault(leadership.leader, set()).add(record.tp)
        if (old is None) is not (leadership is None):
            self._with_leaders = None
        if leadership is not None and leadership.is_restamped:
            self.restamped_partitions.add(record.tp)
        elif self.restamped_partitions:  # mostly empty: no hash of the partition then
            self.restamped_partitions.discard(record.tp)
        record.metadata_entry = None
        record.leadership = leadership
        self._index_preferred(record)
        if self._metadata_changes is not None:
            self._metadata_changes.add(record.tp)
        self._touch(record)

    def set_partition_state(self, record: Partition, state: PartitionState) -> None:
        record.state = state
        if state is PartitionState.NEW or state is PartitionState.OFFLINE:
            self._new_or_offline.add(record.tp)
        else:
            self._new_or_offline.discard(record.tp)
        self._touch(record)

    def _touch(self, record: Partition) -> None:
        self._touch_row(record)
        self.event_partitions[record.tp] = record

    def _touch_row(self, record: Partition) -> None:
        """The partition's row changed (its last event id at least)."""
        record.last_event_id = self.event_id
        if self.marks_rows:
            self.dirty_partitions.add(record.tp)

    def set_replica_state(self, record: Partition, broker: int, state: ReplicaState) -> None:
        if self._deletion_counts:
            self._count_replica(record, broker, state)
        record.set_replica(broker, state, self.event_id, self.replica_state_maps)
        if self.marks_rows:
            self.dirty_replicas.add((record.tp, broker))

    def remove_replica_state(self, record: Partition, broker: int) -> None:
        if self._deletion_counts:
            self._count_replica(record, broker, None)
        record.remove_replica(broker, self.replica_state_maps)
        if self.marks_rows:
            self.dirty_replicas.add((record.tp, broker))

    def _count_replica(self, record: Partition, broker: int, state: ReplicaState | None) -> None:
        """Move a replica from its state to `state` in its topic's deletion counts (if
        counted, and if assigned: only assigned replicas are counted, each time listed)."""
        counts = self._deletion_counts.get(record.tp.topic)
        if counts is not None:
            listed = record.assignment.replicas.count(broker)
            if listed:
                counts[record.replica_states.get(broker)] -= listed
                counts[state] += listed

    # ---- derived views (CTX helpers, SPEC §1.2) ------------------------------------------

    def hosted_partitions(self, broker: int) -> AbstractSet[TopicPartition]:
        """The partitions with a replica assigned to `broker`, unordered (a live view)."""
        return self._replicas_on_broker.get(broker, frozenset())

    def partitions_on_broker(self, broker: int) -> list[TopicPartition]:
        return sorted_partitions(self._replicas_on_broker.get(broker, ()))

    def replicas_on_brokers(self, brokers: Iterable[int]) -> list[tuple[TopicPartition, int]]:
        return [(tp, b) for b in sorted(set(brokers)) for tp in self.partitions_on_broker(b)]

    def replicas_of_topic(self, topic: str) -> list[tuple[TopicPartition, int]]:
        return [(record.tp, broker) for record, broker in self._topic_replicas(topic)]

    def is_queued_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        found: list[TopicPartition] = []
        for leader, led in self._led_by.items():
            if not self.is_live(leader):
                found.extend(tp for tp in led if tp.topic not in self.topics_to_be_deleted)
        return sorted_partitions(found)

    def partition_leaders_on_broker(self, broker: int) -> list[TopicPartition]:
        return sorted_partitions(
            tp
            for tp in self._led_by.get(broker, ())
            if tp.topic not in self.topics_to_be_deleted and len(self.assignment(tp).replicas) > 1
        )

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return [record.tp for record in self.records_with_leaders()]

    def records_with_leaders(self) -> list[Partition]:
        """The records of partitions_with_leaders, in its order. While no topic is queued
        for deletion, the same list object until a partition gains or loses its leader or
        a record comes or goes: callers must not change it."""
        deleting = self.topics_to_be_deleted
        if deleting:
            return self._records_with_leaders()
        records = self._with_leaders
        if records is None:
            records = self._with_leaders = self._records_with_leaders()
        return records

    def records_not_led_by_preferred(self) -> list[Partition]:
        """The records of records_with_leaders whose leader is not their first replica, in
        its order: from an index kept by every change of leadership or assignment, so a
        whole-cluster preferred election costs what it elects, not a walk of every
        partition (at 1M partitions, each record a cache miss)."""
        deleting = self.topics_to_be_deleted
        topics = self.topics
        return [
            topics[tp[0]].partitions[tp[1]]  # (tp.topic, tp.partition)
            for tp in sorted_partitions(self._not_preferred)
            if tp[0] not in deleting
        ]

    def _records_with_leaders(self) -> list[Partition]:
        # walked topic by topic (as all_partitions), not sorted from the leader index:
        # sorting every (topic, partition) pair compared topic strings ~log2(n) times each
        deleting = self.topics_to_be_deleted
        return [
            record
            for name in self._topic_names_sorted()
            if name not in deleting
            for record in self._records_sorted(name)
            if record.leadership is not None
        ]

    def _topic_names_sorted(self) -> list[str]:
        names = self._sorted_topics
        if names is None:
            names = self._sorted_topics = sorted(self.topics)
        return names

    def _records_sorted(self, topic: str) -> list[Partition]:
        """A topic's records by partition number (cached until one comes or goes)."""
        records = self._sorted_records.get(topic)
        if records is None:
            partitions = self.topics[topic].partitions
            records = self._sorted_records[topic] = [partitions[p] for p in sorted(partitions)]
        return records

    def new_or_offline_partitions(self, topic: str | None = None) -> list[TopicPartition]:
        return sorted_partitions(
            tp
            for tp in self._new_or_offline
            if tp.topic not in self.topics_to_be_deleted and (topic is None or tp.topic == topic)
        )

    def leader_epoch_for_stop_replica(
        self, tp: TopicPartition, record: Partition | None = None
    ) -> int:
        """CTX leaderEpoch: -2 while the topic is queued for deletion, else cached, else -1.
        `record`: the partition's, when the caller holds it."""
        if tp.topic in self.topics_to_be_deleted:
            return -2
        leadership = self.leadership(tp) if record is None else record.leadership
        return leadership.leader_epoch if leadership is not None else -1

    def replica_state(self, tp: TopicPartition, broker: int) -> ReplicaState | None:
        record = self.partition(tp)
        return None if record is None else record.replica_states.get(broker)

    def replicas_in_state(
        self, topic: str, state: ReplicaState
    ) -> list[tuple[TopicPartition, int]]:
        return [
            (r.tp, b) for r, b in self._topic_replicas(topic) if r.replica_states.get(b) is state
        ]

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        counts = self._deletion_state_counts(topic)
        if counts is not None:
            return counts[state] == counts.total()
        return all(r.replica_states.get(b) is state for r, b in self._topic_replicas(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        counts = self._deletion_state_counts(topic)
        if counts is not None:
            return counts[state] > 0
        return any(r.replica_states.get(b) is state for r, b in self._topic_replicas(topic))

    def _deletion_state_counts(self, topic: str) -> Counter[ReplicaState | None] | None:
        """A topic queued for deletion's replicas counted by state (see _deletion_counts);
        None for any other topic (walked: such checks are rare)."""
        counts = self._deletion_counts.get(topic)
        if counts is None and topic in self.topics_to_be_deleted and topic in self.topics:
            counts = Counter(r.replica_states.get(b) for r, b in self._topic_replicas(topic))
            self._deletion_counts[topic] = counts
        return counts

    def _topic_replicas(self, topic: str) -> Iterator[tuple[Partition, int]]:
        """(partition record, broker) of every assigned replica of a topic, in
        replicas_of_topic's order; the deletion checks run per StopReplica answer, so the
        records are walked directly, not looked up again per replica."""
        if topic not in self.topics:
            return
        for record in self._records_sorted(topic):
            for broker in record.assignment.replicas:
                yield record, broker


# distinct assignments kept for sharing: ~15 MB at most; past it, sharing starts over
_MAX_SHARED_ASSIGNMENTS = 1 << 17
# distinct replica-state maps (and changes between them) kept for sharing, as above
_MAX_SHARED_STATE_MAPS = 1 << 17

_PARTITION = itemgetter(1)  # a TopicPartition's partition, in C


def sorted_partitions(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    """`sorted(tps)` (distinct partitions, by topic then partition) in close to linear
    time: grouped by topic first, the few topic names are sorted once, then each topic's
    partition numbers. A plain sort compared (topic, partition) tuples ~log2(n) times each,
    a string comparison every time, on tuples scattered over a large heap: at 1M
    partitions the sorts of a broker failure's partitions and rows cost 2 µs per
    transition, growing with the cluster."""
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in tps:
        group = by_topic.get(tp[0])  # tp.topic (indexing skips the property's call)
        if group is None:
            by_topic[tp[0]] = [tp]
        else:
            group.append(tp)
    ordered: list[TopicPartition] = []
    for topic in sorted(by_topic):
        group = by_topic[topic]
        group.sort(key=_PARTITION)  # one topic: its partition numbers decide
        ordered += group
    return ordered


def sorted_replicas(
    replicas: Iterable[tuple[TopicPartition, int]],
) -> list[tuple[TopicPartition, int]]:
    """`sorted(replicas)` of distinct (partition, broker) pairs, grouped by topic first as
    sorted_partitions is."""
    by_topic: dict[str, list[tuple[TopicPartition, int]]] = {}
    for replica in replicas:
        topic = replica[0][0]
        group = by_topic.get(topic)
        if group is None:
            by_topic[topic] = [replica]
        else:
            group.append(replica)
    ordered: list[tuple[TopicPartition, int]] = []
    for topic in sorted(by_topic):
        group = by_topic[topic]
        group.sort()  # small groups of one topic: few comparisons each
        ordered += group
    return ordered


def _one_or_all(ids: dict[int, str | None]) -> str | dict[int, str | None] | None:
    """A partition's replica event ids, as one id when they all agree."""
    if not ids:
        return None
    distinct = set(ids.values())  # (a partition's few ids: cheaper than a generator)
    return distinct.pop() if len(distinct) == 1 else ids


def _normalized(topic: str) -> str:
    return topic.replace(".", "_")
