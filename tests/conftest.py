"""Shared fixtures: a real local Kafka broker (tests/support/kafka_broker.py), a real
ZooKeeper-mode cluster (tests/support/zk_cluster.py) and a real 3-node KRaft cluster
(tests/support/kraft_cluster.py).

pytest runs the suite in two processes (pytest-xdist, `-n 2 --dist loadgroup` in
pyproject.toml). A session fixture is per process, so every test that uses one real
cluster (by fixture or by marker) is sent to the same process (its `xdist_group`, below),
which starts that cluster once; every other test goes with the rest of its module, so a
module's own fixtures are built once. On the 2-core machine this
overlaps the clusters' waits (session timeouts, fencing, elections) with the CPU-bound
core tests. `-n 0` runs everything in one process (pdb, a single test)."""

import pytest

from tests.support.kafka_broker import kafka_bootstrap  # noqa: F401
from tests.support.kraft_cluster import kraft_cluster  # noqa: F401
from tests.support.zk_cluster import zk_cluster, zk_processes  # noqa: F401

# helpers, not tests: never collected (their files are not test_*.py either)
collect_ignore = ["support"]

# a test using one of these fixtures, or carrying one of these markers, runs in the
# process of that cluster's group; the first match wins (a test on the ZooKeeper-mode
# cluster writing to the broker: "zk")
_CLUSTER_GROUPS = (
    ("zk_cluster", "zk"),
    ("zk_processes", "zk"),
    ("kraft_cluster", "kraft"),
    ("standalone_cluster", "standalone"),
    ("kafka_bootstrap", "kafka"),
)
_MARKER_GROUPS = ("zk", "kraft", "kafka")


def _group(item: pytest.Item) -> str:
    fixtures = set(getattr(item, "fixturenames", ()))
    for fixture, group in _CLUSTER_GROUPS:
        if fixture in fixtures:
            return group
    for marker in _MARKER_GROUPS:
        if item.get_closest_marker(marker) is not None:
            return marker
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
