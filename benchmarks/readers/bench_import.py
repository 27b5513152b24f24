"""`kcsim import zk-logs` speed and memory on a generated large state-change.log.

The log is built from a template of real Kafka 3.7.1 lines (tests/data/zk-logs-3.7.1, the
controller's own "[Controller id=N epoch=E]" state lines and the brokers' lines around
them), repeated with shifting times until it reaches --size-mb; a controller.log elects
the controller first. Prints lines/s, MB/s and the importer's peak RSS.

    python benchmarks/readers/bench_import.py --size-mb 1024 --dir /tmp/kcsim-bench-import
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "tests/data/zk-logs-3.7.1/broker-3/state-change.log.gz"
ELECTED = (
    "[2026-01-01 00:00:00,000] INFO [Controller id=3] 3 successfully elected as the controller."
    " Epoch incremented to 1 and epoch zk version is now 1 (kafka.controller.KafkaController)\n"
    "[2026-01-01 00:00:00,001] INFO [Controller id=3] Currently active brokers in the cluster:"
    " Set(1, 2, 3) (kafka.controller.KafkaController)\n"
)


def generate(path: Path, size: int) -> int:
    with gzip.open(TEMPLATE, "rt") as handle:
        template = [line.split("] ", 1)[1] for line in handle if line.startswith("[")]
    start, lines, written = datetime(2026, 1, 1, 0, 0, 1), 0, 0
    with path.open("w") as out:
        while written < size:
            for body in template:
                moment = start + timedelta(milliseconds=lines)
                line = f"[{moment:%Y-%m-%d %H:%M:%S},{moment.microsecond // 1000:03d}] {body}"
                out.write(line)
                written += len(line)
                lines += 1
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/kcsim-bench-import"))
    args = parser.parse_args()
    logs = args.dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "controller.log").write_text(ELECTED)
    log = logs / "state-change.log"
    lines = generate(log, args.size_mb * 1024 * 1024)
    size = log.stat().st_size
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "streaming.cli", "import", "zk-logs", str(logs)]
    command += ["--out", str(args.dir / "events.jsonl"), "--quiet"]
    started = time.monotonic()
    subprocess.run(command, env=env, check=False)
    seconds = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"state-change.log: {size / 2**20:.0f} MiB, {lines:,} lines")
    rate = size / 2**20 / seconds
    print(f"import: {seconds:.1f} s, {lines / seconds:,.0f} lines/s, {rate:.1f} MiB/s")
    print(f"peak RSS of the importer: {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
