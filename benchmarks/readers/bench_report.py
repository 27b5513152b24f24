"""`kcsim report` generation time for 10k, 100k and 1M events.

Run by hand (not a test):  python benchmarks/readers/bench_report.py [--sizes 10000 100000 1000000]

Per size: the chaos generator's events (`kcsim produce --chaos` logic, seed 7, its default
cluster of 5 brokers and 4 x 6 partitions) are written to a file and replayed through the
core (`kcsim replay`, not timed), then `kcsim report --replay` runs as its own process and
is timed end to end (interpreter start, imports, reading the tables, reducing them, the
HTML with plotly.js). Printed per size: events, the rows the report read, the seconds, and
the page's size. Files go under --dir (default: a temporary directory).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from controller.config import Settings  # noqa: E402
from controller.replay.command import replay  # noqa: E402
from streaming.chaos.generator import ChaosGenerator  # noqa: E402

READ_TABLES = ("health", "state_changes", "controller_requests")


def write_events(path: Path, count: int, seed: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for event in itertools.islice(ChaosGenerator(seed).events(), count):
            out.write(json.dumps(event, separators=(",", ":")) + "\n")


def lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def bench(size: int, work: Path, seed: int) -> None:
    events = work / f"events-{size}.jsonl"
    tables = work / f"replay-{size}"
    page = work / f"report-{size}.html"
    if not events.exists():
        write_events(events, size, seed)
    if not (tables / "health.jsonl").exists():
        started = time.monotonic()
        replay(Settings(), events, tables)
        print(f"  (replay of {size:,} events: {time.monotonic() - started:.1f} s)", flush=True)
    rows = {t: lines(tables / f"{t}.jsonl") for t in READ_TABLES}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    command = ["report", "--replay", str(tables), "--out", str(page), "--quiet"]
    subprocess.run([sys.executable, "-m", "streaming.cli", *command], check=True, env=env)
    seconds = time.monotonic() - started
    read = ", ".join(f"{t} {n:,}" for t, n in rows.items())
    print(
        f"{size:>9,} events  {seconds:6.2f} s  page {page.stat().st_size / 1e6:.1f} MB  "
        f"rows read: {read}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dir", type=Path, help="keep events, tables and pages here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kcsim-bench-report-") as scratch:
        work = args.dir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        for size in args.sizes:
            bench(size, work, args.seed)


if __name__ == "__main__":
    main()
