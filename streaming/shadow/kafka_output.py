"""The shadow's Kafka output (`kcsim shadow --out kafka:BOOTSTRAP/TOPIC`): events as JSON
records keyed by cluster, `acks=all`, idempotent.

Nothing counts as written until the broker acknowledged it: `write` waits for every
record's acknowledgement and raises `OutputError` (which event, its size, why) on the
first it did not get, so the caller saves no state past it. An event over what the topic
takes (its `max.message.bytes`, read from the broker at start; the producer's
`max.request.size` is set to it) is refused before anything of its flush is sent.

`last_seq` finds this cluster's last `seq` in the topic, reading each partition back from
its end a window at a time until one of the cluster's records (its key) is found, so a
topic shared with other clusters does not hide it.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, MessageSizeTooLargeError
from kafka.record.default_records import DefaultRecordBatchBuilder

from streaming.clients.kafka_config import KafkaClientConfig
from streaming.clients.message_size import broker_message_max_bytes, topic_max_message_bytes

Event = dict[str, Any]
# how long a record may wait for its acknowledgement (the producer's own delivery timeout
# is 120 s: past it the future fails by itself)
ACK_TIMEOUT_S = 180.0
# the first window read back from a partition's end; each further one is twice as long
READ_BACK_WINDOW = 1000
# reading back fails when no record arrives and the position does not move for this long
READ_BACK_STALL_S = 30.0
# kafka-python's default batch size: batches are also kept under the topic's limit
BATCH_BYTES = 16_384


class OutputError(Exception):
    """The output did not take an event: the shadow stops, its saved state not advanced
    past what the output acknowledged. `cause`: the Kafka client's error, if any."""

    def __init__(self, message: str, cause: KafkaError | None = None) -> None:
        super().__init__(message)
        self.cause = cause


def record_bytes(key: bytes, value: bytes) -> int:
    """What one record weighs against `max.message.bytes`: the size of a batch holding
    only it (the batch header and the record's framing at their longest)."""
    return DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, [])


def describe(event: Event) -> str:
    if "event_id" in event:
        return f"event {event['event_id']} (seq {event.get('seq')}, {event.get('type')})"
    return f"the {event.get('type')} line of the unreadable znode {event.get('znode')}"


class KafkaOutput:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        cluster: str,
        client: KafkaClientConfig,
        read_back_stall_s: float = READ_BACK_STALL_S,
    ) -> None:
        self.bootstrap, self.topic, self.cluster = bootstrap, topic, cluster
        self.read_back_stall_s = read_back_stall_s
        self.key = cluster.encode("utf-8")
        self.security = client.kafka_python()
        found = topic_max_message_bytes(bootstrap, topic, client)
        if found is not None:
            self.limit = found
            self.limit_source = f"the max.message.bytes of topic {topic!r}"
        else:  # a topic this output creates gets the brokers' message.max.bytes
            self.limit = broker_message_max_bytes(bootstrap, client)
            self.limit_source = (
                f"the brokers' message.max.bytes (topic {topic!r} does not exist yet)"
            )
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            max_request_size=self.limit,
            batch_size=min(BATCH_BYTES, self.limit),
            **self.security,
        )

    def write(self, events: list[Event]) -> None:
        """Every event out and acknowledged, in order; else OutputError naming the first
        one that is not (those before it are in the topic)."""
        values = [json.dumps(e, separators=(",", ":")).encode() for e in events]
        for event, value in zip(events, values, strict=True):
            size = record_bytes(self.key, value)
            if size > self.limit:
                raise OutputError(
                    f"{describe(event)} is {size} bytes as a Kafka record, over the "
                    f"{self.limit} bytes of {self.limit_source}; nothing from it on was "
                    "written. Raise the topic's max.message.bytes (kafka-configs.sh --alter "
                    f"--entity-type topics --entity-name {self.topic} --add-config "
                    f"max.message.bytes={size}, and the brokers' replica.fetch.max.bytes if "
                    "it is lower) and restart the shadow, or write to files (--out file:DIR)"
                )
        pending = []
        for event, value in zip(events, values, strict=True):
            try:
                pending.append(self.producer.send(self.topic, key=self.key, value=value))
            except KafkaError as error:
                raise OutputError(f"{describe(event)} could not be sent", error) from error
        for event, value, future in zip(events, values, pending, strict=True):
            try:
                future.get(timeout=ACK_TIMEOUT_S)
            except MessageSizeTooLargeError as error:
                raise OutputError(
                    f"the broker refused {describe(event)} as too large: "
                    f"{record_bytes(self.key, value)} bytes as a Kafka record, over topic "
                    f"{self.topic!r}'s max.message.bytes alone or in its batch (it was "
                    f"{self.limit} at start: was it lowered since?). Raise it and restart "
                    "the shadow, or write to files (--out file:DIR)",
                    error,
                ) from error
            except KafkaError as error:
                raise OutputError(
                    f"{describe(event)} was not acknowledged by topic {self.topic!r}", error
                ) from error

    def last_seq(self, cluster: str) -> int:
        """The cluster's last `seq` in the topic (0: none): in each partition, its last
        record (a cluster's records are in order in their partition)."""
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            group_id=None,
            client_id="kcsim-shadow-read-back",
            **self.security,
        )
        try:
            partitions = sorted(consumer.partitions_for_topic(self.topic) or ())
            tps = [TopicPartition(self.topic, p) for p in partitions]
            if not tps:
                return 0
            begins, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
            key = cluster.encode("utf-8")
            return max(self._last_in(consumer, tp, begins[tp], ends[tp], key) for tp in tps)
        finally:
            consumer.close()

    def _last_in(
        self, consumer: KafkaConsumer, tp: TopicPartition, begin: int, end: int, key: bytes
    ) -> int:
        """The seq of the partition's last record keyed `key`, read back window by window
        from `end` down to `begin` (0: none)."""
        consumer.assign([tp])
        stop, window = end, READ_BACK_WINDOW
        while stop > begin:
            start = max(begin, stop - window)
            found = self._seqs_between(consumer, tp, start, stop, key)
            if found:
                return max(found)
            stop, window = start, window * 2
        return 0

    def _seqs_between(
        self, consumer: KafkaConsumer, tp: TopicPartition, start: int, stop: int, key: bytes
    ) -> list[int]:
        consumer.seek(tp, start)
        seqs: list[int] = []
        position, moved = start, time.monotonic()
        while position < stop:
            for record in consumer.poll(timeout_ms=500).get(tp, []):
                if record.offset < stop and record.key == key:
                    seq = _seq_of(record.value)
                    if seq is not None:
                        seqs.append(seq)
            now_at = consumer.position(tp)
            if now_at > position:
                position, moved = now_at, time.monotonic()
            elif time.monotonic() - moved > self.read_back_stall_s:
                raise OutputError(
                    f"reading back {tp.topic!r} partition {tp.partition} (to find the last "
                    f"event of cluster {self.cluster!r} already written) made no progress "
                    f"for {self.read_back_stall_s:g} s at offset {position} of {stop}: is the "
                    "broker reachable, and may this client read the topic?"
                )
        return seqs

    def close(self) -> None:
        self.producer.close()


def _seq_of(value: bytes | None) -> int | None:
    try:
        parsed = json.loads(value) if value else None
    except (ValueError, RecursionError):
        return None
    seq = parsed.get("seq") if isinstance(parsed, dict) else None
    return seq if isinstance(seq, int) else None
