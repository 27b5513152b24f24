"""A cluster's vital signs (CONTRACT §2 `health`), kept incrementally, and the invariant
checks of kcsim's own state (`violations`, source `simulated`) that need the same memory.

After each event the tracker takes the partitions and topics the event changed
(`ControllerContext.event_partitions` / `event_topics`), subtracts each touched
partition's old contribution from the counters and adds its new one, so an event costs
the partitions it touched. Two figures are not per partition:

* `max_broker_imbalance` (SPEC §12.3): per broker B, the partitions whose preferred
  replica is B and, of those with leadership, the ones not led by B, both counts kept
  per broker; the maximum over brokers is recomputed (O(brokers), far fewer than
  partitions) only after the broker holding it fell (`HealthCounts`, which the KRaft
  runner keeps too).
* `live_brokers`: the size of the context's live set, O(1).

A topic-level change (created, deleted, configs changed, queued for deletion or no longer)
re-counts that topic's partitions. A controller failover replaces the context: `resync`
then counts every partition once (O(cluster), as the failover's own reload is).
A restarted job builds the tracker from the state tables, and only `unclean_elections`
(a count over history) comes from the last `health` row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, NamedTuple, Protocol, cast

from controller import invariants
from controller.events import ObservedPartition
from controller.invariants import SIMULATED, SeenEpochs, Violation
from controller.model import PartitionState, TopicPartition
from controller.topic_configs import TOPIC_CONFIGS, TopicConfigError, parse_value
from controller.zk.context import ControllerContext, Partition

MIN_ISR_KEY = "min.insync.replicas"
DEFAULT_MIN_ISR = 1  # Kafka's default for the topic config
_MIN_ISR_CONFIG = TOPIC_CONFIGS[MIN_ISR_KEY]
_ONLINE = PartitionState.ONLINE


class Vitals(NamedTuple):
    """One partition's part of the counters, and the leader and epochs its next state is
    checked against (invariants.Epochs)."""

    leader: int  # -1: none (also when there is no leadership yet)
    leader_epoch: int  # -1: no leadership yet
    partition_epoch: int | None
    controller_epoch: int | None  # the stored one (partition_state's)
    offline: int  # each flag 0 or 1
    under_replicated: int
    at_min_isr: int
    not_preferred: int
    preferred: int  # the broker whose §12.3 ratio counts it; -1: none
    preferred_not_leading: int  # counted in that ratio's numerator


# built from a tuple in C (a NamedTuple's own constructor is a Python function): this
# runs for every partition an event touches
_vitals = cast("Callable[[tuple[object, ...]], Vitals]", partial(tuple.__new__, Vitals))


class Counted(Protocol):
    """A partition's part of the counters, as each engine's vitals give it."""

    @property
    def offline(self) -> int: ...
    @property
    def under_replicated(self) -> int: ...
    @property
    def at_min_isr(self) -> int: ...
    @property
    def not_preferred(self) -> int: ...
    @property
    def preferred(self) -> int: ...  # the broker whose §12.3 ratio counts it; -1: none
    @property
    def preferred_not_leading(self) -> int: ...


class HealthCounts:
    """The `health` counters of one cluster, kept partition by partition under either
    engine: a partition's part is added when it is counted and taken away before it
    changes, so an event costs the partitions it touched.

    `max_broker_imbalance` is kept exact without a walk over the brokers per event: a
    broker's ratio that rises to the maximum becomes it, and only the holder's falling
    marks it stale, to be recomputed over the brokers (O(brokers)) when next read."""

    __slots__ = (
        "_holder",
        "_max_imbalance",
        "_preferred_not_leading",
        "_preferred_total",
        "_stale",
        "at_min_isr",
        "not_preferred",
        "offline",
        "under_replicated",
    )

    def __init__(self) -> None:
        self.offline = self.under_replicated = self.at_min_isr = self.not_preferred = 0
        self._preferred_total: dict[int, int] = {}  # per broker: partitions it is preferred for
        self._preferred_not_leading: dict[int, int] = {}  # of those, led by another
        self._max_imbalance = 0.0
        self._holder: int | None = None  # a broker whose ratio is the maximum
        self._stale = False

    def count(self, vitals: Counted, sign: int) -> None:
        """Add (sign 1) or take away (-1) one partition's part."""
        self.offline += sign * vitals.offline
        self.under_replicated += sign * vitals.under_replicated
        self.at_min_isr += sign * vitals.at_min_isr
        self.not_preferred += sign * vitals.not_preferred
        self._count_preferred(vitals, sign)

    def move(self, old: Counted, new: Counted) -> None:
        """A counted partition's part changed from `old` to `new`."""
        self.offline += new.offline - old.offline
        self.under_replicated += new.under_replicated - old.under_replicated
        self.at_min_isr += new.at_min_isr - old.at_min_isr
        self.not_preferred += new.not_preferred - old.not_preferred
        if old.preferred != new.preferred or old.preferred_not_leading != new.preferred_not_leading:
            self._count_preferred(old, -1)
            self._count_preferred(new, 1)

    def _count_preferred(self, vitals: Counted, sign: int) -> None:
        broker = vitals.preferred
        if broker < 0:
            return
        total = self._preferred_total
        total[broker] = total.get(broker, 0) + sign
        if not total[broker]:
            del total[broker]
        if vitals.preferred_not_leading:
            others = self._preferred_not_leading
            others[broker] = others.get(broker, 0) + sign
            if not others[broker]:
                del others[broker]
        if self._stale:
            return
        count = total.get(broker, 0)
        ratio = self._preferred_not_leading.get(broker, 0) / count if count else 0.0
        if ratio >= self._max_imbalance and ratio > 0:
            self._max_imbalance, self._holder = ratio, broker
        elif broker == self._holder:
            self._stale = True

    @property
    def max_broker_imbalance(self) -> float:
        """SPEC §12.3: the largest share, over brokers, of the partitions preferring a
        broker that another broker leads."""
        if self._stale:
            total = self._preferred_total
            best, holder = 0.0, None
            for broker, count in self._preferred_not_leading.items():
                ratio = count / total[broker]
                if ratio > best:
                    best, holder = ratio, broker
            self._max_imbalance, self._holder = best, holder
            self._stale = False
        return self._max_imbalance


class HealthTracker:
    __slots__ = (
        "_context",
        "_min_isr",
        "_observed",
        "_partitions",
        "_queued",
        "_shared",
        "_static_min_isr",
        "counts",
        "unclean_elections",
    )

    def __init__(
        self, context: ControllerContext, unclean_elections: int = 0, default_min_isr: int = 1
    ) -> None:
        """`default_min_isr`: the `min.insync.replicas` setting, the cluster default until
        a dynamic one (`context.cluster_configs`) is set."""
        self.unclean_elections = unclean_elections
        self._static_min_isr = default_min_isr
        # observed partitions' last leader and epochs (invariants on `observed` states)
        self._observed: dict[TopicPartition, SeenEpochs] = {}
        self._load(context)

    def _load(self, context: ControllerContext) -> None:
        self._context = context  # the context the counters are of
        self._partitions = 0  # the partitions counted (those with vitals)
        # one Vitals object per distinct value: most partitions share theirs with many
        # others (a leader, its epochs and flags), so the cluster holds a few thousand
        # tuples, not one per partition (~130 bytes each); cleared when it holds more than
        # a quarter as many values as partitions, so stale ones cannot pile up
        self._shared: dict[Vitals, Vitals] = {}
        self._queued = frozenset(context.topics_to_be_deleted)
        default = self._default_min_isr(context)
        self._min_isr = {
            name: _min_isr(info.configs, default) for name, info in context.topics.items()
        }
        self.counts = HealthCounts()
        # counted as if every partition had just been touched (the loaded state was
        # checked when it was made)
        records = context.all_partitions()
        for record in records:
            record.vitals = None
        self._track(context, records)

    # ---- per event -----------------------------------------------------------------------

    def update(self, context: ControllerContext) -> tuple[int, list[Violation]]:
        """Take the event's changes (clearing the context's event sets): the number of
        partitions whose leader changed, and the invariants kcsim's state now breaks."""
        touched = context.event_partitions
        topics = context.event_topics
        queued = context.topics_to_be_deleted
        if (queued or self._queued) and queued != self._queued:
            topics = topics | (queued ^ self._queued)
            self._queued = frozenset(queued)
        if topics:
            touched = dict(touched)
            default = self._default_min_isr(context)
            for name in topics:
                info = context.topics.get(name)
                if info is None:
                    self._min_isr.pop(name, None)
                else:
                    self._min_isr[name] = _min_isr(info.configs, default)
                    touched.update((record.tp, record) for record in info.partitions.values())
        # (first: a topic deleted and created again in the event starts over)
        self._forget(context.event_removed)
        context.event_removed.clear()
        result = self._track(context, touched.values())
        context.event_partitions.clear()
        if topics:
            context.event_topics.clear()
        return result

    def _track(
        self, context: ControllerContext, touched: Iterable[Partition]
    ) -> tuple[int, list[Violation]]:
        """Count each touched partition's new vitals instead of its old ones and check its
        state: the number whose leader changed, and the invariants broken."""
        leader_changes = 0
        found: list[Violation] = []
        self._context = context
        queued = self._queued
        min_isr = self._min_isr
        shared = self._shared
        if len(shared) > self._partitions // 4 + 1024:
            shared.clear()
        for record in touched:
            tp = record.tp
            old: Vitals | None = record.vitals
            # the partition's vitals, computed here rather than in a method: this loop
            # runs for every partition every event touches
            replicas = record.assignment.replicas
            deleting = tp.topic in queued
            preferred = replicas[0] if replicas and not deleting else -1
            leadership = record.leadership
            online = record.state is _ONLINE
            if leadership is None:
                new = _vitals((-1, -1, None, None, 0 if deleting else 1, 0, 0, 0, preferred, 0))
                if online:  # online without a leader and ISR
                    invariants.check_partition(
                        SIMULATED, tp.topic, tp.partition, None, -1, -1, None, None, (),
                        replicas, True, found,
                    )  # fmt: skip
            else:
                leader = leadership.leader
                isr = leadership.isr
                size = len(isr)
                partition_epoch = leadership.partition_epoch
                zk_epoch = leadership.zk_controller_epoch  # stored_controller_epoch, inline
                controller_epoch = leadership.controller_epoch if zk_epoch is None else zk_epoch
                new = _vitals(
                    (
                        leader,
                        leadership.leader_epoch,
                        partition_epoch,
                        controller_epoch,
                        # as Kafka's OfflinePartitionsCount: topics queued for deletion
                        # left out
                        0 if deleting or (leader >= 0 and online) else 1,
                        1 if size < len(replicas) else 0,
                        1 if size <= min_isr.get(tp.topic, self._static_min_isr) else 0,
                        1 if leader >= 0 and replicas and leader != replicas[0] else 0,
                        preferred,
                        1 if preferred >= 0 and leader != preferred else 0,
                    )
                )
                # the checks in full only when a cheap test says one may fail
                if not (
                    (leader < 0 or leader in isr)
                    and (size or not online)
                    and (isr == replicas or set(isr).issubset(replicas))
                    and (
                        old is None
                        or (
                            (
                                new.leader_epoch > old.leader_epoch
                                or (new.leader_epoch == old.leader_epoch and leader == old.leader)
                            )
                            and (old.partition_epoch or 0) <= partition_epoch
                            and (old.controller_epoch or 0) <= controller_epoch
                        )
                    )
                ):
                    invariants.check_partition(
                        SIMULATED, tp.topic, tp.partition, old, leader, new.leader_epoch,
                        partition_epoch, controller_epoch, isr, replicas, online, found,
                    )  # fmt: skip
            if old is None:
                new = shared.setdefault(new, new)
                record.vitals = new
                self._partitions += 1
                self.counts.count(new, 1)
                leader_changes += new.leader >= 0
            elif old != new:
                new = shared.setdefault(new, new)
                record.vitals = new
                self.counts.move(old, new)
                leader_changes += old.leader != new.leader
        return leader_changes, found

    def _default_min_isr(self, context: ControllerContext) -> int:
        """The cluster's `min.insync.replicas`: its dynamic default, else the setting."""
        return _min_isr(context.cluster_configs, self._static_min_isr)

    def resync(self, context: ControllerContext) -> tuple[int, list[Violation]]:
        """After a failover replaced the context: every partition, old and new, and every
        topic, taken as changed."""
        self._min_isr.clear()
        # the old context's records keep the counted vitals: each new record takes its
        # partition's, and those of partitions the new context lacks are forgotten
        carried = {record.tp: record for record in self._context.all_partitions()}
        records = context.all_partitions()
        for record in records:
            old = carried.pop(record.tp, None)
            record.vitals = None if old is None else old.vitals
        self._forget(carried.values())
        context.event_partitions.update((record.tp, record) for record in records)
        context.event_topics.update(context.topics)
        return self.update(context)

    def _forget(self, records: Iterable[Partition]) -> None:
        """Take out of the counters the partitions of records no longer in the context (a
        re-created topic starts over)."""
        for record in records:
            old = record.vitals
            if old is not None:
                record.vitals = None
                self._partitions -= 1
                self.counts.count(old, -1)
                self._observed.pop(record.tp, None)

    # ---- observed states -----------------------------------------------------------------

    def check_observed(self, observed: Iterable[ObservedPartition]) -> list[Violation]:
        """The invariants on a real controller's partition states (an event's `observed`),
        each against that partition's previous observed state. ISR ⊆ replicas is checked
        only when the state gives its replicas; "online" is having a leader."""
        found: list[Violation] = []
        for entry in observed:
            tp = TopicPartition(entry.topic, entry.partition)
            invariants.check_partition(
                invariants.OBSERVED,
                entry.topic,
                entry.partition,
                self._observed.get(tp),
                entry.leader,
                entry.leader_epoch,
                entry.partition_epoch,
                entry.controller_epoch,
                entry.isr,
                entry.replicas,
                entry.leader >= 0,
                found,
            )
            self._observed[tp] = SeenEpochs(
                entry.leader, entry.leader_epoch, entry.partition_epoch, entry.controller_epoch
            )
        return found

    # ---- output --------------------------------------------------------------------------

    @property
    def partitions(self) -> int:
        return self._partitions

    @property
    def max_broker_imbalance(self) -> float:
        return self.counts.max_broker_imbalance

    def row(
        self,
        cluster: str,
        event_id: str,
        seq: int,
        ts: int | None,
        live_brokers: int,
        leader_changes: int,
        requests: int,
    ) -> dict[str, Any]:
        """The event's `health` row (the counters as they are after it)."""
        counts = self.counts
        return {
            "cluster": cluster,
            "event_id": event_id,
            "seq": seq,
            "ts": ts,
            "partitions": self._partitions,
            "offline": counts.offline,
            "under_replicated": counts.under_replicated,
            "at_min_isr": counts.at_min_isr,
            "not_preferred": counts.not_preferred,
            "max_broker_imbalance": counts.max_broker_imbalance,
            "live_brokers": live_brokers,
            "unclean_elections": self.unclean_elections,
            "leader_changes": leader_changes,
            "requests": requests,
            "elr_elections": 0,  # KRaft's alone
            "last_known_leader_elections": 0,
        }


def _min_isr(configs: dict[str, str], default: int = DEFAULT_MIN_ISR) -> int:
    """The topic's (or cluster's) `min.insync.replicas`, else `default` (values were
    validated when the topic took them)."""
    text = configs.get(MIN_ISR_KEY)
    if text is None:
        return default
    try:
        return cast(int, parse_value(_MIN_ISR_CONFIG, text))  # an INT config's value
    except TopicConfigError:
        return default
