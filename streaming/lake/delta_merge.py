"""A batch's MERGE into a kcsim state table on the local file system, without a Spark job.

The core knows every row a batch changes: the full new row of each upserted key and
the key of each deleted one. A Delta MERGE of them through Spark costs ~2 s however few
they are (log replay, a join to find the touched files, a second to rewrite them, all as
Spark jobs); it is most of a small batch's time. Here the same copy-on-write is done
with pyarrow, and delta-spark's own transaction commits it:

1. the table's files come from the checksum file of the transaction's snapshot (no
   Spark job), and the transaction records that the whole table was read (for Delta's
   conflict checks);
2. files whose key bounds hold none of the changed values in some key column are
   skipped (a binary search per file and column); the others are read, a group of
   `FILES_PER_GROUP` at a time (in key order), and those holding a changed key are
   touched;
3. the touched files are removed; each group's unchanged rows and the upserts of its keys
   are written as new files sorted by key, at most `ROWS_PER_FILE` rows each (what the
   session's `maxRecordsPerFile` gives a Spark MERGE), and so are the upserts of keys no
   file held (inserts);
4. the Change Data Feed gets the rows a Spark MERGE gives it (`update_preimage` and
   `update_postimage` for an upserted key that existed, `delete`, `insert`), in a
   `_change_data` file; a commit that only adds files carries none, since Delta infers
   inserts from the added files, as it does for a Spark MERGE that only inserts;
5. the commit is a MERGE in the table's history, tagged like every commit of the batch.

Deleting a key the table does not hold changes nothing, as in a MERGE. A table this does
not write (a schema or Delta features `delta_append.start_transaction` refuses, no file
list in the checksum, a file lacking a column) raises `delta_files.NotNative` before
anything is written, and Spark MERGEs it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from streaming.lake import delta_append, delta_files

ROWS_PER_FILE = 10_000
# touched files read and rewritten at a time: ~200k rows, a few tens of MB of Arrow
FILES_PER_GROUP = 20
CHANGE_TYPE = "_change_type"  # CDCReader.CDC_TYPE_COLUMN_NAME
CHANGE_DIRECTORY = "_change_data"  # CDCReader.CDC_LOCATION
_ROW = "__kcsim_row"  # a row's position in its table, carried through joins


@dataclass(frozen=True, slots=True)
class MergeText:
    """A MERGE's conditions as SQL text: what Spark runs and the history records."""

    condition: str  # the join of target `t` and source `s`
    delete_when: str  # a matched source row deletes
    upsert_when: str  # a source row updates, or inserts when unmatched


@dataclass(frozen=True, slots=True)
class DataFile:
    """A data file of the table, as its `add` action lists it."""

    action: Any  # delta-spark's AddFile, kept to commit its removal
    local_path: str
    size: int
    minimums: Mapping[str, Any]
    maximums: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class GroupChanges:
    """What a MERGE does to one group of touched files (their kept rows aside)."""

    kept_rows: int  # rows of the group whose key the batch does not change
    preimages: pa.Table  # old rows of upserted keys
    deleted: pa.Table  # old rows of deleted keys
    updated: pa.Array  # positions in the upserts of the keys the group held


@dataclass(frozen=True, slots=True)
class Changes:
    """What a MERGE does to the touched files' rows, for its metrics and change feed."""

    kept_rows: int  # rows of touched files whose key the batch does not change
    preimages: pa.Table
    deleted: pa.Table
    updated: pa.Table  # upserts of keys the table held
    inserted: pa.Table  # upserts of keys it did not

    @classmethod
    def of_groups(cls, groups: Sequence[GroupChanges], upserts: pa.Table) -> Changes:
        """Every group's changes; an upsert no group held inserts."""
        updated = pa.concat_arrays([g.updated for g in groups] or [pa.array([], pa.int64())])
        updated = updated.take(pc.sort_indices(updated))
        empty = upserts.slice(0, 0)
        return cls(
            kept_rows=sum(g.kept_rows for g in groups),
            preimages=pa.concat_tables([g.preimages for g in groups] or [empty]),
            deleted=pa.concat_tables([g.deleted for g in groups] or [empty]),
            updated=upserts.take(updated),
            inserted=_without(upserts, updated),
        )


def merge(
    spark: SparkSession,
    table_path: str,
    directory: str,
    schema: str,
    key: Sequence[str],
    upserts: pa.Table,
    deleted_keys: pa.Table,
    text: MergeText,
) -> int:
    """MERGE `upserts` (full rows, one per key) and `deleted_keys` (none of them
    upserted) into the table at `table_path`, whose files are in the local `directory`,
    in one commit; returns its version. `schema` is the rows' Spark schema, which must be
    the table's (as for `delta_append.append`); `text` is what the history records."""
    began = time.perf_counter()
    transaction = delta_append.start_transaction(spark, table_path, schema)
    files = data_files(spark, transaction, directory)
    changed_keys = pa.concat_tables([upserts.select(key), deleted_keys.select(key)])
    touched: list[DataFile] = []
    written: list[delta_append.WrittenFile] = []
    groups: list[GroupChanges] = []
    scan_seconds = 0.0
    for group in _groups(candidates(files, changed_keys, key), key):
        reading = time.perf_counter()
        group_touched, old = touched_files(group, changed_keys, key, upserts.schema)
        scan_seconds += time.perf_counter() - reading
        if group_touched:
            group_changes, rows = split_group(old, upserts, deleted_keys, key)
            del old  # freed before the next group is read
            written += _write_sorted(directory, rows, key)
            touched += group_touched
            groups.append(group_changes)
    changes = Changes.of_groups(groups, upserts)
    written += _write_sorted(directory, changes.inserted, key)
    # a commit that only adds files needs no change file: Delta reads them as inserts
    change_files = (
        [_write_change_file(directory, changes)]
        if touched and _change_feed_enabled(transaction)
        else []
    )
    actions = [f.action.remove() for f in touched] + [f.action for f in written] + change_files
    done = time.perf_counter()
    metrics = {
        "operationNumSourceRows": upserts.num_rows + deleted_keys.num_rows,
        "numTargetRowsInserted": changes.inserted.num_rows,
        "numTargetRowsUpdated": changes.updated.num_rows,
        "numTargetRowsMatchedUpdated": changes.updated.num_rows,
        "numTargetRowsDeleted": changes.deleted.num_rows,
        "numTargetRowsMatchedDeleted": changes.deleted.num_rows,
        "numTargetRowsCopied": changes.kept_rows,
        "numTargetFilesAdded": len(written),
        "numTargetFilesRemoved": len(touched),
        "numTargetChangeFilesAdded": len(change_files),
        "numTargetBytesAdded": sum(f.size for f in written),
        "numTargetBytesRemoved": sum(f.size for f in touched),
        "executionTimeMs": round((done - began) * 1000),
        "scanTimeMs": round(scan_seconds * 1000),
        "rewriteTimeMs": round((done - began - scan_seconds) * 1000),
    }
    operation = _merge_operation(spark, text)
    return delta_append.commit(spark, transaction, actions, operation, metrics)


def data_files(spark: SparkSession, transaction: Any, directory: str) -> list[DataFile]:
    """The files of the transaction's snapshot, with the key bounds of their statistics;
    the transaction records that it read the whole table (for Delta's conflict checks).
    The list comes from the checksum file: `filterFiles` would run a Spark job (~2 s)."""
    files = []
    for action, add in delta_files.listed_files(spark, transaction.snapshot(), directory):
        minimums, maximums = delta_files.column_bounds(add)
        path = delta_files.local_path(directory, add["path"])
        files.append(DataFile(action, path, add["size"], minimums, maximums))
    transaction.readWholeTable()
    return files


def candidates(files: list[DataFile], keys: pa.Table, key: Sequence[str]) -> list[DataFile]:
    """The files whose statistics allow them to hold one of `keys`: in every key column,
    some changed value lies within the file's bounds (a column without bounds allows
    anything). Column by column rather than key by key, so a superset of the files whose
    bounds box a key, but found by binary search: O(files x columns x log values), where
    testing every key against every file would be O(files x keys)."""
    if not keys.num_rows:
        return []
    values = {c: sorted(pc.unique(keys.column(c)).to_pylist()) for c in key}
    return [
        data_file
        for data_file in files
        if all(
            _any_within(values[c], data_file.minimums.get(c), data_file.maximums.get(c))
            for c in key
        )
    ]


def _any_within(ordered: list[Any], low: Any, high: Any) -> bool:
    """Whether a value of `ordered` (sorted) lies in [low, high]; unknown bounds allow all.
    Strings compare by code point in Python, by UTF-8 bytes in Delta: the same order."""
    if low is None or high is None:
        return True
    position = bisect_left(ordered, low)
    return position < len(ordered) and ordered[position] <= high


def touched_files(
    files: list[DataFile], keys: pa.Table, key: Sequence[str], schema: pa.Schema
) -> tuple[list[DataFile], pa.Table]:
    """The files holding one of `keys`, and their rows (each candidate is read once,
    whole: at most ROWS_PER_FILE rows, and a candidate is nearly always touched)."""
    touched: list[DataFile] = []
    parts: list[pa.Table] = []
    for data_file in candidates(files, keys, key):
        rows = delta_files.read_files([data_file.local_path], schema)
        if rows.select(key).join(keys, list(key), join_type="left semi").num_rows:
            touched.append(data_file)
            parts.append(rows)
    return touched, pa.concat_tables(parts) if parts else schema.empty_table()


def split_group(
    old: pa.Table, upserts: pa.Table, deleted_keys: pa.Table, key: Sequence[str]
) -> tuple[GroupChanges, pa.Table]:
    """What the batch does to `old`, the rows of a group of touched files, and the
    group's rows after it: its kept rows and the upserts of its keys."""
    upserted_old = _positions_of(old, upserts, key)
    deleted_old = _positions_of(old, deleted_keys, key)
    updated = _positions_of(upserts, old, key)
    kept = _without(old, pa.concat_arrays([upserted_old, deleted_old]))
    changes = GroupChanges(
        kept_rows=kept.num_rows,
        preimages=old.take(upserted_old),
        deleted=old.take(deleted_old),
        updated=updated,
    )
    return changes, pa.concat_tables([kept, upserts.take(updated)])


def _groups(files: list[DataFile], key: Sequence[str]) -> Iterator[list[DataFile]]:
    """`files` in groups of FILES_PER_GROUP, in the order of their key bounds: a merge
    holds one group's rows at a time (a broker's restart touches every file of a
    1M-partition table; read at once, its 3M replica rows and their copies were ~1 GB)."""
    ordered = delta_files.in_key_order(files, key, [(f.minimums, f.maximums) for f in files])
    for start in range(0, len(ordered), FILES_PER_GROUP):
        yield ordered[start : start + FILES_PER_GROUP]


def _write_sorted(
    directory: str, rows: pa.Table, key: Sequence[str]
) -> list[delta_append.WrittenFile]:
    """`rows` as files sorted by key (none for no rows)."""
    if not rows.num_rows:
        return []
    ordered = rows.sort_by([(k, "ascending") for k in key])
    return delta_append.write_data_files(directory, ordered, key, ROWS_PER_FILE)


def _positions_of(rows: pa.Table, keys: pa.Table, key: Sequence[str]) -> pa.Array:
    """Positions of the `rows` whose key is among `keys`', in order."""
    numbered = rows.select(key).append_column(_ROW, pa.array(range(rows.num_rows), pa.int64()))
    matched = numbered.join(keys.select(key), list(key), join_type="left semi")
    positions = matched.column(_ROW).combine_chunks()
    return positions.take(pc.sort_indices(positions))


def _without(rows: pa.Table, positions: pa.Array) -> pa.Table:
    everything = pa.array(range(rows.num_rows), pa.int64())
    return rows.filter(pc.invert(pc.is_in(everything, value_set=positions)))


def _change_feed_enabled(transaction: Any) -> bool:
    setting = transaction.metadata().configuration().get("delta.enableChangeDataFeed")
    return bool(setting.isDefined()) and str(setting.get()).lower() == "true"


def _write_change_file(directory: str, changes: Changes) -> str:
    """The Change Data Feed rows of `changes` as one file; its `cdc` action as JSON."""
    parts = [
        (changes.preimages, "update_preimage"),
        (changes.updated, "update_postimage"),
        (changes.deleted, "delete"),
        (changes.inserted, "insert"),
    ]
    rows = pa.concat_tables(
        [t.append_column(CHANGE_TYPE, pa.repeat(pa.scalar(kind), t.num_rows)) for t, kind in parts]
    )
    name = f"{CHANGE_DIRECTORY}/cdc-00000-{uuid.uuid4()}.c000.{delta_append.CODEC}.parquet"
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(rows, path, compression=delta_append.CODEC)
    cdc = {
        "path": name,
        "partitionValues": {},
        "size": os.stat(path).st_size,
        "dataChange": False,
    }
    return json.dumps({"cdc": cdc}, separators=(",", ":"))


def _merge_operation(spark: SparkSession, text: MergeText) -> Any:
    """DeltaOperations.Merge(predicate, three deprecated ones, then the matched, not
    matched and not-matched-by-source clauses), as a Spark MERGE records it."""
    jvm = spark._jvm
    assert jvm is not None
    operations = jvm.org.apache.spark.sql.delta.DeltaOperations
    to_scala = jvm.scala.jdk.javaapi.CollectionConverters.asScala
    option = jvm.scala.Option

    def clauses(*pairs: tuple[str, str]) -> Any:
        items = jvm.java.util.ArrayList()
        for predicate, action in pairs:
            items.add(operations.MergePredicate(option.apply(predicate), action))
        return to_scala(items).toList()

    upsert, delete = text.upsert_when, text.delete_when
    parser = spark._jsparkSession.sessionState().sqlParser()
    predicate = parser.parseExpression(text.condition)
    return operations.Merge(
        option.apply(predicate),
        option.empty(),
        option.empty(),
        option.empty(),
        clauses((delete, "delete"), (upsert, "update")),
        clauses((upsert, "insert")),
        clauses(),
    )
