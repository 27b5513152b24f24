"""Topic-level configs as Kafka 3.7.1 checks them (CONTRACT §1: the `configs` of
`topic_creation` and `topic_config_change` "are validated as Kafka validates them").

Both CreateTopics and AlterConfigs run LogConfig.validate on a broker: every name must be
one LogConfig defines ("Unknown topic config name: <name>"), then each value is parsed by
ConfigDef for its type and checked by its validator, in the order LogConfig defines the
keys, and the first failure is the answer ("Invalid value <v> for configuration <name>:
<reason>"). `TOPIC_CONFIGS` below lists the 31 names of 3.7.1 with type and validator;
`validate_topic_configs` applies them to a {name: text} map. Values are not rewritten:
Kafka stores the text as given, so a caller keeps its own copy.

Parsing follows Java, not Python: ConfigDef trims with String.trim (every character up to
U+0020, not Unicode spaces); INT and LONG go through Integer.parseInt / Long.parseLong (an
optional sign, then decimal digits, which Java takes from any Unicode Nd block in the BMP,
range-checked); DOUBLE through Double.parseDouble (decimal or hexadecimal literal, optional
exponent and f/d suffix, NaN, Infinity); BOOLEAN is true/false ignoring case as
String.equalsIgnoreCase does; LIST splits on commas with ASCII blanks around them and keeps
empty items.

Kafka prints the offending value bare; here a text value is quoted (Python repr) so blanks
and empty strings stay visible, as kcsim's settings errors already do. Numbers a range check
refuses are shown as Java prints them (a DOUBLE as Double.toString would).

Kafka checks a config change's merged set of overrides; the parser sees one event, so
the controller's check runs this on the merged map too (a `min.compaction.lag.ms` above
an earlier `max.compaction.lag.ms` is refused).

Left out, because they depend on broker settings kcsim does not model or on state the parser
does not see:

- remote storage: a broker whose `remote.log.storage.system.enable` is false (the default)
  refuses `remote.storage.enable=true`, and with it enabled Kafka refuses it on a compacted
  topic and checks `local.retention.ms/bytes` against `retention.ms/bytes` (or the broker's
  defaults). kcsim accepts `remote.storage.enable` as any boolean.
- CreateTopicPolicy / AlterConfigPolicy plug-ins, and the warnings (not refusals) Kafka logs
  for `message.format.version` under a 3.0+ inter-broker protocol.
- Unknown names: Kafka walks a hash table, so with several unknown names it may name another
  one first; here the first in input order is named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum

from controller.java_text import (
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    NotANumber,
    java_double_text,
    java_equals_ignore_case,
    java_trim,
    parse_java_double,
    parse_java_integer,
)


class TopicConfigError(ValueError):
    """A topic config Kafka refuses; the message is Kafka's wording."""


class ConfigType(Enum):
    """The ConfigDef types topic configs use (no topic config is SHORT, CLASS or PASSWORD)."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"


_LIST_BLANKS = " \t\n\x0b\f\r"  # what ConfigDef's split on \\s*,\\s* drops around a comma

# ---------------------------------------------------------------------- messages


def _shown(value: object) -> str:
    """How a refused value appears: text quoted, numbers as Java prints them."""
    if isinstance(value, float):
        return java_double_text(value)
    if isinstance(value, list):  # java.util.List.toString
        return repr(f"[{', '.join(value)}]")
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _invalid(name: str, value: object, reason: str) -> TopicConfigError:
    return TopicConfigError(f"Invalid value {_shown(value)} for configuration {name}: {reason}")


# ---------------------------------------------------------------------- validators

Check = Callable[[str, object], None]  # (config name, parsed value); raises TopicConfigError


def at_least(low: int) -> Check:
    return between(low, None)


def between(low: int, high: int | None) -> Check:
    """ConfigDef.Range: compared as doubles; NaN passes both bounds, as in Java."""

    def check(name: str, value: object) -> None:
        number = float(value)  # type: ignore[arg-type]
        if number < low:
            raise _invalid(name, value, f"Value must be at least {low}")
        if high is not None and number > high:
            raise _invalid(name, value, f"Value must be no more than {high}")

    return check


def one_of(*allowed: str) -> Check:
    """ConfigDef.ValidString: exact, case-sensitive."""

    def check(name: str, value: object) -> None:
        if value not in allowed:
            raise _invalid(name, value, f"String must be one of: {', '.join(allowed)}")

    return check


def each_one_of(*allowed: str) -> Check:
    """ConfigDef.ValidList: every item passes ValidString (an empty list passes)."""
    item_check = one_of(*allowed)

    def check(name: str, value: object) -> None:
        for item in value:  # type: ignore[attr-defined]
            item_check(name, item)

    return check


def _ibp_keys() -> frozenset[str]:
    """MetadataVersion's lookup keys in 3.7.1: every "<release>-IV<n>" (or the bare release
    before 0.10), plus each production release alone (3.7-IV4 is the last production one,
    so "3.8" alone is not a key but "3.8-IV0" is)."""
    bare = ("0.8.0", "0.8.1", "0.8.2", "0.9.0")
    with_ivs = {
        "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3, "1.0": 1, "1.1": 1,
        "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3,
        "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3,
        "3.7": 5, "3.8": 1,
    }  # fmt: skip
    keys = set(bare)
    for release, count in with_ivs.items():
        keys.update(f"{release}-IV{n}" for n in range(count))
        if release != "3.8":
            keys.add(release)
    return frozenset(keys)


_IBP_KEYS = _ibp_keys()


def metadata_version(name: str, value: object) -> None:
    """MetadataVersion.fromVersionString: the first three dot-separated parts of a "0.x"
    version, else the first two, must name a known version ("3.7.1" reads as "3.7")."""
    text = str(value)
    parts = text.split(".")
    while parts and not parts[-1]:  # Java's split drops trailing empty strings
        parts.pop()
    keep = 3 if text.startswith("0.") else 2
    key = text if keep >= len(parts) else ".".join(parts[:keep])
    if key not in _IBP_KEYS:
        raise _invalid(name, value, f"Version {text} is not a valid version")


_REPLICA = re.compile(r"(?:[0-9]+:[0-9]+)?")


def throttled_replicas(name: str, value: object) -> None:
    """ThrottledReplicaListValidator: "*", or items "<partition>:<broker>" (blank allowed)."""
    items = [java_trim(item) for item in value]  # type: ignore[attr-defined]
    if all(_REPLICA.fullmatch(item) for item in items) or "".join(items) == "*":
        return
    raise _invalid(
        name,
        value,
        f"{name} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
    )


# ---------------------------------------------------------------------- the table


@dataclass(frozen=True)
class TopicConfig:
    name: str
    type: ConfigType
    check: Check | None = None


_T = ConfigType
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_THROTTLED = throttled_replicas

# LogConfig's definition order, which is the order Kafka checks values in.
TOPIC_CONFIGS: Mapping[str, TopicConfig] = {
    c.name: c
    for c in (
        TopicConfig("segment.bytes", _T.INT, at_least(14)),  # LegacyRecord.RECORD_OVERHEAD_V0
        TopicConfig("segment.ms", _T.LONG, at_least(1)),
        TopicConfig("segment.jitter.ms", _T.LONG, at_least(0)),
        TopicConfig("segment.index.bytes", _T.INT, at_least(4)),
        TopicConfig("flush.messages", _T.LONG, at_least(1)),
        TopicConfig("flush.ms", _T.LONG, at_least(0)),
        TopicConfig("retention.bytes", _T.LONG),
        TopicConfig("retention.ms", _T.LONG, at_least(-1)),
        TopicConfig("max.message.bytes", _T.INT, at_least(0)),
        TopicConfig("index.interval.bytes", _T.INT, at_least(0)),
        TopicConfig("delete.retention.ms", _T.LONG, at_least(0)),
        TopicConfig("min.compaction.lag.ms", _T.LONG, at_least(0)),
        TopicConfig("max.compaction.lag.ms", _T.LONG, at_least(1)),
        TopicConfig("file.delete.delay.ms", _T.LONG, at_least(0)),
        TopicConfig("min.cleanable.dirty.ratio", _T.DOUBLE, between(0, 1)),
        TopicConfig("cleanup.policy", _T.LIST, each_one_of("compact", "delete")),
        TopicConfig("unclean.leader.election.enable", _T.BOOLEAN),
        TopicConfig("min.insync.replicas", _T.INT, at_least(1)),
        TopicConfig("compression.type", _T.STRING, one_of(*_COMPRESSION)),
        TopicConfig("preallocate", _T.BOOLEAN),
        TopicConfig("message.format.version", _T.STRING, metadata_version),
        TopicConfig("message.timestamp.type", _T.STRING, one_of("CreateTime", "LogAppendTime")),
        TopicConfig("message.timestamp.difference.max.ms", _T.LONG, at_least(0)),
        TopicConfig("message.timestamp.before.max.ms", _T.LONG, at_least(0)),
        TopicConfig("message.timestamp.after.max.ms", _T.LONG, at_least(0)),
        TopicConfig("leader.replication.throttled.replicas", _T.LIST, _THROTTLED),
        TopicConfig("follower.replication.throttled.replicas", _T.LIST, _THROTTLED),
        TopicConfig("message.downconversion.enable", _T.BOOLEAN),
        TopicConfig("remote.storage.enable", _T.BOOLEAN),
        TopicConfig("local.retention.ms", _T.LONG, at_least(-2)),
        TopicConfig("local.retention.bytes", _T.LONG, at_least(-2)),
    )
}

_MIN_LAG, _MAX_LAG = "min.compaction.lag.ms", "max.compaction.lag.ms"
_DEFAULTS: Mapping[str, object] = {_MIN_LAG: 0, _MAX_LAG: LONG_MAX}


def _list_items(text: str) -> list[str]:
    """ConfigDef's LIST: split on commas with blanks around them (kept: empty items).
    Split and strip rather than a regex, which is quadratic on a long run of blanks."""
    if not text:
        return []
    items = text.split(",")
    last = len(items) - 1
    return [
        item.lstrip(_LIST_BLANKS if i > 0 else "").rstrip(_LIST_BLANKS if i < last else "")
        for i, item in enumerate(items)
    ]


def parse_value(config: TopicConfig, text: str) -> object:
    """ConfigDef.parseType for a text value: the parsed value, or TopicConfigError."""
    trimmed = java_trim(text)
    kind = config.type
    try:
        if kind is ConfigType.BOOLEAN:
            if java_equals_ignore_case(trimmed, "true"):
                return True
            if java_equals_ignore_case(trimmed, "false"):
                return False
            raise _invalid(config.name, text, "Expected value to be either true or false")
        if kind is ConfigType.INT:
            return parse_java_integer(trimmed, INT_MIN, INT_MAX)
        if kind is ConfigType.LONG:
            return parse_java_integer(trimmed, LONG_MIN, LONG_MAX)
        if kind is ConfigType.DOUBLE:
            return parse_java_double(trimmed)
        if kind is ConfigType.LIST:
            return _list_items(trimmed)
        return trimmed
    except NotANumber:
        raise _invalid(config.name, text, f"Not a number of type {kind.value}") from None


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """LogConfig.validate on one map of overrides: unknown names first, then each value in
    definition order, then the compaction-lag conflict. Raises TopicConfigError."""
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise TopicConfigError(f"Unknown topic config name: {name}")
    parsed: dict[str, object] = {}
    for name, config in TOPIC_CONFIGS.items():
        if name in configs:
            value = parse_value(config, configs[name])
            if config.check is not None:
                config.check(name, value)
            parsed[name] = value
    low = parsed.get(_MIN_LAG, _DEFAULTS[_MIN_LAG])
    high = parsed.get(_MAX_LAG, _DEFAULTS[_MAX_LAG])
    if low > high:  # type: ignore[operator]
        raise TopicConfigError(
            f"conflict topic config setting {_MIN_LAG} ({low}) > {_MAX_LAG} ({high})"
        )


def topic_config_error(configs: Mapping[str, str]) -> str | None:
    """The reason Kafka would refuse `configs`, or None when it would take them."""
    try:
        validate_topic_configs(configs)
    except TopicConfigError as error:
        return str(error)
    return None
