"""The local KRaft broker accepts kafka-python producers and consumers."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from streaming.local_clusters import kafka_local

pytestmark = pytest.mark.kafka


def test_produce_and_consume_round_trip(kafka_bootstrap: str) -> None:
    topic = f"kcsim-test-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    finally:
        admin.close()

    sent = [(b"c1", b'{"type": "broker_startup", "broker": %d}' % i) for i in range(3)]
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    try:
        for key, value in sent:
            producer.send(topic, key=key, value=value)
        producer.flush(timeout=30)
    finally:
        producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15_000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        received = []
        for record in consumer:
            received.append((record.key, record.value))
            if len(received) == len(sent):
                break
    finally:
        consumer.close()
    assert received == sent


def test_cli_parser_accepts_start_stop() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    kafka_local.configure(parser)
    args = parser.parse_args(["stop", "--dir", "/tmp/x"])
    assert args.action == "stop"
    assert str(args.dir) == "/tmp/x"
    with pytest.raises(SystemExit):
        parser.parse_args(["restart"])


def test_stop_without_broker_is_a_no_op(tmp_path) -> None:
    kafka_local.stop(tmp_path)
    assert not (tmp_path / "kafka.pid").exists()
