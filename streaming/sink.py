"""The Kafka request sink (`kcsim run --sink kafka:HOST:PORT/TOPIC`): each controller
request as one JSON record keyed "<cluster>:<broker>", so a broker's requests stay in
one partition and in order.

Effectively once across restarts. Spark's Kafka writer has no transactions, and a batch
re-run after a crash may already have produced some or all of its records (the crash
came after the Delta commits, during or after the send). Every record carries its
request's `cluster`, `event_id` and `request_seq` (and `request_id`, the three joined by
':'), which together identify it and are stable across re-runs (an event id is applied
once per cluster). So a re-run batch whose requests already
reached the lake (the sink is written after it) first reads back the tail of each
partition of the topic and produces only the requests not found there. The tail is as
long as the batch has requests: a batch's earlier records are the last ones of each
partition, as long as this job is the topic's only producer. The writer's producer is
idempotent (the Kafka client's default), so what an interrupted send left is a prefix of
each partition's share, and the rest follows it in order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from kafka import KafkaConsumer, TopicPartition
from pyspark.sql import SparkSession

READ_BACK_SECONDS = 60.0


def request_id(row: dict[str, Any]) -> str:
    return f"{row['cluster']}:{row['event_id']}:{row['request_seq']}"


def request_record(row: dict[str, Any]) -> dict[str, Any]:
    return {"request_id": request_id(row), **row}


RequestKey = tuple[object, object, object]


def request_key(row: dict[str, Any]) -> RequestKey:
    """What identifies a request without ambiguity (cluster names and event ids may hold
    the ':' that `request_id` joins them with)."""
    return (row.get("cluster"), row.get("event_id"), row.get("request_seq"))


@dataclass(frozen=True, slots=True)
class KafkaSink:
    bootstrap: str
    topic: str

    def send(
        self, spark: SparkSession, requests: Sequence[dict[str, Any]], may_be_rerun: bool
    ) -> int:
        """Produce `requests` (a batch's, in order); with `may_be_rerun`, skip those an
        earlier run of the batch already produced. Returns how many were skipped."""
        if not requests:
            return 0
        skipped = 0
        if may_be_rerun:
            produced = self.produced_keys(window=len(requests))
            kept = [r for r in requests if request_key(r) not in produced]
            skipped = len(requests) - len(kept)
            requests = kept
        if requests:
            self._write(spark, requests)
        return skipped

    def _write(self, spark: SparkSession, requests: Sequence[dict[str, Any]]) -> None:
        keys = [f"{r['cluster']}:{r['broker']}" for r in requests]
        values = [json.dumps(request_record(r), separators=(",", ":")) for r in requests]
        data = pa.table(
            {"key": pa.array(keys, pa.string()), "value": pa.array(values, pa.string())}
        )
        (
            spark.createDataFrame(data)
            .coalesce(1)  # one producer, so each partition gets its records in order
            .write.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", self.topic)
            .save()
        )

    def produced_keys(self, window: int) -> set[RequestKey]:
        """The requests among the last `window` records of every partition of the
        topic (none if the topic does not exist yet)."""
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            group_id=None,
            client_id="kcsim-sink-read-back",
        )
        try:
            if self.topic not in consumer.topics():
                return set()
            partitions = [
                TopicPartition(self.topic, p)
                for p in sorted(consumer.partitions_for_topic(self.topic) or ())
            ]
            consumer.assign(partitions)
            ends = consumer.end_offsets(partitions)
            begins = consumer.beginning_offsets(partitions)
            pending: dict[TopicPartition, int] = {}
            for tp in partitions:
                start = max(begins[tp], ends[tp] - window)
                if start < ends[tp]:
                    consumer.seek(tp, start)
                    pending[tp] = ends[tp]
            return _read_keys(consumer, pending, self.topic)
        finally:
            consumer.close()


def _read_keys(
    consumer: KafkaConsumer, pending: dict[TopicPartition, int], topic: str
) -> set[RequestKey]:
    """Our requests among each partition's records up to its end offset in `pending`
    (emptied as partitions are read to the end)."""
    found: set[RequestKey] = set()
    deadline = time.monotonic() + READ_BACK_SECONDS
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"could not read back the last records of {topic!r} within "
                f"{READ_BACK_SECONDS:.0f} s (needed to avoid producing requests twice)"
            )
        for tp, records in consumer.poll(timeout_ms=1000).items():
            for record in records:
                if record.offset < pending.get(tp, -1):
                    found.update(_request_key_of(record.value))
        for tp in list(pending):
            if consumer.position(tp) >= pending[tp]:
                del pending[tp]
    return found


def _request_key_of(value: bytes | None) -> list[RequestKey]:
    """The record's request, if it is one of ours."""
    try:
        parsed = json.loads(value) if value else None
    except (ValueError, RecursionError):
        return []
    if isinstance(parsed, dict) and isinstance(parsed.get("request_id"), str):
        return [request_key(parsed)]
    return []
