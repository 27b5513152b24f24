"""The UpdateMetadata entry of each partition, built once and reused while unchanged.

Every broker startup sends the new broker an UpdateMetadata naming every partition with a
leader (SPEC §8.2): a rolling restart of a 100k-partition cluster names 10M entries, ~1% of
them changed since the last body. An entry is a function of the partition's leadership (a
frozen value, replaced on every change), its replica set, which of those replicas are
offline and whether its topic is queued for deletion. While the leadership and the replica
set are the same objects as when it was built and the rest are equal, the entry built then
is the entry now, so the same dict is handed out again. Request rows are never changed
once built, which makes the sharing safe; the replay writer reuses the JSON text of an
entry still at its place in the last long body, by identity
(`controller.replay.table_files.EntryTexts`).

The entry is held by the partition's record (`Partition.metadata_entry`), which the
context clears when the leadership or the replica set is replaced: finding it costs a read
of the record the caller holds, where a table of every partition's entry cost a cache miss
per lookup at 100k partitions (3.7% of a rolling restart), and an entry goes with its
record (a deleted topic's), so nothing needs pruning.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import Any

from controller.model import LEADER_DURING_DELETE, LeaderAndIsr, TopicPartition
from controller.zk.context import ControllerContext, Partition

Row = dict[str, Any]
Ints = tuple[int, ...]

# the tables of shared lists (one per distinct ISR, replica set and offline replicas) start
# afresh once they hold this many, so the values no entry holds any more (old ISRs, replica
# sets before a reassignment) do not pile up
MAX_SHARED_LISTS = 524_288

_TP = attrgetter("tp")
_TOPIC = attrgetter("topic")


class FullBody(list[Row]):
    """The entries of a body of every partition with a leader (`full_body`), with what
    changed since the body before it, for the replay writer, which keeps that body's
    texts: `since` is the `token` of that earlier body, and `changed` the places whose
    entry is another object than there (every other place holds the same object); `since`
    None: built afresh, compare it with any other body by identity. Never changed once
    made, like any request body."""

    __slots__ = ("changed", "since", "token")

    def __init__(
        self, entries: Iterable[Row], since: object | None = None, changed: list[int] | None = None
    ) -> None:
        super().__init__(entries)
        self.token = object()
        self.since = since
        self.changed = changed or []


@dataclass(slots=True)
class _Body:
    """The last body of every partition with a leader: its records (the context's list),
    their partitions, the entries, the live brokers then, and where each topic's run of
    records starts in those lists (`_Positions`)."""

    records: list[Partition]
    tps: list[TopicPartition]
    entries: list[Row]
    live: frozenset[int]
    positions: _Positions
    token: object  # that of the last FullBody made of `entries`


@dataclass(slots=True)
class _Positions:
    """Each partition's place in a body, found from its topic's: a body lists each topic's
    records with a leader in partition order, so in a topic whose partitions there are
    0..n-1 (nearly all) partition p is at the topic's start + p. Only the other topics'
    partitions are held one by one: a dict of every partition would cost ~80 MB at 1M."""

    runs: dict[str, tuple[int, int]]  # topic -> (first place, partitions), dense topics
    sparse: dict[TopicPartition, int]  # the other topics' partitions

    @classmethod
    def of(cls, tps: list[TopicPartition]) -> _Positions:
        runs: dict[str, tuple[int, int]] = {}
        sparse: dict[TopicPartition, int] = {}
        start = 0
        for topic, run in groupby(map(_TOPIC, tps)):
            length = len(list(run))
            end = start + length
            # partition numbers are distinct and sorted: 0 first and n-1 last is 0..n-1
            if tps[start].partition == 0 and tps[end - 1].partition == length - 1:
                runs[topic] = (start, length)
            else:
                sparse.update(zip(tps[start:end], range(start, end), strict=True))
            start = end
        return cls(runs, sparse)

    def get(self, tp: TopicPartition) -> int | None:
        """The partition's place in the body, None if it is not in it."""
        run = self.runs.get(tp.topic)
        if run is None:
            return self.sparse.get(tp)
        return run[0] + tp.partition if tp.partition < run[1] else None


class MetadataEntries:
    __slots__ = (
        "_body",
        "_lists",
        "_live",
        "_offline",
        "_replica_sets_of",
    )

    def __init__(self) -> None:
        # one list per distinct tuple of broker ids, shared by the entries holding it
        self._lists: dict[Ints, list[int]] = {}
        # each replica set's offline replicas, for the live brokers `_live`; on a change of
        # them only the replica sets holding a broker whose liveness changed are redone,
        # found through `_replica_sets_of` (broker -> the replica sets in `_offline` naming it)
        self._offline: dict[Ints, list[int]] = {}
        self._replica_sets_of: dict[int, list[Ints]] = {}
        self._live: frozenset[int] = frozenset()
        self._body: _Body | None = None

    def add_to(
        self,
        out: dict[TopicPartition, Row],
        records: Iterable[Partition],
        deleting: AbstractSet[str],
        live: frozenset[int],
    ) -> None:
        """Put each record's UpdateMetadata entry in `out` by partition (none for a record
        with no leader assigned yet). `deleting`: the topics queued for deletion; `live`:
        the context's live broker set, which is replaced, never changed, on a change."""
        if live is not self._live:
            self._sync_live(live)
        offline_of = self._offline
        # one loop, no call per record: a new broker's UpdateMetadata walks them all
        for record in records:
            leadership = record.leadership
            if leadership is None:
                continue
            replicas = record.assignment.replicas
            offline = offline_of.get(replicas)
            if offline is None:
                offline = self._offline_replicas(replicas)
            queued = bool(deleting) and record.tp.topic in deleting
            # (a topic queued for deletion: its entries are never kept)
            kept = None if queued else record.metadata_entry
            if kept is not None and kept["offline_replicas"] == offline:
                out[record.tp] = kept
            else:
                out[record.tp] = self._build(record, leadership, replicas, offline, queued)

    def add_one(
        self,
        out: dict[TopicPartition, Row],
        record: Partition,
        deleting: AbstractSet[str],
        live: frozenset[int],
    ) -> None:
        """add_to of one record, without the loop's setup (a LeaderAndIsr add does this
        for every partition it names)."""
        if record.leadership is None:
            return
        if deleting and record.tp.topic in deleting:
            self.add_to(out, (record,), deleting, live)
            return
        if live is not self._live:
            self._sync_live(live)
        out[record.tp] = self._entry(record)

    def full_body(self, context: ControllerContext) -> tuple[list[TopicPartition], FullBody]:
        """The partitions and entries (new lists, in order) of the body of every partition
        with a leader (context.records_with_leaders), as a new broker is sent: what add_to
        would put in an empty dict. While that list of records is the same object as for
        the previous such body, only the entries of partitions changed since
        (context.take_metadata_changes) or with a replica on a broker whose liveness
        changed since are redone; the rest are the previous body's.

        The body is kept whatever the cluster's size: its entries are those the caller is
        handed anyway, so keeping them until the next body costs about what building the
        next one afresh would (at 1M partitions ~0.5 GB each time), and the next costs only
        what changed."""
        records = context.records_with_leaders()
        deleting = context.topics_to_be_deleted
        live = context.live_broker_set()
        # no body is kept while a topic is queued for deletion (its entries change with no
        # change of its record): the changes since are logged only when one is
        keep = not deleting
        changes = context.take_metadata_changes(log_next=keep)
        if not keep:
            self._body = None
            out: dict[TopicPartition, Row] = {}
            self.add_to(out, records, deleting, live)
            return list(out), FullBody(out.values())
        body = self._body
        if body is None or changes is None or body.records is not records:
            self._body = None  # (the old one freed before the new one is built)
            self._sync_live(live)
            tps = list(map(_TP, records))
            entries = list(map(self._entry, records))
            made = FullBody(entries)
            self._body = _Body(records, tps, entries, live, _Positions.of(tps), made.token)
            return tps, made
        if live is not body.live:
            changes.update(*map(context.hosted_partitions, live ^ body.live))
            body.live = live
        self._sync_live(live)
        place = body.positions.get
        entries = body.entries  # the body's own: changed in place
        changed: list[int] = []
        for tp in changes:
            i = place(tp)
            if i is not None:
                entry = self._entry(records[i])
                if entry is not entries[i]:
                    entries[i] = entry
                    changed.append(i)
        made = FullBody(entries, body.token, changed)
        body.token = made.token
        return body.tps, made

    def _entry(self, record: Partition) -> Row:
        """The entry of a record with a leader, of a topic not queued for deletion."""
        leadership = record.leadership
        assert leadership is not None
        replicas = record.assignment.replicas
        offline = self._offline.get(replicas)
        if offline is None:
            offline = self._offline_replicas(replicas)
        # (the record's entry is of its leadership and replica set, or None: only the
        # offline replicas can have changed under it)
        kept = record.metadata_entry
        if kept is not None and kept["offline_replicas"] == offline:
            return kept
        return self._build(record, leadership, replicas, offline, False)

    def _sync_live(self, live: frozenset[int]) -> None:
        """Redo the offline lists of the replica sets naming a broker whose liveness
        changed since the last call."""
        if live is self._live:
            return
        changed = live ^ self._live
        self._live = live
        offline_of = self._offline
        for broker in changed:
            for replicas in self._replica_sets_of.get(broker, ()):
                offline_of[replicas] = self._list(tuple(r for r in replicas if r not in live))

    def _offline_replicas(self, replicas: Ints) -> list[int]:
        """The offline list of a replica set not yet in `_offline`, put there."""
        offline_of = self._offline
        if len(offline_of) > MAX_SHARED_LISTS:
            # replica sets no partition holds any more (reassigned) do not pile up
            offline_of.clear()
            self._replica_sets_of = {}
        live = self._live
        offline = offline_of[replicas] = self._list(tuple(r for r in replicas if r not in live))
        sets_of = self._replica_sets_of
        for broker in replicas:
            named = sets_of.get(broker)
            if named is None:
                sets_of[broker] = [replicas]
            else:
                named.append(replicas)
        return offline

    def _build(
        self,
        record: Partition,
        leadership: LeaderAndIsr,
        replicas: Ints,
        offline: list[int],
        deleting: bool,
    ) -> Row:
        tp = record.tp
        # in schemas.tables.REQUEST_PARTITION's field order
        entry = {
            "topic": tp.topic,
            "partition": tp.partition,
            "controller_epoch": leadership.controller_epoch,
            "leader": LEADER_DURING_DELETE if deleting else leadership.leader,
            "leader_epoch": 0 if deleting else leadership.leader_epoch,
            "isr": self._list(leadership.isr),
            "partition_epoch": 0 if deleting else leadership.partition_epoch,
            "replicas": self._list(replicas),
            "adding_replicas": None,
            "removing_replicas": None,
            "leader_recovery_state": None,
            "offline_replicas": offline,
            "is_new": None,
            "delete_partition": None,
        }
        if not deleting:  # (a queued topic's entry changes with no change of its record)
            record.metadata_entry = entry
        return entry

    def _list(self, values: Ints) -> list[int]:
        shared = self._lists.get(values)
        if shared is None:
            if len(self._lists) > MAX_SHARED_LISTS:
                self._lists = {}
            shared = self._lists[values] = list(values)
        return shared
