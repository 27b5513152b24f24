"""`kcsim shadow --once` on a large cluster: time and peak RSS.

Writes a cluster in Kafka 3.7's ZooKeeper layout (3 brokers, topics of 100 partitions,
RF 3, one state znode each) under a fresh chroot of the ZooKeeper given, runs
`kcsim shadow --once` on that chroot, prints the figures and removes the chroot. Run by
hand, e.g. against the ZooKeeper of `kcsim kafka-local start --zk`:

    python benchmarks/live/bench_shadow.py --zookeeper 127.0.0.1:PORT --partitions 10000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kazoo.client import KazooClient

ROOT = Path(__file__).resolve().parents[2]
PER_TOPIC = 100


def populate(client: KazooClient, chroot: str, partitions: int) -> None:
    for broker in (1, 2, 3):
        registration = {"version": 5, "host": "127.0.0.1", "port": 9000 + broker, "rack": "r"}
        client.create(
            f"{chroot}/brokers/ids/{broker}", json.dumps(registration).encode(), makepath=True
        )
    client.create(f"{chroot}/controller", b'{"version":2,"brokerid":1,"kraftControllerEpoch":-1}')
    client.create(f"{chroot}/controller_epoch", b"1")
    client.ensure_path(f"{chroot}/brokers/topics")
    pending = []
    for t in range(partitions // PER_TOPIC):
        name = f"bench-{t:05d}"
        assignment = {str(p): [(p + i) % 3 + 1 for i in range(3)] for p in range(PER_TOPIC)}
        topic = {
            "version": 3,
            "partitions": assignment,
            "adding_replicas": {},
            "removing_replicas": {},
        }
        client.create(f"{chroot}/brokers/topics/{name}", json.dumps(topic).encode())
        for p, replicas in assignment.items():
            state = {
                "controller_epoch": 1,
                "leader": replicas[0],
                "version": 1,
                "leader_epoch": 0,
                "isr": replicas,
                "leader_recovery_state": 0,
            }
            path = f"{chroot}/brokers/topics/{name}/partitions/{p}/state"
            pending.append(client.create_async(path, json.dumps(state).encode(), makepath=True))
        for result in pending:
            result.get()
        pending.clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zookeeper", required=True)
    parser.add_argument("--partitions", type=int, default=10_000)
    args = parser.parse_args()
    chroot = f"/kcsim-bench-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=args.zookeeper)
    client.start(timeout=30)
    try:
        started = time.monotonic()
        populate(client, chroot, args.partitions)
        print(f"wrote {args.partitions} partitions in {time.monotonic() - started:.1f} s")
        with tempfile.TemporaryDirectory() as out:
            command = [
                sys.executable,
                "-m",
                "streaming.cli",
                "shadow",
                "--once",
                "--quiet",
                "--zookeeper",
                args.zookeeper + chroot,
                "--out",
                f"file:{out}",
            ]
            started = time.monotonic()
            subprocess.run(command, cwd=ROOT, check=True)
            seconds = time.monotonic() - started
            peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            lines = sum(len(p.read_text().splitlines()) for p in Path(out).glob("shadow-*"))
        print(
            f"kcsim shadow --once: {args.partitions} partitions, {lines} events, "
            f"{seconds:.2f} s, peak RSS {peak_mib:.0f} MiB"
        )
    finally:
        client.delete(chroot, recursive=True)
        client.stop()
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
