"""`kcsim produce` against the real local broker: what goes in comes back out, in order,
keyed by cluster, values byte for byte."""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from itertools import islice
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from controller.config import Settings
from streaming import cli
from streaming.chaos.generator import ChaosGenerator, ClusterSpec
from streaming.chaos.produce import event_cluster

pytestmark = pytest.mark.kafka
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "events"


def fresh_topic() -> str:
    return f"kcsim-produce-{uuid.uuid4().hex[:10]}"


def consume(bootstrap: str, topic: str, count: int, timeout_s: float = 30.0) -> list:
    """The first `count` records of partition 0 (auto-created topics have one)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=int(timeout_s * 1000),
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        records = []
        for record in consumer:
            records.append(record)
            if len(records) >= count:
                break
        return records
    finally:
        consumer.close()


def expected_lines(files: list[Path]) -> list[tuple[bytes, bytes]]:
    """(key, value) as a reader of the raw bytes expects them: every non-blank line
    without its line end, keyed by its cluster."""
    out = []
    for file in files:
        for line in file.read_bytes().split(b"\n"):
            line = line.removesuffix(b"\r")
            if line.strip(b" \t\r"):
                cluster = event_cluster(line.decode("utf-8", "surrogateescape"))
                out.append((cluster.encode(), line))
    return out


def test_scenario_directory_round_trip(kafka_bootstrap: str) -> None:
    topic = fresh_topic()
    code = cli.main(
        ["produce", "--bootstrap", kafka_bootstrap, "--topic", topic,
         "--scenario", str(EXAMPLES), "--quiet"]
    )  # fmt: skip
    assert code == 0
    expected = expected_lines(sorted(EXAMPLES.glob("*.jsonl")))
    assert len(expected) >= 30  # the examples: every event type
    records = consume(kafka_bootstrap, topic, len(expected))
    assert [r.offset for r in records] == list(range(len(expected)))
    assert [(r.key, r.value) for r in records] == expected


def test_scenario_bad_lines_go_as_they_are(kafka_bootstrap: str, tmp_path: Path) -> None:
    scenario = tmp_path / "odd.jsonl"
    scenario.write_bytes(
        b'{"type":"broker_startup","broker":1,"cluster":"east"}\r\n'
        b"\n"
        b"not json at all\n"
        b'{"type":"broker_startup","broker":2,"cluster":7}\n'
        b'{"type":"broker_failure","broker":1,"cluster":"west","x":"\xff\xfe"}\n'
        b"   \t\n"
        b'{"type":"auto_rebalance_check"}'  # no final newline
    )
    topic = fresh_topic()
    code = cli.main(
        ["produce", "--bootstrap", kafka_bootstrap, "--topic", topic,
         "--scenario", str(scenario), "--quiet"]
    )  # fmt: skip
    assert code == 0
    records = consume(kafka_bootstrap, topic, 5)
    assert [(r.key, r.value) for r in records] == [
        (b"east", b'{"type":"broker_startup","broker":1,"cluster":"east"}'),
        (b"default", b"not json at all"),
        (b"default", b'{"type":"broker_startup","broker":2,"cluster":7}'),
        (b"west", b'{"type":"broker_failure","broker":1,"cluster":"west","x":"\xff\xfe"}'),
        (b"default", b'{"type":"auto_rebalance_check"}'),
    ]


def test_chaos_round_trip_with_rate_and_progress(
    kafka_bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = fresh_topic()
    count, rate = 120, 200.0
    started, started_at = time.monotonic(), time.time()
    code = cli.main(
        ["produce", "--bootstrap", kafka_bootstrap, "--topic", topic, "--chaos",
         "--seed", "4", "--count", str(count), "--rate", str(rate), "--cluster", "prod",
         "--brokers", "4", "--topics", "2", "--partitions", "3", "--rf", "2"]
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert code == 0
    assert elapsed >= (count - 1) / rate  # throttled
    progress = capsys.readouterr().err
    assert f"kcsim produce: {count} events" in progress and "events/s" in progress
    assert progress.splitlines()[-1].startswith(
        f"kcsim produce: done: {count} events sent to {topic} on {kafka_bootstrap} in "
    )
    spec = ClusterSpec("prod", brokers=4, topics=2, partitions=3, rf=2)
    expected = list(islice(ChaosGenerator(4, spec, Settings()).events(), count))
    records = consume(kafka_bootstrap, topic, count)
    assert [r.key for r in records] == [b"prod"] * count
    values = [json.loads(r.value) for r in records]
    # CONTRACT §1 `ts`: the producer's clock when the event was drawn, never decreasing
    stamps = [datetime.fromisoformat(v.pop("ts")).timestamp() for v in values]
    assert stamps == sorted(stamps) and started_at - 1 <= stamps[0] <= stamps[-1] <= time.time()
    assert values == expected
    assert [json.loads(r.value)["seq"] for r in records] == list(range(1, count + 1))


def test_chaos_duration_bounds_the_run(kafka_bootstrap: str) -> None:
    topic = fresh_topic()
    started = time.monotonic()
    code = cli.main(
        ["produce", "--bootstrap", kafka_bootstrap, "--topic", topic, "--chaos",
         "--duration", "1.0", "--rate", "40", "--quiet"]
    )  # fmt: skip
    assert code == 0
    assert time.monotonic() - started < 20
    records = consume(kafka_bootstrap, topic, 1000, timeout_s=5)
    assert 30 <= len(records) <= 41


def test_missing_scenario_is_an_error(tmp_path: Path) -> None:
    code = cli.main(
        ["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t",
         "--scenario", str(tmp_path / "nope.jsonl")]
    )  # fmt: skip
    assert code == 2
