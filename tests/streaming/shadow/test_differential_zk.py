"""Differential tests: kcsim against the real Kafka 3.7.1 ZooKeeper-mode controller.

Each test records the shared `zk_cluster` with `kcsim shadow` (started from a snapshot of
the cluster as other tests left it), drives the cluster through the admin API and broker
kills, restarts and controlled shutdowns, waits for each effect in ZooKeeper, and replays
the recording through kcsim's core: the verdict is zero divergences, i.e. after every event
kcsim's leader, leader epoch, ISR, partition epoch, controller epoch and replicas equal the
state znodes the real controller wrote. SPEC §7 (failover), §8/§9 (broker changes), §10
(creation), §11 (controlled shutdown), §12 (elections), §13.1 (AlterPartition), §14
(reassignment), §15 (deletion), §16 (unclean election by config).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from deltalake import DeltaTable
from kafka import TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions

from streaming.chaos.live_zk import ZkChaos
from tests.support.clusters.tcp_relay import ZkRelay, expire_session
from tests.support.clusters.zk_cluster import ZkCluster, create_topic, unique_topic, wait_for
from tests.support.differential.differential import (
    ShadowRecording,
    admin,
    assignment_of,
    delete_topics,
    divergences,
    explain,
    topic_znode,
    wait_left,
    wait_settled,
    write_topic_znode,
)
from tests.support.spark.job_process import JobProcess
from tests.support.spark.lake_tables import canonical

pytestmark = pytest.mark.zk

PREFERRED, UNCLEAN = 0, 1


def assert_no_divergences(shadow: ShadowRecording) -> None:
    rows = divergences(shadow.out)
    assert rows == [], explain(rows, shadow.events())


@contextmanager
def differential(
    zk: ZkCluster, tmp_path: Path, topics: Iterable[str] = (), zookeeper: str | None = None
) -> Iterator[ShadowRecording]:
    """Record, replay, compare: `kcsim shadow` records the cluster for the block (through
    `zookeeper`, a relay, when given). However the block ends, every broker is brought back
    up and `topics` (those still there, read at the end: a list may grow) are deleted with
    the shadow watching. A block that ended cleanly must replay with zero divergences."""
    with ShadowRecording(zk, tmp_path / "events", zookeeper) as shadow:
        try:
            yield shadow
        finally:
            zk.ensure_all_up()
            delete_topics(zk, list(topics))
            shadow.wait_caught_up()
    assert_no_divergences(shadow)


def others(zk: ZkCluster, *exclude: int) -> list[int]:
    """Brokers other than the controller and `exclude`, by id."""
    controller = zk.wait_controller()
    return [b for b in zk.brokers if b != controller and b not in exclude]


def test_the_snapshot_a_shadow_starts_from_replays_without_divergence(zk_cluster, tmp_path):
    # SPEC §7.2: the snapshot ends with a failover whose observed is every state znode
    topic = unique_topic("before")
    try:
        write_topic_znode(zk_cluster, topic, {0: [1, 2], 1: [2, 3, 1], 2: [3]})
        wait_settled(zk_cluster)
        with differential(zk_cluster, tmp_path) as shadow:
            events = shadow.events()
    finally:
        delete_topics(zk_cluster, [topic])
    failover = next(e for e in events if e["type"] == "controller_failover")
    assert failover["controller"] == zk_cluster.controller_id()
    seen = {p["partition"] for p in failover["observed"]["partitions"] if p["topic"] == topic}
    assert seen == {0, 1, 2}


def test_explicit_assignments_mixed_replication_factors(zk_cluster, tmp_path):
    topic = unique_topic("mixed")
    with differential(zk_cluster, tmp_path, [topic]) as shadow:
        write_topic_znode(zk_cluster, topic, {0: [1, 2], 1: [2, 3, 1], 2: [3, 1], 3: [1, 3, 2]})
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
    creation = next(e for e in shadow.events() if e.get("topic") == topic)
    assert creation["type"] == "topic_creation" and len(creation["observed"]["partitions"]) == 4


def test_leader_killed_then_restarted_and_caught_up(zk_cluster, tmp_path):
    topic = unique_topic("kill")
    with differential(zk_cluster, tmp_path, [topic]) as shadow:
        victim = others(zk_cluster)[0]
        rest = [b for b in zk_cluster.brokers if b != victim]
        write_topic_znode(zk_cluster, topic, {0: [victim, *rest], 1: [rest[0], victim], 2: rest})
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
        zk_cluster.kill(victim)  # SPEC §8.3/§9.1: new leader, ISR shrinks
        wait_left(zk_cluster, victim, [topic])
        shadow.wait_caught_up()
        zk_cluster.start(victim)  # SPEC §8.2 then §13.1: the leader's AlterPartition
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
    isr_changes = [e for e in shadow.events() if e["type"] == "isr_change" and e["topic"] == topic]
    assert {e["partition"] for e in isr_changes} == {0, 1}
    assert all(victim in e["isr"] for e in isr_changes)


def test_controlled_shutdown_and_restart(zk_cluster, tmp_path):
    topic = unique_topic("shutdown")
    with differential(zk_cluster, tmp_path, [topic]) as shadow:
        victim = others(zk_cluster)[0]
        rest = [b for b in zk_cluster.brokers if b != victim]
        write_topic_znode(zk_cluster, topic, {0: [victim, rest[0]], 1: [rest[1], victim, rest[0]]})
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
        zk_cluster.shutdown(victim)  # SPEC §11
        wait_left(zk_cluster, victim, [topic])
        shadow.wait_caught_up()
        zk_cluster.start(victim)
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
    kinds = [e["type"] for e in shadow.events() if e.get("broker") == victim]
    assert "controlled_shutdown" in kinds


def test_preferred_and_unclean_elections(zk_cluster, tmp_path):
    topic = unique_topic("elect")
    with differential(zk_cluster, tmp_path, [topic]) as shadow:
        client = admin(zk_cluster)
        try:
            a, b = others(zk_cluster)
            create_topic(zk_cluster, topic, {0: [a, b], 1: [b, a]})
            wait_settled(zk_cluster)
            # SPEC §12.1: a's leadership moves away and back by a preferred election
            zk_cluster.shutdown(a)
            wait_left(zk_cluster, a, [topic])
            zk_cluster.start(a)
            wait_settled(zk_cluster)
            shadow.wait_caught_up()
            with closing(admin(zk_cluster)) as fresh:  # brokers went away: new connections
                fresh.elect_leaders(PREFERRED, {topic: [0]})
            zk_cluster.wait_partition_state(topic, 0, lambda s: s.leader == a, "a preferred")
            shadow.wait_caught_up()
            # SPEC §5.1/§16: partition 0's ISR holds only the dead a; b comes back, and the
            # topic's unclean.leader.election.enable makes it leader
            zk_cluster.shutdown(b)
            wait_left(zk_cluster, b, [topic])
            shadow.wait_caught_up()  # else a's shutdown writes may go to b's failure
            zk_cluster.shutdown(a)
            zk_cluster.wait_unregistered([a])
            zk_cluster.wait_partition_state(topic, 0, lambda s: s.leader == -1, "offline")
            zk_cluster.start(b)
            shadow.wait_caught_up()
            config = {"unclean.leader.election.enable": "true"}
            with closing(admin(zk_cluster)) as fresh:
                fresh.alter_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, topic, configs=config)]
                )
            for p in (0, 1):
                zk_cluster.wait_partition_state(topic, p, lambda s: s.leader == b, "unclean b")
            shadow.wait_caught_up()
            zk_cluster.start(a)
            wait_settled(zk_cluster)
            shadow.wait_caught_up()
        finally:
            client.close()
    elections = [e for e in shadow.events() if e["type"] == "leader_election"]
    named = {(p["topic"], p["partition"]) for e in elections for p in e["partitions"]}
    assert (topic, 0) in named
    kinds = {e["type"] for e in shadow.events() if e.get("topic") == topic}
    assert "topic_config_change" in kinds


def test_reassignment_and_partition_addition(zk_cluster, tmp_path):
    topic = unique_topic("reassign")
    with differential(zk_cluster, tmp_path, [topic]) as shadow:
        client = admin(zk_cluster)
        try:
            write_topic_znode(zk_cluster, topic, {0: [1, 2], 1: [2, 3, 1]})
            wait_settled(zk_cluster)
            shadow.wait_caught_up()
            # SPEC §14: to completion (the adding replica catches up, RR leave)
            client.alter_partition_reassignments(
                {TopicPartition(topic, 0): [3, 1], TopicPartition(topic, 1): [1, 2]}
            )

            def done() -> bool:
                znode = topic_znode(zk_cluster, topic) or {}
                return not znode.get("adding_replicas") and assignment_of(zk_cluster, topic) == {
                    0: [3, 1],
                    1: [1, 2],
                }

            wait_for(done, "the reassignments to complete")
            wait_settled(zk_cluster)
            shadow.wait_caught_up()
            # SPEC §10.2: new partitions with an explicit assignment
            client.create_partitions({topic: NewPartitions(4, [[2, 3], [3, 1]])})
            zk_cluster.wait_partition_state(topic, 3, lambda _: True, "partition 3")
            wait_settled(zk_cluster)
            shadow.wait_caught_up()
        finally:
            client.close()
    kinds = [e["type"] for e in shadow.events() if e.get("topic") == topic]
    assert {"partition_reassignment", "partition_creation"} <= set(kinds)


def test_topic_deletion_with_a_broker_down(zk_cluster, tmp_path):
    topic = unique_topic("delete")
    with differential(zk_cluster, tmp_path, [topic]) as shadow:
        client = admin(zk_cluster)
        try:
            victim = others(zk_cluster)[0]
            rest = [b for b in zk_cluster.brokers if b != victim]
            create_topic(zk_cluster, topic, {0: [victim, rest[0]], 1: rest})
            wait_settled(zk_cluster)
            zk_cluster.shutdown(victim)
            wait_left(zk_cluster, victim, [topic])
            shadow.wait_caught_up()
            # SPEC §15: the replica on the down broker makes the topic ineligible; the
            # deletion completes once it is back
            with closing(admin(zk_cluster)) as fresh:  # brokers went away: new connections
                fresh.delete_topics([topic])
            # onTopicDeletion takes every replica offline: no partition keeps a leader
            for p in (0, 1):
                zk_cluster.wait_partition_state(topic, p, lambda s: s.leader == -1, "offline")
            shadow.wait_caught_up()
            assert topic_znode(zk_cluster, topic) is not None
            zk_cluster.start(victim)
            wait_for(lambda: topic_znode(zk_cluster, topic) is None, "the deletion done")
            shadow.wait_caught_up()
        finally:
            client.close()


def test_a_deletion_queued_when_the_shadow_starts(zk_cluster, tmp_path):
    """SPEC §7.2 steps 5-6 then 9, §15.5: the shadow starts while a topic's deletion waits
    for a down broker. Its snapshot loads the topic queued, so the failover leaves the
    offline partitions alone as Kafka's did (else it would elect the live ISR member the
    deletion left without leadership); the broker's return resumes and completes the
    deletion in both."""
    topic = unique_topic("queued")
    victim = others(zk_cluster)[0]
    rest = [b for b in zk_cluster.brokers if b != victim]
    try:  # before the shadow starts
        create_topic(zk_cluster, topic, {0: [victim, rest[0]], 1: rest, 2: [rest[1], victim]})
        wait_settled(zk_cluster)
        zk_cluster.shutdown(victim)
        wait_left(zk_cluster, victim, [topic])
        with closing(admin(zk_cluster)) as client:
            client.delete_topics([topic])
        for p in (0, 1, 2):  # onTopicDeletion took every live replica offline
            zk_cluster.wait_partition_state(topic, p, lambda s: s.leader == -1, "offline")
    except BaseException:
        zk_cluster.ensure_all_up()
        delete_topics(zk_cluster, [topic])
        raise
    with differential(zk_cluster, tmp_path, [topic]) as shadow:
        assert zk_cluster.client.exists(f"/admin/delete_topics/{topic}")
        zk_cluster.start(victim)
        wait_for(lambda: topic_znode(zk_cluster, topic) is None, "the deletion done")
        shadow.wait_caught_up()
    events = [e for e in shadow.events() if e.get("topic") == topic]
    assert events[0]["type"] == "topic_creation" and events[0]["deletion"] == "queued"
    assert "topic_deletion" not in {e["type"] for e in events}
    assert events[-1]["observed"]["deleted_topics"] == [topic]
    # the replay's deletion completed too: no row of the topic is left
    for table in ("topics", "partition_state", "replica_state"):
        lines = (tmp_path / "tables" / f"{table}.jsonl").read_text().splitlines()
        assert not [x for x in lines if json.loads(x)["topic"] == topic], table


def test_the_shadows_session_expires_while_a_broker_dies(zk_cluster, tmp_path):
    """The shadow loses ZooKeeper (a network partition, through a relay) and its session
    expires, while a broker dies and the controller shrinks ISRs and elects (SPEC §8.3,
    §9.1). A new session has none of the old watches: the shadow re-reads everything it
    watches and writes what changed meanwhile, once: one broker_failure, no id twice, zero
    divergences after the gap and through the broker's return."""
    topic = unique_topic("session")
    relay = ZkRelay(zk_cluster.zookeeper)
    with relay, differential(zk_cluster, tmp_path, [topic], relay.address) as shadow:
        victim = others(zk_cluster)[0]
        rest = [b for b in zk_cluster.brokers if b != victim]
        assignment = {0: [victim, rest[0]], 1: [rest[0], victim], 2: rest}
        write_topic_znode(zk_cluster, topic, assignment)
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
        lost = relay.session()
        relay.cut()
        zk_cluster.kill(victim)
        wait_left(zk_cluster, victim, [topic])
        expire_session(zk_cluster.zookeeper, lost)
        relay.restore()
        shadow.wait_caught_up()
        assert relay.session() != lost
        zk_cluster.start(victim)
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
    events = shadow.events()
    assert [e.get("broker") for e in events if e["type"] == "broker_failure"] == [victim]
    assert [e.get("broker") for e in events if e["type"] == "broker_startup"][-1] == victim
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    assert "session expired" in shadow.log()


@pytest.mark.spark
def test_controller_broker_killed(zk_cluster, tmp_path):
    topic = unique_topic("failover")
    with differential(zk_cluster, tmp_path, [topic]) as shadow:
        write_topic_znode(zk_cluster, topic, {0: [1, 2, 3], 1: [2, 3], 2: [3, 1]})
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
        old = zk_cluster.wait_controller()
        zk_cluster.kill(old)  # SPEC §7.2: a new controller, the old broker failed
        wait_for(lambda: zk_cluster.controller_id() not in (None, old), "a new controller")
        wait_left(zk_cluster, old, [topic])
        shadow.wait_caught_up()
        zk_cluster.start(old)
        wait_settled(zk_cluster)
        shadow.wait_caught_up()
    failovers = [e for e in shadow.events() if e["type"] == "controller_failover"]
    assert len(failovers) == 2 and failovers[1]["controller"] != old
    assert failovers[1]["failed_brokers"] == [old]
    # the Spark job on the same recording: the same divergences (none) and the same state
    lake = tmp_path / "lake"
    job = JobProcess(["--source", f"file:{shadow.out}", "--lake", str(lake), "--once"])
    assert job.finish(timeout=600) == 0, job.tail()
    replayed = tmp_path / "tables"
    for table in ("divergences", "partition_state", "controller_requests"):
        rows = DeltaTable(str(lake / table)).to_pyarrow_table().to_pylist()
        lines = (replayed / f"{table}.jsonl").read_text().splitlines()
        assert canonical(rows) == canonical([json.loads(x) for x in lines]), table


# ------------------------------------------------------------------------ chaos

# KCSIM_CHAOS_SEED runs another seed (the operations differ, the verdict must not)
CHAOS_SEED = int(os.environ.get("KCSIM_CHAOS_SEED", "12"))
CHAOS_OPERATIONS = 100


@pytest.mark.slow
def test_seeded_chaos_run(zk_cluster, tmp_path):
    started = time.monotonic()
    topics: list[str] = []  # the chaos run's, deleted at the end (all at once)
    with differential(zk_cluster, tmp_path, topics) as shadow:
        chaos = ZkChaos(zk_cluster, shadow.wait_caught_up, CHAOS_SEED, topics)
        for _ in range(4 * CHAOS_OPERATIONS):
            if len(chaos.done) == CHAOS_OPERATIONS:
                break
            chaos.step()
    counts = {name: chaos.done.count(name) for name in sorted(set(chaos.done))}
    print(f"chaos seed {CHAOS_SEED}: {counts} in {time.monotonic() - started:.0f} s")
    assert len(chaos.done) == CHAOS_OPERATIONS
    assert {"kill", "shutdown", "start", "elect", "reassign", "create", "add"} <= set(counts)
