"""Raw event lines → typed events (CONTRACT §1): each event on its own, no cluster state.

One generic loop walks `schemas.events` field specs and calls a small validator per
`Kind`; a few cross-field rules (topic_creation's either/or, Kafka's assignment checks,
topic configs as Kafka validates them) follow in a per-type table. Cluster state (unknown
topics or brokers, duplicate ids, `seq` order) is the controller's to check, not ours.

Every failure is a `Rejection` with an actionable reason; nothing here raises for any
input string.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any, TypeGuard

from controller.config import ConfigError, parse_bool, parse_min_insync_replicas
from controller.events import (
    AutoRebalanceCheck,
    BrokerFailure,
    BrokerRegistration,
    BrokerStartup,
    BrokerUnfence,
    BrokerUnregistration,
    ClusterConfigChange,
    ControlledShutdown,
    ControllerFailover,
    Event,
    EventBody,
    FeatureUpdate,
    Header,
    IsrChange,
    LeaderElection,
    ObservedBroker,
    ObservedEvent,
    ObservedPartition,
    PartitionCreation,
    PartitionReassignment,
    Rejection,
    StopReplicaResponse,
    StoredPartitionState,
    TopicConfigChange,
    TopicCreation,
    TopicDeletion,
    UncleanElectionCheck,
)
from controller.java_text import INT_MAX as INT32_MAX
from controller.java_text import INT_MIN as INT32_MIN
from controller.java_text import LONG_MAX as INT64_MAX
from controller.java_text import LONG_MIN as INT64_MIN
from controller.model import TopicPartition
from controller.topic_configs import TopicConfigError, validate_topic_configs
from schemas.events import COMMON_FIELDS, EVENT_FIELDS, EVENT_TYPES, FieldSpec, Kind

DEFAULT_CLUSTER = "default"
TOPIC_MAX_LENGTH = 249  # Kafka's Topic.MAX_NAME_LENGTH
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
# Partition keys of an assignment: canonical decimal, so "01" cannot alias "1".
_PARTITION_KEY = re.compile(r"0|[1-9][0-9]*")
_ERROR_CODE = re.compile(r"[A-Z][A-Z0-9_]*")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SHOWN_CHARS = 80  # how much of an offending value a reason quotes

BODIES: dict[str, type[EventBody]] = {
    "broker_startup": BrokerStartup,
    "broker_failure": BrokerFailure,
    "controlled_shutdown": ControlledShutdown,
    "topic_creation": TopicCreation,
    "partition_creation": PartitionCreation,
    "topic_deletion": TopicDeletion,
    "partition_reassignment": PartitionReassignment,
    "isr_change": IsrChange,
    "leader_election": LeaderElection,
    "auto_rebalance_check": AutoRebalanceCheck,
    "stop_replica_response": StopReplicaResponse,
    "topic_config_change": TopicConfigChange,
    "controller_failover": ControllerFailover,
    "broker_registration": BrokerRegistration,
    "broker_unfence": BrokerUnfence,
    "broker_unregistration": BrokerUnregistration,
    "unclean_election_check": UncleanElectionCheck,
    "cluster_config_change": ClusterConfigChange,
    "feature_update": FeatureUpdate,
}
# The generic loop passes field values by name, so each body must match its spec.
assert set(BODIES) == set(EVENT_TYPES)
assert all(
    {f.name for f in fields(BODIES[t])} == {s.name for s in EVENT_FIELDS[t]} for t in EVENT_TYPES
)


class FieldError(ValueError):
    """A field value that breaks Kafka's rules; the message is the rejection reason."""


# ---------------------------------------------------------------------------- values


def show(value: object) -> str:
    """A JSON rendering of an offending value for a reason, shortened if long."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        text = repr(value)
    except RecursionError:
        # the decoder took it a few frames up the stack; the encoder, deeper, cannot
        text = f"(a {type(value).__name__} nested too deeply to show)"
    return _clip(displayable(text))


def _clip(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def displayable(text: str) -> str:
    """`text` with lone surrogates (undecodable bytes kept by surrogateescape, or stray
    UTF-16 halves) replaced by U+FFFD, so it can be written as UTF-8 anywhere — as
    Java's decoder shows malformed bytes."""
    if is_unicode(text):
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # surrogates outside surrogateescape's range
        return text.encode("utf-8", "replace").decode("utf-8").replace("?", "\ufffd")


def is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_int(value: object) -> TypeGuard[int]:
    # JSON true/false arrive as Python bools, which are ints: not numbers here.
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def _int_in(name: str, value: object, low: int, high: int, what: str) -> int:
    if not _is_int(value) or not low <= value <= high:
        raise FieldError(f"field '{name}' must be {what}, got {show(value)}")
    return value


def _string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise FieldError(f"field '{name}' must be a string, got {show(value)}")
    if not is_unicode(value):
        raise FieldError(f"field '{name}' is not valid Unicode text, got {show(value)}")
    return value


def _int32(name: str, value: object) -> int:
    return _int_in(name, value, INT32_MIN, INT32_MAX, "a 32-bit integer")


def _int64(name: str, value: object) -> int:
    return _int_in(name, value, INT64_MIN, INT64_MAX, "a 64-bit integer")


def _non_negative_int32(name: str, value: object) -> int:
    return _int_in(name, value, 0, INT32_MAX, "a non-negative 32-bit integer")


def _topic(name: str, value: object) -> str:
    topic = _string(name, value)
    problem = topic_name_problem(topic)
    if problem is not None:
        raise FieldError(f"field '{name}': Topic name is invalid: {problem}")
    return topic


def topic_name_problem(topic: str) -> str | None:
    """Why Kafka refuses `topic` as a topic name (Topic.detectInvalidTopic's wording)."""
    if not topic:
        return "the empty string is not allowed"
    if topic in (".", ".."):
        return f"'{topic}' is not allowed"
    if len(topic) > TOPIC_MAX_LENGTH:
        return (
            f"the length of '{_clip(displayable(topic))}' is longer than the max allowed "
            f"length {TOPIC_MAX_LENGTH}"
        )
    if not _TOPIC_CHARS.fullmatch(topic):
        return (
            f"'{displayable(topic)}' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def _brokers(
    name: str, value: object, *, allow_empty: bool, kafka_checked: bool = True
) -> tuple[int, ...]:
    """A list of int32 broker ids; unless `kafka_checked` is off (a list the controller
    itself validates), also non-negative and distinct."""
    if not isinstance(value, list):
        raise FieldError(f"field '{name}' must be a list of broker ids, got {show(value)}")
    if not value and not allow_empty:
        raise FieldError(f"field '{name}' must not be empty")
    low, what = (0, "non-negative 32-bit") if kafka_checked else (INT32_MIN, "32-bit")
    if value and {*map(type, value)} == {int} and low <= min(value) and max(value) <= INT32_MAX:
        pass  # every id in range: the common case, checked in C
    else:
        _check_broker_ids(name, value, low, what)
    if kafka_checked and len(set(value)) != len(value):
        raise FieldError(f"field '{name}' must not repeat a broker, got {show(value)}")
    return tuple(value)


def _check_broker_ids(name: str, value: list[object], low: int, what: str) -> None:
    for item in value:
        if not _is_int(item) or not low <= item <= INT32_MAX:
            raise FieldError(
                f"field '{name}' must hold {what} integer broker ids, "
                f"got {show(item)} in {show(value)}"
            )


def replicas(name: str, value: object) -> tuple[int, ...]:
    """A replica list: non-empty, distinct, non-negative int32 broker ids."""
    return _brokers(name, value, allow_empty=False)


def replicas_or_null(name: str, value: object) -> tuple[int, ...] | None:
    """PartitionReassignment's target: None for JSON null (a cancel), else the int32
    list AlterPartitionReassignments carries. An empty list, a repeated or a negative id
    is the controller's to refuse (INVALID_REPLICA_ASSIGNMENT, an `event_results` row:
    CONTRACT §1, SPEC §14.1), so it passes here. Whether the field is present at all is
    the caller's check (it is required)."""
    if value is None:
        return None
    return _brokers(name, value, allow_empty=True, kafka_checked=False)


def _broker_list(name: str, value: object) -> tuple[int, ...]:
    return _brokers(name, value, allow_empty=True)


def _assignment(name: str, value: object) -> dict[int, tuple[int, ...]]:
    if not isinstance(value, dict):
        raise FieldError(
            f"field '{name}' must be an object of partition → replica list, "
            f'like {{"0": [1, 2]}}, got {show(value)}'
        )
    if not value:
        raise FieldError(f"field '{name}' must assign at least one partition")
    result: dict[int, tuple[int, ...]] = {}
    for key, replica_list in value.items():
        result[_partition_key(name, key)] = replicas(f"{name}.{key}", replica_list)
    return dict(sorted(result.items()))


def _partition_key(name: str, key: str) -> int:
    # (the length test first: int() refuses very long digit strings)
    if not _PARTITION_KEY.fullmatch(key) or len(key) > 10 or int(key) > INT32_MAX:
        raise FieldError(
            f"field '{name}' keys must be partition numbers written in decimal "
            f'(non-negative 32-bit, like "0"), got {show(key)}'
        )
    return int(key)


_RECOVERY_STATES = ("RECOVERED", "RECOVERING")


def _partition_states(name: str, value: object) -> dict[int, StoredPartitionState]:
    """Stored partition states ({"<partition>": {leader, leader_epoch, isr,
    partition_epoch, controller_epoch, leader_recovery_state?}}): znode contents, so only
    their types and ranges are checked, not how they relate (the controller loads them as
    they are)."""
    if not isinstance(value, dict):
        raise FieldError(
            f"field '{name}' must be an object of partition → stored state, like "
            f'{{"0": {{"leader": 1, "leader_epoch": 3, "isr": [1, 2], "partition_epoch": 5, '
            f'"controller_epoch": 2}}}}, got {show(value)}'
        )
    result: dict[int, StoredPartitionState] = {}
    for key, item in value.items():
        partition = _partition_key(name, key)
        where = f"{name}.{key}"
        if not isinstance(item, dict):
            raise FieldError(f"field '{where}' must be an object, got {show(item)}")
        for required in ("leader", "leader_epoch", "isr", "partition_epoch", "controller_epoch"):
            if item.get(required) is None:
                raise FieldError(f"field '{where}' is missing '{required}'")
        recovery = item.get("leader_recovery_state")
        if recovery is None:
            recovery = "RECOVERED"
        elif recovery not in _RECOVERY_STATES:
            raise FieldError(
                f"field '{where}.leader_recovery_state' must be \"RECOVERED\" or "
                f'"RECOVERING", got {show(recovery)}'
            )
        result[partition] = StoredPartitionState(
            leader=_int_in(f"{where}.leader", item["leader"], -1, INT32_MAX, "a broker id or -1"),
            leader_epoch=_non_negative_int32(f"{where}.leader_epoch", item["leader_epoch"]),
            isr=_brokers(f"{where}.isr", item["isr"], allow_empty=True),
            partition_epoch=_non_negative_int32(
                f"{where}.partition_epoch", item["partition_epoch"]
            ),
            controller_epoch=_non_negative_int32(
                f"{where}.controller_epoch", item["controller_epoch"]
            ),
            leader_recovery_state=recovery,
            elr=_brokers(f"{where}.elr", item.get("elr") or [], allow_empty=True),
            last_known_elr=_last_known_elr(f"{where}.last_known_elr", item.get("last_known_elr")),
        )
    return dict(sorted(result.items()))


def _last_known_elr(name: str, value: object) -> tuple[int, ...]:
    """A KRaft partition's lastKnownElr: broker ids, where -1 may stand for "no leader"
    (SPEC-KRAFT §4.2 step 8 writes [-1])."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise FieldError(f"field '{name}' must be a list of broker ids, got {show(value)}")
    for item in value:
        _int_in(name, item, -1, INT32_MAX, "a list of broker ids (or -1)")
    if len(set(value)) != len(value):
        raise FieldError(f"field '{name}' must not repeat a broker, got {show(value)}")
    return tuple(value)


def _config_value(name: str, key: str, item: object, null: str) -> str:
    """One entry of the config object in field `name`: a non-empty name to a string, a
    boolean written as Kafka writes it; `null` says why a null value is refused."""
    if not key or not is_unicode(key):
        raise FieldError(f"field '{name}' keys must be non-empty config names, got {show(key)}")
    if item is None:
        raise FieldError(f"field '{name}': {null}: {key}")
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, str) and is_unicode(item):
        return item
    raise FieldError(
        f"field '{name}' value of '{key}' must be a string or boolean, got {show(item)}"
    )


def _configs(name: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise FieldError(f"field '{name}' must be an object of string → string, got {show(value)}")
    result: dict[str, str] = {}
    for key, item in value.items():
        # Kafka's CreateTopics wording
        result[key] = _config_value(name, key, item, "Null value not supported for topic configs")
    _check_config_values(name, result)
    return result


def _check_config_values(name: str, configs: Mapping[str, str]) -> None:
    # Values stay as given (Kafka stores the text); only their validity is checked, as
    # LogConfig.validate checks names and values (controller.topic_configs).
    try:
        validate_topic_configs(configs)
    except TopicConfigError as error:
        raise FieldError(f"field '{name}': {error}") from None


def _election(name: str, value: object) -> str:
    if value not in ("preferred", "unclean"):
        raise FieldError(f'field \'{name}\' must be "preferred" or "unclean", got {show(value)}')
    return value


def _deletion(name: str, value: object) -> str:
    # only the queue is stored (/admin/delete_topics); ineligibility is recomputed by the
    # controller that loads it (SPEC §7.2 step 5)
    if value != "queued":
        raise FieldError(f"field '{name}' must be \"queued\", got {show(value)}")
    return value


def _partition_refs(name: str, value: object) -> tuple[TopicPartition, ...]:
    if not isinstance(value, list):
        raise FieldError(
            f'field \'{name}\' must be a list of {{"topic", "partition"}} objects, '
            f"got {show(value)}"
        )
    refs: dict[TopicPartition, None] = {}  # Kafka takes them as a set; keep first order
    for index, item in enumerate(value):
        where = f"{name}[{index}]"
        if not isinstance(item, dict):
            raise FieldError(
                f'field \'{where}\' must be {{"topic", "partition"}}, got {show(item)}'
            )
        for key in ("topic", "partition"):
            if key not in item:
                raise FieldError(f"field '{where}' is missing '{key}'")
        topic = _topic(f"{where}.topic", item["topic"])
        partition = _non_negative_int32(f"{where}.partition", item["partition"])
        refs[TopicPartition(topic, partition)] = None
    return tuple(refs)


def _error_or_null(name: str, value: object) -> str | None:
    if value is None or value == "NONE":  # Kafka's name for "no error"
        return None
    if not isinstance(value, str) or not _ERROR_CODE.fullmatch(value):
        raise FieldError(
            f"field '{name}' must be a Kafka error code name like \"KAFKA_STORAGE_ERROR\", "
            f"or null, got {show(value)}"
        )
    return value


def _timestamp(name: str, value: object) -> int:
    if _is_int(value) and INT64_MIN <= value <= INT64_MAX:
        return value
    if isinstance(value, str):
        moment = _iso_moment(value)
        if moment is not None:
            if moment.tzinfo is None:  # no offset: UTC, so every engine agrees
                moment = moment.replace(tzinfo=UTC)
            return (moment - _EPOCH) // timedelta(milliseconds=1)
    raise FieldError(
        f"field '{name}' must be an ISO-8601 time like \"2024-05-01T12:00:00Z\" or epoch "
        f"milliseconds (a 64-bit integer), got {show(value)}"
    )


# the ISO 8601 forms Python 3.11's `fromisoformat` does not read: an ordinal date (day of
# the year: 2024-122, 2024122) and midnight written as the end of the day before (T24:00)
_ORDINAL_DATE = re.compile(r"(\d{4})-?(\d{3})(?=T|$)")
_END_OF_DAY = re.compile(r"T24(?::?00(?::?00(?:[.,]0+)?)?)?(?=$|Z|[+-])")


def _iso_moment(text: str) -> datetime | None:
    """`datetime.fromisoformat(text)`, or None; an ordinal date and T24:00 read as ISO 8601
    says (the day's calendar date; 00:00 of the next day)."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    ordinal = _ORDINAL_DATE.match(text)
    end_of_day = _END_OF_DAY.search(text)
    next_day = end_of_day is not None and end_of_day.start() == text.find("T")
    if not ordinal and not next_day:
        return None
    try:
        if end_of_day and next_day:
            text = f"{text[: end_of_day.start()]}T00:00{text[end_of_day.end() :]}"
        if ordinal:
            year, day = int(ordinal[1]), int(ordinal[2])
            date = datetime(year, 1, 1) + timedelta(days=day - 1)
            if day < 1 or date.year != year:
                return None
            text = date.strftime("%Y-%m-%d") + text[ordinal.end() :]
        moment = datetime.fromisoformat(text)
        return moment + timedelta(days=1) if next_day else moment
    except (ValueError, OverflowError):  # a year 0, a day past 9999-12-31
        return None


def observed_partitions(name: str, value: object) -> tuple[ObservedPartition, ...]:
    """`observed` (CONTRACT §1, §5): `{"partitions": [...], "brokers": [...]?}`, each
    partition entry the values of a partition's state under Kafka's rules. Keys this
    version does not know are ignored, as unknown event fields are; a partition may appear
    once. A KRaft cluster's `observed` may carry `brokers` alone (its partitions: none)."""
    return observed_state(name, value)[0]


def observed_state(
    name: str, value: object
) -> tuple[tuple[ObservedPartition, ...], tuple[ObservedBroker, ...] | None]:
    """`observed`'s partitions and (None when absent) brokers."""
    if not isinstance(value, dict):
        raise FieldError(
            f"field '{name}' must be an object like {{\"partitions\": [...]}}, got {show(value)}"
        )
    brokers = None
    if value.get("brokers") is not None:
        brokers = _observed_brokers(f"{name}.brokers", value["brokers"])
    if value.get("partitions") is None:
        if brokers is not None:
            return (), brokers
        raise FieldError(f"field '{name}' is missing 'partitions'")
    items = value["partitions"]
    where = f"{name}.partitions"
    if not isinstance(items, list):
        raise FieldError(f"field '{where}' must be a list of partition states, got {show(items)}")
    entries: dict[tuple[str, int], ObservedPartition] = {}
    for index, item in enumerate(items):
        entry = _observed_partition(f"{where}[{index}]", item)
        key = (entry.topic, entry.partition)
        if key in entries:
            raise FieldError(
                f"field '{where}[{index}]' repeats partition {entry.topic}-{entry.partition}"
            )
        entries[key] = entry
    return tuple(entries.values()), brokers


OBSERVED_BROKER_STATUSES = ("live", "fenced", "shutting_down")


def _observed_brokers(where: str, items: object) -> tuple[ObservedBroker, ...]:
    if not isinstance(items, list):
        raise FieldError(
            f'field \'{where}\' must be a list like [{{"broker": 1, "status": "live"}}], '
            f"got {show(items)}"
        )
    found: dict[int, ObservedBroker] = {}
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise FieldError(f"field '{at}' must be an object, got {show(item)}")
        for key in ("broker", "status"):
            if key not in item:
                raise FieldError(f"field '{at}' is missing '{key}'")
        broker = _non_negative_int32(f"{at}.broker", item["broker"])
        status = item["status"]
        if status not in OBSERVED_BROKER_STATUSES:
            raise FieldError(
                f"field '{at}.status' must be one of "
                + ", ".join(f'"{s}"' for s in OBSERVED_BROKER_STATUSES)
                + f", got {show(status)}"
            )
        if broker in found:
            raise FieldError(f"field '{at}' repeats broker {broker}")
        found[broker] = ObservedBroker(broker, status)
    return tuple(found.values())


_OBSERVED_REQUIRED = ("topic", "partition", "leader", "leader_epoch", "isr")


def _observed_partition(where: str, item: object) -> ObservedPartition:
    if not isinstance(item, dict):
        raise FieldError(
            f'field \'{where}\' must be a partition state like {{"topic": "t", "partition": 0, '
            f'"leader": 1, "leader_epoch": 0, "isr": [1]}}, got {show(item)}'
        )
    for key in _OBSERVED_REQUIRED:
        if key not in item:
            raise FieldError(f"field '{where}' is missing '{key}'")
    optional = [item.get(key) for key in ("partition_epoch", "controller_epoch", "replicas")]
    kraft = [item.get(key) for key in ("elr", "last_known_elr", "leader_recovery_state")]
    return ObservedPartition(
        _topic(f"{where}.topic", item["topic"]),
        _non_negative_int32(f"{where}.partition", item["partition"]),
        _int_in(f"{where}.leader", item["leader"], -1, INT32_MAX, "a broker id or -1 (no leader)"),
        _non_negative_int32(f"{where}.leader_epoch", item["leader_epoch"]),
        _brokers(f"{where}.isr", item["isr"], allow_empty=True),
        None
        if optional[0] is None
        else _non_negative_int32(f"{where}.partition_epoch", optional[0]),
        None
        if optional[1] is None
        else _non_negative_int32(f"{where}.controller_epoch", optional[1]),
        None if optional[2] is None else replicas(f"{where}.replicas", optional[2]),
        None if kraft[0] is None else _brokers(f"{where}.elr", kraft[0], allow_empty=True),
        None if kraft[1] is None else _last_known_elr(f"{where}.last_known_elr", kraft[1]),
        None if kraft[2] is None else _recovery_state(f"{where}.leader_recovery_state", kraft[2]),
    )


def _epoch(name: str, value: object) -> int:
    """A broker epoch: KRaft's is a log offset, ZooKeeper's a czxid; both non-negative."""
    return _int_in(name, value, 0, INT64_MAX, "a non-negative 64-bit integer (a broker epoch)")


def _previous_epoch(name: str, value: object) -> int:
    """BrokerRegistrationRequest's previousBrokerEpoch: an epoch, or -1 for none."""
    return _int_in(
        name, value, -1, INT64_MAX, "a broker epoch (a non-negative 64-bit integer) or -1"
    )


def _broker_epochs(name: str, value: object) -> dict[int, int]:
    """{"<broker>": epoch}: AlterPartition's ISR members with their broker epochs
    (KIP-903); -1 is what a broker sends for a member whose epoch it does not know."""
    if not isinstance(value, dict):
        raise FieldError(
            f"field '{name}' must be an object of broker → broker epoch, like {{\"1\": 17}}, "
            f"got {show(value)}"
        )
    result: dict[int, int] = {}
    for key, epoch in value.items():
        if not _PARTITION_KEY.fullmatch(key) or len(key) > 10 or int(key) > INT32_MAX:
            raise FieldError(
                f"field '{name}' keys must be broker ids written in decimal (non-negative "
                f'32-bit, like "1"), got {show(key)}'
            )
        result[int(key)] = _int_in(
            f"{name}.{key}", epoch, -1, INT64_MAX, "a broker epoch (a 64-bit integer) or -1"
        )
    return dict(sorted(result.items()))


def _recovery_state(name: str, value: object) -> str:
    if value not in _RECOVERY_STATES:
        raise FieldError(f'field \'{name}\' must be "RECOVERED" or "RECOVERING", got {show(value)}')
    return value


# the dynamic broker configs whose values kcsim reads, each checked as Kafka's ConfigDef
# checks it; any other key is carried as given (a ConfigRecord of it changes nothing here)
_BROKER_CONFIG_CHECKS: Mapping[str, Callable[[str, str], object]] = {
    "min.insync.replicas": parse_min_insync_replicas,
    "unclean.leader.election.enable": parse_bool,
}


def _broker_configs(name: str, value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise FieldError(f"field '{name}' must be an object of string → string, got {show(value)}")
    if not value:
        raise FieldError(f"field '{name}' must set at least one config")
    result: dict[str, str] = {}
    for key, item in value.items():
        # the event sets configs; Kafka's DELETE is not modelled
        result[key] = _config_value(name, key, item, "a null value deletes nothing here")
        check = _BROKER_CONFIG_CHECKS.get(key)
        if check is not None:
            try:
                check(key, result[key])
            except ConfigError as error:
                raise FieldError(f"field '{name}': {error}") from None
    return result


# the features an UpdateFeatures event may name (CONTRACT §5)
FEATURE_NAMES = ("eligible.leader.replicas.version",)


def _features(name: str, value: object) -> dict[str, int]:
    """{feature: level}: a level is Kafka's int16; whether the controller supports it is
    its own answer (INVALID_UPDATE_VERSION, an event_results row)."""
    if not isinstance(value, dict):
        raise FieldError(
            f"field '{name}' must be an object like {{\"eligible.leader.replicas.version\": 1}}, "
            f"got {show(value)}"
        )
    if not value:
        raise FieldError(f"field '{name}' must name at least one feature")
    result: dict[str, int] = {}
    for key, level in value.items():
        if key not in FEATURE_NAMES:
            raise FieldError(
                f"field '{name}' names the feature {show(key)}, which kcsim does not model; "
                "expected " + ", ".join(repr(f) for f in FEATURE_NAMES)
            )
        result[key] = _int_in(f"{name}.{key}", level, -(2**15), 2**15 - 1, "a 16-bit integer")
    return result


Validator = Callable[[str, object], Any]

VALIDATORS: Mapping[Kind, Validator] = {
    Kind.STRING: _string,
    Kind.INT: _int32,
    Kind.LONG: _int64,
    Kind.BROKER: _non_negative_int32,
    Kind.TOPIC: _topic,
    Kind.PARTITION: _non_negative_int32,
    Kind.REPLICAS: replicas,
    Kind.REPLICAS_OR_NULL: replicas_or_null,
    Kind.BROKER_LIST: _broker_list,
    Kind.ASSIGNMENT: _assignment,
    Kind.CONFIGS: _configs,
    Kind.ELECTION: _election,
    Kind.PARTITION_REFS: _partition_refs,
    Kind.ERROR_OR_NULL: _error_or_null,
    Kind.TIMESTAMP: _timestamp,
    Kind.PARTITION_STATES: _partition_states,
    Kind.DELETION: _deletion,
    Kind.OBSERVED: observed_partitions,
    Kind.EPOCH: _epoch,
    Kind.PREVIOUS_EPOCH: _previous_epoch,
    Kind.BROKER_EPOCHS: _broker_epochs,
    Kind.RECOVERY_STATE: _recovery_state,
    Kind.BROKER_CONFIGS: _broker_configs,
    Kind.FEATURES: _features,
}
assert set(VALIDATORS) == set(Kind)
# The common fields other than `type` and `cluster`, which parse_event reads first, and
# `observed`, which it reads on its own (one lookup for the events that carry none).
_HEADER_FIELDS = tuple(s for s in COMMON_FIELDS if s.name not in ("type", "cluster", "observed"))
# Kinds whose JSON null is a value, not an absence.
_NULL_IS_VALUE = frozenset({Kind.REPLICAS_OR_NULL, Kind.ERROR_OR_NULL})
# What _read_fields needs of a field, looked up once: (name, validator, required, whether
# null is a value).
_Reader = tuple[str, Validator, bool, bool]
_ABSENT = object()


def _readers(specs: Iterable[FieldSpec]) -> tuple[_Reader, ...]:
    return tuple((s.name, VALIDATORS[s.kind], s.required, s.kind in _NULL_IS_VALUE) for s in specs)


_HEADER_READERS = _readers(_HEADER_FIELDS)
_EVENT_READERS = {event_type: _readers(specs) for event_type, specs in EVENT_FIELDS.items()}

# The user's own annotation (CONTRACT §1): any JSON value, carried nowhere, never checked.
ANNOTATION_FIELD = "meta"
# The fields an event of each type may carry (CONTRACT §1): the common ones, the
# annotation, and the type's own as `schemas.events.EVENT_FIELDS` declares them for the
# loop above to read (a snapshot's `state` and `deletion` on topic_creation among them).
# Any other is a rejection naming the closest of these, so a misspelled optional field
# ("rak") never silently changes a simulation. A type declares its fields there, once.
ALLOWED_FIELDS: Mapping[str, frozenset[str]] = {
    event_type: frozenset(
        [*(s.name for s in COMMON_FIELDS), ANNOTATION_FIELD, *(s.name for s in specs)]
    )
    for event_type, specs in EVENT_FIELDS.items()
}
_COMMON_NAMES = ", ".join(s.name for s in COMMON_FIELDS)


def _unknown_field(event_type: str, obj: Mapping[str, Any]) -> FieldError:
    """The rejection of the first field (in the line's order) that `event_type` does not
    take, naming the closest it does."""
    allowed = ALLOWED_FIELDS[event_type]
    name = next(key for key in obj if key not in allowed)
    shown = displayable(name)
    reason = f"field '{_clip(shown)}' is not a field of event type '{event_type}'"
    close = difflib.get_close_matches(shown, sorted(allowed), n=1)
    if close:
        return FieldError(f"{reason}: did you mean '{close[0]}'?")
    own = ", ".join(s.name for s in EVENT_FIELDS[event_type]) or "none"
    return FieldError(
        f"{reason} (its own fields: {own}; common: {_COMMON_NAMES}); put your own "
        f"annotations under '{ANNOTATION_FIELD}'"
    )


# ---------------------------------------------------------------------- cross-field


def _one_broker_field(event_type: str) -> Callable[[dict[str, Any]], None]:
    def check(values: dict[str, Any]) -> None:
        if ("broker" in values) is not ("brokers" in values):
            return  # exactly one: the common case, one test
        if "broker" in values:
            raise FieldError(
                "give either 'broker' (one broker) or 'brokers' (several in one change), not both"
            )
        raise FieldError(
            f"missing required field 'broker' for event type '{event_type}' (or "
            "'brokers': several brokers in one change)"
        )

    return check


def _check_topic_creation(values: dict[str, Any]) -> None:
    by_count = "partitions" in values or "replication_factor" in values
    if "assignment" in values:
        if by_count:
            raise FieldError(
                "topic_creation takes either 'assignment' or 'partitions' + "
                "'replication_factor', not both"
            )
        _check_new_topic_assignment(values["assignment"])
        _check_states_assigned(values)
        return
    for name in ("state", "deletion"):
        if name in values:
            raise FieldError(
                f"field '{name}' needs an 'assignment': it describes an existing topic"
            )
    for name in ("partitions", "replication_factor"):
        if name not in values:
            raise FieldError(
                f"topic_creation needs 'assignment' or both 'partitions' and "
                f"'replication_factor'; '{name}' is missing"
            )
        if values[name] < 1:
            raise FieldError(f"field '{name}' must be at least 1, got {values[name]}")


def _check_new_topic_assignment(assignment: Mapping[int, tuple[int, ...]]) -> None:
    # An explicit assignment is the topic znode the controller reads, not a request to
    # validate (CONTRACT §1): replica counts may differ between partitions (as after
    # reassignments). Its partitions are numbered 0..n-1, as every topic znode Kafka
    # writes is (AdminZkClient.validateTopicCreate's wording).
    if sorted(assignment) != list(range(len(assignment))):
        raise FieldError(
            "field 'assignment': partitions should be a consecutive 0-based integer sequence"
        )


def _check_states_assigned(values: dict[str, Any]) -> None:
    state = values.get("state")
    if state is None:
        return
    unassigned = [p for p in state if p not in values["assignment"]]
    if unassigned:
        raise FieldError(
            f"field 'state' names partitions {unassigned} that 'assignment' does not assign"
        )


CROSS_CHECKS: Mapping[str, Callable[[dict[str, Any]], None]] = {
    "broker_startup": _one_broker_field("broker_startup"),
    "broker_failure": _one_broker_field("broker_failure"),
    "topic_creation": _check_topic_creation,
    "partition_creation": _check_states_assigned,
}


# --------------------------------------------------------------------------- parsing


def _read_fields(
    obj: Mapping[str, Any], readers: tuple[_Reader, ...], event_type: str
) -> dict[str, Any]:
    """Validated values of the fields `readers` read that are present. An optional field
    given as null counts as absent (JSON writers and Spark's to_json use both forms for
    "no value")."""
    values: dict[str, Any] = {}
    for name, validate, required, null_is_value in readers:
        value = obj.get(name, _ABSENT)
        if value is _ABSENT or (value is None and not null_is_value):
            if required and value is _ABSENT:
                raise FieldError(f"missing required field '{name}' for event type '{event_type}'")
            if required:  # given as null, which this kind does not take
                validate(name, None)
                raise FieldError(f"field '{name}' must not be null")
            continue
        values[name] = validate(name, value)
    return values


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python keeps the last of repeated keys, other readers the first: refuse the ambiguity.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise FieldError(f"key '{displayable(key)}' appears twice in one JSON object")
            seen.add(key)
    return obj


def _no_constant(name: str) -> None:
    raise FieldError(f"not valid JSON: {name} is not a JSON value")


# Stateless, so one serves every call (json.loads with hooks builds a decoder per call).
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
# (C) the value at an index and where it ends; typeshed does not declare the attribute
_SCAN_ONCE = _DECODER.scan_once  # type: ignore[attr-defined]


def _load_json(raw: str) -> object:
    # A line that is one JSON value and nothing else (what producers write) takes the
    # decoder's C scanner directly, skipping JSONDecoder.decode's Python wrappers; on
    # anything else the scanner's outcome is dropped and decode runs, for its own errors
    # (the BOM check, "Extra data", whitespace around the value).
    try:
        value, end = _SCAN_ONCE(raw, 0)
    except (StopIteration, ValueError, RecursionError):
        end = -1
    if end == len(raw):
        return value
    try:
        if raw.startswith("\ufeff"):  # as json.loads words it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", raw, 0)
        return _DECODER.decode(raw)
    except json.JSONDecodeError as error:
        where = (
            f"line {error.lineno} column {error.colno}"
            if error.lineno > 1
            else (f"column {error.colno}")
        )
        raise FieldError(f"not valid JSON: {error.msg} at {where}") from None
    except RecursionError:
        raise FieldError("not valid JSON: nested too deeply") from None
    except FieldError:
        raise
    except ValueError as error:  # e.g. an integer literal beyond Python's digit limit
        raise FieldError(f"not valid JSON: {error}") from None


def _check_text(raw: str) -> None:
    try:
        raw.encode("utf-8")  # fast path, in C
    except UnicodeEncodeError as error:
        char = raw[error.start]
        if "\udc80" <= char <= "\udcff":  # an undecodable byte kept by surrogateescape
            detail = f"byte 0x{ord(char) - 0xDC00:02x}"
        else:
            detail = f"lone surrogate U+{ord(char):04X}"
        raise FieldError(
            f"line is not valid UTF-8 text: {detail} at column {error.start + 1}"
        ) from None


def _cluster(obj: Mapping[str, Any]) -> str:
    value = obj.get("cluster")
    if value is None:
        return DEFAULT_CLUSTER
    cluster = _string("cluster", value)
    if not cluster:
        raise FieldError("field 'cluster' must be a non-empty string, got \"\"")
    return cluster


_EXPECTED_TYPES = ", ".join(EVENT_TYPES)


def _event_type(obj: Mapping[str, Any]) -> str:
    if "type" not in obj:
        raise FieldError("missing required field 'type'; expected one of " + _EXPECTED_TYPES)
    value = obj["type"]
    expected = _EXPECTED_TYPES
    if not isinstance(value, str):
        raise FieldError(f"field 'type' must be a string, one of {expected}; got {show(value)}")
    if value not in EVENT_FIELDS:
        raise FieldError(f"unknown event type '{displayable(value)}'; expected one of {expected}")
    return value


def parse_event(raw: str, source: str) -> Event | Rejection:
    """One line (or Kafka record value) → a typed `Event`, or a `Rejection` saying why not.

    A field the event's type does not take is a rejection (`ALLOWED_FIELDS`); `meta` is
    the user's, taken and never read."""
    cluster: str | None = None
    obj: object = None
    try:
        _check_text(raw)
        obj = _load_json(raw)
        if not isinstance(obj, dict):
            raise FieldError(f"expected a JSON object, got {show(obj)}")
        cluster = _cluster(obj)
        event_type = _event_type(obj)
        common = _read_fields(obj, _HEADER_READERS, event_type)
        if common.get("event_id") == "":  # an id must name the event, as a cluster must
            raise FieldError("field 'event_id' must be a non-empty string, got \"\"")
        observed = obj.get("observed")
        observed_brokers = None
        if observed is not None:
            observed, observed_brokers = observed_state("observed", observed)
        values = _read_fields(obj, _EVENT_READERS[event_type], event_type)
        if check := CROSS_CHECKS.get(event_type):
            check(values)
        # after the fields it takes: a line whose own fields are wrong says so first
        if not ALLOWED_FIELDS[event_type].issuperset(obj):
            raise _unknown_field(event_type, obj)
    except FieldError as error:
        return Rejection(cluster, displayable(raw), str(error), source, _observed_of_rejected(obj))
    header = Header(
        type=event_type,
        cluster=cluster,
        event_id=common.get("event_id"),
        seq=common.get("seq"),
        ts=common.get("ts"),
        raw=raw,
        source=source,
    )
    if observed is not None:  # (a keyword less for the events without: a hot path)
        header = header._replace(observed=observed, observed_brokers=observed_brokers)
    return Event(header, BODIES[event_type](**values))


def _observed_of_rejected(obj: object) -> ObservedEvent | None:
    """A rejected line's well-formed `observed`, with whichever of its ids are readable:
    kcsim rejecting an event the real controller handled is a divergence of its own."""
    if not isinstance(obj, dict) or obj.get("observed") is None:
        return None
    try:
        partitions = observed_partitions("observed", obj["observed"])
    except FieldError:
        return None  # the rejection's reason already says what is wrong
    return ObservedEvent(
        _readable(obj, "event_id", _string),
        _readable(obj, "seq", _int64),
        _readable(obj, "ts", _timestamp),
        partitions,
    )


def _readable(obj: Mapping[str, Any], name: str, validate: Validator) -> Any:
    """`obj[name]` if present and valid, else None."""
    value = obj.get(name)
    if value is None:
        return None
    try:
        return validate(name, value)
    except FieldError:
        return None
