"""A ZooKeeper-mode controller's log facts, in time order → CONTRACT §1 events (pure).

`ZkLogModel.feed` takes the facts of `streaming/importers/zk_log_lines.py` as the merged logs of
every broker give them. Only the active controller's lines count: the one elected with
the highest epoch so far ("N successfully elected as the controller. Epoch incremented
to E"); the lines of any other broker's `[Controller id=N]` (a resigned or never-elected
one) are skipped and counted. Each event line opens a *block*: the controller handles one
event at a time, so the partition states its state-change lines give until the next event
line are that event's `observed` (for a line of several topics, each topic's event gets
its own partitions).

What the logs do not show is inferred (README: "kcsim import zk-logs"):

* a leader's AlterPartition is logged at DEBUG only: a controller write whose partition
  epoch jumps by more than one had an unseen write before it, which becomes an
  `isr_change` (base = the last known state; ISR = that ISR plus the replicas this write
  kept or removed); "Target replicas ... have all caught up" (a reassignment completing
  on an AlterPartition) is an `isr_change` adding the targets;
* a partition first seen in a state line (a log that begins mid-life) becomes a
  `topic_creation` (then `partition_creation`) carrying that state as `state`, with the
  replicas the line shows (ISR, plus the removed replica).

Event ids are `<cluster>:log:<controller epoch>:<n>` (n counts the events written under
that epoch, from 0) and `seq` counts from 1 in output order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from streaming.importers.state_field import state_field
from streaming.importers.zk_log_lines import KNOWN, Fact, State

Event = dict[str, Any]
TP = tuple[str, int]
Brokers = tuple[int, ...]
# {(topic, partition): (replicas, removing)} (zk_log_lines.assignments)
Assigned = dict[TP, tuple[Brokers, Brokers]]


@dataclass(slots=True)
class _Block:
    ts: int
    events: list[Event] = field(default_factory=list)
    before: list[Event] = field(default_factory=list)  # inferred, happened before events
    writes: dict[TP, None] = field(default_factory=dict)  # insertion-ordered set
    removed: set[int] = field(default_factory=set)  # brokers this event takes out
    main: int = -1  # the event that carries observed (-1: the last)
    by_topic: bool = False  # each event observes its own topic's partitions
    deleted_topic: str | None = None
    kind: str = ""


@dataclass(slots=True)
class Counts:
    inactive: int = 0  # lines of a controller that was not the active one
    unattributed: int = 0  # state lines with no event line before them
    inferred_isr_changes: int = 0


@dataclass(slots=True)
class ZkLogModel:
    cluster: str = "default"
    controller: int | None = None
    epoch: int | None = None
    resigned: bool = False
    live: dict[int, None] = field(default_factory=dict)  # registered brokers (ordered set)
    epochs: dict[int, int] = field(default_factory=dict)  # the controller's broker epochs
    replicas: dict[TP, tuple[int, ...]] = field(default_factory=dict)
    states: dict[TP, State] = field(default_factory=dict)
    deleting: set[str] = field(default_factory=set)
    reassigning: dict[TP, tuple[int, ...]] = field(default_factory=dict)
    completing: set[TP] = field(default_factory=set)
    seq: int = 0
    n: int = 0  # events written under the current epoch
    counts: Counts = field(default_factory=Counts)
    _block: _Block | None = None

    # ------------------------------------------------------------ input

    def feed(self, fact: Fact, ts: int) -> list[Event]:
        """One fact, logged at `ts` (epoch ms); returns the events now complete."""
        if fact.kind == "elected":
            return self._elected(fact, ts)
        if not self._active(fact):
            self.counts.inactive += 1
            return []
        if fact.kind == KNOWN or fact.kind == "resigned":
            if fact.kind == "resigned":
                self.resigned = True
                return self._flush()
            return []
        handler = getattr(self, f"_on_{fact.kind}")
        return handler(fact, ts) or []

    def finish(self) -> list[Event]:
        return self._flush()

    def possibly_superseded(self) -> list[TP]:
        """Partitions whose last logged state has a leader and leaves out a replica on a
        live broker: the leader's AlterPartition that adds it back when it catches up is
        logged at DEBUG only, so the znode may hold a later state than the last `observed`
        (the import's documented limit)."""
        return sorted(
            tp
            for tp, state in self.states.items()
            if state.leader >= 0
            and any(b in self.live and b not in state.isr for b in self.replicas.get(tp, ()))
        )

    def _active(self, fact: Fact) -> bool:
        if fact.controller < 0:  # a broker-side line: not the controller's
            return fact.kind == KNOWN
        if self.controller is None and not self.resigned:
            # the log begins mid-life: the first controller seen is taken as the active one
            self.controller, self.epoch = fact.controller, fact.epoch
        if self.resigned or fact.controller != self.controller:
            return False
        if fact.epoch is not None and self.epoch is None:
            self.epoch = fact.epoch
        return fact.epoch is None or fact.epoch == self.epoch

    # ------------------------------------------------------------ controller events

    def _elected(self, fact: Fact, ts: int) -> list[Event]:
        assert fact.epoch is not None
        if self.epoch is not None and fact.epoch <= self.epoch:
            self.counts.inactive += 1  # a stale election line from a slower broker's log
            return []
        out = self._flush()
        self.controller, self.epoch, self.resigned, self.n = fact.controller, fact.epoch, False, 0
        event = {"type": "controller_failover", "controller": fact.controller}
        event["controller_epoch"] = fact.epoch
        self._block = _Block(ts, [event], kind="controller_failover", main=0)
        return out

    def _on_active_brokers(self, fact: Fact, ts: int) -> None:
        block = self._block
        if block is None or block.kind != "controller_failover":
            return
        now = set(fact.brokers)
        for broker in sorted(now - set(self.live)):
            block.before.append({"type": "broker_startup", "broker": broker})
            self.live[broker] = None
        if failed := sorted(set(self.live) - now):
            block.events[0]["failed_brokers"] = failed
            for broker in failed:
                del self.live[broker]

    def _on_broker_epochs(self, fact: Fact, ts: int) -> None:
        epochs: dict[int, int] = fact.value  # type: ignore[assignment]
        self.epochs.update(epochs)

    def _on_topics_to_delete(self, fact: Fact, ts: int) -> None:
        block = self._block
        topics: tuple[str, ...] = fact.value  # type: ignore[assignment]
        if block is None or block.kind != "controller_failover":
            return
        for topic in topics:
            if topic not in self.deleting:
                self.deleting.add(topic)
                block.events.append({"type": "topic_deletion", "topic": topic})

    def _on_broker_change(self, fact: Fact, ts: int) -> list[Event]:
        added, deleted, bounced = cast("tuple[Brokers, Brokers, Brokers]", fact.value)
        out = self._open(ts, "broker_change")
        block = self._block
        assert block is not None
        for broker in fact.brokers:  # live brokers never seen: registered before the log
            if broker not in self.live and broker not in added:
                block.before.append({"type": "broker_startup", "broker": broker})
                self.live[broker] = None
        for kind, brokers in (
            ("broker_startup", added),
            ("broker_startup", bounced),
            ("broker_failure", deleted),
        ):
            if brokers:
                event: Event = {"type": kind}
                event.update(
                    {"broker": brokers[0]} if len(brokers) == 1 else {"brokers": list(brokers)}
                )
                block.events.append(event)
        for broker in added:
            self.live[broker] = None
        for broker in deleted:
            self.live.pop(broker, None)
        block.removed |= set(deleted) | set(bounced)
        return out

    def _on_controlled_shutdown(self, fact: Fact, ts: int) -> list[Event]:
        out = self._open(ts, "controlled_shutdown")
        broker = fact.brokers[0]
        event: Event = {"type": "controlled_shutdown", "broker": broker}
        if (epoch := self.epochs.get(broker)) is not None:
            event["broker_epoch"] = epoch
        assert self._block is not None
        self._block.events.append(event)
        self._block.removed.add(broker)
        return out

    def _on_topic_change(self, fact: Fact, ts: int) -> list[Event]:
        new_topics, assigned = cast("tuple[tuple[str, ...], Assigned]", fact.value)
        out = self._open(ts, "topic_change", by_topic=True)
        for topic in new_topics:
            assignment = self._assign(topic, assigned)
            if assignment:
                event = {"type": "topic_creation", "topic": topic, "assignment": assignment}
                self._block.events.append(event)  # type: ignore[union-attr]
        return out

    def _on_new_partitions(self, fact: Fact, ts: int) -> list[Event]:
        assigned = cast(Assigned, fact.value)
        out = self._open(ts, "new_partitions", by_topic=True)
        for topic in sorted({t for t, _ in assigned}):
            assignment = self._assign(topic, assigned)
            event = {"type": "partition_creation", "topic": topic, "assignment": assignment}
            self._block.events.append(event)  # type: ignore[union-attr]
        return out

    def _assign(self, topic: str, assigned: Assigned) -> dict[str, list[int]]:
        out = {}
        for (t, p), (replicas, _) in sorted(assigned.items()):
            if t == topic:
                self.replicas[t, p] = replicas
                out[str(p)] = list(replicas)
        return out

    def _on_deletion_start(self, fact: Fact, ts: int) -> list[Event]:
        out = self._open(ts, "topic_deletion", by_topic=True)
        for topic in cast("tuple[str, ...]", fact.value):
            self.deleting.add(topic)
            self._block.events.append({"type": "topic_deletion", "topic": topic})  # type: ignore[union-attr]
        return out

    def _on_deletion_done(self, fact: Fact, ts: int) -> list[Event]:
        topic = fact.topic
        assert topic is not None
        out = self._open(ts, "deletion_done")
        block = self._block
        assert block is not None
        # The brokers' StopReplica(delete) answers are not logged at INFO; the deletion
        # completed, so every live replica answered with no error (as `kcsim shadow` says).
        for tp in sorted(tp for tp in self.replicas if tp[0] == topic):
            for broker in self.replicas.pop(tp):
                if broker in self.live:
                    block.events.append(
                        {
                            "type": "stop_replica_response",
                            "topic": topic,
                            "partition": tp[1],
                            "broker": broker,
                            "error": None,
                        }
                    )
            self.states.pop(tp, None)
        self.deleting.discard(topic)
        block.deleted_topic = topic
        return out

    def _on_election(self, fact: Fact, ts: int) -> list[Event]:
        election, partitions, trigger = cast("tuple[str, tuple[TP, ...], str]", fact.value)
        if not partitions:
            return []  # the failover's resumed elections, none pending
        block = self._block
        if (
            trigger == "AutoTriggered"
            and block is not None
            and block.kind == "auto_rebalance_check"
        ):
            return []
        out = self._open(ts, "leader_election")
        event = {
            "type": "leader_election",
            "election": election,
            "partitions": [{"topic": t, "partition": p} for t, p in partitions],
        }
        self._block.events.append(event)  # type: ignore[union-attr]
        return out

    def _on_auto_rebalance(self, fact: Fact, ts: int) -> list[Event]:
        out = self._open(ts, "auto_rebalance_check")
        self._block.events.append({"type": "auto_rebalance_check"})  # type: ignore[union-attr]
        return out

    def _on_unclean_config(self, fact: Fact, ts: int) -> list[Event]:
        out = self._open(ts, "topic_config_change")
        configs = {"unclean.leader.election.enable": "true"}
        event = {"type": "topic_config_change", "topic": fact.topic, "configs": configs}
        self._block.events.append(event)  # type: ignore[union-attr]
        return out

    def _on_assignment_updated(self, fact: Fact, ts: int) -> list[Event]:
        tp = (fact.topic, fact.partition)
        replicas, adding, removing = cast("tuple[Brokers, Brokers, Brokers]", fact.value)
        if tp in self.completing and not (adding or removing):
            # the controller's rewrite once the targets caught up: part of that isr_change
            self.replicas[tp] = replicas
            self.completing.discard(tp)
            self.reassigning.pop(tp, None)
            return []
        out = self._flush()  # the previous event observed the replicas before this update
        self.replicas[tp] = replicas  # type: ignore[index]
        if adding or removing:
            target = tuple(b for b in replicas if b not in removing)
            if self.reassigning.get(tp) == target:  # type: ignore[arg-type]
                return out
            self.reassigning[tp] = target  # type: ignore[index]
            return out + self._reassignment(ts, tp, list(target))  # type: ignore[arg-type]
        if self.reassigning.pop(tp, None) is not None:  # type: ignore[arg-type]
            return out + self._reassignment(ts, tp, None)  # type: ignore[arg-type]  # cancelled
        return out + self._reassignment(ts, tp, list(replicas))  # type: ignore[arg-type]

    def _reassignment(self, ts: int, tp: TP, replicas: list[int] | None) -> list[Event]:
        out = self._open(ts, "partition_reassignment")
        event = {"type": "partition_reassignment", "topic": tp[0], "partition": tp[1]}
        event["replicas"] = replicas
        self._block.events.append(event)  # type: ignore[union-attr]
        return out

    def _on_leader_epoch_bump(self, fact: Fact, ts: int) -> None:
        tp = (fact.topic, fact.partition)
        leader_epoch, version = cast("tuple[int, int | None]", fact.value)
        old = self.states.get(tp)  # type: ignore[arg-type]
        if old is None:
            return
        if version is None and old.partition_epoch is not None:
            version = old.partition_epoch + 1
        self.states[tp] = old._replace(  # type: ignore[index]
            leader_epoch=leader_epoch,
            partition_epoch=version,
            # (None, as the state then holds, while no line has named the epoch yet)
            controller_epoch=self.epoch,  # type: ignore[arg-type]
        )
        self._write(tp)  # type: ignore[arg-type]

    def _on_caught_up(self, fact: Fact, ts: int) -> list[Event]:
        tp: TP = (fact.topic, fact.partition)  # type: ignore[assignment]
        out = self._open(ts, "isr_change")
        old = self.states.get(tp)
        self.completing.add(tp)
        if old is None:
            return out
        isr = old.isr + tuple(b for b in fact.brokers if b not in old.isr)
        self._block.events.append(self._isr_change(tp, old, isr))  # type: ignore[union-attr]
        version = None if old.partition_epoch is None else old.partition_epoch + 1
        self.states[tp] = old._replace(isr=isr, partition_epoch=version)
        self._write(tp)
        return out

    # ------------------------------------------------------------ partition states

    def _on_new_partition(self, fact: Fact, ts: int) -> None:
        self.replicas[fact.topic, fact.partition] = fact.value  # type: ignore[index,assignment]

    def _on_state(self, fact: Fact, ts: int) -> None:
        tp: TP = (fact.topic, fact.partition)  # type: ignore[assignment]
        new: State = fact.value  # type: ignore[assignment]
        if self._block is None:
            self._block = _Block(ts, kind="none")
        block = self._block
        block.removed |= set(fact.brokers)
        old = self.states.get(tp)
        if old is None and tp not in self.replicas:
            self._first_sight(block, tp, new, fact.brokers)
        elif (
            old is not None
            and tp not in block.writes  # one handler's own writes follow each other
            and old.partition_epoch is not None
            and new.partition_epoch is not None
            and new.partition_epoch > old.partition_epoch + 1
        ):
            # writes the log does not show: a leader's AlterPartition (logged at DEBUG)
            kept = (set(new.isr) | block.removed) & set(self.replicas.get(tp, new.isr))
            isr = old.isr + tuple(sorted(b for b in kept if b not in old.isr))
            block.before.append(self._isr_change(tp, old, isr))
            self.counts.inferred_isr_changes += 1
        if old == new:
            return  # logged again, not written again (the znode is unchanged)
        self.states[tp] = new
        self._write(tp)

    def _first_sight(self, block: _Block, tp: TP, state: State, removed: Iterable[int]) -> None:
        replicas = state.isr + tuple(b for b in removed if b not in state.isr)
        if state.leader >= 0 and state.leader not in replicas:
            replicas = (state.leader, *replicas)
        self.replicas[tp] = replicas
        known_topic = any(t == tp[0] for t, _ in self.states)
        event: Event = {
            "type": "partition_creation" if known_topic else "topic_creation",
            "topic": tp[0],
            "assignment": {str(tp[1]): list(replicas)},
            "state": {str(tp[1]): state_field(state)},
        }
        block.before.append(event)

    def _isr_change(self, tp: TP, base: State, isr: tuple[int, ...]) -> Event:
        event: Event = {
            "type": "isr_change",
            "topic": tp[0],
            "partition": tp[1],
            "isr": list(isr),
            "leader_epoch": base.leader_epoch,
        }
        if base.partition_epoch is not None:
            event["partition_epoch"] = base.partition_epoch
        return event

    def _write(self, tp: TP) -> None:
        if self._block is None:
            self._block = _Block(0, kind="none")
        self._block.writes[tp] = None

    # ------------------------------------------------------------ output

    def _open(self, ts: int, kind: str, *, by_topic: bool = False) -> list[Event]:
        out = self._flush()
        self._block = _Block(ts, kind=kind, by_topic=by_topic)
        return out

    def _flush(self) -> list[Event]:
        block, self._block = self._block, None
        if block is None:
            return []
        if not block.events and block.writes and block.kind == "none":
            self.counts.unattributed += len(block.writes)
        if block.events:
            writes = sorted(tp for tp in block.writes if tp in self.states)
            if block.by_topic:
                for event in block.events:
                    rows = [self._observed(tp) for tp in writes if tp[0] == event.get("topic")]
                    event["observed"] = {"partitions": rows}
            else:
                observed: dict[str, Any] = {"partitions": [self._observed(tp) for tp in writes]}
                if block.deleted_topic is not None:
                    observed["deleted_topics"] = [block.deleted_topic]
                block.events[block.main]["observed"] = observed
        return [self._stamp(event, block.ts) for event in block.before + block.events]

    def _stamp(self, event: Event, ts: int) -> Event:
        self.seq += 1
        head = {
            "type": event["type"],
            "cluster": self.cluster,
            "event_id": f"{self.cluster}:log:{self.epoch or 0}:{self.n}",
            "seq": self.seq,
            "ts": datetime.fromtimestamp(ts / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3],
        }
        self.n += 1
        return head | event

    def _observed(self, tp: TP) -> dict[str, Any]:
        row: dict[str, Any] = {"topic": tp[0], "partition": tp[1]}
        row.update(state_field(self.states[tp]))
        if tp in self.replicas:
            row["replicas"] = list(self.replicas[tp])
        return row
