"""The query of `kcsim run`: one foreachBatch per micro-batch through the core, into the lake.

Exactly once (see `streaming.lake.tables`): every commit is tagged with the query id and batch
id; at (re)start the first batch looks up the tables that already hold its commit, loads
the state as of just before them (time travel), recomputes the batch and skips those
tables. A batch whose commits all landed is therefore recomputed but writes nothing; a
half-written one completes. Rebuilding from the latest versions instead would double-
apply a half-written batch. The Kafka sink (`streaming.job.request_sink`) reads back what a re-run
batch already produced and sends only the rest.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from controller.memory import cyclic_gc_paused
from controller.simulator import (
    BatchOutput,
    EngineMismatch,
    RawEvent,
    Simulator,
    check_engines,
    stored_engines,
)
from streaming.job.fleet import apply_fleet
from streaming.job.options import Options
from streaming.job.os_memory import release_freed_memory
from streaming.lake.tables import RESTORE_TABLES, Lake, LakeSchemaError
from streaming.metrics import Metrics

# The signals that stop a running job cleanly, and how often the wait for the query looks
# whether one came.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
STOP_POLL_SECONDS = 1


def run(
    spark: SparkSession,
    options: Options,
    log: Callable[[str], None] | None = None,
    metrics: Metrics | None = None,
) -> int:
    """Start the query and wait for it (for `--once`, until the data present is done); say
    what was done when it stops (`--once`: "nothing new" when no file was new)."""
    log = log or _stderr
    lake = Lake(spark, options.lake)
    try:
        lake.create_tables()
        # a lake remembers each cluster's engine: another one stops here, before any write
        stored = lake.load_rows({"clusters": ("cluster", "engine")})["clusters"]
        check_engines(stored_engines(stored), options.settings.engine)
    except (LakeSchemaError, EngineMismatch) as error:
        log(f"kcsim run: {error}")
        return 2
    if warning := options.source.skipped_warning():
        log(f"kcsim run: {warning}")
    total_files = options.source.known_files() if options.once else None
    batcher = BatchRunner(spark, lake, options, log, total_files, metrics)
    writer = (
        options.source.stream(spark, options.checkpoint)
        .writeStream.foreachBatch(batcher)
        .option("checkpointLocation", options.checkpoint)
        .queryName("kcsim_run")
    )
    if options.once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{options.trigger_seconds} seconds")
    query = writer.start()
    batcher.started(str(query.id))
    # SIGTERM (a service manager's stop, `kill`) and SIGINT (Ctrl-C) stop the query: the
    # batch under way is finished or left to be re-run, and the summary is printed. The
    # handlers only note the signal, so no Spark call is interrupted half-way.
    stopping = threading.Event()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = (
        {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in STOP_SIGNALS}
        if main_thread
        else {}
    )
    try:
        while not stopping.is_set() and not query.awaitTermination(STOP_POLL_SECONDS):
            pass
        if stopping.is_set():
            query.stop()
    except KeyboardInterrupt:
        query.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if options.sink is not None:
            options.sink.close()
        if metrics is not None:
            metrics.close()
    log(batcher.totals.summary(options.once, total_files, time.monotonic() - batcher.born))
    return 0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class BatchRunner:
    """The foreachBatch function, with the state it keeps between batches."""

    def __init__(
        self,
        spark: SparkSession,
        lake: Lake,
        options: Options,
        log: Callable[[str], None],
        total_files: int | None,
        metrics: Metrics | None = None,
    ) -> None:
        self.spark = spark
        self.lake = lake
        self.options = options
        self.log = log
        self.total_files = total_files
        self.files_done = 0
        self._query_id = threading.Event()
        self.run_id = ""
        self.simulator: Simulator | None = None
        self.skip: dict[str, int] = {}  # tables already holding the first batch's commit
        self.first_batch: int | None = None
        self.metrics = metrics
        self.totals = Totals()
        self.born = time.monotonic()

    def started(self, query_id: str) -> None:
        self.run_id = query_id
        self._query_id.set()

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        clock = Stopwatch()
        with cyclic_gc_paused():  # restore and batch build millions of rows
            self._query_id.wait()
            if self.first_batch is None:
                self._restore(batch_id)
                clock.lap("restore")
            skip = self.skip if batch_id == self.first_batch else {}
            events, files, refused = self.options.source.events(batch)
            clock.lap("read")
            if self.options.fleet:
                output = apply_fleet(self.spark, self.lake, self.options.settings, events, skip)
            else:
                assert self.simulator is not None
                output = self.simulator.apply(events)
            for table, rows in refused.items():
                if rows:
                    output.appends[table] = [*output.appends.get(table, ()), *rows]
            clock.lap("apply")
            self.lake.write(output, self.run_id, batch_id, skip)
            clock.lap("write")
            if self.options.sink is not None:
                self._send(output, batch_id, skip)
                clock.lap("sink")
            self.files_done += files
            line = self._line(batch_id, events, output, clock)
            self.totals.add(files, output)
            if self.metrics is not None:
                measure(self.metrics, output, clock.total())
            # freed here, by reference counting: alive when the collector resumes, the
            # batch's millions of rows would all be walked by its next collection
            del events, output
            release_freed_memory()  # (the rows, their Arrow tables, a merge's files)
        self.log(line)

    def _send(self, output: BatchOutput, batch_id: int, skip: Mapping[str, int]) -> None:
        """The batch's output stream to the sink, which is written after the lake: only a
        re-run batch whose rows already reached the lake may have reached the sink. The
        ZooKeeper engine's stream is its requests, the KRaft engine's its metadata
        records (an engine writes no rows of the other's)."""
        sink = self.options.sink
        assert sink is not None
        requests = output.appends.get("controller_requests") or []
        payloads = output.appends.get("request_payloads") or []
        sent_before = "controller_requests" in skip or "request_payloads" in skip
        held = sink.send(requests, payloads, may_be_rerun=sent_before)
        if held:
            self.log(f"batch {batch_id}: re-run; {held} request records already in the sink")
        records = output.appends.get("metadata_records") or []
        held = sink.send_metadata(records, may_be_rerun="metadata_records" in skip)
        if held:
            self.log(f"batch {batch_id}: re-run; {held} metadata records already in the sink")

    def _restore(self, batch_id: int) -> None:
        """Before the first batch of this process: find what a crashed run of it wrote,
        and rebuild the controller as of just before that."""
        self.first_batch = batch_id
        self.skip = self.lake.pending_commits(self.run_id, batch_id)
        if self.skip:
            self.log(
                f"batch {batch_id}: re-run after a restart; already written: "
                + ", ".join(sorted(self.skip))
            )
        if not self.options.fleet:
            tables = self.lake.load_rows(RESTORE_TABLES, before=self.skip)
            self.simulator = Simulator.from_tables(self.options.settings, tables)
            del tables
            release_freed_memory()  # the tables' Arrow data and columns, read once

    def _line(
        self, batch_id: int, events: Sequence[RawEvent], output: BatchOutput, clock: Stopwatch
    ) -> str:
        appends = output.appends
        clusters = {r["cluster"] for r in appends.get("applied_events") or []}
        clusters.update(r["cluster"] for r in appends.get("rejected_events") or [] if r["cluster"])
        # the controller's output stream: requests (ZooKeeper mode) or records (KRaft)
        if self.options.settings.kraft:
            stream = f"{len(appends.get('metadata_records') or [])} metadata records"
        else:
            stream = f"{len(appends.get('controller_requests') or [])} requests"
        line = (
            f"batch {batch_id}: {len(events)} events, {len(clusters)} clusters, "
            f"{len(appends.get('rejected_events') or [])} rejected, {stream}, "
            f"{clock.total():.2f} s ({clock.laps()})"
        )
        if self.total_files:
            line += " " + progress_bar(self.files_done, self.total_files)
        return line


@dataclass(slots=True)
class Totals:
    """What a `kcsim run` did, for its last line."""

    batches: int = 0
    files: int = 0
    applied: int = 0
    rejected: int = 0
    divergences: int = 0
    violations: int = 0

    def add(self, files: int, output: BatchOutput) -> None:
        appends = output.appends
        self.batches += 1
        self.files += files
        self.applied += len(appends.get("applied_events") or [])
        self.rejected += len(appends.get("rejected_events") or [])
        self.divergences += len(appends.get("divergences") or [])
        self.violations += len(appends.get("violations") or [])

    def summary(self, once: bool, known_files: int | None, seconds: float) -> str:
        if once and self.batches == 0:
            if known_files is None:
                return "kcsim run: nothing new (no record after the checkpoint's offsets)"
            return f"kcsim run: nothing new ({known_files} files already applied)"
        files = f"{self.files} files, " if known_files is not None or self.files else ""
        return (
            f"kcsim run: {'done' if once else 'stopped'}: {self.batches} batches, {files}"
            f"{self.applied} events applied, {self.rejected} rejected, {self.divergences} "
            f"divergences, {self.violations} violations in {seconds:.1f} s"
        )


def measure(metrics: Metrics, output: BatchOutput, seconds: float) -> None:
    """A batch's counts into the job's metrics, per cluster; the partition levels from each
    cluster's last health row."""
    appends = output.appends
    by_cluster: dict[str, dict[str, Counter[str]]] = {}

    def count(table: str, column: str) -> None:
        for row in appends.get(table) or []:
            cluster = row.get("cluster") or ""
            by_cluster.setdefault(cluster, {}).setdefault(table, Counter())[
                str(row.get(column)) if column else ""
            ] += 1

    count("applied_events", "")
    count("rejected_events", "")
    count("divergences", "field")
    count("violations", "invariant")
    for cluster, tables in by_cluster.items():
        metrics.events(
            cluster,
            applied=sum(tables.get("applied_events", Counter()).values()),
            rejected=sum(tables.get("rejected_events", Counter()).values()),
        )
        metrics.divergences(cluster, tables.get("divergences", Counter()))
        metrics.violations(cluster, tables.get("violations", Counter()))
    last: dict[str, Mapping[str, object]] = {}
    for health in appends.get("health") or []:
        last[str(health["cluster"])] = health
    for cluster, row in last.items():
        metrics.partitions(
            cluster, offline=_int(row["offline"]), at_min_isr=_int(row["at_min_isr"])
        )
    metrics.batch(seconds)


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


class Stopwatch:
    def __init__(self) -> None:
        self._start = self._last = time.monotonic()
        self._laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self._laps.append((name, now - self._last))
        self._last = now

    def total(self) -> float:
        return time.monotonic() - self._start

    def laps(self) -> str:
        return ", ".join(f"{name} {seconds:.2f}" for name, seconds in self._laps)


def progress_bar(done: int, total: int, width: int = 20) -> str:
    done = min(done, total)
    filled = round(width * done / total) if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} files"
