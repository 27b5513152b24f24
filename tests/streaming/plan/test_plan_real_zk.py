"""`kcsim plan`'s prediction against a real ZooKeeper-mode Kafka 3.7.1 cluster (the shared
`zk_cluster`: ZooKeeper and brokers 1-3).

The plan reads the cluster with `--state zookeeper:...` and predicts a roll of its three
brokers (`roll:1,2,3`, clean: SPEC §11 controlled shutdown, §8 the failure, §9 the
return with §13.1's ISR catch-up) and a reassignment in `kafka-reassign-partitions`'
format (SPEC §14); the same steps are then performed on the cluster (SIGTERM and a
restart per broker; the admin API's AlterPartitionReassignments, one partition at a
time, each run to completion) with `kcsim shadow` recording. At every step the verdict
compares the partitions without a leader and under min ISR at any moment, and the
leaders, ISRs and replicas once the step has settled: zero differences.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition

from tests.support.clusters.zk_cluster import ZkCluster, create_topic, unique_topic, wait_for
from tests.support.differential.differential import (
    ShadowRecording,
    admin,
    delete_topics,
    wait_left,
    wait_settled,
)
from tests.support.differential.plan_reality import checked, prediction, reassignment_file

pytestmark = [pytest.mark.zk, pytest.mark.slow]


def make_topics(zk: ZkCluster) -> dict[str, tuple[dict[int, list[int]], int]]:
    """Three small topics: RF 3 with min ISR 2 (stays safe), an RF 1 partition (offline
    while its broker is down) and RF 2 with min ISR 2 (under min ISR while either of
    its brokers is down). {topic: (assignment, min ISR)}."""
    topics = {
        unique_topic("plan-rf3"): ({0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, 2),
        unique_topic("plan-rf1"): ({0: [2]}, 1),
        unique_topic("plan-rf2"): ({0: [3, 1]}, 2),
    }
    for topic, (assignment, min_isr) in topics.items():
        create_topic(zk, topic, assignment, {"min.insync.replicas": str(min_isr)})
    wait_settled(zk)
    return topics


def plan(tmp_path: Path, zk: ZkCluster, steps: str) -> dict[str, Any]:
    return prediction(tmp_path / "plan.json", ["--state", f"zookeeper:{zk.zookeeper}"], steps)


def test_a_roll_as_planned_and_as_it_happened(zk_cluster: ZkCluster, tmp_path: Path) -> None:
    zk = zk_cluster
    topics = make_topics(zk)
    try:
        doc = plan(tmp_path, zk, "roll:1,2,3")
        assert [s["label"] for s in doc["steps"]] == [
            f"{kind} {b}" for b in (1, 2, 3) for kind in ("stop", "start")
        ]
        with ShadowRecording(zk, tmp_path / "events") as shadow:
            marks = [len(shadow.events())]
            for broker in (1, 2, 3):
                zk.shutdown(broker)  # SIGTERM: a controlled shutdown, then the exit
                wait_left(zk, broker, list(topics))
                shadow.wait_caught_up()
                marks.append(len(shadow.events()))
                zk.start(broker)
                wait_settled(zk)
                shadow.wait_caught_up()
                marks.append(len(shadow.events()))
        differences, beyond, _ = checked(doc, shadow.events(), marks, topics)
        assert differences == "no difference"
        # The one thing the plan folds (docs/guide/plan.md): a restarted broker rejoins an ISR
        # only once it has caught up with the leader, so the RF 2 partition stays under
        # min ISR into the start of the broker that left it; and the RF 1 partition is
        # elected as its broker registers. Whether the recording shows those moments
        # apart from the return depends on how fast the catch-up and the election are
        # (the shadow writes changes within its quiet window as one event); never more.
        rf1, rf2 = (f"{t}-0" for t in list(topics)[1:])
        allowed = {"start 1": ([], [rf2]), "start 2": ([rf1], []), "start 3": ([], [rf2])}
        for label, offline, under in beyond:
            assert label in allowed, beyond
            assert set(offline) <= set(allowed[label][0]), beyond
            assert set(under) <= set(allowed[label][1]), beyond
        # the prediction is not empty: the RF 1 partition is offline while 2 is down,
        # the RF 2 one under min ISR while 3 or 1 is
        assert [s["label"] for s in doc["steps"] if rf1 in s["offline_partitions"]] == ["stop 2"]
        assert [s["label"] for s in doc["steps"] if rf2 in s["under_min_isr_partitions"]] == [
            "stop 1",
            "stop 3",
        ]
    finally:
        zk.ensure_all_up()
        delete_topics(zk, list(topics))


def test_a_reassignment_as_planned_and_as_it_happened(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    zk = zk_cluster
    topics = make_topics(zk)
    rf3, rf1, rf2 = topics
    moves = [
        (rf1, 0, [3]),  # the RF 1 partition moves: its leader with it
        (rf3, 1, [1, 3]),  # its leader 2 removed, RF 3 to 2
        (rf2, 0, [1, 2]),  # 2 added, the leader 3 removed
    ]
    try:
        plan_file = tmp_path / "reassign.json"
        plan_file.write_text(json.dumps(reassignment_file(moves)))
        doc = plan(tmp_path, zk, f"reassign:{plan_file}")
        assert doc["verdict"] == "safe", doc["summary"]
        with ShadowRecording(zk, tmp_path / "events") as shadow:
            marks = [len(shadow.events())]
            for topic, partition, replicas in moves:
                client = admin(zk)
                try:
                    client.alter_partition_reassignments(
                        {TopicPartition(topic, partition): replicas}
                    )
                finally:
                    client.close()
                wait_for(
                    lambda t=topic, p=partition, r=replicas: done(zk, t, p, r),
                    f"{topic}-{partition} moved to {replicas}",
                )
                wait_settled(zk)
                shadow.wait_caught_up()
                marks.append(len(shadow.events()))
        differences, beyond, real = checked(doc, shadow.events(), marks, topics)
        assert (differences, beyond) == ("no difference", [])
        # what was compared: each move, its replicas and its leader, as it happened
        assert [
            (real[n].states[f"{t}-{p}"].replicas, real[n].states[f"{t}-{p}"].leader)
            for n, (t, p, _) in enumerate(moves, 1)
        ] == [((3,), 3), ((1, 3), 1), ((1, 2), 1)]
    finally:
        zk.ensure_all_up()
        delete_topics(zk, list(topics))


def done(zk: ZkCluster, topic: str, partition: int, replicas: list[int]) -> bool:
    """The reassignment complete: the topic znode lists exactly the target, nothing is
    being added or removed, and the target is the ISR."""
    znode = json.loads(zk.client.get(f"/brokers/topics/{topic}")[0])
    state = zk.partition_state(topic, partition)
    return (
        znode["partitions"][str(partition)] == replicas
        and not (znode.get("adding_replicas") or {}).get(str(partition))
        and not zk.client.exists("/admin/reassign_partitions")
        and state is not None
        and set(state.isr) == set(replicas)
    )
