"""The znodes `kcsim shadow` reads (get, get_children, exists: nothing else), and the changes
between what it saw and what the model holds.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    NoNodeError,
)
from kazoo.protocol.states import ZnodeStat

from streaming.shadow.model import ShadowModel
from streaming.shadow.znodes import (
    REGISTRATION_VERSION,
    BadZnode,
    Change,
    Snapshot,
    ZnodeError,
    parse_broker,
    parse_configs,
    parse_controller,
    parse_state,
    parse_topic,
)

IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
DELETES = "/admin/delete_topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIGS = "/config/topics"
Watch = Callable[[Any], None] | None


@dataclass(slots=True)
class ZxidTimes:
    """When ZooKeeper committed the transactions the shadow has read: a znode's mzxid at its
    mtime, its czxid at its ctime (epoch ms, the ZooKeeper leader's clock). An event's `ts`
    is its cause's zxid's time. A zxid read only as a parent's pzxid (a broker's
    registration vanishing, a topic deleted) has no time of its own: it gets the time of
    the first transaction read after it (the controller's writes in reaction, milliseconds
    later), else of the last one before it."""

    known: dict[int, int] = field(default_factory=dict)

    def note(self, stat: ZnodeStat) -> None:
        self.known[stat.mzxid] = stat.mtime
        self.known[stat.czxid] = stat.ctime

    def at(self, zxid: int, ordered: list[int] | None = None) -> int | None:
        """The time of `zxid` (`ordered`: the known zxids sorted, when the caller has
        them: a bootstrap stamps as many events as there are znodes)."""
        if zxid in self.known:
            return self.known[zxid]
        if not self.known:
            return None
        zxids = ordered if ordered is not None else sorted(self.known)
        i = bisect.bisect_left(zxids, zxid)
        return self.known[zxids[i] if i < len(zxids) else zxids[-1]]

    def forget_before(self, zxid: int) -> None:
        """Drop the times of transactions before `zxid` (all written): memory stays bounded
        by what is pending."""
        old = [z for z in self.known if z < zxid]
        for z in old:
            del self.known[z]

    def stamp(self, events: list[dict[str, Any]]) -> None:
        """Give `ts` (ISO-8601 UTC, milliseconds) to the events without one, from the zxid
        their id names (`<cluster>:zx<zxid hex>:<n>`)."""
        ordered = sorted(self.known)
        texts: dict[int, str] = {}  # a bootstrap's events share one zxid, a cause's too
        for event in events:
            if "ts" in event or "event_id" not in event:
                continue
            zxid = event_zxid(event)
            millis = self.at(zxid, ordered) if zxid is not None else None
            if millis is not None:
                if millis not in texts:
                    texts[millis] = iso_millis(millis)
                event["ts"] = texts[millis]


def event_zxid(event: dict[str, Any]) -> int | None:
    """The zxid a shadow event's id names, or None."""
    parts = str(event.get("event_id", "")).rsplit(":", 2)
    if len(parts) == 3 and parts[1].startswith("zx"):
        try:
            return int(parts[1][2:], 16)
        except ValueError:
            return None
    return None


def iso_millis(millis: int) -> str:
    moment = datetime.fromtimestamp(millis // 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


class Reader:
    """Reads znodes into `Change`s and `Snapshot`s; with `watch`, re-arms a watch on each;
    every znode's times go to `times`."""

    def __init__(self, client: KazooClient, watch: Watch, times: ZxidTimes | None = None) -> None:
        self.client = client
        self.watch = watch
        self.times = times if times is not None else ZxidTimes()

    def _get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            got: tuple[bytes, ZnodeStat] = self.client.get(path, watch=self.watch)
            self.times.note(got[1])
            return got
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
                got = result.get()
                self.times.note(got[1])
                out.append(got)
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
            znode = reader._get(path)
            configs: dict[str, str] | None = None  # gone: deleted with its topic
            if znode is not None:
                try:
                    configs = parse_configs(znode[0], path)
                except ZnodeError as error:
                    changes.append(_bad(znode, path, str(error), "topic_config_change"))
                    continue
            changes.append(
                Change(znode[1].mzxid if znode else model.last_zxid, "config", parts[3], configs)
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
