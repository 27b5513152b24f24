"""`kcsim produce`: the chaos injector (issue #4 item 4), a kafka-python producer.

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

How the generator keeps its events sensible: it tracks the cluster with the project's own
core (`controller.simulator.Simulator`, with the same settings as the job should use), so
it knows which brokers are live, who leads each partition, the ISR and the epochs after
every event, exactly as the job will compute them. An event the tracker would reject is
never emitted (`ChaosGenerator.dropped` counts them; it stays 0). With
`kcsim.simulate.brokers=false` (replay mode, the default) brokers do not answer by
themselves, so the generator also emits what they would send: `stop_replica_response`
for replicas being deleted and an `isr_change` that lets caught-up replicas back into the
ISR. Events depend on the core's behaviour: a change to the core may change what a seed
produces.

`--rate` throttles (events/s); `--count` and `--duration` bound the run (chaos runs until
interrupted otherwise). Progress is one updating line on stderr unless `--quiet`. The
producer is idempotent with `acks=all`, so its own retries (a broker restart) neither
duplicate nor reorder records.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from controller.config import ConfigError, Settings
from controller.context import ControllerContext
from controller.model import ReplicaState, TopicPartition
from controller.parse import is_unicode
from controller.replay import positive_int, read_events
from controller.simulator import RawEvent, Simulator
from streaming.kafka_security import ClientFailures, KafkaClientConfig

DEFAULT_CLUSTER = "default"
RACKS = ("a", "b", "c")
PROGRESS_INTERVAL_S = 0.5
UNCLEAN_KEY = "unclean.leader.election.enable"

Event = dict[str, Any]


# ------------------------------------------------------------------- chaos generator


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """The cluster the chaos generator bootstraps and then torments."""

    name: str = DEFAULT_CLUSTER
    brokers: int = 5
    topics: int = 4
    partitions: int = 6
    rf: int = 3

    def __post_init__(self) -> None:
        for name in ("brokers", "topics", "partitions", "rf"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


# Relative weights of the fault kinds; restarts are frequent so the cluster heals.
FAULT_WEIGHTS: dict[str, float] = {
    "broker_crash": 3.0,
    "broker_restart": 4.0,
    "rolling_restart": 0.4,
    "controlled_shutdown": 2.0,
    "reassignment_wave": 2.0,
    "topic_churn": 2.0,
    "isr_flap": 4.0,
    "preferred_election": 1.5,
    "unclean_election": 1.0,
    "auto_rebalance_check": 1.5,
    "controller_failover": 0.4,
}
FAULT_KINDS: tuple[str, ...] = ("bootstrap", *FAULT_WEIGHTS)


@dataclass(frozen=True, slots=True)
class Fault:
    """One drawn fault and the events it became (broker answers included)."""

    kind: str
    events: tuple[Event, ...]


@dataclass(slots=True)
class _Draft:
    """Events of the fault being drawn, before stamping."""

    events: list[Event] = field(default_factory=list)


class ChaosGenerator:
    """Seeded random faults against a described cluster; no Kafka involved.

    `events()` is infinite: bound it with `itertools.islice` or `--count`. One generator
    yields one sequence; make a new one (same arguments) to start over."""

    def __init__(
        self,
        seed: int,
        spec: ClusterSpec | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.seed = seed
        self.spec = spec or ClusterSpec()
        # the job's defaults (replay mode): brokers' answers are part of the stream
        self.settings = settings if settings is not None else Settings()
        self.dropped = 0  # events the tracker would have rejected (never emitted)
        self._rng = random.Random(seed)
        self._tracker = Simulator(self.settings)
        self._seq = 0
        self._churn = 0
        self._max_down = max(1, self.spec.brokers - self.spec.rf)
        self._racks = {b: RACKS[(b - 1) % len(RACKS)] for b in self._broker_ids()}

    # --- public -------------------------------------------------------------------

    def events(self) -> Iterator[Event]:
        for fault in self.faults():
            yield from fault.events

    def faults(self) -> Iterator[Fault]:
        yield self._run("bootstrap", self._bootstrap)
        kinds = list(FAULT_WEIGHTS)
        weights = [FAULT_WEIGHTS[k] for k in kinds]
        while True:
            kind = self._rng.choices(kinds, weights)[0]
            fault = self._run(kind, getattr(self, f"_{kind}"))
            if fault.events:
                yield fault

    # --- machinery ----------------------------------------------------------------

    @property
    def _context(self) -> ControllerContext:
        return self._tracker.context(self.spec.name)

    def _broker_ids(self) -> range:
        return range(1, self.spec.brokers + 1)

    def _run(self, kind: str, draw: Callable[[_Draft], None]) -> Fault:
        draft = _Draft()
        draw(draft)
        return Fault(kind, tuple(draft.events))

    def _emit(self, draft: _Draft, body: Event) -> bool:
        """Stamp, check against the tracker, keep; then let brokers answer (replay mode).
        False when the tracker rejected it (so it was not emitted)."""
        seq = self._seq + 1
        event = {
            "type": body["type"],
            "cluster": self.spec.name,
            "seq": seq,
            "event_id": f"chaos-{self.seed}-{seq}",
            **{k: v for k, v in body.items() if k != "type"},
        }
        line = json.dumps(event, separators=(",", ":"))
        output = self._tracker.apply([RawEvent(line, f"chaos:{seq}")])
        if output.appends["rejected_events"]:
            self.dropped += 1
            return False
        self._seq = seq
        draft.events.append(event)
        if not self.settings.simulate_brokers and body["type"] not in _ANSWERS:
            self._answer(draft)
        return True

    def _answer(self, draft: _Draft) -> None:
        """What live brokers would send by themselves, until they have nothing to say."""
        previous: list[Event] = []
        for _ in range(_ANSWER_ROUNDS):
            answers = self._broker_answers()
            if not answers or answers == previous:
                return  # nothing to say, or the controller refused it once already
            for body in answers:
                self._emit(draft, body)
            previous = answers

    def _broker_answers(self) -> list[Event]:
        context = self._context
        answers: list[Event] = []
        for topic in sorted(context.topics_to_be_deleted):
            for tp in context.partitions_of_topic(topic):
                for broker in context.assignment(tp).replicas:
                    if context.is_registered(broker) and (
                        context.replica_state(tp, broker) is ReplicaState.DELETION_STARTED
                    ):
                        answers.append(
                            {"type": "stop_replica_response", "topic": tp.topic,
                             "partition": tp.partition, "broker": broker, "error": None}
                        )  # fmt: skip
        for record in context.all_partitions():
            lai = record.leadership
            if lai is None or lai.leader < 0 or not context.is_live(lai.leader):
                continue
            if context.is_queued_for_deletion(record.tp.topic):
                continue
            missing = [
                b
                for b in record.assignment.replicas
                if b not in lai.isr
                and context.is_live(b)
                and record.replica_states.get(b) in _CATCHING_UP
            ]
            if missing:
                answers.append(self._isr_change(record.tp, (*lai.isr, *missing)))
        return answers

    def _isr_change(self, tp: TopicPartition, isr: tuple[int, ...]) -> Event:
        lai = self._context.leadership(tp)
        assert lai is not None
        return {
            "type": "isr_change", "topic": tp.topic, "partition": tp.partition,
            "isr": list(isr), "leader_epoch": lai.leader_epoch,
            "partition_epoch": lai.partition_epoch,
        }  # fmt: skip

    # --- cluster views --------------------------------------------------------------

    def _registered(self) -> list[int]:
        return list(self._context.registered_broker_ids())

    def _live(self) -> list[int]:
        return self._context.live_broker_ids()

    def _dead(self) -> list[int]:
        registered = set(self._registered())
        return [b for b in self._broker_ids() if b not in registered]

    def _can_take_down(self) -> bool:
        return len(self._dead()) < self._max_down and len(self._live()) > 1

    def _topics(self) -> list[str]:
        context = self._context
        return sorted(t for t in context.topics if not context.is_queued_for_deletion(t))

    def _partitions(self) -> list[TopicPartition]:
        context = self._context
        return [tp for t in self._topics() for tp in context.partitions_of_topic(t)]

    def _led_partitions(self) -> list[TopicPartition]:
        context = self._context
        out = []
        for tp in self._partitions():
            lai = context.leadership(tp)
            if lai is not None and lai.leader >= 0 and context.is_live(lai.leader):
                out.append(tp)
        return out

    # --- faults ---------------------------------------------------------------------

    def _bootstrap(self, draft: _Draft) -> None:
        for broker in self._broker_ids():
            self._emit(
                draft, {"type": "broker_startup", "broker": broker, "rack": self._racks[broker]}
            )
        rf = min(self.spec.rf, self.spec.brokers)
        for index in range(self.spec.topics):
            self._emit(
                draft,
                {"type": "topic_creation", "topic": f"chaos-{index}",
                 "partitions": self.spec.partitions, "replication_factor": rf},
            )  # fmt: skip

    def _broker_crash(self, draft: _Draft) -> None:
        if not self._can_take_down():
            self._broker_restart(draft)
            return
        broker = self._rng.choice(self._registered())
        self._emit(draft, {"type": "broker_failure", "broker": broker})

    def _broker_restart(self, draft: _Draft) -> None:
        dead = self._dead()
        # a dead broker comes back; with none dead, a live one bounces
        broker = self._rng.choice(dead or self._registered())
        self._emit(draft, {"type": "broker_startup", "broker": broker, "rack": self._racks[broker]})

    def _rolling_restart(self, draft: _Draft) -> None:
        for broker in self._registered():
            if broker not in self._registered():
                continue
            self._stop_gracefully(draft, broker)
            self._emit(
                draft, {"type": "broker_startup", "broker": broker, "rack": self._racks[broker]}
            )

    def _controlled_shutdown(self, draft: _Draft) -> None:
        if not self._can_take_down():
            self._broker_restart(draft)
            return
        self._stop_gracefully(draft, self._rng.choice(self._live()))

    def _stop_gracefully(self, draft: _Draft, broker: int) -> None:
        body: Event = {"type": "controlled_shutdown", "broker": broker}
        if self._rng.random() < 0.5:
            body["broker_epoch"] = self._context.brokers[broker].epoch
        self._emit(draft, body)
        self._emit(draft, {"type": "broker_failure", "broker": broker})

    def _reassignment_wave(self, draft: _Draft) -> None:
        partitions = self._partitions()
        live = self._live()
        if not partitions or not live:
            return
        chosen = self._rng.sample(partitions, min(len(partitions), self._rng.randint(1, 5)))
        for tp in chosen:
            size = min(len(self._context.assignment(tp).replicas), len(live))
            target = self._rng.sample(live, size)
            self._emit(
                draft,
                {"type": "partition_reassignment", "topic": tp.topic,
                 "partition": tp.partition, "replicas": target},
            )  # fmt: skip
        if self._rng.random() < 0.25:
            tp = self._rng.choice(chosen)
            self._emit(
                draft,
                {"type": "partition_reassignment", "topic": tp.topic,
                 "partition": tp.partition, "replicas": None},
            )  # fmt: skip

    def _topic_churn(self, draft: _Draft) -> None:
        topics = self._topics()
        roll = self._rng.random()
        # keep between `topics` and twice as many: create below, delete above
        if len(topics) < self.spec.topics:
            roll = 0.0
        elif len(topics) >= 2 * self.spec.topics:
            roll = 0.5
        if roll < 0.4 or not topics:
            live = self._live()
            if not live:
                return
            self._churn += 1
            self._emit(
                draft,
                {"type": "topic_creation", "topic": f"churn-{self._churn}",
                 "partitions": self._rng.randint(1, self.spec.partitions),
                 "replication_factor": min(self.spec.rf, len(self._registered()))},
            )  # fmt: skip
        elif roll < 0.75 and len(topics) > 1:
            self._emit(draft, {"type": "topic_deletion", "topic": self._rng.choice(topics)})
        else:
            # CreatePartitions refuses a topic being deleted or being reassigned
            context = self._context
            growable = [
                t
                for t in topics
                if not context.is_queued_for_deletion(t)
                and not context.has_reassignment_in_progress(t)
            ]
            live = self._live()
            if not live or not growable:
                return
            topic = self._rng.choice(growable)
            first = len(self._context.topics[topic].partitions)
            # new partitions keep partition 0's replication factor, as CreatePartitions wants
            size = len(self._context.assignment(TopicPartition(topic, 0)).replicas)
            if len(live) < size:
                return
            assignment = {
                str(first + i): self._rng.sample(live, size) for i in range(self._rng.randint(1, 2))
            }
            self._emit(
                draft, {"type": "partition_creation", "topic": topic, "assignment": assignment}
            )

    def _isr_flap(self, draft: _Draft) -> None:
        context = self._context
        candidates = [
            tp
            for tp in self._led_partitions()
            if len(context.leadership(tp).isr) > 1  # type: ignore[union-attr]
        ]
        if not candidates:
            return
        tp = self._rng.choice(candidates)
        lai = context.leadership(tp)
        assert lai is not None
        if not self._emit(draft, self._isr_change(tp, (lai.leader,))):
            return
        # the followers catch up again: the leader, then every live replica in order
        followers = tuple(
            b for b in context.assignment(tp).replicas if b != lai.leader and context.is_live(b)
        )
        if followers:
            self._emit(draft, self._isr_change(tp, (lai.leader, *followers)))

    def _preferred_election(self, draft: _Draft) -> None:
        context = self._context
        off_preferred = [
            tp
            for tp in self._partitions()
            if (lai := context.leadership(tp)) is not None
            and lai.leader != context.assignment(tp).replicas[0]
        ]
        body: Event = {"type": "leader_election", "election": "preferred"}
        if off_preferred and self._rng.random() < 0.7:
            chosen = self._rng.sample(off_preferred, min(3, len(off_preferred)))
            body["partitions"] = [{"topic": tp.topic, "partition": tp.partition} for tp in chosen]
        self._emit(draft, body)

    def _unclean_election(self, draft: _Draft) -> None:
        context = self._context
        offline = [
            tp
            for tp in self._partitions()
            if (lai := context.leadership(tp)) is None or lai.leader < 0
        ]
        if offline and self._rng.random() < 0.5:
            # let one topic accept data loss first, as an operator would
            topic = self._rng.choice(offline).topic
            self._emit(
                draft,
                {"type": "topic_config_change", "topic": topic, "configs": {UNCLEAN_KEY: True}},
            )
        body: Event = {"type": "leader_election", "election": "unclean"}
        if offline:
            chosen = self._rng.sample(offline, min(3, len(offline)))
            body["partitions"] = [{"topic": tp.topic, "partition": tp.partition} for tp in chosen]
        self._emit(draft, body)

    def _auto_rebalance_check(self, draft: _Draft) -> None:
        self._emit(draft, {"type": "auto_rebalance_check"})

    def _controller_failover(self, draft: _Draft) -> None:
        registered = self._registered()
        if not registered:
            return
        body: Event = {"type": "controller_failover", "controller": self._rng.choice(registered)}
        old = self._context.controller_id
        # sometimes the old controller's broker goes down with it
        if (
            old is not None
            and old in registered
            and old != body["controller"]
            and self._can_take_down()
            and self._rng.random() < 0.4
        ):
            body["failed_brokers"] = [old]
        self._emit(draft, body)


# Replica states whose broker fetches from the leader, so it can rejoin the ISR.
_CATCHING_UP = frozenset({ReplicaState.NEW, ReplicaState.ONLINE})
_ANSWER_ROUNDS = 5
# Broker answers themselves never trigger another round of answers from inside _emit.
_ANSWERS = frozenset({"stop_replica_response", "isr_change"})


# ------------------------------------------------------------------------- records


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


def chaos_records(generator: ChaosGenerator) -> Iterator[Record]:
    return (event_record(e) for e in generator.events())


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
    parser.add_argument("--topic", required=True)
    parser.add_argument(
        "--command-config",
        "--kafka-config",
        dest="kafka_config",
        type=Path,
        metavar="FILE",
        help="Kafka client properties (security.protocol, sasl.*, ssl.*)",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--scenario", type=Path, metavar="FILE|DIR", help="JSON-lines events")
    source.add_argument("--chaos", action="store_true", help="seeded random faults")
    parser.add_argument("--rate", type=_positive_float, metavar="EVENTS_PER_S")
    parser.add_argument("--count", type=positive_int, metavar="N", help="stop after N events")
    parser.add_argument("--duration", type=_positive_float, metavar="S", help="stop after S s")
    parser.add_argument("--seed", type=int, default=1, help="chaos: random seed (default 1)")
    spec = ClusterSpec()
    parser.add_argument("--cluster", default=spec.name, help="chaos: cluster name")
    parser.add_argument("--brokers", type=positive_int, default=spec.brokers)
    parser.add_argument("--topics", type=positive_int, default=spec.topics)
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
    return 0


__all__ = [
    "FAULT_KINDS",
    "ChaosGenerator",
    "ClusterSpec",
    "Fault",
    "Limits",
    "Record",
    "chaos_records",
    "event_record",
    "make_producer",
    "produce",
    "scenario_records",
]
