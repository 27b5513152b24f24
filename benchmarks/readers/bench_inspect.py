"""`kcsim state` and `kcsim history` on a local lake: wall time of the command read without
Spark (`streaming.lake.local_reader`) against the same reads through Spark, each a fresh process
as a user runs it.

Run by hand (not a test), on a lake `kcsim run` wrote, e.g.

    kcsim run --source file:examples/events --lake /tmp/x --once
    python benchmarks/readers/bench_inspect.py --lake /tmp/x --topic orders --partition 0
    python benchmarks/synthetic/bench_spark.py --partitions 100000 --batches 1000 10000 \\
        --skip-core --dir /tmp/big
    # then: --lake /tmp/big/lake --cluster bench --topic topic-00000 ...
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# the commands' Spark path, as they run it for a lake they do not read natively
SPARK_STATE = """
import sys
from streaming.insight.state import show_state
from streaming.lake.spark_session import build_session
spark = build_session("kcsim-state", "local[2]")
show_state(spark, sys.argv[1], sys.argv[2] or None, None, sys.stdout)
spark.stop()
"""
SPARK_HISTORY = """
import sys
from streaming.insight.history import partition_history, show_history
from streaming.lake.spark_session import build_session
spark = build_session("kcsim-history", "local[2]")
changes = partition_history(spark, sys.argv[1], sys.argv[4], sys.argv[2], int(sys.argv[3]))
show_history(changes, sys.stdout)
spark.stop()
"""


def timed(command: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{command[:4]} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, required=True)
    parser.add_argument("--cluster", default="default")
    parser.add_argument("--as-of", default="", help="also time `state --as-of` this")
    parser.add_argument("--runs", type=int, default=3, help="native runs (Spark: one)")
    args = parser.parse_args()
    python = sys.executable
    state = ["state", "--lake", args.lake] + (["--as-of", args.as_of] if args.as_of else [])
    key = ["--topic", args.topic, "--partition", str(args.partition), "--cluster", args.cluster]
    cases = {
        "state": (
            [python, "-m", "streaming.cli", *state],
            [python, "-c", SPARK_STATE, args.lake, args.as_of],
        ),
        "history": (
            [python, "-m", "streaming.cli", "history", "--lake", args.lake, *key],
            [python, "-c", SPARK_HISTORY, args.lake, args.topic, str(args.partition), args.cluster],
        ),
    }
    for name, (native, spark) in cases.items():
        runs = [timed(native) for _ in range(args.runs)]
        spark_seconds, spark_text = timed(spark)
        same = all(text == spark_text for _, text in runs)
        figures = ", ".join(f"{s:.2f}" for s, _ in runs)
        print(
            f"{name:8} native {figures} s   spark {spark_seconds:.1f} s   "
            f"same text: {'yes' if same else 'NO'} ({len(spark_text.splitlines())} lines)",
            flush=True,
        )


if __name__ == "__main__":
    main()
