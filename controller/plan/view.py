"""One cluster as the front door's state rows show it, with the vital signs the plan
measures kept per partition: a step costs the partitions its events changed.

Built from the state tables (`partition_state`, `brokers`, `topics`) and kept current
from each batch's upserts and deletes, so it reads the same for any engine behind
`Simulator`. A partition is

* offline: no leader (`leader` -1);
* under min ISR: led, with fewer ISR members than its topic's `min.insync.replicas` (the
  cluster default when the topic sets none): a producer with `acks=all` is refused;
* under-replicated: fewer ISR members than replicas;
* not preferred: led by another broker than its first replica.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from controller.memory import cyclic_gc_paused
from controller.simulator import PartitionValues

Key = tuple[str, int]  # topic, partition
Row = Mapping[str, Any]
# a changed partition as the front door gives it without a row (`BatchOutput.
# partition_changes`): its cluster, key and PartitionView's values (None: gone)
Change = tuple[str, Key, PartitionValues | None]

MIN_ISR_KEY = "min.insync.replicas"
LIVE = "live"
DEAD = "dead"
FENCED = "fenced"  # kraft: registered, not running


def key_name(key: Key) -> str:
    """A partition as operators write it: `topic-partition`."""
    return f"{key[0]}-{key[1]}"


def names(keys: Iterable[Key]) -> list[str]:
    return [key_name(k) for k in sorted(keys)]


class PartitionView(NamedTuple):
    """(A named tuple: one is built per partition per batch that changes it.)"""

    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class BrokerView:
    status: str  # live | shutting_down | dead (zk); live | fenced | shutting_down (kraft)
    rack: str | None


def _view(row: Row) -> PartitionView:
    # (tuple.__new__: a named tuple's own constructor is a Python function, a frame per
    # partition every batch changes)
    return _new_tuple(
        PartitionView,
        (
            row["leader"],
            tuple(row["isr"] or ()),
            tuple(row["replicas"] or ()),
            tuple(row.get("adding_replicas") or ()),
            tuple(row.get("removing_replicas") or ()),
        ),
    )


_new_tuple = tuple.__new__


def topic_min_isr(configs: Mapping[str, Any] | None, default: int) -> int:
    """A topic's `min.insync.replicas`: its own config (validated when the topic took it),
    else the cluster default."""
    value = (configs or {}).get(MIN_ISR_KEY)
    if value is None:
        return default
    try:
        return int(str(value).strip())
    except ValueError:
        return default


class ClusterView:
    """The partitions, brokers and topic minimums of one cluster, and the sets of
    partitions in each condition."""

    __slots__ = (
        "brokers",
        "cluster",
        "default_min_isr",
        "deleting",
        "hosted",
        "min_isr",
        "not_preferred",
        "offline",
        "partitions",
        "under_min_isr",
        "under_replicated",
    )

    def __init__(self, cluster: str, default_min_isr: int) -> None:
        self.cluster = cluster
        self.default_min_isr = default_min_isr
        self.partitions: dict[Key, PartitionView] = {}
        self.brokers: dict[int, BrokerView] = {}
        self.min_isr: dict[str, int] = {}
        self.deleting: set[str] = set()  # topics queued for deletion (zk), not yet gone
        self.hosted: dict[int, set[Key]] = {}  # per broker, the partitions it has a replica of
        self.offline: set[Key] = set()
        self.under_min_isr: set[Key] = set()
        self.under_replicated: set[Key] = set()
        self.not_preferred: set[Key] = set()

    @classmethod
    def of_tables(
        cls, cluster: str, tables: Mapping[str, Iterable[Row]], default_min_isr: int
    ) -> ClusterView:
        with cyclic_gc_paused():  # (a tuple per partition, no cycles: 1/3 of the build)
            return cls._of_tables(cluster, tables, default_min_isr)

    @classmethod
    def _of_tables(
        cls, cluster: str, tables: Mapping[str, Iterable[Row]], default_min_isr: int
    ) -> ClusterView:
        view = cls(cluster, default_min_isr)
        for row in tables.get("topics", ()):
            if row["cluster"] == cluster:
                view.min_isr[row["topic"]] = topic_min_isr(row["configs"], default_min_isr)
                if row.get("deletion"):
                    view.deleting.add(row["topic"])
        for row in tables.get("brokers", ()):
            if row["cluster"] == cluster:
                view.brokers[row["broker"]] = BrokerView(row["status"], row.get("rack"))
        for row in tables.get("partition_state", ()):
            if row["cluster"] == cluster:
                view._set((row["topic"], row["partition"]), _view(row))
        return view

    # ---- reading -------------------------------------------------------------------------

    def live_brokers(self) -> set[int]:
        return {b for b, info in self.brokers.items() if info.status == LIVE}

    def registered_brokers(self) -> set[int]:
        """Brokers that are running: live or shutting down."""
        return {b for b, info in self.brokers.items() if info.status not in (DEAD, FENCED)}

    def known_brokers(self) -> set[int]:
        """Brokers the state names: registered ever, or holding a replica."""
        known = set(self.brokers)
        for view in self.partitions.values():
            known.update(view.replicas)
        return known

    def min_isr_of(self, key: Key) -> int:
        return self.min_isr.get(key[0], self.default_min_isr)

    def leaders_per_broker(self) -> dict[int, int]:
        counts = Counter(v.leader for v in self.partitions.values() if v.leader >= 0)
        return {b: counts.get(b, 0) for b in sorted(self.known_brokers() | set(counts))}

    def replicas_per_broker(self) -> dict[int, int]:
        return {b: len(keys) for b, keys in self.hosted.items()}

    # ---- changing --------------------------------------------------------------------------

    def apply(
        self,
        upserts: Mapping[str, Sequence[Row]],
        deletes: Mapping[str, Sequence[Row]],
        partition_changes: Iterable[Change] = (),
    ) -> tuple[list[Key], int]:
        """A batch's state-table changes (and its `partition_changes`, a zk cluster's
        partitions given without rows): the partitions changed, and how many of them
        changed leader (to another broker, or to none, or from none)."""
        cluster = self.cluster
        for row in upserts.get("brokers", ()):
            if row["cluster"] == cluster:
                self.brokers[row["broker"]] = BrokerView(row["status"], row.get("rack"))
        for row in deletes.get("brokers", ()):
            if row["cluster"] == cluster:
                self.brokers.pop(row["broker"], None)
        recount: list[str] = []
        for row in upserts.get("topics", ()):
            if row["cluster"] == cluster:
                if row.get("deletion"):
                    self.deleting.add(row["topic"])
                else:
                    self.deleting.discard(row["topic"])
                value = topic_min_isr(row["configs"], self.default_min_isr)
                if self.min_isr.get(row["topic"]) != value:
                    self.min_isr[row["topic"]] = value
                    recount.append(row["topic"])
        for row in deletes.get("topics", ()):
            if row["cluster"] == cluster:
                self.min_isr.pop(row["topic"], None)
                self.deleting.discard(row["topic"])
        changed: list[Key] = []
        moves = 0
        partitions = self.partitions
        for row in upserts.get("partition_state", ()):
            if row["cluster"] != cluster:
                continue
            key = (row["topic"], row["partition"])
            before = partitions.get(key)
            view = _view(row)
            changed.append(key)
            if before is not None:
                if before == view:  # a row whose event id alone changed: nothing to redo
                    continue
                if before.leader != view.leader:
                    moves += 1
            self._put(key, view, before)
        for change_cluster, key, values in partition_changes:
            if change_cluster != cluster:
                continue
            if values is None:
                self._remove(key, changed)
                continue
            before = partitions.get(key)
            changed.append(key)
            if before is not None:
                if before == values:  # only its event id changed: nothing to redo
                    continue
                if before.leader != values[0]:
                    moves += 1
            self._put(key, _new_tuple(PartitionView, values), before)
        for row in deletes.get("partition_state", ()):
            if row["cluster"] != cluster:
                continue
            self._remove((row["topic"], row["partition"]), changed)
        if recount:
            topics = set(recount)
            for key, view in partitions.items():
                if key[0] in topics:
                    self._set(key, view)
                    changed.append(key)
        return changed, moves

    def _remove(self, key: Key, changed: list[Key]) -> None:
        """A partition gone (its topic deleted)."""
        gone = self.partitions.pop(key, None)
        if gone is not None:
            for flagged in self._flag_sets():
                flagged.discard(key)
            for broker in gone.replicas:
                self.hosted.get(broker, set()).discard(key)
            changed.append(key)

    def _flag_sets(self) -> tuple[set[Key], ...]:
        return (self.offline, self.under_min_isr, self.under_replicated, self.not_preferred)

    def _set(self, key: Key, view: PartitionView) -> None:
        self._put(key, view, self.partitions.get(key))

    def _put(self, key: Key, view: PartitionView, before: PartitionView | None) -> None:
        """`_set`, `before` the partition's view now (None: none)."""
        if before is None or before.replicas != view.replicas:
            hosted = self.hosted
            if before is not None:
                for broker in before.replicas:
                    hosted[broker].discard(key)
            for broker in view.replicas:
                hosted.setdefault(broker, set()).add(key)
        self.partitions[key] = view
        # (the flags inline: this runs for every partition every batch changes)
        leader, isr, replicas = view.leader, len(view.isr), view.replicas
        if leader >= 0:
            self.offline.discard(key)
            if isr < self.min_isr.get(key[0], self.default_min_isr):
                self.under_min_isr.add(key)
            else:
                self.under_min_isr.discard(key)
            if not replicas or leader != replicas[0]:
                self.not_preferred.add(key)
            else:
                self.not_preferred.discard(key)
        else:
            self.offline.add(key)
            self.under_min_isr.discard(key)
            self.not_preferred.discard(key)
        if isr < len(replicas):
            self.under_replicated.add(key)
        else:
            self.under_replicated.discard(key)
