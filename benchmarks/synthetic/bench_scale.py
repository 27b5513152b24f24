"""Scaling benchmark: the same workloads on growing clusters, cost per partition transition.

Run by hand (not a test):

    python benchmarks/synthetic/bench_scale.py                       # 25k, 100k and 1M partitions
    python benchmarks/synthetic/bench_scale.py --sizes 25000 100000  # the small ones only
    python benchmarks/synthetic/bench_scale.py --sizes 25000 --replay 100000 1000000  # replay

Every size has the same number of brokers (`--brokers`, 300): a broker then holds a fixed
share of the replicas, so every workload below touches a fixed share of the cluster and its
transitions grow with the partitions. (With brokers in proportion to partitions, a broker
startup's UpdateMetadata, which Kafka fills with every partition, would grow B/RF times
faster than the startup's own transitions, whatever the code.)

A cluster is built from state-table rows (`Simulator.from_tables`, as bench_core does),
and the workloads run one after another through the core alone (`Simulator.apply`), in
batches small enough to free each batch's output before the next: broker failure and
controlled shutdown (each of `--repeats` brokers in turn, restarted untimed in between:
one event alone is too short to time on a shared machine), rolling restart (shutdown,
failure, startup of `--restarts` brokers), a whole-cluster preferred election (it moves
back what the restarts moved: each workload starts from what the ones before it left), a
reassignment wave (1% of the partitions) and topic churn (a 100-partition topic created
and deleted per 2,500 partitions). Printed per workload and size: events, transitions
(state_changes rows), CPU seconds (`time.process_time`: on a shared machine wall time
counts the other processes' turns), microseconds per transition and its ratio to the
smallest size (the goal: every ratio at most 1.3).

`--replay` times `kcsim replay` end to end (a subprocess under /usr/bin/time) on an event
log that builds a cluster of that size from nothing (broker startups, 1000-partition topic
creations) and then restarts `--restarts` brokers: seconds, peak RSS and RSS per partition,
and the bytes of every table written. Its output goes to `--dir` and is deleted afterwards.
Replay runs with its default batch bounds unless `--batch-size`/`--batch-output` are given.
`--discard` tables are written to /dev/null (from before request bodies were stored once,
an UpdateMetadata to 300 brokers repeated its payload in every row: ~75 GB of
controller_requests for a 1M-partition cluster's creation); with `--replay-unencoded` they
are not even encoded: replay's own loop in the subprocess, minus those tables.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from scale_workloads import WORKLOADS, Batches, Event, restart_events
from workloads import CLUSTER, PARTITIONS_PER_TOPIC, cluster_rows, topic_partition

from controller.config import Settings
from controller.replay.command import DEFAULT_BATCH_SIZE
from controller.replay.event_files import read_events
from controller.replay.table_files import AppendFiles, write_tables
from controller.simulator import RawEvent, Simulator
from schemas import APPEND_TABLES, STATE_TABLES


@dataclass(frozen=True, slots=True)
class Measure:
    events: int
    transitions: int
    seconds: float

    @property
    def micros_per_transition(self) -> float:
        return self.seconds * 1e6 / max(self.transitions, 1)

    def __add__(self, other: Measure) -> Measure:
        return Measure(
            self.events + other.events,
            self.transitions + other.transitions,
            self.seconds + other.seconds,
        )


def _raw(batch: list[Event], first: int) -> list[RawEvent]:
    return [
        RawEvent(json.dumps({"cluster": CLUSTER, **e}), f"bench:{first + i}")
        for i, e in enumerate(batch)
    ]


def _apply(simulator: Simulator, batches: Batches, counter: list[int]) -> Measure:
    events = transitions = 0
    seconds = 0.0
    for batch in batches:
        raw = _raw(batch, counter[0])
        counter[0] += len(batch)
        # CPU time: the machine is shared, and wall time counts the other processes' turns
        began = time.process_time()
        output = simulator.apply(raw)
        seconds += time.process_time() - began
        rejected = output.appends["rejected_events"]
        if rejected:
            raise SystemExit(f"a workload event was rejected: {rejected[0]}")
        events += len(batch)
        transitions += len(output.appends["state_changes"])
        del output
    return Measure(events, transitions, seconds)


def run_size(args: argparse.Namespace, size: int) -> dict[str, Measure]:
    rows = cluster_rows(args.brokers, size, 3)
    began = time.perf_counter()
    simulator = Simulator.from_tables(Settings(simulate_brokers=True), rows)
    del rows
    gc.collect()
    print(
        f"{size:>9,d} partitions, {args.brokers} brokers: loaded in "
        f"{time.perf_counter() - began:.1f} s",
        flush=True,
    )
    counter = [1]
    measures: dict[str, Measure] = {}
    for workload in WORKLOADS:
        if workload.name not in args.workloads:
            continue
        measure = Measure(0, 0, 0.0)
        for rep in range(args.repeats if workload.repeated else 1):
            measure += _apply(simulator, workload.batches(args, size, rep), counter)
            _apply(simulator, workload.restore(args, size, rep), counter)
        measures[workload.name] = measure
        print(
            f"  {workload.name:20s} {measure.events:7,d} events {measure.transitions:10,d} "
            f"transitions {measure.seconds:8.2f} s {measure.micros_per_transition:7.2f} "
            "µs/transition",
            flush=True,
        )
    return measures


def _run_in_subprocess(size: int) -> dict[str, Measure]:
    # the same arguments, one size, and no --replay (a later --replay overrides earlier ones)
    command = [sys.executable, __file__, *sys.argv[1:], "--one", str(size), "--replay"]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    *lines, last = done.stdout.splitlines()
    print("\n".join(lines), flush=True)
    return {name: Measure(*values) for name, values in json.loads(last).items()}


def print_table(results: dict[int, dict[str, Measure]]) -> None:
    sizes = sorted(results)
    smallest = sizes[0]
    header = "".join(f"{f'{s:,d}':>22}" for s in sizes)
    print(f"\nµs per transition (ratio to {smallest:,d} partitions)\n{'workload':20s}{header}")
    for workload in WORKLOADS:
        if workload.name not in results[smallest]:
            continue
        base = results[smallest][workload.name].micros_per_transition
        cells = ""
        for size in sizes:
            micros = results[size][workload.name].micros_per_transition
            cells += f"{micros:>14.2f} ({micros / base:4.2f})"
        print(f"{workload.name:20s}{cells}")


# ------------------------------------------------------------------- kcsim replay, end to end


def replay_events(brokers: int, partitions: int, restarts: int) -> Iterator[Event]:
    """A cluster built from nothing, then a rolling restart of `restarts` brokers."""
    for broker in range(brokers):
        yield {"type": "broker_startup", "broker": broker}
    for first in range(0, partitions, PARTITIONS_PER_TOPIC):
        topic, _ = topic_partition(first)
        count = min(PARTITIONS_PER_TOPIC, partitions - first)
        assignment = {str(p): _three_replicas(first + p, brokers) for p in range(count)}
        yield {"type": "topic_creation", "topic": topic, "assignment": assignment}
    for broker in range(restarts):
        yield from restart_events(broker)


def _three_replicas(index: int, brokers: int) -> list[int]:
    """As bench_core.replicas_of, but always three distinct brokers (a topic's partitions
    must have one replication factor): the shift stays under half the broker count."""
    first = index % brokers
    shift = 1 + (index // brokers) % ((brokers - 1) // 2)
    return [first, (first + shift) % brokers, (first + 2 * shift) % brokers]


def run_replay(args: argparse.Namespace, size: int) -> None:
    work = args.dir / f"replay-{size}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    events = work / "events.jsonl"
    with events.open("w") as handle:
        for event in replay_events(args.brokers, size, args.restarts):
            handle.write(json.dumps({"cluster": CLUSTER, **event}) + "\n")
    out = work / "out"
    out.mkdir()
    for table in args.discard:
        # still encoded and written, to nowhere: a 1M-partition cluster's creation alone
        # writes ~75 GB of controller_requests rows (every UpdateMetadata row its payload)
        (out / f"{table}.jsonl").symlink_to(os.devnull)
    command = ["/usr/bin/time", "-v", sys.executable]
    if args.replay_unencoded:
        batch_size = args.batch_size or DEFAULT_BATCH_SIZE
        command += [__file__, "--replay-child", str(events), str(out), str(batch_size)]
    else:
        command += ["-m", "streaming.cli", "replay", str(events), "--out", str(out), "--quiet"]
        if args.batch_size is not None:
            command += ["--batch-size", str(args.batch_size)]
        if args.batch_output is not None:
            command += ["--batch-output", str(args.batch_output)]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    written = {p.stem: p.stat().st_size for p in sorted(out.iterdir()) if not p.is_symlink()}
    shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"kcsim replay failed ({done.returncode}):\n{done.stderr[-2000:]}")
    wall = time.perf_counter() - began
    rss_kib = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    cpu = sum(
        float(re.search(rf"{kind} time \(seconds\): (\S+)", done.stderr)[1])
        for kind in ("User", "System")
    )
    print(
        f"{'core + tables (--replay-unencoded)' if args.replay_unencoded else 'kcsim replay'}, "
        f"{size:,d} partitions, {args.brokers} brokers, {args.restarts} brokers "
        f"restarted, --batch-size {args.batch_size or 'default'}, --batch-output "
        f"{args.batch_output or 'default'}: {wall:.1f} s wall, {cpu:.1f} s CPU; "
        f"peak RSS {rss_kib / 1024:,.0f} MiB = {rss_kib * 1024 / size:,.0f} bytes/partition",
        flush=True,
    )
    print(
        f"  written {sum(written.values()) / 1e6:,.1f} MB: "
        + ", ".join(f"{name} {size / 1e6:,.1f}" for name, size in written.items()),
        flush=True,
    )


def replay_unencoded(events: Path, out: Path, batch_size: int) -> None:
    """`kcsim replay` (controller.replay) except that the tables in `out` that are
    /dev/null links are not even encoded: the core and the other tables' writing alone."""
    discarded = {p.stem for p in out.iterdir() if p.is_symlink()}
    simulator = Simulator(Settings())
    with AppendFiles(out, [t for t in APPEND_TABLES if t.name not in discarded]) as appends:
        lines = read_events(events)
        while batch := list(islice(lines, batch_size)):
            output = simulator.apply(batch)
            for table, rows in output.appends.items():
                if table not in discarded:
                    appends.write(table, rows)
            del output
    write_tables(out, {t.name: simulator.table_rows(t.name) for t in STATE_TABLES})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[25_000, 100_000, 1_000_000])
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--restarts", type=int, default=6, help="brokers a rolling restart bounces")
    parser.add_argument(
        "--repeats", type=int, default=20,
        help="runs of each single-event workload (broker failure, controlled shutdown); at "
        "25k partitions 5 runs were 0.04 s of CPU, and the ratios moved ±15%% between runs",
    )  # fmt: skip
    parser.add_argument(
        "--workloads", nargs="+", choices=[w.name for w in WORKLOADS],
        default=[w.name for w in WORKLOADS],
    )  # fmt: skip
    parser.add_argument("--replay", type=int, nargs="*", default=[], metavar="PARTITIONS")
    parser.add_argument("--batch-size", type=int, help="kcsim replay's (default: its own)")
    parser.add_argument("--batch-output", type=int, help="kcsim replay's (default: its own)")
    parser.add_argument(
        "--discard", nargs="*", default=[], metavar="TABLE",
        help="tables kcsim replay writes to /dev/null",
    )  # fmt: skip
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kcsim-bench-scale"))
    parser.add_argument(
        "--replay-unencoded",
        action="store_true",
        help="for --replay: the --discard tables are not encoded either (the core alone, "
        "in the subprocess, with the other tables written)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a size, in this process
    parser.add_argument("--replay-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.replay_child is not None:
        events, out, batch_size = args.replay_child
        replay_unencoded(Path(events), Path(out), int(batch_size))
        return
    if args.one is not None:
        measures = run_size(args, args.one)
        print(
            json.dumps({name: [m.events, m.transitions, m.seconds] for name, m in measures.items()})
        )
        return
    # each size in a fresh process: a smaller cluster's heap does not shape a larger one's
    results = {size: _run_in_subprocess(size) for size in sorted(args.sizes)}
    if results:
        print_table(results)
    for size in args.replay:
        run_replay(args, size)


if __name__ == "__main__":
    main()
