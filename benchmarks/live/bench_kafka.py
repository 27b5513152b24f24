"""Kafka path benchmark: producer -> Kafka -> `kcsim run` -> Delta.

Run by hand (not a test):

    python benchmarks/live/bench_kafka.py --rates 50,200,1000 --phase-seconds 30

Starts a local broker (or uses `--bootstrap`), starts the streaming job as a subprocess
reading one fresh topic into a fresh lake, then for each rate produces seeded chaos
events (`ChaosGenerator`, pre-generated so generation costs nothing during a phase) at
that rate for the phase, and waits (up to `--drain-seconds`) for the job to apply them.

Printed per rate:
* produced: events and the rate the producer achieved;
* applied/s: the job's sustained throughput over the phase (events applied between the
  phase's start and its last event's commit);
* lag: events produced but not yet applied, sampled every 0.5 s (max during the phase)
  and when the producer stopped;
* latency: end to end, per event with requests: from the producer's `send` to the Delta
  commit that made its rows visible in `controller_requests` (p50 / p95 / max).

Visibility is read from the tables' Delta logs directly (`_delta_log/*.json`: commit
timestamp and the data files each commit added, then those files' `event_id` column),
so the benchmark needs no Spark session of its own and measures commit time, not polling
time. Figures depend on the machine and on whatever else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]

from controller.config import Settings  # noqa: E402
from streaming.chaos.generator import ChaosGenerator, ClusterSpec  # noqa: E402
from streaming.chaos.produce import Limits, Record, event_record, make_producer, produce  # noqa: E402
from streaming.local_clusters import kafka_local  # noqa: E402

SAMPLE_S = 0.5


# ------------------------------------------------------------------- Delta log tail


class DeltaTail:
    """New commits of one Delta table: for each, its timestamp and the event ids it added."""

    def __init__(self, table: Path) -> None:
        self.table = table
        self.next_version = 0

    def poll(self) -> list[tuple[float, list[str]]]:
        out: list[tuple[float, list[str]]] = []
        log = self.table / "_delta_log"
        while True:
            commit = log / f"{self.next_version:020d}.json"
            if not commit.is_file():
                return out
            try:
                actions = [json.loads(line) for line in commit.read_text().splitlines()]
            except ValueError:
                return out  # being written: next poll
            stamp = 0.0
            ids: list[str] = []
            for action in actions:
                if "commitInfo" in action:
                    stamp = action["commitInfo"]["timestamp"] / 1000.0
                elif "add" in action:
                    path = self.table / unquote(action["add"]["path"])
                    ids.extend(pq.read_table(path, columns=["event_id"])["event_id"].to_pylist())
            out.append((stamp, ids))
            self.next_version += 1


@dataclass(slots=True)
class Visibility:
    """When each event id first showed up, per table (updated from two threads)."""

    applied: dict[str, float] = field(default_factory=dict)
    requests: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def update(self, applied: DeltaTail, requests: DeltaTail) -> None:
        with self.lock:
            for table, seen in ((applied, self.applied), (requests, self.requests)):
                for stamp, ids in table.poll():
                    for event_id in ids:
                        seen.setdefault(event_id, stamp)


# ------------------------------------------------------------------------- the job


class Job:
    def __init__(self, bootstrap: str, topic: str, lake: Path, trigger_s: float) -> None:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
        self.log = (lake.parent / "job.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", "run", "--source",
             f"kafka:{bootstrap}/{topic}", "--lake", str(lake),
             "--trigger-seconds", str(trigger_s)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
            start_new_session=True,
        )  # fmt: skip

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


# ------------------------------------------------------------------------ a phase


@dataclass(frozen=True, slots=True)
class PhaseResult:
    rate: float
    produced: int
    produce_rate: float
    applied: int
    applied_rate: float
    max_lag: int
    lag_at_stop: int
    latencies: list[float]

    def line(self) -> str:
        lat = sorted(self.latencies)
        if lat:
            p50 = statistics.median(lat)
            p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
            latency = f"{p50:6.2f} {p95:6.2f} {lat[-1]:6.2f}"
        else:
            latency = f"{'-':>6} {'-':>6} {'-':>6}"
        return (
            f"{self.rate:8.0f} {self.produced:8d} {self.produce_rate:9.1f} {self.applied:8d} "
            f"{self.applied_rate:9.1f} {self.max_lag:8d} {self.lag_at_stop:8d}  {latency}"
        )


HEADER = (
    f"{'rate/s':>8} {'produced':>8} {'prod/s':>9} {'applied':>8} {'applied/s':>9} "
    f"{'max lag':>8} {'lag@stop':>8}  {'p50 s':>6} {'p95 s':>6} {'max s':>6}"
)


def run_phase(
    bootstrap: str,
    topic: str,
    records: list[tuple[str, Record]],
    rate: float,
    seen: Visibility,
    tails: tuple[DeltaTail, DeltaTail],
    job: Job,
    drain_s: float,
) -> PhaseResult:
    sent_at: dict[str, float] = {}
    ids = [event_id for event_id, _ in records]
    done = threading.Event()
    lags: list[int] = []

    def sample() -> None:
        while not done.is_set():
            seen.update(*tails)
            lags.append(len(sent_at) - sum(1 for i in ids if i in seen.applied))
            done.wait(SAMPLE_S)

    def on_send(index: int, _record: Record) -> None:
        sent_at[ids[index]] = time.time()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    producer = make_producer(bootstrap, client_id="kcsim-bench")
    started = time.time()
    try:
        stats = produce(
            producer, topic, iter(r for _, r in records), Limits(rate=rate), on_send=on_send
        )
    finally:
        producer.close()
    seen.update(*tails)
    lag_at_stop = len(ids) - sum(1 for i in ids if i in seen.applied)
    deadline = time.monotonic() + drain_s
    while time.monotonic() < deadline and job.alive():
        seen.update(*tails)
        if all(i in seen.applied for i in ids):
            break
        time.sleep(SAMPLE_S)
    done.set()
    sampler.join()
    applied = [seen.applied[i] for i in ids if i in seen.applied]
    span = (max(applied) - started) if applied else 0.0
    latencies = [seen.requests[i] - sent_at[i] for i in ids if i in seen.requests]
    return PhaseResult(
        rate=rate,
        produced=stats.sent,
        produce_rate=stats.rate,
        applied=len(applied),
        applied_rate=len(applied) / span if span > 0 else 0.0,
        max_lag=max(lags, default=0),
        lag_at_stop=lag_at_stop,
        latencies=latencies,
    )


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--rates", default="50,200,1000", help="events/s, comma-separated")
    parser.add_argument("--phase-seconds", type=float, default=30.0)
    parser.add_argument("--drain-seconds", type=float, default=90.0)
    parser.add_argument("--trigger-seconds", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, help="directory for the lake (default: temp)")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]

    work = args.work or Path(tempfile.mkdtemp(prefix="kcsim-bench-kafka-"))
    work.mkdir(parents=True, exist_ok=True)
    own_broker = args.bootstrap is None
    bootstrap = args.bootstrap or kafka_local.start(work / "kafka")
    topic = f"kcsim-bench-{uuid.uuid4().hex[:8]}"
    lake = work / "lake"

    spec = ClusterSpec("bench", brokers=6, topics=6, partitions=8, rf=3)
    total = sum(int(r * args.phase_seconds) for r in rates)
    started = time.monotonic()
    generated = [
        (e["event_id"], event_record(e))
        # the job's settings (replay mode): the brokers' answers are events of the stream
        for e in islice(ChaosGenerator(args.seed, spec, Settings()).events(), total + 64)
    ]
    print(
        f"kcsim bench_kafka: {len(generated)} chaos events generated in "
        f"{time.monotonic() - started:.1f} s; broker {bootstrap}, topic {topic}, lake {lake}, "
        f"trigger {args.trigger_seconds} s",
        flush=True,
    )

    job = Job(bootstrap, topic, lake, args.trigger_seconds)
    seen = Visibility()
    tails = (DeltaTail(lake / "applied_events"), DeltaTail(lake / "controller_requests"))
    results: list[PhaseResult] = []
    try:
        # warm-up: the cluster's bootstrap events, until the job has applied them
        warm, rest = generated[:64], generated[64:]
        started = time.monotonic()
        warm_result = run_phase(bootstrap, topic, warm, 1000.0, seen, tails, job, 600.0)
        if warm_result.applied < len(warm):
            print("the job did not apply the warm-up events; see job.log", file=sys.stderr)
            return 1
        print(f"job up and warm after {time.monotonic() - started:.1f} s", flush=True)
        print(HEADER, flush=True)
        offset = 0
        for rate in rates:
            count = int(rate * args.phase_seconds)
            phase = rest[offset : offset + count]
            offset += count
            result = run_phase(bootstrap, topic, phase, rate, seen, tails, job, args.drain_seconds)
            results.append(result)
            print(result.line(), flush=True)
            if not job.alive():
                print("the job exited; see job.log", file=sys.stderr)
                return 1
    finally:
        job.stop()
        if own_broker:
            kafka_local.stop(work / "kafka")
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
