"""The Kafka request sink (`kcsim run --sink kafka:HOST:PORT/TOPIC`): each request body
as JSON records keyed "<cluster>", so a cluster's records stay in one partition and in
order (and so do each broker's requests).

A record is one `request_payloads` row with the `controller_requests` rows that carry it
as `recipients` (CONTRACT §2: an UpdateMetadata of every partition to every broker is one
body, so one record rather than one per broker). None is over what the topic and the
producer accept (the topic's `max.message.bytes`, read from the broker, and the
producer's `max.request.size`): a body too big for one record has its `partitions` split
into `chunks` records, `chunk` 0 to `chunks - 1`, each carrying everything else; a
consumer concatenates their partitions in chunk order (`rebuild_requests`).

Effectively once across restarts. Spark's Kafka writer has no transactions, and a batch
re-run after a crash may already have produced some or all of its records (the crash
came after the Delta commits, during or after the send). Every record carries its
`cluster`, `event_id`, `payload` and `chunk` (and `record_id`, the four joined by ':'),
which together identify it and are stable across re-runs (an event id is applied once
per cluster). So a re-run batch whose requests already reached the lake (the sink is
written after it) first reads back the tail of each partition of the topic and produces
only the records not found there. The tail is as long as the batch has records: a
batch's earlier records are the last ones of each partition, as long as this job is the
topic's only producer. The writer's producer is idempotent (the Kafka client's default),
so what an interrupted send left is a prefix of each partition's share, and the rest
follows it in order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from pyspark.sql import SparkSession

from streaming.kafka_security import KafkaClientConfig

READ_BACK_SECONDS = 60.0
# What a record may weigh when the topic does not say (Kafka's message.max.bytes default),
# and the producer's own limit (max.request.size, set on the writer so it is known).
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
PRODUCER_MAX_REQUEST_SIZE = 1_048_576
# Room for what Kafka adds around a value: a record batch's header (61 bytes) and the
# record's framing (lengths, offsets, timestamp: under 30 bytes), with some to spare.
RECORD_OVERHEAD = 512

Row = dict[str, Any]
RecordKey = tuple[object, object, object, object]


class SinkRecord(NamedTuple):
    key: str  # "<cluster>"
    value: str  # the JSON record
    ident: RecordKey  # record_key of the value


def record_id(record: Row) -> str:
    return f"{record['cluster']}:{record['event_id']}:{record['payload']}:{record['chunk']}"


def record_key(record: Row) -> RecordKey:
    """What identifies a record without ambiguity (cluster names and event ids may hold
    the ':' that `record_id` joins them with)."""
    return (
        record.get("cluster"),
        record.get("event_id"),
        record.get("payload"),
        record.get("chunk"),
    )


def payload_records(
    requests: Iterable[Row], payloads: Iterable[Row], max_bytes: int
) -> list[SinkRecord]:
    """A batch's records: each payload with its recipients, in the order sent, split into
    chunks of its partitions where one record would be over `max_bytes` (JSON text, ASCII:
    one byte a character)."""
    recipients: dict[tuple[object, ...], list[Row]] = {}
    epochs: dict[tuple[object, ...], object] = {}
    for request in requests:
        body = (request["cluster"], request["event_id"], request["payload"])
        recipients.setdefault(body, []).append(
            {
                "broker": request["broker"],
                "request_seq": request["request_seq"],
                "delivered": request["delivered"],
            }
        )
        epochs[body] = request["controller_epoch"]
    records: list[SinkRecord] = []
    for payload in payloads:
        body = (payload["cluster"], payload["event_id"], payload["payload"])
        head = {
            "record_id": "",
            "cluster": payload["cluster"],
            "event_id": payload["event_id"],
            "seq": payload["seq"],
            "payload": payload["payload"],
            "type": payload["type"],
            "controller_epoch": epochs.get(body),
            "ts": payload["ts"],
            "recipients": recipients.get(body, []),
            "live_brokers": payload["live_brokers"],
            "chunk": 0,
            "chunks": 1,
        }
        entries = [json.dumps(p, separators=_COMPACT) for p in payload["partitions"]]
        records.extend(_chunked(head, entries, max_bytes))
    return records


_COMPACT = (",", ":")
_PARTITIONS_TAIL = ',"partitions":[]}'


def _chunked(head: Row, entries: list[str], max_bytes: int) -> Iterator[SinkRecord]:
    """`head` with its `entries` (JSON texts of partitions) in as few records as fit."""
    # the head at its longest: chunk numbers never exceed the entries' count
    widest = max(1, len(entries))
    probe = {**head, "record_id": record_id({**head, "chunk": widest}), "chunks": widest}
    key = str(head["cluster"])
    # the key counts against the topic's limit too (cluster names have no length limit);
    # the value is ASCII (json.dumps escapes the rest), so its characters are its bytes
    room = (
        max_bytes
        - len(key.encode("utf-8"))
        - len(json.dumps(probe, separators=_COMPACT))
        - len(_PARTITIONS_TAIL)
    )
    groups: list[list[str]] = [[]]
    used = 0
    for entry in entries:
        if len(entry) > room:
            raise ValueError(
                f"a partition of request {head['cluster']}:{head['event_id']} payload "
                f"{head['payload']} takes {len(entry)} bytes as JSON, more than a record "
                f"of the sink topic can hold ({max_bytes} bytes with its other fields)"
            )
        extra = len(entry) + (1 if groups[-1] else 0)
        if used + extra > room:
            groups.append([])
            used, extra = 0, len(entry)
        groups[-1].append(entry)
        used += extra
    for chunk, group in enumerate(groups):
        fields = {**head, "chunk": chunk, "chunks": len(groups)}
        fields["record_id"] = record_id(fields)
        text = json.dumps(fields, separators=_COMPACT)
        value = f'{text[:-1]},"partitions":[{",".join(group)}]}}'
        yield SinkRecord(key, value, record_key(fields))


def rebuild_requests(records: Iterable[Row]) -> list[Row]:
    """What a consumer does: the requests of the sink's records (parsed JSON), one dict per
    request with the columns of controller_requests and its body's `partitions` and
    `live_brokers` (a chunked body's partitions concatenated in chunk order). Raises
    ValueError when a body misses a chunk."""
    bodies: dict[tuple[object, ...], dict[int, Row]] = {}
    for record in records:
        body = (record["cluster"], record["event_id"], record["payload"])
        bodies.setdefault(body, {})[record["chunk"]] = record
    requests: list[Row] = []
    for body, chunks in bodies.items():
        first = chunks[0] if 0 in chunks else next(iter(chunks.values()))
        if sorted(chunks) != list(range(first["chunks"])):
            raise ValueError(f"payload {body} has chunks {sorted(chunks)} of {first['chunks']}")
        partitions = [p for i in range(first["chunks"]) for p in chunks[i]["partitions"]]
        for recipient in first["recipients"]:
            requests.append(
                {
                    "cluster": first["cluster"],
                    "controller_epoch": first["controller_epoch"],
                    "event_id": first["event_id"],
                    "seq": first["seq"],
                    "request_seq": recipient["request_seq"],
                    "type": first["type"],
                    "broker": recipient["broker"],
                    "delivered": recipient["delivered"],
                    "payload": first["payload"],
                    "ts": first["ts"],
                    "partitions": partitions,
                    "live_brokers": first["live_brokers"],
                }
            )
    return requests


@dataclass(frozen=True, slots=True)
class KafkaSink:
    bootstrap: str
    topic: str
    client: KafkaClientConfig = field(default_factory=KafkaClientConfig)
    # the topic's record limit once read (it is read again while the topic is missing)
    _limit: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def send(
        self,
        spark: SparkSession,
        requests: Sequence[Row],
        payloads: Sequence[Row],
        may_be_rerun: bool,
    ) -> int:
        """Produce the records of a batch's `requests` and their `payloads` (in order); with
        `may_be_rerun`, skip those an earlier run of the batch already produced. Returns
        how many records were skipped."""
        if not payloads:
            return 0
        records = payload_records(requests, payloads, self.max_record_bytes())
        skipped = 0
        if may_be_rerun:
            produced = self.produced_keys(window=len(records))
            kept = [r for r in records if r.ident not in produced]
            skipped = len(records) - len(kept)
            records = kept
        if records:
            self._write(spark, records)
        return skipped

    def max_record_bytes(self) -> int:
        """The largest record value the topic and the producer take, less Kafka's framing."""
        if "topic" not in self._limit:
            found = topic_max_message_bytes(self.bootstrap, self.topic, self.client)
            if found is None:
                return min(DEFAULT_MAX_MESSAGE_BYTES, PRODUCER_MAX_REQUEST_SIZE) - RECORD_OVERHEAD
            self._limit["topic"] = found
        return min(self._limit["topic"], PRODUCER_MAX_REQUEST_SIZE) - RECORD_OVERHEAD

    def _write(self, spark: SparkSession, records: Sequence[SinkRecord]) -> None:
        data = pa.table(
            {
                "key": pa.array([r.key for r in records], pa.string()),
                "value": pa.array([r.value for r in records], pa.string()),
            }
        )
        (
            spark.createDataFrame(data)
            .coalesce(1)  # one producer, so each partition gets its records in order
            .write.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("kafka.max.request.size", str(PRODUCER_MAX_REQUEST_SIZE))
            .options(**self.client.spark_options())
            .option("topic", self.topic)
            .save()
        )

    def produced_keys(self, window: int) -> set[RecordKey]:
        """The records among the last `window` records of every partition of the
        topic (none if the topic does not exist yet)."""
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            group_id=None,
            client_id="kcsim-sink-read-back",
            **self.client.kafka_python(),
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
) -> set[RecordKey]:
    """Our records among each partition's records up to its end offset in `pending`
    (emptied as partitions are read to the end)."""
    found: set[RecordKey] = set()
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
                    key = _record_key_of(record.value)
                    if key is not None:
                        found.add(key)
        for tp in list(pending):
            if consumer.position(tp) >= pending[tp]:
                del pending[tp]
    return found


def _record_key_of(value: bytes | None) -> RecordKey | None:
    """The record's key, if it is one of ours."""
    try:
        parsed = json.loads(value) if value else None
    except (ValueError, RecursionError):
        return None
    if isinstance(parsed, dict) and isinstance(parsed.get("record_id"), str):
        return record_key(parsed)
    return None


def topic_max_message_bytes(
    bootstrap: str, topic: str, client: KafkaClientConfig | None = None
) -> int | None:
    """The topic's `max.message.bytes` (its own or the broker's default), None when the
    topic does not exist yet."""
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="kcsim-sink-limits",
        **(client or KafkaClientConfig()).kafka_python(),
    )
    try:
        resource = ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": None})
        found = admin.describe_configs([resource], config_filter="all")
    finally:
        admin.close()
    entry = found.get("topic", {}).get(topic, {}).get("max.message.bytes")
    return None if entry is None else int(entry["value"])
