"""Output tables (CONTRACT §2): columns in order, key columns, append-only or keyed state."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.types import (
    BOOLEAN,
    DOUBLE,
    INT,
    INT_LIST,
    LONG,
    STRING,
    ArrayOf,
    DataType,
    MapOf,
    StructOf,
)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: DataType


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()  # empty for append-only tables

    @property
    def append_only(self) -> bool:
        return not self.key

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _table(name: str, key: tuple[str, ...], *columns: tuple[str, DataType]) -> Table:
    return Table(name, tuple(Column(n, t) for n, t in columns), key)


REQUEST_PARTITION = StructOf(
    (
        ("topic", STRING),
        ("partition", INT),
        ("controller_epoch", INT),
        ("leader", INT),
        ("leader_epoch", INT),
        ("isr", INT_LIST),
        ("partition_epoch", INT),
        ("replicas", INT_LIST),
        ("adding_replicas", INT_LIST),
        ("removing_replicas", INT_LIST),
        ("leader_recovery_state", STRING),
        ("offline_replicas", INT_LIST),
        ("is_new", BOOLEAN),
        ("delete_partition", BOOLEAN),
    )
)

PARTITION_STATE = _table(
    "partition_state",
    ("cluster", "topic", "partition"),
    ("cluster", STRING),
    ("topic", STRING),
    ("partition", INT),
    ("state", STRING),
    ("leader", INT),
    ("leader_epoch", INT),
    ("isr", INT_LIST),
    ("partition_epoch", INT),
    ("leader_recovery_state", STRING),
    ("controller_epoch", INT),
    ("replicas", INT_LIST),
    ("adding_replicas", INT_LIST),
    ("removing_replicas", INT_LIST),
    ("last_event_id", STRING),
    # KRaft's eligible leader replicas and last known ELR (CONTRACT §5); always empty
    # under zk. Last, so a lake written before them takes them by ADD COLUMNS.
    ("elr", INT_LIST),
    ("last_known_elr", INT_LIST),
)
REPLICA_STATE = _table(
    "replica_state",
    ("cluster", "topic", "partition", "broker"),
    ("cluster", STRING),
    ("topic", STRING),
    ("partition", INT),
    ("broker", INT),
    ("state", STRING),
    ("last_event_id", STRING),
)
BROKERS = _table(
    "brokers",
    ("cluster", "broker"),
    ("cluster", STRING),
    ("broker", INT),
    ("rack", STRING),
    ("status", STRING),
    ("broker_epoch", LONG),
)
TOPICS = _table(
    "topics",
    ("cluster", "topic"),
    ("cluster", STRING),
    ("topic", STRING),
    ("configs", MapOf(STRING, STRING)),
    ("deletion", STRING),
)
# Not in CONTRACT §2's list (the contract may grow): what a restart needs that no other
# table holds. Written only when it changes (a failover, a deletion or reassignment
# leaving Kafka's in-memory sets behind), not every batch: the cluster's last applied
# seq comes from applied_events.
CLUSTERS = _table(
    "clusters",
    ("cluster",),
    ("cluster", STRING),
    ("controller_epoch", INT),
    ("controller", INT),
    # deleted topics Kafka's controller still holds as ineligible for deletion (removeTopic
    # does not clear them, SPEC §15.2): a re-created topic of that name starts ineligible
    ("ineligible_deleted_topics", ArrayOf(STRING)),
    # partitions Kafka's controller still holds in partitionsBeingReassigned although their
    # assignment has no adding or removing replicas (a reassignment whose phase B failed,
    # e.g. of a partition without a leader, SPEC §14.3; a topic deleted mid-reassignment,
    # §15.2): broker startup and AlterPartition resume them, a re-created topic's included.
    # The others are derived from partition_state.
    ("stale_reassignments", ArrayOf(StructOf((("topic", STRING), ("partition", INT))))),
    # partitions whose leader and ISR the controller has re-cached under its own epoch
    # without writing them (an ISR removal with nothing to remove, SPEC §6.3): its requests
    # carry its epoch while partition_state.controller_epoch, ZooKeeper's, keeps the last
    # writer's, which is what a new controller loads (SPEC §7.2 step 4g)
    ("restamped_partitions", ArrayOf(StructOf((("topic", STRING), ("partition", INT))))),
    # the dynamic cluster-default broker configs a cluster_config_change set (ZooKeeper's
    # /config/brokers/<default>); under kraft they are in kraft_state
    ("cluster_configs", MapOf(STRING, STRING)),
    # the engine the cluster's tables were written with ("zk" | "kraft"; null: a lake
    # written before engines were named, zk): a run under the other one stops at start
    ("engine", STRING),
    # kraft: the KRaft controller's whole state (QuorumController.dump(), JSON text), what
    # a restart continues from; null under zk
    ("kraft_state", STRING),
)
APPLIED_EVENTS = _table(
    "applied_events",
    (),
    ("cluster", STRING),
    ("event_id", STRING),
    ("seq", LONG),
    ("type", STRING),
    ("ts", LONG),
)
CONTROLLER_REQUESTS = _table(
    "controller_requests",
    (),
    ("cluster", STRING),
    ("controller_epoch", INT),
    ("event_id", STRING),
    ("seq", LONG),
    ("request_seq", INT),
    ("type", STRING),
    ("broker", INT),
    ("delivered", BOOLEAN),
    # which of the event's request bodies: the key, with cluster and event_id, of its
    # request_payloads row
    ("payload", INT),
    ("ts", LONG),
)
# Each distinct request body an event sent, once however many brokers received it.
REQUEST_PAYLOADS = _table(
    "request_payloads",
    (),
    ("cluster", STRING),
    ("event_id", STRING),
    ("seq", LONG),
    ("payload", INT),
    ("type", STRING),
    ("partitions", ArrayOf(REQUEST_PARTITION)),
    ("live_brokers", INT_LIST),
    ("ts", LONG),
)
STATE_CHANGES = _table(
    "state_changes",
    (),
    ("cluster", STRING),
    ("event_id", STRING),
    ("seq", LONG),
    ("entity", STRING),
    ("topic", STRING),
    ("partition", INT),
    ("broker", INT),
    ("from_state", STRING),
    ("to_state", STRING),
    ("ok", BOOLEAN),
    ("error", STRING),
    ("leader", INT),
    ("leader_epoch", INT),
    ("isr", INT_LIST),
    ("unclean", BOOLEAN),
    ("ts", LONG),
)
EVENT_RESULTS = _table(
    "event_results",
    (),
    ("cluster", STRING),
    ("event_id", STRING),
    ("seq", LONG),
    ("topic", STRING),
    ("partition", INT),
    ("error", STRING),
    ("message", STRING),
    ("leader", INT),
    ("leader_epoch", INT),
    ("isr", INT_LIST),
    ("partition_epoch", INT),
    ("ts", LONG),
)
REJECTED_EVENTS = _table(
    "rejected_events",
    (),
    ("cluster", STRING),
    ("raw", STRING),
    ("reason", STRING),
    ("source", STRING),
)
# An event's `observed` state against kcsim's after it (CONTRACT §2): one row per field
# that differs; `observed` and `simulated` are JSON text (controller.divergence).
DIVERGENCES = _table(
    "divergences",
    (),
    ("cluster", STRING),
    ("event_id", STRING),
    ("seq", LONG),
    ("ts", LONG),
    ("topic", STRING),
    ("partition", INT),
    ("field", STRING),
    ("observed", STRING),
    ("simulated", STRING),
)
# The invariants Kafka's controller keeps, broken by kcsim's state after an event
# (`simulated`: a bug) or by an event's `observed` state (controller.invariants).
VIOLATIONS = _table(
    "violations",
    (),
    ("cluster", STRING),
    ("event_id", STRING),
    ("seq", LONG),
    ("ts", LONG),
    ("source", STRING),
    ("invariant", STRING),
    ("topic", STRING),
    ("partition", INT),
    ("broker", INT),
    ("detail", STRING),
)
# The cluster's vital signs after every event (controller.health).
HEALTH = _table(
    "health",
    (),
    ("cluster", STRING),
    ("event_id", STRING),
    ("seq", LONG),
    ("ts", LONG),
    ("partitions", INT),
    ("offline", INT),
    ("under_replicated", INT),
    ("at_min_isr", INT),
    ("not_preferred", INT),
    ("max_broker_imbalance", DOUBLE),
    ("live_brokers", INT),
    ("unclean_elections", LONG),
    ("leader_changes", INT),
    ("requests", INT),
    # KRaft: leaders taken from the ELR and last known leaders elected, so far (0 under zk)
    ("elr_elections", LONG),
    ("last_known_leader_elections", LONG),
)
# The KRaft engine's output stream (CONTRACT §5): one row per metadata record, in the order
# the controller appends them; `record` is the record's fields as JSON text. No rows under zk.
METADATA_RECORDS = _table(
    "metadata_records",
    (),
    ("cluster", STRING),
    ("event_id", STRING),
    ("seq", LONG),
    ("record_seq", INT),
    ("type", STRING),
    ("record", STRING),
    ("ts", LONG),
)

STATE_TABLES: tuple[Table, ...] = (PARTITION_STATE, REPLICA_STATE, BROKERS, TOPICS, CLUSTERS)
APPEND_TABLES: tuple[Table, ...] = (
    CONTROLLER_REQUESTS,
    REQUEST_PAYLOADS,
    STATE_CHANGES,
    EVENT_RESULTS,
    REJECTED_EVENTS,
    APPLIED_EVENTS,
    DIVERGENCES,
    VIOLATIONS,
    HEALTH,
    METADATA_RECORDS,
)
TABLES: dict[str, Table] = {t.name: t for t in STATE_TABLES + APPEND_TABLES}
