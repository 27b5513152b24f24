"""`kcsim shadow --metadata-log --once` on a large KRaft cluster's log: time, peak memory,
and the saved state's size and save time.

The log is written with Kafka 4.1.1's own classes (`benchmarks/readers/KraftLogGenerator.java`,
MetadataRecordSerde and MemoryRecords, as a controller's log holds them): three brokers,
topics of 100 partitions up to --partitions, then --changes PartitionChangeRecords (ISR
shrinks and expansions). The shadow runs in a child process as `--once` runs it (the tail
JVM, the model, the events written to a file directory, the state saved at the stop),
with the quorum's high watermark taken as the log's end: the one DescribeMetadataQuorum
request `--once` makes to a live cluster is left out, there being no cluster. Printed:
the wall and CPU time, the peak RSS of the Python process and of the tail JVM, the events
written; then, of the model the read left, `to_json` + the atomic write (what every
save costs), the state file's size, and the load (`json` + `from_json`) of a restart.

    python benchmarks/readers/bench_shadow_kraft.py --partitions 10000 --dir /tmp/kcsim-bench-shadow
    python benchmarks/readers/bench_shadow_kraft.py --partitions 100000 --dir /tmp/kcsim-bench

`--real`: the log of a real single-node KRaft cluster (`kcsim kafka-local start --nodes 1`
in --dir, started if not up, stopped at the end) whose topics of 100 partitions (one
replica) are created in bulk through kafka-python's admin client up to --partitions; then
`kcsim shadow --metadata-log ... --once` itself runs against it, DescribeMetadataQuorum
included, timed with its children's CPU and peak RSS (the largest of the shadow and its
JVM, as getrusage reports children).

    python benchmarks/readers/bench_shadow_kraft.py --real --partitions 100000 \\
        --dir /tmp/kcsim-bench-real
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from streaming.jars import kafka_libs_dir  # noqa: E402

_CHILD = """
import json, resource, sys, time
from pathlib import Path
from streaming.importers.kraft_log_model import KraftLogModel
from streaming.shadow.kraft_shadow import KraftShadow
from streaming.shadow.metadata_log_tail import LogTail
from streaming.shadow.outputs import open_output, write_state

log, out = Path(sys.argv[1]), Path(sys.argv[2])
wall, cpu = time.perf_counter(), time.process_time()
with LogTail() as tail:
    sink, state = open_output(f"file:{out}", "bench")
    shadow = KraftShadow(log, tail, sink, state, "bench", lambda text: None)
    shadow.poll(1 << 62)
    shadow.close()
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
children = resource.getrusage(resource.RUSAGE_CHILDREN)
jvm_cpu = children.ru_utime + children.ru_stime
print("once", wall, cpu, own, children.ru_maxrss, shadow.emitted, jvm_cpu)
saved = json.loads(state.read_text())
saves, save_cpus = [], []
for _ in range(3):
    began, began_cpu = time.perf_counter(), time.process_time()
    saved["model"] = shadow.model.to_json()
    write_state(state, saved)
    saves.append(time.perf_counter() - began)
    save_cpus.append(time.process_time() - began_cpu)
loads = []
for _ in range(3):
    began = time.perf_counter()
    KraftLogModel.from_json(json.loads(state.read_text())["model"])
    loads.append(time.perf_counter() - began)
print("state", state.stat().st_size, min(saves), min(loads), min(save_cpus))
"""


def generate(directory: Path, records: int, partitions: int) -> None:
    generator = ROOT / "benchmarks" / "readers" / "KraftLogGenerator.java"
    subprocess.run(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", str(kafka_libs_dir() / "*"),
         str(generator), str(directory), str(records), str(partitions)],
        check=True,
    )  # fmt: skip


def real(args: argparse.Namespace) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from streaming.cli import main as kcsim

    cluster = ["kafka-local", "--nodes", "1", "--dir", str(args.dir)]
    log_dir = args.dir / "node-1" / "data" / "__cluster_metadata-0"
    began = time.perf_counter()
    assert kcsim([*cluster[:1], "start", *cluster[1:]]) == 0
    properties = (args.dir / "kraft-cluster.properties").read_text()
    port = next(x.split("=", 1)[1] for x in properties.splitlines() if x.startswith("node.1.port="))
    bootstrap = f"127.0.0.1:{port}"
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=120_000)
        have = {t for t in admin.list_topics() if t.startswith("bench-")}
        wanted = [f"bench-{i}" for i in range(args.partitions // 100)]
        topics = [NewTopic(t, 100, 1) for t in wanted if t not in have]
        for i in range(0, len(topics), 20):
            admin.create_topics(topics[i : i + 20], timeout_ms=120_000)
        admin.close()
        size_mb = sum(p.stat().st_size for p in log_dir.glob("*.log")) / 2**20
        print(
            f"cluster started and {len(wanted) * 100:,} partitions created "
            f"in {time.perf_counter() - began:.0f} s; "
            f"metadata log {size_mb:.1f} MiB"
        )
        out = args.dir / "shadow-out"
        subprocess.run(["rm", "-rf", str(out)], check=True)
        wall = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "streaming.cli", "shadow", "--metadata-log", str(log_dir),
             "--bootstrap-server", bootstrap, "--out", f"file:{out}", "--cluster", "bench",
             "--once"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        wall = time.perf_counter() - wall
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        state = out / ".shadow-state-bench.json"
        print(
            f"--once: {wall:.1f} s wall, {usage.ru_utime + usage.ru_stime:.1f} s CPU (shadow "
            f"+ JVM), peak RSS {usage.ru_maxrss / 1024:.0f} MiB; {done.stderr.strip()}; "
            f"state {state.stat().st_size / 2**20:.1f} MiB"
        )
    finally:
        if not args.keep:
            kcsim([*cluster[:1], "stop", *cluster[1:]])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kcsim-bench-shadow"))
    parser.add_argument("--real", action="store_true", help="a real single-node cluster's log")
    parser.add_argument("--keep", action="store_true", help="--real: leave the cluster up")
    args = parser.parse_args()
    if args.real:
        real(args)
        return
    base = args.dir / f"p{args.partitions}-c{args.changes}"
    log_dir = base / "__cluster_metadata-0"
    segment = log_dir / "00000000000000000000.log"
    # three registrations, a TopicRecord per 100 partitions, a PartitionRecord each
    records = 3 + args.partitions // 100 + args.partitions + args.changes
    if not segment.is_file():
        generate(log_dir, records, args.partitions)
    size_mb = segment.stat().st_size / 2**20
    print(
        f"log: {records:,} records ({args.partitions:,} partitions, {args.changes:,} "
        f"partition changes), {size_mb:.1f} MiB"
    )
    out = base / "out"
    subprocess.run(["rm", "-rf", str(out)], check=True)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(log_dir), str(out)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()}
    wall, cpu, own_kib, jvm_kib, events, jvm_cpu = lines["once"]
    size, save_s, load_s, save_cpu = lines["state"]
    print(
        f"--once: {float(wall):.1f} s wall, CPU {float(cpu):.1f} s Python + "
        f"{float(jvm_cpu):.1f} s tail JVM, {int(events):,} "
        f"events; peak RSS: shadow {int(own_kib) / 1024:.0f} MiB, tail JVM "
        f"{int(jvm_kib) / 1024:.0f} MiB"
    )
    print(
        f"state: {int(size) / 2**20:.1f} MiB; save (to_json + atomic write) "
        f"{float(save_s) * 1000:.0f} ms ({float(save_cpu) * 1000:.0f} ms CPU); "
        f"load (json + from_json) {float(load_s) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
