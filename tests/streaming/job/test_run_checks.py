"""`kcsim run` checks its source, sink, lake and checkpoint before Spark starts: one line
naming what is wrong, status 2, nothing created; and every path a user can type, relative
or absolute, with or without `file:`, means the same directory."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.config import Settings
from tests.support.spark.job_process import ROOT, job_env


def kcsim_run(
    cwd: Path, *args: str, timeout: float = 120
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "streaming.cli", "run", *args],
        capture_output=True,
        text=True,
        env=job_env(),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    return done, time.monotonic() - started


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_missing_source_directory_is_one_line_and_status_2(tmp_path: Path) -> None:
    done, _ = kcsim_run(tmp_path, "--source", "file:/missing", "--lake", "lake")
    assert (done.returncode, done.stderr) == (
        2,
        "kcsim run: the source directory /missing does not exist\n",
    )
    assert os.listdir(tmp_path) == []  # no lake, no checkpoint, no Spark directory


@pytest.mark.parametrize("option", ["--source", "--sink"])
def test_an_unreachable_kafka_is_one_line_and_status_2_within_seconds(
    tmp_path: Path, option: str
) -> None:
    """As `kcsim produce` says it: the bootstrap gives up after 15 s (3 minutes of retries
    and a Java stack, with Spark)."""
    (tmp_path / "events").mkdir()
    where = f"kafka:127.0.0.1:{closed_port()}/t"
    source = where if option == "--source" else "file:events"
    sink = ["--sink", where] if option == "--sink" else []
    done, seconds = kcsim_run(tmp_path, "--source", source, *sink, "--lake", "lake")
    assert done.returncode == 2
    assert done.stderr == (
        f"kcsim run: {option}: cannot reach Kafka at {where[6:-2]}: KafkaTimeoutError: "
        f"Unable to bootstrap from {where[6:-2]}\n"
    )
    assert seconds < 60
    assert os.listdir(tmp_path) == ["events"]


def test_a_lake_or_checkpoint_that_cannot_be_made_is_status_2(tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    (tmp_path / "file").write_text("")
    done, _ = kcsim_run(tmp_path, "--source", "file:events", "--lake", "file/lake")
    assert done.stderr == (
        f"kcsim run: the lake {tmp_path}/file/lake cannot be made: {tmp_path}/file is not "
        "a directory\n"
    )
    done, _ = kcsim_run(
        tmp_path, "--source", "file:events", "--lake", "lake", "--checkpoint", "file"
    )
    assert done.stderr == f"kcsim run: the checkpoint {tmp_path}/file is not a directory\n"
    assert done.returncode == 2
    assert sorted(os.listdir(tmp_path)) == ["events", "file"]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("lake", "{cwd}/lake"),
        ("./lake/", "{cwd}/lake"),
        ("file:lake", "{cwd}/lake"),
        ("file:./lake", "{cwd}/lake"),
        ("{cwd}/lake", "{cwd}/lake"),
        ("file:{cwd}/lake", "{cwd}/lake"),
        ("file://{cwd}/lake", "{cwd}/lake"),
        ("s3a://bucket/lake/", "s3a://bucket/lake"),
    ],
)
def test_every_way_to_type_a_path_means_one_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed: str, meant: str
) -> None:
    """Spark reads a relative `lake/partition_state` as a table name
    (INVALID_SCHEMA_OR_RELATION_NAME): the job gives it absolute paths."""
    from streaming.job.options import Options

    monkeypatch.chdir(tmp_path)
    cwd = str(tmp_path)
    args = argparse.Namespace(
        settings=Settings(),
        source=f"file:{typed}".replace("file:file:", "file:") if "s3a" not in typed else "file:x",
        lake=typed.format(cwd=cwd),
        checkpoint=None,
        once=True,
        trigger_seconds=1.0,
        max_files_per_trigger=None,
        starting_offsets="earliest",
        max_offsets_per_trigger=None,
        sink=None,
        kafka_config=None,
        fleet=False,
        master="local[2]",
        conf=[],
    )
    args.source = args.source.format(cwd=cwd)
    options = Options.from_args(args)
    assert options.lake == meant.format(cwd=cwd)
    assert options.checkpoint == meant.format(cwd=cwd) + "/_checkpoints/run"
    if "s3a" not in typed:
        assert options.source.directory == meant.format(cwd=cwd)  # type: ignore[union-attr]


@pytest.mark.spark
def test_a_relative_lake_and_source_without_dot_slash_run_and_verbose_shows_spark(
    tmp_path: Path,
) -> None:
    """Relative paths without `./` work; `--verbose` lets Spark's WARN lines through (one
    job checks both: each costs a Spark driver)."""
    events = tmp_path / "events"
    events.mkdir()
    for path in (ROOT / "examples" / "events").iterdir():
        (events / path.name).write_bytes(path.read_bytes())
    done, _ = kcsim_run(
        tmp_path, "--source", "file:events", "--lake", "lake", "--once", "--verbose", timeout=900
    )
    assert done.returncode == 0, done.stderr
    assert " WARN " in done.stderr
    assert "INVALID_SCHEMA_OR_RELATION_NAME" not in done.stderr
    assert (tmp_path / "lake" / "partition_state" / "_delta_log").is_dir()
    assert (tmp_path / "lake" / "_checkpoints" / "run" / "files").is_dir()
