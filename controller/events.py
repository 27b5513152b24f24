"""Typed controller events (CONTRACT §1), as the parser hands them to the controller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from controller.model import TopicPartition


class ObservedPartition(NamedTuple):
    """One partition's state znode (or KRaft registration) as a real controller had
    written it: the optional fields are None when the event does not give them."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int | None = None
    controller_epoch: int | None = None
    replicas: tuple[int, ...] | None = None
    # a KRaft cluster's (CONTRACT §5)
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None
    leader_recovery_state: str | None = None


class ObservedBroker(NamedTuple):
    """A KRaft cluster's broker as its controller had it: `live`, `fenced` or
    `shutting_down` (CONTRACT §5)."""

    broker: int
    status: str


class ObservedEvent(NamedTuple):
    """What a rejected event carrying `observed` still tells: its ids as given (None when
    absent or unreadable) and its observed partitions."""

    event_id: str | None
    seq: int | None
    ts: int | None
    partitions: tuple[ObservedPartition, ...]


# Header and Event are built for every line, so they are named tuples (immutable like the
# frozen dataclasses, but built in a single call instead of one object.__setattr__ per
# field); the bodies stay dataclasses, which parse checks against the field specs.
class Header(NamedTuple):
    """Common fields. `seq` and `event_id` are as given; the simulator fills the defaults."""

    type: str
    cluster: str
    event_id: str | None
    seq: int | None
    ts: int | None  # epoch milliseconds
    raw: str
    source: str
    # the real controller's state of some partitions after this event (CONTRACT §1, §4);
    # None when the event carries none. Compared, never applied (controller.divergence).
    observed: tuple[ObservedPartition, ...] | None = None
    # `observed.brokers` of a KRaft cluster: None when the event carries none
    observed_brokers: tuple[ObservedBroker, ...] | None = None


@dataclass(frozen=True, slots=True)
class BrokerStartup:
    """`broker`, or `brokers` registering together (one BrokerChange); parse checks that
    exactly one is given. `rack` applies to each."""

    broker: int | None = None
    rack: str | None = None
    brokers: tuple[int, ...] | None = None

    @property
    def ids(self) -> tuple[int, ...]:
        return self.brokers if self.brokers is not None else (self.broker,)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class BrokerFailure:
    """`broker`, or `brokers` whose registrations vanish together (one BrokerChange)."""

    broker: int | None = None
    brokers: tuple[int, ...] | None = None

    @property
    def ids(self) -> tuple[int, ...]:
        return self.brokers if self.brokers is not None else (self.broker,)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class ControlledShutdown:
    broker: int
    broker_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class StoredPartitionState:
    """A partition's state znode (LeaderIsrAndControllerEpoch and its version), as a
    snapshot of a running cluster gives it: the partition already exists."""

    leader: int  # -1: none
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int  # the znode's version
    controller_epoch: int
    leader_recovery_state: str = "RECOVERED"
    # a KRaft snapshot's (CONTRACT §5): empty for a ZooKeeper one
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicCreation:
    topic: str
    # either an explicit assignment, or partitions + replication_factor for Kafka's
    # broker-side assignment (computed by the controller against the live brokers)
    assignment: dict[int, tuple[int, ...]] | None = None
    partitions: int | None = None
    replication_factor: int | None = None
    configs: dict[str, str] | None = None
    # partitions of the assignment that already exist, with their stored state
    state: dict[int, StoredPartitionState] | None = None
    # "queued": the topic exists queued for deletion (its /admin/delete_topics entry)
    deletion: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionCreation:
    topic: str
    assignment: dict[int, tuple[int, ...]]
    state: dict[int, StoredPartitionState] | None = None


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    topic: str


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...] | None  # None cancels


@dataclass(frozen=True, slots=True)
class IsrChange:
    topic: str
    partition: int
    isr: tuple[int, ...]
    leader_epoch: int | None = None
    partition_epoch: int | None = None
    # KRaft (CONTRACT §5): the broker sending the AlterPartition (None: the current
    # leader), the ISR members' broker epochs (KIP-903), the recovery state it reports
    leader: int | None = None
    broker_epochs: dict[int, int] | None = None
    leader_recovery_state: str | None = None


@dataclass(frozen=True, slots=True)
class LeaderElection:
    election: str  # "preferred" | "unclean"
    partitions: tuple[TopicPartition, ...] | None = None  # None: all


@dataclass(frozen=True, slots=True)
class AutoRebalanceCheck:
    pass


@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    topic: str
    partition: int
    broker: int
    error: str | None


@dataclass(frozen=True, slots=True)
class TopicConfigChange:
    topic: str
    configs: dict[str, str]


@dataclass(frozen=True, slots=True)
class ControllerFailover:
    controller: int | None = None
    failed_brokers: tuple[int, ...] = ()
    controller_epoch: int | None = None  # the epoch won (/controller_epoch); None: current + 1


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """KRaft's BrokerRegistration: the broker registers fenced (CONTRACT §5)."""

    broker: int
    rack: str | None = None
    broker_epoch: int | None = None
    previous_broker_epoch: int | None = None
    incarnation: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerUnfence:
    """The heartbeat that unfences a caught-up broker."""

    broker: int


@dataclass(frozen=True, slots=True)
class BrokerUnregistration:
    """UnregisterBroker (KIP-855)."""

    broker: int


@dataclass(frozen=True, slots=True)
class UncleanElectionCheck:
    """One run of KRaft's periodic unclean-election task."""


@dataclass(frozen=True, slots=True)
class ClusterConfigChange:
    """A dynamic broker config: the cluster default (`broker` None) or one node's."""

    configs: dict[str, str]
    broker: int | None = None


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """UpdateFeatures: feature name -> the level asked for."""

    features: dict[str, int]


EventBody = (
    BrokerStartup
    | BrokerFailure
    | ControlledShutdown
    | TopicCreation
    | PartitionCreation
    | TopicDeletion
    | PartitionReassignment
    | IsrChange
    | LeaderElection
    | AutoRebalanceCheck
    | StopReplicaResponse
    | TopicConfigChange
    | ControllerFailover
    | BrokerRegistration
    | BrokerUnfence
    | BrokerUnregistration
    | UncleanElectionCheck
    | ClusterConfigChange
    | FeatureUpdate
)


class Event(NamedTuple):
    header: Header
    body: EventBody


@dataclass(frozen=True, slots=True)
class Rejection:
    """A line that is not a valid event; `cluster` is None when it could not be read."""

    cluster: str | None
    raw: str
    reason: str
    source: str
    # set when the line carried a well-formed `observed`: a `divergences` row of its own
    observed: ObservedEvent | None = None
