"""pytest fixture: one real ZooKeeper-mode Kafka 3.7.1 cluster (ZooKeeper + 3 brokers) for
the whole test session, and helpers to read its znodes and create topics.

tests/conftest.py imports `zk_cluster` from here; mark the tests that use it
`@pytest.mark.zk`. The cluster is shared by every test module, so a test that kills or
shuts down a broker brings it back before it ends (`ensure_all_up()` in a `finally`).
Set KCSIM_ZK_CLUSTER_DIR=DIR to use a cluster already started with
`kcsim kafka-local start --zk --dir DIR` (it is then left running).

The processes live for the session; the tests' own ZooKeeper session (kazoo) lives for a
module. kazoo's connection thread draws from the global `random` on every loop, and
Hypothesis warns when the global random state changes during a draw: a client kept for
the session ticked through the property tests of later modules.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from streaming.local_clusters import zk_cluster as cluster

WAIT_S = 60.0


class PartitionState(NamedTuple):
    """A partition's state znode, /brokers/topics/T/partitions/P/state."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int  # the znode's version
    mzxid: int  # the transaction that last wrote it (orders it against other znodes)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll `condition` until it holds; fail the test with `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.1)


@dataclass(frozen=True, slots=True)
class ZkCluster:
    """A running cluster: its addresses, broker control and a ZooKeeper session to read
    znodes with (`client`, kazoo)."""

    zookeeper: str  # 127.0.0.1:PORT
    bootstrap: str  # every broker, comma separated
    dir: Path
    brokers: tuple[int, ...]  # (1, 2, 3)
    client: KazooClient

    def kill(self, broker: int) -> None:
        """SIGKILL; returns once the process is gone (its znode lingers up to 6 s)."""
        cluster.kill_broker(self.dir, broker)

    def shutdown(self, broker: int) -> None:
        """SIGTERM: a controlled shutdown; returns once the process has exited."""
        cluster.shutdown_broker(self.dir, broker)

    def start(self, broker: int) -> None:
        """Start a stopped broker again (same id, port, log dirs); returns once registered."""
        cluster.start_broker(self.dir, broker)

    def bootstrap_of(self, broker: int) -> str:
        return f"127.0.0.1:{cluster.load_layout(self.dir).broker_ports[broker]}"

    def registered(self) -> set[int]:
        return cluster.registered_brokers(self.client)

    def controller_id(self) -> int | None:
        return cluster.controller_id(self.client)

    def wait_registered(self, brokers: Iterable[int], timeout_s: float = WAIT_S) -> None:
        wanted = set(brokers)
        wait_for(lambda: wanted <= self.registered(), f"brokers {wanted} registered", timeout_s)

    def wait_unregistered(self, brokers: Iterable[int], timeout_s: float = WAIT_S) -> None:
        gone = set(brokers)
        wait_for(lambda: not gone & self.registered(), f"brokers {gone} gone", timeout_s)

    def wait_controller(self, timeout_s: float = WAIT_S) -> int:
        wait_for(lambda: self.controller_id() is not None, "a controller", timeout_s)
        controller = self.controller_id()
        assert controller is not None
        return controller

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """The state znode, or None before the controller has written it."""
        try:
            data, stat = self.client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        except NoNodeError:
            return None
        state = json.loads(data)
        return PartitionState(
            leader=state["leader"],
            leader_epoch=state["leader_epoch"],
            isr=tuple(state["isr"]),
            controller_epoch=state["controller_epoch"],
            partition_epoch=stat.version,
            mzxid=stat.mzxid,
        )

    def wait_partition_state(
        self,
        topic: str,
        partition: int,
        condition: Callable[[PartitionState], bool],
        what: str,
        timeout_s: float = WAIT_S,
    ) -> PartitionState:
        """Poll the state znode until `condition` holds; returns that state."""
        seen: list[PartitionState] = []

        def holds() -> bool:
            state = self.partition_state(topic, partition)
            if state is not None:
                seen[:] = [state]
            return state is not None and condition(state)

        try:
            wait_for(holds, f"{topic}-{partition}: {what}", timeout_s)
        except AssertionError as error:
            raise AssertionError(f"{error}; last state {seen}") from None
        return seen[0]

    def broker_change_zxid(self) -> int:
        """The transaction of the latest registration or deregistration (/brokers/ids
        pzxid): compared with a state znode's mzxid, it orders the two changes."""
        _, stat = self.client.get("/brokers/ids")
        return int(stat.pzxid)

    def running(self) -> set[int]:
        layout = cluster.load_layout(self.dir)
        return {b for b in self.brokers if layout.broker_pid(b) is not None}

    def ensure_all_up(self) -> None:
        """Start every broker that is down and wait until all are registered and a
        controller is elected: the state every test finds the shared cluster in."""
        for broker in self.brokers:
            if broker not in self.running():
                self.start(broker)
        self.wait_registered(self.brokers)
        self.wait_controller()


def unique_topic(prefix: str = "kcsim") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(
    zk: ZkCluster,
    topic: str,
    assignment: Mapping[int, Sequence[int]],
    configs: Mapping[str, str] | None = None,
) -> None:
    """Create `topic` with explicit replica assignments ({partition: [replicas]}, the first
    replica preferred) and wait until the controller has written every partition's state."""
    admin = KafkaAdminClient(bootstrap_servers=zk.bootstrap, client_id="kcsim-tests")
    try:
        admin.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=-1,
                    replication_factor=-1,
                    replica_assignments={p: list(r) for p, r in assignment.items()},
                    topic_configs=dict(configs or {}),
                )
            ]
        )
    finally:
        admin.close()
    for partition in assignment:
        zk.wait_partition_state(topic, partition, lambda _: True, "state znode written")


@pytest.fixture(scope="session")
def zk_processes(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[cluster.ClusterAddress, Path]]:
    """ZooKeeper and the brokers, started once: their address and data directory."""
    external = os.environ.get("KCSIM_ZK_CLUSTER_DIR")
    if external:
        data_dir = Path(external).resolve()
        layout = cluster.load_layout(data_dir)
        yield cluster.ClusterAddress(layout.zookeeper, layout.bootstrap), data_dir
        return
    data_dir = tmp_path_factory.mktemp("kafka-zk")
    address = cluster.start(data_dir, brokers=cluster.DEFAULT_BROKERS)
    try:
        yield address, data_dir
    finally:
        cluster.stop(data_dir)


@pytest.fixture(scope="module")
def zk_cluster(zk_processes: tuple[cluster.ClusterAddress, Path]) -> Iterator[ZkCluster]:
    address, data_dir = zk_processes
    client = KazooClient(hosts=address.zookeeper, timeout=10.0)
    client.start(timeout=15)
    try:
        brokers = cluster.load_layout(data_dir).broker_ids
        handle = ZkCluster(address.zookeeper, address.bootstrap, data_dir, brokers, client)
        handle.ensure_all_up()
        yield handle
    finally:
        client.stop()
        client.close()
