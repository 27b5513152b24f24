"""A local Delta table's files as its log lists them, read with pyarrow.

Reading a table through Spark costs Spark jobs: Delta's log replay, then the scan, then
the rows' way back to Python. At start and restart the job reads every state table (a
100k-partition cluster: ~25 s on a cold JVM, ~5 s warm) and the history of every table;
on a local lake both come from the files themselves:

* a snapshot's files from its checksum file (`allFilesInCrc`: Delta lists them there
  for tables of up to `spark.databricks.delta.allFilesInCrc.thresholdNumFiles` files),
  read by pyarrow; a table whose checksum lists none, or with deletion vectors, is not
  read here (`NotNative`: the caller reads it through Spark);
* recent commits' `userMetadata` from the commit files of `_delta_log`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:  # read_files and NotNative serve the Spark-free `kcsim state` too
    from pyspark.sql import SparkSession

_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")

T = TypeVar("T")


class NotNative(Exception):
    """The table holds something this package does not read or write (no file list in
    its checksum, deletion vectors, files elsewhere): use Spark for it."""


def listed_files(spark: SparkSession, snapshot: Any, directory: str) -> list[tuple[Any, dict]]:
    """The snapshot's files as its checksum file lists them: delta-spark's AddFile and its
    `add` action as a dict, per file."""
    checksum = snapshot.checksumOpt()
    listed = checksum.get().allFiles() if checksum.isDefined() else None
    if listed is None or not listed.isDefined():
        raise NotNative(f"the checksum of {directory} at v{snapshot.version()} lists no files")
    jvm = spark._jvm
    assert jvm is not None
    files = []
    for action in jvm.scala.jdk.javaapi.CollectionConverters.asJava(listed.get()):
        add = json.loads(action.json())["add"]
        if add.get("deletionVector"):
            raise NotNative(f"{add['path']} has a deletion vector")
        files.append((action, add))
    return files


def local_path(directory: str, path: str) -> str:
    """The local file of a log entry's path (a URI, relative to the table or absolute)."""
    parsed = urlparse(path)
    if parsed.scheme not in ("", "file"):
        raise NotNative(f"{path} is not on the local file system")
    local = unquote(parsed.path)
    return local if os.path.isabs(local) else os.path.join(directory, local)


def read_table(
    spark: SparkSession,
    table_path: str,
    directory: str,
    schema: pa.Schema,
    version: int | None = None,
    key: Sequence[str] = (),
) -> pa.Table:
    """The table's rows at `version` (the latest when None), the columns of `schema` in
    its types (Spark's files name list items and mark nullability their own way). With
    `key`, the files are read in the order of their key ranges (`in_key_order`): a table
    whose files each hold a sorted range of keys apart from the others' comes back sorted
    by key without a sort."""
    jvm = spark._jvm
    assert jvm is not None
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession,
        table_path,
    )
    if version is None:
        snapshot = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())
    else:
        none = jvm.scala.Option.empty()
        snapshot = log.getSnapshotAt(version, none, none, False)
    adds = [add for _, add in listed_files(spark, snapshot, directory)]
    if key:
        adds = in_key_order(adds, key, [column_bounds(add) for add in adds])
    return read_files([local_path(directory, add["path"]) for add in adds], schema)


Bounds = tuple[Mapping[str, Any], Mapping[str, Any]]


def column_bounds(add: Mapping[str, Any]) -> Bounds:
    """A file's columns' minimums and maximums, from the statistics of its `add` action
    (empty where it has none)."""
    stats = json.loads(add.get("stats") or "{}")
    return stats.get("minValues", {}), stats.get("maxValues", {})


def in_key_order(items: Sequence[T], key: Sequence[str], bounds: Sequence[Bounds]) -> list[T]:
    """`items` (files) sorted by the bounds of their `key` columns (`bounds[i]`: item i's
    minimums and maximums): by the first column's minimum, then its maximum, then the next
    column's. Files that hold disjoint sorted ranges of keys come out in key order: two
    such files whose first column has the same bounds hold a single value of it, so the
    next column decides. A file without bounds comes last."""

    def order(position: int) -> tuple[tuple[bool, Any], ...]:
        pair = bounds[position]
        return tuple((values.get(c) is None, values.get(c)) for c in key for values in pair)

    return [items[i] for i in sorted(range(len(items)), key=order)]


def read_files(paths: Sequence[str], schema: pa.Schema) -> pa.Table:
    """Data files' rows, the columns of `schema` in its types."""
    if not paths:
        # not schema.empty_table(): that imports pandas (~0.5 s of a Spark-free command)
        return pa.RecordBatchReader.from_batches(schema, []).read_all()
    parts = []
    for path in paths:
        # a file at a time, not `pq.read_table`: that goes through pyarrow.dataset, whose
        # import (pandas with it) is ~0.6 s of a Spark-free `kcsim state`
        with pq.ParquetFile(path) as parquet:
            present = set(parquet.schema_arrow.names)
            if set(schema.names) <= present:
                parts.append(parquet.read(columns=schema.names).cast(schema))
                continue
            # written before a column was added (ALTER TABLE ADD COLUMNS, Lake.create_tables
            # on an older lake): Delta reads nulls there, and so does this
            data = parquet.read(columns=[n for n in schema.names if n in present])
            columns = [
                data.column(f.name).cast(f.type)
                if f.name in present
                else pa.nulls(data.num_rows, f.type)
                for f in schema
            ]
            parts.append(pa.Table.from_arrays(columns, schema=schema))
    return pa.concat_tables(parts)


def recent_tags(directory: str, count: int) -> list[tuple[int, str | None]]:
    """(version, userMetadata) of the table's last `count` commits, newest first, from
    its commit files."""
    log_directory = os.path.join(directory, "_delta_log")
    versions = sorted(
        (int(m[1]) for m in map(_COMMIT_FILE.match, os.listdir(log_directory)) if m),
        reverse=True,
    )[:count]
    return [(v, _user_metadata(os.path.join(log_directory, f"{v:020d}.json"))) for v in versions]


def _user_metadata(commit_file: str) -> str | None:
    with open(commit_file, encoding="utf-8") as commit:
        for line in commit:
            action = json.loads(line)
            if "commitInfo" in action:
                value: str | None = action["commitInfo"].get("userMetadata")
                return value
    return None
