"""The core's front door: raw event lines in, table rows out, for any number of clusters.

Both engines drive this one class: `kcsim replay` (controller.replay) and the Spark job's
foreachBatch (streaming). A batch's output is plain rows whose columns are exactly
`schemas.TABLES[name].column_names`, with JSON-compatible values.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from controller import divergence, invariants, snapshot
from controller.columns import Columns
from controller.config import KRAFT, ZK, Settings
from controller.events import ControllerFailover, Event, Header, ObservedEvent, Rejection
from controller.health import HealthTracker
from controller.java_text import LONG_MAX as INT64_MAX
from controller.memory import LongLivedHeap, cyclic_gc_paused
from controller.model import TopicPartition
from controller.parse import parse_event
from controller.zk.context import ControllerContext, sorted_partitions, sorted_replicas
from controller.zk.journal import Journal
from controller.zk.kafka_controller import EventRejected, KafkaController
from controller.zk.request_log import RequestLog
from schemas.tables import APPEND_TABLES, STATE_TABLES

if TYPE_CHECKING:
    from controller.kraft_runner import KRaftClusterRunner

Row = dict[str, Any]
# a partition's leader (-1: none), ISR, replicas, adding and removing replicas: the
# partition_state columns `kcsim plan` reads
PartitionValues = tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
PartitionChange = tuple[str, TopicPartition, PartitionValues | None]


class EngineMismatch(ValueError):
    """Stored tables written by one engine, and a run under the other (CONTRACT §5)."""


class RawEvent(NamedTuple):
    """An input line. A named tuple, like the parsed `Event`: one is built per line, and a
    frozen dataclass is built a field at a time (through object.__setattr__)."""

    raw: str  # the line (or Kafka record value) as received
    source: str  # "<file>:<line>" or "<topic>/<partition>/<offset>"


@dataclass(slots=True)
class BatchOutput:
    # append-only tables: controller_requests and request_payloads (a RequestLog and its
    # PayloadRows view from the core, lists of rows from elsewhere), state_changes,
    # event_results, rejected_events, applied_events, divergences
    appends: dict[str, Sequence[Row]] = field(default_factory=dict)
    # keyed state tables: the current full row of every key the batch changed...
    upserts: dict[str, list[Row]] = field(default_factory=dict)
    # ...and the key columns of every row the batch removed
    deletes: dict[str, list[Row]] = field(default_factory=dict)
    events: int = 0  # the events taken (all of them, unless a max_output stopped it)
    # with `Simulator(partition_changes=True)`, in place of a zk cluster's partition_state
    # upserts and deletes: each changed partition's (cluster, partition, its values) in
    # the rows' order, the values those of `PartitionValues` (None: the partition is gone)
    partition_changes: list[PartitionChange] = field(default_factory=list)


def state_row_tables(state_rows: bool | Collection[str]) -> frozenset[str]:
    """The state tables whose rows a batch's output holds: all (True), none (False), or
    the ones named."""
    if state_rows is True:
        return frozenset(STATE_TABLE_NAMES)
    if state_rows is False:
        return frozenset()
    tables = frozenset(state_rows)
    unknown = sorted(tables - set(STATE_TABLE_NAMES))
    if unknown:
        raise ValueError(f"not state tables: {', '.join(unknown)}")
    return tables


class Simulator:
    def __init__(
        self,
        settings: Settings,
        state_rows: bool | Collection[str] = True,
        checks: bool = True,
        state_changes: bool = True,
        partition_changes: bool = False,
    ) -> None:
        """`state_rows=False`: a batch's output holds no upserts or deletes of the state
        tables (`kcsim replay` writes them once, at the end, from `table_rows`): building
        and freeing the rows of every partition and replica a batch changed was ~5% of a
        100k-partition rolling restart's replay. Its clusters' contexts then mark no
        partition or replica dirty either (ControllerContext's `marks_rows`).

        A collection of table names: only those tables' upserts and deletes (`kcsim plan`
        reads `partition_state`, `brokers` and `topics`; leaving out `replica_state` and
        `clusters` spares a row per changed replica and, under kraft, the controller's
        whole state dumped into the clusters row at every batch).

        `checks=False`: no `health` or `violations` rows; the vital signs are not counted
        and the invariants not checked, after each event or on a load (`kcsim plan` keeps
        its own counts from the state rows and reads neither: under kraft the per-event
        counting and checks were ~16% of a roll's CPU). Every other output is the same.

        `state_changes=False`: no `state_changes` rows (the state-change log: a row per
        replica and partition transition, 900,000 in a 100-broker roll of 100k partitions
        under zk, where they are not built at all; `kcsim plan` never reads them).

        `partition_changes=True`: a zk cluster's changed partitions come as
        `BatchOutput.partition_changes` (their values read straight from the controller's
        records) instead of `partition_state` rows, which `kcsim plan` would only read
        five columns of: a row of seventeen per partition each event touches (1.2 million
        in a 100-broker roll of 100k partitions). A kraft cluster's come as rows."""
        self._settings = settings
        self._partition_changes = partition_changes
        self._state_rows = state_row_tables(state_rows)
        self._checks = checks
        self._state_changes = state_changes
        self._clusters: dict[str, ClusterRunner | KRaftCluster] = {}
        self._heap = LongLivedHeap()

    @classmethod
    def from_tables(
        cls,
        settings: Settings,
        tables: Mapping[str, Iterable[Mapping[str, Any]]],
        state_rows: bool | Collection[str] = True,
        checks: bool = True,
        state_changes: bool = True,
        partition_changes: bool = False,
    ) -> Simulator:
        """Rebuild every cluster from stored state-table rows (partition_state, replica_state,
        brokers, topics, clusters; applied_events for duplicate detection). Continuing from
        here gives what one uninterrupted run gives. `state_rows`, `checks`,
        `state_changes` and `partition_changes` as the constructor's."""
        with cyclic_gc_paused():  # a load makes no garbage: collections would walk it all
            return cls._from_tables(
                settings, tables, state_rows, checks, state_changes, partition_changes
            )

    @classmethod
    def _from_tables(
        cls,
        settings: Settings,
        tables: Mapping[str, Iterable[Mapping[str, Any]]],
        state_rows: bool | Collection[str],
        checks: bool,
        state_changes: bool,
        partition_changes: bool = False,
    ) -> Simulator:
        # (rows read once each; Columns as they are: their readers zip the columns)
        tables = {
            name: rows if isinstance(rows, Columns) else list(rows) for name, rows in tables.items()
        }
        simulator = cls(settings, state_rows, checks, state_changes, partition_changes)
        engines = stored_engines(tables.get("clusters", ()))
        check_engines(engines, settings.engine)
        names = {cluster for cluster, engine in engines.items() if engine == ZK}
        for cluster in sorted(set(engines) - names):
            simulator._clusters[cluster] = _load_kraft(
                cluster, settings, tables, checks, state_changes
            )
        unclean = _unclean_elections(tables.get("health", ()))
        applied = Columns.of_rows(tables.get("applied_events", ()), ("cluster", "event_id"))
        for cluster in sorted(names):
            context = snapshot.load(cluster, tables)
            runner = ClusterRunner(
                context, settings, unclean.get(cluster, 0), checks, state_changes
            )
            runner.mark_stored()
            runner.seen_event_ids.update(applied.where("cluster", cluster).column("event_id"))
            simulator._clusters[cluster] = runner
        del tables, applied
        simulator._heap.settle_loaded()  # the contexts: out of every later collection
        return simulator

    def apply(
        self, events: Iterable[RawEvent | Event], max_output: int | None = None
    ) -> BatchOutput:
        """Apply events in the given order (a cluster's events must arrive in order).

        An `Event` is taken as parsed, its header's `raw` and `source` standing for its
        line: for a caller that builds events itself (`kcsim plan`'s derived
        AlterPartitions, a kraft roll's ~3,000 per started broker, where parsing the text
        it had just written was a tenth of the CPU).

        With `max_output`, no event is taken from `events` once the batch's output holds
        that much (rows, counting a request body's partition entries: see
        `Journal.held`): the rest stay in the iterator for the next batch, and
        `BatchOutput.events` says how many were taken."""
        self._heap.settle()  # what came in between batches (a writer's objects)
        with cyclic_gc_paused():
            output = self._apply(events, max_output)
            self._heap.freeze_batch()
        return output

    def _apply(self, events: Iterable[RawEvent | Event], max_output: int | None) -> BatchOutput:
        rejected: list[Row] = []
        divergent: list[Row] = []  # the `event` rows of rejected events carrying observed
        touched: dict[str, ClusterRunner | KRaftCluster] = {}
        taken = held = 0
        for raw_event in events:
            taken += 1
            parsed = (
                raw_event
                if isinstance(raw_event, Event)
                else parse_event(raw_event.raw, raw_event.source)
            )
            if isinstance(parsed, Rejection):
                rejected.append(rejection_row(parsed))
                if parsed.observed is not None:
                    divergent.extend(divergence.rejection_rows(parsed))
                continue
            cluster = parsed.header.cluster
            runner = self._clusters.get(cluster)
            created = runner is None
            if runner is None:
                runner = self._clusters[cluster] = self._new_cluster(cluster)
            held_before = runner.held() if max_output is not None else 0
            rejection = runner.apply(parsed)
            if rejection is not None:
                rejected.append(rejection_row(rejection))
                if rejection.observed is not None:
                    divergent.extend(divergence.rejection_rows(rejection))
                if created:
                    # a cluster this event would have started has no rows: a rejected line
                    # does not bring it into being. One that was already here stays, even
                    # with no applied event known (restored from tables without them).
                    del self._clusters[cluster]
                continue
            touched[cluster] = runner
            if max_output is not None:
                held += runner.held() - held_before
                if held >= max_output:
                    break
        output = BatchOutput(events=taken)
        output.appends = {name: [] for name in APPEND_TABLE_NAMES}
        requests = output.appends["controller_requests"] = RequestLog()
        output.appends["request_payloads"] = requests.payloads()
        output.upserts = {name: [] for name in STATE_TABLE_NAMES}
        output.deletes = {name: [] for name in STATE_TABLE_NAMES}
        output.appends["rejected_events"] = rejected
        output.appends["divergences"] = divergent
        for cluster in sorted(touched):
            touched[cluster].drain(output, self._state_rows, self._partition_changes)
        if not self._state_changes:  # (none made by either engine's runner: kept empty)
            output.appends["state_changes"] = []
        return output

    def _new_cluster(self, cluster: str) -> ClusterRunner | KRaftCluster:
        """A cluster's first event: the engine the settings name runs it."""
        if self._settings.engine == KRAFT:
            from controller.kraft_runner import KRaftClusterRunner

            return KRaftCluster(
                KRaftClusterRunner(
                    cluster, self._settings, checks=self._checks, state_changes=self._state_changes
                )
            )
        return ClusterRunner(
            ControllerContext(cluster, marks_rows=bool(self._state_rows)),
            self._settings,
            checks=self._checks,
            state_changes=self._state_changes,
        )

    def clusters(self) -> list[str]:
        return sorted(self._clusters)

    def engine(self, cluster: str) -> str:
        return KRAFT if isinstance(self._clusters[cluster], KRaftCluster) else ZK

    def context(self, cluster: str) -> ControllerContext:
        """A ZooKeeper-engine cluster's controller context."""
        runner = self._clusters[cluster]
        assert isinstance(runner, ClusterRunner), f"cluster {cluster!r} runs the kraft engine"
        return runner.context

    def kraft(self, cluster: str) -> KRaftClusterRunner:
        """A KRaft-engine cluster (its QuorumController is `.controller`)."""
        runner = self._clusters[cluster]
        assert isinstance(runner, KRaftCluster), f"cluster {cluster!r} runs the zk engine"
        return runner.runner

    def table_rows(self, table: str) -> Iterator[Row]:
        """Every current row of a state table."""
        for cluster in sorted(self._clusters):
            runner = self._clusters[cluster]
            if isinstance(runner, KRaftCluster):
                yield from runner.runner.table_rows(table)
            else:
                yield from snapshot.table_rows(runner.context, table)


def stored_engines(rows: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each stored cluster's engine (a clusters row without one: written by a kcsim that
    had the ZooKeeper engine alone)."""
    return {row["cluster"]: row.get("engine") or ZK for row in rows}


def check_engines(engines: Mapping[str, str], engine: str) -> None:
    """EngineMismatch when a stored cluster was written by another engine than `engine`:
    its tables are that engine's state, which the other cannot continue from."""
    other = {cluster: e for cluster, e in sorted(engines.items()) if e != engine}
    if other:
        named = ", ".join(f"'{cluster}' ({e})" for cluster, e in other.items())
        raise EngineMismatch(
            f"the stored tables of cluster {named} were written by another engine than this "
            f"run's kcsim.engine={engine}; a cluster continues under the engine that wrote "
            "it (run with that kcsim.engine, or start a new lake)"
        )


def _load_kraft(
    cluster: str,
    settings: Settings,
    tables: Mapping[str, Iterable[Mapping[str, Any]]],
    checks: bool = True,
    state_changes: bool = True,
) -> KRaftCluster:
    from controller.kraft_runner import KRaftClusterRunner

    # (Columns stay columns: a restart of 1M partitions reads each row as a dict in turn)
    mine = {
        name: rows.where("cluster", cluster)
        if isinstance(rows, Columns)
        else [row for row in rows if row["cluster"] == cluster]
        for name, rows in tables.items()
        if name in _KRAFT_RESTORE
    }
    runner = KRaftClusterRunner.from_rows(cluster, settings, mine, checks, state_changes)  # type: ignore[arg-type]
    return KRaftCluster(runner)


_KRAFT_RESTORE = (
    "clusters",
    "partition_state",
    "brokers",
    "topics",
    "health",
    "applied_events",
)


class KRaftCluster:
    """A KRaft-engine cluster as the simulator drives it: the order and duplicate checks
    shared with the ZooKeeper engine, then `KRaftClusterRunner`."""

    __slots__ = ("runner",)

    def __init__(self, runner: KRaftClusterRunner) -> None:
        self.runner = runner

    def held(self) -> int:
        return self.runner.held()

    def apply(self, event: Event) -> Rejection | None:
        runner = self.runner
        header = event.header
        ids = _sequence(runner.cluster, header, runner.last_seq, runner.seen_event_ids)
        if isinstance(ids, Rejection):
            return ids
        event_id, seq = ids
        reason = runner.apply(event, event_id, seq)
        return None if reason is None else _reject(runner.cluster, header, reason)

    def drain(
        self, output: BatchOutput, state_rows: frozenset[str], partition_changes: bool = False
    ) -> None:
        """(`partition_changes` is a zk cluster's: this one's come as rows)"""
        self.runner.drain(output, state_rows)


def refused_rows(events: Iterable[RawEvent], reason: str) -> dict[str, list[Row]]:
    """`rejected_events` rows (and the `divergences` rows of those carrying `observed`)
    for lines refused whole, before any is applied (a file the job cannot apply in name
    order): each row's `reason` is `reason`, then the line's own fault if it has one."""
    rejected: list[Row] = []
    divergent: list[Row] = []
    for event in events:
        parsed = parse_event(event.raw, event.source)
        if isinstance(parsed, Rejection):
            rejection = Rejection(
                parsed.cluster,
                parsed.raw,
                f"{reason}; and: {parsed.reason}",
                parsed.source,
                parsed.observed,
            )
        else:
            rejection = _reject(parsed.header.cluster, parsed.header, reason)
        rejected.append(rejection_row(rejection))
        divergent.extend(divergence.rejection_rows(rejection))
    return {"rejected_events": rejected, "divergences": divergent}


def rejection_row(rejection: Rejection) -> Row:
    return {
        "cluster": rejection.cluster,
        "raw": rejection.raw,
        "reason": rejection.reason,
        "source": rejection.source,
    }


class ClusterRunner:
    """One cluster: ordering and duplicate checks, the controller, and its output."""

    def __init__(
        self,
        context: ControllerContext,
        settings: Settings,
        unclean_elections: int = 0,
        checks: bool = True,
        state_changes: bool = True,
    ) -> None:
        """`checks=False`: no health or violations rows; `state_changes=False`: no
        state-change log (`Simulator`'s)."""
        self.context = context
        self.settings = settings
        self.journal = Journal(context.cluster, state_changes)
        self.controller = KafkaController(context, self.journal, settings)
        self.health = (
            HealthTracker(context, unclean_elections, settings.min_insync_replicas)
            if checks
            else None
        )
        self.seen_event_ids: set[str] = set()
        self._applied: list[Row] = []
        self._divergences: list[Row] = []
        self._health_rows: list[Row] = []
        self._violations: list[Row] = []
        # each queued topic's `deletion` column as last output: a failover recomputes the
        # deletion sets without marking topics dirty, so drain compares against this
        self._deletion_status = _deletion_statuses(context)
        # the clusters row as last output (None: never written), so that it is written
        # when it changes rather than every batch
        self._cluster_row: Row | None = None

    def mark_stored(self) -> None:
        """The context came from the tables: its clusters row is already stored."""
        self._cluster_row = snapshot.cluster_row(self.context)

    def held(self) -> int:
        return self.journal.held()

    def apply(self, event: Event) -> Rejection | None:
        header = event.header
        context = self.context
        cluster = context.cluster
        ids = _sequence(cluster, header, context.last_seq, self.seen_event_ids)
        if isinstance(ids, Rejection):
            return ids
        event_id, seq = ids
        try:
            self.controller.check(event.body)
        except EventRejected as error:
            return _reject(cluster, header, str(error))
        context.event_id = event_id
        journal = self.journal
        journal.begin(event_id, seq, header.ts)
        unclean_before = journal.unclean_elections
        body = event.body
        failover = isinstance(body, ControllerFailover)
        try:
            if isinstance(body, ControllerFailover):
                self._failover(body)
            else:
                self.controller.apply(body)
        except EventRejected as error:
            return _reject(cluster, header, str(error))
        context = self.context  # a failover replaces it
        if self.health is not None:
            self._check(context, header, event_id, seq, failover, unclean_before, self.health)
        else:  # what the checks would have taken
            context.clear_event_marks()
            journal.violations.clear()
        context.last_seq = seq
        context.last_event_id = event_id
        self.seen_event_ids.add(event_id)
        self._applied.append(
            {
                "cluster": context.cluster,
                "event_id": event_id,
                "seq": seq,
                "type": header.type,
                "ts": header.ts,
            }
        )
        if header.observed is not None:
            body = event.body  # its topic or partition is the scope of `observed`
            found = divergence.compare(
                context,
                header.observed,
                getattr(body, "topic", None),
                getattr(body, "partition", None),
            )
            self._divergences.extend(
                divergence.rows(context.cluster, event_id, seq, header.ts, found)
            )
        return None

    def _check(
        self,
        context: ControllerContext,
        header: Header,
        event_id: str,
        seq: int,
        failover: bool,
        unclean_before: int,
        health: HealthTracker,
    ) -> None:
        """The event's `health` row and `violations` rows: kcsim's state where the event
        changed it, the requests it sent, and its `observed` states."""
        journal = self.journal
        leader_changes, found = health.resync(context) if failover else health.update(context)
        # the event's unclean elections (`unclean_before`: the journal's count before it)
        health.unclean_elections += journal.unclean_elections - unclean_before
        if journal.violations:
            found.extend(journal.violations)
            journal.violations.clear()
        if header.observed is not None:
            found.extend(health.check_observed(header.observed))
        if found:
            self._violations.extend(
                invariants.rows(context.cluster, event_id, seq, header.ts, found)
            )
        self._health_rows.append(
            health.row(
                context.cluster,
                event_id,
                seq,
                header.ts,
                len(context.live_broker_set()),
                leader_changes,
                journal.request_seq,
            )
        )

    def _failover(self, body: ControllerFailover) -> None:
        """The new controller knows only what is stored (SPEC §7.2)."""
        fresh = snapshot.reload_for_failover(self.context)
        self.context = fresh
        self.controller = KafkaController(fresh, self.journal, self.settings)
        self.controller.apply(body)

    def drain(
        self, output: BatchOutput, state_rows: frozenset[str], partition_changes: bool = False
    ) -> None:
        """Move the journal's rows to `output` and the rows of the tables in `state_rows`
        of every state-table key changed since the last drain (`partition_changes`: the
        partitions as `BatchOutput.partition_changes`, not rows)."""
        context = self.context
        requests, state_changes, results = self.journal.drain()
        # (the batch's append tables: a RequestLog for the requests, lists for the others)
        cast(RequestLog, output.appends["controller_requests"]).extend(requests)
        appends = cast("dict[str, list[Row]]", output.appends)
        appends["state_changes"].extend(state_changes)
        appends["event_results"].extend(results)
        appends["applied_events"].extend(self._applied)
        self._applied = []
        appends["divergences"].extend(self._divergences)
        self._divergences = []
        appends["health"].extend(self._health_rows)
        self._health_rows = []
        appends["violations"].extend(self._violations)
        self._violations = []
        if state_rows:
            self._state_rows(output, state_rows, partition_changes)
        context.clear_dirty()

    def _state_rows(
        self, output: BatchOutput, tables: frozenset[str], partition_changes: bool
    ) -> None:
        """The upserts and deletes of `tables` since the last drain."""
        context = self.context
        cluster = context.cluster
        if "partition_state" in tables and partition_changes:
            changes = output.partition_changes
            for tp, record in context.records_of(sorted_partitions(context.dirty_partitions)):
                if record is None:
                    changes.append((cluster, tp, None))
                    continue
                leadership = record.leadership
                assignment = record.assignment
                changes.append(
                    (
                        cluster,
                        tp,
                        (
                            -1 if leadership is None else leadership.leader,
                            () if leadership is None else leadership.isr,
                            assignment.replicas,
                            assignment.adding,
                            assignment.removing,
                        ),
                    )
                )
        elif "partition_state" in tables:
            partition_upserts = output.upserts["partition_state"]
            for tp, record in context.records_of(sorted_partitions(context.dirty_partitions)):
                if record is None:
                    output.deletes["partition_state"].append(
                        {"cluster": cluster, "topic": tp.topic, "partition": tp.partition}
                    )
                else:
                    partition_upserts.append(snapshot.partition_row(cluster, record))
        if "replica_state" in tables:
            self._replica_rows(output)
        if "brokers" in tables:
            for broker in sorted(context.dirty_brokers):
                output.upserts["brokers"].append(snapshot.broker_row(context, broker))
        if "topics" in tables:
            self._topic_rows(output)
        if "clusters" in tables:
            cluster_row = snapshot.cluster_row(context)
            if cluster_row != self._cluster_row:
                output.upserts["clusters"].append(cluster_row)
                self._cluster_row = cluster_row

    def _replica_rows(self, output: BatchOutput) -> None:
        context = self.context
        cluster = context.cluster
        replica_upserts = output.upserts["replica_state"]
        replicas = sorted_replicas(context.dirty_replicas)
        records = context.records_of(tp for tp, _ in replicas)
        for (tp, broker), (_, record) in zip(replicas, records, strict=True):
            if record is None or broker not in record.replica_states:
                output.deletes["replica_state"].append(
                    {
                        "cluster": cluster,
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "broker": broker,
                    }
                )
            else:
                replica_upserts.append(snapshot.replica_row(cluster, record, broker))

    def _topic_rows(self, output: BatchOutput) -> None:
        context = self.context
        cluster = context.cluster
        statuses = _deletion_statuses(context)
        changed = {
            topic
            for topic in statuses.keys() | self._deletion_status.keys()
            if statuses.get(topic) != self._deletion_status.get(topic)
        }
        for topic in sorted(context.dirty_topics | changed):
            if topic in context.topics:
                output.upserts["topics"].append(snapshot.topic_row(context, topic))
            else:
                output.deletes["topics"].append({"cluster": cluster, "topic": topic})
        self._deletion_status = statuses


def _sequence(
    cluster: str, header: Header, last: int | None, seen: set[str]
) -> tuple[str, int] | Rejection:
    """The event's id and seq (CONTRACT §1's defaults), or why its order is refused: the
    same rules whichever engine runs the cluster."""
    seq = (last or 0) + 1 if header.seq is None else header.seq
    event_id = header.event_id if header.event_id is not None else f"{cluster}:{seq}"
    if seq > INT64_MAX:
        return _reject(
            cluster,
            header,
            f"the cluster's last applied seq is {last}, the largest int64: no seq follows it",
        )
    if event_id in seen:
        if header.event_id is None:  # the line gave none: its default collides
            return _reject(
                cluster,
                header,
                f"the default event_id '{event_id}' (cluster:seq) is already taken by an "
                "applied event; give this event an event_id",
            )
        return _reject(cluster, header, f"duplicate event_id '{event_id}': already applied")
    if last is not None and seq <= last:
        return _reject(
            cluster,
            header,
            f"seq {seq} does not increase: the cluster's last applied seq is {last}",
        )
    return event_id, seq


def _reject(cluster: str, header: Header, reason: str) -> Rejection:
    # a function, not a closure in ClusterRunner.apply: nothing is allocated for the
    # events that pass
    observed = None
    if header.observed is not None:
        observed = ObservedEvent(header.event_id, header.seq, header.ts, header.observed)
    return Rejection(cluster, header.raw, reason, header.source, observed)


def _unclean_elections(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Each cluster's unclean elections so far: its last `health` row's count (the one
    health figure the state tables cannot give)."""
    last: dict[str, tuple[int, int]] = {}
    for row in rows:
        seen = last.get(row["cluster"])
        if seen is None or row["seq"] > seen[0]:
            last[row["cluster"]] = (row["seq"], row["unclean_elections"])
    return {cluster: count for cluster, (_, count) in last.items()}


def _deletion_statuses(context: ControllerContext) -> dict[str, str | None]:
    return {t: snapshot.deletion_status(context, t) for t in context.topics_to_be_deleted}


STATE_TABLE_NAMES = tuple(t.name for t in STATE_TABLES)
APPEND_TABLE_NAMES = tuple(t.name for t in APPEND_TABLES)
