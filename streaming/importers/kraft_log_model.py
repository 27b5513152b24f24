"""A KRaft cluster's metadata records, in log order → the KRaft controller's inputs (pure).

`KraftLogModel.feed(record)` takes the records of `streaming/importers/kraft_log_decoder.py`
(Kafka's own JSON form of each record) one at a time and returns the events of the batch
before it once a new batch starts; `end_batch()` returns the events of the batch being
read at once (a shadow that has reached the quorum's high watermark calls it, since no
next record may come for a while); `finish()` ends the input. Every event's `ts` is the
append time of the batch that holds its records (the batch's CreateTime, UTC), its
`event_id` `<cluster>:kraft:<offset of the batch's first record>:<n>` and `seq` counts
from 1 in output order. This module imports nothing of the JVM or of Kafka.

The events are CONTRACT §5's (SPEC-KRAFT §23.2): what the KRaft controller was asked, not
what it decided, so that a replay under `kcsim.engine=kraft` writes the same records and
leaves the same states. Kafka's raft layer packs several controller operations into one
batch (SPEC-KRAFT §23.3), so causes are read from the records' content, in log order:

* a fence (`BrokerRegistrationChangeRecord` fenced=1, `FenceBrokerRecord`), a
  `RegisterBrokerRecord` or an `UnregisterBrokerRecord` of broker b owns the partition
  changes just before it that take b out of a leadership, ISR, ELR or LKE, and the
  repeats of those records (a stale ELR index entry walked twice, SPEC-KRAFT §2.3):
  `broker_failure`, `broker_registration` {broker_epoch, incarnation, rack,
  previous_broker_epoch (the stored epoch unless those changes took b out of an ELR: the
  unclean path)}, `broker_unregistration`;
* an unfence (fenced=-1, `UnfenceBrokerRecord`) owns the elections just after it
  (`broker_unfence`), a controlled-shutdown flag (inControlledShutdown=1) the removals of
  b just after it (`controlled_shutdown`);
* `TopicRecord` + ConfigRecords + PartitionRecords: `topic_creation` {assignment,
  configs}; PartitionRecords of a known topic: `partition_creation`; `RemoveTopicRecord`:
  `topic_deletion`;
* ConfigRecords of a topic: `topic_config_change`; of a broker (resource "" or a node
  id): `cluster_config_change`; the `ClearElrRecord`s after them are theirs;
* `FeatureLevelRecord` eligible.leader.replicas.version: `feature_update` (the
  min.insync.replicas ConfigRecords before it are its own);
* LeaderChange of a new quorum epoch: `controller_failover` {controller};
* a partition change no cause owns: a reassignment start or cancel
  (`partition_reassignment`), a completion or an ISR/LRS change (`isr_change` {isr,
  leader, leader_recovery_state}: the leader's AlterPartition), or an election
  (`leader_election` preferred, or unclean when the winner was in neither the ISR nor the
  ELR nor the LKE; one event per kind and run of such changes).

Each event's `observed` holds the partitions its records left (leader, epochs, ISR, ELR,
LKE, LRS, replicas) and, for a broker event, the broker's status (`live`, `fenced`,
`shutting_down`). Records written at format time, before the first broker registers
(metadata.version, the ELR level, the cluster min.insync.replicas), are the cluster's
settings, not inputs: they become `notes` for the replay's `--set`.

A log that starts at a snapshot begins with the snapshot's state as inputs: a
`broker_registration` per registration (and `broker_unfence` for the unfenced ones), a
`cluster_config_change` per broker resource, a `topic_creation` per topic with its
`assignment` and stored `state`, then one `controller_failover` observing every partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from controller.topic_configs import topic_config_error
from streaming.importers.kraft_log_decoder import Record

Event = dict[str, Any]
TP = tuple[str, int]

NO_LEADER = -1
NO_LEADER_CHANGE = -2
_RECOVERY = {0: "RECOVERED", 1: "RECOVERING"}
# ConfigResource.Type ids in a ConfigRecord's resourceType
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
ELR_FEATURE = "eligible.leader.replicas.version"
MIN_ISR = "min.insync.replicas"
# the form of `KraftLogModel.to_json`: a saved model of another form is refused
MODEL_VERSION = 1


class PartitionState(NamedTuple):
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    elr: tuple[int, ...]
    lke: tuple[int, ...]
    leader_recovery_state: str
    controller_epoch: int

    def target(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing)

    def holds(self, broker: int) -> bool:
        """Whether `broker` leads, is in the ISR, ELR or LKE."""
        return (
            self.leader == broker or broker in self.isr or broker in self.elr or broker in self.lke
        )


class Change(NamedTuple):
    tp: TP
    old: PartitionState
    new: PartitionState
    data: dict[str, Any]
    offset: int  # the record's offset in the log


@dataclass(slots=True)
class _Cause:
    """An event of the batch being read, and the partition states its records left."""

    event: Event
    writes: dict[TP, PartitionState] = field(default_factory=dict)
    brokers: tuple[int, ...] = ()  # brokers whose status the event observes
    statuses: list[dict[str, Any]] = field(default_factory=list)  # theirs when it opened
    claim: str | None = None  # which following changes it owns: "unfence", "shutdown", ...
    broker: int | None = None
    topic: str | None = None
    observes: bool = True


@dataclass(slots=True)
class Broker:
    epoch: int
    fenced: bool
    rack: str | None
    incarnation: str | None = None
    shutting_down: bool = False

    def status(self) -> str:
        if self.fenced:
            return "fenced"
        return "shutting_down" if self.shutting_down else "live"


@dataclass(slots=True)
class Counts:
    records: int = 0
    batches: int = 0
    unexplained: int = 0  # partition changes no event could be named for
    configs_dropped: int = 0  # topic config records kcsim does not take (docs: why)


# the unexplained changes described in `KraftLogModel.unexplained_notes` until a reader
# takes them (the rest are counted only)
MAX_UNEXPLAINED_NOTES = 50


@dataclass(slots=True)
class KraftLogModel:
    cluster: str = "default"
    epoch: int = 0  # the quorum leader epoch of the last LeaderChange
    brokers: dict[int, Broker] = field(default_factory=dict)  # registrations
    topics: dict[str, str] = field(default_factory=dict)  # topic id -> name
    partitions: dict[TP, PartitionState] = field(default_factory=dict)
    by_topic: dict[str, dict[int, None]] = field(default_factory=dict)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)  # topic -> carried
    features: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a replay's settings must know
    # what each partition change no event explains was, for a reader to say and clear
    # (not saved: `to_json` keeps only their count)
    unexplained_notes: list[str] = field(default_factory=list)
    seq: int = 0
    counts: Counts = field(default_factory=Counts)
    _registered_once: bool = False  # format-time records end at the first registration
    _batch: tuple[str, int] | None = None  # (file, position) of the batch being read
    _batch_offset: int = 0
    _batch_ts: int = 0
    _snapshot: bool = False
    _records: list[Record] = field(default_factory=list)  # the batch being read
    _causes: list[_Cause] = field(default_factory=list)
    _pending: list[Change] = field(default_factory=list)  # changes no cause owns yet
    _after: _Cause | None = None  # the cause that owns the changes after it
    _ts_text: tuple[int, str] = (-1, "")
    _snapshot_configs: list[Record] = field(default_factory=list)
    # set by `resync`: the topics and brokers known before the snapshot that replaces them
    _resync: tuple[frozenset[str], frozenset[int]] | None = None

    # ------------------------------------------------------------ input

    def feed(self, record: Record) -> list[Event]:
        """One record; returns the events of the batch before it once a new batch starts."""
        out: list[Event] = []
        key = (str(record.path), record.position)
        if key != self._batch or record.snapshot != self._snapshot:
            out += self.end_batch()
            if self._snapshot and not record.snapshot:
                out += self._end_snapshot()
            self._snapshot = record.snapshot
            self._batch, self._batch_offset, self._batch_ts = key, record.offset, record.ts
            self.counts.batches += 1
        self.counts.records += 1
        if record.snapshot:
            self._snapshot_record(record)
        else:
            self._records.append(record)
        return out

    def end_batch(self) -> list[Event]:
        """The events of the batch being read (none if it was ended already): for a reader
        that knows the batch is whole (the high watermark passed it) before the next one."""
        records, self._records = self._records, []
        for record in records:
            handler = _HANDLERS.get(record.type)
            if handler is not None:
                handler(self, record)
        self._release_pending()
        return self._flush()

    def finish(self) -> list[Event]:
        out = self.end_batch()
        return out + (self._end_snapshot() if self._snapshot else [])

    def resync(self) -> list[Event]:
        """The reader lost its place (the records after it were deleted): the next
        snapshot fed replaces the whole state, and its end writes a resync instead of the
        start's inputs (module docstring). Returns the events of the batch being read."""
        out = self.finish()
        self._resync = (frozenset(self.by_topic), frozenset(self.brokers))
        self.brokers, self.topics, self.partitions = {}, {}, {}
        self.by_topic, self.configs = {}, {}
        return out

    # ------------------------------------------------------------ saved form

    def to_json(self) -> dict[str, Any]:
        """The model as JSON-ready values (`from_json` gives it back equal, dict orders
        kept; tuples stand for JSON arrays),
        for a shadow's saved state. Only between batches: after `finish()`, when no batch
        is being read and no event is held (a ValueError otherwise)."""
        if self._records or self._causes or self._pending or self._after or self._snapshot:
            raise ValueError("the model is inside a batch: save it after finish()")
        if self._snapshot_configs or self._resync is not None:
            raise ValueError("the model is inside a snapshot: save it after finish()")
        return {
            "version": MODEL_VERSION,
            "cluster": self.cluster,
            "epoch": self.epoch,
            "brokers": [
                [b, r.epoch, r.fenced, r.rack, r.incarnation, r.shutting_down]
                for b, r in self.brokers.items()
            ],
            "topics": self.topics,
            # one row per partition, in the dict's order (an order events follow): topic,
            # partition, then PartitionState's fields (its tuples are JSON arrays)
            "partitions": [(*tp, *state) for tp, state in self.partitions.items()],
            "by_topic": {topic: list(numbers) for topic, numbers in self.by_topic.items()},
            "configs": self.configs,
            "features": self.features,
            "notes": self.notes,
            "seq": self.seq,
            "counts": [
                self.counts.records,
                self.counts.batches,
                self.counts.unexplained,
                self.counts.configs_dropped,
            ],
            "registered_once": self._registered_once,
            "batch": list(self._batch) if self._batch is not None else None,
            "batch_offset": self._batch_offset,
            "batch_ts": self._batch_ts,
            "ts_text": list(self._ts_text),
        }

    @classmethod
    def from_json(cls, saved: dict[str, Any]) -> KraftLogModel:
        """The model `to_json` saved; a ValueError for another version's form."""
        if saved.get("version") != MODEL_VERSION:
            raise ValueError(
                f"a saved model of version {saved.get('version')!r}, not {MODEL_VERSION}"
            )
        batch = saved["batch"]
        model = cls(
            cluster=str(saved["cluster"]),
            epoch=int(saved["epoch"]),
            brokers={
                int(b): Broker(int(epoch), bool(fenced), rack, incarnation, bool(shutting))
                for b, epoch, fenced, rack, incarnation, shutting in saved["brokers"]
            },
            topics=dict(saved["topics"]),
            partitions={
                (str(row[0]), int(row[1])): _partition_row(row[2:]) for row in saved["partitions"]
            },
            by_topic={
                topic: dict.fromkeys(int(p) for p in numbers)
                for topic, numbers in saved["by_topic"].items()
            },
            configs={topic: dict(values) for topic, values in saved["configs"].items()},
            features={str(k): int(v) for k, v in saved["features"].items()},
            notes=list(saved["notes"]),
            seq=int(saved["seq"]),
            counts=Counts(*(int(n) for n in saved["counts"])),
        )
        model._registered_once = bool(saved["registered_once"])
        model._batch = (str(batch[0]), int(batch[1])) if batch is not None else None
        model._batch_offset = int(saved["batch_offset"])
        model._batch_ts = int(saved["batch_ts"])
        model._ts_text = (int(saved["ts_text"][0]), str(saved["ts_text"][1]))
        return model

    # ------------------------------------------------------------ brokers

    def _leader_change(self, record: Record) -> None:
        if record.epoch <= self.epoch:
            return
        self.epoch = record.epoch
        self._release_pending()
        event = {"type": "controller_failover", "controller": int(record.data["leaderId"])}
        self._open(_Cause(event, observes=False))

    def _register(self, record: Record) -> None:
        data = record.data
        broker = int(data["brokerId"])
        owned = self._take_pending(broker)
        old = self.brokers.get(broker)
        # the unclean path of a re-registration takes the broker out of every ELR
        # (the clean path leaves it in the ELR, or puts it there, where the ISR shrinks
        # below min.insync.replicas; where it does not, both paths write the same)
        unclean = any(
            broker in c.old.isr + c.old.elr and broker not in c.new.isr + c.new.elr for c in owned
        )
        rack = data.get("rack") or None  # "" and null: no rack
        incarnation = data.get("incarnationId")
        epoch = int(data["brokerEpoch"])
        fenced = bool(data.get("fenced", True))
        shutting = bool(data.get("inControlledShutdown", False))
        self.brokers[broker] = Broker(epoch, fenced, rack, incarnation, shutting)
        self._registered_once = True
        event: Event = {"type": "broker_registration", "broker": broker}
        if rack is not None:
            event["rack"] = rack
        event["broker_epoch"] = epoch
        if incarnation is not None:
            event["incarnation"] = str(incarnation)
        if old is not None and not unclean:
            event["previous_broker_epoch"] = old.epoch
        cause = self._open(_Cause(event, brokers=(broker,)))
        self._own(cause, owned)
        if not fenced:  # an older metadata.version registered brokers unfenced
            self._open(_Cause({"type": "broker_unfence", "broker": broker}, brokers=(broker,)))

    def _registration_change(self, record: Record) -> None:
        data = record.data
        broker = int(data["brokerId"])
        fenced = int(data.get("fenced", 0))
        shutdown = int(data.get("inControlledShutdown", 0))
        if fenced == 1:
            self._fence(broker)
        elif fenced == -1:
            self._unfence(broker)
        if shutdown == 1:
            self._controlled_shutdown(broker)

    def _fence_record(self, record: Record) -> None:
        self._fence(int(record.data["id"]))

    def _unfence_record(self, record: Record) -> None:
        self._unfence(int(record.data["id"]))

    def _fence(self, broker: int) -> None:
        owned = self._take_pending(broker)
        registration = self.brokers.get(broker)
        if registration is not None:
            registration.fenced = True
            registration.shutting_down = False
        cause = self._open(_Cause({"type": "broker_failure", "broker": broker}, brokers=(broker,)))
        self._own(cause, owned)

    def _unfence(self, broker: int) -> None:
        self._release_pending()
        registration = self.brokers.get(broker)
        if registration is not None:
            registration.fenced = False
        event = {"type": "broker_unfence", "broker": broker}
        self._open(_Cause(event, brokers=(broker,), claim="unfence", broker=broker))

    def _controlled_shutdown(self, broker: int) -> None:
        self._release_pending()
        registration = self.brokers.get(broker)
        if registration is not None:
            registration.shutting_down = True
        event = {"type": "controlled_shutdown", "broker": broker}
        self._open(_Cause(event, brokers=(broker,), claim="shutdown", broker=broker))

    def _unregister(self, record: Record) -> None:
        broker = int(record.data["brokerId"])
        owned = self._take_pending(broker)
        self.brokers.pop(broker, None)
        cause = self._open(_Cause({"type": "broker_unregistration", "broker": broker}))
        self._own(cause, owned)

    # ------------------------------------------------------------ topics

    def _topic(self, record: Record) -> None:
        self._release_pending()
        name = str(record.data["name"])
        self.topics[str(record.data["topicId"])] = name
        self.by_topic.setdefault(name, {})
        event = {"type": "topic_creation", "topic": name, "assignment": {}}
        self._open(_Cause(event, claim="config", topic=name))

    def _partition(self, record: Record) -> None:
        data = record.data
        name = self.topics.get(str(data["topicId"]))
        if name is None:
            self._unexplained(record.offset, f"PartitionRecord of an unknown topic: {data}")
            return
        tp = (name, int(data["partitionId"]))
        state = _partition_state(data, record.epoch)
        self.partitions[tp] = state
        self.by_topic.setdefault(name, {})[tp[1]] = None
        cause = self._after
        if cause is None or cause.topic != name or cause.event["type"] not in _CREATIONS:
            self._release_pending()
            event = {"type": "partition_creation", "topic": name, "assignment": {}}
            cause = self._open(_Cause(event, claim="config", topic=name))
            self._whole_topic(cause, name)
        cause.event["assignment"][str(tp[1])] = list(state.replicas)
        cause.writes[tp] = state

    def _remove_topic(self, record: Record) -> None:
        self._release_pending()
        name = self.topics.pop(str(record.data["topicId"]), None)
        if name is None:
            return
        for p in self.by_topic.pop(name, {}):
            del self.partitions[name, p]
        self.configs.pop(name, None)
        # observed: the topic has no partition left
        self._open(_Cause({"type": "topic_deletion", "topic": name}, topic=name))

    # ------------------------------------------------------------ configs and features

    def _config(self, record: Record) -> None:
        """A ConfigRecord (value null: the config deleted)."""
        data = record.data
        resource, key = str(data["resourceName"]), str(data["name"])
        value = data.get("value")
        kind = int(data["resourceType"])
        if kind == BROKER_RESOURCE:
            self._broker_config(resource, key, value, record.offset)
        elif kind == TOPIC_RESOURCE and resource in self.by_topic:
            self._topic_config(resource, key, value)

    def _broker_config(self, resource: str, key: str, value: str | None, offset: int) -> None:
        scope = "the cluster default" if resource == "" else f"node {resource}"
        if not self._registered_once:
            self.notes.append(
                f"offset {offset}: {key} of {scope} is {value} at format time: replay "
                f"with --set {key}={value} if the engine's setting differs"
            )
            return
        if value is None:
            self.notes.append(
                f"offset {offset}: {key} of {scope} deleted: kcsim cannot remove a "
                "config, it keeps the last value"
            )
            self.counts.configs_dropped += 1
            return
        cause = self._after
        if (
            cause is None
            or cause.event["type"] != "cluster_config_change"
            or cause.event.get("broker", "") != ("" if resource == "" else int(resource))
            or key in cause.event["configs"]  # a key twice: the next request's
        ):
            self._release_pending()
            event: Event = {"type": "cluster_config_change", "configs": {}}
            if resource != "":
                event["broker"] = int(resource)
            cause = self._open(_Cause(event, claim="config", observes=False))
        cause.event["configs"][key] = value

    def _topic_config(self, topic: str, key: str, value: str | None) -> None:
        carried = self._carried(topic, key, value)
        if carried is None:
            return
        cause = self._after
        if (
            cause is None
            or cause.topic != topic
            or cause.event["type"] not in ("topic_creation", "topic_config_change")
            or cause.event.get("assignment")  # a creation's configs precede its partitions
            or key in cause.event.get("configs", {})  # a key twice: the next request's
        ):
            self._release_pending()
            event = {"type": "topic_config_change", "topic": topic, "configs": {}}
            cause = self._open(_Cause(event, claim="config", topic=topic, observes=False))
            self._whole_topic(cause, topic)
        cause.event.setdefault("configs", {})[key] = carried

    def _whole_topic(self, cause: _Cause, topic: str) -> None:
        """A topic event's `observed` speaks of the whole topic (its scope): the states of
        its partitions when the event starts, which its own records then update."""
        for p in self.by_topic.get(topic, {}):
            cause.writes[topic, p] = self.partitions[topic, p]

    def _carried(self, topic: str, key: str, value: str | None) -> str | None:
        """What kcsim gets for `key` of `topic` (None: nothing), kept in `configs`.

        kcsim validates topic configs as Kafka 3.7.1 does and rejects the whole event for
        a name it does not know or a value it refuses: those are dropped, counted. kcsim
        cannot remove a config: a deleted unclean.leader.election.enable becomes Kafka's
        default false (the fallback when no cluster value is set); another deleted config
        is counted, not carried."""
        stored = self.configs.setdefault(topic, {})
        if value is None:
            stored.pop(key, None)
            if key != "unclean.leader.election.enable":
                self.counts.configs_dropped += 1
                return None
            value = "false"
        elif topic_config_error({key: value}) is not None:
            self.counts.configs_dropped += 1
            return None
        stored[key] = value
        return value

    def _clear_elr(self, record: Record) -> None:
        name = str(record.data.get("topicName") or "")
        tps = [(name, p) for p in self.by_topic.get(name, {})] if name else list(self.partitions)
        cause = self._after if self._after is not None and self._after.claim == "config" else None
        for tp in tps:
            old = self.partitions[tp]
            if not (old.elr or old.lke):
                continue
            new = old._replace(
                elr=(), lke=(), partition_epoch=old.partition_epoch + 1,
                controller_epoch=record.epoch,
            )  # fmt: skip
            self.partitions[tp] = new
            if cause is None:
                self._unexplained(record.offset, f"ClearElrRecord of {tp[0]}-{tp[1]}")
            else:
                cause.writes[tp] = new
                cause.observes = True

    def _feature(self, record: Record) -> None:
        name = str(record.data["name"])
        level = int(record.data.get("featureLevel", 0))
        self.features[name] = level
        if name != ELR_FEATURE:
            return
        if not self._registered_once:
            self.notes.append(
                f"offset {record.offset}: {ELR_FEATURE} is {level} at format time: replay "
                f"with --set {ELR_FEATURE}={level} if the engine's setting differs"
            )
            return
        # the min.insync.replicas records just before it are the update's own
        while (
            self._causes
            and self._causes[-1].event["type"] == "cluster_config_change"
            and set(self._causes[-1].event["configs"]) == {MIN_ISR}
            and not self._causes[-1].writes
        ):
            self._causes.pop()
        self._release_pending()
        event = {"type": "feature_update", "features": {ELR_FEATURE: level}}
        self._open(_Cause(event, claim="config", observes=False))

    # ------------------------------------------------------------ partition changes

    def _partition_change(self, record: Record) -> None:
        data = record.data
        name = self.topics.get(str(data["topicId"]))
        tp = (name, int(data["partitionId"])) if name is not None else None
        old = self.partitions.get(tp) if tp is not None else None
        if tp is None or old is None:
            self._unexplained(
                record.offset, f"PartitionChangeRecord of an unknown partition: {data}"
            )
            return
        new = _merge(old, data, record.epoch)
        self.partitions[tp] = new
        change = Change(tp, old, new, data, record.offset)
        after = self._after
        if after is not None and _claims(after, change):
            after.writes[tp] = new
        else:
            # an operation's records are contiguous: another's ends the claim
            self._after = None
            self._pending.append(change)

    def _take_pending(self, broker: int) -> list[Change]:
        """The pending changes that took `broker` out of something (a fence's, a
        registration's or an unregistration's own), with the repeats of those records; the
        others are released first.

        A repeat is a record equal to an owned one of the same partition: the ELR walk of
        an unclean re-registration or of an unregistration visits a partition once per
        entry its controller's broker -> ELR index holds, and that index keeps stale
        entries (SPEC-KRAFT §2.3), so a partition listed twice gets the same record twice,
        both built from the state before the operation (the second changes nothing but
        the partition epoch)."""
        owned: list[Change] = []
        records: list[tuple[TP, dict[str, Any]]] = []
        for c in self._pending:
            if c.old.holds(broker) and not _keeps(c, broker) and not _starts_reassignment(c):
                owned.append(c)
                records.append((c.tp, c.data))
            elif (c.tp, c.data) in records:
                owned.append(c)
        self._pending = [c for c in self._pending if c not in owned]
        self._release_pending()
        return owned

    def _unexplained(self, offset: int, what: str) -> None:
        self.counts.unexplained += 1
        if len(self.unexplained_notes) < MAX_UNEXPLAINED_NOTES:
            self.unexplained_notes.append(f"offset {offset}: {what}")

    def _own(self, cause: _Cause, owned: list[Change]) -> None:
        for change in owned:
            cause.writes[change.tp] = change.new

    def _release_pending(self) -> None:
        """Each pending change as the causeless operation it is, in log order."""
        pending, self._pending = self._pending, []
        election: _Cause | None = None
        for change in pending:
            kind = _causeless_kind(change)
            if kind is None:
                self._unexplained(change.offset, _described(change))
                continue
            if kind in ("preferred", "unclean"):
                # ElectLeaders walks its partitions topic by topic: a topic seen before
                # another one in this run (the unclean task's order) starts a new event
                if (
                    election is None
                    or election.event["election"] != kind
                    or _revisits(election.event["partitions"], change.tp[0])
                ):
                    event = {"type": "leader_election", "election": kind, "partitions": []}
                    election = self._open(_Cause(event), after=False)
                election.event["partitions"].append(
                    {"topic": change.tp[0], "partition": change.tp[1]}
                )
                election.writes[change.tp] = change.new
                continue
            election = None
            self._open(_Cause(_causeless_event(change, kind)), after=False).writes[change.tp] = (
                change.new
            )

    # ------------------------------------------------------------ snapshots

    def _snapshot_record(self, record: Record) -> None:
        kind = record.type
        data = record.data
        if kind == "REGISTER_BROKER_RECORD":
            broker = int(data["brokerId"])
            self.brokers[broker] = Broker(
                int(data["brokerEpoch"]),
                bool(data.get("fenced", True)),
                data.get("rack") or None,
                data.get("incarnationId"),
                bool(data.get("inControlledShutdown", False)),
            )
            self._registered_once = True
        elif kind == "TOPIC_RECORD":
            self.topics[str(data["topicId"])] = str(data["name"])
            self.by_topic.setdefault(str(data["name"]), {})
        elif kind == "PARTITION_RECORD":
            name = self.topics.get(str(data["topicId"]))
            if name is not None:
                tp = (name, int(data["partitionId"]))
                self.partitions[tp] = _partition_state(data, record.epoch)
                self.by_topic.setdefault(name, {})[tp[1]] = None
        elif kind == "CONFIG_RECORD":
            self._snapshot_configs.append(record)
        elif kind == "FEATURE_LEVEL_RECORD":
            self.features[str(data["name"])] = int(data.get("featureLevel", 0))
        self.epoch = max(self.epoch, record.epoch)

    def _end_snapshot(self) -> list[Event]:
        """The snapshot's cluster as inputs (module docstring)."""
        self._snapshot = False
        configs, self._snapshot_configs = self._snapshot_configs, []
        if self._resync is not None:
            return self._end_resync(configs)
        events: list[Event] = []
        for broker in sorted(self.brokers):
            b = self.brokers[broker]
            events += self._loaded_broker(broker)
            if b.shutting_down and not b.fenced:
                self.notes.append(
                    f"broker {broker} is in a controlled shutdown in the snapshot: "
                    "it is started live"
                )
        level = self.features.get(ELR_FEATURE)
        if level is not None:
            self.notes.append(
                f"the snapshot has {ELR_FEATURE} {level}: replay with --set "
                f"{ELR_FEATURE}={level} if the engine's setting differs"
            )
        broker_configs: dict[str, dict[str, str]] = {}
        for record in configs:
            data = record.data
            resource, key, value = str(data["resourceName"]), str(data["name"]), data.get("value")
            if value is None:
                continue
            if int(data["resourceType"]) == BROKER_RESOURCE:
                broker_configs.setdefault(resource, {})[key] = str(value)
            elif int(data["resourceType"]) == TOPIC_RESOURCE and resource in self.by_topic:
                self._carried(resource, key, str(value))
        for resource in sorted(broker_configs):
            event: Event = {"type": "cluster_config_change", "configs": broker_configs[resource]}
            if resource != "":
                event["broker"] = int(resource)
            events.append(event)
        for topic in sorted(set(self.topics.values())):
            events.append(self._loaded_topic(topic))
            for p in sorted(self.by_topic.get(topic, {})):
                if self.partitions[topic, p].adding or self.partitions[topic, p].removing:
                    self.notes.append(
                        f"{topic}-{p} is reassigning in the snapshot: loaded with its "
                        "full replica set, without the reassignment"
                    )
        events.append(self._whole_state())
        where = f"snapshot-{self._batch_offset}"
        return [self._stamp(event, where, i) for i, event in enumerate(events)]

    def _loaded_broker(self, broker: int) -> list[Event]:
        """A loaded broker as the engine takes it: its registration with the stored
        epoch, rack and incarnation, then its unfence unless it is fenced."""
        b = self.brokers[broker]
        event: Event = {"type": "broker_registration", "broker": broker}
        if b.rack is not None:
            event["rack"] = b.rack
        event["broker_epoch"] = b.epoch
        if b.incarnation is not None:
            event["incarnation"] = str(b.incarnation)
        return [event] if b.fenced else [event, {"type": "broker_unfence", "broker": broker}]

    def _loaded_topic(self, topic: str) -> Event:
        """A loaded topic's creation: its assignment, configs and each partition's stored
        state."""
        numbers = sorted(self.by_topic.get(topic, {}))
        assignment = {str(p): list(self.partitions[topic, p].replicas) for p in numbers}
        state = {str(p): _stored(self.partitions[topic, p]) for p in numbers}
        event: Event = {"type": "topic_creation", "topic": topic, "assignment": assignment}
        if self.configs.get(topic):
            event["configs"] = dict(self.configs[topic])
        return event | {"state": state}

    def _whole_state(self) -> Event:
        """A `controller_failover` observing every partition and broker: a replay
        compares its whole state with the cluster's."""
        observed = [_observed(tp, self.partitions[tp]) for tp in sorted(self.partitions)]
        statuses = [{"broker": b, "status": self.brokers[b].status()} for b in sorted(self.brokers)]
        return {"type": "controller_failover"} | {
            "observed": {"partitions": observed, "brokers": statuses}
        }

    def _end_resync(self, configs: list[Record]) -> list[Event]:
        """A snapshot loaded after the records since the last one applied were lost: what
        the replay cannot follow without (brokers registered or gone, topics created or
        deleted meanwhile) as inputs, then the whole state observed, so that a replay
        finds whatever else the lost records changed as divergences (SPEC-KRAFT §23.5)."""
        assert self._resync is not None
        topics, brokers = self._resync
        self._resync = None
        for record in configs:
            data = record.data
            resource, value = str(data["resourceName"]), data.get("value")
            of_topic = int(data["resourceType"]) == TOPIC_RESOURCE and resource in self.by_topic
            if value is not None and of_topic:
                self._carried(resource, str(data["name"]), str(value))
        events: list[Event] = []
        for broker in sorted(brokers - set(self.brokers)):
            events.append({"type": "broker_unregistration", "broker": broker})
        for broker in sorted(set(self.brokers) - brokers):
            events += self._loaded_broker(broker)
        for topic in sorted(topics - set(self.by_topic)):
            events.append({"type": "topic_deletion", "topic": topic})
        for topic in sorted(set(self.by_topic) - topics):
            events.append(self._loaded_topic(topic))
        events.append(self._whole_state())
        self.notes.append(
            f"resync at snapshot {self._batch_offset}: the records before it since the "
            "last one read were deleted unread; config changes among them are not known"
        )
        where = f"resync-{self._batch_offset}"
        return [self._stamp(event, where, i) for i, event in enumerate(events)]

    # ------------------------------------------------------------ output

    def _open(self, cause: _Cause, *, after: bool = True) -> _Cause:
        """A new event of this batch; `after`: it owns the changes that follow (its claim)."""
        cause.statuses = [{"broker": b, "status": self._status(b)} for b in cause.brokers]
        self._causes.append(cause)
        if after:
            self._after = cause if cause.claim is not None else None
        else:
            self._after = None
        return cause

    def _flush(self) -> list[Event]:
        causes, self._causes = self._causes, []
        self._after = None
        out = []
        for n, cause in enumerate(causes):
            event = cause.event
            observed: dict[str, Any] = {}
            kind = event["type"]
            if kind in ("topic_deletion",):
                observed["partitions"] = []
            if cause.writes:
                observed["partitions"] = [_observed(tp, s) for tp, s in cause.writes.items()]
            elif kind in _CREATIONS:
                observed["partitions"] = []
            if cause.statuses:
                observed["brokers"] = cause.statuses
            if observed and (cause.observes or cause.writes or "brokers" in observed):
                event["observed"] = observed
            out.append(self._stamp(event, self._batch_offset, n))
        return out

    def _status(self, broker: int) -> str:
        registration = self.brokers.get(broker)
        return "fenced" if registration is None else registration.status()

    def _iso_ts(self) -> str:
        if self._ts_text[0] != self._batch_ts:
            self._ts_text = (self._batch_ts, _iso(self._batch_ts))
        return self._ts_text[1]

    def _stamp(self, event: Event, where: int | str, n: int) -> Event:
        """`where`: the batch's offset, or "snapshot-<end offset>" for a snapshot's events."""
        self.seq += 1
        head = {
            "type": event["type"],
            "cluster": self.cluster,
            "event_id": f"{self.cluster}:kraft:{where}:{n}",
            "seq": self.seq,
            "ts": self._iso_ts(),
        }
        return head | event


_CREATIONS = ("topic_creation", "partition_creation")


def _keeps(change: Change, broker: int) -> bool:
    """Whether `broker` holds after the change everything it held before."""
    old, new, b = change.old, change.new, broker
    return not (
        (old.leader == b and new.leader != b)
        or (b in old.isr and b not in new.isr)
        # leaving the ELR or LKE for the ISR is joining, not a removal
        or (b in old.elr and b not in new.elr and b not in new.isr)
        or (b in old.lke and b not in new.lke and b not in new.isr)
    )


def _starts_reassignment(change: Change) -> bool:
    """A new replica set on a partition not reassigning: no broker's fence writes that."""
    old, new = change.old, change.new
    return not (old.adding or old.removing) and new.replicas != old.replicas


def _revisits(partitions: list[dict[str, Any]], topic: str) -> bool:
    seen = [p["topic"] for p in partitions]
    return topic in seen and seen[-1] != topic


def _claims(cause: _Cause, change: Change) -> bool:
    """Whether a change after `cause`'s record is its own."""
    old, new = change.old, change.new
    if cause.claim == "unfence":
        # the unfence elects over every leaderless partition; b is the one broker that
        # became eligible, so a winner is b, cleanly (ISR, ELR) or as the last known
        # leader (ISR and ELR empty); an unclean winner is another run's (the unclean
        # task or ElectLeaders), which replays the same either way
        b = cause.broker
        if old.leader != NO_LEADER:
            return False
        return new.leader == b and (
            b in old.isr or b in old.elr or (not old.isr and not old.elr and b in old.lke)
        )
    if cause.claim == "shutdown":
        broker = cause.broker
        return broker is not None and old.holds(broker) and not _keeps(change, broker)
    return False


def _causeless_kind(change: Change) -> str | None:
    old, new = change.old, change.new
    if (old.replicas, old.adding, old.removing) != (new.replicas, new.adding, new.removing):
        reassigning = old.adding or old.removing
        if reassigning and not (new.adding or new.removing):
            if new.replicas == old.target():
                return "completion"
            if new.replicas == tuple(b for b in old.replicas if b not in old.adding):
                return "cancel"
        # a start, or a new target that the ISR already covers (done at once)
        return "reassignment"
    if new.leader != old.leader:
        if new.leader == NO_LEADER:
            return None
        # a last known leader is elected uncleanly (RECOVERING), as any outside ISR and ELR
        clean = new.leader in old.isr or new.leader in old.elr
        return "preferred" if clean else "unclean"
    if old.leader == NO_LEADER:
        # no leader to send an AlterPartition: an election that found no leader and
        # cleared the ELR or LKE (ELR turned off, or no eligible member left)
        changed = (new.isr, new.elr, new.lke) != (old.isr, old.elr, old.lke)
        return "preferred" if changed else None
    if (new.isr, new.elr, new.lke, new.leader_recovery_state) != (
        old.isr,
        old.elr,
        old.lke,
        old.leader_recovery_state,
    ):
        # an AlterPartition, whose build may change the ELR and LKE alone
        return "isr"
    return None


def _described(change: Change) -> str:
    """A partition change no cause owns: its record and the state it left, for a reader to
    say (and a soak's log to keep)."""
    (topic, partition), old, new = change.tp, change.old, change.new
    fields = {k: v for k, v in change.data.items() if k not in ("topicId", "partitionId")}
    return (
        f"PartitionChangeRecord of {topic}-{partition} {fields}: leader {old.leader} -> "
        f"{new.leader}, ISR {list(old.isr)} -> {list(new.isr)}, ELR {list(old.elr)} -> "
        f"{list(new.elr)}, LKE {list(old.lke)} -> {list(new.lke)}, partition epoch "
        f"{old.partition_epoch} -> {new.partition_epoch}"
    )


def _causeless_event(change: Change, kind: str) -> Event:
    (topic, partition), old, new = change.tp, change.old, change.new
    if kind == "reassignment":
        event = {"type": "partition_reassignment", "topic": topic, "partition": partition}
        return event | {"replicas": _target(change)}
    if kind == "cancel":
        event = {"type": "partition_reassignment", "topic": topic, "partition": partition}
        return event | {"replicas": None}
    isr = list(new.isr)
    if kind == "completion":
        # the builder removes again the members the completion dropped
        isr += [b for b in old.isr if b not in new.replicas and b not in isr]
    event = {"type": "isr_change", "topic": topic, "partition": partition, "isr": isr}
    event["leader"] = old.leader
    if new.leader_recovery_state != old.leader_recovery_state:
        event["leader_recovery_state"] = new.leader_recovery_state
    return event


def _target(change: Change) -> list[int]:
    """The target of a reassignment start: its replicas are the target followed by the
    sorted removing replicas (`PartitionReassignmentReplicas`). A record that leaves the
    removing replicas unset kept the partition's (Kafka does not write an unchanged list):
    they are the tail of the replicas only when the target did not drop them."""
    replicas = list(change.new.replicas)
    removing = change.data.get("removingReplicas")
    if removing is not None:
        return [b for b in replicas if b not in removing]
    tail = sorted(change.old.removing)
    if tail and replicas[-len(tail) :] == tail:
        return replicas[: -len(tail)]
    return replicas


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(b) for b in value or ())


def _partition_row(row: list[Any]) -> PartitionState:
    """A partition of `to_json`'s rows (the fields after topic and partition)."""
    (replicas, isr, leader, leader_epoch, partition_epoch, adding, removing, elr, lke,
     recovery, controller_epoch) = row  # fmt: skip
    return PartitionState(
        tuple(map(int, replicas)), tuple(map(int, isr)), int(leader), int(leader_epoch),
        int(partition_epoch), tuple(map(int, adding)), tuple(map(int, removing)),
        tuple(map(int, elr)), tuple(map(int, lke)), str(recovery), int(controller_epoch),
    )  # fmt: skip


def _partition_state(data: dict[str, Any], epoch: int) -> PartitionState:
    return PartitionState(
        replicas=_ints(data["replicas"]),
        isr=_ints(data["isr"]),
        leader=int(data["leader"]),
        leader_epoch=int(data["leaderEpoch"]),
        partition_epoch=int(data["partitionEpoch"]),
        adding=_ints(data.get("addingReplicas")),
        removing=_ints(data.get("removingReplicas")),
        elr=_ints(data.get("eligibleLeaderReplicas")),
        lke=_ints(data.get("lastKnownElr")),
        leader_recovery_state=_RECOVERY.get(int(data.get("leaderRecoveryState", 0)), "RECOVERED"),
        controller_epoch=epoch,
    )


def _merge(old: PartitionState, data: dict[str, Any], epoch: int) -> PartitionState:
    """A PartitionChangeRecord applied as `PartitionRegistration.merge` applies it."""
    leader = int(data.get("leader", NO_LEADER_CHANGE))
    recovery = int(data.get("leaderRecoveryState", -1))

    def given(name: str, before: tuple[int, ...]) -> tuple[int, ...]:
        value = data.get(name)
        return before if value is None else _ints(value)

    return PartitionState(
        replicas=given("replicas", old.replicas),
        isr=given("isr", old.isr),
        leader=old.leader if leader == NO_LEADER_CHANGE else leader,
        leader_epoch=old.leader_epoch if leader == NO_LEADER_CHANGE else old.leader_epoch + 1,
        partition_epoch=old.partition_epoch + 1,
        adding=given("addingReplicas", old.adding),
        removing=given("removingReplicas", old.removing),
        elr=given("eligibleLeaderReplicas", old.elr),
        lke=given("lastKnownElr", old.lke),
        leader_recovery_state=(
            old.leader_recovery_state if recovery < 0 else _RECOVERY.get(recovery, "RECOVERED")
        ),
        controller_epoch=epoch,
    )


def _stored(state: PartitionState) -> dict[str, Any]:
    """A snapshot partition as a creation's `state` (CONTRACT §1, §5)."""
    return {
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
        "partition_epoch": state.partition_epoch,
        "controller_epoch": state.controller_epoch,
        "leader_recovery_state": state.leader_recovery_state,
        "elr": list(state.elr),
        "last_known_elr": list(state.lke),
    }


def _observed(tp: TP, state: PartitionState) -> dict[str, Any]:
    """CONTRACT §5's observed partition of a KRaft cluster (no controller epoch)."""
    return {
        "topic": tp[0],
        "partition": tp[1],
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
        "partition_epoch": state.partition_epoch,
        "replicas": list(state.replicas),
        "elr": list(state.elr),
        "last_known_elr": list(state.lke),
        "leader_recovery_state": state.leader_recovery_state,
    }


_HANDLERS = {
    "LeaderChange": KraftLogModel._leader_change,
    "REGISTER_BROKER_RECORD": KraftLogModel._register,
    "BROKER_REGISTRATION_CHANGE_RECORD": KraftLogModel._registration_change,
    "FENCE_BROKER_RECORD": KraftLogModel._fence_record,
    "UNFENCE_BROKER_RECORD": KraftLogModel._unfence_record,
    "UNREGISTER_BROKER_RECORD": KraftLogModel._unregister,
    "TOPIC_RECORD": KraftLogModel._topic,
    "PARTITION_RECORD": KraftLogModel._partition,
    "REMOVE_TOPIC_RECORD": KraftLogModel._remove_topic,
    "PARTITION_CHANGE_RECORD": KraftLogModel._partition_change,
    "CONFIG_RECORD": KraftLogModel._config,
    "CLEAR_ELR_RECORD": KraftLogModel._clear_elr,
    "FEATURE_LEVEL_RECORD": KraftLogModel._feature,
}
