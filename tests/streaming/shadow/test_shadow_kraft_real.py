"""`kcsim shadow --metadata-log` following the real 3-node KRaft cluster (Kafka 4.1.1, the
`kraft_cluster` fixture), one run through several operations (SPEC-KRAFT §8 a broker
killed and back, §9 a controlled shutdown, §18 the active controller killed: a quorum
failover, §15.1 a preferred election), with the shadow itself killed (SIGKILL) and
restarted in the middle. The verdict: the events, replayed under the kraft engine, give
zero divergences, none is written twice and none is missing (their `seq` run 1..n),
and the replay ends where the cluster is. The same log read into a Kafka topic gives the
same events.
"""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from streaming.cli import main
from tests.support.clusters.kraft_cluster import KraftCluster, wait_for
from tests.support.differential.shadow_process import events, kraft_shadow

pytestmark = [pytest.mark.kraft, pytest.mark.slow]

TOPIC = "shadowed"
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}


def broker_event(out: Path, kind: str, broker: int, after: int) -> bool:
    return any(
        e["type"] == kind and e.get("broker") == broker and e["seq"] > after for e in events(out)
    )


def last_seq(out: Path) -> int:
    return max((e["seq"] for e in events(out)), default=0)


def test_the_shadow_follows_a_kraft_cluster(kraft_cluster: KraftCluster, tmp_path):
    kraft = kraft_cluster
    out = tmp_path / "out"
    followed = kraft.quorum_leader()  # its node is killed below: the log stops, then resumes
    assert followed is not None
    log = kraft.layout().metadata_log(followed)
    if TOPIC in kraft.topics():  # a cluster given by KCSIM_KRAFT_CLUSTER_DIR, run before
        kraft.delete_topic(TOPIC)
    kraft.create_topic(TOPIC, ASSIGNMENT)
    kraft.wait_isr_full(TOPIC)
    process = kraft_shadow(log, kraft.bootstrap, out)
    try:
        wait_for(
            lambda: any(e.get("topic") == TOPIC for e in events(out)), "the shadow's start state"
        )
        # a broker killed: the controller fences it once its session expires
        victim = next(n for n in (3, 2, 1) if n != followed)
        seen = last_seq(out)
        killed_at = time.monotonic()
        kraft.kill(victim)
        wait_for(lambda: broker_event(out, "broker_failure", victim, seen), "the fence's event")
        latency = time.monotonic() - killed_at
        # the shadow killed mid-run and started again while the broker comes back
        process.send_signal(signal.SIGKILL)
        process.wait()
        restarted_after = last_seq(out)
        kraft.start(victim)
        process = kraft_shadow(log, kraft.bootstrap, out, "--metrics-port", "0")
        assert process.stderr is not None
        start_line = process.stderr.readline()
        served = re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", start_line)
        assert served is not None, start_line
        kraft.wait_isr_full(TOPIC)
        # a controlled shutdown (SIGTERM) and a restart
        down = next(n for n in (2, 3, 1) if n not in (followed, victim))
        seen = last_seq(out)
        kraft.shutdown(down)
        kraft.wait_fenced(down)
        wait_for(lambda: broker_event(out, "controlled_shutdown", down, seen), "the shutdown")
        kraft.start(down)
        kraft.wait_isr_full(TOPIC)
        # a preferred election of the partitions the restarts moved
        kraft.elect_preferred(TOPIC, list(ASSIGNMENT))
        kraft.wait_partitions(
            TOPIC, lambda ps: all(p.leader == p.replicas[0] for p in ps.values()), "preferred"
        )
        # the active controller killed: a quorum failover, then its node fenced and back
        leader = kraft.quorum_leader()
        assert leader is not None
        kraft.kill(leader)
        wait_for(lambda: kraft.quorum_leader() not in (None, leader), "a new quorum leader")
        kraft.wait_fenced(leader)
        kraft.start(leader)
        kraft.wait_isr_full(TOPIC)

        # the restarted shadow's Prometheus metrics: every event it wrote, and the
        # partitions as its last poll saw them (none offline once the ISRs are full)
        def scraped() -> dict[str, float]:
            with urllib.request.urlopen(served.group(1), timeout=5) as page:
                text = page.read().decode()
            return {
                line.split("{")[0]: float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("kcsim_") and 'cluster="real"' in line
            }

        def metrics_match() -> bool:
            metrics = scraped()
            fresh = sum(1 for e in events(out) if e["seq"] > restarted_after)
            return (
                metrics.get("kcsim_events_applied_total") == fresh
                and metrics.get("kcsim_offline_partitions") == 0
                and metrics.get("kcsim_lag_position") == 0
            )

        wait_for(metrics_match, "the shadow's metrics to match its output")
    finally:
        kraft.ensure_all_up()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    # what is committed now, read by a restarted shadow once
    once = ["--out", f"file:{out}", "--cluster", "real", "--once", "--quiet"]
    assert main(["shadow", "--metadata-log", str(log), "--bootstrap-server", kraft.bootstrap,
                 *once]) == 0  # fmt: skip
    written = events(out)
    assert [e["seq"] for e in written] == list(range(1, len(written) + 1))
    assert len({e["event_id"] for e in written}) == len(written)
    kinds = [e["type"] for e in written]
    assert kinds.count("controller_failover") >= 2
    assert "leader_election" in kinds

    tables = tmp_path / "tables"
    assert main(["replay", str(out), "--out", str(tables), "--quiet",
                 "--set", "kcsim.engine=kraft"]) == 0  # fmt: skip
    rows = {p.stem: [json.loads(x) for x in p.read_text().splitlines()] for p in tables.iterdir()}
    assert rows["rejected_events"] == []
    assert rows["divergences"] == []
    final = {r["partition"]: r for r in rows["partition_state"] if r["topic"] == TOPIC}
    live = kraft.partitions(TOPIC)
    assert {p: (s.leader, s.leader_epoch, s.isr) for p, s in live.items()} == {
        p: (r["leader"], r["leader_epoch"], frozenset(r["isr"])) for p, r in final.items()
    }

    # the same log into a Kafka topic (the ZooKeeper shadow's Kafka output): a fresh
    # shadow writes the same events, each once, keyed by the cluster
    topic = f"kraft-shadow-{uuid.uuid4().hex[:8]}"
    kraft.create_topic(topic, {0: [1, 2, 3]})
    state = tmp_path / "kafka-state.json"
    assert main(["shadow", "--metadata-log", str(log), "--bootstrap-server", kraft.bootstrap,
                 "--out", f"kafka:{kraft.bootstrap}/{topic}", "--cluster", "real",
                 "--state", str(state), "--once", "--quiet"]) == 0  # fmt: skip
    consumer = KafkaConsumer(
        topic, bootstrap_servers=kraft.bootstrap, auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )  # fmt: skip
    try:
        produced = [(r.key, json.loads(r.value)) for r in consumer]
    finally:
        consumer.close()
    assert {key for key, _ in produced} == {b"real"}
    assert [e for _, e in produced][: len(written)] == written
    kraft.delete_topic(topic)
    print(f"kill -9 of broker {victim} to its broker_failure event: {latency:.1f} s")
    print(f"the shadow (node {followed}'s log) said: {stderr}")
