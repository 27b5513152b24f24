"""`kcsim shadow --out kafka:`: against a real Kafka broker (the `kafka_bootstrap` fixture)
and, for the shadow process, a cluster planted under a chroot of the real ZooKeeper of
the `zk_cluster` fixture. An event is written once the broker acknowledged it; an event
over the topic's max.message.bytes (the brokers' message.max.bytes while the topic does
not exist) stops the shadow with a clear error and no state past it; the restart
bookkeeping finds the cluster's own last seq in a shared topic, and a read-back that makes
no progress ends with an error, not a hang."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

from streaming.clients.kafka_config import KafkaClientConfig
from streaming.clients.message_size import broker_message_max_bytes, topic_max_message_bytes
from streaming.local_clusters import kafka_local
from streaming.local_clusters.processes import read_pid
from streaming.shadow.kafka_output import KafkaOutput, OutputError, record_bytes
from tests.support.clusters.kafka_broker import alter_configs, create_topic
from tests.support.clusters.planted_cluster import plant_topic, planted

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[3]
DEADLINE_S = 90


def new_topic(bootstrap: str, partitions: int = 1, max_message_bytes: int | None = None) -> str:
    configs = {} if max_message_bytes is None else {"max.message.bytes": str(max_message_bytes)}
    return create_topic(bootstrap, "shadow-out", partitions, **configs)


def set_max_message_bytes(bootstrap: str, topic: str, limit: int) -> None:
    alter_configs(bootstrap, [
        ConfigResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": str(limit)})
    ])  # fmt: skip
    deadline = time.monotonic() + DEADLINE_S
    while topic_max_message_bytes(bootstrap, topic) != limit:
        assert time.monotonic() < deadline, f"{topic}'s max.message.bytes never became {limit}"
        time.sleep(0.2)


def read_topic(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """Every record of the topic, (key, value), partition by partition."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        got: dict[TopicPartition, list[tuple[bytes, bytes]]] = {tp: [] for tp in tps}
        deadline = time.monotonic() + DEADLINE_S
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"could not read {topic} to its end"
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[tp] += [(r.key, r.value) for r in records]
        return [record for tp in tps for record in got[tp]]
    finally:
        consumer.close()


def events_in(bootstrap: str, topic: str) -> list[dict]:
    return [json.loads(value) for _, value in read_topic(bootstrap, topic)]


def event(seq: int, kind: str = "broker_startup", **fields: object) -> dict:
    return {"type": kind, "cluster": "c1", "event_id": f"c1:{seq}", "seq": seq, **fields}


@pytest.mark.zk
def test_an_event_over_the_topics_limit_stops_the_shadow_and_a_raised_limit_resumes_it(
    zk_cluster, kafka_bootstrap, tmp_path
):
    """The bootstrap's topic_creation (40 partitions, ~3 KB) is over a topic taking 2000
    bytes: exit 1 naming it, its size and the limit; nothing of the flush written, the
    state holding the bootstrap still to write. With the limit raised, the restart writes
    that bootstrap, each event once; a third run writes nothing."""
    topic = new_topic(kafka_bootstrap, max_message_bytes=2000)
    state = tmp_path / "state.json"
    with planted(zk_cluster.zookeeper, [1]) as (chroot, writer):
        plant_topic(writer, chroot, "wide", [[1]] * 40)

        def shadow() -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "streaming.cli", "shadow", "--once"]
            command += ["--zookeeper", zk_cluster.zookeeper + chroot, "--cluster", "planted"]
            command += ["--out", f"kafka:{kafka_bootstrap}/{topic}", "--state", str(state)]
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            return subprocess.run(
                command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE_S
            )

        refused = shadow()
        assert refused.returncode == 1, refused.stderr
        assert events_in(kafka_bootstrap, topic) == []
        unwritten = json.loads(state.read_text())["unwritten"]
        assert [e["type"] for e in unwritten] == [
            "broker_startup",
            "topic_creation",
            "controller_failover",
        ]
        creation = unwritten[1]
        size = record_bytes(b"planted", json.dumps(creation, separators=(",", ":")).encode())
        assert size > 2000
        assert (
            f"kcsim shadow: Kafka output failed: event {creation['event_id']} "
            f"(seq {creation['seq']}, topic_creation) is {size} bytes as a Kafka record, over "
            f"the 2000 bytes of the max.message.bytes of topic {topic!r}"
        ) in refused.stderr
        assert "Raise the topic's max.message.bytes" in refused.stderr
        assert "--out file:DIR" in refused.stderr

        set_max_message_bytes(kafka_bootstrap, topic, 1_048_588)
        resumed = shadow()
        assert resumed.returncode == 0, resumed.stderr
        assert events_in(kafka_bootstrap, topic) == unwritten
        again = shadow()
        assert again.returncode == 0, again.stderr
    records = read_topic(kafka_bootstrap, topic)
    assert [json.loads(v) for _, v in records] == unwritten
    assert {key for key, _ in records} == {b"planted"}
    saved = json.loads(state.read_text())
    assert "unwritten" not in saved and saved["last_seq"] == unwritten[-1]["seq"]


def test_a_record_the_broker_refuses_is_an_error_naming_it_not_a_silent_loss(kafka_bootstrap):
    """The topic's limit lowered under a running shadow: the broker refuses a record the
    shadow let through, and the write says which event instead of returning."""
    topic = new_topic(kafka_bootstrap)
    sink = KafkaOutput(kafka_bootstrap, topic, "c1", KafkaClientConfig())
    try:
        assert sink.limit == topic_max_message_bytes(kafka_bootstrap, topic)
        set_max_message_bytes(kafka_bootstrap, topic, 2000)
        sink.write([event(1)])
        big = event(2, "topic_creation", topic="t", assignment={str(p): [1] for p in range(400)})
        with pytest.raises(OutputError) as refused:
            sink.write([big])
        assert re.match(
            r"the broker refused event c1:2 \(seq 2, topic_creation\) as too large: \d+ bytes",
            str(refused.value),
        )
        assert f"over topic {topic!r}'s max.message.bytes" in str(refused.value)
        assert refused.value.cause is not None
    finally:
        sink.close()
    assert events_in(kafka_bootstrap, topic) == [event(1)]


def test_an_event_over_a_mebibyte_goes_out_when_the_topic_takes_it(kafka_bootstrap):
    """The producer's max.request.size follows the topic's max.message.bytes (3 MB here):
    a 1.5 MB controller_failover (what ~9,000 partitions observe) is written whole."""
    topic = new_topic(kafka_bootstrap, max_message_bytes=3_000_000)
    rows = [
        {"topic": "t", "partition": p, "leader": 1, "leader_epoch": 0, "isr": [1, 2, 3]}
        for p in range(18_000)
    ]
    failover = event(7, "controller_failover", controller=1, observed={"partitions": rows})
    assert len(json.dumps(failover)) > 1_500_000
    sink = KafkaOutput(kafka_bootstrap, topic, "c1", KafkaClientConfig())
    try:
        assert sink.limit == 3_000_000
        sink.write([event(6), failover])
    finally:
        sink.close()
    assert events_in(kafka_bootstrap, topic) == [event(6), failover]


def test_last_seq_is_the_clusters_own_behind_other_clusters_records(kafka_bootstrap):
    """A topic shared by clusters: c1's last record is 2,500 records of another cluster
    back (more than one read-back window); the other cluster's seqs are larger."""
    topic = new_topic(kafka_bootstrap, partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    try:
        for seq in (1, 2, 3):
            producer.send(topic, key=b"c1", value=json.dumps(event(seq)).encode(), partition=0)
        for p in (0, 1):
            for seq in range(2500):
                value = json.dumps({"cluster": "c2", "seq": 10**12 + seq}).encode()
                producer.send(topic, key=b"c2", value=value, partition=p)
        producer.flush()
    finally:
        producer.close()
    sink = KafkaOutput(kafka_bootstrap, topic, "c1", KafkaClientConfig())
    try:
        assert sink.last_seq("c1") == 3
        assert sink.last_seq("c2") == 10**12 + 2499
        assert sink.last_seq("c3") == 0  # read back to each partition's start
    finally:
        sink.close()


def wait_until(what: str, check: Callable[[], Any]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def set_brokers_message_max_bytes(bootstrap: str, limit: int | None) -> None:
    """Every broker's message.max.bytes as a dynamic config (None: back to its default)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        brokers = [str(b["broker_id"]) for b in admin.describe_cluster()["brokers"]]
    finally:
        admin.close()
    op = (AlterConfigOp.SET, str(limit)) if limit else (AlterConfigOp.DELETE, None)
    alter_configs(bootstrap, [
        ConfigResource(ConfigResourceType.BROKER, b, {"message.max.bytes": op}) for b in brokers
    ])  # fmt: skip


def test_a_topic_not_created_yet_takes_the_brokers_message_max_bytes(kafka_bootstrap):
    """No topic yet: events are sized by the brokers' message.max.bytes (lowered here, as
    a dynamic broker config), not by a fixed default. An event over it is refused naming
    that limit, before anything of its flush is sent; one under it creates the topic,
    which has that limit."""
    small = 4096
    default = broker_message_max_bytes(kafka_bootstrap)
    assert default > small
    set_brokers_message_max_bytes(kafka_bootstrap, small)
    try:
        wait_until(
            "the brokers' new message.max.bytes",
            lambda: broker_message_max_bytes(kafka_bootstrap) == small,
        )
        topic = f"shadow-auto-{uuid.uuid4().hex[:10]}"
        sink = KafkaOutput(kafka_bootstrap, topic, "c1", KafkaClientConfig())
        try:
            assert sink.limit == small
            big = event(
                2, "topic_creation", topic="t", assignment={str(p): [1] for p in range(1000)}
            )
            with pytest.raises(OutputError) as refused:
                sink.write([event(1), big])
            assert re.match(
                r"event c1:2 \(seq 2, topic_creation\) is \d+ bytes as a Kafka record, over "
                rf"the {small} bytes of the brokers' message.max.bytes \(topic '{topic}' does "
                r"not exist yet\); nothing from it on was written",
                str(refused.value),
            )
            sink.write([event(1)])
        finally:
            sink.close()
        assert topic_max_message_bytes(kafka_bootstrap, topic) == small
        assert events_in(kafka_bootstrap, topic) == [event(1)]
    finally:
        set_brokers_message_max_bytes(kafka_bootstrap, None)
        wait_until(
            "the brokers' message.max.bytes back to its default",
            lambda: broker_message_max_bytes(kafka_bootstrap) == default,
        )


class StopsTheBroker(KafkaOutput):
    """Freezes the broker (SIGSTOP: its connections stay open, nothing answers) once the
    read-back has found the partitions' ends, as it starts reading a window."""

    def __init__(self, broker_pid: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.broker_pid = broker_pid

    def _seqs_between(self, *args: Any) -> list[int]:
        os.kill(self.broker_pid, signal.SIGSTOP)
        return super()._seqs_between(*args)


def test_a_read_back_that_makes_no_progress_ends_with_an_error(tmp_path):
    """The topic's last records cannot be read (the broker stopped answering): after the
    stall timeout (2 s here, 30 s by default) the restart bookkeeping fails naming the
    partition and offset, rather than hanging or guessing a seq. A broker of its own,
    since it is frozen."""
    data_dir = tmp_path / "kafka"
    bootstrap = kafka_local.start(data_dir)
    try:
        topic = new_topic(bootstrap)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        try:
            for seq in (1, 2, 3):
                producer.send(topic, key=b"c1", value=json.dumps(event(seq)).encode())
            producer.flush()
        finally:
            producer.close()
        pid = read_pid(data_dir / "kafka.pid")
        assert pid is not None
        sink = StopsTheBroker(pid, bootstrap, topic, "c1", KafkaClientConfig(), 2.0)
        try:
            began = time.monotonic()
            with pytest.raises(OutputError) as stalled:
                sink.last_seq("c1")
            assert 2.0 < time.monotonic() - began < DEADLINE_S
            assert str(stalled.value).startswith(
                f"reading back {topic!r} partition 0 (to find the last event of cluster 'c1' "
                "already written) made no progress for 2 s at offset 0 of 3: is the broker "
                "reachable"
            )
        finally:
            os.kill(pid, signal.SIGCONT)
            sink.close()
        thawed = KafkaOutput(bootstrap, topic, "c1", KafkaClientConfig())
        try:
            assert thawed.last_seq("c1") == 3  # the same read-back, the broker answering
        finally:
            thawed.close()
    finally:
        kafka_local.stop(data_dir)
