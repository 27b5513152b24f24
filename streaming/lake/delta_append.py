"""Appending a batch's rows to a Delta table on the local file system without a Spark job.

An append through Spark converts the Arrow rows back into Spark rows and encodes Parquet
row by row in the JVM: measured on 2 cores, a 1M-event batch's 8M append rows cost ~45
CPU-seconds there and ~23 s of the batch. Here pyarrow writes the same Parquet (C++, off
the GIL, ~5 CPU-seconds; equivalent files, not byte-identical ones) and delta-spark's own
transaction commits the files: the same
log entry a Spark append makes (commitInfo with the batch's `userMetadata` tag, `add`
actions with statistics, the checksum file), through the same conflict checks and
post-commit hooks (checkpoints), with the metrics a Spark append reports in the history
(`numFiles`, `numOutputRows`, `numOutputBytes`). What kcsim gives up is Delta's public
API: the commit goes through `DeltaLog`/`OptimisticTransaction`, internal classes of the
pinned delta-spark (tests/test_delta_append.py and tests/test_delta_merge.py fail if they
change); and files hold up to 1M rows (Spark's, 200k).

File statistics are what Delta's data skipping reads, so they must never claim less than
the file holds: row count, null counts, and min/max of the table's statistics columns,
except string bounds longer than Delta's 32-character prefix, which are left out: Delta
keeps a truncated bound (with its own tie-breaking rules, in UTF-16 units), and an absent
bound only means a filter on that column always reads the file (DataSkippingReader's
verifyStatsForFilter). Up to 32 characters the bounds are exact, as Delta's are; a max
with characters beyond the BMP is exact where Delta's is cut in UTF-16 units, so tighter
but still true.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from streaming.lake.delta_files import NotNative

ROWS_PER_FILE = 1_000_000
STRING_PREFIX = 32  # spark.databricks.io.skipping.stringPrefixLength's default
CODEC = "snappy"  # as Spark writes Parquet by default


def local_directory(spark: SparkSession, path: str) -> str | None:
    """The local directory Delta (Hadoop) resolves `path` to, or None when that is on
    another file system. Resolved by Hadoop itself: it reads no %-escapes, keeps "#" and
    "?", takes a path without a scheme on `fs.defaultFS` and a relative one against the
    JVM's working directory, which a Python reading of the path would each get wrong."""
    jvm = spark._jvm
    assert jvm is not None
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    scheme = hadoop_path.toUri().getScheme()
    if scheme is not None and scheme != "file":
        return None  # not even loaded: its file system classes may be absent
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    file_system = hadoop_path.getFileSystem(conf)
    if file_system.getScheme() != "file":
        return None
    return str(file_system.makeQualified(hadoop_path).toUri().getPath())


def append(
    spark: SparkSession,
    table_path: str,
    directory: str,
    data: pa.Table,
    schema: str,
    stats_columns: Sequence[str],
    user_metadata: str,
) -> int:
    """Append `data` to the Delta table at `table_path`, whose files are in the local
    `directory` (what `local_directory` gives for it), in one commit tagged with
    `user_metadata`; returns the new table version. `schema` is the Spark schema `data`
    stands for (`simpleString`): the table's must be the same, as a Spark append checks (a
    commit of files alone checks nothing), and it is checked before any file is written."""
    transaction = start_transaction(spark, table_path, schema)
    files = write_data_files(directory, data, stats_columns, ROWS_PER_FILE)
    metrics = {
        "numFiles": len(files),
        "numOutputBytes": sum(f.size for f in files),
        "numOutputRows": data.num_rows,
    }
    operation = _append_operation(spark, user_metadata)
    return commit(spark, transaction, [f.action for f in files], operation, metrics)


@dataclass(frozen=True, slots=True)
class WrittenFile:
    action: str  # its `add` action, as JSON
    size: int  # bytes
    rows: int


def even_slices(rows: int, parts: int) -> list[tuple[int, int]]:
    """(start, length) of `parts` consecutive slices of `rows` rows whose lengths differ by
    at most one, the longer ones first."""
    base, longer = divmod(rows, parts)
    slices = []
    start = 0
    for index in range(parts):
        length = base + (index < longer)
        slices.append((start, length))
        start += length
    return slices


def write_data_files(
    directory: str, data: pa.Table, stats_columns: Sequence[str], rows_per_file: int
) -> list[WrittenFile]:
    """`data` as Parquet files of at most `rows_per_file` rows (as even as can be, written
    in parallel: pyarrow releases the GIL)."""
    files = max(1, -(-data.num_rows // rows_per_file))
    parts = [data.slice(start, length) for start, length in even_slices(data.num_rows, files)]
    if len(parts) == 1:
        return [_write_file(directory, parts[0], stats_columns)]
    with ThreadPoolExecutor(min(files, os.cpu_count() or 2)) as pool:
        return list(pool.map(lambda part: _write_file(directory, part, stats_columns), parts))


def _write_file(directory: str, data: pa.Table, stats_columns: Sequence[str]) -> WrittenFile:
    """One Parquet file of `data`."""
    name = f"part-00000-{uuid.uuid4()}-c000.{CODEC}.parquet"
    path = os.path.join(directory, name)
    pq.write_table(data, path, compression=CODEC)
    info = os.stat(path)
    add = {
        "path": name,
        "partitionValues": {},
        "size": info.st_size,
        "modificationTime": info.st_mtime_ns // 1_000_000,
        "dataChange": True,
        "stats": json.dumps(file_stats(data, stats_columns), separators=(",", ":")),
    }
    action = json.dumps({"add": add}, separators=(",", ":"))
    return WrittenFile(action, info.st_size, data.num_rows)


def file_stats(data: pa.Table, stats_columns: Sequence[str]) -> dict[str, Any]:
    """Delta's per-file statistics of `stats_columns` (flat columns)."""
    minimums: dict[str, Any] = {}
    maximums: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in stats_columns:
        column = data.column(name)
        # only what kcsim's statistics columns hold; booleans or floats would need
        # Delta's rules for them (NaN, no bounds for booleans)
        assert pa.types.is_integer(column.type) or pa.types.is_string(column.type), name
        nulls[name] = column.null_count
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is None:  # only nulls: Delta writes no bounds either
            continue
        if isinstance(low, str) and max(len(low), len(high)) > STRING_PREFIX:
            continue
        minimums[name], maximums[name] = low, high
    return {
        "numRecords": data.num_rows,
        "minValues": minimums,
        "maxValues": maximums,
        "nullCount": nulls,
    }


# What a plain commit of Parquet files may skip: Delta features that change how files are
# written (column mapping, partitions), what they must hold (constraints, generated or
# identity columns, row tracking) or how rows are deleted (deletion vectors) take Delta's
# own writer. kcsim's tables use none; a table that does is written through Spark.
PLAIN_WRITER_FEATURES = frozenset({"appendOnly", "invariants", "changeDataFeed"})
PLAIN_WRITER_VERSION = 4  # legacy protocols up to CDF; 5 adds column mapping, 6 identity


def start_transaction(spark: SparkSession, table_path: str, schema: str) -> Any:
    """delta-spark's OptimisticTransaction on the table, once the table is one a plain
    commit of files can write: its schema `schema` (as a Spark append checks; a commit of
    files alone checks nothing) and none of the features it would have to honour.
    Otherwise `delta_files.NotNative`, before anything is written."""
    jvm = spark._jvm
    assert jvm is not None
    session = spark._jsparkSession
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(session, table_path)
    transaction = log.startTransaction()
    metadata = transaction.metadata()
    found = metadata.schema().simpleString()
    if found != schema:
        raise NotNative(
            f"the Delta table at {table_path} has the schema {found}, the rows {schema}"
        )
    protocol = transaction.protocol()
    # each collection as one string: iterating one through py4j costs a call per item
    features = set(str(protocol.writerFeatureNames().mkString("\n")).split())
    plain = features <= PLAIN_WRITER_FEATURES
    if protocol.minWriterVersion() < 7:
        plain = protocol.minWriterVersion() <= PLAIN_WRITER_VERSION
    configuration = str(metadata.configuration().keySet().mkString("\n")).split("\n")
    constrained = any(key.startswith("delta.constraints.") for key in configuration)
    schema_json = str(metadata.schemaString())
    special_columns = any(
        marker in schema_json
        for marker in ('"nullable":false', '"delta.generationExpression"', '"delta.identity')
    )
    if not plain or constrained or special_columns or metadata.partitionColumns().nonEmpty():
        raise NotNative(
            f"the Delta table at {table_path} uses features a plain commit of files does "
            f"not honour (writer features {sorted(features)}, constraints, partitions)"
        )
    return transaction


def commit(
    spark: SparkSession,
    transaction: Any,
    actions: Sequence[Any],
    operation: Any,
    metrics: Mapping[str, int],
) -> int:
    """Commit `actions` (JSON text, or delta-spark Action objects) as `operation`, with
    `metrics` as the history's operationMetrics (the names a Spark job of the operation
    reports); returns the new table version."""
    jvm = spark._jvm
    assert jvm is not None
    registered = jvm.scala.Predef.Map().empty()
    for name, value in metrics.items():
        metric = jvm.org.apache.spark.sql.execution.metric.SQLMetrics.createMetric(
            spark._jsc.sc(),
            name,
        )
        metric.set(value)
        registered = registered.updated(name, metric)
    transaction.registerSQLMetrics(spark._jsparkSession, registered)
    from_json = jvm.org.apache.spark.sql.delta.actions.Action.fromJson
    java_actions = jvm.java.util.ArrayList()
    for action in actions:
        java_actions.add(from_json(action) if isinstance(action, str) else action)
    to_scala = jvm.scala.jdk.javaapi.CollectionConverters.asScala
    # Delta reads session settings (a MERGE's userMetadata tag among them) from the
    # thread's active session: in foreachBatch that is the query's clone, whose settings
    # were copied when it started
    sessions = jvm.org.apache.spark.sql.SparkSession
    active = sessions.getActiveSession()
    sessions.setActiveSession(spark._jsparkSession)
    try:
        return int(transaction.commit(to_scala(java_actions).toList(), operation))
    finally:
        if active.isDefined():
            sessions.setActiveSession(active.get())
        else:
            sessions.clearActiveSession()


def _append_operation(spark: SparkSession, user_metadata: str) -> Any:
    """DeltaOperations.Write(mode, partitionBy, predicate, userMetadata, and five options
    a plain append leaves unset): what DataFrameWriter's append records."""
    jvm = spark._jvm
    assert jvm is not None
    to_scala = jvm.scala.jdk.javaapi.CollectionConverters.asScala
    none = jvm.scala.Option.empty()
    no_partitions = jvm.scala.Option.apply(to_scala(jvm.java.util.ArrayList()).toList())
    return jvm.org.apache.spark.sql.delta.DeltaOperations.Write(
        jvm.org.apache.spark.sql.SaveMode.Append,
        no_partitions,
        none,
        jvm.scala.Option.apply(user_metadata),
        none,
        none,
        none,
        none,
        none,
    )
