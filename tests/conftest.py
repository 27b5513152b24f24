"""Shared fixtures: a real local Kafka broker (tests/support/clusters/kafka_broker.py), a real
ZooKeeper-mode cluster (tests/support/clusters/zk_cluster.py) and a real 3-node KRaft cluster
(tests/support/clusters/kraft_cluster.py).

pytest runs the suite in two processes (pytest-xdist, `-n 2 --dist loadfile` in
pyproject.toml): each test file goes whole to one process, so a module's fixtures are
built once, and a session fixture (a real cluster) is started once in each process that
runs a test needing it. On the 2-core machine the clusters' waits (session timeouts,
fencing, elections) overlap with the CPU-bound core tests. `-n 0` runs everything in one
process (pdb, a single test).

The files are handed out longest first (`pytest_collection_modifyitems`, with xdist's own
reordering by test count turned off): a long real-cluster file started last would run
alone on one process while the other sits idle."""

from collections import defaultdict

import pytest
from hypothesis import HealthCheck, settings

from tests.support.clusters.kafka_broker import kafka_bootstrap  # noqa: F401
from tests.support.clusters.kraft_cluster import kraft_cluster  # noqa: F401
from tests.support.clusters.zk_cluster import zk_cluster, zk_processes  # noqa: F401

# helpers, not tests: never collected (their files are not test_*.py either)
collect_ignore = ["support"]

# Hypothesis's wall-clock checks (a 200 ms deadline per example, "input generation is
# slow") measure the machine, not the code, when two test processes share two cores with
# the clusters' JVMs: they are off for the whole suite. Examples and shrinking are as set.
settings.register_profile("kcsim", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kcsim")


# What a test of each tier costs, roughly, in seconds on the 2-core machine (the heaviest
# marker counts): used only to hand the longest files out first.
TIER_SECONDS = {"slow": 150.0, "zk": 30.0, "kraft": 30.0, "spark": 20.0, "kafka": 8.0}
UNMARKED_SECONDS = 0.05


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the files by their estimated cost, longest first; tests keep their order
    within a file."""
    cost: dict[str, float] = defaultdict(float)
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        cost[item.nodeid.split("::", 1)[0]] += max(
            (seconds for tier, seconds in TIER_SECONDS.items() if tier in marks),
            default=UNMARKED_SECONDS,
        )
    items.sort(key=lambda item: -cost[item.nodeid.split("::", 1)[0]])
