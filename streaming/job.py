"""`kcsim run`: the Spark Structured Streaming job (CONTRACT §3, issue #3).

A streaming query over event files (or a Kafka topic) whose `foreachBatch` orders the
micro-batch's events, applies them through the core and writes the outputs to the Delta
lake (`streaming.lake`), one commit per changed table, exactly once per batch.

Sources. Files are read with kcsim's own streaming source (`streaming.file_source`:
whole files as bytes, taken in name order whatever their modification times, in every
trigger mode and across restarts; a file copied after one whose name sorts after it is
rejected line by line, never applied out of order), split into lines exactly as `kcsim
replay` splits them, so line numbers are exact for any file size; `source` is "<file name
relative to the source directory>:<line>". Kafka records go in (topic, partition, offset)
order with `source` "<topic>/<partition>/<offset>"; producers key events by cluster, so a
cluster's events share a partition. A record with a null value (a tombstone) is given to
the core as `raw = ""` and so lands in `rejected_events` ("not valid JSON") with its
coordinates; a value is one event, never split into lines.

Two ways to apply a batch:

* driver (default): ONE long-lived `Simulator` in the driver holds every cluster; it is
  rebuilt from Delta when the query starts (`Simulator.from_tables`) and then only fed
  the batches, so per-batch work is proportional to the batch, not to the clusters.
* fleet (`--fleet`): the batch's events are grouped by cluster and cogrouped with those
  clusters' state rows (read from Delta, only the clusters present in the batch), and
  `applyInPandas` rebuilds each cluster's `Simulator` on an executor, applies its events
  and returns the output rows; the driver writes them. Clusters are independent in the
  core, so this equals per-cluster replays; it scales out over executors, and needs no
  state anywhere between batches (a restart is the same as any batch). The price: a
  batch costs in proportion to the size of the clusters it touches (their state is
  reloaded and shipped every batch), so it suits fleets of many small or medium
  clusters; one huge cluster is served better by the driver mode. Keeping per-cluster
  contexts alive on executors (transformWithStateInPandas) would remove the reload but
  serialize each touched context into the state store every batch and tie the
  checkpoint to the context's pickled form; not done. On any master but local, `main`
  ships the core to the executors as a zip (`streaming.ship_core`), so they need not
  have kcsim installed.

Exactly once (see `streaming.lake`): every commit is tagged with the query id and batch
id; at (re)start the first batch looks up the tables that already hold its commit, loads
the state as of just before them (time travel), recomputes the batch and skips those
tables. A batch whose commits all landed is therefore recomputed but writes nothing; a
half-written one completes. Rebuilding from the latest versions instead would double-
apply a half-written batch. The Kafka sink (`streaming.sink`) reads back what a re-run
batch already produced and sends only the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.config import Settings
from controller.memory import cyclic_gc_paused, frozen_heap_released
from controller.replay import (
    EventFileNameError,
    check_file_name,
    is_event_file,
    skipped_files_warning,
    split_lines,
)
from controller.simulator import BatchOutput, RawEvent, Row, Simulator, refused_rows
from schemas import APPEND_TABLES, STATE_TABLES
from streaming.file_source import is_remote, lake_path, local_path
from streaming.kafka_security import KafkaClientConfig
from streaming.lake import RESTORE_TABLES, Lake
from streaming.os_memory import arrow_on_the_c_heap, release_freed_memory
from streaming.sink import KafkaSink, SinkError

DEFAULT_TRIGGER_SECONDS = 5


# ------------------------------------------------------------------------------ CLI


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        required=True,
        metavar="file:DIR|kafka:HOST:PORT/TOPIC",
        help="where events come from",
    )
    parser.add_argument("--lake", required=True, help="Delta lake directory")
    parser.add_argument("--once", action="store_true", help="process what is there and stop")
    parser.add_argument(
        "--checkpoint", help="checkpoint directory (default <lake>/_checkpoints/run)"
    )
    parser.add_argument(
        "--trigger-seconds",
        type=float,
        default=DEFAULT_TRIGGER_SECONDS,
        help=f"processing-time trigger interval (default {DEFAULT_TRIGGER_SECONDS})",
    )
    parser.add_argument("--max-files-per-trigger", type=int, help="file source: files per batch")
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        choices=("earliest", "latest"),
        help="Kafka source: where a new query starts (default earliest)",
    )
    parser.add_argument(
        "--max-offsets-per-trigger", type=int, help="Kafka source: records per batch"
    )
    parser.add_argument(
        "--sink", metavar="kafka:HOST:PORT/TOPIC", help="also produce requests to Kafka"
    )
    parser.add_argument(
        "--command-config",
        "--kafka-config",
        dest="kafka_config",
        type=Path,
        metavar="FILE",
        help="Kafka client properties for the source and sink (security.protocol, sasl.*, "
        "ssl.*), passed to Spark as kafka.* options",
    )
    parser.add_argument(
        "--fleet", action="store_true", help="apply clusters in parallel on executors"
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="Spark conf (repeatable)"
    )


def main(args: argparse.Namespace) -> int:
    try:
        options = Options.from_args(args)
    except ValueError as error:
        print(f"kcsim run: {error}", file=sys.stderr)
        return 2
    if problem := preflight(options):
        print(f"kcsim run: {problem}", file=sys.stderr)
        return 2
    from pyspark.errors import StreamingQueryException

    from streaming.session import build_session
    from streaming.ship_core import is_local_master, ship_core

    spark = build_session(
        "kcsim-run", options.master, options.spark_conf, verbose=getattr(args, "verbose", False)
    )
    arrow_on_the_c_heap()  # so that release_freed_memory returns Arrow's freed pages too
    try:
        with tempfile.TemporaryDirectory(prefix="kcsim-core-") as shipped:
            if not is_local_master(options.master):
                # executors elsewhere need not have kcsim: they get the core with the job
                ship_core(spark.sparkContext, Path(shipped))
            return run(spark, options)
    except StreamingQueryException as error:
        print(f"kcsim run: the query failed: {query_failure(error)}", file=sys.stderr)
        return 1
    finally:
        spark.stop()


_FILE_NAME_ERROR = re.compile(r"EventFileNameError: (.+)")
# how a SinkError raised in foreachBatch reads in the query's exception
SINK_ERROR = f"{SinkError.__module__}.{SinkError.__qualname__}"


def query_failure(error: Exception) -> str:
    """The first line of a failed query's cause, with what an authentication failure
    means for kcsim (Spark's text holds the Kafka client's exception, never its config),
    or the request sink's own error (the last line of the Python traceback in it)."""
    text = str(error)
    sink = re.search(rf"^{re.escape(SINK_ERROR)}: (.+)$", text, re.MULTILINE)
    if sink:
        return f"the request sink failed: {sink.group(1)}"
    if "SaslAuthenticationException" in text or "Authentication failed" in text:
        return (
            "Kafka refused the SASL credentials (authentication failed: check the user and "
            "password of --kafka-config)"
        )
    if "SSLHandshakeException" in text or "SslAuthenticationException" in text:
        return "the TLS handshake with Kafka failed (check --kafka-config's ssl.* settings)"
    if found := _FILE_NAME_ERROR.search(text):  # raised in the batch, under Spark's text
        return found.group(1)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


@dataclass(frozen=True, slots=True)
class Options:
    settings: Settings
    source: FileSource | KafkaSource
    lake: str
    checkpoint: str
    once: bool = False
    trigger_seconds: float = DEFAULT_TRIGGER_SECONDS
    sink: KafkaSink | None = None
    fleet: bool = False
    master: str = "local[2]"
    spark_conf: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        client = KafkaClientConfig.load(getattr(args, "kafka_config", None))
        kind, _, where = args.source.partition(":")
        source: FileSource | KafkaSource
        if kind == "file" and where:
            if is_remote(where):
                raise ValueError(f"--source file: reads a local directory, got {where!r}")
            source = FileSource(local_path(where), args.max_files_per_trigger)
        elif kind == "kafka":
            bootstrap, topic = parse_endpoint(where)
            source = KafkaSource(
                bootstrap, topic, args.starting_offsets, args.max_offsets_per_trigger, client
            )
        else:
            raise ValueError(
                f"--source expects file:DIR or kafka:HOST:PORT/TOPIC, got {args.source!r}"
            )
        sink = None
        if args.sink:
            kind, _, where = args.sink.partition(":")
            if kind != "kafka":
                raise ValueError(f"--sink expects kafka:HOST:PORT/TOPIC, got {args.sink!r}")
            sink = KafkaSink(*parse_endpoint(where), client)
        conf: dict[str, str] = {}
        for item in args.conf:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--conf expects key=value, got {item!r}")
            conf[key.strip()] = value.strip()
        lake = lake_path(args.lake)
        return cls(
            settings=args.settings,
            source=source,
            lake=lake,
            checkpoint=lake_path(args.checkpoint or f"{lake}/_checkpoints/run"),
            once=args.once,
            trigger_seconds=args.trigger_seconds,
            sink=sink,
            fleet=args.fleet,
            master=args.master,
            spark_conf=conf,
        )


def preflight(options: Options) -> str | None:
    """What stops the run before Spark starts (one line), or None: the source, the sink and
    the lake are checked as `produce` checks its bootstrap, in seconds, and nothing is
    created. Without this, a missing directory was a Python traceback and an unreachable
    bootstrap 3 minutes of retries ending in a Java stack."""
    source = options.source
    if isinstance(source, FileSource):
        if problem := source.check():
            return problem
    elif problem := kafka_unreachable(source.bootstrap, source.client, "--source"):
        return problem
    if options.sink is not None and (
        problem := kafka_unreachable(options.sink.bootstrap, options.sink.client, "--sink")
    ):
        return problem
    for what, path in (("lake", options.lake), ("checkpoint", options.checkpoint)):
        if problem := unwritable(what, path):
            return problem
    return None


def unwritable(what: str, path: str) -> str | None:
    """Why a local directory cannot be used as the `what`, or None (it exists, or can be
    made: its nearest existing parent is a writable directory). Remote ones are Spark's."""
    if is_remote(path):
        return None
    if os.path.exists(path):
        if not os.path.isdir(path):
            return f"the {what} {path} is not a directory"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"the {what} directory {path} cannot be written"
        return None
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        return f"the {what} {path} cannot be made: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"the {what} {path} cannot be made: {parent} cannot be written"
    return None


def kafka_unreachable(bootstrap: str, client: KafkaClientConfig, option: str) -> str | None:
    """Why the Kafka cluster at `bootstrap` cannot be reached, or None: a bootstrap with
    `produce`'s client settings (given up after `BOOTSTRAP_TIMEOUT_MS`, 15 s), and the
    refusal behind a failure said as `produce` says it."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    from streaming.kafka_security import ClientFailures

    with ClientFailures(client) as failures:
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap,
                client_id="kcsim-run-check",
                **client.kafka_python(),
            )
        except (KafkaError, OSError, ValueError) as error:
            return f"{option}: cannot reach Kafka at {bootstrap}: {failures.explain(error)}"
    admin.close()
    return None


def parse_endpoint(text: str) -> tuple[str, str]:
    """Parse "HOST:PORT[,HOST:PORT...]/TOPIC" into (bootstrap servers, topic)."""
    bootstrap, sep, topic = text.rpartition("/")
    if not sep or not bootstrap or not topic:
        raise ValueError(f"expected HOST:PORT/TOPIC, got {text!r}")
    return bootstrap, topic


# -------------------------------------------------------------------------- the query


def run(spark: SparkSession, options: Options, log: Callable[[str], None] | None = None) -> int:
    """Start the query and wait for it (for `--once`, until the data present is done)."""
    log = log or _stderr
    lake = Lake(spark, options.lake)
    lake.create_tables()
    if warning := options.source.skipped_warning():
        log(f"kcsim run: {warning}")
    total_files = options.source.known_files() if options.once else None
    batcher = BatchRunner(spark, lake, options, log, total_files)
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
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    finally:
        if options.sink is not None:
            options.sink.close()
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
            # freed here, by reference counting: alive when the collector resumes, the
            # batch's millions of rows would all be walked by its next collection
            del events, output
            release_freed_memory()  # (the rows, their Arrow tables, a merge's files)
        self.log(line)

    def _send(self, output: BatchOutput, batch_id: int, skip: Mapping[str, int]) -> None:
        """The batch's requests to the sink, which is written after the lake: only a
        re-run batch whose requests already reached the lake may have reached the sink."""
        assert self.options.sink is not None
        requests = output.appends.get("controller_requests") or []
        payloads = output.appends.get("request_payloads") or []
        sent_before = "controller_requests" in skip or "request_payloads" in skip
        held = self.options.sink.send(requests, payloads, may_be_rerun=sent_before)
        if held:
            self.log(f"batch {batch_id}: re-run; {held} request records already in the sink")

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
        line = (
            f"batch {batch_id}: {len(events)} events, {len(clusters)} clusters, "
            f"{len(appends.get('rejected_events') or [])} rejected, "
            f"{len(appends.get('controller_requests') or [])} requests, "
            f"{clock.total():.2f} s ({clock.laps()})"
        )
        if self.total_files:
            line += " " + progress_bar(self.files_done, self.total_files)
        return line


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


# -------------------------------------------------------------------------- sources


@dataclass(frozen=True, slots=True)
class FileSource:
    directory: str
    max_files_per_trigger: int | None = None

    def stream(self, spark: SparkSession, checkpoint: str) -> DataFrame:
        """Files in name order (`streaming.file_source`); the names it admitted are kept
        beside the checkpoint's offsets, in `<checkpoint>/files/`."""
        from streaming.file_source import FORMAT, KcsimFiles

        spark.dataSource.register(KcsimFiles)
        reader = (
            spark.readStream.format(FORMAT)
            .option("path", self.local_directory())
            .option("checkpoint", local_path(checkpoint))
        )
        if self.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", str(self.max_files_per_trigger))
        return reader.load()

    def events(self, batch: DataFrame) -> tuple[list[RawEvent], int, dict[str, list[Row]]]:
        """The batch's events in order, how many event files it held, and the rows of the
        late files' lines (rejected, never applied: `streaming.file_source`)."""
        data = batch.select("admitted", "name", "late_after", "content").toArrow()
        files = sorted(
            zip(
                data.column("admitted").to_pylist(),
                data.column("name").to_pylist(),
                data.column("late_after").to_pylist(),
                data.column("content").to_pylist(),
                strict=True,
            )
        )
        events: list[RawEvent] = []
        refused: dict[str, list[Row]] = {"rejected_events": [], "divergences": []}
        for _, name, late_after, content in files:
            lines = split_lines(content or b"", name)
            if late_after is None:
                events.extend(lines)
                continue
            for table, rows in refused_rows(lines, late_reason(name, late_after)).items():
                refused[table].extend(rows)
        return events, len(files), refused

    def local_directory(self) -> str:
        return local_path(self.directory)

    def known_files(self) -> int | None:
        """How many event files the directory holds now."""
        return len(self._local_names())

    def skipped_warning(self) -> str | None:
        """What replay would say of the files the directory holds now that the job skips."""
        return skipped_files_warning(Path(self.local_directory()))

    def check(self) -> str | None:
        """What is wrong with the directory, before Spark starts (None: nothing)."""
        local = self.local_directory()
        if not os.path.exists(local):
            return f"the source directory {local} does not exist"
        if not os.path.isdir(local):
            return f"the source {local} is not a directory"
        if not os.access(local, os.R_OK | os.X_OK):
            return f"the source directory {local} cannot be read"
        try:
            self.check_names()
        except EventFileNameError as error:
            return str(error)
        return None

    def check_names(self) -> None:
        """Refuse an event file whose name is not UTF-8, as replay does."""
        for name in self._local_names():
            check_file_name(name)

    def _local_names(self) -> list[str]:
        local = self.local_directory()
        return [e.name for e in os.scandir(local) if e.is_file() and is_event_file(e.name)]


def late_reason(name: str, late_after: str) -> str:
    return (
        f"event file {name} arrived after {late_after} had been applied: files apply in name "
        f"order, so it is not applied (give it a name that sorts after {late_after} to apply "
        "its events)"
    )


@dataclass(frozen=True, slots=True)
class KafkaSource:
    bootstrap: str
    topic: str
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    client: KafkaClientConfig = field(default_factory=KafkaClientConfig)

    def stream(self, spark: SparkSession, checkpoint: str) -> DataFrame:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .options(**self.client.spark_options())
            .option("subscribe", self.topic)
            .option("startingOffsets", self.starting_offsets)
        )
        if self.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets_per_trigger))
        return reader.load()

    def events(self, batch: DataFrame) -> tuple[list[RawEvent], int, dict[str, list[Row]]]:
        data = batch.select("topic", "partition", "offset", "value").toArrow()
        return records_to_events(data), 0, {}

    def known_files(self) -> int | None:
        return None

    def skipped_warning(self) -> str | None:
        return None  # (a topic has no files to skip)


def records_to_events(data: pa.Table) -> list[RawEvent]:
    """Kafka records in (topic, partition, offset) order; a null value reads as ""."""
    records = sorted(
        zip(
            data.column("topic").to_pylist(),
            data.column("partition").to_pylist(),
            data.column("offset").to_pylist(),
            data.column("value").to_pylist(),
            strict=True,
        ),
        key=lambda r: (r[0], r[1], r[2]),
    )
    return [
        RawEvent(
            "" if value is None else bytes(value).decode("utf-8", "surrogateescape"),
            f"{topic}/{partition}/{offset}",
        )
        for topic, partition, offset, value in records
    ]


# ---------------------------------------------------------------------------- fleet

_FLEET_OUT = "table string, kind string, row string"
_GROUP = "_kcsim_cluster"


def apply_fleet(
    spark: SparkSession,
    lake: Lake,
    settings: Settings,
    events: Sequence[RawEvent],
    before: dict[str, int],
) -> BatchOutput:
    """Apply a batch per cluster on the executors; see the module docstring."""
    output = BatchOutput(
        appends={t.name: [] for t in APPEND_TABLES},
        upserts={t.name: [] for t in STATE_TABLES},
        deletes={t.name: [] for t in STATE_TABLES},
    )
    if not events:
        return output
    frame = spark.createDataFrame(
        pa.table(
            {
                "ord": pa.array(range(len(events)), pa.int64()),
                "raw": pa.array([e.raw.encode("utf-8", "surrogateescape") for e in events]),
                "source": pa.array([e.source for e in events], pa.string()),
            }
        )
    )
    # The group is the cluster as the core reads it for every valid event (the parser
    # refuses duplicate keys, so get_json_object cannot disagree); lines that are not JSON
    # objects group under null and are rejected whatever the state.
    text = F.col("raw").cast("string")
    frame = frame.withColumn(
        _GROUP,
        F.when(
            F.ltrim(text).startswith("{"),
            F.coalesce(F.get_json_object(text, "$.cluster"), F.lit("default")),
        ),
    )
    clusters = frame.select(_GROUP).distinct()
    state = None
    for name, columns in RESTORE_TABLES.items():
        version = before.get(name)
        table = lake.read(name, None if version is None else version - 1)
        if columns is not None:
            table = table.select(*columns)
        rows = table.join(
            clusters.withColumnRenamed(_GROUP, "cluster"), "cluster", "left_semi"
        ).select(
            F.col("cluster").alias(_GROUP),
            F.lit(name).alias("table"),
            F.to_json(F.struct(*table.columns), {"ignoreNullFields": "false"}).alias("row"),
        )
        state = rows if state is None else state.unionByName(rows)
    assert state is not None
    result = (
        frame.groupBy(_GROUP)
        .cogroup(state.groupBy(_GROUP))
        .applyInPandas(_cluster_function(settings), _FLEET_OUT)
        .toArrow()
    )
    for table, kind, row in zip(
        result.column("table").to_pylist(),
        result.column("kind").to_pylist(),
        result.column("row").to_pylist(),
        strict=True,
    ):
        getattr(output, kind)[table].append(json.loads(row))
    return output


def _cluster_function(settings: Settings) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    # Nested, not module-level: cloudpickle ships a nested function by value, while a
    # module-level one would be imported from `streaming`, which executors do not have
    # (only the core is shipped).
    def apply_cluster(events: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        with frozen_heap_released():
            tables: dict[str, list[dict[str, Any]]] = {name: [] for name in RESTORE_TABLES}
            for name, row in zip(state["table"], state["row"], strict=True):
                tables[name].append(json.loads(row))
            simulator = Simulator.from_tables(settings, tables)
            events = events.sort_values("ord")
            batch = [
                RawEvent(bytes(raw).decode("utf-8", "surrogateescape"), source)
                for raw, source in zip(events["raw"], events["source"], strict=True)
            ]
            output = simulator.apply(batch)
            out: dict[str, list[str]] = {"table": [], "kind": [], "row": []}
            for kind in ("appends", "upserts", "deletes"):
                for name, rows in getattr(output, kind).items():
                    for row in rows:
                        out["table"].append(name)
                        out["kind"].append(kind)
                        out["row"].append(json.dumps(row, separators=(",", ":")))
            return pd.DataFrame(out)

    return apply_cluster
