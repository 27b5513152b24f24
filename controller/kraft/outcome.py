"""What the KRaft engine gives back: the records of an event, its answers, and read-only
views of the state (CONTRACT §5's tables are built from these).

The records, answers, changes and outcomes are named tuples, made with their positional
or keyword constructors: one of each is built per event or per partition an event changes
(a kraft roll's catch-up is one event per partition), and a frozen dataclass is built a
field at a time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

RECOVERED = "RECOVERED"
RECOVERING = "RECOVERING"


class KRaftRejection(ValueError):
    """An event the front door must write to `rejected_events` (CONTRACT §1): an unknown
    topic or broker where one is required, `topic_deletion` with deletion disabled, a bad
    config value. Raised by `QuorumController.apply` before anything changes; the message
    is the reason."""


class Record(NamedTuple):
    """One metadata record, as CONTRACT §5's `metadata_records` holds it.

    type: Kafka's record name ("PartitionChangeRecord", "RegisterBrokerRecord", ...).
    fields: the record's fields named as Kafka's metadata decoder prints them, in schema
        order, `topicId` replaced by `topic` (the name), unset fields absent (SPEC-KRAFT
        §3.4). JSON-compatible (lists, ints, strings, None). Treat it as read-only.
    """

    type: str
    fields: dict[str, Any]


class Result(NamedTuple):
    """One `event_results` row: the controller's answer for a partition (topic and
    partition set) or for the event as a whole (both None).

    error: Kafka's error code name (ELECTION_NOT_NEEDED, STALE_BROKER_EPOCH, ...) or None.
    message: Kafka's error message, or for a success a short description (for example the
        next broker state of a controlled shutdown).
    leader, leader_epoch, isr, partition_epoch: the partition's state after the event when
        the answer carries it (a successful AlterPartition, reassignment, election), else None.
    """

    topic: str | None = None
    partition: int | None = None
    error: str | None = None
    message: str | None = None
    leader: int | None = None
    leader_epoch: int | None = None
    isr: tuple[int, ...] | None = None
    partition_epoch: int | None = None


class PartitionChange(NamedTuple):
    """One `state_changes` partition row: a partition whose leader, ISR, ELR or replicas
    changed in the event (created or deleted included).

    from_state / to_state: "NonExistentPartition", "OnlinePartition" (a leader) or
        "OfflinePartition" (leader -1).
    leader, leader_epoch, isr: the state after the change (-1, the last epoch and [] for a
        deleted partition).
    unclean: true when the event elected a leader uncleanly (an unclean pick or the last
        known leader, SPEC-KRAFT §20).
    """

    topic: str
    partition: int
    from_state: str
    to_state: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    unclean: bool = False


class PartitionView(NamedTuple):
    """A partition registration (SPEC-KRAFT §2.2). (A named tuple: one is built per
    partition an event changes, twice, and a frozen dataclass is built a field at a time.)

    leader: -1 when none. isr, elr, last_known_elr, replicas, adding_replicas,
    removing_replicas: in Kafka's order (ELR in Java HashSet order, §22.2).
    leader_recovery_state: "RECOVERED" or "RECOVERING". partition_epoch: the KRaft
    partition epoch.
    """

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    leader_recovery_state: str


@dataclass(frozen=True, slots=True)
class BrokerView:
    """A broker registration: status "fenced" if fenced, else "shutting_down" if its
    registration is in controlled shutdown, else "live" (SPEC-KRAFT §2.1). An unregistered
    broker has no view. incarnation: the registration's incarnation id, when an event
    gave one."""

    broker: int
    rack: str | None
    status: str
    broker_epoch: int
    incarnation: str | None = None


@dataclass(frozen=True, slots=True)
class TopicView:
    """A topic and its dynamic topic-level configs (name -> value)."""

    topic: str
    configs: dict[str, str]


class Outcome(NamedTuple):
    """Everything one event did.

    records: the records written, in Kafka's append order (each already replayed).
    results: `event_results` rows.
    changes: `state_changes` partition rows.
    changed_partitions: (topic, partition) of every partition whose registration changed
        (created included), ascending; their current rows are `partition(topic, p)`.
    removed_partitions: (topic, partition) of every partition deleted, ascending.
    changed_brokers / removed_brokers: broker ids whose registration changed / vanished.
    changed_topics / removed_topics: topic names created or whose configs changed / deleted.
    elr_elections, last_known_leader_elections, unclean_elections: this event's counts of
        leaders taken from the ELR, from the last known leader, and uncleanly (the last
        known leader path included), SPEC-KRAFT §20.
    """

    records: tuple[Record, ...] = ()
    results: tuple[Result, ...] = ()
    changes: tuple[PartitionChange, ...] = ()
    changed_partitions: tuple[tuple[str, int], ...] = ()
    removed_partitions: tuple[tuple[str, int], ...] = ()
    changed_brokers: tuple[int, ...] = ()
    removed_brokers: tuple[int, ...] = ()
    changed_topics: tuple[str, ...] = ()
    removed_topics: tuple[str, ...] = ()
    elr_elections: int = 0
    last_known_leader_elections: int = 0
    unclean_elections: int = 0
