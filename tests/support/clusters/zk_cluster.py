"""pytest fixture: one real ZooKeeper-mode Kafka 3.7.1 cluster (ZooKeeper + 3 brokers) for
the whole test session; the handle (`ZkCluster`) and helpers to read its znodes and create
topics are in `streaming/chaos/live_zk.py`, shared with the soak.

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

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from streaming.chaos.live_zk import (
    PartitionState,
    ZkCluster,
    create_topic,
    unique_topic,
    wait_for,
)
from streaming.local_clusters import zk_cluster as cluster

__all__ = [
    "PartitionState",
    "ZkCluster",
    "create_topic",
    "unique_topic",
    "wait_for",
    "zk_cluster",
    "zk_processes",
]


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
