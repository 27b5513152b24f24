"""`kcsim shadow --metadata-log DIR --bootstrap-server HOST:PORT`: follow a KRaft cluster
by tailing one node's `__cluster_metadata-0` directory (SPEC-KRAFT §23).

Each poll (about once a second) asks the quorum for its high watermark
(DescribeMetadataQuorum, kafka-python's admin client) and reads the log's whole batches
below it (`metadata_log_tail`, one long-lived JVM decoding with Kafka's own classes):
a record is applied only once the quorum committed it. Nothing below the high watermark
is ever truncated, so an uncommitted tail that a new quorum leader cuts, and a partial
batch being written, are never read. The records go through `KraftLogModel` (the pure
model `kcsim import kraft-log` uses), whose events are written out as the ZooKeeper
shadow writes its own (`outputs`: a file directory or a Kafka topic).

Start: the newest snapshot and the segments after it (or the whole log when it starts at
offset 0 and has no snapshot). Segments roll (the next `<base offset>.log`, read from its
start) and old ones are deleted after a snapshot (a deleted segment the shadow has
passed is nothing to it). One it still needed (the shadow was away longer than the log's
retention) loses it its place: it restarts from the newest snapshot and compares
(SPEC-KRAFT §23.5), the model's resync: a `controller_failover` observing the whole state,
so that a replay shows what the lost records changed as divergences.

Restart, exactly once: the shadow saves its position (segment, byte position, next
offset) and its model (`KraftLogModel.to_json`, versioned JSON, beside the output by
default) after the events they follow from are out: while events are written at most
every 10 s (or 20 times the last save's duration, for a large cluster), every 60 s
otherwise, and at a clean stop. A restarted shadow loads them and
reads on from there; the output already holds the events the re-read makes again (a
kill after writes the state does not cover yet), with the same `seq`, and those are
skipped. The first start saves its starting point before anything is written, so a stop
during the first write restarts from the same snapshot.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import KafkaError

from controller.config import KRAFT, Settings
from controller.kraft.settings import ELR_VERSION_KEY, METADATA_VERSIONS
from streaming.clients.kafka_config import KafkaClientConfig
from streaming.importers.kraft_log_model import Event, KraftLogModel
from streaming.metrics import Metrics
from streaming.shadow.metadata_log_tail import (
    Batch,
    LogTail,
    TailError,
    segments,
    snapshots,
)
from streaming.shadow.outputs import EventOutput, write_state

POLL_S = 1.0
# the position alone (NoOps, no event) is saved at most this often: a restart re-reads
# at most this much, and a large cluster's model is not written every second
SAVE_EVERY_S = 60.0
# after a poll that wrote events, the state is saved if the last save is this old, and
# at least 20 times as old as that save took (a save costs at most 5 % of the time): a
# restart re-reads (and skips, by `seq`) what came after it. 100k partitions make a 6 MB
# state, 0.3-0.5 s of CPU to write (0.8-3.6 s of wall time on a loaded machine;
# docs/performance.md): too much for every second's poll.
SAVE_EVENTS_EVERY_S = 10.0
SAVE_SHARE = 20
BACKOFF_MAX_S = 30.0
# a bootstrap that does not answer is said (and retried) after 5 s, not the clients' 15 s
QUORUM_TIMEOUTS = {"bootstrap_timeout_ms": 5_000, "request_timeout_ms": 5_000}
STATE_VERSION = 2  # 2: the model as `KraftLogModel.to_json` (1 pickled it)
KAFKA_RELEASE = (4, 1)
METADATA_VERSION_KEY = "metadata.version"
_LEVEL_NAMES = {level: name for name, level in METADATA_VERSIONS.items()}


@dataclass(frozen=True, slots=True)
class Quorum:
    high_watermark: int
    leader: int
    epoch: int
    # each voter's and observer's log end offset as the quorum leader knows it: how far
    # that node's log agrees with the leader's (-1: not fetched from this leader yet)
    ends: dict[int, int]

    def readable(self, node: int | None) -> int:
        """The offset below which `node`'s log is committed and the leader's: a node cut
        off from the quorum (an old leader) may hold uncommitted records of its own at
        offsets the new leader has committed others at, until it fetches again."""
        if node is None:
            return self.high_watermark
        return min(self.high_watermark, self.ends.get(node, -1))


class QuorumWatch:
    """DescribeMetadataQuorum through kafka-python's admin client (API key 55, which it
    implements): no JVM, the same client properties (`--command-config`) as the output."""

    def __init__(self, bootstrap: str, config: KafkaClientConfig) -> None:
        self.bootstrap, self.config = bootstrap, config
        self._admin: KafkaAdminClient | None = None

    def describe(self) -> Quorum:
        if self._admin is None:
            self._admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap,
                client_id="kcsim-shadow",
                **(self.config.kafka_python() | QUORUM_TIMEOUTS),
            )
        try:
            answer = self._admin.describe_metadata_quorum()
        except Exception:
            self.close()  # a fresh client at the next try: its connections may be stale
            raise
        partition = answer["topics"][0]["partitions"][0]
        if partition.get("error"):
            raise KafkaError(f"DescribeMetadataQuorum: {partition['error']}")
        replicas = list(partition.get("current_voters") or []) + list(
            partition.get("observers") or []
        )
        return Quorum(
            int(partition["high_watermark"]),
            int(partition["leader_id"]),
            int(partition["leader_epoch"]),
            {int(r["replica_id"]): int(r["log_end_offset"]) for r in replicas},
        )

    def kafka_release(self) -> tuple[int, ...] | None:
        """The Kafka release the bootstrap broker's API versions match (kafka-python's
        inference), None when unknown."""
        if self._admin is None:
            return None
        try:
            version = self._admin._manager.broker_version_data.broker_version
        except AttributeError:
            return None
        return tuple(version) if version else None

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            finally:
                self._admin = None


@dataclass(slots=True)
class Position:
    """Where the shadow reads next: a snapshot still to load, or a segment position."""

    snapshot: str | None  # the snapshot file of the start, until it is loaded
    segment: int  # the base offset of the segment being read
    position: int  # byte position in it
    offset: int  # the next offset to apply

    def to_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot,
            "segment": self.segment,
            "position": self.position,
            "offset": self.offset,
        }


def node_of(directory: Path) -> int | None:
    """The node whose log this is: `node.id` of the `meta.properties` beside it (Kafka
    writes one in every log directory); None when there is none (a copied log)."""
    try:
        text = (directory.parent / "meta.properties").read_text(encoding="latin-1")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "node.id" and value.strip().lstrip("-").isdigit():
            return int(value.strip())
    return None


def start_position(directory: Path) -> Position:
    """The newest snapshot and the segments after it; the whole log when it starts at 0
    with no snapshot."""
    snaps = snapshots(directory)
    segs = segments(directory)
    if snaps:
        end, path = snaps[-1]
        return Position(path.name, _segment_of(directory, end), 0, end)
    if segs and segs[0][0] == 0:
        return Position(None, 0, 0, 0)
    first = segs[0][0] if segs else None
    raise TailError(
        f"{directory}: the segments start at offset {first} and no snapshot covers the "
        "records before it"
    )


def _segment_of(directory: Path, offset: int) -> int:
    """The base offset of the segment holding `offset` (or starting at it)."""
    bases = [base for base, _ in segments(directory) if base <= offset]
    if not bases:
        # a snapshot past every segment: the log continues at its end offset
        return offset
    return bases[-1]


class KraftShadow:
    def __init__(
        self,
        directory: Path,
        tail: LogTail,
        sink: EventOutput,
        state_path: Path,
        cluster: str,
        say: Callable[[str], None],
        settings: Settings | None = None,
    ) -> None:
        self.directory, self.tail, self.sink = directory, tail, sink
        self.expected = expected_levels(settings or Settings(engine=KRAFT))
        self.state_path, self.cluster, self.say = state_path, cluster, say
        self.written_seq = sink.last_seq(cluster)
        self.emitted = 0
        self.last_ts: int | None = None  # the append time (ms) of the last record applied
        self.counted_at = -1  # the offset at which the metrics last counted the partitions
        self.features: dict[str, int] = {}
        self.reported: dict[str, int] = {}
        self.saved_at = time.monotonic()
        self.save_s = 0.0  # how long the last save took
        self.model, self.at = self._load()
        self.unexplained = self.model.counts.unexplained  # said so far

    def _load(self) -> tuple[KraftLogModel, Position]:
        if self.state_path.exists():
            saved = json.loads(self.state_path.read_text(encoding="utf-8"))
            if saved.get("kind") != "kraft":
                raise TailError(
                    f"{self.state_path}: not a saved KRaft shadow state (give another --state)"
                )
            if saved.get("version") != STATE_VERSION:
                raise TailError(
                    f"{self.state_path}: a KRaft shadow state of version "
                    f"{saved.get('version')!r}, which this kcsim (version {STATE_VERSION}) "
                    "cannot read: start again with a fresh --state and output"
                )
            self.features = dict(saved.get("features", {}))
            try:
                model = KraftLogModel.from_json(saved["model"])
            except (ValueError, KeyError, TypeError, IndexError) as error:
                raise TailError(
                    f"{self.state_path}: the saved model cannot be loaded by this kcsim "
                    f"({error!r}): start again with a fresh --state and output"
                ) from None
            return model, Position(**saved["at"])
        if self.written_seq:
            raise TailError(
                f"the output already holds events of cluster {self.cluster!r} "
                f"(up to seq {self.written_seq}) but the saved state {self.state_path} is "
                "missing: give --state, or a fresh output"
            )
        model, at = KraftLogModel(self.cluster), start_position(self.directory)
        self._save(model, at)
        return model, at

    def _save(self, model: KraftLogModel, at: Position) -> None:
        """The position and the model, written whole (atomically: a stop mid-write leaves
        the previous state). Only after the events they follow from are out."""
        began = time.monotonic()
        write_state(
            self.state_path,
            {
                "kind": "kraft",
                "version": STATE_VERSION,
                "cluster": self.cluster,
                "directory": str(self.directory),
                "at": at.to_json(),
                "features": self.features,
                "model": model.to_json(),
            },
        )
        self.saved_at = time.monotonic()
        self.save_s = self.saved_at - began

    # ------------------------------------------------------------ reading

    def poll(self, high_watermark: int) -> int:
        """Apply every committed record not yet applied; write their events. Returns the
        number of events written."""
        events: list[Event] = []
        while True:
            if self.at.snapshot is not None:
                events += self._load_snapshot(self.at.snapshot)
            path = self.directory / f"{self.at.segment:020d}.log"
            batches, end = self.tail.read(
                path, self.at.position, below=high_watermark, start=self.at.offset
            )
            for batch in batches:
                events += self._feed(batch)
            self.at.position = end.position
            if end.stop == "max":
                continue
            if end.stop == "corrupt":
                raise TailError(f"{path}: position {end.position}: {end.detail}")
            if end.stop == "missing":
                found, resync = self._find_segment(path)
                events += resync
                if not found:
                    break
                continue
            if end.stop in ("eof", "partial") and self._next_segment():
                continue
            break  # "limit": the rest is not committed yet; or the end of the log
        events += self.model.finish()
        self._check_features()
        self._say_unexplained()
        return self._write(events)

    def _say_unexplained(self) -> None:
        """Partition changes no event could be named for are never dropped unsaid."""
        count = self.model.counts.unexplained
        notes, self.model.unexplained_notes = self.model.unexplained_notes, []
        if count > self.unexplained:
            self.say(
                f"{count - self.unexplained} partition changes no event explains "
                f"(up to offset {self.at.offset}; {count} in all): they are not in the output"
            )
            for note in notes:  # what they were, so that a log deleted since still tells
                self.say(f"  {note}")
            if count - self.unexplained > len(notes):
                self.say(f"  ({count - self.unexplained - len(notes)} more not described)")
            self.unexplained = count

    def _feed(self, batch: Batch) -> list[Event]:
        if batch.base > self.at.offset:
            raise TailError(
                f"{batch.path}: position {batch.position}: offset {batch.base} where "
                f"{self.at.offset} was due"
            )
        out: list[Event] = []
        for record in batch.records:
            if record.offset < self.at.offset:
                continue  # the start's batch holding the snapshot's end offset
            if record.type == "FEATURE_LEVEL_RECORD":
                self.features[str(record.data["name"])] = int(record.data["featureLevel"])
            out += self.model.feed(record)
            self.last_ts = record.ts
        self.at.position = batch.position + batch.size
        self.at.offset = batch.last + 1
        return out

    def _load_snapshot(self, name: str) -> list[Event]:
        path = self.directory / name
        end_offset = int(name[:20])
        events: list[Event] = []
        position = 0
        while True:
            batches, end = self.tail.read(path, position, snapshot_end=end_offset)
            for batch in batches:
                for record in batch.records:
                    if record.type == "FEATURE_LEVEL_RECORD":
                        self.features[str(record.data["name"])] = int(record.data["featureLevel"])
                    events += self.model.feed(record)
            position = end.position
            if end.stop == "max":
                continue
            if end.stop == "missing":
                raise TailError(
                    f"{path}: the snapshot the shadow starts from was deleted before it was "
                    "read: start again with a fresh --state and output"
                )
            if end.stop != "eof":
                why = end.detail or "the snapshot ends in a partial batch"
                raise TailError(f"{path}: position {end.position}: {why}")
            break
        self.at = Position(None, _segment_of(self.directory, end_offset), 0, end_offset)
        return events

    def _next_segment(self) -> bool:
        """At the end of a segment: move to the next one if the log rolled."""
        later = [base for base, _ in segments(self.directory) if base > self.at.segment]
        if not later:
            return False
        if later[0] != self.at.offset:
            # the next segment starts further on: what this one still had is not whole
            raise TailError(
                f"{self.directory}: segment {self.at.segment:020d}.log ends before offset "
                f"{self.at.offset} and the next one starts at {later[0]}"
            )
        self.at = Position(None, later[0], 0, self.at.offset)
        return True

    def _find_segment(self, missing: Path) -> tuple[bool, list[Event]]:
        """The segment being read is gone (deleted after a snapshot, or renamed to
        `.deleted` for deletion): read on from the segment holding the next offset. When
        the log now starts past it (the shadow was away longer than the log's retention),
        restart from the newest snapshot and compare (SPEC-KRAFT §23.5): the model's
        resync. Returns whether to read on, and the events of the batch being read."""
        bases = [base for base, _ in segments(self.directory)]
        holding = [base for base in bases if base <= self.at.offset]
        if holding:
            self.at = Position(None, holding[-1], 0, self.at.offset)
            return True, []
        if not bases:
            return False, []  # no segment at all right now (a node being re-formatted): wait
        covering = [(end, path) for end, path in snapshots(self.directory) if end >= bases[0]]
        if not covering:
            raise TailError(
                f"{missing}: deleted before the shadow read it; the log now starts at offset "
                f"{bases[0]}, past the next offset to apply ({self.at.offset}), and no "
                "snapshot covers the records between: start again with a fresh --state "
                "and output"
            )
        end, path = covering[-1]
        self.say(
            f"warning: {missing.name} was deleted before the shadow read it: offsets "
            f"{self.at.offset} to {bases[0] - 1} are lost to it; resuming from snapshot "
            f"{path.name}, whose whole state is written as observed (a replay shows what "
            "the lost records changed as divergences)"
        )
        events = self.model.resync()
        # a kill between saves: the output holds events past the saved state's; they
        # happened, and the resync comes after them, under new `seq`s
        self.model.seq = max(self.model.seq, self.written_seq)
        self.at = Position(path.name, _segment_of(self.directory, end), 0, end)
        return True, events

    # ------------------------------------------------------------ writing

    def _write(self, events: list[Event]) -> int:
        fresh = [e for e in events if e.get("seq", self.written_seq + 1) > self.written_seq]
        if fresh:
            self.sink.write(fresh)
            self.written_seq = max(self.written_seq, *(e.get("seq", 0) for e in fresh))
            self.emitted += len(fresh)
        since = time.monotonic() - self.saved_at
        due = max(SAVE_EVENTS_EVERY_S, SAVE_SHARE * self.save_s)
        if since >= max(SAVE_EVERY_S, due) or (events and since >= due):
            self._save(self.model, self.at)
        return len(fresh)

    def close(self) -> None:
        """A clean stop (SIGTERM, SIGINT, `--once`): the state saved where the shadow is."""
        self._save(self.model, self.at)

    def _check_features(self) -> None:
        """metadata.version and the ELR level against the settings (`--set`, `--config`;
        the kraft engine's defaults), said once per level seen."""
        for name, default in self.expected.items():
            level = self.features.get(name)
            if level is None or level == default or self.reported.get(name) == level:
                continue
            self.reported[name] = level
            shown = self._shown(name, level)
            self.say(
                f"warning: the cluster's {name} is {shown}, not the settings' "
                f"{self._shown(name, default)}: replay its events with --set {name}={shown}"
            )

    @staticmethod
    def _shown(name: str, level: int) -> str:
        if name == METADATA_VERSION_KEY:
            return _LEVEL_NAMES.get(level, f"level {level}")
        return str(level)


def expected_levels(settings: Settings) -> dict[str, int]:
    """The feature levels the settings simulate: what the cluster's should be."""
    return {
        METADATA_VERSION_KEY: METADATA_VERSIONS[settings.metadata_version],
        ELR_VERSION_KEY: settings.eligible_leader_replicas_version,
    }


def check_release(release: tuple[int, ...] | None, say: Callable[[str], None]) -> None:
    if release is None:
        say("warning: the cluster's Kafka release could not be told from its API versions")
    elif tuple(release[:2]) != KAFKA_RELEASE:
        shown = ".".join(str(x) for x in release)
        say(
            f"warning: the cluster runs Kafka {shown}, not 4.1.x: the kraft engine simulates "
            "Kafka 4.1.1's controller, and its records may not decode or replay alike"
        )


def report(
    shadow: KraftShadow,
    metrics: Metrics | None,
    written: int,
    committed: int,
    seconds: float,
    say: Callable[[str], None] | None,
) -> None:
    """One poll's progress: a line when it wrote events (unless quiet), and the metrics
    (events written, lag behind the committed offset in records and in seconds since the
    last record applied, the poll's duration, the offline and at-min-ISR partitions)."""
    if say is not None and written:
        say(f"{written} events written ({shadow.emitted} so far), at offset "
            f"{shadow.at.offset} of {committed} committed")  # fmt: skip
    if metrics is None:
        return
    cluster = shadow.cluster
    behind = max(0, committed - shadow.at.offset)
    lag_s = 0.0
    if behind and shadow.last_ts is not None:
        lag_s = max(0.0, time.time() - shadow.last_ts / 1000)
    metrics.events(cluster, applied=written)
    metrics.lag(cluster, lag_s, behind)
    metrics.batch(seconds)
    if shadow.at.offset == shadow.counted_at:
        return  # no record applied since the last count: the partitions are as counted
    shadow.counted_at = shadow.at.offset
    model = shadow.model
    offline = at_min = 0
    for (topic, _), state in model.partitions.items():
        offline += state.leader < 0
        configured = model.configs.get(topic, {}).get("min.insync.replicas")
        at_min += len(state.isr) <= int(configured or 1)
    metrics.partitions(cluster, offline=offline, at_min_isr=at_min)


def follow(
    shadow: KraftShadow,
    quorum: QuorumWatch,
    *,
    once: bool,
    stop: Callable[[], bool],
    say: Callable[[str], None],
    explain: Callable[[Exception], str] = str,
    poll_s: float = POLL_S,
    metrics: Metrics | None = None,
    progress: bool = False,
) -> None:
    """Poll until `stop()` (or once). A quorum that does not answer is said and waited
    for, backing off up to 30 s between tries."""
    backoff = poll_s
    released = False
    node = node_of(shadow.directory)
    if node is None:
        say(
            f"warning: no meta.properties beside {shadow.directory}: which node's log this "
            "is cannot be told, so records are applied below the high watermark without "
            "checking that this node's log agrees with the quorum leader's"
        )
    waiting = False
    while not stop():
        started = time.monotonic()
        try:
            described = quorum.describe()
        except (KafkaError, OSError, ValueError) as error:
            say(
                f"DescribeMetadataQuorum at {quorum.bootstrap} did not answer "
                f"({explain(error)}); retrying in {backoff:.0f} s"
            )
            _wait(backoff, stop)
            backoff = min(BACKOFF_MAX_S, backoff * 2)
            continue
        if backoff > poll_s:
            say(f"DescribeMetadataQuorum at {quorum.bootstrap} answers again")
        backoff = poll_s
        if not released:
            check_release(quorum.kafka_release(), say)
            released = True
        readable = described.readable(node)
        if readable < 0 and not waiting:
            say(
                f"node {node} has not fetched from quorum leader {described.leader} yet "
                "(its log may hold records the quorum did not keep): waiting for it"
            )
        waiting = readable < 0
        written = shadow.poll(readable)
        report(shadow, metrics, written, described.high_watermark,
               time.monotonic() - started, say if progress else None)  # fmt: skip
        if once:
            return
        _wait(poll_s - (time.monotonic() - started), stop)


def _wait(seconds: float, stop: Callable[[], bool]) -> None:
    deadline = time.monotonic() + max(0.0, seconds)
    while not stop() and time.monotonic() < deadline:
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def say(text: str) -> None:
    print(f"kcsim shadow: {text}", file=sys.stderr, flush=True)


def run_kraft(
    args: argparse.Namespace,
    sink: EventOutput,
    default_state: Path,
    config: KafkaClientConfig,
    explain: Callable[[Exception], str] = str,
) -> int:
    """`kcsim shadow --metadata-log`: exit 0 when stopped (SIGINT, SIGTERM) or after
    `--once`, 2 when the log cannot be read (its file and position said)."""
    stopped = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stopped.set()

    metrics = Metrics("shadow") if getattr(args, "metrics_port", None) is not None else None
    try:
        port = metrics.serve(args.metrics_port) if metrics is not None else None
    except OSError as error:
        say(f"--metrics-port {args.metrics_port}: {error}")
        return 2
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    quorum = QuorumWatch(args.bootstrap, config)
    state = args.state or default_state
    if not args.quiet:
        where = f"; metrics on http://127.0.0.1:{port}/metrics" if port is not None else ""
        say(
            f"following the KRaft metadata log {args.metadata_log} of {args.bootstrap} as "
            f"cluster {args.cluster!r}; writing to {args.out}; state in {state}{where}"
        )
    try:
        with LogTail() as tail:
            shadow = KraftShadow(
                args.metadata_log,
                tail,
                sink,
                state,
                args.cluster,
                say,
                getattr(args, "settings", None),
            )
            follow(shadow, quorum, once=args.once, stop=stopped.is_set, say=say,
                   explain=explain, metrics=metrics, progress=not args.quiet)  # fmt: skip
            shadow.close()
    except TailError as error:
        say(str(error))
        return 2
    finally:
        quorum.close()
        if metrics is not None:
            metrics.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not args.quiet:
        say(f"stopped: {shadow.emitted} events written, at offset {shadow.at.offset}")
    return 0
