"""`kcsim shadow` against a real ZooKeeper-mode Kafka 3.7.1 cluster (the `zk_cluster`
fixture: one ZooKeeper, three brokers). SPEC §8 (broker changes), §10 (creation),
§13.1 (AlterPartition) as a real controller performs them."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError
from kazoo.protocol.states import KeeperState
from prometheus_client.parser import text_string_to_metric_families

from controller.config import Settings
from controller.replay.command import replay
from streaming.shadow.command import Shadow
from streaming.shadow.model import Event
from streaming.shadow.outputs import FileOutput, open_output
from tests.support.clusters.planted_cluster import plant_topic, planted
from tests.support.differential.shadow_process import DEADLINE_S, events, shadow, wait_for

pytestmark = pytest.mark.zk
ROOT = Path(__file__).resolve().parents[3]


def create_topics(bootstrap: str, assignments: dict[str, dict[int, list[int]]]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [
                NewTopic(t, num_partitions=-1, replication_factor=-1, replica_assignments=a)
                for t, a in assignments.items()
            ]
        )
    finally:
        admin.close()


def znode_states(zookeeper: str, topics: list[str]) -> dict[tuple[str, int], dict[str, Any]]:
    client = KazooClient(hosts=zookeeper, read_only=True)
    client.start(timeout=30)
    try:
        out = {}
        for topic in topics:
            assignment = json.loads(client.get(f"/brokers/topics/{topic}")[0])["partitions"]
            for p, replicas in assignment.items():
                data, stat = client.get(f"/brokers/topics/{topic}/partitions/{p}/state")
                state = json.loads(data)
                out[topic, int(p)] = {
                    "leader": state["leader"],
                    "leader_epoch": state["leader_epoch"],
                    "isr": state["isr"],
                    "partition_epoch": stat.version,
                    "replicas": replicas,
                }
        return out
    finally:
        client.stop()
        client.close()


def all_states_present(zookeeper: str, topics: list[str]) -> bool:
    try:
        return bool(znode_states(zookeeper, topics))
    except Exception:  # the controller has not written every state znode yet
        return False


def test_once_replayed_gives_the_znodes_partition_state(zk_cluster, tmp_path):
    names = [f"once-{uuid.uuid4().hex[:6]}", f"once-{uuid.uuid4().hex[:6]}"]
    create_topics(
        zk_cluster.bootstrap,
        {names[0]: {0: [1, 2], 1: [2, 3], 2: [3, 1]}, names[1]: {0: [1, 2, 3], 1: [3, 1, 2]}},
    )
    wait_for("state znodes", lambda: all_states_present(zk_cluster.zookeeper, names))
    out = tmp_path / "events"
    run = shadow(zk_cluster.zookeeper, out, "--once")
    assert run.wait(timeout=DEADLINE_S) == 0, run.stderr.read()
    emitted = events(out)
    assert emitted[-1]["type"] in (
        "controller_failover",
        "topic_deletion",
        "partition_reassignment",
    )
    expected = znode_states(zk_cluster.zookeeper, names)
    replay(Settings.load(None, ()), out, tmp_path / "tables")
    rows = [json.loads(x) for x in (tmp_path / "tables/partition_state.jsonl").read_text().split()]
    got = {
        (r["topic"], r["partition"]): {k: r[k] for k in expected[next(iter(expected))]}
        for r in rows
        if r["topic"] in names
    }
    assert got == expected
    rejected = (tmp_path / "tables/rejected_events.jsonl").read_text()
    assert rejected == ""


def cluster_levels(zookeeper: str) -> tuple[int, int]:
    """(offline, at or below min.insync.replicas) over every partition ZooKeeper holds, as
    CONTRACT §2 `health` counts them (no topic here sets min.insync.replicas: 1)."""
    client = KazooClient(hosts=zookeeper, read_only=True)
    client.start(timeout=30)
    try:
        offline = at_min = 0
        for topic in client.get_children("/brokers/topics"):
            for p in client.get_children(f"/brokers/topics/{topic}/partitions"):
                state = json.loads(client.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
                offline += state["leader"] < 0
                at_min += len(state["isr"]) <= 1
        return offline, at_min
    finally:
        client.stop()
        client.close()


def scrape(port: int) -> dict[str, float]:
    """The shadow's metrics of cluster `real` (and those of no cluster), by name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels.get("cluster", "real") == "real" and sample.labels["role"] == "shadow"
    }


def test_continuous_shadow_follows_a_broker_kill_and_restart(zk_cluster, tmp_path):
    """Also what the shadow says and serves while it runs: its start line, its metrics
    (`--metrics-port`, scraped), its events' `ts`, and its summary on SIGTERM."""
    name = f"live-{uuid.uuid4().hex[:6]}"
    create_topics(zk_cluster.bootstrap, {name: {0: [1, 3], 1: [3, 2], 2: [2, 1]}})
    wait_for("state znodes", lambda: all_states_present(zk_cluster.zookeeper, [name]))
    out = tmp_path / "events"
    proc = shadow(zk_cluster.zookeeper, out, "--metrics-port", "0")
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(proc.stderr), daemon=True)
    try:
        while not said or "watching ZooKeeper" not in said[-1]:
            said.append(proc.stderr.readline())
            assert said[-1], said
        start = said[-1]
        assert f"watching ZooKeeper {zk_cluster.zookeeper} as cluster 'real'" in start
        assert f"writing to file:{out}; state in {out / '.shadow-state-real.json'}" in start
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/metrics", start).group(1))
        reader.start()  # the rest of stderr, read on a thread so the pipe never fills
        wait_for(
            "the start events", lambda: any(e["type"] == "controller_failover" for e in events(out))
        )
        victim = 3 if zk_cluster.controller_id() != 3 else 2
        killed_at = time.time()
        zk_cluster.kill(victim)
        failure = wait_for(
            "broker_failure",
            lambda: next((e for e in events(out) if e["type"] == "broker_failure"), None),
        )
        assert failure.get("broker") == victim or victim in failure.get("brokers", [])
        # SPEC §9.1: the partitions the victim led got a new leader, the ISRs lost it
        seen = {
            (r["topic"], r["partition"]): r
            for r in failure["observed"]["partitions"]
            if r["topic"] == name
        }
        truth = znode_states(zk_cluster.zookeeper, [name])
        assert seen and all(victim not in r["isr"] for r in seen.values())
        for tp, row in seen.items():
            assert row["leader"] == truth[tp]["leader"] and row["isr"] == truth[tp]["isr"]
        # CONTRACT §1 `ts`: when ZooKeeper committed the cause (same host, same clock)
        failed_at = datetime.fromisoformat(failure["ts"]).timestamp()
        assert killed_at - 1 <= failed_at <= time.time()

        def served():  # what it serves matches what it wrote and what ZooKeeper holds
            got = scrape(port)
            levels = cluster_levels(zk_cluster.zookeeper)
            written = len(events(out))
            ok = got.get("kcsim_events_applied_total") == written and levels == (
                got.get("kcsim_offline_partitions"),
                got.get("kcsim_at_min_isr_partitions"),
            )
            return got if ok else None

        metrics = wait_for("the metrics of the failure", served)
        assert metrics["kcsim_at_min_isr_partitions"] >= 2  # the victim's two partitions
        assert metrics["kcsim_batch_duration_seconds_count"] >= 2  # bootstrap, failure
        assert 0 <= metrics["kcsim_lag_seconds"] < DEADLINE_S
        assert metrics["kcsim_lag_position"] >= 0
        zk_cluster.start(victim)

        def rejoined():
            later = events(out)[events(out).index(failure) + 1 :]
            starts = [e for e in later if e["type"] == "broker_startup"]
            isr = [e for e in later if e["type"] == "isr_change" and e["topic"] == name]
            return (starts, isr) if starts and len(isr) == 2 else None

        starts, isr_changes = wait_for("broker_startup and the ISR expansions", rejoined)
        assert starts[0].get("broker") == victim
        for change in isr_changes:  # SPEC §13.1: leader epoch kept, the ISR regains victim
            assert victim in change["isr"]
            [row] = change["observed"]["partitions"]
            assert row["partition_epoch"] == change["partition_epoch"] + 1
            assert row["leader_epoch"] == change["leader_epoch"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    reader.join(timeout=10)
    assert code == 0, said
    ids = [e["event_id"] for e in events(out)]
    assert len(ids) == len(set(ids))
    seqs = [e["seq"] for e in events(out)]
    assert seqs == sorted(seqs)
    assert all("ts" in e for e in events(out))
    flushes = [line for line in said if line.startswith("kcsim shadow: wrote ")]
    assert sum(int(line.split()[3]) for line in flushes) == len(ids)
    [*_, last] = [line for line in said if line.startswith("kcsim shadow: ")]
    assert last.startswith(
        f"kcsim shadow: stopped: {len(ids)} events written in {len(flushes)} flushes over "
    )


def test_a_killed_shadow_restarts_without_duplicates_or_gaps(zk_cluster, tmp_path):
    out = tmp_path / "events"
    first = shadow(zk_cluster.zookeeper, out)
    wait_for(
        "the start events", lambda: any(e["type"] == "controller_failover" for e in events(out))
    )
    before = f"before-{uuid.uuid4().hex[:6]}"
    create_topics(zk_cluster.bootstrap, {before: {0: [1, 2]}})
    wait_for("its creation", lambda: any(e.get("topic") == before for e in events(out)))
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    during = f"during-{uuid.uuid4().hex[:6]}"  # created while no shadow watches
    create_topics(zk_cluster.bootstrap, {during: {0: [2, 3], 1: [3, 1]}})
    wait_for("state znodes", lambda: all_states_present(zk_cluster.zookeeper, [during]))
    second = shadow(zk_cluster.zookeeper, out, "--once")
    assert second.wait(timeout=DEADLINE_S) == 0, second.stderr.read()
    emitted = events(out)
    ids = [e["event_id"] for e in emitted]
    assert len(ids) == len(set(ids))
    assert [e["seq"] for e in emitted] == sorted(e["seq"] for e in emitted)
    creations = [e for e in emitted if e["type"] == "topic_creation" and e["topic"] == during]
    assert len(creations) == 1 and creations[0]["assignment"] == {"0": [2, 3], "1": [3, 1]}
    assert [e for e in emitted if e["type"] == "controller_failover"][1:] == []  # no re-bootstrap
    # what the shadow now holds is ZooKeeper's present state
    saved = json.loads((out / ".shadow-state-real.json").read_text())
    held = {
        (t, p): (leader, epoch, isr, v) for t, p, leader, epoch, isr, _, v, _ in saved["states"]
    }
    for tp, z in znode_states(zk_cluster.zookeeper, [before, during]).items():
        assert held[tp] == (z["leader"], z["leader_epoch"], z["isr"], z["partition_epoch"])


def test_garbage_znode_is_rejected_and_the_rest_goes_on(zk_cluster, tmp_path):
    """Planted under a chroot of the cluster's ZooKeeper, never in Kafka's own tree."""
    chroot = f"/kcsim-garbage-{uuid.uuid4().hex[:8]}"
    writer = KazooClient(hosts=zk_cluster.zookeeper)
    writer.start(timeout=30)
    try:
        broker = {"version": 5, "host": "h", "port": 1, "rack": "a", "endpoints": []}
        writer.create(f"{chroot}/brokers/ids/1", json.dumps(broker).encode(), makepath=True)
        writer.create(f"{chroot}/brokers/ids/2", b"\x00garbage{", makepath=True)
        topic = {"version": 3, "partitions": {"0": [1]}, "adding_replicas": {}}
        writer.create(f"{chroot}/brokers/topics/g", json.dumps(topic).encode(), makepath=True)
        state = {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]}
        writer.create(
            f"{chroot}/brokers/topics/g/partitions/0/state",
            json.dumps(state).encode(),
            makepath=True,
        )
        writer.create(f"{chroot}/controller", b'{"version":2,"brokerid":1}')
        writer.create(f"{chroot}/controller_epoch", b"1")
        out = tmp_path / "events"
        run = shadow(zk_cluster.zookeeper + chroot, out, "--once")
        assert run.wait(timeout=DEADLINE_S) == 0, run.stderr.read()
    finally:
        writer.delete(chroot, recursive=True)
        writer.stop()
        writer.close()
    replay(Settings.load(None, ()), out, tmp_path / "tables")
    rejected = [json.loads(x) for x in (tmp_path / "tables/rejected_events.jsonl").open()]
    assert len(rejected) == 1 and "garbage{" in rejected[0]["raw"]
    assert "/brokers/ids/2" in rejected[0]["raw"]
    [row] = [json.loads(x) for x in (tmp_path / "tables/partition_state.jsonl").open()]
    assert (row["topic"], row["leader"], row["isr"]) == ("g", 1, [1])


def test_a_refused_authentication_ends_the_running_shadow_with_an_error(zk_cluster, tmp_path):
    """kazoo stops connecting for good when ZooKeeper refuses a session's authentication
    (its state AUTH_FAILED, then LOST): a running shadow must end with AuthFailedError, not
    wait for a reconnection that never comes. The refusal is driven through kazoo's own
    session callback, the one its connection thread calls on an AUTH_FAILED answer."""
    client = KazooClient(hosts=zk_cluster.zookeeper, read_only=True)
    client.start(timeout=30)
    sink, state = open_output(f"file:{tmp_path / 'out'}", "real")
    runner = Shadow(client, sink, state, "real")
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            runner.run(0.3, threading.Event())
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    try:
        thread.start()
        wait_for("the snapshot", lambda: events(tmp_path / "out"))
        client._session_callback(KeeperState.AUTH_FAILED)
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), "the shadow kept waiting after the refusal"
        assert isinstance(outcome[0], AuthFailedError)
    finally:
        client.stop()
        client.close()


class Stopped(BaseException):
    """Where a SIGKILL would end the shadow."""


class StopsAfterWriting:
    """A file output that stops the shadow once it has written the first `kept` events of
    a flush (all of them with None): the state save after the write never happens."""

    def __init__(self, out: FileOutput, kept: int | None) -> None:
        self.out, self.kept = out, kept

    def last_seq(self, cluster: str) -> int:
        return self.out.last_seq(cluster)

    def write(self, events: list[Event]) -> None:
        if written := events[: self.kept]:
            self.out.write(written)
        raise Stopped

    def close(self) -> None:
        pass


def shadow_once(zookeeper: str, sink: Any, state: Path) -> Shadow:
    client = KazooClient(hosts=zookeeper, read_only=True)
    client.start(timeout=30)
    try:
        runner = Shadow(client, sink, state, "planted")
        runner.once()
        return runner
    finally:
        client.stop()
        client.close()


@pytest.mark.parametrize("kept", [0, 2, None], ids=["none", "some", "all"])
def test_a_shadow_stopped_between_its_bootstrap_and_its_first_save_restarts_once(
    zk_cluster, tmp_path, kept
):
    """The kill point of a first start: its bootstrap written (none, some or all of it),
    the state never saved after it. The restart writes the rest of that bootstrap, each
    event once, then what changed meanwhile (a topic created while it was down)."""
    with planted(zk_cluster.zookeeper, [1, 2]) as (chroot, writer):
        plant_topic(writer, chroot, "a", [[1, 2], [2, 1], [1, 2]])
        address = zk_cluster.zookeeper + chroot
        reference = tmp_path / "reference"
        reference.mkdir()
        shadow_once(address, FileOutput(reference), reference / "state.json")
        bootstrap = events(reference)
        assert [e["type"] for e in bootstrap] == [
            "broker_startup",
            "broker_startup",
            "topic_creation",
            "controller_failover",
        ]
        out, state = tmp_path / "events", tmp_path / "state.json"
        out.mkdir()
        with pytest.raises(Stopped):
            shadow_once(address, StopsAfterWriting(FileOutput(out), kept), state)
        assert events(out) == bootstrap[:kept]
        plant_topic(writer, chroot, "b", [[2, 1]])  # while the shadow is down
        restarted = shadow_once(address, FileOutput(out), state)
    emitted = events(out)
    assert emitted[: len(bootstrap)] == bootstrap  # the stopped start's, each once
    assert restarted.emitted == len(emitted) - len(bootstrap[:kept])
    [creation] = emitted[len(bootstrap) :]
    assert (creation["type"], creation["topic"]) == ("topic_creation", "b")
    assert creation["assignment"] == {"0": [2, 1]}
    assert creation["seq"] > bootstrap[-1]["seq"]
    saved = json.loads(state.read_text())
    assert "unwritten" not in saved and saved["last_seq"] == creation["seq"]


def test_unreadable_znodes_are_written_once_across_kills_and_restarts(zk_cluster, tmp_path):
    """A garbled registration and a garbled topic config, planted: the first start writes
    one line for each (stamped after its bootstrap); a shadow killed (SIGKILL) and
    restarted, then killed again and restarted with --once, writes no second line for a
    version already written, and one for a new version of the registration."""
    out = tmp_path / "events"

    def lines_for(path: str) -> list[dict[str, Any]]:
        return [e for e in events(out) if e.get("znode") == path]

    def killed(proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    with planted(zk_cluster.zookeeper, [1]) as (chroot, writer):
        plant_topic(writer, chroot, "a", [[1]])
        registration, config = f"{chroot}/brokers/ids/2", f"{chroot}/config/topics/a"
        writer.create(registration, b"\x00garbage{")
        writer.create(config, b"not json", makepath=True)
        address = zk_cluster.zookeeper + chroot
        first = shadow(address, out)
        try:
            wait_for(
                "the bootstrap and its two lines",
                lambda: lines_for("/brokers/ids/2") and lines_for("/config/topics/a"),
            )
        finally:
            killed(first)
        second = shadow(address, out)
        try:
            plant_topic(writer, chroot, "b", [[1]])  # the restarted shadow is following
            wait_for("b's creation", lambda: any(e.get("topic") == "b" for e in events(out)))
            writer.set(registration, b"still garbage{")
            wait_for("the new version's line", lambda: len(lines_for("/brokers/ids/2")) == 2)
        finally:
            killed(second)
        third = shadow(address, out, "--once")
        assert third.wait(timeout=DEADLINE_S) == 0, third.stderr.read()
    assert [e["znode_data"] for e in lines_for("/brokers/ids/2")] == [
        "\x00garbage{",
        "still garbage{",
    ]
    assert [e["type"] for e in lines_for("/config/topics/a")] == ["topic_config_change"]
    emitted = events(out)
    assert len({e["event_id"] for e in emitted}) == len(emitted)
    seqs = [e["seq"] for e in emitted]
    assert seqs == sorted(set(seqs))
    assert [e["type"] for e in emitted if "znode" not in e].count("controller_failover") == 1
    replay(Settings.load(None, ()), out, tmp_path / "tables")
    rejected = [json.loads(x) for x in (tmp_path / "tables/rejected_events.jsonl").open()]
    assert len(rejected) == 3 and all('"znode"' in r["raw"] for r in rejected)
    rows = [json.loads(x) for x in (tmp_path / "tables/partition_state.jsonl").open()]
    assert sorted((r["topic"], r["leader"]) for r in rows) == [("a", 1), ("b", 1)]


def test_a_start_stopped_after_writing_its_bootstrap_writes_no_unreadable_line_twice(
    zk_cluster, tmp_path
):
    """The bootstrap (with the line of a garbled registration) written whole, the state
    not saved after it: the restart writes none of it again, the line included."""
    with planted(zk_cluster.zookeeper, [1]) as (chroot, writer):
        writer.create(f"{chroot}/brokers/ids/2", b"garbage{")
        address = zk_cluster.zookeeper + chroot
        out, state = tmp_path / "events", tmp_path / "state.json"
        out.mkdir()
        with pytest.raises(Stopped):
            shadow_once(address, StopsAfterWriting(FileOutput(out), None), state)
        bootstrap = events(out)
        assert [e.get("znode") for e in bootstrap] == [None, None, "/brokers/ids/2"]
        restarted = shadow_once(address, FileOutput(out), state)
    assert restarted.emitted == 0 and events(out) == bootstrap
    assert json.loads(state.read_text())["last_seq"] == bootstrap[-1]["seq"]
