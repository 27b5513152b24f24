"""What a user sees of a normal run: no warnings, and documented exit statuses."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.cli import kcsim_version
from tests.support.spark.job_process import ROOT, job_env

EXAMPLES = ROOT / "examples" / "events"


def _kcsim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming.cli", *args],
        capture_output=True,
        text=True,
        env=job_env(),
        cwd=ROOT,
        timeout=300,
        check=False,
    )


# A normal run's output (no warnings, a line per batch, the summary) is checked on the
# README's own first command: tests/test_walkthroughs.py.


def test_exit_statuses_are_documented_and_kept(tmp_path: Path) -> None:
    help_text = _kcsim("replay", "--help").stdout
    assert "exit status:" in help_text and "rejected" in help_text
    clean = tmp_path / "clean.jsonl"
    clean.write_text('{"type":"broker_startup","broker":1}\n')
    assert _kcsim("replay", str(clean), "--out", str(tmp_path / "a")).returncode == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"broker_startup","broker":1}\nnot json\n')
    assert _kcsim("replay", str(bad), "--out", str(tmp_path / "b")).returncode == 1
    missing = _kcsim("replay", str(tmp_path / "nope"), "--out", str(tmp_path / "c"))
    assert missing.returncode == 2
    assert _kcsim("replay", str(clean), "--set", "no.such.key=1").returncode == 2


def test_python_dash_m_streaming_is_kcsim(tmp_path: Path) -> None:
    # for a venv or a container without the `kcsim` script on PATH
    as_module = subprocess.run(
        [sys.executable, "-m", "streaming", "replay", str(EXAMPLES), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=job_env(),
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert as_module.returncode == 0, as_module.stderr  # the examples hold no bad line
    assert as_module.stderr.startswith("kcsim replay: 32 events, 0 rejected")
    help_text = subprocess.run(
        [sys.executable, "-m", "streaming", "--help"],
        capture_output=True,
        text=True,
        env=job_env(),
        cwd=ROOT,
        timeout=300,
        check=False,
    ).stdout
    assert help_text == _kcsim("--help").stdout


def test_version() -> None:
    done = _kcsim("--version")
    assert (done.returncode, done.stdout) == (0, f"kcsim {kcsim_version()}\n")
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", kcsim_version())


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("produce", ["--topic", "t", "--scenario", "x.jsonl"]),
        ("run", ["--source", "kafka:h:1/t", "--lake", "lake"]),
        ("shadow", ["--zookeeper", "h:2181", "--out", "file:o"]),
    ],
)
def test_kafkas_own_flag_names_are_taken_and_the_old_ones_still_are(
    command: str, words: list[str]
) -> None:
    """Operators type Kafka's tools' flags: --bootstrap-server, --command-config."""
    from streaming.cli import build_parser

    for kafka_names in (True, False):
        config = "--command-config" if kafka_names else "--kafka-config"
        argv = [command, *words, config, "client.properties"]
        if command == "produce":
            argv += ["--bootstrap-server" if kafka_names else "--bootstrap", "h:9092"]
        parser, _ = build_parser(argv)
        args = parser.parse_args(argv)
        assert args.kafka_config == Path("client.properties"), kafka_names
        if command == "produce":
            assert args.bootstrap == "h:9092"
