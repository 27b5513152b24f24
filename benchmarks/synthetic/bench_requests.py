"""Request output size: `kcsim replay` of a rolling restart of a large cluster.

Run by hand (not a test):
    python benchmarks/synthetic/bench_requests.py --brokers 100 --partitions 100000

Writes an event log that starts `--brokers` brokers, creates `--partitions` partitions
(topics of 1,000, replication factor 3) and restarts every broker in turn (controlled
shutdown, failure, startup), then runs `kcsim replay` on it under `/usr/bin/time -v` with
`kcsim.simulate.brokers=true` (leaders let restarted replicas back into the ISR). Printed:
the replay's wall time and peak RSS, the size of every request table it wrote
(`controller_requests`, and `request_payloads` where the tree has it) and their bytes per
partition transition (`state_changes` rows of partitions), for the build-up (startups and
topic creations) and the rolling restart apart. `--tree DIR` runs the replay
of another source tree (e.g. an older commit's `git archive`), to compare. `--compress`
runs `kcsim replay --compress`: the sizes above are then of the decompressed lines, and
each request table's compressed file size is printed too (`.jsonl.zst`, or `.jsonl.gz`
for a tree from before Zstandard).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

import zstandard
from workloads import workload

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS_PER_TOPIC = 1000
REQUEST_TABLES = ("controller_requests", "request_payloads")


_SEQ = re.compile(rb'"seq":(\d+)')


def phase_of(line: bytes, restart_from: int) -> int:
    """0 for a row of the cluster's build-up, 1 for one of the rolling restart."""
    match = _SEQ.search(line, 0, 400)  # seq comes before any list column
    return int(match is not None and int(match[1]) >= restart_from)


def count_partition_transitions(path: Path, restart_from: int) -> list[int]:
    marker = b'"entity":"partition"'
    counts = [0, 0]
    with _open(path) as handle:
        for line in handle:
            if marker in line:
                counts[phase_of(line, restart_from)] += 1
    return counts


def _open(path: Path) -> BinaryIO:
    if path.suffix == ".zst":
        reader = zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True)
        return io.BufferedReader(reader)  # type: ignore[arg-type]
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kcsim-bench-requests"))
    parser.add_argument("--tree", type=Path, default=ROOT, help="source tree to replay with")
    parser.add_argument("--keep", action="store_true", help="keep the output tables")
    parser.add_argument("--compress", action="store_true", help="kcsim replay --compress")
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    events = args.dir / "events.jsonl"
    with events.open("w") as handle:
        for event in workload(args.brokers, args.partitions):
            handle.write(json.dumps(event) + "\n")
    out = args.dir / "out"
    env = {**os.environ, "PYTHONPATH": str(args.tree.resolve())}
    command = [
        "/usr/bin/time", "-v", sys.executable, "-m", "streaming.cli", "replay", str(events),
        "--out", str(out), "--set", "kcsim.simulate.brokers=true",
    ] + (["--compress"] if args.compress else [])  # fmt: skip
    done = subprocess.run(command, cwd=args.tree, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"replay failed ({done.returncode}):\n{done.stderr}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu = sum(
        float(m[1]) for m in re.finditer(r"(?:User|System) time \(seconds\): (\S+)", done.stderr)
    )
    summary = [line for line in done.stderr.splitlines() if line.startswith("kcsim replay:")]
    print(f"tree {args.tree}: {args.brokers} brokers, {args.partitions:,} partitions")
    print(*summary, sep="\n")
    peak = int(rss[1]) / 1024 if rss else 0
    print(f"wall {wall[1] if wall else '?'}  CPU {cpu:,.1f} s  peak RSS {peak:,.0f} MiB")
    restart_from = args.brokers + -(-args.partitions // PARTITIONS_PER_TOPIC) + 1
    # a tree from before Zstandard wrote .jsonl.gz
    suffix = next(
        (s for s in (".jsonl.zst", ".jsonl.gz") if (out / f"state_changes{s}").exists()), ".jsonl"
    )
    transitions = count_partition_transitions(out / f"state_changes{suffix}", restart_from)
    totals = [0, 0]
    for name in REQUEST_TABLES:
        path = out / f"{name}{suffix}"
        if not path.exists():
            continue
        if args.compress:
            print(f"{name:20s} compressed ({suffix}): {path.stat().st_size / 1e6:,.1f} MB")
        sizes, rows, longest = [0, 0], [0, 0], 0
        with _open(path) as handle:
            for line in handle:
                phase = phase_of(line, restart_from)
                sizes[phase] += len(line)
                rows[phase] += 1
                longest = max(longest, len(line))
        totals = [t + size for t, size in zip(totals, sizes, strict=True)]
        print(
            f"{name:20s} build {sizes[0] / 1e6:10,.1f} MB {rows[0]:9,d} rows; rolling restart "
            f"{sizes[1] / 1e6:10,.1f} MB {rows[1]:9,d} rows; longest {longest:,} B"
        )
    for phase, label in enumerate(("build", "rolling restart")):
        print(
            f"{label}: request output {totals[phase] / 1e6:,.1f} MB for "
            f"{transitions[phase]:,} partition transitions: "
            f"{totals[phase] / max(transitions[phase], 1):,.0f} bytes/transition"
        )
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
