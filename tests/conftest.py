"""Shared fixtures: a real local Kafka broker (tests/kafka_broker.py)."""

from kafka_broker import kafka_bootstrap  # noqa: F401
