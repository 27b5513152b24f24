"""`kcsim shadow` as a subprocess writing to a directory, its events read back, and a wait
for a condition with a deadline; shared by the shadow's and the log importer's real-cluster
tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.spark.job_process import ROOT

DEADLINE_S = 90


def shadow(zookeeper: str, out: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "streaming.cli", "shadow", "--zookeeper", zookeeper]
    command += ["--out", f"file:{out}", "--cluster", "real", "--settle-ms", "300", *extra]
    return subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)


def events(out: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted(out.glob("shadow-*.jsonl")):
        lines += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return lines


def wait_for(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def kraft_shadow(metadata_log: Path, bootstrap: str, out: Path, *extra: str) -> subprocess.Popen:
    """`kcsim shadow --metadata-log` following one node's log, cluster name `real`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "streaming.cli", "shadow", "--metadata-log"]
    command += [str(metadata_log), "--bootstrap-server", bootstrap]
    command += ["--out", f"file:{out}", "--cluster", "real", *extra]
    return subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
