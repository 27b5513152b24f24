"""A KRaft cluster's metadata records, in log order → CONTRACT §1 events (pure).

`KraftLogModel.feed` takes the records of `streaming/importers/kraft_log_decoder.py` (Kafka's own
JSON form of each record) and returns the events a batch completes. The KRaft controller
appends the records of one operation atomically, in one batch: a cause record
(registration change, TopicRecord, RemoveTopicRecord, ...) and the partition changes it
made. So each batch is read as a unit, its cause records first (Kafka 4.1.1 writes a
fencing's partition changes before the fencing record): a cause opens an event, and the
partition records
of the batch that it explains (a partition with a replica on the broker; the topic's
partitions) are that event's `observed`. A partition change no cause of its batch
explains is an event of its own, named by what it changed (README: "kcsim import
kraft-log"):

* replicas, adding or removing replicas changed: `partition_reassignment` to the target
  (replicas minus removing); a change that completes one (the targets all in the ISR) is
  the leader's AlterPartition that made it: `isr_change`;
* the leader moved to the first replica, from the ISR: `leader_election` preferred (one
  event per batch); a leader from outside the ISR and the ELR: `leader_election` unclean;
* the ISR alone: `isr_change` (the leader's AlterPartition), without epochs (kcsim's
  current ones: KRaft's count otherwise).

Every PartitionRecord and PartitionChangeRecord updates the partition's state (a change
record's unset fields keep their value; a leader given bumps the leader epoch; every
change bumps the partition epoch, as `PartitionRegistration.merge` does) and shows in
the `observed` of the event it belongs to, with `controller_epoch` the quorum leader epoch
of the batch that wrote it.

A topic's ConfigRecords go on its `topic_creation`'s `configs` (created in the same
batch) or a `topic_config_change` (one per topic and batch), for the names and values
kcsim takes; broker-level `unclean.leader.election.enable` is a note for the replay's
settings (`_carried`, README: "kcsim import kraft-log").

A log that starts at a snapshot begins as `kcsim shadow`'s start does: a `broker_startup`
per unfenced broker, a `topic_creation` per topic with its `assignment` and `state`, one
`controller_failover` (`controller_epoch` = the snapshot's epoch) observing every
partition.

Event ids are `<cluster>:kraft:<offset>:<n>` (the offset of the batch's first record, n
counting the events of that batch); `seq` counts from 1 in output order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from controller.config import UNCLEAN_KEY
from controller.topic_configs import topic_config_error
from streaming.importers.kraft_log_decoder import Record
from streaming.importers.state_field import state_field

Event = dict[str, Any]
TP = tuple[str, int]

NO_LEADER = -1
NO_LEADER_CHANGE = -2
_RECOVERY = {0: "RECOVERED", 1: "RECOVERING"}
# ConfigResource.Type ids in a ConfigRecord's resourceType
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
UNCLEAN_DEFAULT = "false"  # Kafka's static default of unclean.leader.election.enable


class PartitionState(NamedTuple):
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    elr: tuple[int, ...]
    leader_recovery_state: str
    controller_epoch: int

    def target(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing)


@dataclass(slots=True)
class _Cause:
    """An event a batch opened, and the partitions it explains."""

    event: Event
    brokers: frozenset[int] = frozenset()  # a broker event: partitions with a replica there
    topic: str | None = None  # a topic event: the topic's partitions
    writes: dict[TP, PartitionState] = field(default_factory=dict)  # observed, in order
    observes: bool | None = None  # carries observed: always, never, or (None) if it wrote


@dataclass(slots=True)
class Broker:
    epoch: int
    fenced: bool
    rack: str | None


@dataclass(slots=True)
class Counts:
    records: int = 0
    batches: int = 0
    unexplained: int = 0  # partition changes no event could be named for
    configs_dropped: int = 0  # topic config records kcsim does not take (README: why)


@dataclass(slots=True)
class KraftLogModel:
    cluster: str = "default"
    epoch: int = 0  # the quorum leader epoch of the last LeaderChange (controller epoch)
    brokers: dict[int, Broker] = field(default_factory=dict)  # registrations
    live: dict[int, None] = field(default_factory=dict)  # brokers kcsim has as registered
    shutting_down: set[int] = field(default_factory=set)
    topics: dict[str, str] = field(default_factory=dict)  # topic id -> name
    partitions: dict[TP, PartitionState] = field(default_factory=dict)
    # each topic's partition numbers: a deletion or a snapshot touches its topics only
    by_topic: dict[str, dict[int, None]] = field(default_factory=dict)
    # replicas of deleted topics on brokers that were down: answered when they are back
    undeleted: dict[int, list[TP]] = field(default_factory=dict)
    _undeleted_count: Counter[str] = field(default_factory=Counter)  # per topic, of those
    # topic name -> the configs carried to kcsim (names and values kcsim takes)
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # broker-level unclean.leader.election.enable ("" = the cluster default, or a node id)
    broker_unclean: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a replay's settings must know
    seq: int = 0
    counts: Counts = field(default_factory=Counts)
    _batch: tuple[str, int] | None = None  # (file, position) of the batch being read
    _batch_offset: int = 0
    _batch_ts: int = 0
    _causes: list[_Cause] = field(default_factory=list)
    _elections: dict[str, _Cause] = field(default_factory=dict)  # per kind, this batch
    _config_changes: dict[str, _Cause] = field(default_factory=dict)  # per topic, this batch
    _snapshot: bool = False
    _records: list[Record] = field(default_factory=list)  # the batch being read
    _ts_text: tuple[int, str] = (-1, "")

    # ------------------------------------------------------------ input

    def feed(self, record: Record) -> list[Event]:
        """One record; returns the events of the batch before it once a new batch starts."""
        out: list[Event] = []
        key = (str(record.path), record.position)
        if key != self._batch or record.snapshot != self._snapshot:
            out += self._end_batch()
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

    def finish(self) -> list[Event]:
        out = self._end_batch()
        return out + (self._end_snapshot() if self._snapshot else [])

    def _end_batch(self) -> list[Event]:
        """The batch's events. Its cause records are read before its partition changes:
        the controller writes a fencing's partition changes before the fencing record."""
        records, self._records = self._records, []
        for record in sorted(records, key=_batch_order):
            handler = _HANDLERS.get(record.type)
            if handler is not None:
                handler(self, record)
        return self._flush()

    # ------------------------------------------------------------ brokers

    def _leader_change(self, record: Record) -> None:
        if record.epoch <= self.epoch:
            return
        self.epoch = record.epoch
        event = {"type": "controller_failover", "controller": int(record.data["leaderId"])}
        event["controller_epoch"] = record.epoch
        self._open(event, observes=False)

    def _register(self, record: Record) -> None:
        data = record.data
        broker = int(data["brokerId"])
        fenced = bool(data.get("fenced", True))
        old = self.brokers.get(broker)
        rack = data.get("rack") or (old.rack if old else None)  # "" and null: no rack
        self.brokers[broker] = Broker(int(data["brokerEpoch"]), fenced, rack)
        if broker in self.live:
            # a new incarnation replaced a registered one: the old one is gone
            self._failure(broker)
        if not fenced:
            self._startup(broker)

    def _registration_change(self, record: Record) -> None:
        data = record.data
        broker = int(data["brokerId"])
        fenced = int(data.get("fenced", 0))
        entering = int(data.get("inControlledShutdown", 0)) == 1
        if entering and broker in self.live and broker not in self.shutting_down:
            self.shutting_down.add(broker)
            event = {"type": "controlled_shutdown", "broker": broker}
            self._open(event, brokers=frozenset({broker}))
        if fenced == 1:
            self._fence(broker)
        elif fenced == -1:
            self._unfence(broker)

    def _fence_record(self, record: Record) -> None:
        self._fence(int(record.data["id"]))

    def _unfence_record(self, record: Record) -> None:
        self._unfence(int(record.data["id"]))

    def _unregister(self, record: Record) -> None:
        broker = int(record.data["brokerId"])
        self._fence(broker)
        self.brokers.pop(broker, None)

    def _fence(self, broker: int) -> None:
        if broker in self.brokers:
            self.brokers[broker].fenced = True
        if broker in self.live:
            self._failure(broker)

    def _unfence(self, broker: int) -> None:
        if broker in self.brokers:
            self.brokers[broker].fenced = False
        if broker not in self.live:
            self._startup(broker)

    def _failure(self, broker: int) -> None:
        del self.live[broker]
        self.shutting_down.discard(broker)
        self._open({"type": "broker_failure", "broker": broker}, brokers=frozenset({broker}))

    def _startup(self, broker: int) -> None:
        self.live[broker] = None
        event: Event = {"type": "broker_startup", "broker": broker}
        registration = self.brokers.get(broker)
        if registration is not None and registration.rack is not None:
            event["rack"] = registration.rack
        self._open(event, brokers=frozenset({broker}))
        # the broker deletes the replicas of topics deleted while it was down
        pending = self.undeleted.pop(broker, [])
        for tp in pending:
            self._undeleted_count[tp[0]] -= 1
        last_of_topic = {t: i for i, (t, _) in enumerate(pending)}
        for i, tp in enumerate(pending):
            answer = {"type": "stop_replica_response", "topic": tp[0], "partition": tp[1]}
            answer |= {"broker": broker, "error": None}
            # the deletion's last answer (no down broker holds one of its replicas) observes
            last = last_of_topic[tp[0]] == i and not self._undeleted_count[tp[0]]
            if last:
                del self._undeleted_count[tp[0]]
            self._open(answer, observes=last)

    # ------------------------------------------------------------ topics

    def _topic(self, record: Record) -> None:
        name = str(record.data["name"])
        self.topics[str(record.data["topicId"])] = name
        event = {"type": "topic_creation", "topic": name, "assignment": {}}
        self._open(event, topic=name, observes=True)

    def _partition(self, record: Record) -> None:
        data = record.data
        name = self.topics.get(str(data["topicId"]))
        if name is None:
            self.counts.unexplained += 1
            return
        tp = (name, int(data["partitionId"]))
        state = _partition_state(data, record.epoch)
        self.partitions[tp] = state
        self.by_topic.setdefault(name, {})[tp[1]] = None
        cause = self._topic_cause(name)
        if cause is None:
            event = {"type": "partition_creation", "topic": name, "assignment": {}}
            cause = self._open(event, topic=name, observes=True)
        if "assignment" in cause.event:
            cause.event["assignment"][str(tp[1])] = list(state.replicas)
        cause.writes[tp] = state

    def _remove_topic(self, record: Record) -> None:
        name = self.topics.pop(str(record.data["topicId"]), None)
        if name is None:
            return
        gone = [(name, p) for p in sorted(self.by_topic.pop(name, {}))]
        self.configs.pop(name, None)  # a topic of the same name starts with none
        answers: list[tuple[TP, int]] = []
        for tp in gone:
            for broker in self.partitions.pop(tp).replicas:
                if broker in self.live:
                    answers.append((tp, broker))
                else:
                    self.undeleted.setdefault(broker, []).append(tp)
                    self._undeleted_count[name] += 1
        # KRaft deletes at once. kcsim (ZooKeeper mode) completes the deletion once every
        # replica answered its StopReplica: live brokers answer now, the topic's last
        # answer observes it gone (kcsim still has it while a down broker's replica has
        # not answered: it answers when the broker is back, see _startup)
        self._open({"type": "topic_deletion", "topic": name}, topic=name, observes=not answers)
        for i, (tp, broker) in enumerate(answers):
            answer = {"type": "stop_replica_response", "topic": tp[0], "partition": tp[1]}
            answer |= {"broker": broker, "error": None}
            self._open(answer, observes=i == len(answers) - 1)

    # ------------------------------------------------------------ configs

    def _config(self, record: Record) -> None:
        """A ConfigRecord (value null: the config deleted). A topic's configs kcsim takes
        go on its `topic_creation` when the topic is created in this batch, otherwise on
        one `topic_config_change` per topic and batch; broker-level
        unclean.leader.election.enable is a note (kcsim takes it from its settings)."""
        data = record.data
        resource, key = str(data["resourceName"]), str(data["name"])
        value = data.get("value")
        kind = int(data["resourceType"])
        if kind == BROKER_RESOURCE and key == UNCLEAN_KEY:
            self._broker_unclean(resource, value, record.offset)
            return
        if kind != TOPIC_RESOURCE or resource not in self.by_topic:
            return  # other resources hold nothing kcsim's controller acts on
        carried = self._carried(resource, key, value)
        if carried is None:
            return
        creation = self._creation(resource)
        if creation is not None:
            creation.event.setdefault("configs", {})[key] = carried
            return
        cause = self._config_changes.get(resource)
        if cause is None:
            event = {"type": "topic_config_change", "topic": resource, "configs": {}}
            cause = self._config_changes[resource] = self._open(event, topic=resource)
        cause.event["configs"][key] = carried

    def _carried(self, topic: str, key: str, value: str | None) -> str | None:
        """What kcsim gets for `key` of `topic` (None: nothing), kept in `configs`.

        kcsim validates topic configs as Kafka 3.7.1 does and would reject the whole event
        for a name it does not know (one Kafka 4.1.1 added) or a value it refuses, so those
        are dropped, counted. kcsim cannot remove a config: a deleted
        unclean.leader.election.enable becomes the value the topic falls back to (the
        log's cluster-level value, else Kafka's default false); another deleted config is
        counted, not carried (kcsim acts on none of them)."""
        stored = self.configs.setdefault(topic, {})
        if value is None:
            stored.pop(key, None)
            if key != UNCLEAN_KEY:
                self.counts.configs_dropped += 1
                return None
            value = self.broker_unclean.get("", UNCLEAN_DEFAULT)
        elif topic_config_error({key: value}) is not None:
            self.counts.configs_dropped += 1
            return None
        stored[key] = value
        return value

    def _broker_unclean(self, resource: str, value: str | None, offset: int) -> None:
        if value is None:
            self.broker_unclean.pop(resource, None)
        else:
            self.broker_unclean[resource] = value
        scope = "the cluster default" if resource == "" else f"node {resource}"
        now = "removed" if value is None else f"set to {value}"
        self.notes.append(
            f"offset {offset}: broker-level {UNCLEAN_KEY} ({scope}) {now}: kcsim reads it "
            f"from its settings (replay with --set {UNCLEAN_KEY}=...)"
        )

    def _creation(self, topic: str) -> _Cause | None:
        """The `topic_creation` of `topic` this batch opened, if any."""
        cause = self._topic_cause(topic)
        return cause if cause is not None and cause.event["type"] == "topic_creation" else None

    # ------------------------------------------------------------ partition changes

    def _partition_change(self, record: Record) -> None:
        data = record.data
        name = self.topics.get(str(data["topicId"]))
        tp = (name, int(data["partitionId"])) if name is not None else None
        old = self.partitions.get(tp) if tp is not None else None
        if tp is None or old is None:
            self.counts.unexplained += 1
            return
        new = _merge(old, data, record.epoch)
        self.partitions[tp] = new
        cause = self._cause_of(tp, old, new)
        if cause is None:
            cause = self._own_event(tp, old, new)
        if cause is None:
            self.counts.unexplained += 1
            return
        cause.writes[tp] = new

    def _cause_of(self, tp: TP, old: PartitionState, new: PartitionState) -> _Cause | None:
        """The latest event of this batch that explains a change of `tp`."""
        on = set(old.replicas) | set(new.replicas)
        for cause in reversed(self._causes):
            if cause.topic == tp[0] or (cause.brokers and cause.brokers & on):
                return cause
        return None

    def _own_event(self, tp: TP, old: PartitionState, new: PartitionState) -> _Cause | None:
        """A change no cause in its batch explains, named by what it changed."""
        topic, partition = tp
        if (old.replicas, old.adding, old.removing) != (new.replicas, new.adding, new.removing):
            completed = (old.adding or old.removing) and not (new.adding or new.removing)
            if completed and new.replicas == old.target():
                # the AlterPartition that brought the targets into the ISR completed it
                isr = old.isr + tuple(b for b in new.replicas if b not in old.isr)
                return self._open(_isr_change(tp, isr))
            replicas = None if completed else list(new.target())  # back to the old: a cancel
            event = {"type": "partition_reassignment", "topic": topic, "partition": partition}
            return self._open(event | {"replicas": replicas})
        if new.leader != old.leader:
            if new.leader == NO_LEADER:
                return None
            if new.leader not in old.isr and new.leader in old.elr:
                return None  # a clean election from the ELR, with no cause in the batch
            kind = "preferred" if new.leader in old.isr else "unclean"
            if kind == "preferred" and new.leader != new.replicas[0]:
                return None
            cause = self._elections.get(kind)
            if cause is None:
                event = {"type": "leader_election", "election": kind, "partitions": []}
                cause = self._elections[kind] = self._open(event)
            cause.event["partitions"].append({"topic": topic, "partition": partition})
            return cause
        if new.isr != old.isr:
            return self._open(_isr_change(tp, new.isr))
        return None

    # ------------------------------------------------------------ snapshots

    def _snapshot_record(self, record: Record) -> None:
        kind = record.type
        data = record.data
        if kind == "REGISTER_BROKER_RECORD":
            broker = int(data["brokerId"])
            fenced = bool(data.get("fenced", True))
            self.brokers[broker] = Broker(
                int(data["brokerEpoch"]), fenced, data.get("rack") or None
            )
        elif kind == "TOPIC_RECORD":
            self.topics[str(data["topicId"])] = str(data["name"])
        elif kind == "PARTITION_RECORD":
            name = self.topics.get(str(data["topicId"]))
            if name is not None:
                tp = (name, int(data["partitionId"]))
                self.partitions[tp] = _partition_state(data, record.epoch)
                self.by_topic.setdefault(name, {})[tp[1]] = None
        elif kind == "CONFIG_RECORD":
            self._snapshot_config(record)
        self.epoch = max(self.epoch, record.epoch)

    def _snapshot_config(self, record: Record) -> None:
        data = record.data
        resource, key, value = str(data["resourceName"]), str(data["name"]), data.get("value")
        kind = int(data["resourceType"])
        if kind == BROKER_RESOURCE and key == UNCLEAN_KEY:
            self._broker_unclean(resource, value, record.offset)
        elif kind == TOPIC_RESOURCE and value is not None:
            self._carried(resource, key, value)

    def _end_snapshot(self) -> list[Event]:
        """The snapshot's cluster as events, like `kcsim shadow`'s start."""
        self._snapshot = False
        events: list[Event] = []
        for broker in sorted(self.brokers):
            registration = self.brokers[broker]
            if registration.fenced:
                continue
            self.live[broker] = None
            event: Event = {"type": "broker_startup", "broker": broker}
            if registration.rack is not None:
                event["rack"] = registration.rack
            events.append(event)
        for topic in sorted(set(self.topics.values())):
            numbers = sorted(self.by_topic.get(topic, {}))
            assignment = {str(p): list(self.partitions[topic, p].replicas) for p in numbers}
            state = {str(p): state_field(self.partitions[topic, p]) for p in numbers}
            event = {"type": "topic_creation", "topic": topic, "assignment": assignment}
            if self.configs.get(topic):
                event["configs"] = dict(self.configs[topic])
            events.append(event | {"state": state})
        observed = [_observed(tp, self.partitions[tp]) for tp in sorted(self.partitions)]
        events.append(
            {"type": "controller_failover", "controller_epoch": self.epoch}
            | {"observed": {"partitions": observed}}
        )
        # reassignments in flight: requested again after the failover, as the shadow's
        # start does (the replicas above are the full set, target plus those leaving)
        for tp in sorted(self.partitions):
            partition = self.partitions[tp]
            if partition.adding or partition.removing:
                events.append(
                    {"type": "partition_reassignment", "topic": tp[0], "partition": tp[1]}
                    | {"replicas": list(partition.target())}
                )
        # their own ids: the first log batch after the snapshot starts at its end offset
        where = f"snapshot-{self._batch_offset}"
        return [self._stamp(event, where, i) for i, event in enumerate(events)]

    # ------------------------------------------------------------ output

    def _open(
        self,
        event: Event,
        *,
        brokers: frozenset[int] = frozenset(),
        topic: str | None = None,
        observes: bool | None = None,
    ) -> _Cause:
        cause = _Cause(event, brokers, topic, observes=observes)
        self._causes.append(cause)
        return cause

    def _topic_cause(self, topic: str) -> _Cause | None:
        for cause in reversed(self._causes):
            if cause.topic == topic and cause.event["type"] in ("topic_creation",
                                                                 "partition_creation"):  # fmt: skip
                return cause
        return None

    def _flush(self) -> list[Event]:
        causes, self._causes = self._causes, []
        self._elections = {}
        self._config_changes = {}
        out = []
        for n, cause in enumerate(causes):
            event = cause.event
            if cause.writes and event["type"] == "topic_config_change":
                # kcsim compares a topic event's observed with the whole topic
                for p in self.by_topic.get(event["topic"], {}):
                    tp = (event["topic"], p)
                    cause.writes.setdefault(tp, self.partitions[tp])
            if cause.observes or (cause.observes is None and cause.writes):
                rows = [_observed(tp, state) for tp, state in cause.writes.items()]
                event["observed"] = {"partitions": rows}
            out.append(self._stamp(event, self._batch_offset, n))
        return out

    def _iso_ts(self) -> str:
        # one text per batch: its events share the time
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


def _batch_order(record: Record) -> int:
    """Causes first, then configs (Kafka 4.1.1 writes a created topic's ConfigRecords
    before its PartitionRecords, which tell the topic's partitions), then partition
    changes."""
    return {"CONFIG_RECORD": 1, "PARTITION_CHANGE_RECORD": 2}.get(record.type, 0)


def _iso(ts: int) -> str:
    return datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(b) for b in value or ())


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
        leader_recovery_state=(
            old.leader_recovery_state if recovery < 0 else _RECOVERY.get(recovery, "RECOVERED")
        ),
        controller_epoch=epoch,
    )


def _isr_change(tp: TP, isr: tuple[int, ...]) -> Event:
    # No epochs: the leader's request was current in KRaft, whose epochs count otherwise
    # than ZooKeeper mode's (README); with KRaft's numbers, kcsim would refuse every
    # request after the first difference in counting as stale, and one difference would
    # become many. kcsim takes it as based on its own current epochs.
    return {"type": "isr_change", "topic": tp[0], "partition": tp[1], "isr": list(isr)}


def _observed(tp: TP, state: PartitionState) -> dict[str, Any]:
    row: dict[str, Any] = {"topic": tp[0], "partition": tp[1]}
    row.update(state_field(state))
    row["replicas"] = list(state.replicas)
    return row


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
}
