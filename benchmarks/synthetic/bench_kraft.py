"""Both engines side by side: the same events on the same clusters, cost per partition change.

Run by hand (not a test):

    python benchmarks/synthetic/bench_kraft.py     # 25k and 100k, both engines
    python benchmarks/synthetic/bench_kraft.py --sizes 1000000 --workloads rolling_restart elr_storm

Each (engine, size) runs in a fresh process: a cluster of `--brokers` brokers (300 at every
size, as bench_scale.py) and `size` partitions, RF 3, `min.insync.replicas` 2, every
partition online and led by its preferred replica, loaded from state-table columns
(`Simulator.from_tables`, a restart's path; under `kraft` the brokers are registered and
unfenced through the engine first). Then, through the core alone (`Simulator.apply`):

* `isr_change` throughput (`--isr-events`, 100k): AlterPartition shrink then expand,
  partition after partition, epochs left to their defaults so that both engines take the
  same lines; events per second of CPU;
* the workloads of bench_scale.py, the same events under both engines (a `broker_startup`
  is a registration and an unfence under `kraft`): broker failure and controlled shutdown
  (`--repeats` brokers in turn, restarted untimed in between), rolling restart (6
  brokers), whole-cluster preferred election, reassignment wave (1% of the partitions),
  topic churn (a 100-partition topic created and deleted per 2,500 partitions),
* and an ELR storm: brokers lost two at a time (one `broker_failure` of two brokers,
  `--storm-pairs` pairs, each pair restarted untimed after the next pair is lost), with
  RF 3 and min ISR 2: under `kraft` the ISR shrinks into the ELR, then partitions go
  leaderless, and the restarts elect from the ELR.

The ZooKeeper engine runs with `kcsim.simulate.brokers` (restarted brokers rejoin the ISR,
reassignments complete, deletions finish, within the timed events); the KRaft engine does
not model that yet, so after each workload (untimed) the leaders' AlterPartitions take
every replica back into the ISR, and the next workload starts from the same cluster.

Cost per partition change: CPU seconds (`time.process_time`; the machine is shared) per
`state_changes` row of a partition (the ZooKeeper engine also writes replica rows; they
are not counted, so the two engines are divided by the same thing). Printed per engine,
size and workload, then a table with the ratio of each size to the smallest. Also the load
time, the resident memory after the load (the input columns freed) and the peak RSS of
the process, both per partition, and the load average at the start of every run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time

from scale_workloads import WORKLOADS as SCALE_WORKLOADS
from scale_workloads import Batches, Event, Workload
from workloads import CLUSTER, engine_cluster_rows, isr_events

from controller.config import Settings
from controller.simulator import RawEvent, Simulator


def _storm_pairs(args: argparse.Namespace) -> list[list[int]]:
    # brokers the workloads before leave alone: from 200 up, two at a time
    return [[200 + 2 * k, 201 + 2 * k] for k in range(args.storm_pairs)]


def _elr_storm(args: argparse.Namespace, size: int, rep: int) -> Batches:
    batches: Batches = []
    pairs = _storm_pairs(args)
    for k, pair in enumerate(pairs):
        batches.append([{"type": "broker_failure", "brokers": pair}])
        if k >= 1:  # the pair before comes back once this one is lost: overlapping losses
            batches.append([{"type": "broker_startup", "brokers": pairs[k - 1]}])
    batches.append([{"type": "broker_startup", "brokers": pairs[-1]}])
    return batches


ENGINES = ("zk", "kraft")
WORKLOADS = (*SCALE_WORKLOADS, Workload("elr_storm", _elr_storm))


def _apply(simulator: Simulator, batches: Batches, counter: list[int]) -> tuple[int, int, float]:
    events = changes = 0
    seconds = 0.0
    for batch in batches:
        raw = [
            RawEvent(json.dumps({"cluster": CLUSTER, **e}), f"bench:{counter[0] + i}")
            for i, e in enumerate(batch)
        ]
        counter[0] += len(batch)
        began = time.process_time()
        output = simulator.apply(raw)
        seconds += time.process_time() - began
        if output.appends["rejected_events"]:
            raise SystemExit(f"rejected: {output.appends['rejected_events'][0]}")
        events += len(batch)
        changes += sum(1 for r in output.appends["state_changes"] if r["entity"] == "partition")
        del output
    return events, changes, seconds


def _catch_up(simulator: Simulator, counter: list[int]) -> None:
    """Untimed, under `kraft`: what `kcsim.simulate.brokers` does for the ZooKeeper
    engine, the leader's AlterPartition taking every replica back into the ISR once all are
    unfenced (completing a reassignment), so that each workload starts from the same
    cluster under both engines."""
    if simulator.engine(CLUSTER) != "kraft":
        return
    controller = simulator.kraft(CLUSTER).controller
    active = controller.cluster_control.is_active
    batch: list[Event] = []
    for view in controller.partitions():
        if view.leader < 0 or set(view.isr) == set(view.replicas):
            continue
        if all(active(b) for b in view.replicas):
            batch.append(
                {"type": "isr_change", "topic": view.topic, "partition": view.partition,
                 "isr": list(view.replicas)}
            )  # fmt: skip
    for start in range(0, len(batch), 10_000):
        _apply(simulator, [batch[start : start + 10_000]], counter)


def _rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_one(args: argparse.Namespace, engine: str, size: int) -> dict[str, object]:
    settings = Settings(engine=engine, min_insync_replicas=2, simulate_brokers=True)
    load_average = os.getloadavg()[0]
    rows = engine_cluster_rows(settings, args.brokers, size, 3)
    began = time.process_time()
    simulator = Simulator.from_tables(settings, rows)  # type: ignore[arg-type]
    load = time.process_time() - began
    del rows
    gc.collect()
    held = _rss()
    result: dict[str, object] = {"load_s": load, "held": held, "loadavg": load_average}
    counter = [1]
    if args.isr_events:
        lines = isr_events(args.isr_events, 0, args.brokers, size, epochs=False)
        raw = [RawEvent(line, f"isr:{k}") for k, line in enumerate(lines)]
        began = time.process_time()
        output = simulator.apply(raw)
        seconds = time.process_time() - began
        results = output.appends["event_results"]
        errors = sum(1 for r in results if r.get("error"))
        if output.appends["rejected_events"] or errors:
            raise SystemExit(f"isr_change refused: {errors} errors")
        del output, raw
        result["isr_change"] = [args.isr_events, seconds]
    for workload in WORKLOADS:
        if workload.name not in args.workloads:
            continue
        total = [0, 0, 0.0]
        for rep in range(args.repeats if workload.repeated else 1):
            measured = _apply(simulator, workload.batches(args, size, rep), counter)
            total = [a + b for a, b in zip(total, measured, strict=True)]
            _apply(simulator, workload.restore(args, size, rep), counter)
        _catch_up(simulator, counter)
        result[workload.name] = total
    result["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return result


def _child(args: argparse.Namespace, engine: str, size: int) -> dict[str, object]:
    command = [sys.executable, __file__, *sys.argv[1:], "--one", engine, str(size)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    return dict(json.loads(done.stdout.splitlines()[-1]))


def _micros(cell: object) -> float:
    _, changes, seconds = cell  # type: ignore[misc]
    return seconds * 1e6 / max(changes, 1)


def report(results: dict[tuple[str, int], dict[str, object]], args: argparse.Namespace) -> None:
    sizes = sorted({size for _, size in results})
    for (engine, size), r in sorted(results.items()):
        line = (
            f"{engine:5s} {size:>9,d}: load avg {r['loadavg']:.1f}, loaded in "
            f"{r['load_s']:.1f} s CPU, held {r['held'] / size:,.0f} B/partition, peak RSS "
            f"{r['peak'] / 2**20:,.0f} MiB = {r['peak'] / size:,.0f} B/partition"  # type: ignore[operator]
        )
        if "isr_change" in r:
            count, seconds = r["isr_change"]  # type: ignore[misc]
            line += f"; isr_change {count / seconds:,.0f} events/s"
        print(line)
    smallest = sizes[0]
    print(f"\nµs of CPU per partition change (ratio to {smallest:,d} partitions)")
    header = "".join(f"{engine + ' ' + f'{s:,d}':>22}" for engine in ENGINES for s in sizes)
    print(f"{'workload':20s}{header}")
    for workload in WORKLOADS:
        cells = ""
        for engine in ENGINES:
            base = results.get((engine, smallest), {}).get(workload.name)
            for size in sizes:
                cell = results.get((engine, size), {}).get(workload.name)
                if cell is None:
                    cells += f"{'-':>22}"
                    continue
                micros = _micros(cell)
                ratio = f" ({micros / _micros(base):4.2f})" if base is not None else ""
                cells += f"{micros:>15.2f}{ratio:>7}"
        print(f"{workload.name:20s}{cells}")
    print("\npartition changes per workload:")
    for (engine, size), r in sorted(results.items()):
        counts = {w.name: r[w.name][1] for w in WORKLOADS if w.name in r}  # type: ignore[index]
        print(f"  {engine:5s} {size:>9,d}: {counts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[25_000, 100_000])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--restarts", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--storm-pairs", type=int, default=6)
    parser.add_argument("--isr-events", type=int, default=100_000)
    parser.add_argument(
        "--workloads", nargs="+", choices=[w.name for w in WORKLOADS],
        default=[w.name for w in WORKLOADS],
    )  # fmt: skip
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        engine, size = args.one
        print(json.dumps(run_one(args, engine, int(size))))
        return
    results = {}
    for size in sorted(args.sizes):
        for engine in args.engines:  # the two engines one after the other, size by size
            results[(engine, size)] = _child(args, engine, size)
            print(f"done: {engine} {size:,d} ({results[(engine, size)]})", flush=True)
    report(results, args)


if __name__ == "__main__":
    main()
