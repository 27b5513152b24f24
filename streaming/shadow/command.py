"""`kcsim shadow`: watch a Kafka cluster (ZooKeeper mode, or KRaft through `kraft_shadow`)
and write its changes as events.

The znodes are read with kazoo (sessions, reconnects, watches) and never written: this
module calls only get, get_children and exists. `streaming/shadow/model.py` turns what
is read into CONTRACT §1 events carrying `observed`; this module reads, waits for the
controller's writes to settle, and writes the events out:

* `--out file:DIR`: one JSON-lines file per flush, written under a hidden temporary name
  and renamed, named by its first `seq` so name order is event order;
* `--out kafka:BOOTSTRAP/TOPIC`: `streaming/shadow/kafka_output.py`, a kafka-python producer
  keyed by cluster, acks=all, idempotent; an event counts as written once acknowledged.

Restart: the model's view of the cluster is saved after every flush (`--state`, by
default beside the output: a hidden file in its directory, or for a Kafka output a file
under `$XDG_STATE_HOME/kcsim/` named by the bootstrap, topic and cluster), after the events
are out. A restarted
shadow loads it, re-reads ZooKeeper, emits the differences, and skips any event whose
`seq` is not above the last one written (an output that got ahead of the saved state).
The first start saves the model with its bootstrap's events before writing them, so a
restart after a stop in between writes the rest of that bootstrap, each event once.
A lost connection or ZooKeeper session is handled the same way: kazoo reconnects (for as
long as it takes), and once connected the shadow re-reads everything, re-arming its watches
(kazoo forgets them on a disconnection; a new session never had them), and emits what
changed meanwhile.

Every event carries `ts`, the time ZooKeeper committed its cause (`ZxidTimes`). The
shadow says what it does on stderr (unless `--quiet`): a start line, a line per flush and
a summary when it stops (SIGINT or SIGTERM, after writing what is pending). With
`--metrics-port` it serves Prometheus metrics (`streaming.metrics`).
"""

from __future__ import annotations

import argparse
import json
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka.errors import KafkaError
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionLoss,
    NoAuthError,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.protocol.states import KeeperState

from controller.config import ConfigError
from streaming.clients.kafka_address import kafka_target
from streaming.clients.kafka_config import ClientFailures, KafkaClientConfig, add_command_config
from streaming.clients.zookeeper_config import ZooKeeperClientConfig
from streaming.metrics import Metrics
from streaming.shadow.kafka_output import OutputError
from streaming.shadow.kraft_shadow import run_kraft
from streaming.shadow.metadata_log_tail import TailError, check_directory
from streaming.shadow.model import Event, ShadowModel
from streaming.shadow.outputs import EventOutput, open_output, save_state
from streaming.shadow.zk_failures import ZooKeeperFailures
from streaming.shadow.znode_reader import (
    Reader,
    ZxidTimes,
    changes_for,
    event_zxid,
    version_warnings,
)

DEFAULT_SETTLE_MS = 500
# Pending causes are written out at the latest after this, even if writes never pause.
MAX_HOLD_MS = 10_000
RESYNC = "*resync*"
# the connection was refused for good (kazoo stopped connecting): the loop ends with an error
REFUSED = "*refused*"
# kazoo's default gives up reconnecting after one retry (the client is then closed for
# good): the shadow retries for ever, backing off up to 5 s between attempts
CONNECTION_RETRY = {"max_tries": -1, "delay": 0.2, "max_delay": 5.0}


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--zookeeper", help="a ZooKeeper-mode cluster: HOST:PORT[,HOST:PORT...][/chroot]"
    )
    source.add_argument(
        "--metadata-log",
        type=Path,
        metavar="DIR",
        help="a KRaft cluster: one node's __cluster_metadata-0 directory (read only); "
        "needs --bootstrap-server",
    )
    parser.add_argument(
        "--out",
        metavar="file:DIR|kafka:HOST:PORT/TOPIC",
        help="where the events go (or --bootstrap-server with --topic)",
    )
    parser.add_argument(
        "--bootstrap-server",
        dest="bootstrap",
        metavar="HOST:PORT",
        help="with --metadata-log: the KRaft cluster, asked for the quorum's high watermark "
        "(DescribeMetadataQuorum) about once a second; with --topic: the cluster written to",
    )
    parser.add_argument("--topic", help="the same as --out kafka:BOOTSTRAP/TOPIC")
    parser.add_argument("--cluster", default="default", help="the events' cluster name")
    parser.add_argument("--once", action="store_true", help="write the present state and stop")
    parser.add_argument(
        "--settle-ms",
        type=int,
        default=DEFAULT_SETTLE_MS,
        help="a cause is written once no partition state changed for this long, in ms "
        f"(default {DEFAULT_SETTLE_MS})",
    )
    parser.add_argument(
        "--state", type=Path, help="the shadow's saved view (default: beside --out)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on 127.0.0.1:PORT/metrics (default: none)",
    )
    parser.add_argument(
        "--zookeeper-config",
        type=Path,
        metavar="FILE",
        help="ZooKeeper client auth: digest, sasl.*, ssl.* "
        "(see streaming/clients/zookeeper_config.py)",
    )
    add_command_config(parser, " for --bootstrap-server and --out kafka:")


# ------------------------------------------------------------------------ running


class Shadow:
    def __init__(
        self,
        client: KazooClient,
        sink: EventOutput,
        state_path: Path,
        cluster: str,
        log: Callable[[str], None] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.client, self.sink, self.state_path, self.cluster = client, sink, state_path, cluster
        self.log = log or (lambda line: None)
        self.metrics = metrics
        self.fired: queue.Queue[str] = queue.Queue()
        self.times = ZxidTimes()
        self.reader = Reader(client, self._on_watch, self.times)
        self.flushes = 0
        self.started_at = time.monotonic()
        self.written_seq = sink.last_seq(cluster)
        # the bootstrap's events, when a start was stopped before it had written them all
        self.unwritten: list[Event] = []
        self.model = self._load()
        self.emitted = 0

    def _load(self) -> ShadowModel:
        if self.state_path.exists():
            saved = json.loads(self.state_path.read_text(encoding="utf-8"))
            self.unwritten = saved.get("unwritten", [])
            return ShadowModel.from_json(saved)
        if self.written_seq:
            raise RuntimeError(
                f"the output already holds events of cluster {self.cluster!r} "
                f"(up to seq {self.written_seq}) but the saved state {self.state_path} is "
                "missing: give --state, or a fresh output"
            )
        return ShadowModel(self.cluster)

    def _on_watch(self, event: Any) -> None:
        # kazoo calls every watch with no path when the connection drops (it has forgotten
        # them): the re-read on reconnection re-arms them
        if event.path is not None:
            self.fired.put(event.path)

    def on_state(self, state: str) -> None:
        # Called on kazoo's connection thread. Either way, every watch is gone: re-read
        # everything once connected (a resumed session may also have missed notifications).
        if state == KazooState.CONNECTED:
            self.fired.put(RESYNC)
        elif state == KazooState.LOST and self.client.client_state == KeeperState.AUTH_FAILED:
            self.refused()  # kazoo has stopped connecting: no new session will come
        elif state == KazooState.LOST:
            print(
                "kcsim shadow: ZooKeeper session expired: re-reading the cluster once a new "
                "one is up",
                file=sys.stderr,
            )
        elif state == KazooState.SUSPENDED:
            print("kcsim shadow: ZooKeeper connection lost: reconnecting", file=sys.stderr)

    def refused(self) -> None:
        """ZooKeeper refused the session for good (its authentication): `run` ends with
        AuthFailedError instead of waiting for a reconnection that never comes."""
        self.fired.put(REFUSED)

    def once(self) -> None:
        """`--once`: the cluster's present state, written, no watch left."""
        self.sync(watch=False)
        self._write(self.model.flush())

    def finish(self) -> None:
        """Interrupted: write every cause still pending."""
        self._write(self.model.flush(final=True))

    def sync(self, watch: bool) -> None:
        """Read everything (arming watches with `watch`). The first start writes the
        snapshot at once; later, what changed since the model's view (a restart, a
        reconnection) joins the pending causes, written by the next flush."""
        if self.unwritten:
            # a start stopped while writing its bootstrap: what the output lacks of it first
            self._write(self.unwritten)
            self.unwritten = []
        reader = self.reader if watch else Reader(self.client, None, self.times)
        snap = reader.snapshot()
        for warning in version_warnings(snap):
            print(f"kcsim shadow: warning: {warning}", file=sys.stderr)
        if not self.model.started:
            # Saved with its events before they are written: a shadow stopped before the
            # save after them writes, at its restart, those the output does not hold (by
            # seq), rather than a second bootstrap of a cluster that may have changed.
            events = self.model.bootstrap(snap)
            self.times.stamp(events)
            save_state(self.state_path, self.model, unwritten=events)
            self._write(events)
        else:
            self.model.apply(self.model.diff(snap))

    def _read(self, step: Callable[..., None], *args: Any) -> bool:
        """Run a step that reads ZooKeeper; False if the connection dropped under it. Its
        reads all come before it changes the model, so a failed step changed nothing, and
        the reconnection's RESYNC re-reads what it was reading."""
        try:
            step(*args)
        except (ConnectionLoss, SessionExpiredError):
            return False
        return True

    def _apply_fired(self, paths: set[str]) -> None:
        self.model.apply(changes_for(paths, self.reader, self.model))

    def _write(self, events: list[Event]) -> None:
        began = time.monotonic()
        self.times.stamp(events)
        fresh = [e for e in events if e.get("seq", self.written_seq + 1) > self.written_seq]
        if fresh:
            self.sink.write(fresh)
            self.written_seq = max(self.written_seq, *(e.get("seq", 0) for e in fresh))
            self.emitted += len(fresh)
            self.flushes += 1
            self.log(
                f"kcsim shadow: wrote {len(fresh)} events ({_kinds(fresh)}), "
                f"up to seq {self.written_seq}; {self.emitted} in all"
            )
        save_state(self.state_path, self.model)
        self._measure(fresh, time.monotonic() - began)
        # the times of what is written are needed no more (the newest stays: lag, and
        # a later cause known only by a pzxid may take it)
        written = [z for z in map(event_zxid, fresh) if z is not None]
        if written:
            self.times.forget_before(max(written))
        if self.model.unexplained:
            print(
                f"kcsim shadow: {self.model.unexplained} partition state writes with no "
                "cause the shadow could name (their state shows in the next event's observed)",
                file=sys.stderr,
            )
            self.model.unexplained = 0

    def _measure(self, written: list[Event], seconds: float) -> None:
        """The metrics after a flush: events written, lag, partitions as observed."""
        if self.metrics is None:
            return
        metrics, cluster = self.metrics, self.cluster
        zxids = [z for z in map(event_zxid, written) if z is not None]
        if written:
            metrics.events(cluster, applied=len(written))
            metrics.events(cluster, rejected=sum(1 for e in written if "znode_data" in e))
            metrics.batch(seconds)
        newest = max(zxids, default=self.model.last_zxid)
        cluster_ms = self.times.at(newest)
        behind_s = max(0.0, time.time() - cluster_ms / 1000) if cluster_ms and zxids else 0.0
        metrics.lag(cluster, behind_s, max(0, self.model.last_zxid - newest))
        offline = sum(1 for s in self.model.states.values() if s.leader < 0)
        at_min = 0
        for (topic, _), state in self.model.states.items():
            min_isr = self.model.configs.get(topic, {}).get("min.insync.replicas", "1")
            at_min += len(state.isr) <= int(min_isr) if min_isr.isdigit() else 0
        metrics.partitions(cluster, offline=offline, at_min_isr=at_min)

    def summary(self) -> str:
        return (
            f"kcsim shadow: stopped: {self.emitted} events written in {self.flushes} flushes "
            f"over {time.monotonic() - self.started_at:.1f} s, last seq {self.written_seq}; "
            f"state saved in {self.state_path}"
        )

    def run(self, settle_s: float, stop: threading.Event) -> None:
        self.client.add_listener(self.on_state)
        # a restart's differences wait for the settle window too; the view is saved then
        held_since: float | None = time.monotonic() if self._read(self.sync, True) else None
        while not stop.is_set():
            paths: set[str] = set()
            try:
                paths.add(self.fired.get(timeout=settle_s))
                while True:
                    paths.add(self.fired.get_nowait())
            except queue.Empty:
                pass
            if REFUSED in paths:
                raise AuthFailedError("ZooKeeper refused the session's authentication")
            if RESYNC in paths:
                # connected again: every watch is re-armed by reading everything; what
                # changed meanwhile joins the causes still pending, and the settle window
                # goes on (the controller may still be writing)
                read = self._read(self.sync, True)
            elif paths:
                read = self._read(self._apply_fired, paths)
            if paths:
                if not read:
                    continue  # nothing was applied: the re-read on reconnection covers it
                held_since = held_since or time.monotonic()
                if time.monotonic() - held_since < MAX_HOLD_MS / 1000:
                    continue
            # also when changes made no event (a write no cause explains): the saved view
            # must hold them
            if self.model.pending or held_since is not None:
                self._write(self.model.flush())
            held_since = None


def main(args: argparse.Namespace) -> int:
    try:
        args.out = kafka_target(args.out, args.bootstrap, args.topic, "--out", "--topic")
    except ValueError as error:
        print(f"kcsim shadow: {error}", file=sys.stderr)
        return 2
    if args.out is None:
        print("kcsim shadow: give --out file:DIR|kafka:HOST:PORT/TOPIC, or --bootstrap-server "
              "with --topic", file=sys.stderr)  # fmt: skip
        return 2
    try:
        kafka_client = KafkaClientConfig.load(args.kafka_config)
        zookeeper_client = ZooKeeperClientConfig.load(args.zookeeper_config)
    except ConfigError as error:
        print(f"kcsim shadow: {error}", file=sys.stderr)
        return 2
    if args.settle_ms < 0:
        print("kcsim shadow: --settle-ms must not be negative", file=sys.stderr)
        return 2
    if args.metadata_log is not None and args.bootstrap is None:
        print("kcsim shadow: --metadata-log needs --bootstrap-server HOST:PORT (the KRaft "
              "cluster, asked for its committed offset)", file=sys.stderr)  # fmt: skip
        return 2
    if args.metadata_log is None and args.bootstrap is not None and args.topic is None:
        print("kcsim shadow: --bootstrap-server goes with --metadata-log (a KRaft cluster) "
              "or with --topic (the output)", file=sys.stderr)  # fmt: skip
        return 2
    if args.metadata_log is not None:
        try:
            check_directory(args.metadata_log)
        except TailError as error:
            print(f"kcsim shadow: {error}", file=sys.stderr)
            return 2
    with ClientFailures(kafka_client) as failures:
        try:
            sink, default_state = open_output(args.out, args.cluster, kafka_client)
        except ValueError as error:
            print(f"kcsim shadow: {error}", file=sys.stderr)
            return 2
        except KafkaError as error:
            print(f"kcsim shadow: cannot reach Kafka: {failures.explain(error)}", file=sys.stderr)
            return 1
        try:
            if args.metadata_log is not None:
                return run_kraft(args, sink, default_state, kafka_client, failures.explain)
            return _run(args, sink, default_state, zookeeper_client)
        except OutputError as error:
            why = f" ({failures.explain(error.cause)})" if error.cause is not None else ""
            print(f"kcsim shadow: Kafka output failed: {error}{why}", file=sys.stderr)
            return 1
        except KafkaError as error:
            print(f"kcsim shadow: Kafka output failed: {failures.explain(error)}", file=sys.stderr)
            return 1
        finally:
            sink.close()


def _run(
    args: argparse.Namespace, sink: EventOutput, default_state: Path, config: ZooKeeperClientConfig
) -> int:
    with ZooKeeperFailures() as failures:
        # kazoo retries for ever (CONNECTION_RETRY): stop() in `finally` ends its thread
        client = KazooClient(
            hosts=args.zookeeper,
            read_only=True,
            connection_retry=CONNECTION_RETRY,
            **config.kazoo_args(),
        )
        try:
            try:
                client.start(timeout=30)
                # A ZooKeeper that requires SASL closes an unauthenticated session at its
                # first read, and kazoo's connection thread ends: read once here, so that is
                # an error at start, not a shadow waiting for a reconnection that never comes.
                client.exists("/")
            except NoAuthError:  # kazoo checks a chroot's existence at start
                print(_no_auth(args.zookeeper, config), file=sys.stderr)
                return 1
            except Exception as error:  # kazoo's timeout is a generic exception
                why = failures.explain(args.zookeeper, config, error)
                print(f"kcsim shadow: {why}", file=sys.stderr)
                return 1
            return _follow(args, client, sink, default_state, failures)
        except NoAuthError:
            print(_no_auth(args.zookeeper, config), file=sys.stderr)
            return 1
        except (SessionClosedRequireSaslError, AuthFailedError, ConnectionLoss) as error:
            why = failures.explain(args.zookeeper, config, error)
            print(f"kcsim shadow: {why}", file=sys.stderr)
            return 1
        finally:
            client.stop()
            client.close()


def _follow(
    args: argparse.Namespace,
    client: KazooClient,
    sink: EventOutput,
    default_state: Path,
    failures: ZooKeeperFailures,
) -> int:
    stop = threading.Event()
    metrics = Metrics("shadow") if args.metrics_port is not None else None
    try:
        port = metrics.serve(args.metrics_port) if metrics is not None else None
    except OSError as error:
        print(f"kcsim shadow: --metrics-port {args.metrics_port}: {error}", file=sys.stderr)
        return 2
    try:
        state_path = args.state or default_state
        log = None if args.quiet else _stderr
        shadow = Shadow(client, sink, state_path, args.cluster, log, metrics)
        failures.on_refused = shadow.refused
        where = f"metrics on http://127.0.0.1:{port}/metrics; " if metrics else ""
        if not args.quiet:
            print(
                f"kcsim shadow: watching ZooKeeper {args.zookeeper} as cluster "
                f"{args.cluster!r}; writing to {args.out}; state in {state_path}; {where}"
                + ("present state only (--once)" if args.once else "Ctrl-C or SIGTERM stops"),
                file=sys.stderr,
            )
        if args.once:
            shadow.once()
        else:
            # SIGTERM stops as Ctrl-C does: what is pending is written, the view saved
            previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
            try:
                shadow.run(args.settle_ms / 1000, stop)
            except KeyboardInterrupt:
                stop.set()
            finally:
                signal.signal(signal.SIGTERM, previous)
            shadow.finish()
        # closing the session is no loss to report: the listener goes first
        client.remove_listener(shadow.on_state)
        if not args.quiet:
            print(shadow.summary(), file=sys.stderr)
        return 0
    except RuntimeError as error:
        print(f"kcsim shadow: {error}", file=sys.stderr)
        return 2
    finally:
        if metrics is not None:
            metrics.close()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _kinds(events: list[Event]) -> str:
    counts: dict[str, int] = {}
    for event in events:
        counts[str(event.get("type"))] = counts.get(str(event.get("type")), 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _no_auth(zookeeper: str, config: ZooKeeperClientConfig) -> str:
    how = (
        "the credentials of --zookeeper-config are not allowed to read it"
        if config.authenticated
        else "give credentials with --zookeeper-config (digest=USER:PASSWORD or sasl.*)"
    )
    return (
        f"kcsim shadow: ZooKeeper {zookeeper} refused to let the shadow read the cluster's "
        f"znodes (NoAuth: their ACLs deny it): {how}"
    )
