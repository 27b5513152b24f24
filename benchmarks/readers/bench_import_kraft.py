"""`kcsim import kraft-log` speed and memory on a 1M-record KRaft metadata log.

The log is written with Kafka 4.1.1's own classes (`benchmarks/readers/KraftLogGenerator.java`,
run by `java` from `.kafka/libs`): three brokers, topics of 100 partitions, then
PartitionChangeRecords (ISR shrinks and expansions) up to --records. Measured apart:

* the decoder alone: Kafka's DumpLogSegments over the log, its output discarded;
* the whole import (decoder JVM + the Python mapping, events written to a file), with the
  importer's peak RSS and the decoder JVM's peak RSS.

    python benchmarks/readers/bench_import_kraft.py --records 1000000 --dir /tmp/kcsim-bench-kraft
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from streaming.importers.kraft_log_decoder import decoder_command, log_files  # noqa: E402
from streaming.jars import kafka_libs_dir  # noqa: E402

# the import in a child process, so that its own peak RSS and its children's (the JVM)
# are measured apart
_CHILD = """
import resource, sys, time
from streaming.cli import main
began = time.perf_counter()
status = main(["import", "kraft-log", sys.argv[1], "--out", sys.argv[2], "--quiet"])
took = time.perf_counter() - began
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
jvm = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(status, took, own, jvm)
"""


def generate(directory: Path, records: int, partitions: int) -> None:
    generator = ROOT / "benchmarks" / "readers" / "KraftLogGenerator.java"
    subprocess.run(
        ["java", "-Xmx256m", "-XX:+UseSerialGC", "-cp", str(kafka_libs_dir() / "*"),
         str(generator), str(directory), str(records), str(partitions)],
        check=True,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kcsim-bench-kraft"))
    args = parser.parse_args()
    log_dir = args.dir / "__cluster_metadata-0"
    segment = log_dir / "00000000000000000000.log"
    if not segment.is_file():
        generate(log_dir, args.records, args.partitions)
    size_mb = segment.stat().st_size / 2**20
    print(f"log: {args.records:,} records, {args.partitions:,} partitions, {size_mb:.1f} MiB")

    began = time.perf_counter()
    subprocess.run(decoder_command(log_files(log_dir).all()), stdout=subprocess.DEVNULL,
                   check=True)  # fmt: skip
    decoder_s = time.perf_counter() - began
    print(f"decoder alone: {decoder_s:.1f} s, {args.records / decoder_s:,.0f} records/s")

    out = args.dir / "events.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(log_dir), str(out)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    status, took, own_kib, jvm_kib = done.stdout.split()
    took_s = float(took)
    with out.open() as handle:
        events = sum(1 for _ in handle)
    last = json.loads(out.read_text().splitlines()[-1]) if events else {}
    print(
        f"import: status {status}, {took_s:.1f} s, {args.records / took_s:,.0f} records/s, "
        f"{events:,} events (last seq {last.get('seq')}); peak RSS: importer "
        f"{int(own_kib) / 1024:.0f} MiB, decoder JVM {int(jvm_kib) / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
