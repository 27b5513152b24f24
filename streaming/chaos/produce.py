"""`kcsim produce`: the chaos injector, a kafka-python producer.

Two sources of events:

* `--scenario FILE|DIR`: the lines of a JSON-lines file (or of a directory's files, in
  name order), in the order `kcsim replay` reads them. Each record's value is the line's
  bytes as they are (bad lines too: the job must reject them), its key the event's
  `cluster` ("default" when absent or unreadable), so a cluster's events share a Kafka
  partition and stay in order.
* `--chaos`: `ChaosGenerator`, a seeded random fault generator against a described
  cluster (`--brokers`, `--topics`, `--partitions`, `--rf`). It first bootstraps the
  cluster (a `broker_startup` per broker, a `topic_creation` per topic), then draws
  faults: broker crashes and restarts, rolling restarts, controlled shutdowns,
  reassignment waves (sometimes cancelled), topic churn, ISR flaps, preferred and unclean
  elections, auto rebalance checks and the occasional controller failover. The same seed
  gives the same events. Every chaos event carries an explicit `seq` (1, 2, ... per
  cluster) and `event_id` ("chaos-<seed>-<seq>"), so a replayed record is a duplicate
  the job drops.

`--rate` throttles (events/s); `--count` and `--duration` bound the run (chaos runs until
interrupted otherwise). Progress is one updating line on stderr unless `--quiet`. The
producer is idempotent with `acks=all`, so its own retries (a broker restart) neither
duplicate nor reorder records.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from controller.config import ConfigError
from controller.parse import is_unicode
from controller.replay.command import positive_int
from controller.replay.event_files import read_events
from controller.simulator import RawEvent
from streaming.chaos.generator import (
    DEFAULT_CLUSTER,
    ChaosGenerator,
    ClusterSpec,
    Event,
)
from streaming.clients.kafka_config import ClientFailures, KafkaClientConfig, add_command_config

PROGRESS_INTERVAL_S = 0.5


@dataclass(frozen=True, slots=True)
class Record:
    key: bytes
    value: bytes


def scenario_records(path: Path) -> Iterator[Record]:
    """A scenario's lines as records, in `kcsim replay` order; values byte for byte."""
    for event in read_events(path):
        yield Record(event_cluster(event.raw).encode(), _line_bytes(event))


def _line_bytes(event: RawEvent) -> bytes:
    return event.raw.encode("utf-8", "surrogateescape")


def event_cluster(raw: str) -> str:
    """The cluster a line names, "default" when absent or unreadable (a bad line is
    produced as it is: the job rejects it, with its coordinates)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to read
        return DEFAULT_CLUSTER
    cluster = data.get("cluster") if isinstance(data, dict) else None
    if not isinstance(cluster, str) or not is_unicode(cluster):  # a key is UTF-8 bytes
        return DEFAULT_CLUSTER
    return cluster


def event_record(event: Event) -> Record:
    return Record(
        str(event.get("cluster", DEFAULT_CLUSTER)).encode(),
        json.dumps(event, separators=(",", ":")).encode(),
    )


def chaos_records(
    generator: ChaosGenerator, clock: Callable[[], float] = time.time
) -> Iterator[Record]:
    """The generator's events as records, each stamped with `ts` (ISO-8601 UTC, ms) from
    `clock` when it is drawn, just before it is sent: the producer's time of the fault."""
    for event in generator.events():
        yield event_record(event | {"ts": _iso(clock())})


def _iso(seconds: float) -> str:
    millis = int(seconds * 1000)
    moment = datetime.fromtimestamp(millis // 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


# ------------------------------------------------------------------------ producing


@dataclass(frozen=True, slots=True)
class Limits:
    rate: float | None = None  # events/s; None: as fast as possible
    count: int | None = None
    duration: float | None = None  # seconds


@dataclass(frozen=True, slots=True)
class ProduceStats:
    sent: int
    failed: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else 0.0


class Progress:
    """One updating line on a terminal stream: events so far and events/s."""

    def __init__(self, stream: IO[str] | None) -> None:
        self._stream = stream
        self._started = time.monotonic()
        self._shown = self._started

    def update(self, sent: int, *, final: bool = False) -> None:
        if self._stream is None:
            return
        now = time.monotonic()
        if not final and now - self._shown < PROGRESS_INTERVAL_S:
            return
        self._shown = now
        elapsed = max(now - self._started, 1e-9)
        self._stream.write(
            f"\rkcsim produce: {sent} events, {sent / elapsed:,.1f} events/s, {elapsed:.1f} s  "
        )
        if final:
            self._stream.write("\n")
        self._stream.flush()


def make_producer(
    bootstrap: str, client_id: str = "kcsim-produce", client: KafkaClientConfig | None = None
) -> Any:
    from kafka import KafkaProducer  # imported here: the generator needs no Kafka

    security = (client or KafkaClientConfig()).kafka_python()
    return KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        retries=2**31 - 1,
        delivery_timeout_ms=120_000,
        request_timeout_ms=30_000,
        **security,
    )


def produce(
    producer: Any,
    topic: str,
    records: Iterator[Record],
    limits: Limits = Limits(),  # frozen: a shared default is safe
    progress: Progress | None = None,
    on_send: Callable[[int, Record], None] | None = None,
) -> ProduceStats:
    """Send `records` in order within `limits`, then flush. Ctrl-C stops early (flushed)."""
    progress = progress or Progress(None)
    failures: list[Exception] = []
    started = time.monotonic()
    deadline = None if limits.duration is None else started + limits.duration
    sent = 0
    try:
        for record in records:
            if limits.count is not None and sent >= limits.count:
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            if limits.rate:
                due = started + sent / limits.rate
                if due > now:
                    time.sleep(due - now)
            if on_send is not None:
                on_send(sent, record)
            producer.send(topic, key=record.key, value=record.value).add_errback(failures.append)
            sent += 1
            progress.update(sent)
    except KeyboardInterrupt:
        pass
    finally:
        producer.flush()
    seconds = time.monotonic() - started
    progress.update(sent, final=True)
    return ProduceStats(sent, len(failures), seconds)


# ------------------------------------------------------------------------------ CLI


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        "--bootstrap",
        dest="bootstrap",
        required=True,
        metavar="HOST:PORT",
        help="the Kafka cluster to produce to (as Kafka's tools take it)",
    )
    parser.add_argument("--topic", required=True, help="the topic the events go to")
    add_command_config(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--scenario", type=Path, metavar="FILE|DIR", help="JSON-lines events")
    source.add_argument("--chaos", action="store_true", help="seeded random faults")
    parser.add_argument(
        "--rate",
        type=_positive_float,
        metavar="EVENTS_PER_S",
        help="events a second (default: as fast as Kafka takes them)",
    )
    parser.add_argument(
        "--count", type=positive_int, metavar="N", help="stop after N events (default: no limit)"
    )
    parser.add_argument(
        "--duration",
        type=_positive_float,
        metavar="S",
        help="stop after S seconds (default: no limit)",
    )
    parser.add_argument("--seed", type=int, default=1, help="chaos: random seed (default 1)")
    spec = ClusterSpec()
    parser.add_argument("--cluster", default=spec.name, help="chaos: cluster name")
    parser.add_argument("--brokers", type=positive_int, default=spec.brokers, help="chaos: brokers")
    parser.add_argument("--topics", type=positive_int, default=spec.topics, help="chaos: topics")
    parser.add_argument("--partitions", type=positive_int, default=spec.partitions,
                        help="chaos: partitions per topic")  # fmt: skip
    parser.add_argument("--rf", type=positive_int, default=spec.rf, help="chaos: replication")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def main(args: argparse.Namespace) -> int:
    records: Iterator[Record]
    if args.scenario is not None:
        if not args.scenario.exists():
            print(f"kcsim produce: no such file or directory: {args.scenario}", file=sys.stderr)
            return 2
        records = scenario_records(args.scenario)
    else:
        try:
            spec = ClusterSpec(args.cluster, args.brokers, args.topics, args.partitions, args.rf)
        except ValueError as error:
            print(f"kcsim produce: {error}", file=sys.stderr)
            return 2
        records = chaos_records(ChaosGenerator(args.seed, spec, args.settings))
    from kafka.errors import KafkaError

    try:
        client = KafkaClientConfig.load(args.kafka_config)
    except ConfigError as error:
        print(f"kcsim produce: {error}", file=sys.stderr)
        return 2
    with ClientFailures(client) as failures:
        try:
            producer = make_producer(args.bootstrap, client=client)
        except KafkaError as error:
            print(
                f"kcsim produce: cannot reach {args.bootstrap}: {failures.explain(error)}",
                file=sys.stderr,
            )
            return 1
        try:
            stats = produce(
                producer,
                args.topic,
                records,
                Limits(args.rate, args.count, args.duration),
                Progress(None if args.quiet else sys.stderr),
            )
        finally:
            producer.close()
    if stats.failed:
        print(f"kcsim produce: {stats.failed} of {stats.sent} records failed", file=sys.stderr)
        return 1
    if not args.quiet:
        print(
            f"kcsim produce: done: {stats.sent} events sent to {args.topic} on "
            f"{args.bootstrap} in {stats.seconds:.1f} s ({stats.rate:,.1f} events/s), "
            "all acknowledged",
            file=sys.stderr,
        )
    return 0


__all__ = [
    "Limits",
    "Record",
    "chaos_records",
    "event_record",
    "make_producer",
    "produce",
    "scenario_records",
]
