"""A local lake read without Spark, for `kcsim state` and `kcsim history`.

Starting Spark costs ~15 s; these commands only read. deltalake (delta-rs) replays each
table's log: a version's files, its schema and protocol, the commits' `userMetadata`, the
Change Data Feed. pyarrow.parquet reads the data files. deltalake's own table readers
(`to_pyarrow_table`) are not used: called on several tables in one process they make the
interpreter abort at exit (deltalake 1.6.6; `load_cdf` does not).

Commit times are the ones Delta Spark reports (DESCRIBE HISTORY, the CDF's
`_commit_timestamp`): the commit file's modification time in ms, raised where needed to
exceed the previous commit's; deltalake reports `commitInfo.timestamp`, tens of ms earlier.

A table is read here only when reading its files is all it takes: reader version 1 (no
deletion vectors, no column mapping), no partition columns, every file holding every
column. Otherwise `NotNative`, and the commands read the lake through Spark.
"""

from __future__ import annotations

import os
import struct
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from streaming.lake.delta_files import NotNative, read_files
from streaming.lake.spark_schemas import arrow_schema
from streaming.lake.time_travel import Commit

__all__ = ["LakeReader", "NotNative", "local_root", "matching"]

CHANGE_COLUMNS = ("_change_type", "_commit_version")


def local_root(lake: str) -> str | None:
    """The lake's local directory (a plain path or a `file:` URI), None elsewhere."""
    parsed = urlparse(lake)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return unquote(parsed.path)
    return lake if parsed.scheme == "" else None


def matching(data: pa.Table, **values: Any) -> pa.Table:
    """The rows whose columns equal `values` (a tuple: any of its values; null matches
    nothing, as in Spark). Boolean masks, not a filter expression: that loads pyarrow's
    dataset engine, and pandas with it, ~0.5 s of a command taking ~1."""
    mask = None
    for column, wanted in values.items():
        data_type = data.schema.field(column).type
        equal = None
        for value in wanted if isinstance(wanted, tuple) else (wanted,):
            one = pc.equal(data.column(column), _scalar(value, data_type))
            equal = one if equal is None else pc.or_(equal, one)
        mask = equal if mask is None else pc.and_(mask, equal)
    return data if mask is None else data.filter(mask)


def _scalar(value: str | int, data_type: pa.DataType) -> pa.Scalar:
    """`value` as an Arrow scalar, built from its bytes: pyarrow's conversions of Python
    values import pandas. Strings as the lake stores them (undecodable bytes escaped)."""
    if pa.types.is_string(data_type):
        text = str(value).encode("utf-8", "backslashreplace")
        offsets = pa.py_buffer(struct.pack("<2i", 0, len(text)))
        buffers = [None, offsets, pa.py_buffer(text)]
    elif pa.types.is_int32(data_type) or pa.types.is_int64(data_type):
        buffers = [
            None,
            pa.py_buffer(struct.pack("<i" if data_type == pa.int32() else "<q", value)),
        ]
    else:
        raise TypeError(f"no scalar of {data_type} here")
    return pa.Array.from_buffers(data_type, 1, buffers)[0]


class LakeReader:
    """The tables of a lake under a local directory."""

    __slots__ = ("root",)

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/") or "/"

    def table(self, name: str, version: int | None = None) -> DeltaTable:
        """The table's log at `version` (None: the latest), checked to be readable here."""
        path = os.path.join(self.root, name)
        try:
            table = DeltaTable(path, version=version)
        except TableNotFoundError:
            raise ValueError(f"no Delta table at {path}") from None
        except DeltaError as error:  # a feature delta-rs does not read, a broken log
            raise NotNative(f"{name}: {error}") from None
        reader_version = table.protocol().min_reader_version
        if reader_version > 1:
            raise NotNative(f"{name} needs reader version {reader_version}")
        if table.metadata().partition_columns:
            raise NotNative(f"{name} is partitioned")
        return table

    def columns(self, name: str, version: int | None = None) -> list[str]:
        """The table's columns in its schema's order."""
        return [field.name for field in self.table(name, version).schema().fields]

    def read(
        self, name: str, version: int | None = None, columns: list[str] | None = None
    ) -> pa.Table:
        """The table's rows at `version`, `columns` (default: kcsim's) in kcsim's types."""
        schema = arrow_schema(name)
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        return read_files(self.table(name, version).file_uris(), schema)

    def history(self, name: str) -> list[Commit]:
        """(version, commit time in epoch seconds, userMetadata) of every commit whose
        file is still in the log, oldest first."""
        log = os.path.join(self.root, name, "_delta_log")
        metadata = {
            entry["version"]: entry.get("userMetadata") for entry in self.table(name).history()
        }
        commits: list[Commit] = []
        previous = -1
        for version in sorted(metadata):
            try:
                modified = os.stat(os.path.join(log, f"{version:020d}.json")).st_mtime_ns
            except FileNotFoundError:  # cleaned up after a checkpoint: not in Delta's either
                continue
            previous = max(modified // 1_000_000, previous + 1)
            commits.append((version, previous / 1000, metadata[version]))
        return commits

    def changes(self, name: str) -> pa.Table:
        """The table's Change Data Feed from version 0: kcsim's columns and
        `_change_type`, `_commit_version` (commit times: `history`)."""
        table = self.table(name)
        schema = arrow_schema(name)
        try:
            # from_stream, not pa.table: that imports pandas to check for a DataFrame
            feed = pa.RecordBatchReader.from_stream(table.load_cdf(starting_version=0)).read_all()
        except DeltaError as error:
            raise NotNative(f"{name}'s change feed: {error}") from None
        if not set(schema.names + list(CHANGE_COLUMNS)) <= set(feed.column_names):
            raise NotNative(f"{name}'s change feed lacks columns of the table")
        columns = [feed.column(f.name).cast(f.type) for f in schema]
        types = feed.column("_change_type").cast(pa.string())
        versions = feed.column("_commit_version").cast(pa.int64())
        return pa.Table.from_arrays(
            [*columns, types, versions], names=[*schema.names, *CHANGE_COLUMNS]
        )
