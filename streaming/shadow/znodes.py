"""The znodes of a ZooKeeper-mode Kafka cluster as values (pure): brokers, topics,
partition states, the controller and topic configs parsed as Kafka writes them, and the
`Change`s and `Snapshot`s the shadow's reader hands the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TP = tuple[str, int]
REGISTRATION_VERSION = 5  # /brokers/ids JSON "version" written by Kafka 3.x brokers


class ZnodeError(ValueError):
    """A znode whose content is not what Kafka writes there."""


# ------------------------------------------------------------------ znode values


@dataclass(frozen=True, slots=True)
class Broker:
    epoch: int  # the registration's czxid
    rack: str | None
    version: int


@dataclass(frozen=True, slots=True)
class Topic:
    assignment: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]]
    removing: dict[int, tuple[int, ...]]

    def target(self, partition: int) -> tuple[int, ...]:
        removing = set(self.removing.get(partition, ()))
        return tuple(b for b in self.assignment[partition] if b not in removing)

    def reassigning(self, partition: int) -> bool:
        return bool(self.adding.get(partition) or self.removing.get(partition))


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int  # the state znode's version
    leader_recovery_state: str


@dataclass(frozen=True, slots=True)
class Controller:
    broker: int
    epoch: int
    kraft_controller_epoch: int


@dataclass(frozen=True, slots=True)
class BadZnode:
    path: str
    raw: str
    problem: str
    event_type: str  # the event this znode would have driven


def _json_object(data: bytes, path: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ZnodeError(f"{path}: not JSON: {error}") from None
    if not isinstance(value, dict):
        raise ZnodeError(f"{path}: expected a JSON object")
    return value


def _int(obj: Mapping[str, Any], key: str, path: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ZnodeError(f"{path}: field '{key}' must be an int, got {value!r}")
    return value


def _ints(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZnodeError(f"{what} must be a list of ints, got {value!r}")
    return tuple(value)


def _replica_map(obj: Mapping[str, Any], key: str, path: str) -> dict[int, tuple[int, ...]]:
    value = obj.get(key) or {}
    if not isinstance(value, dict):
        raise ZnodeError(f"{path}: field '{key}' must be an object")
    try:
        return {int(p): _ints(r, f"{path}: {key}[{p}]") for p, r in value.items()}
    except ValueError as error:
        raise ZnodeError(f"{path}: {key}: {error}") from None


def parse_broker(data: bytes, epoch: int, path: str) -> Broker:
    obj = _json_object(data, path)
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ZnodeError(f"{path}: field 'rack' must be a string, got {rack!r}")
    return Broker(epoch, rack, _int(obj, "version", path))


def parse_topic(data: bytes, path: str) -> Topic:
    obj = _json_object(data, path)
    assignment = _replica_map(obj, "partitions", path)
    if not assignment:
        raise ZnodeError(f"{path}: no partitions")
    return Topic(
        assignment,
        _replica_map(obj, "adding_replicas", path),
        _replica_map(obj, "removing_replicas", path),
    )


def parse_state(data: bytes, version: int, path: str) -> PartitionState:
    obj = _json_object(data, path)
    recovery = obj.get("leader_recovery_state", 0)  # absent before IBP 3.2: RECOVERED
    if recovery not in (0, 1):
        raise ZnodeError(f"{path}: leader_recovery_state must be 0 or 1, got {recovery!r}")
    return PartitionState(
        leader=_int(obj, "leader", path),
        leader_epoch=_int(obj, "leader_epoch", path),
        isr=_ints(obj.get("isr"), f"{path}: isr"),
        controller_epoch=_int(obj, "controller_epoch", path),
        partition_epoch=version,
        leader_recovery_state="RECOVERING" if recovery == 1 else "RECOVERED",
    )


def parse_controller(data: bytes, epoch_data: bytes | None, path: str) -> Controller:
    obj = _json_object(data, path)
    try:
        epoch = int((epoch_data or b"0").decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise ZnodeError(f"/controller_epoch: not an int: {epoch_data!r}") from None
    kraft = obj.get("kraftControllerEpoch", -1)
    return Controller(_int(obj, "brokerid", path), epoch, kraft if isinstance(kraft, int) else -1)


def parse_configs(data: bytes, path: str) -> dict[str, str]:
    obj = _json_object(data, path)
    configs = obj.get("config", {})
    if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
        raise ZnodeError(f"{path}: field 'config' must map names to strings")
    return dict(configs)


# --------------------------------------------------------------------- changes


@dataclass(frozen=True, slots=True)
class Change:
    """One znode as it now is (`value` None: gone), made so by transaction `zxid`."""

    zxid: int
    kind: str  # broker | topic | state | delete | controller | config | bad
    key: Any = None  # broker id, topic, (topic, partition), or the bad znode's path
    value: Any = None


_KIND_ORDER = {"broker": 0, "controller": 1, "delete": 2, "config": 3, "topic": 4, "state": 5}


def change_order(change: Change) -> tuple[int, int, str]:
    return (change.zxid, _KIND_ORDER.get(change.kind, 9), repr(change.key))


@dataclass(slots=True)
class Snapshot:
    """Everything the shadow reads from ZooKeeper, with the zxid of each value."""

    zxid: int = 0  # the largest zxid read
    brokers: dict[int, Broker] = field(default_factory=dict)
    brokers_pzxid: int = 0
    topics: dict[str, tuple[Topic, int]] = field(default_factory=dict)
    topics_pzxid: int = 0
    states: dict[TP, tuple[PartitionState, int]] = field(default_factory=dict)
    deletes: dict[str, int] = field(default_factory=dict)
    deletes_pzxid: int = 0
    controller: tuple[Controller, int] | None = None
    configs: dict[str, tuple[dict[str, str], int]] = field(default_factory=dict)
    bad: list[Change] = field(default_factory=list)
