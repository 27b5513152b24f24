"""Shared fixtures: a real local Kafka broker (tests/support/kafka_broker.py), a real
ZooKeeper-mode cluster (tests/support/zk_cluster.py) and a real 3-node KRaft cluster
(tests/support/kraft_cluster.py)."""

from tests.support.kafka_broker import kafka_bootstrap  # noqa: F401
from tests.support.kraft_cluster import kraft_cluster  # noqa: F401
from tests.support.zk_cluster import zk_cluster, zk_processes  # noqa: F401

# helpers, not tests: never collected (their files are not test_*.py either)
collect_ignore = ["support"]
