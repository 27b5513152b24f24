"""`kcsim run` as a real subprocess, for the tests that kill and restart it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def job_env() -> dict[str, str]:
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}


class JobProcess:
    """`kcsim run` in its own process group (driver and JVM die together on SIGKILL),
    its stderr lines collected as they come."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", "run", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=job_env(),
            cwd=ROOT,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def _batch_lines(self) -> list[str]:
        """The per-batch log lines: "batch N: E events, ..."."""
        return [
            rest
            for head, _, rest in (line.partition(": ") for line in list(self.lines))
            if head.startswith("batch ") and " events," in rest
        ]

    def batches(self) -> int:
        """Batches this process has finished."""
        return len(self._batch_lines())

    def events(self) -> int:
        """Events in the batches this process has finished."""
        return sum(int(rest.split(" ", 1)[0]) for rest in self._batch_lines())

    def wait_batches(self, count: int, timeout: float = 240) -> None:
        self._wait(lambda: self.batches() >= count, timeout)

    def wait_events(self, count: int, timeout: float = 180) -> None:
        self._wait(lambda: self.events() >= count, timeout)

    def wait_until(self, done, timeout: float = 240) -> None:
        """Poll `done` while the job runs; fail if it exits or the deadline passes first."""
        self._wait(done, timeout)

    def _wait(self, done, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert self.proc.poll() is None, self.tail()
            assert time.monotonic() < deadline, self.tail()
            time.sleep(0.05)

    def tail(self) -> str:
        return "\n".join(self.lines[-30:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the driver and its JVM, at once
        self.proc.wait()
        self._reader.join(5)

    def finish(self, timeout: float = 240) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._reader.join(5)
        return code
