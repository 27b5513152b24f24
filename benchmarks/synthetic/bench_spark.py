"""Spark benchmark: `kcsim run` end to end vs the core alone, on one large cluster.

Run by hand (not a test):

    python benchmarks/synthetic/bench_spark.py --partitions 100000 --batches 1000 10000 100000
    python benchmarks/synthetic/bench_spark.py --clusters 50 --partitions 2000 \\
        --batches 1000 1000 1000

With `--clusters N` the lake holds a fleet of N such clusters and batch i goes to cluster
i mod N, which shows what a batch costs when it touches one cluster of many.

A lake is seeded with a cluster of `--partitions` partitions (all online, RF 3, through
the job's own Delta writer), then one event file per batch size is written (AlterPartition
ISR shrink/expand cycles over the partitions: one partition row, one result row and an
UpdateMetadata fan-out per event, the bulk of what a shadow controller sees). The job runs
them with `--once --max-files-per-trigger 1`, one micro-batch per file, and its per-batch
log lines (total and read/apply/write split) are reported next to the core alone applying
the same batches from the same starting state.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from pathlib import Path

from workloads import CLUSTER, fleet_rows, isr_events

from controller.config import Settings
from controller.simulator import BatchOutput, RawEvent, Simulator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=6)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 1_000, 10_000, 100_000])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kcsim-bench-spark"))
    parser.add_argument("--skip-core", action="store_true")
    parser.add_argument(
        "--conf", action="append", default=[], metavar="K=V", help="a Spark setting to try"
    )
    parser.add_argument(
        "--clusters",
        type=int,
        default=1,
        help="a fleet: this many clusters of --partitions each; batch i goes to cluster i mod N",
    )
    args = parser.parse_args()
    clusters = [CLUSTER] if args.clusters == 1 else [f"c{i:03d}" for i in range(args.clusters)]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    shutil.rmtree(args.dir, ignore_errors=True)
    events_dir = args.dir / "events"
    events_dir.mkdir(parents=True)
    lake_dir = args.dir / "lake"
    settings = Settings()

    files: list[list[str]] = []
    starts = dict.fromkeys(clusters, 0)
    for index, size in enumerate(args.batches):
        cluster = clusters[index % len(clusters)]
        lines = isr_events(size, starts[cluster], args.brokers, args.partitions, cluster)
        starts[cluster] += size
        path = events_dir / f"batch-{index:02d}-{size}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_000_000 + index, 1_000_000 + index))
        files.append(lines)

    core_seconds: list[float] = []
    if not args.skip_core:
        simulator = Simulator.from_tables(settings, fleet_rows(clusters, args))
        for size, lines in zip(args.batches, files, strict=True):
            batch = [RawEvent(line, f"f:{i}") for i, line in enumerate(lines)]
            began = time.perf_counter()
            output = simulator.apply(batch)
            seconds = time.perf_counter() - began
            core_seconds.append(seconds)
            requests = len(output.appends["controller_requests"])
            rejected = len(output.appends["rejected_events"])
            print(
                f"core  batch {size:>9,d} events: {seconds:8.3f} s "
                f"{size / seconds:12,.0f} events/s  ({requests:,} requests, {rejected} rejected)",
                flush=True,
            )

    from streaming.job.options import Options
    from streaming.job.query import run
    from streaming.job.sources import FileSource
    from streaming.lake.spark_session import build_session
    from streaming.lake.tables import Lake

    began = time.perf_counter()
    conf = dict(item.split("=", 1) for item in args.conf)
    spark = build_session("kcsim-bench", conf=conf)
    print(f"spark session: {time.perf_counter() - began:.1f} s", flush=True)
    lake = Lake(spark, str(lake_dir))
    began = time.perf_counter()
    lake.create_tables()
    lake.write(BatchOutput(upserts=fleet_rows(clusters, args)), "seed", 0)
    print(
        f"seeded lake ({len(clusters)} x {args.partitions:,} partitions): "
        f"{time.perf_counter() - began:.1f} s"
    )
    log: list[str] = []

    def record(line: str) -> None:
        log.append(line)
        print("spark " + line, flush=True)

    options = Options(
        settings=settings,
        source=FileSource(str(events_dir), 1),
        lake=str(lake_dir),
        checkpoint=str(lake_dir / "_checkpoints" / "run"),
        once=True,
    )
    began = time.perf_counter()
    run(spark, options, log=record)
    total = time.perf_counter() - began
    print(f"spark total (query start, restore, {len(args.batches)} batches): {total:.1f} s")
    spark.stop()
    summarize(args.batches, core_seconds, log)


BATCH_LINE = re.compile(r"^batch (\d+): (\d+) events, .* (\d+\.\d+) s \((.*)\)")


def summarize(sizes: list[int], core_seconds: list[float], log: list[str]) -> None:
    """Per batch: the job's seconds and events/s beside the core's, and their ratio (what
    Spark and Delta add), with the job's own split of its time."""
    print(f"\n{'events':>9} {'job s':>8} {'job ev/s':>10} {'core s':>8} {'core ev/s':>10} "
          f"{'job/core':>8}  job split")  # fmt: skip
    batches = [m for m in map(BATCH_LINE.match, log) if m]
    for index, match in enumerate(batches):
        events, seconds, split = int(match[2]), float(match[3]), match[4]
        line = f"{events:>9,d} {seconds:>8.2f} {events / seconds:>10,.0f} "
        if index < len(core_seconds) and sizes[index] == events:
            core = core_seconds[index]
            line += f"{core:>8.2f} {events / core:>10,.0f} {seconds / core:>8.1f}"
        else:
            line += f"{'':>8} {'':>10} {'':>8}"
        print(f"{line}  {split}")


if __name__ == "__main__":
    main()
