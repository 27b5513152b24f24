"""ZooKeeper observations → CONTRACT §1 events, for `kcsim shadow` (pure: no I/O, no clock).

`streaming/shadow/znode_reader.py` reads the znodes of a ZooKeeper-mode Kafka cluster and hands this
module `Change`s: one znode (or registration) as it now is, with the zxid that made it so.
`ShadowModel` keeps the cluster as it last saw it, turns the changes into the controller
events that caused them and attributes the controller's partition-state writes to them.

What ZooKeeper does not show is inferred:

* a *cause* is a change the controller reacts to: a broker registration appearing,
  vanishing or replaced (a bounce), a new topic or partitions, a reassignment (adding or
  removing replicas in the topic znode), a deletion request, a new controller, a topic
  config change;
* a state znode write that keeps the leader epoch is a leader's AlterPartition (the
  controller bumps the leader epoch on every write of its own): an `isr_change`, itself a
  cause (a reassignment completes on it);
* any other state write belongs to the latest pending cause (by zxid: ZooKeeper's order,
  not the order the shadow read them in) that could have made it (one naming a broker
  the partition has a replica on, the partition's topic, a failover);
  if none could, the write says what caused it: a registered broker dropped from the ISR
  is a `controlled_shutdown` of that broker, a leader moved to the first replica a
  `preferred` election, a leader from outside the ISR an `unclean` one;
* nothing in ZooKeeper says a cause is handled: events are held until the caller calls
  `flush` (when no write came for the settle window) and then emitted in zxid order.

Event ids are `<cluster>:zx<zxid hex>:<n>` (n counts the events of one zxid) and `seq` is
`max(previous seq + 1, zxid << 8)`: increasing, int64 while ZooKeeper's epoch (a zxid's
high 32 bits) stays below 2**23, and tied to ZooKeeper's own order so that a restarted
shadow can tell what it has already written.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from streaming.importers.state_field import state_field
from streaming.shadow.znodes import (
    TP,
    BadZnode,
    Broker,
    Change,
    Controller,
    PartitionState,
    Snapshot,
    Topic,
    change_order,
)

Event = dict[str, Any]

SEQ_SHIFT = 8


# ------------------------------------------------------------------ the model


@dataclass(slots=True)
class _Pending:
    zxid: int
    events: list[Event]  # the cause's events; observed goes on the last
    kind: str
    brokers: frozenset[int] = frozenset()
    topic: str | None = None
    partition: int | None = None
    # the partitions written for this cause, each as its observed row when its last write
    # for this cause was read (None: no state znode); insertion-ordered
    writes: dict[TP, dict[str, Any] | None] = field(default_factory=dict)
    deleted_topic: str | None = None
    inferred: bool = False  # named by a write itself (no cause was pending for it)
    replaced: int | None = None  # a failover's: the broker of the controller it replaced
    # the state writes taken, per partition in zxid order (not the rows a topic-wide cause
    # observes untouched): a cause read later may claim the later ones by zxid
    seen: dict[TP, list[_Write]] = field(default_factory=dict)
    # a deletion whose state znodes vanished before its writes to them were read (it
    # completed first): what it left is unknown, so it carries no observed
    unseen: bool = False


class _Write(NamedTuple):
    zxid: int  # the state znode's mzxid when read
    old: PartitionState | None
    new: PartitionState | None
    row: dict[str, Any] | None  # the observed row it left


@dataclass(slots=True)
class ShadowModel:
    cluster: str
    brokers: dict[int, Broker] = field(default_factory=dict)
    topics: dict[str, Topic] = field(default_factory=dict)
    states: dict[TP, PartitionState] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    controller: Controller | None = None
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    # per topic being deleted: the replicas (partition, broker) whose answer was written
    answered: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    last_seq: int = 0
    last_zxid: int = 0
    started: bool = False
    unexplained: int = 0  # controller writes no cause could have made (logged by the caller)
    _gone_controller: Controller | None = None
    _id_zxid: int = 0  # the zxid of the last event id given out, and the next n for it
    _id_next: int = 0
    _pending: list[_Pending] = field(default_factory=list)  # in zxid order
    _latest_write: int = 0  # the largest mzxid among the pending causes' writes
    # partition state znodes read gone whose topic's deletion request is not read yet
    _vanished: set[TP] = field(default_factory=set)
    # the unreadable znodes given a line: path -> the mzxid of the version read. A re-read
    # (a restart, a reconnection, a sibling's watch) finds the same version and writes no
    # second line; a new version gets its own.
    bad: dict[str, int] = field(default_factory=dict)

    # ------------------------------------------------------------ start

    def bootstrap(self, snap: Snapshot) -> list[Event]:
        """The cluster's present state as events (the first start): brokers, topics with
        their stored partition state (and queued deletion), a controller failover
        observing every partition, in-flight reassignments."""
        cause = _Pending(snap.zxid, [], "bootstrap")
        for broker_id in sorted(snap.brokers):
            broker = snap.brokers[broker_id]
            event: Event = {"type": "broker_startup", "broker": broker_id}
            if broker.rack is not None:
                event["rack"] = broker.rack
            cause.events.append(event)
        self.brokers = dict(snap.brokers)
        for topic in sorted(snap.topics):
            info = snap.topics[topic][0]
            self.topics[topic] = info
            event = {"type": "topic_creation", "topic": topic, "assignment": _assignment(info)}
            stored = {}
            for p in sorted(info.assignment):
                if (state := snap.states.get((topic, p))) is not None:
                    self.states[topic, p] = state[0]
                    stored[str(p)] = state_field(state[0])
            if stored:
                event["state"] = stored
            if configs := snap.configs.get(topic, ({}, 0))[0]:
                self.configs[topic] = configs
                event["configs"] = configs
            if topic in snap.deletes:
                # Queued before the failover's state machines start (SPEC §7.2 steps 5-6,
                # then 9: no election for it): stored state, like the state znodes. The
                # deletion's work so far is in them; its StopReplica answers are all to
                # come (the failover forgets replicas' deletion states), at its completion.
                self.deleting.add(topic)
                event["deletion"] = "queued"
            cause.events.append(event)
        failover: Event = {"type": "controller_failover"}
        if snap.controller is not None:
            self.controller = snap.controller[0]
            failover["controller"] = self.controller.broker
            failover["controller_epoch"] = self.controller.epoch
        failover["observed"] = {"partitions": [self._observed(tp) for tp in sorted(self.states)]}
        cause.events.append(failover)
        for topic in sorted(self.topics):
            info = self.topics[topic]
            for p in sorted(info.assignment):
                if info.reassigning(p):
                    cause.events.append(_reassignment(topic, p, info.target(p)))
        self.started = True
        out = self._stamp(cause)
        # stamped like every event (ids, seqs after the bootstrap's), so that a restart's
        # output filter (by seq) knows whether they are out
        for change in snap.bad:
            self.bad[change.key] = change.zxid
        rejected = _Pending(cause.zxid, [self._rejected(c) for c in snap.bad], "bad")
        return out + self._stamp(rejected)

    def diff(self, snap: Snapshot) -> list[Change]:
        """The changes that turn the model's cluster into `snap`'s (a restart, a new
        session): what vanished gets its parent's pzxid, what changed its own zxid."""
        changes: list[Change] = [c for c in snap.bad if self.bad.get(c.key) != c.zxid]
        unreadable = {c.key for c in snap.bad}
        # an unreadable znode gone or readable again: forgotten (no event)
        changes += [
            Change(self.last_zxid, "bad", path) for path in self.bad if path not in unreadable
        ]
        for broker_id, broker in snap.brokers.items():
            if self.brokers.get(broker_id) != broker:
                changes.append(Change(broker.epoch, "broker", broker_id, broker))
        changes += [
            Change(snap.brokers_pzxid, "broker", b) for b in self.brokers if b not in snap.brokers
        ]
        if snap.controller is not None and snap.controller[0] != self.controller:
            changes.append(Change(snap.controller[1], "controller", None, snap.controller[0]))
        for topic, zxid in snap.deletes.items():
            if topic not in self.deleting:
                changes.append(Change(zxid, "delete", topic, True))
        changes += [
            Change(snap.deletes_pzxid, "delete", t) for t in self.deleting if t not in snap.deletes
        ]
        for topic, (configs, zxid) in snap.configs.items():
            if self.configs.get(topic, {}) != configs:
                changes.append(Change(zxid, "config", topic, configs))
        for topic, (info, zxid) in snap.topics.items():
            if self.topics.get(topic) != info:
                changes.append(Change(zxid, "topic", topic, info))
        changes += [
            Change(snap.topics_pzxid, "topic", t) for t in self.topics if t not in snap.topics
        ]
        for tp, (state, zxid) in snap.states.items():
            if self.states.get(tp) != state:
                changes.append(Change(zxid, "state", tp, state))
        return changes

    # ------------------------------------------------------------ changes

    def apply(self, changes: Iterable[Change]) -> None:
        """Take changes in (zxid) order; events wait for `flush`."""
        for change in sorted(changes, key=change_order):
            handler = getattr(self, f"_on_{change.kind}")
            handler(change)
            self.last_zxid = max(self.last_zxid, change.zxid)

    def flush(self, final: bool = False) -> list[Event]:
        """Every pending cause's events, in zxid order, with ids, seqs and `observed`
        (unless, and `final` not given, a failure waits for the next controller)."""
        if not final and any(self._awaits_new_controller(c) for c in self._pending):
            return []  # all held, so that events stay in zxid order
        pending, self._pending, self._latest_write = self._pending, [], 0
        self.unexplained += sum(len(c.writes) for c in pending if c.kind == "unexplained")
        return [event for cause in pending for event in self._stamp(cause)]

    def _awaits_new_controller(self, cause: _Pending) -> bool:
        """The controller's own registration gone with /controller, no new one read yet:
        held for the failover, whose `failed_brokers` it becomes (the new controller loads
        with it dead; nothing handles it as a failure). An election slower than the settle
        window would otherwise write it out as a failure the old controller handled."""
        gone = self._gone_controller
        return (
            cause.kind == "broker_failure"
            and self.controller is None
            and gone is not None
            and gone.broker in cause.brokers
        )

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _take(self, cause: _Pending, tp: TP, zxid: int, old: PartitionState | None) -> None:
        row = self._observed(tp)
        self._latest_write = max(self._latest_write, zxid)
        cause.writes[tp] = row
        cause.seen.setdefault(tp, []).append(_Write(zxid, old, self.states.get(tp), row))

    def _insert(self, cause: _Pending) -> None:
        # after the causes of the same zxid: reading back from the end finds the latest
        bisect.insort(self._pending, cause, key=lambda c: c.zxid)

    def _add(self, cause: _Pending) -> None:
        self._insert(cause)
        if cause.zxid < self._latest_write:  # else (read in order) no write is after it
            self._claim_later_writes(cause)

    def _claim_later_writes(self, cause: _Pending) -> None:
        """ZooKeeper orders everything by zxid, not by when the shadow reads it: a state write
        read before `cause` (its watch fired first, or `cause`'s znode was read late) but
        made after it (mzxid above the cause's zxid) is `cause`'s when `cause` is later than
        the one it was given to and could have made it: the write goes where it would have
        gone had the two been read in zxid order. So do writes held unexplained, and writes
        that named a cause of their own (an inferred shutdown or election), which a cause
        pending at the time would have explained."""
        for other in list(self._pending):
            if other is cause:
                continue
            if other.zxid >= cause.zxid and not other.inferred:
                continue
            for tp, writes in list(other.seen.items()):
                later = [w for w in writes if w.zxid > cause.zxid]
                if not later or not self._accepts(cause, tp, later[0].old, later[0].new):
                    continue
                # the earlier writes stay where they were, as the row they left
                kept = [w for w in writes if w.zxid <= cause.zxid]
                if kept:
                    other.seen[tp] = kept
                    other.writes[tp] = kept[-1].row
                else:
                    del other.seen[tp]
                    other.writes.pop(tp, None)
                mine = sorted([*cause.seen.get(tp, []), *later], key=lambda w: w.zxid)
                cause.seen[tp] = mine
                cause.writes[tp] = mine[-1].row
            if other.inferred and not other.writes:
                self._pending.remove(other)

    def _on_bad(self, change: Change) -> None:
        path = change.key
        if change.value is None:
            self.bad.pop(path, None)
        elif self.bad.get(path) != change.zxid:  # else this version has its line already
            self.bad[path] = change.zxid
            self._insert(_Pending(change.zxid, [self._rejected(change)], "bad"))

    def _on_broker(self, change: Change) -> None:
        broker_id, new = change.key, change.value
        old = self.brokers.get(broker_id)
        if new is None:
            if old is None:
                return
            del self.brokers[broker_id]
            self._broker_cause(change.zxid, "broker_failure", broker_id)
        elif old is None or old.epoch != new.epoch:
            self.brokers[broker_id] = new
            self._broker_cause(change.zxid, "broker_startup", broker_id, new.rack)
        else:
            self.brokers[broker_id] = new  # endpoints or features: no partition effect

    def _broker_cause(self, zxid: int, kind: str, broker: int, rack: str | None = None) -> None:
        if kind == "broker_failure" and self._failed_with_controller(zxid, broker):
            return
        last = self._pending[-1] if self._pending else None
        # Several registrations changing before the controller wrote anything: one
        # BrokerChange (the controller reads all registrations at once).
        if last is not None and last.kind == kind and not last.writes and kind != "bad":
            ids = sorted(last.brokers | {broker})
            event = last.events[0]
            event.pop("broker", None)
            event.pop("rack", None)
            event["brokers"] = ids
            last.brokers = frozenset(ids)
            if last.zxid < self._latest_write:
                self._claim_later_writes(last)
            return
        event = {"type": kind, "broker": broker}
        if rack is not None:
            event["rack"] = rack
        self._add(_Pending(zxid, [event], kind, frozenset({broker})))

    def _failed_with_controller(self, zxid: int, broker: int) -> bool:
        """The old controller's registration read after the new /controller (the watches
        fired in one order, the reads came in another): it is that failover's."""
        for cause in self._pending:
            failover = cause.kind == "controller_failover" and cause.replaced == broker
            if failover and cause.zxid >= zxid:
                event = cause.events[0]
                event["failed_brokers"] = sorted({*event.get("failed_brokers", []), broker})
                return True
        return False

    def _on_controller(self, change: Change) -> None:
        new: Controller | None = change.value
        old, self.controller = self.controller or self._gone_controller, new
        if new is None:
            self._gone_controller = old
            return
        self._gone_controller = None
        if new == old:
            return
        event: Event = {
            "type": "controller_failover",
            "controller": new.broker,
            "controller_epoch": new.epoch,
        }
        # The old controller's own registration vanished with it (one session, one
        # transaction): it is dead when the new controller loads, with no failure event.
        # A dead controller writes nothing, so writes already given to that failure (read
        # before the new /controller was) are the new controller's.
        # (Causes read after the failure but made after the election may sit between.)
        writes: dict[TP, dict[str, Any] | None] = {}
        seen: dict[TP, list[_Write]] = {}
        failures = [
            c
            for c in self._pending
            if c.kind == "broker_failure"
            and c.zxid <= change.zxid
            and old is not None
            and old.broker in c.brokers
        ]
        if failures:
            failure = max(failures, key=lambda c: c.zxid)
            self._pending.remove(failure)
            event["failed_brokers"] = sorted(failure.brokers)
            writes, seen = failure.writes, failure.seen
        # The writes made after the election (mzxid above /controller's czxid) but read
        # before /controller was are the new controller's: `_add` claims them by zxid.
        cause = _Pending(change.zxid, [event], "controller_failover", writes=writes, seen=seen)
        cause.replaced = old.broker if old is not None else None
        self._add(cause)

    def _on_delete(self, change: Change) -> None:
        topic = change.key
        if change.value is None:
            self.deleting.discard(topic)
            return
        if topic in self.deleting or topic not in self.topics:
            return  # a repeated request; or one the controller drops (unknown topic)
        self.deleting.add(topic)
        event = {"type": "topic_deletion", "topic": topic}
        cause = self._topic_cause(change.zxid, event)
        # state znodes already gone (read gone before the request itself: a vanished znode
        # has no zxid of its own): the deletion completed unseen. A partition that never had
        # a state znode (created with every replica down, still New) is no sign of that.
        vanished = {(topic, p) for p in self.topics[topic].assignment} & self._vanished
        cause.unseen = bool(vanished)
        self._vanished -= vanished
        self._add(cause)
        # onTopicDeletion sends StopReplica(delete) to the replicas on live brokers, which
        # answer within milliseconds (their answers are not in ZooKeeper): they follow the
        # deletion at once, so a replica on a down broker is the only one left to answer
        # when it comes back (SPEC §15.3, §15.4)
        info = self.topics[topic]
        answering = [(p, b) for p in sorted(info.assignment) for b in info.assignment[p]]
        answering = [(p, b) for p, b in answering if b in self.brokers]
        self.answered[topic] = set(answering)
        answers = [_stop_replica_answer(topic, p, b) for p, b in answering]
        if answers:
            self._insert(_Pending(change.zxid, answers, "deletion_answers", topic=topic))

    def _on_config(self, change: Change) -> None:
        topic, configs = change.key, change.value or {}
        if self.configs.get(topic, {}) == configs:
            return
        self.configs[topic] = configs
        if topic not in self.topics or change.value is None:
            return  # written with the topic (creation) or removed with it (deletion)
        event = {"type": "topic_config_change", "topic": topic, "configs": configs}
        self._add(self._topic_cause(change.zxid, event))

    def _on_topic(self, change: Change) -> None:
        topic, new = change.key, change.value
        old = self.topics.get(topic)
        if new is None:
            if old is not None:
                self._topic_gone(change.zxid, topic, old)
            return
        self.topics[topic] = new
        if old is None:
            event: Event = {
                "type": "topic_creation",
                "topic": topic,
                "assignment": _assignment(new),
            }
            if configs := self.configs.get(topic):
                event["configs"] = configs
            self._add(_Pending(change.zxid, [event], "topic_creation", topic=topic))
            return
        added = {p: r for p, r in new.assignment.items() if p not in old.assignment}
        if added:
            event = {
                "type": "partition_creation",
                "topic": topic,
                "assignment": {str(p): list(r) for p, r in sorted(added.items())},
            }
            self._add(self._topic_cause(change.zxid, event))
        for p in sorted(new.assignment):
            if p in added:
                continue
            target = new.target(p)
            if new.reassigning(p) and (not old.reassigning(p) or old.target(p) != target):
                event = _reassignment(topic, p, target)
                self._add(
                    _Pending(
                        change.zxid, [event], "partition_reassignment", topic=topic, partition=p
                    )
                )
            elif new.assignment[p] != old.assignment[p] and old.reassigning(p):
                # the controller's own rewrite (a reassignment completed or was cancelled)
                self._attach_write(change.zxid, (topic, p), self.states.get((topic, p)))
            elif new.assignment[p] != old.assignment[p]:
                # a reassignment whose target was in the ISR (a new order, or replicas
                # removed), its intermediate znode unseen: the controller elected, shrank
                # and wrote the final assignment at once (SPEC §14.3, phase B), and those
                # state writes, read first, were taken for causes of their own
                event = _reassignment(topic, p, new.assignment[p])
                cause = _Pending(
                    change.zxid, [event], "partition_reassignment", topic=topic, partition=p
                )
                self._take_inferred_writes(cause, (topic, p))
                self._add(cause)

    def _topic_gone(self, zxid: int, topic: str, old: Topic) -> None:
        del self.topics[topic]
        self._vanished -= {(topic, p) for p in old.assignment}
        self.configs.pop(topic, None)
        events: list[Event] = []
        if topic not in self.deleting:  # deleted while the shadow was not looking
            events.append({"type": "topic_deletion", "topic": topic})
        self.deleting.discard(topic)
        # Brokers' StopReplica(delete) answers are not in ZooKeeper; the deletion completed,
        # so every live replica that had not answered yet did, with no error.
        answered = self.answered.pop(topic, set())
        for p in sorted(old.assignment):
            self.states.pop((topic, p), None)
            for broker in old.assignment[p]:
                if broker in self.brokers and (p, broker) not in answered:
                    events.append(_stop_replica_answer(topic, p, broker))
        if events:
            cause = _Pending(zxid, events, "deletion_done", topic=topic, deleted_topic=topic)
            self._insert(cause)
            return
        # nothing left to answer: the completion shows on the answers if still pending;
        # else an empty cause, so that the flush saves the shadow's view without the topic
        for cause in reversed(self._pending):
            if cause.kind == "deletion_answers" and cause.topic == topic:
                cause.deleted_topic = topic
                return
        self._insert(_Pending(zxid, [], "deletion_done", topic=topic))

    def _on_state(self, change: Change) -> None:
        tp, new = change.key, change.value
        old = self.states.get(tp)
        if new is None:
            if self.states.pop(tp, None) is not None and tp[0] not in self.deleting:
                self._vanished.add(tp)
            if tp[0] in self.deleting:
                # deleted with its topic: if before the deletion's writes to it were read,
                # what they left is unknown
                for cause in self._pending:
                    deletion = cause.kind == "topic_deletion" and cause.topic == tp[0]
                    if deletion and tp not in cause.seen:
                        cause.unseen = True
            return
        if old == new:
            return
        self.states[tp] = new
        if old is not None and new.leader_epoch == old.leader_epoch and new.leader == old.leader:
            event = {
                "type": "isr_change",
                "topic": tp[0],
                "partition": tp[1],
                "isr": list(new.isr),
                "leader_epoch": new.leader_epoch,
                "partition_epoch": old.partition_epoch,
            }
            cause = _Pending(change.zxid, [event], "isr_change", topic=tp[0], partition=tp[1])
            self._take(cause, tp, change.zxid, old)
            if (deletion := self._deletion_not_started(tp[0], change.zxid)) is not None:
                # The controller handled this AlterPartition before the TopicDeletion its
                # request znode (created first) queued: the deletion had written nothing
                # yet, and writes after its own (SPEC §15.3). Before it, as kcsim must apply
                # it: after the deletion, its topic would be gone.
                cause.zxid = deletion.zxid
                self._pending.insert(self._pending.index(deletion), cause)
                return
            self._add(cause)
            return
        if old is not None and (joined := self._joined_unseen(tp, old, new)):
            # A reassignment's writes read at once (a watch fires once, the read gets the
            # latest version): phase A, the adding replicas' AlterPartition, then the
            # completion the AlterPartition triggers (SPEC §14.3-14.4). The AlterPartitions
            # are the events kcsim needs; the completion's writes are their outcome.
            events = _unseen_alter_partitions(tp, old, new, joined)
            cause = _Pending(change.zxid, events, "isr_change", topic=tp[0], partition=tp[1])
            self._take(cause, tp, change.zxid, old)
            self._add(cause)
            return
        self._attach_write(change.zxid, tp, old)

    def _deletion_not_started(self, topic: str, zxid: int) -> _Pending | None:
        """The pending deletion of `topic` requested before `zxid` that has written
        nothing yet (its ISR removals come after anything it read or followed)."""
        for cause in self._pending:
            if cause.kind == "topic_deletion" and cause.topic == topic and cause.zxid < zxid:
                return None if cause.seen else cause
        return None

    def _take_inferred_writes(self, cause: _Pending, tp: TP) -> None:
        for other in list(self._pending):
            if other.inferred and tp in other.writes:
                cause.writes[tp] = other.writes.pop(tp)
                if tp in other.seen:
                    cause.seen[tp] = other.seen.pop(tp)
                if not other.writes:
                    self._pending.remove(other)
        if tp in self.states:
            cause.writes[tp] = self._observed(tp)

    def _joined_unseen(self, tp: TP, old: PartitionState, new: PartitionState) -> list[int]:
        """Replicas a pending reassignment of `tp` adds that joined the ISR in writes the
        shadow did not see (the version moved by more than one write)."""
        if new.partition_epoch < old.partition_epoch + 2:
            return []
        # The topic znode says so while the reassignment runs, even when its cause was
        # written out already (the new replicas took longer than the settle window to catch
        # up, then the AlterPartition and the completion came within one read).
        info = self.topics.get(tp[0])
        if info is not None and info.reassigning(tp[1]):
            target = info.target(tp[1])
            return [b for b in new.isr if b not in old.isr and b in target]
        for cause in reversed(self._pending):
            if cause.kind == "partition_reassignment" and (cause.topic, cause.partition) == tp:
                target = cause.events[0]["replicas"]
                return [b for b in new.isr if b not in old.isr and b in target]
        return []

    # ------------------------------------------------------------ attribution

    def _topic_cause(self, zxid: int, event: Event) -> _Pending:
        """A cause whose scope is a whole topic (partition creation, deletion, config
        change): its observed covers every partition of the topic, those it did not write as
        they were when it came (so kcsim compares the whole topic, as the event's scope)."""
        topic = event["topic"]
        cause = _Pending(zxid, [event], event["type"], topic=topic)
        for p in sorted(self.topics[topic].assignment):
            if (topic, p) in self.states:
                cause.writes[topic, p] = self._observed((topic, p))
        return cause

    def _attach_write(self, zxid: int, tp: TP, old: PartitionState | None) -> None:
        new = self.states.get(tp)
        for cause in reversed(self._pending):  # the latest by zxid first
            if cause.zxid <= zxid and self._accepts(cause, tp, old, new):
                self._take(cause, tp, zxid, old)
                return
        inferred = self._infer(zxid, tp, old, new)
        if inferred is None:
            # held, without an event, for a cause read later whose zxid is below the write's
            inferred = _Pending(zxid, [], "unexplained", inferred=True)
        self._take(inferred, tp, zxid, old)
        self._insert(inferred)

    def _accepts(
        self, cause: _Pending, tp: TP, old: PartitionState | None, new: PartitionState | None
    ) -> bool:
        kind = cause.kind
        if kind == "controller_failover":
            return True
        if kind in ("broker_startup", "broker_failure", "controlled_shutdown"):
            info = self.topics.get(tp[0])
            replicas = set(info.assignment.get(tp[1], ())) if info else set()
            if old is not None:
                replicas |= {old.leader, *old.isr}
            return bool(replicas & cause.brokers)
        if kind == "isr_change":
            return cause.topic == tp[0] and cause.partition == tp[1]
        if kind == "partition_reassignment":
            return cause.topic == tp[0] and cause.partition == tp[1]
        if kind == "deletion_answers":
            return False  # answers write nothing until the deletion completes
        if kind == "leader_election":
            return self._election_kind(tp, old, new) == cause.events[0]["election"]
        if kind in ("topic_creation", "partition_creation"):
            # onNewPartitionCreation creates each state znode once and writes no other
            # state: a later write (a controlled shutdown's ISR removal) is not its own
            return cause.topic == tp[0] and old is None
        return cause.topic == tp[0]

    def _infer(
        self, zxid: int, tp: TP, old: PartitionState | None, new: PartitionState | None
    ) -> _Pending | None:
        if old is None or new is None:
            return None
        dropped = sorted(b for b in set(old.isr) - set(new.isr) if b in self.brokers)
        if dropped:
            # A registered broker leaves the ISR under a controller write: it asked to
            # shut down (ControlledShutdown reaches the controller, not ZooKeeper).
            event = {"type": "controlled_shutdown", "broker": dropped[0]}
            epoch = self.brokers[dropped[0]].epoch
            event["broker_epoch"] = epoch
            return _Pending(
                zxid, [event], "controlled_shutdown", frozenset({dropped[0]}), inferred=True
            )
        election = self._election_kind(tp, old, new)
        if election is None:
            return None
        event = {"type": "leader_election", "election": election, "partitions": []}
        return _Pending(zxid, [event], "leader_election", inferred=True)

    def _election_kind(
        self, tp: TP, old: PartitionState | None, new: PartitionState | None
    ) -> str | None:
        if old is None or new is None or new.leader == old.leader or new.leader < 0:
            return None
        if new.leader not in old.isr:
            return "unclean"
        info = self.topics.get(tp[0])
        if info is not None and info.assignment.get(tp[1], (None,))[0] == new.leader:
            return "preferred"
        return None

    # ------------------------------------------------------------ output

    def _observed(self, tp: TP) -> dict[str, Any] | None:
        """The partition's observed row as the shadow now sees it (None: no state znode):
        an event's rows are taken when its writes are read, so a later cause's writes to
        the same partition do not show in it."""
        state = self.states.get(tp)
        if state is None:
            return None
        info = self.topics.get(tp[0])
        row: dict[str, Any] = {
            "topic": tp[0],
            "partition": tp[1],
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "partition_epoch": state.partition_epoch,
            "controller_epoch": state.controller_epoch,
            "leader_recovery_state": state.leader_recovery_state,
        }
        if info is not None and tp[1] in info.assignment:
            row["replicas"] = list(info.assignment[tp[1]])
        return row

    def _stamp(self, cause: _Pending) -> list[Event]:
        events = cause.events
        if cause.kind == "leader_election":
            events[0]["partitions"] = [{"topic": t, "partition": p} for t, p in cause.writes]
        unobserved = (
            cause.unseen
            or (cause.kind == "deletion_answers" and cause.deleted_topic is None)
            # a partition's own cause whose writes went elsewhere (read coalesced into a
            # later one): an empty observed would say the partition does not exist
            or (cause.partition is not None and not any(cause.writes.values()))
        )
        if cause.kind not in ("bootstrap", "bad") and not unobserved and events:
            observed: dict[str, Any] = {
                "partitions": [row for _, row in sorted(cause.writes.items()) if row is not None]
            }
            if cause.deleted_topic is not None:
                observed["deleted_topics"] = [cause.deleted_topic]
            events[-1]["observed"] = observed
        stamped = []
        first = self._id_next if cause.zxid == self._id_zxid else 0
        self._id_zxid, self._id_next = cause.zxid, first + len(events)
        for n, event in enumerate(events, start=first):
            self.last_seq = max(self.last_seq + 1, cause.zxid << SEQ_SHIFT)
            head = {
                "type": event["type"],
                "cluster": self.cluster,
                "event_id": f"{self.cluster}:zx{cause.zxid:x}:{n}",
                "seq": self.last_seq,
            }
            stamped.append(head | event)
        return stamped

    def _rejected(self, change: Change) -> Event:
        # Kept as an event of the type the znode would have driven, without its fields:
        # kcsim rejects it into rejected_events with the znode's raw text in the line.
        bad: BadZnode = change.value
        line: Event = {"type": bad.event_type}
        if bad.event_type == "controller_failover":
            # its fields are all optional: without one it would be a failover kcsim applies.
            # The znode's text is the `controller` it failed to give: mistyped, rejected.
            line["controller"] = bad.raw
        return line | {"znode": bad.path, "znode_data": bad.raw, "problem": bad.problem}

    # ------------------------------------------------------------ persistence

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "last_seq": self.last_seq,
            "last_zxid": self.last_zxid,
            "brokers": {str(b): [v.epoch, v.rack, v.version] for b, v in self.brokers.items()},
            "topics": {
                t: [_assignment(v), _assignment_of(v.adding), _assignment_of(v.removing)]
                for t, v in self.topics.items()
            },
            "states": [[t, p, *_state_row(s)] for (t, p), s in self.states.items()],
            "deleting": sorted(self.deleting),
            "controller": None
            if self.controller is None
            else [
                self.controller.broker,
                self.controller.epoch,
                self.controller.kraft_controller_epoch,
            ],
            "configs": self.configs,
            "answered": {t: sorted(map(list, a)) for t, a in self.answered.items()},
            "bad": self.bad,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ShadowModel:
        def replica_map(m: Mapping[str, list[int]]) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(r) for p, r in m.items()}

        model = cls(obj["cluster"], last_seq=obj["last_seq"], last_zxid=obj["last_zxid"])
        model.brokers = {int(b): Broker(*v) for b, v in obj["brokers"].items()}
        model.topics = {
            t: Topic(replica_map(a), replica_map(ad), replica_map(rm))
            for t, (a, ad, rm) in obj["topics"].items()
        }
        model.states = {
            (t, p): PartitionState(leader, epoch, tuple(isr), cepoch, version, recovery)
            for t, p, leader, epoch, isr, cepoch, version, recovery in obj["states"]
        }
        model.deleting = set(obj["deleting"])
        if obj["controller"] is not None:
            model.controller = Controller(*obj["controller"])
        model.configs = obj["configs"]
        answered = obj.get("answered", {})  # absent in a state saved before it
        model.answered = {t: {(p, b) for p, b in a} for t, a in answered.items()}
        model.bad = dict(obj.get("bad", {}))  # absent in a state saved before it
        model.started = True
        return model


def _assignment_of(m: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
    return {str(p): list(r) for p, r in sorted(m.items())}


def _assignment(info: Topic) -> dict[str, list[int]]:
    return _assignment_of(info.assignment)


def _unseen_alter_partitions(
    tp: TP, old: PartitionState, new: PartitionState, joined: list[int]
) -> list[Event]:
    """The AlterPartitions behind `joined` replicas' unseen ISR entries, one per write that
    kept the leader epoch: every write of the controller's own bumps it (SPEC §17, §19.2),
    so the versions between `old` and `new` the leader epoch did not count are the leader's
    (two replicas catching up one after the other are two writes, and two versions kcsim
    must count too). More joiners than such writes: the last one adds the rest."""
    writes = new.partition_epoch - old.partition_epoch
    alters = max(1, min(writes - (new.leader_epoch - old.leader_epoch), len(joined)))
    events: list[Event] = []
    isr = list(old.isr)
    for n in range(alters):
        isr += joined[n : n + 1] if n < alters - 1 else joined[n:]
        events.append({"type": "isr_change", "topic": tp[0], "partition": tp[1], "isr": isr[:]})
    return events


def _stop_replica_answer(topic: str, partition: int, broker: int) -> Event:
    return {
        "type": "stop_replica_response",
        "topic": topic,
        "partition": partition,
        "broker": broker,
        "error": None,
    }


def _reassignment(topic: str, partition: int, target: tuple[int, ...]) -> Event:
    return {
        "type": "partition_reassignment",
        "topic": topic,
        "partition": partition,
        "replicas": list(target),
    }


def _state_row(s: PartitionState) -> list[Any]:
    return [
        s.leader,
        s.leader_epoch,
        list(s.isr),
        s.controller_epoch,
        s.partition_epoch,
        s.leader_recovery_state,
    ]
