"""`kcsim state` and `kcsim history` on a local lake without Spark (streaming.lake.local_reader):
the same text as the Spark reads, byte for byte, on a lake written by the job; a clean exit
(deltalake's own table readers abort the interpreter at exit); Spark used only when a table
needs it."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from streaming.lake.local_reader import LakeReader, local_root, matching
from tests.support.spark.job_process import ROOT, job_env
from tests.support.spark.spark_session import spark  # noqa: F401  (the session-scoped fixture)

KEY = ["cluster", "topic", "partition"]


def _kcsim(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    command = ["-m", "streaming.cli", *args] if code is None else ["-c", code, *args]
    return subprocess.run(
        [sys.executable, *command],
        capture_output=True,
        text=True,
        env=job_env(),
        cwd=ROOT,
        timeout=300,
        check=False,
    )


# ------------------------------------------------------------------- without Spark


def test_local_root_takes_plain_paths_and_file_uris_only() -> None:
    assert local_root("/tmp/lake") == "/tmp/lake"
    assert local_root("lake") == "lake"
    assert local_root("file:/tmp/lake") == "/tmp/lake"
    assert local_root("file:///tmp/my%20lake") == "/tmp/my lake"
    assert local_root("s3a://bucket/lake") is None
    assert local_root("hdfs://nn:8020/lake") is None


def test_commit_times_are_file_times_made_strictly_increasing(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    table = tmp_path / "brokers"
    for broker in (1, 2, 3):
        write_deltalake(str(table), pa.table({"broker": [broker]}), mode="append")
    log = table / "_delta_log"
    # versions 1 and 2 written within the same millisecond, as Delta sees file times
    same = 1_700_000_000_123_000_000
    os.utime(log / f"{0:020d}.json", ns=(same - 5_000_000, same - 5_000_000))
    for version in (1, 2):
        os.utime(log / f"{version:020d}.json", ns=(same + 400, same + 400))
    times = [t for _, t, _ in LakeReader(str(tmp_path)).history("brokers")]
    assert times == [1_700_000_000.118, 1_700_000_000.123, 1_700_000_000.124]


def test_a_missing_lake_is_a_clear_error_without_spark(tmp_path: Path) -> None:
    done = _kcsim("state", "--lake", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr.startswith("kcsim state: no Delta table at"), done.stderr
    done = _kcsim("history", "--lake", str(tmp_path), "--topic", "t", "--partition", "0")
    assert done.returncode == 2 and "no Delta table at" in done.stderr


# ---------------------------------------------------------------- against Spark's


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory) -> Path:  # noqa: F811
    """The corpus, 15 lines a batch, brokers answering by themselves (so topic deletions
    complete and the change feed holds deletes)."""
    from controller.config import Settings
    from streaming.job.options import Options
    from streaming.job.query import run
    from streaming.job.sources import FileSource
    from tests.support.corpus import copy_corpus

    root = tmp_path_factory.mktemp("inspect")
    source = copy_corpus(root / "events", lines_per_file=15)
    options = Options(
        settings=Settings.load(None, ["kcsim.simulate.brokers=true"]),
        source=FileSource(str(source), 1),
        lake=str(root / "lake"),
        checkpoint=str(root / "checkpoint"),
        once=True,
    )
    assert run(spark, options, log=lambda line: None) == 0
    return root / "lake"


def _spark_state(spark, lake: Path, as_of: str | None, cluster: str | None) -> str:  # noqa: F811
    from streaming.insight.state import show_state

    out = io.StringIO()
    show_state(spark, str(lake), as_of, cluster, out)
    return out.getvalue()


def _native_state(lake: Path | str, as_of: str | None, cluster: str | None) -> str:
    from streaming.insight.state import native_state

    out = io.StringIO()
    assert native_state(str(lake), as_of, cluster, out)
    return out.getvalue()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


@pytest.mark.spark
def test_state_reads_as_spark_does_now_and_as_of_versions_and_times(
    spark,  # noqa: F811
    lake: Path,
) -> None:
    reference = LakeReader(str(lake)).history("partition_state")
    assert len(reference) > 5 and all(meta for _, _, meta in reference[1:])
    middle = reference[len(reference) // 2]
    # against Spark (a second or more a call): the first batch's version, one in the
    # middle, a commit's own time and the millisecond before it (the cut's `<=` edge)
    as_ofs = [None, "1", str(middle[0]), _iso(middle[1]), _iso(middle[1] - 0.001)]
    for as_of in as_ofs:
        assert _native_state(lake, as_of, None) == _spark_state(spark, lake, as_of, None), as_of
    assert _native_state(lake, "2", "east") == _spark_state(spark, lake, "2", "east")
    assert "orders" in _native_state(f"file://{lake}", None, None)


@pytest.mark.spark
def test_state_errors_are_spark_s_errors(spark, lake: Path) -> None:  # noqa: F811
    for as_of in ("999", "1970-01-01T00:00:00Z", "yesterday"):
        with pytest.raises(ValueError) as by_spark:
            _spark_state(spark, lake, as_of, None)
        with pytest.raises(ValueError) as natively:
            _native_state(lake, as_of, None)
        assert str(natively.value) == str(by_spark.value)


@pytest.mark.spark
def test_history_reads_as_spark_does_for_every_partition(spark, lake: Path) -> None:  # noqa: F811
    from streaming.insight.history import native_history, partition_history

    feed = LakeReader(str(lake)).changes("partition_state")
    keys = sorted({tuple(r.values()) for r in feed.select(KEY).to_pylist()})
    deletes = matching(feed, _change_type="delete")
    assert deletes.num_rows > 0  # deleted topics' partitions: the feed's delete rows
    changes = 0
    for key in [*keys, ("default", "orders", 99), ("nowhere", "orders", 0)]:
        expected = partition_history(spark, str(lake), *key)
        assert native_history(str(lake), *key) == expected, key
        changes += len(expected)
    assert changes > len(keys)


@pytest.mark.spark
def test_the_commands_print_spark_s_text_and_exit_0_without_spark(
    spark,  # noqa: F811
    lake: Path,
) -> None:
    from streaming.insight.history import partition_history, show_history

    state = _kcsim("state", "--lake", str(lake), "--as-of", "3")
    assert state.returncode == 0, state.stderr
    assert state.stdout == _spark_state(spark, lake, "3", None)
    assert state.stderr == ""
    expected = io.StringIO()
    show_history(partition_history(spark, str(lake), "default", "orders", 0), expected)
    history = _kcsim(
        "history", "--lake", str(lake), "--topic", "orders", "--partition", "0",
        "--cluster", "default", "--commits",
    )  # fmt: skip
    assert history.returncode == 0, history.stderr
    assert history.stdout == expected.getvalue() and history.stderr == ""
    # both commands in one process: Spark never imported (nor pyarrow's dataset engine and
    # pandas, ~0.6 s), and the interpreter exits cleanly
    code = (
        "import sys\n"
        "from streaming.cli import main\n"
        "assert main(['state', '--lake', sys.argv[1], '--as-of', '2']) == 0\n"
        "for view in (['--commits'], ['--json'], []):\n"
        "    assert main(['history', '--lake', sys.argv[1], '--topic', 'orders', '--partition',"
        " '0', '--cluster', 'default', *view]) == 0\n"
        "assert main(['show', 'state_changes', '--lake', sys.argv[1], '--json']) == 0\n"
        "heavy = ('pyspark', 'py4j', 'pandas', 'pyarrow.dataset', 'pyarrow.acero')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "assert not loaded, loaded\n"
    )
    both = _kcsim(str(lake), code=code)
    assert both.returncode == 0, both.stderr


@pytest.mark.spark
def test_a_table_needing_more_than_its_files_is_read_through_spark(
    spark,  # noqa: F811
    lake: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shutil

    from streaming.insight.state import native_state

    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    expected = _spark_state(spark, copy, None, None)
    spark.sql(
        f"ALTER TABLE delta.`{copy}/topics` SET TBLPROPERTIES ("
        "'delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', "
        "'delta.minWriterVersion' = '5')"
    )
    capsys.readouterr()
    out = io.StringIO()
    assert not native_state(str(copy), None, None, out)
    assert out.getvalue() == ""
    assert "reading through Spark: topics needs reader version 2" in capsys.readouterr().err
    assert _spark_state(spark, copy, None, None) == expected
