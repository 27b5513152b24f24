"""Shared fixtures: a real local Kafka broker (tests/kafka_broker.py) and a real
ZooKeeper-mode cluster (tests/zk_cluster.py)."""

from kafka_broker import kafka_bootstrap  # noqa: F401
from zk_cluster import zk_cluster  # noqa: F401
