"""Input events (CONTRACT §1): the common fields and each type's own fields.

A field's `kind` names a validation rule of `controller.events` (Kafka's value rules:
broker ids and partitions are non-negative int32, topic names are Kafka-legal, replica
lists are non-empty and distinct) and the Spark type it reads as.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    STRING = "string"
    INT = "int"  # any int32
    LONG = "long"
    BROKER = "broker"  # non-negative int32
    TOPIC = "topic"
    PARTITION = "partition"  # non-negative int32
    REPLICAS = "replicas"  # non-empty list of distinct brokers
    REPLICAS_OR_NULL = "replicas_or_null"
    BROKER_LIST = "broker_list"  # possibly empty list of distinct brokers
    ASSIGNMENT = "assignment"  # {"<partition>": replicas}
    CONFIGS = "configs"  # {string: string | bool}
    ELECTION = "election"  # "preferred" | "unclean"
    PARTITION_REFS = "partition_refs"  # [{"topic", "partition"}]
    ERROR_OR_NULL = "error_or_null"  # Kafka error code name or null
    TIMESTAMP = "timestamp"  # ISO-8601 string or epoch ms
    # {"<partition>": {leader, leader_epoch, isr, partition_epoch, controller_epoch,
    # leader_recovery_state?}}: stored partition states (a snapshot of a running cluster)
    PARTITION_STATES = "partition_states"
    # "queued": the topic's /admin/delete_topics entry is stored (a snapshot of a cluster
    # deleting it)
    DELETION = "deletion"
    OBSERVED = "observed"  # {"partitions": [{"topic", "partition", "leader", ...}]}
    EPOCH = "epoch"  # a broker epoch: non-negative int64
    PREVIOUS_EPOCH = "previous_epoch"  # a broker epoch, or -1 (none)
    # {"<broker>": epoch}: the ISR members' broker epochs of an AlterPartition (KIP-903)
    BROKER_EPOCHS = "broker_epochs"
    RECOVERY_STATE = "recovery_state"  # "RECOVERED" | "RECOVERING"
    # {string: string | bool}: dynamic broker configs (the cluster default or one node's)
    BROKER_CONFIGS = "broker_configs"
    FEATURES = "features"  # {"eligible.leader.replicas.version": level}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    kind: Kind
    required: bool = True


COMMON_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("type", Kind.STRING),
    FieldSpec("cluster", Kind.STRING, required=False),
    FieldSpec("event_id", Kind.STRING, required=False),
    FieldSpec("seq", Kind.LONG, required=False),
    FieldSpec("ts", Kind.TIMESTAMP, required=False),
    # a real controller's partition states after the event: compared, never applied
    FieldSpec("observed", Kind.OBSERVED, required=False),
)


def _f(name: str, kind: Kind, required: bool = True) -> FieldSpec:
    return FieldSpec(name, kind, required)


EVENT_FIELDS: dict[str, tuple[FieldSpec, ...]] = {
    # `broker` or `brokers` (one BrokerChange of several brokers): checked by the validator.
    "broker_startup": (
        _f("broker", Kind.BROKER, False),
        _f("rack", Kind.STRING, False),
        _f("brokers", Kind.REPLICAS, False),
    ),
    "broker_failure": (_f("broker", Kind.BROKER, False), _f("brokers", Kind.REPLICAS, False)),
    "controlled_shutdown": (_f("broker", Kind.BROKER), _f("broker_epoch", Kind.LONG, False)),
    # `assignment` or `partitions` + `replication_factor`: checked by the validator.
    "topic_creation": (
        _f("topic", Kind.TOPIC),
        _f("assignment", Kind.ASSIGNMENT, False),
        _f("partitions", Kind.INT, False),
        _f("replication_factor", Kind.INT, False),
        _f("configs", Kind.CONFIGS, False),
        _f("state", Kind.PARTITION_STATES, False),
        _f("deletion", Kind.DELETION, False),
    ),
    "partition_creation": (
        _f("topic", Kind.TOPIC),
        _f("assignment", Kind.ASSIGNMENT),
        _f("state", Kind.PARTITION_STATES, False),
    ),
    "topic_deletion": (_f("topic", Kind.TOPIC),),
    "partition_reassignment": (
        _f("topic", Kind.TOPIC),
        _f("partition", Kind.PARTITION),
        # present and null cancels; absent is a mistake
        _f("replicas", Kind.REPLICAS_OR_NULL),
    ),
    "isr_change": (
        _f("topic", Kind.TOPIC),
        _f("partition", Kind.PARTITION),
        _f("isr", Kind.REPLICAS),
        _f("leader_epoch", Kind.INT, False),
        _f("partition_epoch", Kind.INT, False),
        # KRaft (CONTRACT §5): the sending broker (default: the current leader), the ISR
        # members' broker epochs, and the recovery state a leader reports
        _f("leader", Kind.BROKER, False),
        _f("broker_epochs", Kind.BROKER_EPOCHS, False),
        _f("leader_recovery_state", Kind.RECOVERY_STATE, False),
    ),
    "leader_election": (
        _f("election", Kind.ELECTION),
        _f("partitions", Kind.PARTITION_REFS, False),
    ),
    "auto_rebalance_check": (),
    "stop_replica_response": (
        _f("topic", Kind.TOPIC),
        _f("partition", Kind.PARTITION),
        _f("broker", Kind.BROKER),
        _f("error", Kind.ERROR_OR_NULL),
    ),
    "topic_config_change": (_f("topic", Kind.TOPIC), _f("configs", Kind.CONFIGS)),
    "controller_failover": (
        _f("controller", Kind.BROKER, False),
        _f("failed_brokers", Kind.BROKER_LIST, False),
        _f("controller_epoch", Kind.INT, False),
    ),
    # the KRaft controller's own inputs (CONTRACT §5); the ZooKeeper engine does the
    # nearest thing its controller does, or nothing, and says which in event_results
    "broker_registration": (
        _f("broker", Kind.BROKER),
        _f("rack", Kind.STRING, False),
        _f("broker_epoch", Kind.EPOCH, False),
        _f("previous_broker_epoch", Kind.PREVIOUS_EPOCH, False),
        _f("incarnation", Kind.STRING, False),
    ),
    "broker_unfence": (_f("broker", Kind.BROKER),),
    "broker_unregistration": (_f("broker", Kind.BROKER),),
    "unclean_election_check": (),
    "cluster_config_change": (
        _f("configs", Kind.BROKER_CONFIGS),
        _f("broker", Kind.BROKER, False),
    ),
    "feature_update": (_f("features", Kind.FEATURES),),
}
# the types only the KRaft controller has (CONTRACT §5's table)
KRAFT_EVENT_TYPES: tuple[str, ...] = (
    "broker_registration",
    "broker_unfence",
    "broker_unregistration",
    "unclean_election_check",
    "cluster_config_change",
    "feature_update",
)
EVENT_TYPES: tuple[str, ...] = tuple(EVENT_FIELDS)
