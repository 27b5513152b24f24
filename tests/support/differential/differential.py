"""Differential testing against a real Kafka 3.7.1 controller: a `kcsim shadow` process
records the `zk_cluster` fixture's changes as events carrying `observed`, kcsim replays
them, and every difference between the real controller's state znodes and kcsim's state
is a `divergences` row.

`ShadowRecording` runs the shadow (a subprocess writing to a directory, from a snapshot
of the cluster as it is) and knows when it has caught up: its saved view of the cluster
equals what ZooKeeper holds now. `divergences` replays the recording through the core
(`kcsim replay`) and returns the table's rows.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from kafka.admin import KafkaAdminClient
from kazoo.exceptions import NoNodeError

from controller.config import Settings
from controller.replay.command import replay
from streaming.shadow.model import ShadowModel
from streaming.shadow.znode_reader import Reader
from tests.support.clusters.zk_cluster import ZkCluster, wait_for

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = "real"
# The shadow's quiet window before it writes an event. A controller slowed by a loaded
# machine (the suite runs in two processes on two cores) can take longer than 300 ms
# between a topic's znode and its partitions' state znodes; the event would then observe
# the topic without them. 800 ms keeps the recording faithful at a cost of ~0.5 s a step.
SETTLE_MS = 800


class ShadowRecording:
    """`kcsim shadow --zookeeper ZK --out file:DIR` for the span of a `with` block."""

    def __init__(self, zk: ZkCluster, out: Path, zookeeper: str | None = None) -> None:
        self.zk = zk
        self.out = out
        self.zookeeper = zookeeper or zk.zookeeper  # where the shadow connects (a relay)
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ShadowRecording:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        command = [sys.executable, "-m", "streaming.cli", "shadow", "--zookeeper"]
        command += [self.zookeeper, "--out", f"file:{self.out}", "--cluster", CLUSTER]
        command += ["--settle-ms", str(SETTLE_MS)]
        # stderr to a file: a pipe nobody reads would block the shadow once full
        self.stderr = (self.out.parent / "shadow.stderr").open("w")
        self.process = subprocess.Popen(command, env=env, cwd=ROOT, stderr=self.stderr)
        self.wait_caught_up()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # flushes what is pending, then exits
            self.process.wait(timeout=30)
        self.stderr.close()

    def log(self) -> str:
        return (self.out.parent / "shadow.stderr").read_text()

    @property
    def state_path(self) -> Path:
        return self.out / f".shadow-state-{CLUSTER}.json"

    def lag(self) -> list[str]:
        """What ZooKeeper holds now and the shadow's saved view (written after each flush,
        so nothing of it is pending) does not: brokers, topics, partition states,
        deletions, controller. Empty: the shadow has caught up."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"kcsim shadow exited: {self.log()}")
        try:
            saved = ShadowModel.from_json(json.loads(self.state_path.read_text()))
        except (FileNotFoundError, ValueError):
            return ["no saved state yet"]
        snap = Reader(self.zk.client, None).snapshot()
        lag = [
            f"broker {b}"
            for b in saved.brokers.keys() | snap.brokers.keys()
            if saved.brokers.get(b) != snap.brokers.get(b)
        ]
        topics = {t: info for t, (info, _) in snap.topics.items()}
        lag += [
            f"topic {t}"
            for t in saved.topics.keys() | topics.keys()
            if saved.topics.get(t) != topics.get(t)
        ]
        states = {tp: state for tp, (state, _) in snap.states.items()}
        lag += [
            f"state {tp}: {saved.states.get(tp)} != {states.get(tp)}"
            for tp in saved.states.keys() | states.keys()
            if saved.states.get(tp) != states.get(tp)
        ]
        if saved.deleting != set(snap.deletes):
            lag.append(f"deletions {saved.deleting} != {set(snap.deletes)}")
        if saved.controller != (snap.controller[0] if snap.controller else None):
            lag.append(f"controller {saved.controller}")
        return lag

    def wait_caught_up(self, timeout_s: float = 60.0) -> None:
        lag: list[str] = []

        def caught_up() -> bool:
            lag[:] = self.lag()
            return not lag

        try:
            wait_for(caught_up, "the shadow to have written ZooKeeper's present state", timeout_s)
        except AssertionError as error:
            raise AssertionError(f"{error}; behind on {lag}") from None

    def events(self) -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        for path in sorted(self.out.glob("shadow-*.jsonl")):
            lines += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        return lines


def divergences(events: Path, out: Path | None = None) -> list[dict[str, Any]]:
    """`kcsim replay` of `events` (the core, in process): the `divergences` table's rows."""
    out = out or events.parent / "tables"
    replay(Settings.load(None, ()), events, out)
    text = (out / "divergences.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def explain(rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> str:
    """The divergence rows and the events they came from, for an assertion message."""
    ids = {r["event_id"] for r in rows}
    related = [e for e in events if e.get("event_id") in ids]
    return "\n".join(["divergences:", *map(json.dumps, rows), "events:", *map(json.dumps, related)])


# --------------------------------------------------------------- cluster operations


def admin(zk: ZkCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=zk.bootstrap, client_id="kcsim-differential")


def topic_znode(zk: ZkCluster, topic: str) -> dict[str, Any] | None:
    try:
        return json.loads(zk.client.get(f"/brokers/topics/{topic}")[0])
    except NoNodeError:
        return None


def assignment_of(zk: ZkCluster, topic: str) -> dict[int, list[int]]:
    znode = topic_znode(zk, topic)
    assert znode is not None, f"topic {topic} has no znode"
    return {int(p): r for p, r in znode["partitions"].items()}


def wait_settled(zk: ZkCluster, timeout_s: float = 60.0) -> None:
    """Every partition of the cluster (other tests' topics too: their catch-up would race
    the next operation) with a live ISR member led by a live broker, with every live
    replica back in its ISR: elections and a restart's catch-up are done."""

    def settled() -> bool:
        live = zk.registered()
        for topic in zk.client.get_children("/brokers/topics"):
            znode = topic_znode(zk, topic)
            if znode is None:
                continue  # deleted meanwhile
            for p, replicas in znode["partitions"].items():
                state = zk.partition_state(topic, int(p))
                if state is None:
                    return False
                up = [b for b in replicas if b in live]
                if not set(state.isr) & live:
                    continue  # only dead brokers in the ISR: offline until one is back
                if state.leader not in live or not set(up) <= set(state.isr):
                    return False
        return True

    wait_for(settled, "live leaders and full ISRs", timeout_s)


def wait_left(zk: ZkCluster, broker: int, topics: list[str], timeout_s: float = 60.0) -> None:
    """`broker` unregistered and out of every ISR of `topics` that has another member."""
    zk.wait_unregistered([broker], timeout_s)

    def left() -> bool:
        for topic in topics:
            for p in assignment_of(zk, topic):
                state = zk.partition_state(topic, p)
                if state is None or (broker in state.isr and len(state.isr) > 1):
                    return False
                if state.leader == broker:
                    return False
        return True

    wait_for(left, f"broker {broker} out of the ISRs of {topics}", timeout_s)


def delete_topics(zk: ZkCluster, topics: list[str], timeout_s: float = 60.0) -> None:
    """Delete (those that exist) and wait until their znodes and deletion requests are
    gone."""
    existing = [t for t in topics if topic_znode(zk, t) is not None]
    if not existing:
        return
    client = admin(zk)
    try:
        client.delete_topics(existing)
    finally:
        client.close()
    wait_for(
        lambda: all(
            topic_znode(zk, t) is None and not zk.client.exists(f"/admin/delete_topics/{t}")
            for t in topics
        ),
        f"{topics} deleted",
        timeout_s,
    )


def write_topic_znode(zk: ZkCluster, topic: str, assignment: dict[int, list[int]]) -> None:
    """Create `topic` as ZooKeeper-mode admin tools do (AdminZkClient: the config znode,
    then the topic znode the controller watches), which allows partitions with different
    replica counts (CreateTopics refuses them); waits for every state znode."""
    configs = {"version": 1, "config": {}}
    zk.client.create(f"/config/topics/{topic}", json.dumps(configs).encode())
    partitions = {str(p): r for p, r in assignment.items()}
    znode = {"version": 3, "partitions": partitions, "adding_replicas": {}}
    znode["removing_replicas"] = {}
    zk.client.create(f"/brokers/topics/{topic}", json.dumps(znode).encode())
    for partition in assignment:
        zk.wait_partition_state(topic, partition, lambda _: True, "state znode written")
