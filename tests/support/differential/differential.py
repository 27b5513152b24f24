"""Differential testing against a real Kafka 3.7.1 controller: a `kcsim shadow` process
records the `zk_cluster` fixture's changes as events carrying `observed`, kcsim replays
them, and every difference between the real controller's state znodes and kcsim's state
is a `divergences` row.

`ShadowRecording` runs the shadow (a subprocess writing to a directory, from a snapshot
of the cluster as it is) and knows when it has caught up: its saved view of the cluster
equals what ZooKeeper holds now. `divergences` replays the recording through the core
(`kcsim replay`) and returns the table's rows. The cluster operations the tests make are
in `streaming/chaos/live_zk.py`, shared with the soak.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from controller.config import Settings
from controller.replay.command import replay
from streaming.chaos.live_zk import (
    ZkCluster,
    admin,
    assignment_of,
    delete_topics,
    shadow_lag,
    topic_znode,
    wait_for,
    wait_left,
    wait_settled,
    write_topic_znode,
)

__all__ = [
    "ShadowRecording",
    "admin",
    "assignment_of",
    "delete_topics",
    "divergences",
    "explain",
    "topic_znode",
    "wait_left",
    "wait_settled",
    "write_topic_znode",
]

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "real"
# The shadow's quiet window before it writes an event. A controller slowed by a loaded
# machine (the suite runs in two processes on two cores) can take longer than 300 ms
# between a topic's znode and its partitions' state znodes; the event would then observe
# the topic without them. 800 ms keeps the recording faithful at a cost of ~0.5 s a step.
SETTLE_MS = 800


class ShadowRecording:
    """`kcsim shadow --zookeeper ZK --out file:DIR` for the span of a `with` block."""

    def __init__(self, zk: ZkCluster, out: Path, zookeeper: str | None = None) -> None:
        self.zk = zk
        self.out = out
        self.zookeeper = zookeeper or zk.zookeeper  # where the shadow connects (a relay)
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ShadowRecording:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        command = [sys.executable, "-m", "streaming.cli", "shadow", "--zookeeper"]
        command += [self.zookeeper, "--out", f"file:{self.out}", "--cluster", CLUSTER]
        command += ["--settle-ms", str(SETTLE_MS)]
        # stderr to a file: a pipe nobody reads would block the shadow once full
        self.stderr = (self.out.parent / "shadow.stderr").open("w")
        self.process = subprocess.Popen(command, env=env, cwd=ROOT, stderr=self.stderr)
        self.wait_caught_up()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # flushes what is pending, then exits
            self.process.wait(timeout=30)
        self.stderr.close()

    def log(self) -> str:
        return (self.out.parent / "shadow.stderr").read_text()

    @property
    def state_path(self) -> Path:
        return self.out / f".shadow-state-{CLUSTER}.json"

    def lag(self) -> list[str]:
        """What ZooKeeper holds now and the shadow's saved view does not (`shadow_lag`).
        Empty: the shadow has caught up."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"kcsim shadow exited: {self.log()}")
        return shadow_lag(self.zk.client, self.state_path)

    def wait_caught_up(self, timeout_s: float = 60.0) -> None:
        lag: list[str] = []

        def caught_up() -> bool:
            lag[:] = self.lag()
            return not lag

        try:
            wait_for(caught_up, "the shadow to have written ZooKeeper's present state", timeout_s)
        except AssertionError as error:
            raise AssertionError(f"{error}; behind on {lag}") from None

    def events(self) -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        for path in sorted(self.out.glob("shadow-*.jsonl")):
            lines += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        return lines


def divergences(events: Path, out: Path | None = None) -> list[dict[str, Any]]:
    """`kcsim replay` of `events` (the core, in process): the `divergences` table's rows."""
    out = out or events.parent / "tables"
    replay(Settings.load(None, ()), events, out)
    text = (out / "divergences.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def explain(rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> str:
    """The divergence rows and the events they came from, for an assertion message."""
    ids = {r["event_id"] for r in rows}
    related = [e for e in events if e.get("event_id") in ids]
    return "\n".join(["divergences:", *map(json.dumps, rows), "events:", *map(json.dumps, related)])
