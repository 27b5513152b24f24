"""The Kafka sink (`kcsim run --sink kafka:HOST:PORT/TOPIC`): the controller's output stream
as JSON records keyed "<cluster>", so a cluster's records stay in one partition and in
order (and so do each broker's requests). Under the ZooKeeper engine that stream is the
requests; under the KRaft engine, which sends none, it is `metadata_records` (CONTRACT
§5): one Kafka record per metadata record, its value the row's columns
(`metadata_sink_records`).

A record is one `request_payloads` row with the `controller_requests` rows that carry it
as `recipients` (CONTRACT §2: an UpdateMetadata of every partition to every broker is one
body, so one record rather than one per broker). None is over what the topic and the
producer accept (the topic's `max.message.bytes`, read from the broker, and the
producer's `max.request.size`): a body too big for one record has its `partitions` split
into `chunks` records, `chunk` 0 to `chunks - 1`, each carrying everything else; a
consumer concatenates their partitions in chunk order (`rebuild_requests`).

Exactly once across Spark's task retries, effectively once across restarts. The records
are built in the driver (from the batch's rows, which the driver holds anyway), and the
driver produces them itself with one idempotent kafka-python producer (acks=all, at most
5 requests in flight, so a retried request cannot overtake a later one), waiting for
every record's acknowledgement: a refused record fails the batch, none is dropped. No
Spark task produces anything, so a retried task cannot produce a record twice (Spark's
Kafka writer is at-least-once: a retried attempt re-sends what the failed one sent).

A batch re-run after a crash may already have produced some or all of its records (the
crash came after the Delta commits, during or after the send). Every record carries its
`cluster`, `event_id`, `payload` and `chunk` (and `record_id`, the four joined by ':'),
which together identify it and are stable across re-runs (an event id is applied once
per cluster); a metadata record, its `cluster`, `event_id` and `record_seq`. So a re-run
batch whose output already reached the lake (the sink is written after it) reads back
the tail of each partition of the topic and produces only the records not found there.
The tail is as long as the batch has records: a batch's earlier records are the last
ones of each partition, as long as this job is the topic's only producer. The producer
is idempotent, so what an interrupted send left is a prefix of each partition's share,
and the rest follows it in order. So is what a refused record leaves: the batch fails,
and the producer refuses every record after it.

Brokers that go away mid-run (a rolling restart of the sink's cluster) are waited for.
The first contact gives up after the clients' bootstrap timeout (15 s, so a wrong address
or password is an error, not a hang); once the sink has reached the brokers, a client
that cannot bootstrap is opened again until `OUTAGE_SECONDS` (the producer's own delivery
timeout) have passed, with a line on stderr for each retry.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
)
from kafka.producer.future import FutureRecordMetadata

from streaming.clients.kafka_config import KafkaClientConfig
from streaming.clients.message_size import broker_message_max_bytes, topic_max_message_bytes

READ_BACK_SECONDS = 60.0
# The producer's own limit (max.request.size, set on it so it is known).
PRODUCER_MAX_REQUEST_SIZE = 1_048_576
# Requests in flight to a broker: at most 5 keeps an idempotent producer's order per
# partition through retries (the broker refuses a batch out of sequence).
MAX_IN_FLIGHT = 5
# How many bytes of records a produce request carries per partition (Kafka's default of
# 16 KiB makes a request of every few records); capped by the topic's limit so a batch
# is not refused as too large and split.
BATCH_BYTES = 256 * 1024
# How long the records may take to be acknowledged after the last is handed over (the
# producer itself gives up on a record after its delivery timeout, 2 minutes).
ACK_SECONDS = 180.0
# How long a sink that has reached its brokers waits for them to come back (Kafka's
# producer waits as long for a record's acknowledgement: delivery.timeout.ms).
OUTAGE_SECONDS = 120.0
# Room for what Kafka adds around a value: a record batch's header (61 bytes) and the
# record's framing (lengths, offsets, timestamp: under 30 bytes), with some to spare.
RECORD_OVERHEAD = 512

Row = dict[str, Any]
RecordKey = tuple[object, object, object, object]
_UNREACHABLE = (KafkaTimeoutError, KafkaConnectionError)
_T = TypeVar("_T")


class SinkRecord(NamedTuple):
    key: str  # "<cluster>"
    value: str  # the JSON record
    ident: RecordKey  # record_key (or metadata_record_key) of the value
    name: str  # how errors name it: the request's record_id, or the metadata record's


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
        yield SinkRecord(key, value, record_key(fields), fields["record_id"])


# the first member of a metadata record's key: a request's is its cluster, never this
_METADATA = ("metadata_record",)
METADATA_COLUMNS = ("cluster", "event_id", "seq", "record_seq", "type", "record", "ts")


def metadata_record_key(row: Row) -> RecordKey:
    return (_METADATA, row.get("cluster"), row.get("event_id"), row.get("record_seq"))


def metadata_sink_records(rows: Iterable[Row], max_bytes: int) -> list[SinkRecord]:
    """A batch's `metadata_records` rows as sink records, in order: one each, its value the
    row's columns as a JSON object (`record` stays the JSON text the table holds, so a
    consumer parses it a second time). Raises SinkError, before anything is sent, for a
    row whose record would be over `max_bytes`: a metadata record is one unit, never
    split (Kafka's controller writes ConfigRecords of up to its own value limits, far
    under a topic's default 1 MiB)."""
    records: list[SinkRecord] = []
    for row in rows:
        key = str(row["cluster"])
        value = json.dumps({c: row[c] for c in METADATA_COLUMNS}, separators=_COMPACT)
        name = f"{row['cluster']}:{row['event_id']}:{row['record_seq']}"
        size = len(key.encode("utf-8")) + len(value)  # the value is ASCII
        if size > max_bytes:
            raise SinkError(
                f"metadata record {name} ({row['type']}) takes {size} bytes as a JSON "
                f"record, more than a record of the sink topic can hold ({max_bytes} bytes)"
            )
        records.append(SinkRecord(key, value, metadata_record_key(row), name))
    return records


def rebuild_requests(records: Iterable[Row]) -> list[Row]:
    """What a consumer does: the requests of the sink's records (parsed JSON), one dict per
    request with the columns of controller_requests and its body's `partitions` and
    `live_brokers` (a chunked body's partitions concatenated in chunk order). Raises
    ValueError when a body misses a chunk."""
    bodies: dict[tuple[object, ...], dict[int, Row]] = {}
    for record in records:
        body: tuple[object, ...] = (record["cluster"], record["event_id"], record["payload"])
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


class SinkError(RuntimeError):
    """The sink topic did not take every record of a batch."""


@dataclass(frozen=True, slots=True)
class RequestSink:
    bootstrap: str
    topic: str
    client: KafkaClientConfig = field(default_factory=KafkaClientConfig)
    # the topic's record limit once read (it is read again while the topic is missing)
    _limit: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    # the producer, opened by the first batch with records and closed by `close`
    _producer: dict[str, KafkaProducer] = field(default_factory=dict, compare=False, repr=False)
    # set once a client of the sink has reached the brokers (so an outage is waited for)
    _reached: set[str] = field(default_factory=set, compare=False, repr=False)

    def send(self, requests: Sequence[Row], payloads: Sequence[Row], may_be_rerun: bool) -> int:
        """Produce the records of a batch's `requests` and their `payloads` (in order); with
        `may_be_rerun`, skip those an earlier run of the batch already produced. Returns
        how many records were skipped. Raises SinkError when a record was not taken."""
        if not payloads:
            return 0
        return self._produce(
            payload_records(requests, payloads, self.max_record_bytes()), may_be_rerun
        )

    def send_metadata(self, rows: Sequence[Row], may_be_rerun: bool) -> int:
        """Produce a batch's `metadata_records` rows, one record each, in order; as `send`
        for a re-run batch and for a record not taken."""
        if not rows:
            return 0
        return self._produce(metadata_sink_records(rows, self.max_record_bytes()), may_be_rerun)

    def _produce(self, records: list[SinkRecord], may_be_rerun: bool) -> int:
        skipped = 0
        if may_be_rerun:
            produced = self.produced_keys(window=len(records))
            kept = [r for r in records if r.ident not in produced]
            skipped = len(records) - len(kept)
            records = kept
        if records:
            self._write(records)
        return skipped

    def close(self) -> None:
        """Close the producer (once the job ends); a later batch would open another."""
        producer = self._producer.pop("producer", None)
        if producer is not None:
            producer.close(timeout=ACK_SECONDS)

    def max_record_bytes(self) -> int:
        """The largest record (key and value) the topic and the producer take, less
        Kafka's framing."""
        return min(self.message_max_bytes(), PRODUCER_MAX_REQUEST_SIZE) - RECORD_OVERHEAD

    def message_max_bytes(self) -> int:
        """The topic's `max.message.bytes`; while the topic does not exist, the brokers'
        `message.max.bytes`, which a topic created by the first record takes."""
        if "topic" not in self._limit:
            found = self._reaching(
                lambda: topic_max_message_bytes(self.bootstrap, self.topic, self.client)
            )
            if found is None:
                return self._reaching(lambda: broker_message_max_bytes(self.bootstrap, self.client))
            self._limit["topic"] = found
        return self._limit["topic"]

    def _write(self, records: Sequence[SinkRecord]) -> None:
        """Produce `records` in order and wait until every one is acknowledged; raise
        SinkError naming the first that was not (and how many were not)."""
        producer = self._open_producer()
        futures: list[FutureRecordMetadata] = []
        refused: KafkaError | None = None
        for record in records:
            try:
                futures.append(
                    producer.send(
                        self.topic,
                        key=record.key.encode("utf-8"),
                        value=record.value.encode("utf-8"),
                    )
                )
            except KafkaError as error:  # refused before sending (too big, no metadata)
                refused = error
                break
        producer.flush(timeout=ACK_SECONDS)
        failed: list[tuple[SinkRecord, KafkaError]] = []
        for record, future in zip(records, futures, strict=False):
            try:
                future.get(timeout=ACK_SECONDS)
            except KafkaError as error:
                failed.append((record, error))
        if refused is not None:
            failed.append((records[len(futures)], refused))
        if failed:
            # a record the broker refused puts kafka-python's idempotent producer in a fatal
            # state (every later record refused with the same error): a next batch gets a
            # new producer
            self.close()
            # the records never handed over (after a refused one) were not written either
            raise self._failure(failed, unsent=len(records) - len(futures), total=len(records))

    def _open_producer(self) -> KafkaProducer:
        if "producer" not in self._producer:
            batch_size = min(BATCH_BYTES, self.message_max_bytes() - RECORD_OVERHEAD)
            self._producer["producer"] = self._reaching(
                lambda: KafkaProducer(
                    bootstrap_servers=self.bootstrap,
                    client_id="kcsim-sink",
                    acks="all",
                    enable_idempotence=True,
                    max_in_flight_requests_per_connection=MAX_IN_FLIGHT,
                    max_request_size=PRODUCER_MAX_REQUEST_SIZE,
                    batch_size=batch_size,
                    **self.client.kafka_python(),
                )
            )
        return self._producer["producer"]

    def _reaching(self, connect: Callable[[], _T]) -> _T:
        """`connect()` (which opens a client, bootstrapping it); once the sink has
        reached the brokers, opened again while they are unreachable, for up to
        `OUTAGE_SECONDS`."""
        deadline = time.monotonic() + OUTAGE_SECONDS
        while True:
            try:
                opened = connect()
            except _UNREACHABLE as error:
                if "brokers" not in self._reached or time.monotonic() >= deadline:
                    raise
                left = deadline - time.monotonic()
                print(
                    f"kcsim run: sink {self.bootstrap}: brokers unreachable ({error}); "
                    f"trying again for {left:.0f} s more",
                    file=sys.stderr,
                    flush=True,
                )
                continue
            self._reached.add("brokers")
            return opened

    def _failure(
        self, failed: list[tuple[SinkRecord, KafkaError]], unsent: int, total: int
    ) -> SinkError:
        lost = len(failed) + max(0, unsent - 1)
        too_large = [
            record
            for record, error in failed
            if isinstance(error, MessageSizeTooLargeError | RecordListTooLargeError)
        ]
        if too_large:
            # the limit may have been lowered since it was read: read it again
            self._limit.clear()
            limit = self.message_max_bytes()
            largest = max(too_large, key=_record_bytes)
            return SinkError(
                f"sink topic {self.topic!r} refused a record as too large: record "
                f"{largest.name} of "
                f"{_record_bytes(largest)} bytes over the topic's max.message.bytes {limit} "
                f"(with Kafka's framing); {lost} of the batch's {total} records not written"
            )
        record, error = failed[0]
        return SinkError(
            f"sink topic {self.topic!r}: {lost} of the batch's {total} records not written; "
            f"the first, record {record.name}: "
            f"{type(error).__name__}: {error}"
        )

    def produced_keys(self, window: int) -> set[RecordKey]:
        """The records among the last `window` records of every partition of the
        topic (none if the topic does not exist yet)."""
        consumer = self._reaching(
            lambda: KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                enable_auto_commit=False,
                group_id=None,
                client_id="kcsim-sink-read-back",
                **self.client.kafka_python(),
            )
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
    """The record's key, if it is one of ours (a request body or a metadata record)."""
    try:
        parsed = json.loads(value) if value else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict):
        return None
    if isinstance(parsed.get("record_id"), str):
        return record_key(parsed)
    if isinstance(parsed.get("record_seq"), int) and isinstance(parsed.get("record"), str):
        return metadata_record_key(parsed)
    return None


def _record_bytes(record: SinkRecord) -> int:
    return len(record.key.encode("utf-8")) + len(record.value.encode("utf-8"))
