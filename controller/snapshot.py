"""The stored state tables <-> a ControllerContext.

What Kafka keeps in ZooKeeper (registrations, assignments, leader/ISR, topic configs, the
deletion queue, the controller epoch) plus the state machines' states is all in the
tables, so a context rebuilt from them continues exactly as the original would have.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import itemgetter, lt
from typing import Any

from controller.columns import Columns
from controller.model import (
    BrokerStatus,
    LeaderAndIsr,
    PartitionState,
    RecoveryState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from controller.zk.context import ControllerContext, Partition

Row = dict[str, Any]

# the tables of millions of rows at 1M partitions that `load` reads column by column (it
# zips them): a reader with columns at hand (Arrow) hands them over as `Columns`, with no
# dict per row (~2 µs each: 8 s of a 1M-partition cluster's restore)
COLUMNAR_TABLES = frozenset({"partition_state", "replica_state", "applied_events"})

QUEUED = "queued"
INELIGIBLE = "ineligible"


# ---- context -> rows ---------------------------------------------------------------------


def partition_row(cluster: str, record: Partition) -> Row:
    leadership = record.leadership
    assignment = record.assignment
    return {
        "cluster": cluster,
        "topic": record.tp.topic,
        "partition": record.tp.partition,
        # _value_, not value: the same str without enum's property call (every row)
        "state": record.state._value_,
        "leader": -1 if leadership is None else leadership.leader,
        "leader_epoch": None if leadership is None else leadership.leader_epoch,
        "isr": None if leadership is None else list(leadership.isr),
        "partition_epoch": None if leadership is None else leadership.partition_epoch,
        "leader_recovery_state": None if leadership is None else leadership.recovery._value_,
        # ZooKeeper's, not the cache's: they differ after a no-write ISR removal (SPEC §6.3)
        "controller_epoch": None if leadership is None else leadership.stored_controller_epoch,
        "replicas": list(assignment.replicas),
        "adding_replicas": list(assignment.adding),
        "removing_replicas": list(assignment.removing),
        "last_event_id": record.last_event_id,
        "elr": [],  # the ZooKeeper engine has no ELR
        "last_known_elr": [],
    }


def replica_row(cluster: str, record: Partition, broker: int) -> Row:
    return {
        "cluster": cluster,
        "topic": record.tp.topic,
        "partition": record.tp.partition,
        "broker": broker,
        "state": record.replica_states[broker]._value_,
        "last_event_id": record.replica_event_id(broker),
    }


def broker_row(context: ControllerContext, broker: int) -> Row:
    info = context.brokers[broker]
    return {
        "cluster": context.cluster,
        "broker": broker,
        "rack": info.rack,
        "status": info.status.value,
        "broker_epoch": info.epoch,
    }


def deletion_status(context: ControllerContext, topic: str) -> str | None:
    if topic not in context.topics_to_be_deleted:
        return None
    return INELIGIBLE if topic in context.topics_ineligible_for_deletion else QUEUED


def topic_row(context: ControllerContext, topic: str) -> Row:
    return {
        "cluster": context.cluster,
        "topic": topic,
        "configs": dict(context.topics[topic].configs),
        "deletion": deletion_status(context, topic),
    }


def cluster_row(context: ControllerContext) -> Row:
    return {
        "cluster": context.cluster,
        "controller_epoch": context.epoch,
        "controller": context.controller_id,
        "ineligible_deleted_topics": sorted(
            context.topics_ineligible_for_deletion - context.topics_to_be_deleted
        ),
        "stale_reassignments": [
            {"topic": tp.topic, "partition": tp.partition}
            for tp in sorted(context.partitions_being_reassigned)
            if not context.assignment(tp).is_being_reassigned
        ],
        "restamped_partitions": [
            {"topic": tp.topic, "partition": tp.partition}
            for tp in sorted(context.restamped_partitions)
        ],
        "cluster_configs": dict(context.cluster_configs),
        "engine": "zk",
        "kraft_state": None,
    }


def dump(context: ControllerContext) -> dict[str, list[Row]]:
    return {name: list(table_rows(context, name)) for name in STATE_TABLE_ROWS}


def table_rows(context: ControllerContext, table: str) -> Iterator[Row]:
    """One state table's rows, made as they are read: writing a table holds none of the
    others' rows, nor all of its own."""
    return STATE_TABLE_ROWS[table](context)


def _partition_rows(context: ControllerContext) -> Iterator[Row]:
    cluster = context.cluster
    return (partition_row(cluster, r) for r in context.all_partitions())


def _replica_rows(context: ControllerContext) -> Iterator[Row]:
    cluster = context.cluster
    return (
        replica_row(cluster, r, b)
        for r in context.all_partitions()
        for b in sorted(r.replica_states)
    )


def _broker_rows(context: ControllerContext) -> Iterator[Row]:
    return (broker_row(context, b) for b in sorted(context.brokers))


def _topic_rows(context: ControllerContext) -> Iterator[Row]:
    return (topic_row(context, t) for t in sorted(context.topics))


def _cluster_rows(context: ControllerContext) -> Iterator[Row]:
    yield cluster_row(context)


STATE_TABLE_ROWS: dict[str, Callable[[ControllerContext], Iterator[Row]]] = {
    "partition_state": _partition_rows,
    "replica_state": _replica_rows,
    "brokers": _broker_rows,
    "topics": _topic_rows,
    "clusters": _cluster_rows,
}


# ---- rows -> context ---------------------------------------------------------------------


def load(cluster: str, tables: Mapping[str, Iterable[Mapping[str, Any]]]) -> ControllerContext:
    """Rebuild one cluster's context from its rows (rows of other clusters are ignored)."""
    context = ControllerContext(cluster)

    def rows(name: str) -> list[Mapping[str, Any]]:
        return [r for r in tables.get(name, ()) if r["cluster"] == cluster]

    def columns(name: str, names: tuple[str, ...]) -> Columns:
        """The cluster's rows of a large table (millions at 1M partitions), as columns."""
        table = tables.get(name, ())
        if isinstance(table, Columns):
            return table.where("cluster", cluster)
        return Columns.of_rows(rows(name), names)

    restamped: set[TopicPartition] = set()
    for row in rows("clusters"):
        context.epoch = row["controller_epoch"]
        context.controller_id = row["controller"]
        context.topics_ineligible_for_deletion.update(row.get("ineligible_deleted_topics") or ())
        context.partitions_being_reassigned.update(
            TopicPartition(r["topic"], r["partition"]) for r in row.get("stale_reassignments") or ()
        )
        restamped.update(
            TopicPartition(r["topic"], r["partition"])
            for r in row.get("restamped_partitions") or ()
        )
        context.cluster_configs = dict(row.get("cluster_configs") or {})
    applied = columns("applied_events", ("seq", "event_id"))
    if len(applied):
        context.last_seq, context.last_event_id = max(
            applied.tuples("seq", "event_id"), key=itemgetter(0)
        )
    for row in rows("brokers"):
        status = BrokerStatus(row["status"])
        context.register_broker(row["broker"], row["rack"], row["broker_epoch"])
        if status is not BrokerStatus.LIVE:
            context.set_broker_status(row["broker"], status)
    for row in rows("topics"):
        context.add_topic(row["topic"], dict(row["configs"] or {}))
        if row["deletion"] is not None:
            context.topics_to_be_deleted.add(row["topic"])
        if row["deletion"] == INELIGIBLE:
            context.topics_ineligible_for_deletion.add(row["topic"])
    shared: dict[object, Any] = {}
    partitions = columns("partition_state", _PARTITION_COLUMNS)
    in_order: Iterable[tuple[Any, ...]] = partitions.tuples(*_PARTITION_COLUMNS)
    if not _in_key_order(partitions):
        # (a list of a tuple per row: ~160 MB at 1M partitions; a lake's rows come sorted)
        in_order = sorted(in_order, key=itemgetter(0, 1))
    for values in in_order:
        _load_partition(context, values, restamped, shared)
    replicas = columns("replica_state", _REPLICA_COLUMNS)
    topics = context.topics
    maps = context.replica_state_maps
    name: str | None = None
    records: dict[int, Partition] = {}
    for topic, partition, broker, state, event_id in replicas.tuples(*_REPLICA_COLUMNS):
        if topic != name:  # (a lake's rows come by key: one lookup per run of a topic)
            name = topic
            info = topics.get(topic)
            records = {} if info is None else info.partitions
        record = records.get(partition)
        if record is not None:
            record.set_replica(broker, _REPLICA_STATES[state], event_id, maps)
    _derive_transient_sets(context)
    context.clear_dirty()
    return context


# the partition_state and replica_state columns a load reads, in the order it takes them
_PARTITION_COLUMNS = (
    "topic", "partition", "state", "leader", "leader_epoch", "isr", "partition_epoch",
    "leader_recovery_state", "controller_epoch", "replicas", "adding_replicas",
    "removing_replicas", "last_event_id",
)  # fmt: skip
_REPLICA_COLUMNS = ("topic", "partition", "broker", "state", "last_event_id")


def _in_key_order(partitions: Columns) -> bool:
    """Whether the rows are sorted by (topic, partition)."""
    keys = zip(partitions.column("topic"), partitions.column("partition"), strict=True)
    following = zip(partitions.column("topic"), partitions.column("partition"), strict=True)
    next(following, None)
    return all(map(lt, keys, following))


def _load_partition(
    context: ControllerContext,
    values: tuple[Any, ...],
    restamped: set[TopicPartition],
    shared: dict[object, Any],
) -> None:
    """A partition_state row's `values` (_PARTITION_COLUMNS). `shared` holds one object
    per distinct partition number and replica or ISR tuple seen so far: rows bring their
    own copies, which would be kept once per partition (~150 bytes, and a cache miss more
    per partition touched at a million partitions)."""
    (
        topic, partition, state, leader, leader_epoch, isr, partition_epoch, recovery,
        controller_epoch, replicas, adding, removing, last_event_id,
    ) = values  # fmt: skip
    partition = shared.setdefault(partition, partition)
    info = context.topics.get(topic)
    if info is None:
        return
    # the topic's own name object: every row brings a copy of it (at 1M partitions, ~60 MB
    # of equal strings, and sorting partitions compared their characters)
    tp = TopicPartition(info.name, partition)
    replicas = tuple(replicas)
    assignment = ReplicaAssignment(
        shared.setdefault(replicas, replicas), tuple(adding or ()), tuple(removing or ())
    )
    leadership = None
    if leader_epoch is not None:
        isr = tuple(isr)
        leadership = LeaderAndIsr(
            leader,
            leader_epoch,
            shared.setdefault(isr, isr),
            partition_epoch,
            _RECOVERY_STATES[recovery],
            controller_epoch,
        )
        if tp in restamped:
            # the running controller's cache, re-stamped under its epoch without a write
            leadership = leadership.stamped(context.epoch)
    context.load_partition(tp, assignment, leadership, _PARTITION_STATES[state], last_event_id)


# value -> member: calling an Enum class on a value is ~1 µs, a dict lookup ~30 ns
_RECOVERY_STATES = {state.value: state for state in RecoveryState}
_PARTITION_STATES = {state.value: state for state in PartitionState}
_REPLICA_STATES = {state.value: state for state in ReplicaState}


def _derive_transient_sets(context: ControllerContext) -> None:
    """What Kafka holds only in memory, recovered from the rows: a queued topic whose
    partitions are NonExistentPartition has started deletion; a partition with adding or
    removing replicas is being reassigned."""
    for topic in context.topics_to_be_deleted:
        partitions = context.topics[topic].partitions.values()
        if partitions and all(p.state is PartitionState.NON_EXISTENT for p in partitions):
            context.topics_with_deletion_started.add(topic)
    for record in context.all_partitions():
        if record.assignment.is_being_reassigned:
            context.partitions_being_reassigned.add(record.tp)


def reload_for_failover(context: ControllerContext) -> ControllerContext:
    """A new controller's view: the stored state only. Replica and partition states, the
    deletion-started and ineligible sets and the shutting-down set are Kafka's memory, so
    they start empty (the new controller's startup rebuilds them); its leadership cache
    holds each partition's leader and ISR with the controller epoch stored with them, not
    the old controller's re-stamps (SPEC §7.2 step 4g)."""
    tables = dump(context)
    tables["clusters"] = [{**row, "restamped_partitions": []} for row in tables["clusters"]]
    fresh = load(context.cluster, tables)
    fresh.marks_rows = context.marks_rows
    fresh.dirty_partitions |= context.dirty_partitions
    fresh.dirty_replicas |= context.dirty_replicas
    fresh.dirty_brokers |= context.dirty_brokers
    fresh.dirty_topics |= context.dirty_topics
    fresh.topics_with_deletion_started.clear()
    fresh.topics_ineligible_for_deletion.clear()
    fresh.partitions_being_reassigned.clear()
    fresh.event_id = context.event_id
    fresh.last_seq = context.last_seq  # not a table of its own: applied_events holds it
    fresh.last_event_id = context.last_event_id
    for record in fresh.all_partitions():
        for broker in list(record.replica_states):
            fresh.remove_replica_state(record, broker)
    return fresh
