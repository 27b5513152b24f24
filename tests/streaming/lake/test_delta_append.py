"""`streaming.lake.delta_append` against Spark's own Delta append, on real local Spark and Delta:
the same rows, the same commit tag, the same file statistics (what data skipping trusts).

The batch is the core's output for the test corpus (every event type, bad lines too), so
every append-only table gets rows with nulls, nested lists and undecodable bytes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest
from delta.tables import DeltaTable
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import DataFrame

from controller.config import Settings
from controller.replay.event_files import read_events
from controller.simulator import BatchOutput, Simulator
from schemas import APPEND_TABLES
from streaming.lake import delta_append
from tests.support.spark.spark_session import spark  # noqa: F401  (the session-scoped fixture)

pytestmark = pytest.mark.spark

CORPUS = Path(__file__).parents[2] / "data" / "corpus"


@pytest.fixture(scope="module")
def corpus_output() -> BatchOutput:
    """Every append table with rows: the corpus under zk, and the metadata records of the
    KRaft corpus (the zk engine writes none)."""
    from tests.support.corpus import KRAFT, KRAFT_CORPUS

    output = Simulator(Settings()).apply(list(read_events(CORPUS)))
    kraft = Simulator(KRAFT).apply(list(read_events(KRAFT_CORPUS)))
    output.appends["metadata_records"] = kraft.appends["metadata_records"]
    return output


def sorted_rows(frame: DataFrame) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in frame.toArrow().to_pylist())


def add_actions(table: Path) -> list[dict]:
    adds = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"])
    return adds


def test_native_append_writes_what_a_spark_append_writes(
    spark,  # noqa: F811
    corpus_output: BatchOutput,
    tmp_path: Path,
) -> None:
    from streaming.lake.tables import Lake

    output = BatchOutput(appends=corpus_output.appends)  # the append-only tables only
    native, through_spark = (
        Lake(spark, str(tmp_path / "native")),
        Lake(spark, str(tmp_path / "spark"), native=False),
    )
    assert native.native
    for lake in (native, through_spark):
        lake.create_tables()
        lake.write(output, "run-1", 7)
    for table in APPEND_TABLES:
        mine, theirs = (sorted_rows(lake.read(table.name)) for lake in (native, through_spark))
        assert len(mine) == len(output.appends[table.name]) > 0, table.name
        assert mine == theirs, table.name
        # one commit, tagged with the batch, as a blind append
        history = native.history(table.name)
        assert history[-1][2] == "kcsim:run-1:7"
        (add,) = add_actions(tmp_path / "native" / table.name)
        (spark_add,) = add_actions(tmp_path / "spark" / table.name)
        assert json.loads(add["stats"]) == json.loads(spark_add["stats"]), table.name
        assert add["dataChange"] is True and add["partitionValues"] == {}
        # the history's metrics, as a Spark append reports them
        (entry,) = DeltaTable.forPath(spark, native.path(table.name)).history(1).collect()
        assert entry["operation"] == "WRITE"
        assert entry["operationMetrics"] == {
            "numFiles": "1",
            "numOutputRows": str(len(output.appends[table.name])),
            "numOutputBytes": str(add["size"]),
        }


# Strings at the edges of Delta's statistics: 32 characters (kept whole), empty, the ASCII
# and BMP maxima, 16 characters beyond the BMP (32 UTF-16 units, Delta's unit), accents.
EDGE_STRINGS = ["x" * 32, "", "a\x7f", "\uffff", "\U0001f600" * 16, "é", "e"]


def test_statistics_of_edge_strings_are_sparks(spark, tmp_path: Path) -> None:  # noqa: F811
    from streaming.lake.tables import Lake

    lakes = [
        Lake(spark, str(tmp_path / "native")),
        Lake(spark, str(tmp_path / "spark"), native=False),
    ]
    batches = [[text] for text in EDGE_STRINGS] + [EDGE_STRINGS]  # each alone, then all
    for lake in lakes:
        lake.create_tables()
        for batch_id, clusters in enumerate(batches):
            rows = [{"cluster": c, "raw": "[]", "reason": "r", "source": "f:1"} for c in clusters]
            lake.write(BatchOutput(appends={"rejected_events": rows}), "run-1", batch_id)
    native, through_spark = (
        [json.loads(a["stats"]) for a in add_actions(tmp_path / name / "rejected_events")]
        for name in ("native", "spark")
    )
    assert len(native) == len(batches)
    assert native == through_spark


def test_the_restart_lookup_finds_a_native_commit(
    spark,  # noqa: F811
    corpus_output: BatchOutput,
    tmp_path: Path,
) -> None:
    from streaming.lake.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    lake.create_tables()
    stats = lake.write(corpus_output, "run-1", 3)
    assert set(lake.pending_commits("run-1", 3)) == set(stats.rows)
    assert {t.name for t in APPEND_TABLES} <= set(stats.rows)
    assert lake.pending_commits("run-1", 4) == {}


def test_long_string_bounds_are_left_out_and_the_row_is_still_found(
    spark,  # noqa: F811
    tmp_path: Path,
) -> None:
    from streaming.lake.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    lake.create_tables()
    long_cluster = "c" * 40  # longer than Delta's 32-character statistics prefix
    row = {"cluster": long_cluster, "raw": "{", "reason": "not valid JSON", "source": "f:1"}
    output = BatchOutput(appends={"rejected_events": [row]})
    lake.write(output, "run-1", 1)
    (add,) = add_actions(tmp_path / "lake" / "rejected_events")
    stats = json.loads(add["stats"])
    assert stats == {
        "numRecords": 1,
        "minValues": {},
        "maxValues": {},
        "nullCount": {"cluster": 0},
    }
    found = lake.read("rejected_events").where(f"cluster = '{long_cluster}'")
    assert [r["source"] for r in found.collect()] == ["f:1"]


def test_file_stats_bound_numbers_and_short_strings_and_count_nulls() -> None:
    data = pa.table(
        {
            "cluster": pa.array(["b", None, "a"], pa.string()),
            "seq": pa.array([5, 3, None], pa.int64()),
            "gone": pa.array([None, None, None], pa.int32()),
        }
    )
    assert delta_append.file_stats(data, ["cluster", "seq", "gone"]) == {
        "numRecords": 3,
        "minValues": {"cluster": "a", "seq": 3},
        "maxValues": {"cluster": "b", "seq": 5},
        "nullCount": {"cluster": 1, "seq": 1, "gone": 3},
    }


def test_only_local_lakes_take_native(spark) -> None:  # noqa: F811
    from streaming.lake.tables import Lake

    assert not Lake(spark, "s3a://bucket/lake").native
    with pytest.raises(ValueError, match="local lake"):
        Lake(spark, "s3a://bucket/lake", native=True)
    # as Hadoop (and so Delta) reads a path: no %-escapes, relative to the JVM's directory
    assert delta_append.local_directory(spark, "file:///tmp/x%20y#z") == "/tmp/x%20y#z"
    assert delta_append.local_directory(spark, "/tmp/a/../b") == "/tmp/b"
    assert delta_append.local_directory(spark, "relative/dir") == os.path.join(
        spark._jvm.java.lang.System.getProperty("user.dir"), "relative/dir"
    )
    assert delta_append.local_directory(spark, "s3a://bucket/lake") is None


@given(rows=st.integers(min_value=0, max_value=100_000), parts=st.integers(1, 50))
def test_data_files_are_consecutive_slices_whose_sizes_differ_by_at_most_one(
    rows: int, parts: int
) -> None:
    slices = delta_append.even_slices(rows, parts)
    assert len(slices) == parts
    assert [start for start, _ in slices] == [
        sum(length for _, length in slices[:i]) for i in range(parts)
    ]
    lengths = [length for _, length in slices]
    assert sum(lengths) == rows
    assert max(lengths) - min(lengths) <= 1
    assert lengths == sorted(lengths, reverse=True)
