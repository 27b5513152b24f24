"""What `health` and `violations` cost the core: events/s of two workloads on a 100k-partition
cluster, to be compared with the same script run on the code before them.

Run by hand (not a test):  python benchmarks/synthetic/bench_health.py [--rounds 3]

* `isr_change`: AlterPartitions, ISR shrink then expand partition after partition
  (`bench_spark.isr_events`), 6 brokers, in batches of `--batch` events;
* `rolling_restart`: controlled shutdown, failure and startup of `--restart-brokers`
  brokers in turn (`bench_core.rolling_restart`) on a 100-broker cluster.

Each round builds the cluster afresh (`Simulator.from_tables`) and times only
`Simulator.apply`. Prints each round's events/s and the best; the machine is shared, so
compare bests of runs taken side by side.
"""

from __future__ import annotations

import argparse
import gc
import time

from workloads import cluster_rows, events, isr_events, rolling_restart

from controller.config import Settings
from controller.simulator import RawEvent, Simulator


def isr_change(args: argparse.Namespace) -> float:
    simulator = Simulator.from_tables(Settings(), cluster_rows(6, args.partitions, 3))
    lines = isr_events(args.events, 0, 6, args.partitions)
    batches = [
        [RawEvent(line, f"bench:{i + start}") for i, line in enumerate(lines[start:][: args.batch])]
        for start in range(0, len(lines), args.batch)
    ]
    gc.collect()
    began = time.perf_counter()
    for batch in batches:
        simulator.apply(batch)
    return len(lines) / (time.perf_counter() - began)


def rolling(args: argparse.Namespace) -> float:
    settings = Settings(simulate_brokers=True)
    simulator = Simulator.from_tables(settings, cluster_rows(100, args.partitions, 3))
    restart = argparse.Namespace(brokers=100, restart_brokers=args.restart_brokers)
    batch = events(rolling_restart(restart))
    gc.collect()
    began = time.perf_counter()
    simulator.apply(batch)
    return len(batch) / (time.perf_counter() - began)


WORKLOADS = {"isr_change": isr_change, "rolling_restart": rolling}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--restart-brokers", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    args = parser.parse_args()
    for name in args.workloads:
        rates = []
        for round_ in range(args.rounds):
            rates.append(WORKLOADS[name](args))
            print(f"{name:16s} round {round_ + 1}: {rates[-1]:10,.1f} events/s", flush=True)
        print(f"{name:16s} best    : {max(rates):10,.1f} events/s", flush=True)


if __name__ == "__main__":
    main()
