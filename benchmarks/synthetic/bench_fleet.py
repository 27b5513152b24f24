"""Fleet benchmark: `kcsim run --fleet` on `local[2]` and on a Spark standalone cluster.

Run by hand (not a test):

    python benchmarks/synthetic/bench_fleet.py --clusters 200 --partitions 5000
    python benchmarks/synthetic/bench_fleet.py --clusters 20 --partitions 500 --targets local 1

A lake is seeded once (through the job's own Delta writer) with `--clusters` clusters of
`--partitions` partitions each (all online, RF 3, `--brokers` brokers), and event files
are written, one per batch: every batch holds `--events` AlterPartition events
(ISR shrink/expand, as in bench_spark.py) of every cluster, so every batch touches the
whole fleet. Then, for each target, a copy of the seeded lake is run through
`kcsim run --fleet --once --max-files-per-trigger 1` in a fresh process (`local[2]`, or a
standalone master with 1 or 2 workers of 1 core started by
`streaming.local_clusters.spark_standalone`), and
its per-batch lines are reported: events/s, and the job's own split (read: the batch's
files into the driver; apply: the per-cluster Spark job, collected to the driver; write:
the driver's Delta commits).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from workloads import fleet_rows, isr_events

from controller.simulator import BatchOutput

ROOT = Path(__file__).resolve().parents[2]

BATCH_LINE = re.compile(r"^batch (\d+): (\d+) events, (\d+) clusters, .* (\d+\.\d+) s \((.*)\)")


def write_events(args: argparse.Namespace, clusters: list[str], directory: Path) -> int:
    """One file per batch, each with `args.events` events of every cluster; returns the
    events per batch."""
    directory.mkdir(parents=True)
    for batch in range(args.batches):
        lines: list[str] = []
        for cluster in clusters:
            start = batch * args.events
            lines.extend(isr_events(args.events, start, args.brokers, args.partitions, cluster))
        path = directory / f"batch-{batch:03d}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_000_000 + batch, 1_000_000 + batch))
    return args.events * len(clusters)


def seed(args: argparse.Namespace, clusters: list[str], lake_dir: Path) -> None:
    from streaming.lake.spark_session import build_session
    from streaming.lake.tables import Lake

    spark = build_session("kcsim-bench-seed")
    try:
        lake = Lake(spark, str(lake_dir))
        lake.create_tables()
        lake.write(BatchOutput(upserts=fleet_rows(clusters, args)), "seed", 0)
    finally:
        spark.stop()


def run_job(master: str, events: Path, lake: Path, conf: list[str]) -> tuple[float, list[str]]:
    """`kcsim run --fleet` in a fresh process: (wall seconds, its batch lines)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    command = [
        sys.executable, "-m", "streaming.cli", "run", "--fleet", "--once",
        "--source", f"file:{events}", "--lake", str(lake), "--max-files-per-trigger", "1",
        "--master", master, *(a for c in conf for a in ("--conf", c)),
    ]  # fmt: skip
    began = time.perf_counter()
    job = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert job.stderr is not None
    lines, other = [], []
    for line in job.stderr:  # batch lines as they come: a long run shows its progress
        if BATCH_LINE.match(line):
            lines.append(line.rstrip("\n"))
            print(f"  ({time.perf_counter() - began:6.1f} s) {lines[-1]}", flush=True)
        else:
            other.append(line)
    if job.wait() != 0:
        raise SystemExit(f"kcsim run on {master} failed:\n{''.join(other)[-3000:]}")
    return time.perf_counter() - began, lines


def report(target: str, wall: float, lines: list[str]) -> None:
    print(f"\n{target}: {wall:.1f} s wall (start, {len(lines)} batches, stop)", flush=True)
    rates = []
    for line in lines:
        match = BATCH_LINE.match(line)
        assert match is not None
        events, seconds = int(match[2]), float(match[4])
        rates.append(events / seconds)
        print(f"  {events:>9,d} events  {seconds:7.2f} s  {rates[-1]:>9,.0f} events/s  "
              f"({match[5]})", flush=True)  # fmt: skip
    if len(rates) > 1:
        print(f"  after the first batch: {min(rates[1:]):,.0f}-{max(rates[1:]):,.0f} events/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=5000, help="per cluster")
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--events", type=int, default=250, help="per cluster per batch")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument(
        "--targets", nargs="+", default=["local", "1", "2"],
        help="`local` (local[2]) and/or standalone worker counts",
    )  # fmt: skip
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kcsim-bench-fleet"))
    parser.add_argument("--conf", action="append", default=[], metavar="K=V")
    parser.add_argument(
        "--keep-seed", action="store_true",
        help="reuse the seeded lake of an earlier run with the same fleet options",
    )  # fmt: skip
    args = parser.parse_args()
    clusters = [f"c{i:03d}" for i in range(args.clusters)]
    events_dir, seeded = args.dir / "events", args.dir / "seeded"
    stamp = f"{args.clusters} {args.partitions} {args.brokers}"
    kept = args.keep_seed and (args.dir / "seed.stamp").is_file()
    if kept and (args.dir / "seed.stamp").read_text() != stamp:
        raise SystemExit(f"the seeded lake in {args.dir} is of another fleet")
    for path in args.dir.iterdir() if args.dir.is_dir() else ():
        if not (kept and path.name in ("seeded", "seed.stamp")):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    per_batch = write_events(args, clusters, events_dir)
    began = time.perf_counter()
    if not kept:
        seed(args, clusters, seeded)
        (args.dir / "seed.stamp").write_text(stamp)
    print(
        f"fleet: {args.clusters} clusters x {args.partitions:,} partitions "
        f"({args.clusters * args.partitions:,}); {args.batches} batches of {per_batch:,} "
        f"events ({args.events} per cluster); seeded in {time.perf_counter() - began:.1f} s "
        f"{'(earlier)' if kept else ''}; "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    from streaming.local_clusters import spark_standalone as standalone

    for target in args.targets:
        lake = args.dir / f"lake-{target}"
        shutil.copytree(seeded, lake)
        load = os.getloadavg()[0]
        if target == "local":
            wall, lines = run_job("local[2]", events_dir, lake, args.conf)
            name = "local[2]"
        else:
            workers = int(target)
            cluster = standalone.start(
                args.dir / f"standalone-{target}", workers, memory=args.worker_memory
            )
            try:
                wall, lines = run_job(cluster.url, events_dir, lake, args.conf)
            finally:
                cluster.stop()
            name = f"standalone, {workers} worker{'s' if workers > 1 else ''} of 1 core"
        report(f"{name} (load average before {load:.1f}, after {os.getloadavg()[0]:.1f})",
               wall, lines)  # fmt: skip
        shutil.rmtree(lake, ignore_errors=True)


if __name__ == "__main__":
    main()
