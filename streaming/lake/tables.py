"""The Delta lake: one table per `schemas.TABLES` entry at `<lake>/<table>`.

Writes are exactly-once per (run, batch) without a marker table:

* every commit a batch makes carries `userMetadata = "kcsim:<run_id>:<batch_id>"`
  (`run_id` is the streaming query's id, stable across restarts of one checkpoint);
* a batch makes at most one commit per table (one append, or one MERGE holding the
  batch's upserts and deletes together).

Spark re-runs a batch only when it crashed before the batch's entry reached the
checkpoint's commit log, i.e. only the first batch after a restart, and only batches
whose writes may be partial. So at restart (`pending_commits`) the job looks up, per
table, the commit tagged with that batch: the state is loaded as of the version
*before* it (time travel, so the rebuilt controller is exactly the one that ran the
batch the first time, never a mix of before and after), the batch is recomputed
(the core is deterministic), and every table that already holds the batch's commit
is skipped. Loading the latest versions instead would be wrong: a crash between two
tables' commits leaves the lake half-way through a batch.

A local lake is written without Spark jobs: pyarrow writes the Parquet files and
delta-spark's own transaction commits them, with the same tag (`streaming.lake.delta_append`
for appends, `streaming.lake.delta_merge` for MERGEs: a Spark MERGE costs ~2 s however small).
Its tables are read at start and restart from their files too (`streaming.lake.delta_files`).
A lake on another file system is read and written through Spark.

Appends carry no `txnAppId`/`txnVersion`: the tags already make a re-run batch skip
every table it wrote, appends and MERGEs alike, and Delta's own check costs two extra
Spark jobs per append (measured: an append of 1k rows takes 1.3 s with it, 0.5 s
without, when a batch's commits run side by side on 2 cores).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from controller.columns import Columns
from controller.simulator import BatchOutput
from controller.snapshot import COLUMNAR_TABLES
from schemas import APPEND_TABLES, STATE_TABLES, TABLES, Table
from streaming.lake import delta_append, delta_files, delta_merge, time_travel
from streaming.lake.spark_schemas import (
    arrow_schema,
    arrow_to_columns,
    arrow_to_rows,
    rows_to_arrow,
    table_schema,
)

# What `Simulator.from_tables` is given at start and restart (table -> columns, None for
# all): the state tables, and the ids of applied events for duplicate detection.
RESTORE_TABLES: dict[str, tuple[str, ...] | None] = {
    **{t.name: None for t in STATE_TABLES},
    "applied_events": ("cluster", "event_id", "seq"),
    # a restart continues the election counts from each cluster's last row
    "health": (
        "cluster",
        "seq",
        "unclean_elections",
        "elr_elections",
        "last_known_leader_elections",
    ),
}
PENDING_LOOKBACK = 5
# Per-batch commits are small and frequent, so what they cost is fixed overhead, not
# data: no deletion vectors (a MERGE with them runs ~19 Spark jobs instead of ~8, and the
# state tables are small enough to rewrite a file), and a checkpoint every 100 commits
# rather than 10 (each checkpoint stalls its batch by a second or more; replaying up to
# 99 small JSON commits at start is cheap).
CHECKPOINT_INTERVAL = {"delta.checkpointInterval": "100"}
STATE_TABLE_PROPERTIES = {"delta.enableChangeDataFeed": "true", **CHECKPOINT_INTERVAL}
APPEND_TABLE_PROPERTIES = {"delta.appendOnly": "true", **CHECKPOINT_INTERVAL}
# File statistics (min/max per column, for data skipping) only on the columns queries
# filter by: collecting them on every column is a third of a small append's cost.
STATS_COLUMNS = {
    "controller_requests": ("cluster", "seq", "event_id", "broker"),
    "request_payloads": ("cluster", "seq", "event_id"),
    "state_changes": ("cluster", "seq", "topic", "partition"),
    "event_results": ("cluster", "seq", "topic", "partition"),
    "applied_events": ("cluster", "seq", "event_id"),
    "rejected_events": ("cluster",),
    "divergences": ("cluster", "seq", "topic", "partition"),
    "violations": ("cluster", "seq", "topic", "partition"),
    "health": ("cluster", "seq"),
    "metadata_records": ("cluster", "seq", "event_id"),
}


def table_properties(table: Table) -> dict[str, str]:
    if table.append_only:
        base, stats = APPEND_TABLE_PROPERTIES, STATS_COLUMNS[table.name]
    else:
        base, stats = STATE_TABLE_PROPERTIES, table.key
    return {**base, "delta.dataSkippingStatsColumns": ",".join(stats)}


class LakeSchemaError(ValueError):
    """A table of the lake has columns this kcsim cannot continue from."""


OP_COLUMN = "_kcsim_op"  # MERGE source: "U" upsert, "D" delete
_TAG = re.compile(r"^kcsim:(?P<run>[^:]+):(?P<batch>\d+)$")
# A batch's commits are CPU-bound in the driver (planning, Delta's log): more threads than
# cores only slows each one down (2 cores: 2.3 s per batch with 2 threads, 3.0 s with 4).
WRITE_THREADS = min(4, os.cpu_count() or 2)


def commit_tag(run_id: str, batch_id: int) -> str:
    return f"kcsim:{run_id}:{batch_id}"


def parse_tag(user_metadata: str | None) -> tuple[str, int] | None:
    match = _TAG.match(user_metadata or "")
    return (match["run"], int(match["batch"])) if match else None


@dataclass(frozen=True, slots=True)
class WriteStats:
    rows: dict[str, int]  # table -> rows appended / merged by this batch
    skipped: tuple[str, ...]  # tables that already held this batch's commit


class Lake:
    def __init__(self, spark: SparkSession, root: str, native: bool | None = None) -> None:
        """`native`: tables are written by `streaming.lake.delta_append` and
        `streaming.lake.delta_merge`, and read at start by `streaming.lake.delta_files` (pyarrow
        files, delta-spark's transactions and log) rather than by Spark jobs; by default
        when the lake is on the local file system, the only one they work on."""
        self.spark = spark
        self.root = root.rstrip("/")
        # where the lake is on the local file system, as Hadoop resolves it (None: elsewhere)
        self._local_root = delta_append.local_directory(spark, self.root)
        local = self._local_root is not None
        if native and not local:
            raise ValueError(f"native reads and writes need a local lake, not {root}")
        self.native = local if native is None else native
        # why tables were read or written through Spark although `native` (a table this
        # package does not handle: see delta_files.NotNative), newest last
        self.spark_fallbacks: list[str] = []

    def path(self, table: str) -> str:
        return f"{self.root}/{table}"

    # --- creation -------------------------------------------------------------------

    def create_tables(self) -> None:
        """Create every missing table (idempotent); a table of a lake written by an
        earlier kcsim that lacks columns added since (partition_state's `elr` and
        `last_known_elr`, health's ELR counts, the clusters' engine) gets them, null in
        its older rows, by ALTER TABLE ADD COLUMNS."""
        for table in STATE_TABLES + APPEND_TABLES:
            if DeltaTable.isDeltaTable(self.spark, self.path(table.name)):
                self._add_missing_columns(table)
                continue
            builder = (
                DeltaTable.createIfNotExists(self.spark)
                .location(self.path(table.name))
                .addColumns(table_schema(table))
            )
            for key, value in table_properties(table).items():
                builder = builder.property(key, value)
            builder.execute()

    def _add_missing_columns(self, table: Table) -> None:
        found = DeltaTable.forPath(self.spark, self.path(table.name)).toDF().schema
        names = [f.name for f in found.fields]
        wanted = table_schema(table)
        expected = [f.name for f in wanted.fields]
        if names == expected:
            return
        if names != expected[: len(names)]:
            raise LakeSchemaError(
                f"the Delta table at {self.path(table.name)} has the columns "
                f"{', '.join(names)}; this kcsim writes {', '.join(expected)} (a lake "
                "written by another program, or a newer kcsim?)"
            )
        added = ", ".join(
            f"`{f.name}` {f.dataType.simpleString()}" for f in wanted.fields[len(names) :]
        )
        self.spark.sql(f"ALTER TABLE delta.`{self.path(table.name)}` ADD COLUMNS ({added})")

    # --- reading --------------------------------------------------------------------

    def read(self, table: str, version: int | None = None) -> DataFrame:
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(self.path(table))

    def pending_commits(self, run_id: str, batch_id: int) -> dict[str, int]:
        """Tables already holding a commit of (run_id, batch_id), with its version.

        Only the last commits are looked at: the batch being re-run is the last one
        that wrote, so its commit is a table's latest (a few spare for maintenance
        commits such as OPTIMIZE made since)."""
        tag = commit_tag(run_id, batch_id)

        def find(name: str) -> int | None:
            if self.native:
                directory = self._local_directory(name)
                recent = delta_files.recent_tags(directory, PENDING_LOOKBACK)
                return min((v for v, meta in recent if meta == tag), default=None)
            rows = (
                DeltaTable.forPath(self.spark, self.path(name))
                .history(PENDING_LOOKBACK)
                .where(F.col("userMetadata") == tag)
                .select("version")
                .collect()
            )
            return min(r["version"] for r in rows) if rows else None

        with ThreadPoolExecutor(WRITE_THREADS) as pool:
            found = dict(zip(TABLES, pool.map(find, TABLES), strict=True))
        return {name: version for name, version in found.items() if version is not None}

    def load_rows(
        self,
        tables: Mapping[str, Sequence[str] | None] = RESTORE_TABLES,
        before: Mapping[str, int] | None = None,
        clusters: Collection[str] | None = None,
    ) -> dict[str, Columns | list[dict[str, Any]]]:
        """Rows of `tables` (name -> the columns wanted, None for all), each as of the
        version before `before[table]` when given, optionally only of `clusters`; maps
        come back as dicts. The COLUMNAR_TABLES come back as `Columns`."""
        before = before or {}

        def load(name: str) -> Columns | list[dict[str, Any]]:
            version = before.get(name)
            data = self._load(name, tables[name], None if version is None else version - 1)
            if clusters is not None:
                data = data.filter(
                    pc.is_in(data.column("cluster"), pa.array(list(clusters), pa.string()))
                )
            if name in COLUMNAR_TABLES:
                return arrow_to_columns(data)
            return arrow_to_rows(data, name) if tables[name] is None else data.to_pylist()

        with ThreadPoolExecutor(WRITE_THREADS) as pool:
            return dict(zip(tables, pool.map(load, tables), strict=True))

    def _load(self, name: str, columns: Sequence[str] | None, version: int | None) -> pa.Table:
        """A table's rows (`columns`, or all) at `version` (None: the latest)."""
        schema = arrow_schema(name)
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        if self.native:
            try:
                directory = self._local_directory(name)
                # in key order: a restore takes partitions in key order (snapshot.load)
                return delta_files.read_table(
                    self.spark, self.path(name), directory, schema, version, TABLES[name].key
                )
            except delta_files.NotNative as reason:
                self.spark_fallbacks.append(f"{name}: {reason}")
        return self.read(name, version).select(*schema.names).toArrow().cast(schema)

    def _local_directory(self, table: str) -> str:
        assert self._local_root is not None
        return os.path.join(self._local_root, table)

    def history(self, table: str) -> list[tuple[int, float, str | None]]:
        """(version, commit time in epoch seconds, userMetadata) of every commit, oldest
        first."""
        rows = (
            DeltaTable.forPath(self.spark, self.path(table))
            .history()
            .select("version", F.col("timestamp").cast("double").alias("timestamp"), "userMetadata")
            .orderBy("version")
            .collect()
        )
        return [(r["version"], r["timestamp"], r["userMetadata"]) for r in rows]

    def versions_as_of(self, as_of: str, tables: Iterable[str]) -> dict[str, int]:
        """A consistent cut of the lake (`streaming.lake.time_travel.consistent_cut`)."""
        histories = {name: self.history(name) for name in tables}
        return time_travel.consistent_cut(as_of, self.history("partition_state"), histories)

    # --- writing --------------------------------------------------------------------

    def write(
        self,
        output: BatchOutput,
        run_id: str,
        batch_id: int,
        skip: Collection[str] = (),
    ) -> WriteStats:
        """One commit per table the batch changes, tables written concurrently."""
        tag = commit_tag(run_id, batch_id)
        jobs: list[tuple[str, int, Any]] = []
        skipped: list[str] = []
        for table in APPEND_TABLES:
            rows = output.appends.get(table.name) or []
            if rows:
                if table.name in skip:
                    skipped.append(table.name)
                else:
                    jobs.append((table.name, len(rows), (self._append, table, rows)))
        for table in STATE_TABLES:
            upserts = output.upserts.get(table.name) or []
            deletes = output.deletes.get(table.name) or []
            if upserts or deletes:
                if table.name in skip:
                    skipped.append(table.name)
                else:
                    job = (self._merge, table, upserts, deletes)
                    jobs.append((table.name, len(upserts) + len(deletes), job))
        if not jobs:
            return WriteStats({}, tuple(skipped))
        # Longest first (MERGEs, then the biggest appends): the batch ends with its slowest
        # commit, so that one must not wait for a free thread.
        jobs.sort(key=lambda job: (job[2][0] != self._merge, -job[1]))
        # MERGE takes no writer options: the tag goes through the session's commitInfo
        # conf, set for the whole batch (writes of one batch run only here). Delta reads
        # it from the committing thread's active session, which in foreachBatch is the
        # query's clone: native commits make this session the active one, and Spark's
        # MERGE does so itself.
        conf_key = "spark.databricks.delta.commitInfo.userMetadata"
        self.spark.conf.set(conf_key, tag)
        try:
            if len(jobs) == 1:
                _, _, (fn, *fn_args) = jobs[0]
                fn(*fn_args, run_id, batch_id, tag)
            else:
                with ThreadPoolExecutor(min(WRITE_THREADS, len(jobs))) as pool:
                    futures = [
                        # (mypy 2.4 finds too few arguments when `fn` is Any)
                        pool.submit(fn, *fn_args, run_id, batch_id, tag)  # type: ignore[call-arg]
                        for _, _, (fn, *fn_args) in jobs
                    ]
                    for future in futures:
                        future.result()
        finally:
            self.spark.conf.unset(conf_key)
        return WriteStats({name: count for name, count, _ in jobs}, tuple(skipped))

    def _append(
        self, table: Table, rows: list[dict[str, Any]], run_id: str, batch_id: int, tag: str
    ) -> None:
        path = self.path(table.name)
        data = rows_to_arrow(rows, table)
        if self.native:
            stats = STATS_COLUMNS[table.name]
            directory = self._local_directory(table.name)
            schema = table_schema(table).simpleString()
            try:
                delta_append.append(self.spark, path, directory, data, schema, stats, tag)
                return
            except delta_files.NotNative as reason:
                self.spark_fallbacks.append(f"{table.name}: {reason}")  # nothing written
        (
            _sized(self.spark.createDataFrame(data, table_schema(table)), data.num_rows)
            .write.format("delta")
            .mode("append")
            .option("userMetadata", tag)
            .option("maxRecordsPerFile", 0)  # a batch's rows in one file per task
            .save(path)
        )

    def _merge(
        self,
        table: Table,
        upserts: list[dict[str, Any]],
        deletes: list[dict[str, Any]],
        run_id: str,
        batch_id: int,
        tag: str,
    ) -> None:
        text = merge_text(table)
        upserted, deleted = merge_rows(table, upserts, deletes)
        if self.native:
            try:
                delta_merge.merge(
                    self.spark,
                    self.path(table.name),
                    self._local_directory(table.name),
                    table_schema(table).simpleString(),
                    table.key,
                    upserted,
                    deleted.select(table.key),
                    text,
                )
                return
            except delta_files.NotNative as reason:
                self.spark_fallbacks.append(f"{table.name}: {reason}")  # nothing written
        data = merge_source(upserted, deleted)
        source = _sized(self.spark.createDataFrame(data), data.num_rows)
        values: dict[str, str | Column] = {c: f"s.`{c}`" for c in table.column_names}
        (
            DeltaTable.forPath(self.spark, self.path(table.name))
            .alias("t")
            .merge(source.alias("s"), text.condition)
            .whenMatchedDelete(condition=text.delete_when)
            .whenMatchedUpdate(condition=text.upsert_when, set=values)
            .whenNotMatchedInsert(condition=text.upsert_when, values=values)
            .execute()
        )


ROWS_PER_TASK = 200_000


def _sized(frame: DataFrame, rows: int) -> DataFrame:
    """A batch's rows in as few tasks as their size needs: a local relation is otherwise
    split into `spark.default.parallelism` tasks and files, however small."""
    return frame.coalesce(max(1, -(-rows // ROWS_PER_TASK)))


def merge_text(table: Table) -> delta_merge.MergeText:
    """The MERGE of a batch into `table`: target `t`, source `s` (`merge_source`)."""
    return delta_merge.MergeText(
        condition=" AND ".join(f"t.`{k}` = s.`{k}`" for k in table.key),
        delete_when=f"s.{OP_COLUMN} = 'D'",
        upsert_when=f"s.{OP_COLUMN} = 'U'",
    )


def merge_rows(
    table: Table, upserts: list[dict[str, Any]], deletes: list[dict[str, Any]]
) -> tuple[pa.Table, pa.Table]:
    """A batch's upserts (full rows) and deletes (keys), one row per key.

    A key both deleted and upserted in one batch (removed then created again) keeps
    its upsert: upserts hold every changed key's row as of the end of the batch."""
    if upserts and deletes:
        kept = {tuple(r[k] for k in table.key) for r in upserts}
        deletes = [r for r in deletes if tuple(r[k] for k in table.key) not in kept]
    return rows_to_arrow(upserts, table), rows_to_arrow(deletes, table)


def merge_source(upserted: pa.Table, deleted: pa.Table) -> pa.Table:
    """Spark's MERGE source: a batch's `merge_rows`, upserts then deletes, each marked by
    its op."""
    ops = pa.array(["U"] * upserted.num_rows + ["D"] * deleted.num_rows, pa.string())
    return pa.concat_tables([upserted, deleted]).append_column(OP_COLUMN, ops)
