"""`kcsim run` on real local Spark and Delta: parity with the core's own replay, exactly-once
across kill -9, the fleet mode, and the lake inspection commands.

The expected rows come from the core driven as `kcsim replay` drives it
(`controller.replay.event_files.read_events` + `Simulator.apply`); both engines name a line's
`source` "<file name>:<line>" through the same splitter
(`controller.replay.event_files.split_lines`).
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.config import Settings
from controller.parse import parse_event
from controller.replay.event_files import read_events
from controller.simulator import RawEvent, Simulator
from schemas import TABLES
from streaming.metrics import Metrics
from tests.support.corpus import (
    CORPUS,
    KRAFT,
    KRAFT_CORPUS,
    copy_corpus,
    replay_rows,
    simulate,
)
from tests.support.spark.job_process import JobProcess
from tests.support.spark.lake_tables import Rows, assert_same_tables, canonical, lake_rows
from tests.support.spark.spark_session import spark  # noqa: F401  (the session-scoped fixture)

pytestmark = pytest.mark.spark


# ---------------------------------------------------------------------------- helpers


def run_once(
    spark,  # noqa: F811
    source: Path,
    lake: Path,
    *,
    files: int | None = None,
    fleet: bool = False,
    settings: Settings | None = None,
    metrics: Any = None,
) -> list[str]:
    from streaming.job.options import Options
    from streaming.job.query import run
    from streaming.job.sources import FileSource

    lines: list[str] = []
    options = Options(
        settings=settings or Settings(),
        source=FileSource(str(source), files),
        lake=str(lake),
        checkpoint=str(lake / "_checkpoints" / "run"),
        once=True,
        fleet=fleet,
    )
    assert run(spark, options, log=lines.append, metrics=metrics) == 0
    return lines


# ----------------------------------------------------------------------------- parity


def test_corpus_covers_every_event_type_and_bad_lines() -> None:
    from schemas import EVENT_TYPES

    seen = set()
    rejected = 0
    for event in read_events(CORPUS):
        parsed = parse_event(event.raw, event.source)
        if hasattr(parsed, "header"):
            seen.add(parsed.header.type)
        else:
            rejected += 1
    assert seen == set(EVENT_TYPES)
    assert rejected >= 5
    # events carrying `observed`: the divergences parity compares rows of every kind
    fields = {row["field"] for row in replay_rows(CORPUS)["divergences"]}
    assert {"leader", "partition_epoch", "partition", "event"} <= fields


def test_parity_one_batch(spark, tmp_path: Path) -> None:  # noqa: F811
    """The job writes what replay does; a file Spark's listing skips (a hidden name) holds
    an event neither engine reads, and the job says so when it starts."""
    source = copy_corpus(tmp_path / "events")
    (source / "_draft.jsonl").write_text('{"type":"broker_startup","broker":77}\n')
    metrics = Metrics("run")
    log = run_once(spark, source, tmp_path / "lake", metrics=metrics)
    assert log[0] == (
        f"kcsim run: skipped 1 file(s) in {source} that neither replay nor the Spark job "
        "reads (a name starting with '.' or '_', or a copy not finished): _draft.jsonl"
    )
    assert len([line for line in log if line.startswith("batch ")]) == 1
    files = len(list(CORPUS.glob("*.jsonl")))
    assert f"{files}/{files} files" in log[-2]
    expected = replay_rows(source)
    assert 77 not in {row["broker"] for row in expected["brokers"]}
    lake = lake_rows(spark, tmp_path / "lake")
    assert_same_tables(lake, expected)
    # its last line says what it did; a re-run with nothing new says so
    assert log[-1].startswith(
        f"kcsim run: done: 1 batches, {files} files, {len(lake['applied_events'])} events "
        f"applied, {len(lake['rejected_events'])} rejected, {len(lake['divergences'])} "
        f"divergences, {len(lake['violations'])} violations in "
    )
    # what --metrics-port serves: the batch's events and rejections, per cluster
    served = {
        (sample.name, sample.labels.get("cluster")): sample.value
        for family in text_string_to_metric_families(metrics.render())
        for sample in family.samples
    }
    for cluster in {row["cluster"] for row in lake["applied_events"]}:
        applied = sum(1 for row in lake["applied_events"] if row["cluster"] == cluster)
        assert served["kcsim_events_applied_total", cluster] == applied
    assert sum(v for (n, _), v in served.items() if n == "kcsim_events_rejected_total") == len(
        lake["rejected_events"]
    )
    assert served["kcsim_batch_duration_seconds_count", None] == 1
    again = run_once(spark, source, tmp_path / "lake")
    assert again[-1] == f"kcsim run: nothing new ({files} files already applied)"


def test_parity_many_batches_and_lake_inspection(spark, tmp_path: Path) -> None:  # noqa: F811
    source = copy_corpus(tmp_path / "events", lines_per_file=13)
    lake = tmp_path / "lake"
    log = run_once(spark, source, lake, files=1)
    batches = [line for line in log if line.startswith("batch ")]
    assert len(batches) == len(list(source.iterdir())) > 5
    expected = replay_rows(source)
    assert_same_tables(lake_rows(spark, lake), expected)

    # time travel: partition_state's first tagged version is the state after batch 0
    from streaming.insight.state import COUNTED, show_state, write_counts, write_state
    from streaming.job.sources import split_lines

    first = source / sorted(os.listdir(source))[0]
    after_first = simulate(list(split_lines(first.read_bytes(), first.name)))
    out = io.StringIO()
    show_state(spark, str(lake), "1", None, out)
    header, text = out.getvalue().split("\n", 1)
    assert header.startswith("as of 1: ")

    def first_batch_rows(table: str, version: int | None, cluster: str | None, columns: Any) -> Any:
        names = [c for c in TABLES[table].column_names if columns is None or c in columns]
        return [{c: r[c] for c in names} for r in after_first[table]], names

    first_state = io.StringIO()
    write_state(first_batch_rows, {}, None, None, first_state)
    # then the result tables' counts after batch 0
    write_counts({t: len(after_first[t]) for t in COUNTED}, first_state)
    assert text == first_state.getvalue()  # exactly the state after batch 0
    now = io.StringIO()
    show_state(spark, str(lake), None, None, now)
    assert now.getvalue() != text  # ... which later batches changed
    latest = io.StringIO()
    show_state(spark, str(lake), None, "east", latest)
    assert "clicks" in latest.getvalue() and "orders" not in latest.getvalue()

    # history of orders-0: every change of leader/epoch shows, with its event id
    from streaming.insight.history import partition_history

    changes = partition_history(spark, str(lake), "default", "orders", 0)
    epochs = [c["leader_epoch"] for c in changes if c["change"] != "delete"]
    assert epochs == sorted(epochs) and len(epochs) >= 3
    final = next(
        r for r in expected["partition_state"] if (r["topic"], r["partition"]) == ("orders", 0)
    )
    assert changes[-1]["leader_epoch"] == final["leader_epoch"]
    assert changes[-1]["event_id"] == final["last_event_id"]
    assert all(c["events"] for c in changes)


def test_parity_under_kraft_every_table(spark, tmp_path: Path) -> None:  # noqa: F811
    """CONTRACT §5: the KRaft engine in the job writes what replay does, metadata_records,
    the ELR columns, broker statuses and the engine's state in `clusters` included (the
    corpus's reach: tests/controller/test_engine_dispatch.py)."""
    source = copy_corpus(tmp_path / "events", corpus=KRAFT_CORPUS)
    log = run_once(spark, source, tmp_path / "lake", settings=KRAFT)
    assert len([line for line in log if line.startswith("batch ")]) == 1
    expected = replay_rows(source, KRAFT)
    assert len(expected["metadata_records"]) > 100 and not expected["controller_requests"]
    assert_same_tables(lake_rows(spark, tmp_path / "lake"), expected)


def test_two_once_runs_over_a_split_log_under_kraft_equal_one(spark, tmp_path: Path) -> None:  # noqa: F811
    """A restarted job continues a KRaft cluster from the lake (its `kraft_state`, the
    health counts, the seen event ids) as one run would: the second `--once` run takes the
    files that arrived after the first one stopped."""
    source = copy_corpus(tmp_path / "events", lines_per_file=9, corpus=KRAFT_CORPUS)
    later = tmp_path / "later"
    later.mkdir()
    files = sorted(source.iterdir())
    for path in files[len(files) // 2 :]:
        path.rename(later / path.name)  # (a rename keeps the modification time)
    lake = tmp_path / "lake"
    first = run_once(spark, source, lake, files=2, settings=KRAFT)
    assert len([line for line in first if line.startswith("batch ")]) >= 2
    for path in sorted(later.iterdir()):
        path.rename(source / path.name)
    second = run_once(spark, source, lake, files=2, settings=KRAFT)
    assert len([line for line in second if line.startswith("batch ")]) >= 2
    assert_same_tables(lake_rows(spark, lake), replay_rows(source, KRAFT))


def shuffle_mtimes(files: list[Path], seed: int) -> None:
    """Modification times in an order unrelated to the names, some of them equal (files
    copied in one go share one), as Spark's file source would take them out of order."""
    times = [float(i // 2) for i in range(len(files))]
    random.Random(seed).shuffle(times)
    start = time.time() - 1000
    for path, offset in zip(files, times, strict=True):
        os.utime(path, (start + offset, start + offset))


def test_parity_batches_of_one_file_whatever_their_mtimes_and_across_a_restart(
    spark,  # noqa: F811
    tmp_path: Path,
) -> None:
    """CONTRACT §1: files apply in name order. Batches of one file over files whose
    modification times are shuffled, the query restarted halfway with more files copied
    in, leave what replay of the whole directory leaves; a file copied later whose name
    sorts before one applied is rejected line by line, never applied."""
    source = copy_corpus(tmp_path / "events", lines_per_file=13)
    files = sorted(source.iterdir())
    assert len(files) > 6
    held = tmp_path / "held"
    held.mkdir()
    later = files[len(files) // 2 :]
    for path in later:
        path.rename(held / path.name)
    shuffle_mtimes(files[: len(files) // 2], seed=1)
    lake = tmp_path / "lake"
    first = run_once(spark, source, lake, files=1)
    assert len([line for line in first if line.startswith("batch ")]) == len(files) // 2

    for path in later:  # copied in after the restart, newest names oldest
        (held / path.name).rename(path)
    shuffle_mtimes(later, seed=2)
    second = run_once(spark, source, lake, files=1)
    assert len([line for line in second if line.startswith("batch ")]) == len(later)
    expected = replay_rows(source)
    assert_same_tables(lake_rows(spark, lake), expected)

    # a late file: its name sorts before files already applied
    late = source / "part-000a.jsonl"
    late.write_text(
        '{"type":"broker_startup","broker":77}\n\n{"type":"broker_failure","broker":1}\n'
    )
    run_once(spark, source, lake, files=1)
    rows = lake_rows(spark, lake)
    last = files[-1].name
    reason = (
        f"event file part-000a.jsonl arrived after {last} had been applied: files apply in "
        f"name order, so it is not applied (give it a name that sorts after {last} to apply "
        "its events)"
    )
    new = canonical(rows["rejected_events"]) - canonical(expected["rejected_events"])
    assert sorted(json.loads(r)["source"] for r in new.elements()) == [
        "part-000a.jsonl:1",
        "part-000a.jsonl:3",
    ]
    assert {json.loads(r)["reason"] for r in new.elements()} == {reason}
    for table in TABLES:  # nothing else changed
        if table != "rejected_events":
            assert canonical(rows[table]) == canonical(expected[table]), table


# ------------------------------------------------------------------------------ fleet


def test_fleet_equals_per_cluster_replays(spark, tmp_path: Path) -> None:  # noqa: F811
    # two batches: the second rebuilds its clusters from what the first wrote
    source = copy_corpus(tmp_path / "events", lines_per_file=46)
    lake = tmp_path / "lake"
    run_once(spark, source, lake, files=1, fleet=True)
    events = list(read_events(source))
    by_cluster: dict[str | None, list[RawEvent]] = {}
    for event in events:
        parsed = parse_event(event.raw, event.source)
        cluster = parsed.header.cluster if hasattr(parsed, "header") else parsed.cluster
        by_cluster.setdefault(cluster, []).append(event)
    assert {"default", "east", "west"} <= set(by_cluster)
    expected: Rows = {name: [] for name in TABLES}
    for cluster_events in by_cluster.values():
        for name, rows in simulate(cluster_events).items():
            expected[name].extend(rows)
    assert_same_tables(lake_rows(spark, lake), expected)


# ------------------------------------------------------------------------ exactly once


def test_kill_9_or_sigterm_mid_stream_then_restart_writes_everything_once(
    spark,  # noqa: F811
    tmp_path: Path,
) -> None:
    source = copy_corpus(tmp_path / "events", lines_per_file=11)
    lake = tmp_path / "lake"
    args = [
        "--source",
        f"file:{source}",
        "--lake",
        str(lake),
        "--max-files-per-trigger",
        "1",
        "--trigger-seconds",
        "0.2",
    ]
    # kill after n more batches plus a delay: inside a batch's writes, between batches
    for batches, delay in ((1, 0.6), (1, 0.0), (2, 1.5)):
        job = JobProcess(args)
        job.wait_batches(batches)
        time.sleep(delay)
        job.kill()
    # the last run takes the stream to its end (one file per batch: batch ids 0..files-1),
    # then a service manager's SIGTERM (or Ctrl-C's SIGINT: the same handler) stops it
    # cleanly: status 0, the run's summary, no traceback
    last = f"batch {len(list(source.iterdir())) - 1}: "
    job = JobProcess(args)
    job.wait_until(
        lambda: any(line.startswith(last) and " events, " in line for line in job.lines),
        timeout=600,
    )
    job.proc.send_signal(signal.SIGTERM)
    assert job.finish(timeout=240) == 0, job.tail()
    assert any(line.startswith("kcsim run: stopped: ") for line in job.lines), job.tail()
    assert not any("Traceback" in line for line in job.lines), job.tail()
    assert_same_tables(lake_rows(spark, lake), replay_rows(source))
    shutil.rmtree(lake / "_checkpoints")  # not compared; keeps tmp small


# ------------------------------------------------------------------- Kafka in and out


@pytest.mark.kafka
def test_kafka_source_and_request_sink(spark, kafka_bootstrap: str, tmp_path: Path) -> None:  # noqa: F811
    """Records (a tombstone among them) in, every request out as a keyed JSON record
    whose `request_id` is stable and unique."""
    import uuid

    from kafka import KafkaConsumer, KafkaProducer

    from controller.zk.request_log import joined
    from streaming.job.options import Options
    from streaming.job.query import run
    from streaming.job.request_sink import RequestSink, rebuild_requests, record_id
    from streaming.job.sources import KafkaSource

    topic, out_topic = f"kcsim-in-{uuid.uuid4().hex[:8]}", f"kcsim-out-{uuid.uuid4().hex[:8]}"
    lines = [e.raw for e in read_events(CORPUS / "01-startup.jsonl")]
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for line in lines:
        producer.send(topic, key=b"default", value=line.encode("utf-8"), partition=0)
    producer.send(topic, key=b"default", value=None, partition=0)
    producer.flush()
    producer.close()
    lake = tmp_path / "lake"
    options = Options(
        settings=Settings(),
        source=KafkaSource(kafka_bootstrap, topic),
        lake=str(lake),
        checkpoint=str(lake / "_checkpoints" / "run"),
        once=True,
        sink=RequestSink(kafka_bootstrap, out_topic),
    )
    assert run(spark, options, log=lambda line: None) == 0
    rows = lake_rows(spark, lake)
    expected = simulate([RawEvent(line, f"{topic}/0/{i}") for i, line in enumerate(lines)])
    expected["rejected_events"].append(
        {
            "cluster": None,
            "raw": "",
            "reason": next(r["reason"] for r in simulate([RawEvent("", "x")])["rejected_events"]),
            "source": f"{topic}/0/{len(lines)}",
        }
    )
    assert_same_tables(rows, expected)

    consumer = KafkaConsumer(
        out_topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    records = [(r.key.decode(), json.loads(r.value)) for r in consumer]
    consumer.close()
    # one record per request body (none of these needs chunks), rebuilding every request
    assert len(records) == len(rows["request_payloads"]) < len(rows["controller_requests"])
    requests = joined(rows["controller_requests"], rows["request_payloads"])
    assert canonical(rebuild_requests(v for _, v in records)) == canonical(requests)
    assert len({v["record_id"] for _, v in records}) == len(records)
    for key, value in records:
        assert key == value["cluster"] and value["record_id"] == record_id(value)
        assert (value["chunk"], value["chunks"]) == (0, 1)


@pytest.mark.kafka
def test_kraft_sink_produces_every_metadata_record_once(
    spark,  # noqa: F811
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    """`kcsim run --engine kraft --sink`: the topic holds the lake's metadata_records, one
    Kafka record each, keyed by cluster, each cluster's in the controller's order, over
    batches of the KRaft corpus."""
    import uuid

    from kafka import KafkaConsumer

    from streaming.job.options import Options
    from streaming.job.query import run
    from streaming.job.request_sink import METADATA_COLUMNS, RequestSink
    from streaming.job.sources import FileSource

    topic = f"kcsim-records-{uuid.uuid4().hex[:8]}"
    source = copy_corpus(tmp_path / "events", lines_per_file=20, corpus=KRAFT_CORPUS)
    lake = tmp_path / "lake"
    lines: list[str] = []
    options = Options(
        settings=KRAFT,
        source=FileSource(str(source), 2),
        lake=str(lake),
        checkpoint=str(lake / "_checkpoints" / "run"),
        once=True,
        sink=RequestSink(kafka_bootstrap, topic),
    )
    assert run(spark, options, log=lines.append) == 0
    assert all(" metadata records, " in line for line in lines if line.startswith("batch "))
    rows = lake_rows(spark, lake)["metadata_records"]
    assert len(rows) > 100
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    records = [(r.key.decode(), json.loads(r.value)) for r in consumer]
    consumer.close()
    assert canonical([v for _, v in records]) == canonical(
        [{c: r[c] for c in METADATA_COLUMNS} for r in rows]
    )
    assert all(key == value["cluster"] for key, value in records)
    for cluster in {key for key, _ in records}:  # in order: seq, then record_seq
        mine = [(v["seq"], v["record_seq"]) for k, v in records if k == cluster]
        assert mine == sorted(mine)


@pytest.mark.kafka
def test_sink_rerun_produces_only_what_an_interrupted_send_left_out(
    kafka_bootstrap: str,
) -> None:
    """A batch re-run after a crash in the middle of its send (no request
    written twice): the records already in the topic are not produced again, and the rest
    follow them in order."""
    import uuid

    from kafka import KafkaAdminClient, KafkaConsumer
    from kafka.admin import NewTopic

    from streaming.job.request_sink import RequestSink, payload_records

    topic = f"kcsim-sink-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    admin.close()
    events = list(read_events(CORPUS / "01-startup.jsonl"))
    half = len(events) // 2
    first = simulate(events[:half])
    earlier = (first["controller_requests"], first["request_payloads"])
    simulator = Simulator(Settings())
    simulator.apply(events[:half])
    output = simulator.apply(events[half:]).appends
    batch = (list(output["controller_requests"]), list(output["request_payloads"]))
    assert len(earlier[1]) > 5 and len(batch[1]) > 5
    sink = RequestSink(kafka_bootstrap, topic)
    try:
        assert sink.send(*earlier, may_be_rerun=True) == 0  # nothing there yet
        cut = len(batch[1]) // 3
        assert sink.send(batch[0], batch[1][:cut], may_be_rerun=False) == 0  # the crash
        assert sink.send(*batch, may_be_rerun=True) == cut  # the re-run
    finally:
        sink.close()

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    records = sorted((r.partition, r.offset, r.key.decode(), r.value.decode()) for r in consumer)
    consumer.close()
    limit = sink.max_record_bytes()
    wanted = payload_records(*earlier, limit) + payload_records(*batch, limit)
    assert sorted(v for *_, v in records) == sorted(r.value for r in wanted)
    for key in {r.key for r in wanted}:  # a cluster's records in order, in one partition
        assert [v for _, _, k, v in records if k == key] == [
            r.value for r in wanted if r.key == key
        ]
