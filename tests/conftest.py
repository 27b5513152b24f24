"""Shared fixtures: a real local Kafka broker (tests/kafka_broker.py), a real
ZooKeeper-mode cluster (tests/zk_cluster.py) and a real 3-node KRaft cluster
(tests/kraft_cluster.py)."""

from kafka_broker import kafka_bootstrap  # noqa: F401
from kraft_cluster import kraft_cluster  # noqa: F401
from zk_cluster import zk_cluster, zk_processes  # noqa: F401
