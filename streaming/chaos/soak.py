"""A soak: seeded chaos against a real local cluster for a while, with its `kcsim shadow`
writing to a topic of that cluster and `kcsim run` (a 1 s trigger) applying the topic
into a Delta lake, both as child processes; then what they lost, wrote twice and
diverged, their memory over time, and each broker kill's latency to the lake.

- **Lost / written twice:** every event of the topic (read by a consumer for the whole
  run) against the lake's `applied_events` once the lake has caught up: event ids in the
  topic and not the lake are lost; an id twice in the topic, or twice in the lake, is
  written twice; a `seq` that does not increase from one event to the next counts too.
- **Divergences:** the rows of the lake's `divergences` (and of `rejected_events`).
- **Memory:** the resident set of the shadow's and of the job's process trees (the job's
  Python driver and its Spark JVM; the KRaft shadow and its log-reading JVM), summed
  from /proc every `rss_every_s`.
- **Latency of a kill:** for each kill -9 of a broker the chaos driver made, from just
  before the signal to the moment the lake's log holds the commit that applied the
  event reporting it (a `broker_failure` of that broker, or a `controller_failover`
  naming it failed when it was the ZooKeeper-mode controller). The lake's `_delta_log`
  is polled every 0.2 s, its new commits' added files read, so the figure is the
  row's arrival in Delta to within that.

`benchmarks/live/bench_soak.py` runs it for minutes and prints the figures; a short run is a
test (`tests/streaming/shadow/test_soak.py`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from streaming.chaos.live_kraft import KraftChaos, KraftCluster
from streaming.chaos.live_zk import ZkChaos, ZkCluster, delete_topics, shadow_lag, wait_settled

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "kcsim-soak-events"
CLUSTER = "soak"
# The ZooKeeper shadow's quiet window (tests/support/differential/differential.py says why
# 800 ms on a loaded two-core machine)
SETTLE_MS = 800
KRAFT_TOPICS = {
    "soak-a": {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]},
    "soak-b": {0: [1, 2], 1: [3, 1]},
}


# ------------------------------------------------------------------ processes and memory


def spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """`kcsim ARGS` in its own process group, output to `log`."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "streaming.cli", *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    """SIGINT to the process group it leads (it flushes and exits), SIGKILL after."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def tree_rss_kib(pid: int) -> int:
    """The resident set of `pid` and every descendant, in KiB (/proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo += children.get(current, [])
        try:
            status = Path(f"/proc/{current}/status").read_text()
        except OSError:
            continue
        total += next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")),
            0,
        )
    return total


# ------------------------------------------------------------------ watchers


class TopicWatch(threading.Thread):
    """The events topic, read from the start for the whole run: each event and when it
    arrived (monotonic)."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
        )
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.last_arrival = time.monotonic()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for records in self.consumer.poll(timeout_ms=200).values():
                now = time.monotonic()
                self.events += [(now, json.loads(r.value)) for r in records]
                self.last_arrival = now
        self.consumer.close()


class LakeWatch(threading.Thread):
    """The lake's `applied_events`: when each event id's row first was committed
    (monotonic), from the new commits of its `_delta_log`, polled every 0.2 s."""

    def __init__(self, lake: Path) -> None:
        super().__init__(daemon=True)
        self.table = lake / "applied_events"
        self.seen: dict[str, float] = {}
        self.version = -1
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.poll()

    def poll(self) -> None:
        while True:
            commit = self.table / "_delta_log" / f"{self.version + 1:020d}.json"
            try:
                lines = commit.read_text().splitlines()
            except FileNotFoundError:
                return
            if not lines or not lines[-1].endswith("}"):
                return  # being written (Delta writes a commit whole; be safe)
            now = time.monotonic()
            for line in lines:
                add = json.loads(line).get("add")
                if add and add.get("dataChange", True):
                    ids = pq.read_table(self.table / add["path"], columns=["event_id"])
                    for event_id in ids.column("event_id").to_pylist():
                        self.seen.setdefault(event_id, now)
            self.version += 1


class MemoryWatch(threading.Thread):
    """(seconds since the start, shadow KiB, job KiB) every `every_s`."""

    def __init__(self, shadow: int, job: int, every_s: float) -> None:
        super().__init__(daemon=True)
        self.pids, self.every_s = (shadow, job), every_s
        self.samples: list[tuple[float, int, int]] = []
        self.began = time.monotonic()
        self.done = threading.Event()

    def run(self) -> None:
        while True:
            shadow, job = (tree_rss_kib(pid) for pid in self.pids)
            self.samples.append((time.monotonic() - self.began, shadow, job))
            if self.done.wait(self.every_s):
                return


# ------------------------------------------------------------------ the result


@dataclass(slots=True)
class SoakResult:
    engine: str
    seconds: float  # the chaos phase
    operations: Counter[str]
    events: int  # in the topic
    applied: int  # distinct event ids in applied_events
    lost: list[str]
    twice_in_topic: list[str]
    twice_in_lake: list[str]
    seq_faults: list[str]
    divergences: list[dict[str, Any]]
    rejected: int
    unattributed: int  # the shadow's "no event explains" lines
    memory: list[tuple[float, int, int]]  # (s, shadow KiB, job KiB)
    kill_latencies: list[tuple[int, float]]  # (broker, seconds kill -> row in Delta)
    warm_up_s: float
    notes: list[str] = field(default_factory=list)

    def faults(self, shadow_growth_mib: float, job_growth_mib: float) -> list[str]:
        """What this run got wrong, or grew past the bounds after warm-up: empty when
        nothing was lost, written twice, diverged, rejected or left unattributed and
        every kill's event reached Delta."""
        checks = {
            "no operation": not self.operations,
            "no event": not self.events,
            "lost": bool(self.lost),
            "written twice": bool(self.twice_in_topic or self.twice_in_lake),
            "seq not increasing": bool(self.seq_faults),
            "divergences": bool(self.divergences),
            "rejected events": bool(self.rejected),
            "unattributed records": bool(self.unattributed),
            "a kill without its event in Delta": bool(self.notes),
        }
        shadow, job = self.growth_kib()
        checks[f"shadow grew past {shadow_growth_mib} MiB"] = shadow > shadow_growth_mib * 1024
        checks[f"job grew past {job_growth_mib} MiB"] = job > job_growth_mib * 1024
        return [name for name, failed in checks.items() if failed]

    def memory_after_warm_up(self) -> list[tuple[float, int, int]]:
        return [s for s in self.memory if s[0] >= self.warm_up_s] or self.memory[-1:]

    def growth_kib(self) -> tuple[int, int]:
        """Per process tree: the median of the last third of the samples after warm-up
        less the median of the first third. Medians, not extremes: a sum of RSS over a
        process tree counts a fork's pages twice for a moment (a Spark or Python worker
        forked from a large parent), which one sample may catch."""
        after = self.memory_after_warm_up()
        third = max(1, len(after) // 3)
        first, last = after[:third], after[-third:]

        def grew(column: int) -> int:
            return int(
                statistics.median(s[column] for s in last)
                - statistics.median(s[column] for s in first)
            )

        return grew(1), grew(2)

    def lines(self) -> list[str]:
        ops = ", ".join(f"{k} {v}" for k, v in sorted(self.operations.items()))
        out = [
            f"{self.engine}: {self.seconds / 60:.1f} min of chaos, "
            f"{sum(self.operations.values())} operations ({ops})",
            f"  events: {self.events} in the topic, {self.applied} applied; lost "
            f"{len(self.lost)}, written twice {len(self.twice_in_topic)} (topic) + "
            f"{len(self.twice_in_lake)} (lake), seq faults {len(self.seq_faults)}",
            f"  divergences {len(self.divergences)}, rejected events {self.rejected}, "
            f"records the shadow could not attribute {self.unattributed}",
        ]
        out.append("  RSS MiB (t: shadow tree / job tree):")
        step = max(1, len(self.memory) // 12)
        picked = self.memory[::step]
        if self.memory and picked[-1] is not self.memory[-1]:
            picked.append(self.memory[-1])
        out += [f"    {t:6.0f} s: {s / 1024:6.0f} / {j / 1024:6.0f}" for t, s, j in picked]
        grow_shadow, grow_job = self.growth_kib()
        largest = max(j for _, _, j in self.memory)
        out.append(
            f"  after warm-up ({self.warm_up_s:.0f} s): shadow grew {grow_shadow / 1024:.0f} "
            f"MiB, job grew {grow_job / 1024:.0f} MiB (median of the last third of the samples "
            f"less that of the first); largest job sample {largest / 1024:.0f} MiB"
        )
        values = [s for _, s in self.kill_latencies]
        if values:
            out.append(
                f"  kill -9 -> its row in Delta: p50 {statistics.median(values):.2f} s, "
                f"p95 {percentile(values, 0.95):.2f} s, max {max(values):.2f} s "
                f"({len(values)} kills)"
            )
        else:
            out.append("  kill -9 -> its row in Delta: no broker kill in this run")
        out += [f"  note: {n}" for n in self.notes]
        return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ------------------------------------------------------------------ the soak


@dataclass(slots=True)
class Soak:
    """One soak run against a running cluster (ZooKeeper mode: `zk`; KRaft: `kraft`,
    whose shadow follows node `followed`'s metadata log)."""

    work: Path
    seed: int
    seconds: float
    zk: ZkCluster | None = None
    kraft: KraftCluster | None = None
    followed: int = 1
    rss_every_s: float = 10.0
    warm_up_s: float = 60.0
    say: Callable[[str], None] = print
    open_with_kill: bool = False  # a kill -9 of a broker first, then the seeded draws
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    zk_topics: list[str] = field(default_factory=list)  # the ZooKeeper chaos run's

    def delete_topics(self) -> None:
        """The soak's topics deleted (a cluster shared with other tests), every broker up."""
        if self.zk is not None:
            delete_topics(self.zk, [*self.zk_topics, TOPIC])
            return
        assert self.kraft is not None
        for topic in (*KRAFT_TOPICS, TOPIC):
            if topic in self.kraft.topics():
                self.kraft.delete_topic(topic)

    @property
    def engine(self) -> str:
        return "zk" if self.zk is not None else "kraft"

    @property
    def bootstrap(self) -> str:
        if self.zk is not None:
            return self.zk.bootstrap
        assert self.kraft is not None
        return self.kraft.bootstrap

    def _create_topics(self) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=30000)
        try:
            admin.create_topics([NewTopic(TOPIC, 1, 3)])
        except TopicAlreadyExistsError:
            raise RuntimeError(f"{TOPIC} exists already: a soak wants a fresh topic") from None
        finally:
            admin.close()
        if self.kraft is not None:
            for topic, assignment in KRAFT_TOPICS.items():
                self.kraft.create_topic(topic, assignment)
                self.kraft.wait_isr_full(topic)

    def _shadow_args(self) -> list[str]:
        out = ["--out", f"kafka:{self.bootstrap}/{TOPIC}", "--cluster", CLUSTER]
        out += ["--state", str(self.work / "shadow-state.json")]
        if self.zk is not None:
            return ["shadow", "--zookeeper", self.zk.zookeeper, *out, "--settle-ms", str(SETTLE_MS)]
        assert self.kraft is not None
        log = self.kraft.layout().metadata_log(self.followed)
        return ["shadow", "--metadata-log", str(log), "--bootstrap-server", self.bootstrap, *out]

    def run(self) -> SoakResult:
        self.work.mkdir(parents=True, exist_ok=True)
        lake = self.work / "lake"
        self._create_topics()
        shadow = spawn(self._shadow_args(), self.work / "shadow.log")
        self.processes.append(shadow)
        job_args = ["run", "--source", f"kafka:{self.bootstrap}/{TOPIC}", "--lake", str(lake)]
        job_args += ["--trigger-seconds", "1", "--engine", self.engine]
        job = spawn(job_args, self.work / "job.log")
        self.processes.append(job)
        memory = MemoryWatch(shadow.pid, job.pid, self.rss_every_s)
        topic, lakewatch = TopicWatch(self.bootstrap), LakeWatch(lake)
        for thread in (memory, topic, lakewatch):
            thread.start()
        try:
            began = time.monotonic()
            self._wait(lambda: topic.events and lakewatch.seen, "the first events in Delta", 600)
            self.say(f"{self.engine}: shadow and job up in {time.monotonic() - began:.0f} s")
            # memory is judged from here on at the earliest: the job has run its first batch
            self.warm_up_s = max(self.warm_up_s, time.monotonic() - memory.began)
            chaos_began = time.monotonic()
            operations, kills = self._chaos(chaos_began + self.seconds)
            chaos_s = time.monotonic() - chaos_began
            self.say(f"{self.engine}: chaos done, {sum(operations.values())} operations")
            self._drain(topic, lakewatch)
        finally:
            for thread in (memory, topic, lakewatch):
                thread.done.set()
            for process in self.processes:
                stop(process)
            for thread in (memory, topic, lakewatch):
                thread.join(30)
        return self._result(lake, chaos_s, operations, kills, topic, lakewatch, memory)

    def _wait(self, condition: Callable[[], Any], what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"a kcsim process exited: logs in {self.work}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} ({self.work})")
            time.sleep(0.2)

    def _chaos(self, until: float) -> tuple[Counter[str], list[tuple[int, float]]]:
        if self.zk is not None:
            zk = self.zk
            state = self.work / "shadow-state.json"

            def caught_up() -> None:
                self._wait(lambda: not shadow_lag(zk.client, state), "the shadow caught up", 120)

            zk_chaos = ZkChaos(zk, caught_up, self.seed, self.zk_topics)
            if self.open_with_kill:
                zk_chaos.kill()
                zk_chaos.done.append("kill")
                zk_chaos.caught_up()
            while time.monotonic() < until:
                zk_chaos.step()
            while zk_chaos.down:
                zk_chaos.start()
            wait_settled(zk)
            caught_up()
            return Counter(zk_chaos.done), zk_chaos.kills
        assert self.kraft is not None
        kraft_chaos = KraftChaos(self.kraft, tuple(KRAFT_TOPICS), self.seed)
        if self.open_with_kill:
            kraft_chaos.broker_kill()
            kraft_chaos.done["broker_kill"] += 1
        while time.monotonic() < until:
            kraft_chaos.step()
        kraft_chaos.settle()
        return kraft_chaos.done, kraft_chaos.kills

    def _drain(self, topic: TopicWatch, lakewatch: LakeWatch) -> None:
        """Until the topic has been quiet for 5 s and the lake holds every event of it."""

        def drained() -> bool:
            ids = {e["event_id"] for _, e in topic.events}
            return time.monotonic() - topic.last_arrival > 5 and ids <= lakewatch.seen.keys()

        self._wait(drained, "the lake to hold every event of the topic", 600)

    def _result(
        self,
        lake: Path,
        seconds: float,
        operations: Counter[str],
        kills: list[tuple[int, float]],
        topic: TopicWatch,
        lakewatch: LakeWatch,
        memory: MemoryWatch,
    ) -> SoakResult:
        events = [e for _, e in topic.events]
        ids = Counter(e["event_id"] for e in events)
        applied = DeltaTable(str(lake / "applied_events")).to_pyarrow_table(columns=["event_id"])
        lake_ids = Counter(applied.column("event_id").to_pylist())
        seqs = [e["seq"] for e in events if e.get("cluster", CLUSTER) == CLUSTER and "seq" in e]
        # seq increases from event to event (by more than one where the shadow derives it
        # from ZooKeeper's zxid or the metadata log's offset): a step back is a repeat
        seq_faults = [f"{a} then {b}" for a, b in pairwise(seqs) if b <= a]
        latencies: list[tuple[int, float]] = []
        notes: list[str] = []
        for broker, at in kills:
            found = next(
                (e for arrived, e in topic.events if arrived >= at and reports(e, broker)), None
            )
            landed = found and lakewatch.seen.get(found["event_id"])
            if landed:
                latencies.append((broker, landed - at))
            else:
                notes.append(f"no event in Delta reports the kill of broker {broker}")
        shadow_log = (self.work / "shadow.log").read_text(errors="replace")
        return SoakResult(
            engine=self.engine,
            seconds=seconds,
            operations=operations,
            events=len(events),
            applied=len(lake_ids),
            lost=sorted(ids.keys() - lake_ids.keys()),
            twice_in_topic=sorted(k for k, n in ids.items() if n > 1),
            twice_in_lake=sorted(k for k, n in lake_ids.items() if n > 1),
            seq_faults=seq_faults,
            divergences=table_rows(lake / "divergences"),
            rejected=len(table_rows(lake / "rejected_events")),
            unattributed=max(map(int, re.findall(r"; (\d+) in all\)", shadow_log)), default=0),
            memory=memory.samples,
            kill_latencies=latencies,
            warm_up_s=self.warm_up_s,
            notes=notes,
        )


def reports(event: dict[str, Any], broker: int) -> bool:
    """Whether `event` is the one reporting `broker`'s loss."""
    if event["type"] == "broker_failure":
        return event.get("broker") == broker or broker in event.get("brokers", [])
    if event["type"] == "controller_failover":
        return broker in event.get("failed_brokers", [])
    return False


def table_rows(path: Path) -> list[dict[str, Any]]:
    try:
        return DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    except TableNotFoundError:  # not created: the job wrote no row to it
        return []
