"""End to end through a real broker: `kcsim produce` -> Kafka ->
`kcsim run --source kafka:...` -> Delta, compared table by table with `kcsim replay` of
the same events; then the failure path: the broker restarts mid-run and the job is
killed with SIGKILL and restarted, and still no event is lost and no request is written
twice, neither to the lake nor to the request sink topic.

"The same events" are the topic's records as they stand, read back after producing, in
offset order, written one per line to a file for `kcsim replay` (so a record produced
twice would show up in both). `kcsim replay` names a line "<file>:<line>", the job names
a record "<topic>/<partition>/<offset>"; the expected `rejected_events.source` is
translated (line n is offset n - 1, one partition).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections import Counter
from itertools import islice
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from controller.zk.request_log import joined
from schemas import TABLES
from streaming.chaos.generator import ChaosGenerator, ClusterSpec
from streaming.chaos.produce import (
    Limits,
    ProduceStats,
    Record,
    event_record,
    make_producer,
    produce,
    scenario_records,
)
from streaming.job.request_sink import rebuild_requests
from streaming.local_clusters import kafka_local
from tests.support.spark.job_process import ROOT, JobProcess, job_env
from tests.support.spark.lake_tables import Rows, assert_same_tables, canonical, lake_rows
from tests.support.spark.spark_session import spark  # noqa: F401  (the session-scoped fixture)

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

CORPUS = ROOT / "tests" / "data" / "corpus"
CHUNK = 80  # chaos events per production round of the failure path


# ---------------------------------------------------------------------------- helpers


def fresh_topic() -> str:
    return f"kcsim-e2e-{uuid.uuid4().hex[:10]}"


def send(bootstrap: str, topic: str, records: list[Record]) -> None:
    producer = make_producer(bootstrap, client_id="kcsim-e2e")
    try:
        stats = produce(producer, topic, iter(records))
    finally:
        producer.close()
    assert stats.sent == len(records) and stats.failed == 0


def chaos_records(seed: int, count: int, cluster: str = "chaos") -> list[Record]:
    spec = ClusterSpec(cluster, brokers=5, topics=3, partitions=4, rf=3)
    return [event_record(e) for e in islice(ChaosGenerator(seed, spec).events(), count)]


def topic_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every record value of partition 0, in offset order (offsets checked contiguous)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        end = consumer.end_offsets([partition])[partition]
        values: list[bytes] = []
        for record in consumer:
            assert record.offset == len(values)
            values.append(record.value)
            if len(values) == end:
                break
        assert len(values) == end
        return values
    finally:
        consumer.close()


def replay_of_topic(bootstrap: str, topic: str, work: Path) -> Rows:
    """`kcsim replay` of the topic's records; sources translated to Kafka coordinates."""
    values = topic_values(bootstrap, topic)
    events = work / "events.jsonl"
    events.write_bytes(b"".join(v + b"\n" for v in values))
    out = work / "replay"
    subprocess.run(
        [sys.executable, "-m", "streaming.cli", "replay", str(events), "--out", str(out),
         "--quiet"],
        cwd=ROOT, env=job_env(), check=False, timeout=120,
    )  # fmt: skip
    rows: Rows = {}
    for name in TABLES:
        text = (out / f"{name}.jsonl").read_text(encoding="utf-8")
        rows[name] = [json.loads(line) for line in text.splitlines()]
    for row in rows["rejected_events"]:
        _, _, line = row["source"].rpartition(":")
        row["source"] = f"{topic}/0/{int(line) - 1}"
    return rows


def assert_written_once(rows: Rows) -> None:
    requests = Counter(
        (r["cluster"], r["event_id"], r["request_seq"]) for r in rows["controller_requests"]
    )
    assert [key for key, n in requests.items() if n > 1] == []
    payloads = Counter(
        (r["cluster"], r["event_id"], r["payload"]) for r in rows["request_payloads"]
    )
    assert [key for key, n in payloads.items() if n > 1] == []
    applied = Counter((r["cluster"], r["event_id"]) for r in rows["applied_events"])
    assert [key for key, n in applied.items() if n > 1] == []


def job_args(bootstrap: str, topic: str, lake: Path, *extra: str) -> list[str]:
    return ["--source", f"kafka:{bootstrap}/{topic}", "--lake", str(lake), *extra]


# ------------------------------------------------------------------------------ tests


def test_produced_events_through_the_job_match_replay(
    spark,  # noqa: F811
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """Every event type, bad lines among them, and a second cluster, in one batch (the
    failure path below runs many)."""
    topic = fresh_topic()
    records = [*scenario_records(CORPUS), *chaos_records(seed=3, count=150)]
    send(kafka_bootstrap, topic, records)
    lake = tmp_path / "lake"
    job = JobProcess(job_args(kafka_bootstrap, topic, lake, "--once"))
    assert job.finish() == 0, job.tail()
    assert job.events() == len(records), job.tail()
    expected = replay_of_topic(kafka_bootstrap, topic, tmp_path)
    assert expected["rejected_events"], "the corpus holds bad lines"
    assert {r["cluster"] for r in expected["applied_events"]} >= {"chaos"}
    actual = lake_rows(spark, lake)
    assert_same_tables(actual, expected)
    assert_written_once(actual)


@pytest.fixture
def own_broker(tmp_path: Path):
    """A broker of this test's own, so it can be stopped and started again."""
    data_dir = tmp_path / "kafka"
    bootstrap = kafka_local.start(data_dir)
    try:
        yield data_dir, bootstrap
    finally:
        kafka_local.stop(data_dir)


def test_broker_restart_and_job_kill_lose_nothing_and_write_nothing_twice(
    spark,  # noqa: F811
    own_broker: tuple[Path, str],
    tmp_path: Path,
) -> None:
    data_dir, bootstrap = own_broker
    topic, sink_topic = fresh_topic(), fresh_topic()
    lake = tmp_path / "lake"
    events = chaos_records(seed=8, count=3 * CHUNK)
    chunks = [events[i : i + CHUNK] for i in range(0, len(events), CHUNK)]
    sink = ["--sink", f"kafka:{bootstrap}/{sink_topic}"]
    args = job_args(bootstrap, topic, lake, "--trigger-seconds", "0.5", *sink)
    small_batches = ["--max-offsets-per-trigger", str(CHUNK // 2)]
    send(bootstrap, topic, chunks[0])
    job = JobProcess([*args, *small_batches])
    try:
        job.wait_events(CHUNK // 2)

        # The broker goes away mid-run while a producer is sending; the producer
        # (idempotent, retrying) holds its records until the broker is back on the same
        # address, then delivers them once each, in order.
        # The outage is placed by the producer's progress, not by the clock: the broker
        # stops once a quarter of the chunk is handed to the producer and comes back once
        # another quarter was handed over while it was down.
        producer = make_producer(bootstrap, client_id="kcsim-e2e-outage")
        outcome: list[ProduceStats] = []
        handed = {n: threading.Event() for n in (CHUNK // 4, CHUNK // 2)}

        def on_send(sent: int, _record: Record) -> None:
            if sent in handed:
                handed[sent].set()

        sender = threading.Thread(
            target=lambda: outcome.append(
                produce(producer, topic, iter(chunks[1]), Limits(rate=40.0), on_send=on_send)
            )
        )
        sender.start()
        assert handed[CHUNK // 4].wait(60)
        kafka_local.stop(data_dir)
        assert handed[CHUNK // 2].wait(60)
        assert kafka_local.start(data_dir) == bootstrap
        sender.join(150)
        producer.close()
        assert not sender.is_alive()
        assert outcome[0].sent == len(chunks[1]) and outcome[0].failed == 0

        # The job survived the outage and goes on; killed while it still has work (the
        # last small batch is being planned or written: the trigger is 0.5 s).
        job.wait_events(CHUNK + CHUNK // 2, timeout=300)
    finally:
        job.kill()

    # Records produced while no job runs, a few of them replays of earlier events (a
    # producer retrying from scratch): the core drops those as duplicates.
    send(bootstrap, topic, [*chunks[0][50:55], *chunks[2]])
    final = JobProcess([*args, "--once"])  # the batch cut short, then the rest in one
    assert final.finish(timeout=400) == 0, final.tail()

    expected = replay_of_topic(bootstrap, topic, tmp_path)
    assert len(expected["applied_events"]) == 3 * CHUNK  # every distinct event, once
    duplicates = [r for r in expected["rejected_events"] if "duplicate" in r["reason"]]
    assert len(duplicates) == 5
    actual = lake_rows(spark, lake)
    assert_same_tables(actual, expected)
    assert_written_once(actual)
    # The sink holds every request of the lake once (a re-run batch sent only the rest).
    records = [json.loads(v) for v in topic_values(bootstrap, sink_topic)]
    ids = Counter(r["record_id"] for r in records)
    assert [key for key, n in ids.items() if n > 1] == []
    lake_requests = joined(actual["controller_requests"], actual["request_payloads"])
    assert canonical(rebuild_requests(records)) == canonical(lake_requests)
