"""The Kafka request sink (CONTRACT §3, `--sink`): one record per request body with its
recipients, none over the topic's `max.message.bytes`, a body too big for one record split
into chunks of its partitions; a consumer rebuilds every request from the records.

The end-to-end test runs `kcsim run` against a real broker, into a sink topic created with
a small `max.message.bytes`, on a cluster whose UpdateMetadata bodies (topic creation,
and the full metadata a starting broker gets, SPEC §8.1) are many times that size, and
compares the rebuilt requests with the lake's controller_requests joined with
request_payloads, and with `kcsim replay`'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from job_process import ROOT, JobProcess, job_env
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from lake_tables import canonical, lake_rows
from spark_session import spark  # noqa: F401  (the session-scoped fixture)

from controller.config import Settings
from controller.request_log import joined
from controller.simulator import RawEvent, Simulator
from streaming.sink import (
    RECORD_OVERHEAD,
    payload_records,
    rebuild_requests,
    topic_max_message_bytes,
)

SMALL_MESSAGE_BYTES = 64 * 1024
PARTITIONS = 1500  # an UpdateMetadata of them all is ~6x SMALL_MESSAGE_BYTES as JSON


def events(partitions: int) -> list[dict]:
    return [
        *({"type": "broker_startup", "broker": b} for b in (1, 2, 3)),
        {"type": "topic_creation", "topic": "big", "partitions": partitions,
         "replication_factor": 2},
        {"type": "topic_creation", "topic": "small", "assignment": {"0": [1, 2]}},
        {"type": "controlled_shutdown", "broker": 2},
        {"type": "broker_failure", "broker": 2},
        {"type": "broker_startup", "broker": 2},
    ]  # fmt: skip


def core_output(partitions: int) -> tuple[list[dict], list[dict]]:
    lines = [RawEvent(json.dumps(e), f"sink:{i}") for i, e in enumerate(events(partitions))]
    output = Simulator(Settings()).apply(lines)
    return list(output.appends["controller_requests"]), list(output.appends["request_payloads"])


# ------------------------------------------------------------------- records, no Kafka


def test_records_fit_and_rebuild_the_requests() -> None:
    requests, payloads = core_output(PARTITIONS)
    limit = 20_000
    records = payload_records(requests, payloads, limit)
    assert all(len(r.key.encode()) + len(r.value.encode()) <= limit for r in records)
    parsed = [json.loads(r.value) for r in records]
    # a body is one record (chunk 0 of 1) unless it does not fit; the big ones are split
    chunked = [p for p in parsed if p["chunks"] > 1]
    assert {p["type"] for p in chunked} >= {"UpdateMetadata", "LeaderAndIsr"}
    assert len({(p["cluster"], p["event_id"], p["payload"]) for p in parsed}) == len(payloads)
    assert all(r.key == "default" for r in records)
    assert canonical(rebuild_requests(parsed)) == canonical(joined(requests, payloads))
    # an UpdateMetadata to every broker is one body: its recipients ride in each record
    fan_out = next(p for p in parsed if p["type"] == "UpdateMetadata" and p["partitions"])
    assert [r["broker"] for r in fan_out["recipients"]] == [1, 2, 3]


def test_a_long_cluster_name_key_counts_against_the_limit() -> None:
    """The record key (the cluster) is part of what the topic's max.message.bytes bounds:
    a long name in UTF-8 shrinks the room for the value."""
    cluster = "ü" * 300  # 600 bytes as the key (1,800 as JSON in the value)
    lines = [
        RawEvent(json.dumps({**e, "cluster": cluster}), f"sink:{i}")
        for i, e in enumerate(events(PARTITIONS))
    ]
    output = Simulator(Settings()).apply(lines)
    requests = list(output.appends["controller_requests"])
    payloads = list(output.appends["request_payloads"])
    limit = 20_000
    records = payload_records(requests, payloads, limit)
    assert {r.key for r in records} == {cluster}
    assert all(len(r.key.encode()) + len(r.value.encode()) <= limit for r in records)
    assert max(len(r.key.encode()) + len(r.value.encode()) for r in records) > limit - 1000
    parsed = [json.loads(r.value) for r in records]
    assert canonical(rebuild_requests(parsed)) == canonical(joined(requests, payloads))


def test_a_missing_chunk_is_an_error_not_a_short_request() -> None:
    requests, payloads = core_output(PARTITIONS)
    parsed = [json.loads(r.value) for r in payload_records(requests, payloads, 20_000)]
    dropped = next(i for i, p in enumerate(parsed) if p["chunks"] > 1 and p["chunk"] == 1)
    with pytest.raises(ValueError, match="chunks"):
        rebuild_requests(parsed[:dropped] + parsed[dropped + 1 :])


def test_a_partition_larger_than_a_record_is_refused() -> None:
    requests, payloads = core_output(4)
    with pytest.raises(ValueError, match="more than a record"):
        payload_records(requests, payloads, 600)


# --------------------------------------------------------------------- a real broker


def consume_all(bootstrap: str, topic: str) -> list[bytes]:
    """Every record value of the topic (one partition), in offset order."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = consumer.end_offsets([partition])[partition]
        values = []
        for record in consumer:
            values.append(record.value)
            if record.offset + 1 >= end:
                break
        assert len(values) == end
        return values
    finally:
        consumer.close()


@pytest.mark.kafka
@pytest.mark.spark
def test_sink_records_fit_a_small_topic_and_rebuild_every_request(
    spark,  # noqa: F811
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    topic = f"kcsim-sink-{uuid.uuid4().hex[:10]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics(
            [NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": str(SMALL_MESSAGE_BYTES)})]
        )
    finally:
        admin.close()
    assert topic_max_message_bytes(kafka_bootstrap, topic) == SMALL_MESSAGE_BYTES
    absent = f"kcsim-sink-absent-{uuid.uuid4().hex[:10]}"
    assert topic_max_message_bytes(kafka_bootstrap, absent) is None

    source = tmp_path / "events"
    source.mkdir()
    (source / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events(PARTITIONS)))
    lake = tmp_path / "lake"
    job = JobProcess(
        ["--source", f"file:{source}", "--lake", str(lake), "--once",
         "--sink", f"kafka:{kafka_bootstrap}/{topic}"]
    )  # fmt: skip
    assert job.finish() == 0, job.tail()

    values = consume_all(kafka_bootstrap, topic)
    assert max(len(v) for v in values) <= SMALL_MESSAGE_BYTES - RECORD_OVERHEAD
    records = [json.loads(v) for v in values]
    # the large bodies did need splitting: a full UpdateMetadata is several records
    assert max(r["chunks"] for r in records) >= 4
    rows = lake_rows(spark, lake)
    assert len(rows["request_payloads"]) < len(rows["controller_requests"])
    lake_requests = joined(rows["controller_requests"], rows["request_payloads"])
    assert canonical(rebuild_requests(records)) == canonical(lake_requests)

    out = tmp_path / "replay"
    subprocess.run(
        [sys.executable, "-m", "streaming.cli", "replay", str(source), "--out", str(out),
         "--quiet"],
        cwd=ROOT, env=job_env(), check=True, timeout=120,
    )  # fmt: skip
    replayed = {
        name: [json.loads(line) for line in (out / f"{name}.jsonl").read_text().splitlines()]
        for name in ("controller_requests", "request_payloads")
    }
    replay_requests = joined(replayed["controller_requests"], replayed["request_payloads"])
    assert canonical(replay_requests) == canonical(lake_requests)
