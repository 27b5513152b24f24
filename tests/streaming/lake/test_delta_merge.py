"""`streaming.lake.delta_merge` against Spark's own Delta MERGE, on real local Spark and Delta:
the same table rows after every batch, the same Change Data Feed, the same history
entries, and files a Spark reader (data skipping included) reads right.

The batches are the core's output for the test corpus (every event type: topics created,
deleted and re-created, reassignments, broker changes), replayed in several batches so
rows are inserted, updated and deleted across commits.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import chain, islice
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from controller.config import Settings
from controller.replay.event_files import read_events
from controller.simulator import BatchOutput, RawEvent, Simulator
from schemas import STATE_TABLES
from streaming.chaos.generator import ChaosGenerator
from streaming.lake import delta_files, delta_merge
from tests.support.spark.spark_session import spark  # noqa: F401  (the session-scoped fixture)

pytestmark = pytest.mark.spark

CORPUS = Path(__file__).parents[2] / "data" / "corpus"
BATCH_EVENTS = 300


@pytest.fixture(scope="module")
def corpus_batches() -> list[BatchOutput]:
    """The corpus, then a chaos run (topics deleted in a later batch than they were created
    in), through the core in batches of BATCH_EVENTS events; state tables only."""
    simulator = Simulator(Settings())
    chaos = ChaosGenerator(7).events()
    events = chain(
        read_events(CORPUS),
        (RawEvent(json.dumps(e), f"chaos:{i}") for i, e in enumerate(islice(chaos, 1000))),
    )
    batches = []
    while chunk := list(islice(events, BATCH_EVENTS)):
        output = simulator.apply(chunk)
        batches.append(BatchOutput(upserts=output.upserts, deletes=output.deletes))
    return batches


def rows_of(frame: DataFrame, drop: tuple[str, ...] = ()) -> Counter[str]:
    rows = frame.drop(*drop).toArrow().to_pylist()
    return Counter(json.dumps(row, sort_keys=True, default=str) for row in rows)


# What a MERGE's history entry must say alike however it was written (the rest depends on
# the files' layout, or is Spark's plan text with its expression ids).
ROW_METRICS = (
    "numSourceRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
)


def history(lake, table: str) -> list[tuple]:
    """Per commit: version, operation, tag, the names of its parameters, its row counts."""
    from delta.tables import DeltaTable

    frame = DeltaTable.forPath(lake.spark, lake.path(table)).history()
    return [
        (
            r["version"],
            r["operation"],
            r["userMetadata"],
            sorted(r["operationParameters"]),
            {m: r["operationMetrics"].get(m) for m in ROW_METRICS},
        )
        for r in frame.orderBy("version").collect()
    ]


def live_files(table: Path) -> list[dict]:
    """The `add` actions of the table's current files (a file is its path and deletion
    vector: a DELETE adds a file with its vector and removes it without)."""
    live: dict[tuple[str, str], dict] = {}

    def file_id(entry: dict) -> tuple[str, str]:
        return entry["path"], json.dumps(entry.get("deletionVector"), sort_keys=True)

    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[file_id(action["add"])] = action["add"]
            elif "remove" in action:
                live.pop(file_id(action["remove"]))
    return list(live.values())


@pytest.fixture(scope="module")
def lakes(spark, corpus_batches: list[BatchOutput], tmp_path_factory) -> tuple:  # noqa: F811
    """The corpus batches written natively and through Spark, one lake each."""
    from streaming.lake.tables import Lake

    root = tmp_path_factory.mktemp("merges")
    native = Lake(spark, str(root / "native"))
    through_spark = Lake(spark, str(root / "spark"), native=False)
    assert native.native and not through_spark.native
    for lake in (native, through_spark):
        lake.create_tables()
        for batch_id, output in enumerate(corpus_batches):
            lake.write(output, "run-1", batch_id)
    assert native.spark_fallbacks == []  # every table was written natively
    return native, through_spark


def test_native_merges_leave_what_spark_merges_leave(spark, lakes: tuple) -> None:  # noqa: F811
    """The same rows, and version by version the same changes (so the same rows at every
    version), commit tags and row counts in the history."""
    kinds: Counter[str] = Counter()
    for table in STATE_TABLES:
        mine, theirs = (rows_of(lake.read(table.name)) for lake in lakes)
        assert mine == theirs, table.name
        feeds = [
            rows_of(
                spark.read.format("delta")
                .option("readChangeFeed", "true")
                .option("startingVersion", 0)
                .load(lake.path(table.name)),
                drop=("_commit_timestamp",),
            )
            for lake in lakes
        ]
        assert feeds[0] == feeds[1], table.name
        kinds.update(json.loads(row)["_change_type"] for row in feeds[0])
        assert history(lakes[0], table.name) == history(lakes[1], table.name), table.name
    # the batches exercised every kind of change
    assert set(kinds) == {"insert", "update_preimage", "update_postimage", "delete"}


def test_data_skipping_finds_rows_of_natively_merged_files(spark, lakes: tuple) -> None:  # noqa: F811
    """A file's key statistics must never exclude a row it holds: look rows up by their
    key (Delta skips files by those statistics)."""
    native = lakes[0]
    for table in STATE_TABLES:
        frame = native.read(table.name)
        rows = frame.select(*table.key).toArrow().to_pylist()
        assert rows, table.name
        for row in rows[:: max(1, len(rows) // 6)]:
            condition = F.lit(True)
            for column, value in row.items():
                condition = condition & (F.col(column) == value)
            assert frame.where(condition).count() == 1, (table.name, row)


def partition_rows(count: int, leader: int = 1, event: str = "e0") -> list[dict]:
    return [
        {
            "cluster": "c",
            "topic": f"t{i // 1000:03d}",
            "partition": i % 1000,
            "state": "OnlinePartition",
            "leader": leader,
            "leader_epoch": 0,
            "isr": [1, 2, 3],
            "partition_epoch": 0,
            "leader_recovery_state": "RECOVERED",
            "controller_epoch": 1,
            "replicas": [1, 2, 3],
            "adding_replicas": [],
            "removing_replicas": [],
            "elr": [],
            "last_known_elr": [],
            "last_event_id": event,
        }
        for i in range(count)
    ]


def test_a_small_merge_rewrites_only_the_file_holding_its_key(
    spark,  # noqa: F811
    tmp_path: Path,
) -> None:
    from streaming.lake.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    lake.create_tables()
    table_dir = tmp_path / "lake" / "partition_state"
    rows = partition_rows(25_000)
    lake.write(BatchOutput(upserts={"partition_state": rows}), "run-1", 0)
    first = live_files(table_dir)
    # sorted by key, at most ROWS_PER_FILE (10,000) rows a file, as even as can be: three
    # files whose sizes differ by at most one
    assert sorted(json.loads(f["stats"])["numRecords"] for f in first) == [8333, 8333, 8334]
    changed = {**rows[12_345], "leader": 2, "last_event_id": "e1"}
    gone = {k: rows[12_346][k] for k in ("cluster", "topic", "partition")}
    output = BatchOutput(
        upserts={"partition_state": [changed]}, deletes={"partition_state": [gone]}
    )
    lake.write(output, "run-1", 1)
    after = live_files(table_dir)
    kept = [f for f in first if f in after]
    (new,) = [f for f in after if f not in first]
    assert len(kept) == 2
    # keys 12,345 and 12,346 are in the second file (keys 8,334 to 16,666): one row gone
    assert json.loads(new["stats"])["numRecords"] == 8333 - 1
    new_rows = pq.read_table(table_dir / new["path"]).to_pylist()
    assert changed in new_rows
    assert lake.read("partition_state").count() == 24_999
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 2)
        .load(lake.path("partition_state"))
        .select("partition", "leader", "_change_type")
        .collect()
    )
    assert sorted(tuple(r) for r in changes) == sorted(
        [
            (rows[12_346]["partition"], 1, "delete"),
            (rows[12_345]["partition"], 1, "update_preimage"),
            (rows[12_345]["partition"], 2, "update_postimage"),
        ]
    )


def test_a_merge_read_a_file_at_a_time_leaves_what_spark_merges_leave(
    spark,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A merge that touches several groups of files (here one file a group: a broker's
    restart touches every file of a large table) changes, deletes and inserts rows in
    each as a Spark MERGE does: the same rows, change feed and row counts."""
    from streaming.lake.tables import Lake

    monkeypatch.setattr(delta_merge, "FILES_PER_GROUP", 1)
    every = partition_rows(25_000)
    # three keys are missing at first: inserted later, inside the bounds of a touched file
    rows = every[:20] + every[23:]
    updated = [{**every[i], "leader": 2, "last_event_id": "e1"} for i in (10, 9_000, 24_999)]
    inserted = [{**every[i], "last_event_id": "e1"} for i in (20, 21, 22)]
    gone = [{k: every[i][k] for k in ("cluster", "topic", "partition")} for i in (11, 17_000)]
    lakes = []
    for name, native in (("native", True), ("spark", False)):
        lake = Lake(spark, str(tmp_path / name), native=native)
        lake.create_tables()
        lake.write(BatchOutput(upserts={"partition_state": rows}), "run-1", 0)
        changes = BatchOutput(
            upserts={"partition_state": updated + inserted}, deletes={"partition_state": gone}
        )
        lake.write(changes, "run-1", 1)
        lakes.append(lake)
    native_lake, spark_lake = lakes
    assert native_lake.spark_fallbacks == []
    files = live_files(tmp_path / "native" / "partition_state")
    assert len(files) == 4  # the three rewritten a group each, and the inserts' file
    mine, theirs = (rows_of(lake.read("partition_state")) for lake in lakes)
    assert mine == theirs and sum(mine.values()) == 24_998
    feeds = [
        rows_of(
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", 2)
            .load(lake.path("partition_state")),
            drop=("_commit_timestamp",),
        )
        for lake in lakes
    ]
    assert feeds[0] == feeds[1]
    assert Counter(json.loads(row)["_change_type"] for row in feeds[0]) == {
        "update_preimage": 3,
        "update_postimage": 3,
        "delete": 2,
        "insert": 3,
    }
    assert history(native_lake, "partition_state") == history(spark_lake, "partition_state")


def test_deleting_an_absent_key_commits_nothing_but_the_tag(
    spark,  # noqa: F811
    tmp_path: Path,
) -> None:
    from streaming.lake.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    lake.create_tables()
    lake.write(BatchOutput(upserts={"partition_state": partition_rows(3)}), "run-1", 0)
    absent = {"cluster": "c", "topic": "nope", "partition": 0}
    lake.write(BatchOutput(deletes={"partition_state": [absent]}), "run-1", 1)
    assert lake.read("partition_state").count() == 3
    assert history(lake, "partition_state")[-1][1:3] == ("MERGE", "kcsim:run-1:1")
    assert lake.pending_commits("run-1", 1) == {"partition_state": 2}


def test_a_table_with_deletion_vectors_is_merged_by_spark(
    spark,  # noqa: F811
    tmp_path: Path,
) -> None:
    from streaming.lake.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    lake.create_tables()
    path = lake.path("partition_state")
    lake.write(BatchOutput(upserts={"partition_state": partition_rows(100)}), "run-1", 0)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableDeletionVectors = true)")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE partition = 7")
    assert any(f.get("deletionVector") for f in live_files(tmp_path / "lake" / "partition_state"))
    transaction = spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, path
    ).startTransaction()
    with pytest.raises(delta_files.NotNative, match="deletion vector"):
        delta_merge.data_files(spark, transaction, str(tmp_path / "lake" / "partition_state"))
    changed = {**partition_rows(100)[8], "leader": 3}
    lake.write(BatchOutput(upserts={"partition_state": [changed]}), "run-1", 1)
    leaders = {r["partition"]: r["leader"] for r in lake.read("partition_state").collect()}
    assert len(leaders) == 99 and 7 not in leaders and leaders[8] == 3
    (fallback,) = lake.spark_fallbacks
    assert fallback.startswith("partition_state: ") and "deletionVectors" in fallback


def test_a_table_with_an_extra_column_is_merged_by_spark(
    spark,  # noqa: F811
    tmp_path: Path,
) -> None:
    """README's migration notes leave old columns in `clusters`: its MERGE goes through
    Spark (which leaves them null), not the native one (which writes the table's exact
    schema only)."""
    from streaming.lake.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    lake.create_tables()
    spark.sql(f"ALTER TABLE delta.`{lake.path('clusters')}` ADD COLUMNS (last_seq BIGINT)")
    row = {
        "cluster": "c",
        "controller_epoch": 2,
        "controller": 1,
        "ineligible_deleted_topics": [],
        "stale_reassignments": [],
        "restamped_partitions": [],
    }
    lake.write(BatchOutput(upserts={"clusters": [row]}), "run-1", 0)
    (stored,) = lake.read("clusters").collect()
    assert stored["controller_epoch"] == 2 and stored["last_seq"] is None
    (fallback,) = lake.spark_fallbacks
    assert fallback.startswith("clusters: ") and "last_seq" in fallback
    assert history(lake, "clusters")[-1][1:3] == ("MERGE", "kcsim:run-1:0")


def test_a_merge_committed_from_a_query_thread_carries_the_batch_tag(
    spark,  # noqa: F811
    tmp_path: Path,
) -> None:
    """In foreachBatch the committing thread's active session is the query's clone, which
    never sees the tag set during the batch: native commits must make the lake's session
    the active one."""
    from streaming.lake.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    lake.create_tables()
    sessions = spark._jvm.org.apache.spark.sql.SparkSession
    clone = spark._jsparkSession.cloneSession()
    sessions.setActiveSession(clone)
    try:
        # one table only: the lake commits it on this thread, not in a pool
        lake.write(BatchOutput(upserts={"partition_state": partition_rows(2)}), "run-1", 5)
        assert sessions.getActiveSession().get() == clone  # given back as it was
    finally:
        sessions.setActiveSession(spark._jsparkSession)
    assert lake.spark_fallbacks == []
    assert history(lake, "partition_state")[-1][1:3] == ("MERGE", "kcsim:run-1:5")


def test_a_restart_reads_natively_what_spark_reads(
    spark,  # noqa: F811
    lakes: tuple,
    corpus_batches: list[BatchOutput],
) -> None:
    """The start and restart reads (`streaming.lake.delta_files`): the tables at their latest
    versions and as of a re-run batch (time travel), and the lookup of a batch's commits."""
    from streaming.lake.tables import RESTORE_TABLES, Lake

    native = lakes[0]
    same_through_spark = Lake(spark, native.root, native=False)
    last = len(corpus_batches) - 1
    for batch_id in (0, last, last + 1):
        pending = native.pending_commits("run-1", batch_id)
        assert pending == same_through_spark.pending_commits("run-1", batch_id)
        assert bool(pending) == (batch_id <= last)
        for clusters in (None, ["nope"]):
            mine, theirs = (
                lake.load_rows(RESTORE_TABLES, before=pending, clusters=clusters)
                for lake in (native, same_through_spark)
            )
            for table in RESTORE_TABLES:
                assert Counter(map(repr, mine[table])) == Counter(map(repr, theirs[table]))
            # as of before batch 0 the lake is empty
            assert bool(mine["partition_state"]) == (clusters is None and batch_id > 0)
    assert native.spark_fallbacks == []  # every table was read natively


def test_candidate_files_are_those_whose_bounds_hold_a_changed_value_in_every_key_column() -> None:
    """No Spark: the file pruning before any file is read."""
    import pyarrow as pa

    key = ("cluster", "topic", "partition")
    keys = pa.table({"cluster": ["c", "c"], "topic": ["t012", "t012"], "partition": [345, 346]})

    def data_file(name: str, low: tuple | None, high: tuple | None) -> delta_merge.DataFile:
        bounds = [dict(zip(key, b, strict=True)) if b else {} for b in (low, high)]
        return delta_merge.DataFile(None, name, 0, *bounds)

    files = [
        data_file("below", ("c", "t000", 0), ("c", "t008", 999)),
        data_file("holds", ("c", "t008", 0), ("c", "t016", 999)),
        data_file("edge", ("c", "t012", 346), ("c", "t012", 346)),
        data_file("gap", ("c", "t010", 347), ("c", "t014", 999)),
        data_file("other cluster", ("d", "t000", 0), ("d", "t999", 999)),
        data_file("no bounds", None, None),  # strings over 32 characters: may hold anything
    ]
    found = [f.local_path for f in delta_merge.candidates(files, keys, key)]
    assert found == ["holds", "edge", "no bounds"]
    assert delta_merge.candidates(files, keys.slice(0, 0), key) == []


def test_files_of_disjoint_key_ranges_are_read_in_key_order() -> None:
    """A restore reads a table's files in the order of their key bounds and gets its rows
    sorted by key (snapshot.load then sorts nothing): files of one topic's partitions,
    and files starting with the same topic, are told apart by the next bounds."""
    # each file's statistics: (lowest topic, lowest partition), (highest topic, highest
    # partition); a column is bounded apart from the others, so a file spanning topics a
    # (partitions 1000-1999) and b (0-3) has its partitions within 0-1999
    files = [
        (("a", 0), ("a", 499)),
        (("a", 500), ("a", 999)),
        (("a", 0), ("b", 1999)),
        (("b", 4), ("b", 4)),
        (("b", 0), ("d", 999)),
        (("d", 1), ("d", 7)),
    ]
    lows = [{"topic": low[0], "partition": low[1]} for low, _ in files]
    highs = [{"topic": high[0], "partition": high[1]} for _, high in files]
    shuffled = [5, 2, 0, 4, 1, 3]
    ordered = delta_files.in_key_order(
        shuffled, ("topic", "partition"), [(lows[i], highs[i]) for i in shuffled]
    )
    assert ordered == [0, 1, 2, 3, 4, 5]
    no_stats = delta_files.in_key_order(["x", "y"], ("topic",), [({}, {}), ({"topic": "a"},) * 2])
    assert no_stats == ["y", "x"]
