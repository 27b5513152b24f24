"""A scripted run on the real ZooKeeper-mode cluster whose brokers' logs `kcsim import
zk-logs` is tested on: every kind of controller event, in a known order."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, NewPartitions

from tests.support.clusters.zk_cluster import ZkCluster, create_topic, unique_topic, wait_for


class ScenarioRun(NamedTuple):
    topics: tuple[str, str]  # (kept, deleted)
    steps: tuple[str, ...]  # the event types the run caused, in order


def _admin(zk: ZkCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=zk.bootstrap, client_id="kcsim-import-tests")


def _in_isr(zk: ZkCluster, topic: str, partitions: list[int], broker: int) -> None:
    for p in partitions:
        zk.wait_partition_state(topic, p, lambda s: broker in s.isr, f"{broker} back in the ISR")


def run_scenario(zk: ZkCluster, step: Callable[[str], None] = lambda _: None) -> ScenarioRun:
    """Creations, a kill and restart, a controlled shutdown and restart, a preferred
    election, a reassignment, new partitions, a deletion, and a controller failover.
    `step(name)` is called before each step. The caller brings brokers back in a finally."""
    kept, gone = unique_topic("imp"), unique_topic("impdel")
    controller = zk.wait_controller()
    others = [b for b in zk.brokers if b != controller]
    victim, stopper = others[0], others[1]
    step("create")
    create_topic(
        zk, kept, {0: [victim, stopper], 1: [stopper, controller], 2: [controller, victim]}
    )
    create_topic(zk, gone, {0: [victim, stopper, controller]})
    steps = ["topic_creation", "topic_creation"]

    step("kill")
    zk.kill(victim)
    zk.wait_unregistered([victim])
    zk.wait_partition_state(kept, 0, lambda s: s.leader == stopper, "leader moved off the victim")
    zk.start(victim)
    _in_isr(zk, kept, [0, 2], victim)
    steps += ["broker_failure", "broker_startup", "isr_change"]

    step("controlled shutdown")
    zk.shutdown(stopper)
    zk.wait_unregistered([stopper])
    zk.start(stopper)
    _in_isr(zk, kept, [0, 1], stopper)
    steps += ["controlled_shutdown", "broker_failure", "broker_startup", "isr_change"]

    step("preferred election")
    admin = _admin(zk)
    try:
        admin.elect_leaders(0, {kept: [0, 1, 2]}, raise_errors=False)
        for p, leader in ((0, victim), (1, stopper), (2, controller)):
            zk.wait_partition_state(kept, p, lambda s, x=leader: s.leader == x, "preferred leader")
        steps.append("leader_election")

        step("reassignment")
        admin.alter_partition_reassignments({TopicPartition(kept, 1): [controller, victim]})
        zk.wait_partition_state(
            kept, 1, lambda s: set(s.isr) == {controller, victim}, "reassignment completed"
        )
        wait_for(
            lambda: (
                not zk.client.exists("/admin/reassign_partitions")
                and _replicas(zk, kept, 1) == [controller, victim]
            ),
            "replicas rewritten",
        )
        steps.append("partition_reassignment")

        step("new partitions")
        admin.create_partitions({kept: NewPartitions(4, [[stopper, victim]])})
        zk.wait_partition_state(kept, 3, lambda _: True, "new partition's state")
        steps.append("partition_creation")

        step("deletion")
        admin.delete_topics([gone])
        wait_for(lambda: not zk.client.exists(f"/brokers/topics/{gone}"), "topic deleted")
        steps.append("topic_deletion")
    finally:
        admin.close()

    step("failover")
    zk.kill(controller)
    wait_for(lambda: zk.controller_id() not in (None, controller), "a new controller")
    zk.start(controller)
    _in_isr(zk, kept, [1, 2], controller)
    steps += ["controller_failover", "broker_startup", "isr_change"]
    return ScenarioRun((kept, gone), tuple(steps))


def _replicas(zk: ZkCluster, topic: str, partition: int) -> list[int]:
    import json

    data, _ = zk.client.get(f"/brokers/topics/{topic}")
    return json.loads(data)["partitions"][str(partition)]


def copy_logs(cluster_dir: Path, dest: Path) -> Path:
    """Every broker's controller.log* and state-change.log* under dest/broker-N/."""
    for logs in sorted(cluster_dir.glob("broker-*/logs")):
        target = dest / logs.parent.name
        target.mkdir(parents=True, exist_ok=True)
        for path in logs.iterdir():
            if path.name.startswith(("controller.log", "state-change.log")):
                shutil.copy2(path, target / path.name)
    return dest
