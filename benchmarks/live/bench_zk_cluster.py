"""ZooKeeper-mode cluster benchmark: what `kcsim kafka-local start --zk` costs.

Run by hand (not a test):

    python benchmarks/live/bench_zk_cluster.py [--brokers 3] [--rounds 2] [--jvm-flags "..."]

Starts a cluster in a temp dir, then prints: the time `start` takes to return (every
broker registered and started up), each JVM's resident memory (VmRSS) once all are up
and again after a topic with one partition per broker exists, the time to restart a
broker after a SIGKILL (mostly the wait for its old ZooKeeper session to expire, 6 s)
and after a controlled shutdown, and the time `stop` takes. `--jvm-flags` replaces
zk_cluster.JVM_FLAGS for the run, to compare collectors or JIT settings.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from streaming.local_clusters import zk_cluster


def rss_mib(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def print_rss(layout: zk_cluster.Layout, label: str) -> None:
    rows = [("zookeeper", rss_mib(layout.zookeeper_pid()))]
    rows += [(f"broker-{b}", rss_mib(layout.broker_pid(b))) for b in layout.broker_ids]
    total = sum(mib for _, mib in rows)
    cells = ", ".join(f"{name} {mib:.0f}" for name, mib in rows)
    print(f"RSS MiB {label}: {cells}; total {total:.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=zk_cluster.DEFAULT_BROKERS)
    parser.add_argument("--rounds", type=int, default=2, help="restarts of each kind")
    parser.add_argument("--jvm-flags", help="replaces JVM_FLAGS (space separated)")
    args = parser.parse_args()
    if args.jvm_flags is not None:
        zk_cluster.JVM_FLAGS = tuple(args.jvm_flags.split())
    print(f"JVM flags: {' '.join(zk_cluster.JVM_FLAGS)}")
    print(f"heaps: ZooKeeper {zk_cluster.ZOOKEEPER_HEAP}, brokers {zk_cluster.BROKER_HEAP}")

    with tempfile.TemporaryDirectory(prefix="kcsim-bench-zk-") as tmp:
        data_dir = Path(tmp)
        try:
            took = timed(lambda: zk_cluster.start(data_dir, brokers=args.brokers))
            print(f"start --zk ({args.brokers} brokers): {took:.1f}s")
            layout = zk_cluster.load_layout(data_dir)
            print_rss(layout, "idle")

            admin = KafkaAdminClient(bootstrap_servers=layout.bootstrap)
            ids = list(layout.broker_ids)
            assignment = {p: ids[p:] + ids[:p] for p in range(len(ids))}
            admin.create_topics([NewTopic("bench", -1, -1, replica_assignments=assignment)])
            admin.close()
            print_rss(layout, "with a topic")

            victim = layout.broker_ids[-1]
            kills, shutdowns, starts = [], [], []
            for _ in range(args.rounds):
                zk_cluster.kill_broker(data_dir, victim)
                kills.append(timed(lambda: zk_cluster.start_broker(data_dir, victim)))
                shutdowns.append(timed(lambda: zk_cluster.shutdown_broker(data_dir, victim)))
                starts.append(timed(lambda: zk_cluster.start_broker(data_dir, victim)))
            for label, times in (
                ("start after SIGKILL", kills),
                ("controlled shutdown", shutdowns),
                ("start after controlled shutdown", starts),
            ):
                cells = ", ".join(f"{t:.1f}" for t in times)
                print(f"{label}: median {statistics.median(times):.1f}s ({cells})")
            print_rss(layout, "after restarts")
        finally:
            print(f"stop: {timed(lambda: zk_cluster.stop(data_dir)):.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
