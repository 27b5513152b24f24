"""Core benchmark: synthetic clusters and workloads through `Simulator.apply`.

Run by hand (not a test):

    python benchmarks/synthetic/bench_core.py --brokers 300 --partitions 1000000

A cluster is built from synthetic state-table rows (`Simulator.from_tables`, the same path
a restart takes), every partition online with leader = preferred replica. Each workload is
then timed through the core alone, output rows included (not written to disk). Printed per
workload: events, seconds, events/s, partition and replica transitions/s (state_changes
rows), requests; and the resident memory the cluster costs per partition.
"""

from __future__ import annotations

import argparse
import gc
import resource
import time
import tracemalloc
from collections.abc import Callable, Iterator

from workloads import (
    broker_failure,
    cluster_rows,
    controlled_shutdown,
    events,
    reassignment_wave,
    rolling_restart,
    topic_churn,
)

from controller.config import Settings
from controller.simulator import Simulator

WORKLOADS: dict[str, Callable[[argparse.Namespace], list[dict]]] = {
    "broker_failure": broker_failure,
    "controlled_shutdown": controlled_shutdown,
    "rolling_restart": rolling_restart,
    "reassignment_wave": reassignment_wave,
    "topic_churn": topic_churn,
}


def run(args: argparse.Namespace) -> Iterator[str]:
    settings = Settings(simulate_brokers=True)
    rows = cluster_rows(args.brokers, args.partitions, args.rf)
    gc.collect()
    # tracemalloc counts what the context itself holds (RSS would also count the freed
    # input rows, which the allocator keeps)
    tracemalloc.start()
    started = time.perf_counter()
    simulator = Simulator.from_tables(settings, rows)
    build_seconds = time.perf_counter() - started
    del rows
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    yield (
        f"cluster: {args.brokers} brokers, {args.partitions:,} partitions, RF {args.rf}; "
        f"loaded in {build_seconds:.1f} s (traced); context holds "
        f"{held / args.partitions:,.0f} bytes/partition"
    )
    for name in args.workloads:
        batch = events(WORKLOADS[name](args))
        started = time.perf_counter()
        output = simulator.apply(batch)
        seconds = time.perf_counter() - started
        changes = output.appends["state_changes"]
        partition_changes = sum(1 for r in changes if r["entity"] == "partition")
        replica_changes = len(changes) - partition_changes
        requests = output.appends["controller_requests"]
        entries = sum(len(r["partitions"]) for r in requests)
        yield (
            f"{name:20s} events {len(batch):7,d}  {seconds:8.3f} s  "
            f"{len(batch) / seconds:10,.0f} events/s  "
            f"partition transitions {partition_changes:9,d} "
            f"({partition_changes / seconds:10,.0f}/s)  "
            f"replica transitions {replica_changes:9,d} ({replica_changes / seconds:10,.0f}/s)  "
            f"requests {len(requests):7,d} ({entries:,} partition entries)"
        )
        del output
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    yield f"peak RSS {peak / 2**20:,.0f} MiB ({peak / args.partitions:,.0f} bytes/partition)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--restart-brokers", type=int, default=5)
    parser.add_argument("--reassignments", type=int, default=1000)
    parser.add_argument("--churn-topics", type=int, default=20)
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    args = parser.parse_args()
    for line in run(args):
        print(line, flush=True)


if __name__ == "__main__":
    main()
