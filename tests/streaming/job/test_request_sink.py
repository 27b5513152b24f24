"""The Kafka request sink (CONTRACT §3, `--sink`): one record per request body with its
recipients, none over the topic's `max.message.bytes`, a body too big for one record split
into chunks of its partitions; a consumer rebuilds every request from the records.

The sink's own tests, against a real broker: `send` puts each record in the topic exactly
once, each cluster's in order, and a re-run sends none again; a record the topic refuses
fails the batch with its size and the topic's limit, and every record not written is
counted; a topic the sink's first record creates has the brokers' `message.max.bytes`.

The end-to-end test runs `kcsim run` against a real broker, into a sink topic created with
a small `max.message.bytes`, on a cluster whose UpdateMetadata bodies (topic creation,
and the full metadata a starting broker gets, SPEC §8.1) are many times that size, and
compares the rebuilt requests with the lake's controller_requests joined with
request_payloads, and with `kcsim replay`'s.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    NewTopic,
)
from kafka.errors import KafkaConnectionError, KafkaTimeoutError

from controller.config import Settings
from controller.simulator import RawEvent, Simulator
from controller.zk.request_log import joined
from streaming.clients.message_size import broker_message_max_bytes, topic_max_message_bytes
from streaming.job.command import query_failure
from streaming.job.request_sink import (
    METADATA_COLUMNS,
    OUTAGE_SECONDS,
    RECORD_OVERHEAD,
    RequestSink,
    SinkError,
    metadata_sink_records,
    payload_records,
    rebuild_requests,
)
from streaming.local_clusters import kafka_local
from tests.support.clusters.kafka_broker import alter_configs, create_topic
from tests.support.spark.job_process import ROOT, JobProcess, job_env
from tests.support.spark.lake_tables import canonical, lake_rows
from tests.support.spark.spark_session import spark  # noqa: F401  (the session-scoped fixture)

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


def core_output(
    partitions: int, clusters: tuple[str, ...] = ("default",)
) -> tuple[list[dict], list[dict]]:
    """The requests and payloads of `events(partitions)` on each of `clusters`, the
    clusters' events interleaved."""
    lines = [
        RawEvent(json.dumps({**e, "cluster": c}), f"sink:{c}:{i}")
        for i, e in enumerate(events(partitions))
        for c in clusters
    ]
    output = Simulator(Settings()).apply(lines)
    return list(output.appends["controller_requests"]), list(output.appends["request_payloads"])


def kraft_records(partitions: int, clusters: tuple[str, ...] = ("default",)) -> list[dict]:
    """The metadata_records rows of `events(partitions)` under the KRaft engine, on each
    of `clusters`, the clusters' events interleaved."""
    lines = [
        RawEvent(json.dumps({**e, "cluster": c}), f"sink:{c}:{i}")
        for i, e in enumerate(events(partitions))
        for c in clusters
    ]
    return list(Simulator(Settings(engine="kraft")).apply(lines).appends["metadata_records"])


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


def test_metadata_records_are_one_record_each_holding_the_rows_columns() -> None:
    """CONTRACT §5: under `kraft` the sink's stream is metadata_records, one Kafka record
    per metadata record, its value the row, its key the cluster."""
    rows = kraft_records(50, clusters=("east", "west"))
    records = metadata_sink_records(rows, 2_000)
    assert [json.loads(r.value) for r in records] == [
        {c: row[c] for c in METADATA_COLUMNS} for row in rows
    ]
    assert [r.key for r in records] == [row["cluster"] for row in rows]
    assert {json.loads(r.value)["type"] for r in records} >= {
        "RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "TopicRecord",
        "PartitionRecord", "PartitionChangeRecord",
    }  # fmt: skip
    assert all(len(r.key.encode()) + len(r.value.encode()) <= 2_000 for r in records)
    assert len({r.ident for r in records}) == len(records)


def test_a_metadata_record_over_the_limit_is_refused_before_anything_is_sent() -> None:
    rows = kraft_records(4)
    largest = max(rows, key=lambda r: len(json.dumps(r)))
    limit = len(json.dumps({c: largest[c] for c in METADATA_COLUMNS}, separators=(",", ":")))
    with pytest.raises(SinkError, match=r"metadata record default:\S+ \(PartitionRecord\) takes"):
        metadata_sink_records(rows, limit)  # the key (the cluster) counts too
    assert len(metadata_sink_records(rows, limit + len("default"))) == len(rows)


def test_a_failed_sink_is_what_the_job_says_of_its_failed_query() -> None:
    """`kcsim run` prints `query_failure` of the query's exception: for a SinkError raised
    in foreachBatch, Spark's text is a generic header and the Python traceback."""
    try:
        raise SinkError("sink topic 't' refused a record as too large: record c:e:1:0 of 9 bytes")
    except SinkError as error:
        trace = "".join(traceback.format_exception(error))
    spark_text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function "
        "in foreach batch sink. Reason: An exception was raised by the Python Proxy. Return "
        f"Message: {trace}\n\tat org.apache.spark.sql.execution.streaming.StreamExecution\n"
    )
    assert query_failure(RuntimeError(spark_text)) == (
        "the sink failed: sink topic 't' refused a record as too large: record c:e:1:0 of 9 bytes"
    )


# --------------------------------------------------------------------- a real broker

SETTLE_SECONDS = 30.0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SETTLE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"not within {SETTLE_SECONDS:.0f} s: {what}"
        time.sleep(0.2)


def partition_values(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Every record value of every partition of the topic, each in offset order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        values: dict[int, list[bytes]] = {tp.partition: [] for tp in partitions}
        deadline = time.monotonic() + SETTLE_SECONDS
        while any(len(values[tp.partition]) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, "the topic was not read to its end"
            for tp, records in consumer.poll(timeout_ms=1000).items():
                values[tp.partition].extend(r.value for r in records if r.offset < ends[tp])
        return values
    finally:
        consumer.close()


@pytest.fixture
def sink_for() -> Iterator[Callable[[str, str], RequestSink]]:
    """A sink on a topic, closed after the test."""
    opened: list[RequestSink] = []

    def make(bootstrap: str, topic: str) -> RequestSink:
        opened.append(RequestSink(bootstrap, topic))
        return opened[-1]

    yield make
    for sink in opened:
        sink.close()


@pytest.mark.kafka
def test_sink_produces_every_record_once_in_order_and_a_rerun_none_again(
    kafka_bootstrap: str, sink_for: Callable[[str, str], RequestSink]
) -> None:
    topic = create_topic(kafka_bootstrap, "kcsim-sink", 3)
    sink = sink_for(kafka_bootstrap, topic)
    requests, payloads = core_output(300, clusters=("east", "west", "north", "south"))
    expected = payload_records(requests, payloads, sink.max_record_bytes())
    assert len(expected) > 50

    assert sink.send(requests, payloads, may_be_rerun=False) == 0
    written = partition_values(kafka_bootstrap, topic)
    # each record once, and each partition holds its clusters' records in the batch's order
    assert sum(len(v) for v in written.values()) == len(expected)
    for values in written.values():
        keys = {json.loads(v)["cluster"] for v in values}
        assert values == [r.value.encode() for r in expected if r.key in keys]
    assert set().union(*({json.loads(v)["cluster"] for v in vs} for vs in written.values())) == {
        "east", "west", "north", "south"
    }  # fmt: skip

    # a re-run of the batch (after a restart) finds every record and sends none again
    assert sink.send(requests, payloads, may_be_rerun=True) == len(expected)
    assert partition_values(kafka_bootstrap, topic) == written


@pytest.mark.kafka
def test_a_record_over_a_lowered_topic_limit_fails_the_batch_naming_sizes(
    kafka_bootstrap: str, sink_for: Callable[[str, str], RequestSink]
) -> None:
    """The topic's max.message.bytes lowered after the sink read it: the batch's big
    records are refused, the batch fails with the record's size and the limit read again,
    every record not written is counted; the re-run (what a restart does) completes it."""
    topic = create_topic(kafka_bootstrap, "kcsim-sink")
    sink = sink_for(kafka_bootstrap, topic)
    first = core_output(4, clusters=("first",))
    assert sink.send(*first, may_be_rerun=False) == 0
    before = len(partition_values(kafka_bootstrap, topic)[0])

    alter_configs(kafka_bootstrap, [ConfigResource(
        ConfigResourceType.TOPIC, topic, {"max.message.bytes": str(SMALL_MESSAGE_BYTES)}
    )])  # fmt: skip
    wait_for(
        lambda: topic_max_message_bytes(kafka_bootstrap, topic) == SMALL_MESSAGE_BYTES,
        "the topic's new max.message.bytes",
    )
    requests, payloads = core_output(PARTITIONS)
    # built with the limit read before (1 MiB): the full UpdateMetadata bodies are big
    records = payload_records(requests, payloads, sink.max_record_bytes())
    assert max(len(r.value) for r in records) > SMALL_MESSAGE_BYTES
    with pytest.raises(SinkError) as failed:
        sink.send(requests, payloads, may_be_rerun=False)
    message = str(failed.value)
    found = re.search(
        r"record default:\S+ of (\d+) bytes over the topic's max.message.bytes (\d+) "
        r"\(with Kafka's framing\); (\d+) of the batch's (\d+) records not written",
        message,
    )
    assert found, message
    size, limit, lost, total = (int(g) for g in found.groups())
    assert limit == SMALL_MESSAGE_BYTES  # read again, not the 1 MiB read before
    assert size == max(len(r.key) + len(r.value) for r in records)
    assert total == len(records)
    # what was written is the batch's first records, in order (the producer refuses every
    # record after a refused one), and every record not written is counted
    sent = partition_values(kafka_bootstrap, topic)[0][before:]
    assert sent == [r.value.encode() for r in records[: len(sent)]]
    assert len(sent) + lost == total
    assert len(sent) < total

    # the re-run finds what was written, sends the rest within the new limit, and the
    # topic's records of the batch rebuild its requests exactly
    assert sink.send(requests, payloads, may_be_rerun=True) == len(sent)
    values = partition_values(kafka_bootstrap, topic)[0][before:]
    assert max(len(v) for v in values[len(sent) :]) <= SMALL_MESSAGE_BYTES - RECORD_OVERHEAD
    batch = [json.loads(v) for v in values]
    assert canonical(rebuild_requests(batch)) == canonical(joined(requests, payloads))


@pytest.mark.kafka
def test_metadata_sink_produces_each_record_once_in_order_and_a_rerun_only_the_rest(
    kafka_bootstrap: str, sink_for: Callable[[str, str], RequestSink]
) -> None:
    """Under `kraft`: each metadata record once, each cluster's in order in one partition;
    a batch re-run after a send that stopped part way produces only what was missing."""
    topic = create_topic(kafka_bootstrap, "kcsim-sink-kraft", 3)
    sink = sink_for(kafka_bootstrap, topic)
    rows = kraft_records(40, clusters=("east", "west", "north", "south"))
    expected = metadata_sink_records(rows, sink.max_record_bytes())
    assert len(expected) > 200
    cut = len(rows) // 3
    assert sink.send_metadata(rows[:cut], may_be_rerun=False) == 0  # the crash
    assert sink.send_metadata(rows, may_be_rerun=True) == cut  # the re-run
    written = partition_values(kafka_bootstrap, topic)
    assert sum(len(v) for v in written.values()) == len(expected)
    for values in written.values():
        keys = {json.loads(v)["cluster"] for v in values}
        assert values == [r.value.encode() for r in expected if r.key in keys]
    # what a consumer reads: the table's rows, `record` parsed a second time
    read = [json.loads(v) for vs in written.values() for v in vs]
    assert canonical(read) == canonical([{c: r[c] for c in METADATA_COLUMNS} for r in rows])
    assert all(isinstance(json.loads(r["record"]), dict) for r in read)
    # and a re-run of the whole batch finds every record
    assert sink.send_metadata(rows, may_be_rerun=True) == len(expected)
    assert partition_values(kafka_bootstrap, topic) == written


def broker_ids(bootstrap: str) -> list[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return [str(b["broker_id"]) for b in admin.describe_cluster()["brokers"]]
    finally:
        admin.close()


@pytest.mark.kafka
def test_a_topic_the_sink_creates_takes_the_brokers_message_max_bytes(
    kafka_bootstrap: str, sink_for: Callable[[str, str], RequestSink]
) -> None:
    """No topic yet: the sink sizes its records by the brokers' message.max.bytes (lowered
    here, as a dynamic broker config), which the topic its first record creates takes."""
    brokers = broker_ids(kafka_bootstrap)
    default = broker_message_max_bytes(kafka_bootstrap)
    assert default > SMALL_MESSAGE_BYTES

    def set_limit(value: str | None) -> None:
        op = (AlterConfigOp.SET, value) if value else (AlterConfigOp.DELETE, None)
        alter_configs(kafka_bootstrap, [
            ConfigResource(ConfigResourceType.BROKER, b, {"message.max.bytes": op})
            for b in brokers
        ])  # fmt: skip

    set_limit(str(SMALL_MESSAGE_BYTES))
    try:
        wait_for(
            lambda: broker_message_max_bytes(kafka_bootstrap) == SMALL_MESSAGE_BYTES,
            "the brokers' new message.max.bytes",
        )
        topic = f"kcsim-sink-auto-{uuid.uuid4().hex[:10]}"
        sink = sink_for(kafka_bootstrap, topic)
        assert sink.max_record_bytes() == SMALL_MESSAGE_BYTES - RECORD_OVERHEAD
        requests, payloads = core_output(PARTITIONS)
        assert sink.send(requests, payloads, may_be_rerun=False) == 0
        assert topic_max_message_bytes(kafka_bootstrap, topic) == SMALL_MESSAGE_BYTES
        values = consume_all(kafka_bootstrap, topic)
        assert max(len(v) for v in values) <= SMALL_MESSAGE_BYTES - RECORD_OVERHEAD
        records = [json.loads(v) for v in values]
        assert max(r["chunks"] for r in records) >= 4
        assert canonical(rebuild_requests(records)) == canonical(joined(requests, payloads))
    finally:
        set_limit(None)
        wait_for(
            lambda: broker_message_max_bytes(kafka_bootstrap) == default,
            "the brokers' message.max.bytes back to its default",
        )


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


@pytest.mark.kafka
def test_a_sink_that_reached_its_broker_waits_out_an_outage(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A broker restarted mid-run (longer than a client's bootstrap timeout) costs the
    job nothing: a sink that has reached its brokers opens its clients again until they
    are back, then sends the batch once."""
    data_dir = tmp_path / "kafka"
    bootstrap = kafka_local.start(data_dir)
    sink = RequestSink(bootstrap, "kcsim-outage")
    try:
        requests, payloads = core_output(20)
        first = payload_records(requests, payloads, sink.max_record_bytes())
        assert sink.send(requests, payloads, may_be_rerun=False) == 0
        sink.close()  # the next batch opens its clients while the broker is away
        kafka_local.stop(data_dir)

        outcome: list[int | BaseException] = []

        def rerun() -> None:
            try:
                outcome.append(sink.send(requests, payloads, may_be_rerun=True))
            except BaseException as error:  # reported by the assertion below
                outcome.append(error)

        sender = threading.Thread(target=rerun)
        sender.start()
        seen = ""
        deadline = time.monotonic() + 90
        while "brokers unreachable" not in seen and time.monotonic() < deadline:
            sender.join(0.5)
            seen += capfd.readouterr().err
        assert "brokers unreachable" in seen and "trying again for" in seen, seen
        assert kafka_local.start(data_dir) == bootstrap
        sender.join(300)
        assert not sender.is_alive()
        # the re-run found every record of the first send and wrote none twice
        assert outcome == [len(first)]
        written = partition_values(bootstrap, "kcsim-outage")
        assert sum(len(v) for v in written.values()) == len(first)
    finally:
        sink.close()
        kafka_local.stop(data_dir)


@pytest.mark.kafka
def test_a_sink_that_never_reached_a_broker_fails_within_the_bootstrap_timeout() -> None:
    """A wrong address is an error, not a wait: the outage wait is only for brokers the
    sink has reached."""
    sink = RequestSink("127.0.0.1:1", "kcsim-nowhere")
    requests, payloads = core_output(5)
    began = time.monotonic()
    with pytest.raises((KafkaTimeoutError, KafkaConnectionError)):
        sink.send(requests, payloads, may_be_rerun=False)
    assert time.monotonic() - began < OUTAGE_SECONDS
