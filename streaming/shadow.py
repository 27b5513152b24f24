"""`kcsim shadow`: watch a ZooKeeper-mode Kafka cluster and write its changes as events.

The znodes are read with kazoo (sessions, reconnects, watches) and never written: this
module calls only get, get_children and exists. `streaming/shadow_model.py` turns what
is read into CONTRACT §1 events carrying `observed`; this module reads, waits for the
controller's writes to settle, and writes the events out:

* `--out file:DIR`: one JSON-lines file per flush, written under a hidden temporary name
  and renamed, named by its first `seq` so name order is event order;
* `--out kafka:BOOTSTRAP/TOPIC`: `streaming/shadow_kafka.py`, a kafka-python producer
  keyed by cluster, acks=all, idempotent; an event counts as written once acknowledged.

Restart: the model's view of the cluster is saved after every flush (`--state`, by
default a hidden file in the output directory), after the events are out. A restarted
shadow loads it, re-reads ZooKeeper, emits the differences, and skips any event whose
`seq` is not above the last one written (an output that got ahead of the saved state).
The first start saves the model with its bootstrap's events before writing them, so a
restart after a stop in between writes the rest of that bootstrap, each event once.
A lost connection or ZooKeeper session is handled the same way: kazoo reconnects (for as
long as it takes), and once connected the shadow re-reads everything, re-arming its watches
(kazoo forgets them on a disconnection; a new session never had them), and emits what
changed meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kafka.errors import KafkaError
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.protocol.states import KeeperState, ZnodeStat

from controller.config import ConfigError
from streaming.kafka_security import ClientFailures, KafkaClientConfig
from streaming.shadow_kafka import KafkaSink, OutputError
from streaming.shadow_model import (
    REGISTRATION_VERSION,
    BadZnode,
    Change,
    Event,
    ShadowModel,
    Snapshot,
    ZnodeError,
    parse_broker,
    parse_configs,
    parse_controller,
    parse_state,
    parse_topic,
)
from streaming.zk_failures import ZooKeeperFailures
from streaming.zk_security import ZooKeeperClientConfig

DEFAULT_SETTLE_MS = 500
# Pending causes are written out at the latest after this, even if writes never pause.
MAX_HOLD_MS = 10_000
IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
DELETES = "/admin/delete_topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIGS = "/config/topics"
RESYNC = "*resync*"
# the connection was refused for good (kazoo stopped connecting): the loop ends with an error
REFUSED = "*refused*"
# kazoo's default gives up reconnecting after one retry (the client is then closed for
# good): the shadow retries for ever, backing off up to 5 s between attempts
CONNECTION_RETRY = {"max_tries": -1, "delay": 0.2, "max_delay": 5.0}

Watch = Callable[[Any], None] | None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zookeeper", required=True, help="HOST:PORT[,HOST:PORT...][/chroot]")
    parser.add_argument("--out", required=True, help="file:DIR or kafka:BOOTSTRAP/TOPIC")
    parser.add_argument("--cluster", default="default", help="cluster name (default 'default')")
    parser.add_argument("--once", action="store_true", help="write the present state and stop")
    parser.add_argument(
        "--settle-ms",
        type=int,
        default=DEFAULT_SETTLE_MS,
        help="a cause is written once no partition state changed for this long "
        f"(default {DEFAULT_SETTLE_MS})",
    )
    parser.add_argument(
        "--state", type=Path, help="the shadow's saved view (default: beside --out)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "--zookeeper-config",
        type=Path,
        metavar="FILE",
        help="ZooKeeper client auth: digest, sasl.*, ssl.* (see streaming/zk_security.py)",
    )
    parser.add_argument(
        "--command-config",
        "--kafka-config",
        dest="kafka_config",
        type=Path,
        metavar="FILE",
        help="Kafka client properties for --out kafka: (security.protocol, sasl.*, ssl.*)",
    )


# ------------------------------------------------------------------------ reading


class Reader:
    """Reads znodes into `Change`s and `Snapshot`s; with `watch`, re-arms a watch on each."""

    def __init__(self, client: KazooClient, watch: Watch) -> None:
        self.client = client
        self.watch = watch

    def _get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            return self.client.get(path, watch=self.watch)
        except NoNodeError:
            if self.watch is not None and self.client.exists(path, watch=self.watch):
                return self._get(path)  # created between the two calls
            return None

    def _children(self, path: str) -> tuple[list[str], int]:
        try:
            children, stat = self.client.get_children(path, watch=self.watch, include_data=True)
        except NoNodeError:
            if self.watch is not None and self.client.exists(path, watch=self.watch):
                return self._children(path)
            return [], 0
        return children, stat.pzxid

    def _get_many(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        # pipelined: every request is sent before the first answer is awaited
        pending = [self.client.get_async(p, watch=self.watch) for p in paths]
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for path, result in zip(paths, pending, strict=True):
            try:
                out.append(result.get())
            except NoNodeError:
                out.append(self._get(path))
        return out

    def snapshot(self) -> Snapshot:
        snap = Snapshot()
        self.brokers(snap)
        self.controller(snap)
        names, snap.topics_pzxid = self._children(TOPICS)
        self.topics(snap, sorted(names))
        names, snap.deletes_pzxid = self._children(DELETES)
        for name, got in zip(names, self._get_many([f"{DELETES}/{n}" for n in names]), strict=True):
            if got is not None:
                snap.deletes[name] = got[1].czxid
        snap.zxid = max(
            [snap.brokers_pzxid, snap.topics_pzxid, snap.deletes_pzxid]
            + [b.epoch for b in snap.brokers.values()]
            + [z for _, z in snap.topics.values()]
            + [z for _, z in snap.states.values()]
            + [z for _, z in snap.configs.values()]
            + ([snap.controller[1]] if snap.controller else [])
        )
        return snap

    def brokers(self, snap: Snapshot) -> None:
        names, snap.brokers_pzxid = self._children(IDS)
        got = self._get_many([f"{IDS}/{n}" for n in names])
        for name, item in zip(names, got, strict=True):
            if item is None:
                continue
            path = f"{IDS}/{name}"
            try:
                snap.brokers[int(name)] = parse_broker(item[0], item[1].czxid, path)
            except (ZnodeError, ValueError) as error:
                snap.bad.append(_bad(item, path, str(error), "broker_startup"))

    def controller(self, snap: Snapshot) -> None:
        got = self._get(CONTROLLER)
        if got is None:
            return
        epoch = (
            self.client.get(CONTROLLER_EPOCH)[0] if self.client.exists(CONTROLLER_EPOCH) else None
        )
        try:
            snap.controller = (parse_controller(got[0], epoch, CONTROLLER), got[1].czxid)
        except ZnodeError as error:
            snap.bad.append(_bad(got, CONTROLLER, str(error), "controller_failover"))

    def topics(self, snap: Snapshot, names: Iterable[str]) -> None:
        names = list(names)
        for name, got in zip(names, self._get_many([f"{TOPICS}/{n}" for n in names]), strict=True):
            if got is None:
                continue
            path = f"{TOPICS}/{name}"
            try:
                snap.topics[name] = (parse_topic(got[0], path), got[1].mzxid)
            except ZnodeError as error:
                snap.bad.append(_bad(got, path, str(error), "topic_creation"))
        keys = [
            (t, p) for t in names if t in snap.topics for p in sorted(snap.topics[t][0].assignment)
        ]
        self.states(snap, keys)
        configs = self._get_many([f"{CONFIGS}/{n}" for n in names])
        for name, got in zip(names, configs, strict=True):
            if got is not None:
                try:
                    snap.configs[name] = (parse_configs(got[0], f"{CONFIGS}/{name}"), got[1].mzxid)
                except ZnodeError as error:
                    snap.bad.append(
                        _bad(got, f"{CONFIGS}/{name}", str(error), "topic_config_change")
                    )

    def states(self, snap: Snapshot, keys: list[tuple[str, int]]) -> None:
        paths = [f"{TOPICS}/{t}/partitions/{p}/state" for t, p in keys]
        for key, path, got in zip(keys, paths, self._get_many(paths), strict=True):
            if got is None:
                continue
            try:
                snap.states[key] = (parse_state(got[0], got[1].version, path), got[1].mzxid)
            except ZnodeError as error:
                snap.bad.append(_bad(got, path, str(error), "isr_change"))


def _bad(got: tuple[bytes, ZnodeStat], path: str, problem: str, event_type: str) -> Change:
    raw = got[0].decode("utf-8", "backslashreplace")
    return Change(got[1].mzxid, "bad", path, BadZnode(path, raw, problem, event_type))


def changes_for(paths: set[str], reader: Reader, model: ShadowModel) -> list[Change]:
    """What the znodes behind fired watches now hold, as changes (cost: those znodes)."""
    snap = Snapshot()
    changes: list[Change] = []
    # a registration's own data watch (what Kafka's BrokerModifications handles: endpoints,
    # features; or a garbled text rewritten) re-reads the registrations as a BrokerChange does
    if IDS in paths or any(path.startswith(IDS + "/") for path in paths):
        reader.brokers(snap)
        changes += snap.bad
        changes += [Change(b.epoch, "broker", i, b) for i, b in snap.brokers.items()]
        changes += [
            Change(snap.brokers_pzxid, "broker", i) for i in model.brokers if i not in snap.brokers
        ]
    if CONTROLLER in paths:
        reader.controller(snap)
        changes += [c for c in snap.bad if c.key == CONTROLLER]
        value, zxid = snap.controller or (None, model.last_zxid)
        changes.append(Change(zxid, "controller", None, value))
    if DELETES in paths:
        names, pzxid = reader._children(DELETES)
        got = reader._get_many([f"{DELETES}/{n}" for n in names])
        changes += [
            Change(g[1].czxid, "delete", n, True) for n, g in zip(names, got, strict=True) if g
        ]
        changes += [Change(pzxid, "delete", t) for t in model.deleting if t not in names]
    topic_names: set[str] = set()
    if TOPICS in paths:
        names, pzxid = reader._children(TOPICS)
        topic_names |= {n for n in names if n not in model.topics}
        changes += [Change(pzxid, "topic", t) for t in model.topics if t not in names]
    state_keys: list[tuple[str, int]] = []
    for path in paths:
        parts = path.split("/")
        if len(parts) == 4 and path.startswith(TOPICS + "/"):
            topic_names.add(parts[3])
        elif len(parts) == 7 and parts[-1] == "state" and parts[3] in model.topics:
            state_keys.append((parts[3], int(parts[5])))
        elif len(parts) == 4 and path.startswith(CONFIGS + "/"):
            got = reader._get(path)
            configs: dict[str, str] | None = None  # gone: deleted with its topic
            if got is not None:
                try:
                    configs = parse_configs(got[0], path)
                except ZnodeError as error:
                    changes.append(_bad(got, path, str(error), "topic_config_change"))
                    continue
            changes.append(
                Change(got[1].mzxid if got else model.last_zxid, "config", parts[3], configs)
            )
    if topic_names:
        topic_snap = Snapshot()
        reader.topics(topic_snap, sorted(topic_names))
        changes += topic_snap.bad
        changes += [Change(z, "config", t, c) for t, (c, z) in topic_snap.configs.items()]
        changes += [Change(z, "topic", t, v) for t, (v, z) in topic_snap.topics.items()]
        changes += [Change(z, "state", k, v) for k, (v, z) in topic_snap.states.items()]
        gone = [t for t in topic_names if t not in topic_snap.topics and t in model.topics]
        changes += [Change(model.last_zxid, "topic", t) for t in gone]
    if state_keys:
        state_snap = Snapshot()
        reader.states(state_snap, state_keys)
        changes += state_snap.bad
        changes += [Change(z, "state", k, v) for k, (v, z) in state_snap.states.items()]
        changes += [
            Change(model.last_zxid, "state", k) for k in state_keys if k not in state_snap.states
        ]
    return changes


def version_warnings(snap: Snapshot) -> list[str]:
    """What says this is not a Kafka 3.x ZooKeeper-mode controller."""
    warnings = []
    if snap.controller is not None and snap.controller[0].kraft_controller_epoch >= 0:
        warnings.append(
            "/controller is held by a KRaft controller (ZooKeeper migration): "
            "kcsim simulates the ZooKeeper-mode controller"
        )
    for broker_id, broker in sorted(snap.brokers.items()):
        if broker.version != REGISTRATION_VERSION:
            warnings.append(
                f"broker {broker_id} registered with format version {broker.version}, not "
                f"{REGISTRATION_VERSION} (Kafka 3.x): its controller may behave unlike 3.7"
            )
    if not snap.brokers and not snap.topics:
        warnings.append("no brokers and no topics under this path: is it a Kafka cluster's chroot?")
    return warnings


# ------------------------------------------------------------------------ writing


class Sink(Protocol):
    def last_seq(self, cluster: str) -> int: ...
    def write(self, events: list[Event]) -> None: ...
    def close(self) -> None: ...


@dataclass(slots=True)
class FileSink:
    directory: Path

    def last_seq(self, cluster: str) -> int:
        files = sorted(p for p in self.directory.glob("shadow-*.jsonl"))
        for path in reversed(files):
            lines = path.read_text(encoding="utf-8").splitlines()
            seqs = [json.loads(line).get("seq") for line in lines if line.strip()]
            seqs = [s for s in seqs if isinstance(s, int)]
            if seqs:
                return max(seqs)
        return 0

    def write(self, events: list[Event]) -> None:
        first = next((e["seq"] for e in events if "seq" in e), 0)
        name = f"shadow-{first:020d}.jsonl"
        temp = self.directory / f".{name}.tmp"
        with temp.open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self.directory / name)

    def close(self) -> None:
        pass


def open_sink(out: str, cluster: str, client: KafkaClientConfig | None = None) -> tuple[Sink, Path]:
    """The sink and the default place of the saved state."""
    if out.startswith("file:"):
        directory = Path(out.removeprefix("file:"))
        directory.mkdir(parents=True, exist_ok=True)
        return FileSink(directory), directory / f".shadow-state-{cluster}.json"
    if out.startswith("kafka:") and "/" in out:
        bootstrap, topic = out.removeprefix("kafka:").split("/", 1)
        sink = KafkaSink(bootstrap, topic, cluster, client or KafkaClientConfig())
        return sink, Path(f".kcsim-shadow-{cluster}.json")
    raise ValueError(f"--out must be file:DIR or kafka:BOOTSTRAP/TOPIC, got {out!r}")


def save_state(path: Path, model: ShadowModel, unwritten: list[Event] | None = None) -> None:
    """The model's view, with the events that must be out before it holds (`unwritten`:
    the bootstrap's, saved before they are written)."""
    saved = model.to_json()
    if unwritten:
        saved["unwritten"] = unwritten
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(saved, separators=(",", ":")), encoding="utf-8")
    os.replace(temp, path)


# ------------------------------------------------------------------------ running


class Shadow:
    def __init__(self, client: KazooClient, sink: Sink, state_path: Path, cluster: str) -> None:
        self.client, self.sink, self.state_path, self.cluster = client, sink, state_path, cluster
        self.fired: queue.Queue[str] = queue.Queue()
        self.reader = Reader(client, self._on_watch)
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
        reader = self.reader if watch else Reader(self.client, None)
        snap = reader.snapshot()
        for warning in version_warnings(snap):
            print(f"kcsim shadow: warning: {warning}", file=sys.stderr)
        if not self.model.started:
            # Saved with its events before they are written: a shadow stopped before the
            # save after them writes, at its restart, those the output does not hold (by
            # seq), rather than a second bootstrap of a cluster that may have changed.
            events = self.model.bootstrap(snap)
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
        fresh = [e for e in events if e.get("seq", self.written_seq + 1) > self.written_seq]
        if fresh:
            self.sink.write(fresh)
            self.written_seq = max(self.written_seq, *(e.get("seq", 0) for e in fresh))
            self.emitted += len(fresh)
        save_state(self.state_path, self.model)
        if self.model.unexplained:
            print(
                f"kcsim shadow: {self.model.unexplained} partition state writes with no "
                "cause the shadow could name (their state shows in the next event's observed)",
                file=sys.stderr,
            )
            self.model.unexplained = 0

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
        kafka_client = KafkaClientConfig.load(args.kafka_config)
        zookeeper_client = ZooKeeperClientConfig.load(args.zookeeper_config)
    except ConfigError as error:
        print(f"kcsim shadow: {error}", file=sys.stderr)
        return 2
    if args.settle_ms < 0:
        print("kcsim shadow: --settle-ms must not be negative", file=sys.stderr)
        return 2
    with ClientFailures(kafka_client) as failures:
        try:
            sink, default_state = open_sink(args.out, args.cluster, kafka_client)
        except ValueError as error:
            print(f"kcsim shadow: {error}", file=sys.stderr)
            return 2
        except KafkaError as error:
            print(f"kcsim shadow: cannot reach Kafka: {failures.explain(error)}", file=sys.stderr)
            return 1
        try:
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
    args: argparse.Namespace, sink: Sink, default_state: Path, config: ZooKeeperClientConfig
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
    sink: Sink,
    default_state: Path,
    failures: ZooKeeperFailures,
) -> int:
    stop = threading.Event()
    try:
        shadow = Shadow(client, sink, args.state or default_state, args.cluster)
        failures.on_refused = shadow.refused
        if args.once:
            shadow.once()
        else:
            try:
                shadow.run(args.settle_ms / 1000, stop)
            except KeyboardInterrupt:
                stop.set()
                shadow.finish()
        if not args.quiet:
            print(f"kcsim shadow: {shadow.emitted} events written", file=sys.stderr)
        return 0
    except RuntimeError as error:
        print(f"kcsim shadow: {error}", file=sys.stderr)
        return 2


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
