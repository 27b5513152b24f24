"""pytest fixture: one real 3-node KRaft cluster (Kafka 4.1.1, combined broker+controller
nodes, `streaming/local_clusters/kraft_cluster.py`) for the whole test session, and helpers to read
its partitions, quorum and fencing through kafka-python's admin client.

tests/conftest.py imports `kraft_cluster` from here; mark the tests that use it
`@pytest.mark.kraft`. A test that kills or shuts down a node brings it back before it
ends (`ensure_all_up()` in a `finally`). Set KCSIM_KRAFT_CLUSTER_DIR=DIR to use a cluster
already started with `kcsim kafka-local start --nodes 3 --dir DIR` (it is then left
running).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import KafkaError, for_code

from streaming.jars import kafka_libs_dir
from streaming.local_clusters import kraft_cluster as cluster
from streaming.local_clusters.processes import java

WAIT_S = 90.0


class Partition(NamedTuple):
    """A partition as the cluster's metadata shows it."""

    leader: int
    leader_epoch: int
    isr: frozenset[int]
    replicas: tuple[int, ...]


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll `condition` until it holds (a KafkaError counts as "not yet"); fail the test
    with `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except KafkaError:
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.2)


@dataclass(frozen=True, slots=True)
class KraftCluster:
    dir: Path
    bootstrap: str
    nodes: tuple[int, ...]

    def admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(
            bootstrap_servers=self.bootstrap, client_id="kcsim-tests", request_timeout_ms=10000
        )

    def layout(self) -> cluster.Layout:
        return cluster.load_layout(self.dir)

    def kill(self, node: int) -> None:
        cluster.kill_node(self.dir, node)

    def shutdown(self, node: int) -> None:
        cluster.shutdown_node(self.dir, node)

    def start(self, node: int) -> None:
        cluster.start_node(self.dir, node)

    def running(self) -> set[int]:
        layout = self.layout()
        return {n for n in self.nodes if layout.pid(n) is not None}

    def unfenced(self) -> set[int] | None:
        return cluster.unfenced_brokers(self.layout())

    def wait_fenced(self, node: int) -> None:
        wait_for(lambda: node not in (self.unfenced() or {node}), f"node {node} fenced")

    def quorum_leader(self) -> int | None:
        admin = self.admin()
        try:
            quorum = admin.describe_metadata_quorum()["topics"][0]["partitions"][0]
        finally:
            admin.close()
        leader = quorum["leader_id"]
        return None if leader < 0 else int(leader)

    def partitions(self, topic: str) -> dict[int, Partition]:
        admin = self.admin()
        try:
            described = admin.describe_topics([topic])[0]
        finally:
            admin.close()
        if described["error_code"]:  # an unknown topic is described, not raised
            raise for_code(described["error_code"])(topic)
        return {
            p["partition_index"]: Partition(
                p["leader_id"],
                p["leader_epoch"],
                frozenset(p["isr_nodes"]),
                tuple(p["replica_nodes"]),
            )
            for p in described["partitions"]
        }

    def topics(self) -> set[str]:
        admin = self.admin()
        try:
            return set(admin.list_topics())
        finally:
            admin.close()

    def wait_partitions(
        self, topic: str, condition: Callable[[dict[int, Partition]], bool], what: str
    ) -> None:
        wait_for(lambda: condition(self.partitions(topic)), f"{topic}: {what}")

    def wait_isr_full(self, topic: str) -> None:
        self.wait_partitions(
            topic,
            lambda ps: bool(ps) and all(p.isr == set(p.replicas) for p in ps.values()),
            "ISR full",
        )

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str] | None = None,
    ) -> None:
        admin = self.admin()
        try:
            replicas = {p: list(r) for p, r in assignment.items()}
            new = NewTopic(topic, -1, -1, replica_assignments=replicas, topic_configs=configs)
            admin.create_topics([new])
        finally:
            admin.close()

        def created(ps: dict[int, Partition]) -> bool:
            return len(ps) == len(assignment) and all(p.leader >= 0 for p in ps.values())

        self.wait_partitions(topic, created, "created")

    def alter_topic_configs(self, topic: str, changes: Mapping[str, str | None]) -> None:
        """IncrementalAlterConfigs of one topic: a value sets the key, None deletes it."""
        self._alter_configs(ConfigResourceType.TOPIC, topic, changes)

    def alter_broker_configs(self, broker: str, changes: Mapping[str, str | None]) -> None:
        """The same for one broker's dynamic configs (kafka-python refuses the name "" of
        the cluster-wide default)."""
        self._alter_configs(ConfigResourceType.BROKER, broker, changes)

    def alter_cluster_configs(self, changes: Mapping[str, str]) -> None:
        """Set the cluster-wide default of broker configs (resource name "") with Kafka's
        own ConfigCommand (kafka-configs.sh --entity-default), one JVM; with ELR on, Kafka
        refuses a node-level min.insync.replicas (KIP-966), so this is the way to set it."""
        pairs = ",".join(f"{k}={v}" for k, v in changes.items())
        command = [
            java(), "-cp", f"{kafka_libs_dir()}/*", "kafka.admin.ConfigCommand",
            "--bootstrap-server", self.bootstrap, "--entity-type", "brokers",
            "--entity-default", "--alter", "--add-config", pairs,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    def _alter_configs(
        self, kind: ConfigResourceType, name: str, changes: Mapping[str, str | None]
    ) -> None:
        ops = {k: (AlterConfigOp.DELETE, None) if v is None else v for k, v in changes.items()}
        admin = self.admin()
        try:
            admin.alter_configs([ConfigResource(kind, name, ops)])
        finally:
            admin.close()

    def reassign(self, targets: Mapping[tuple[str, int], Sequence[int]]) -> None:
        admin = self.admin()
        try:
            admin.alter_partition_reassignments(
                {TopicPartition(t, p): list(r) for (t, p), r in targets.items()}
            )
        finally:
            admin.close()

    def elect_preferred(self, topic: str, partitions: Sequence[int]) -> None:
        admin = self.admin()
        try:
            admin.elect_leaders(0, {topic: list(partitions)}, raise_errors=False)
        finally:
            admin.close()

    def elect_unclean(self, topic: str, partitions: Sequence[int]) -> None:
        """ElectLeaders UNCLEAN (election type 1) of some partitions of one topic."""
        admin = self.admin()
        try:
            admin.elect_leaders(1, {topic: list(partitions)}, raise_errors=False)
        finally:
            admin.close()

    def delete_topic(self, topic: str) -> None:
        admin = self.admin()
        try:
            admin.delete_topics([topic])
        finally:
            admin.close()
        wait_for(lambda: topic not in self.topics(), f"{topic} deleted")

    def ensure_all_up(self) -> None:
        for node in self.nodes:
            if node not in self.running():
                self.start(node)
        wait_for(lambda: set(self.nodes) <= (self.unfenced() or set()), "every node unfenced")


@pytest.fixture(scope="session")
def kraft_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftCluster]:
    external = os.environ.get("KCSIM_KRAFT_CLUSTER_DIR")
    if external:
        data_dir = Path(external).resolve()
        bootstrap = cluster.load_layout(data_dir).bootstrap
    else:
        data_dir = tmp_path_factory.mktemp("kafka-kraft")
        bootstrap = cluster.start(data_dir, nodes=3)
    try:
        handle = KraftCluster(data_dir, bootstrap, cluster.load_layout(data_dir).node_ids)
        handle.ensure_all_up()
        yield handle
    finally:
        if not external:
            cluster.stop(data_dir)
