"""The local KRaft broker accepts kafka-python producers and consumers; `status` reads it;
`topic create --assignment` places replicas as Kafka's --replica-assignment does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

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


# ---------------------------------------------- status and topic create on the single node


@pytest.fixture(scope="module")
def node_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A single-node broker of `kafka-local start` (no --zk, no --nodes) in its own dir."""
    data_dir = tmp_path_factory.mktemp("node")
    kafka_local.start(data_dir)
    try:
        yield data_dir
    finally:
        kafka_local.stop(data_dir)


def test_status_reads_the_single_node(node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`status` used to read every directory as a ZooKeeper-mode cluster's (KeyError)."""
    from streaming.cli import main

    assert main(["kafka-local", "status", "--dir", str(node_dir)]) == 0
    out = capsys.readouterr().out
    pid = (node_dir / "kafka.pid").read_text().strip()
    port = kafka_local.read_properties_file(node_dir / "ports.properties")["broker"]
    assert out == f"broker (KRaft, single node): pid {pid}, 127.0.0.1:{port}\n"


def test_topic_create_places_replicas_as_assigned(
    node_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from streaming.cli import main

    topic = f"assigned-{uuid.uuid4().hex[:8]}"
    argv = ["kafka-local", "topic", "create", topic, "--dir", str(node_dir)]
    assert main([*argv, "--assignment", "0:1/1:1/2:1", "--config", "retention.ms=60000"]) == 0
    port = kafka_local.read_properties_file(node_dir / "ports.properties")["broker"]
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        (described,) = admin.describe_topics([topic])
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        admin.close()
    replicas = {p["partition_index"]: p["replica_nodes"] for p in described["partitions"]}
    assert replicas == {0: [1], 1: [1], 2: [1]}
    assert configs["topic"][topic]["retention.ms"]["value"] == "60000"
    capsys.readouterr()
    # Kafka's own refusal, in one line: no broker 7 in this cluster
    assert main([*argv[:3], f"{topic}-b", *argv[4:], "--assignment", "0:1/1:7"]) == 1
    err = capsys.readouterr().err
    assert "InvalidReplicationAssignmentError" in err and "broker 7" in err
    assert len(err.splitlines()) == 1
    # Kafka's own form: partitions by position, comma separated
    kafkas = f"{topic}-k"
    assert main([*argv[:3], kafkas, *argv[4:], "--replica-assignment", "1,1"]) == 0
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    try:
        (described,) = admin.describe_topics([kafkas])
    finally:
        admin.close()
    assert {p["partition_index"]: p["replica_nodes"] for p in described["partitions"]} == {
        0: [1],
        1: [1],
    }


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("0:1,2/1:2", "as many replicas"),
        ("0:1,2/2:2,1", "partitions must be 0..1"),
        ("0:1,1", "repeats a broker"),
        ("0-1,2", "not PARTITION:BROKER"),
        ("0:1/0:2", "given twice"),
    ],
)
def test_assignment_errors_name_the_part(text: str, error: str) -> None:
    from streaming.local_clusters.topics import parse_assignment

    with pytest.raises(kafka_local.LocalClusterError, match=error):
        parse_assignment(text)


def test_both_assignment_forms_give_each_partition_its_replicas() -> None:
    from streaming.local_clusters.topics import parse_assignment, parse_replica_assignment

    assert parse_assignment("0:1,2,3/1:2,3,1") == {0: [1, 2, 3], 1: [2, 3, 1]}
    assert parse_assignment("1:2,3,1/0:1,2,3") == {1: [2, 3, 1], 0: [1, 2, 3]}
    # Kafka's kafka-topics --replica-assignment: partitions by position
    assert parse_replica_assignment("1:2:3,2:3:1") == {0: [1, 2, 3], 1: [2, 3, 1]}
    with pytest.raises(kafka_local.LocalClusterError, match="as many replicas"):
        parse_replica_assignment("1:2,3")
    with pytest.raises(kafka_local.LocalClusterError, match="repeats a broker"):
        parse_replica_assignment("1:1")
