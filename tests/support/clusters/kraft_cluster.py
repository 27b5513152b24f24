"""pytest fixture: one real 3-node KRaft cluster (Kafka 4.1.1, combined broker+controller
nodes, `streaming/local_clusters/kraft_cluster.py`) for the whole test session, and helpers to read
its partitions, quorum and fencing through kafka-python's admin client (`KraftCluster`,
in `streaming/chaos/live_kraft.py` with the chaos driver the soak shares).

tests/conftest.py imports `kraft_cluster` from here; mark the tests that use it
`@pytest.mark.kraft`. A test that kills or shuts down a node brings it back before it
ends (`ensure_all_up()` in a `finally`). Set KCSIM_KRAFT_CLUSTER_DIR=DIR to use a cluster
already started with `kcsim kafka-local start --nodes 3 --dir DIR` (it is then left
running). `own_kraft_cluster` starts a cluster for one module alone (a test that changes
what other tests would see, or that must not see theirs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from streaming.chaos.live_kraft import KraftCluster, Partition, wait_for
from streaming.local_clusters import kraft_cluster as cluster

__all__ = ["KraftCluster", "Partition", "kraft_cluster", "own_kraft_cluster", "wait_for"]


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


@contextmanager
def own_kraft_cluster(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    *,
    voters: int = 0,
    overrides: Mapping[str, str] | None = None,
) -> Iterator[KraftCluster]:
    """A 3-node cluster of combined nodes for one module (`cluster.start`'s `voters` and
    `overrides`): a fresh directory `name` under pytest's temporary root, free ports of
    its own; at the end only its own nodes are stopped."""
    data_dir = tmp_path_factory.mktemp(name)
    bootstrap = cluster.start(data_dir, nodes=3, voters=voters, overrides=overrides)
    try:
        yield KraftCluster(data_dir, bootstrap, cluster.load_layout(data_dir).node_ids)
    finally:
        cluster.stop(data_dir)
