"""Latency of the shadow pipeline: from a broker kill to its event's row in Delta.

Starts a ZooKeeper-mode cluster (`kcsim kafka-local start --zk`), a `kcsim shadow` writing
to a topic of that cluster's own Kafka (replication factor 3, so one broker down leaves
it writable), and `kcsim run` reading that topic into a local lake with a 1 s trigger.
Then, several times: SIGKILL a broker that is not the controller, note when its
registration leaves ZooKeeper (the 6 s session timeout), find the shadow's
`broker_failure` event in the topic, and poll the lake's `applied_events` until that
event's row is there (its divergences, if any, are committed in the same batch). The
broker is restarted, and applied, before the next kill. Prints p50/p95 of kill → Delta
and of znode gone → Delta. Run by hand:

    python benchmarks/live/bench_shadow_latency.py --kills 6
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
from kazoo.client import KazooClient

from streaming.chaos.soak import spawn
from streaming.local_clusters import zk_cluster

TOPIC = "kcsim-events"
CLUSTER = "bench"


def wait(condition: Callable[[], Any], what: str, timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)
    return result


def applied(lake: Path) -> set[str]:
    try:
        table = DeltaTable(str(lake / "applied_events")).to_pyarrow_table(columns=["event_id"])
    except Exception:  # the job has not created the table yet
        return set()
    return set(table.column("event_id").to_pylist())


class Watch:
    """The events topic as read so far, and the lake."""

    def __init__(self, bootstrap: str, lake: Path) -> None:
        self.consumer = KafkaConsumer(
            TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
        )
        self.events: list[dict[str, Any]] = []
        self.lake = lake

    def event_where(
        self, match: Callable[[dict[str, Any]], bool], since: int = 0
    ) -> dict[str, Any] | None:
        """The first event from index `since` on that `match`es (polling the topic)."""
        for records in self.consumer.poll(timeout_ms=100).values():
            self.events.extend(json.loads(r.value) for r in records)
        return next((e for e in self.events[since:] if match(e)), None)

    def in_lake(self, event: dict[str, Any]) -> bool:
        return event["event_id"] in applied(self.lake)

    def one_kill(self, cluster_dir: Path, client: KazooClient, victim: int) -> tuple[float, float]:
        """Seconds from the kill, and from the registration's removal, to the failure's
        row in Delta; then the broker is started again and its return applied."""
        seen = len(self.events)
        killed = time.monotonic()
        zk_cluster.kill_broker(cluster_dir, victim)
        wait(lambda: victim not in zk_cluster.registered_brokers(client), "znode gone")
        gone = time.monotonic()

        event = wait(
            lambda: self.event_where(lambda e: e["type"] == "broker_failure", seen),
            "the broker_failure event",
        )
        wait(lambda: self.in_lake(event), "the event in Delta")
        landed = time.monotonic()
        zk_cluster.start_broker(cluster_dir, victim)
        back = wait(
            lambda: self.event_where(
                lambda e: e["type"] == "broker_startup" and e.get("broker") == victim, seen
            ),
            "the broker_startup event",
        )
        wait(lambda: self.in_lake(back), "the restart in Delta")
        return landed - killed, landed - gone


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=6)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kcsim-latency-"))
    cluster_dir, lake = work / "cluster", work / "lake"
    address = zk_cluster.start(cluster_dir, brokers=3)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        admin = KafkaAdminClient(bootstrap_servers=address.bootstrap)
        admin.create_topics([NewTopic(TOPIC, 1, 3), NewTopic("data", 6, 2)])
        admin.close()
        procs.append(
            spawn(
                [
                    "shadow",
                    "--zookeeper",
                    address.zookeeper,
                    "--out",
                    f"kafka:{address.bootstrap}/{TOPIC}",
                    "--cluster",
                    CLUSTER,
                    "--settle-ms",
                    "300",
                    "--state",
                    str(work / "shadow-state.json"),
                ],
                work / "shadow.log",
            )
        )
        procs.append(
            spawn(
                [
                    "run",
                    "--source",
                    f"kafka:{address.bootstrap}/{TOPIC}",
                    "--lake",
                    str(lake),
                    "--trigger-seconds",
                    "1",
                ],
                work / "job.log",
            )
        )
        watch = Watch(address.bootstrap, lake)
        first = wait(
            lambda: watch.event_where(lambda e: e["type"] == "controller_failover"), "start"
        )
        wait(lambda: first["event_id"] in applied(lake), "the snapshot in Delta", 300)
        client = KazooClient(hosts=address.zookeeper)
        client.start()
        from_kill: list[float] = []
        from_znode: list[float] = []
        for n in range(args.kills):
            controller = zk_cluster.controller_id(client)
            victim = [b for b in (1, 2, 3) if b != controller][n % 2]
            since_kill, since_gone = watch.one_kill(cluster_dir, client, victim)
            from_kill.append(since_kill)
            from_znode.append(since_gone)
            print(
                f"kill {n + 1}: broker {victim}: {since_kill:.2f} s from the kill, "
                f"{since_gone:.2f} s from the znode's removal",
                flush=True,
            )
        client.stop()
        watch.consumer.close()
        for name, values in (("kill", from_kill), ("znode removal", from_znode)):
            print(
                f"{name} -> Delta applied_events: p50 {statistics.median(values):.2f} s, "
                f"p95 {percentile(values, 0.95):.2f} s, max {max(values):.2f} s "
                f"({len(values)} kills)"
            )
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
        zk_cluster.stop(cluster_dir)
        print(f"logs and lake in {work}")


if __name__ == "__main__":
    main()
