"""Simulation settings, named as Kafka names them (CONTRACT §1, settings table)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import cast

from controller.java_text import java_equals_ignore_case
from controller.topic_configs import ConfigType, TopicConfig, TopicConfigError, parse_value

UNCLEAN_KEY = "unclean.leader.election.enable"
ENGINE_KEY = "kcsim.engine"
ELR_KEY = "eligible.leader.replicas.version"
METADATA_VERSION_KEY = "metadata.version"
MIN_ISR_KEY = "min.insync.replicas"

ZK = "zk"
KRAFT = "kraft"
ENGINES = (ZK, KRAFT)

# Kafka 4.1.1's MetadataVersion values a cluster can run (SPEC-KRAFT §1.2, §1.3): from
# MINIMUM_VERSION 3.3-IV3 to LATEST_PRODUCTION 4.1-IV1, in order. 4.1.1 also defines
# 4.2-IV0 and 4.2-IV1, unstable, which a production cluster is never formatted with.
METADATA_VERSIONS = (
    "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2",
    "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0", "4.0-IV0",
    "4.0-IV1", "4.0-IV2", "4.0-IV3", "4.1-IV0", "4.1-IV1",
)  # fmt: skip
LATEST_METADATA_VERSION = "4.1-IV1"
_UNSTABLE_METADATA_VERSIONS = ("4.2-IV0", "4.2-IV1")
# the first metadata.version with the ELR fields (MV.isElrSupported)
ELR_MINIMUM_METADATA_VERSION = "4.0-IV1"
# the first metadata.version a new cluster is formatted with ELR on at
ELR_BOOTSTRAP_METADATA_VERSION = "4.1-IV0"
_RELEASE = re.compile(r"(\d+)\.(\d+)(?:-IV(\d+))?")


class ConfigError(ValueError):
    """A setting that Kafka would refuse at start-up; the message names the key."""


def parse_bool(key: str, value: str | bool) -> bool:
    """ConfigDef's BOOLEAN: the trimmed text is true or false, case ignored."""
    if isinstance(value, bool):
        return value
    return bool(_parse(key, value, ConfigType.BOOLEAN))


def parse_int(key: str, value: str | int) -> int:
    """ConfigDef's INT: the trimmed text through Integer.parseInt."""
    if isinstance(value, bool):  # a JSON true is not a number
        raise ConfigError(
            f"Invalid value {value!r} for configuration {key}: Not a number of type INT"
        )
    return cast(int, _parse(key, value, ConfigType.INT))  # an INT config's value


def _parse(key: str, value: object, kind: ConfigType) -> object:
    """A setting's text parsed as a topic config of that type is (one ConfigDef)."""
    try:
        return parse_value(TopicConfig(key, kind), str(value))
    except TopicConfigError as error:
        raise ConfigError(str(error)) from None


def scala_to_boolean(value: str) -> bool:
    """`Try(value.toBoolean).getOrElse(false)` in Scala 2.13: "true" in any case is true,
    anything else false; unlike Kafka's config parser, blanks are not ignored."""
    return java_equals_ignore_case(value, "true")


@dataclass(frozen=True, slots=True)
class Settings:
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    simulate_brokers: bool = False
    # which controller the run simulates (CONTRACT §5): "zk" or "kraft"
    engine: str = ZK
    # KRaft: the finalized ELR feature level (1: on, as a new 4.1 cluster is formatted)
    eligible_leader_replicas_version: int = 1
    # KRaft: the cluster's metadata.version, canonical ("4.1-IV1")
    metadata_version: str = LATEST_METADATA_VERSION
    # the cluster default; a topic's configs override it (KRaft: ELR; both: at_min_isr)
    min_insync_replicas: int = 1

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> Settings:
        kwargs: dict[str, object] = {}
        for key, raw in values.items():
            name = _KEYS.get(key)
            if name is None:
                raise ConfigError(
                    f"Unknown configuration key {key!r}; known keys: " + ", ".join(sorted(_KEYS))
                )
            if name == "leader_imbalance_per_broker_percentage":
                kwargs[name] = parse_int(key, raw)  # an INT without a range, as Kafka's
            elif name == "engine":
                kwargs[name] = parse_engine(key, raw)
            elif name == "eligible_leader_replicas_version":
                kwargs[name] = parse_elr_version(key, raw)
            elif name == "metadata_version":
                kwargs[name] = parse_metadata_version(key, raw)
            elif name == "min_insync_replicas":
                kwargs[name] = parse_min_insync_replicas(key, raw)
            else:
                kwargs[name] = parse_bool(key, raw)
        if "eligible_leader_replicas_version" not in kwargs and "metadata_version" in kwargs:
            # a cluster formatted at that version: ELR level 1 is part of the bootstrap
            # from 4.1-IV0 on (EligibleLeaderReplicasVersion's bootstrap metadata version)
            kwargs["eligible_leader_replicas_version"] = int(
                not metadata_version_before(
                    str(kwargs["metadata_version"]), ELR_BOOTSTRAP_METADATA_VERSION
                )
            )
        settings = cls(**kwargs)  # type: ignore[arg-type]
        settings.check_feature_dependencies()
        return settings

    def check_feature_dependencies(self) -> None:
        """ELR level 1 needs metadata.version 4.0-IV1 or later (Kafka's
        Feature.validateVersion refuses the pair at format time)."""
        if self.eligible_leader_replicas_version >= 1 and metadata_version_before(
            self.metadata_version, ELR_MINIMUM_METADATA_VERSION
        ):
            raise ConfigError(
                f"Invalid value {self.eligible_leader_replicas_version} for configuration "
                f"{ELR_KEY}: it depends on {METADATA_VERSION_KEY} "
                f"{ELR_MINIMUM_METADATA_VERSION} or later, and {METADATA_VERSION_KEY} is "
                f"{self.metadata_version} (set {ELR_KEY}=0, or a later {METADATA_VERSION_KEY})"
            )

    @property
    def kraft(self) -> bool:
        return self.engine == KRAFT

    @classmethod
    def load(cls, config_file: Path | None = None, overrides: Iterable[str] = ()) -> Settings:
        """`--config FILE` then repeated `--set key=value`, the latter winning."""
        values: dict[str, str] = {}
        if config_file is not None:
            # Java's Properties.load(InputStream): ISO 8859-1, other characters as \\uXXXX
            values.update(read_properties(config_file.read_bytes().decode("latin-1")))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--set expects key=value, got {item!r}")
            values[key.strip()] = value.strip()
        return cls.from_properties(values)

    def as_properties(self) -> dict[str, str]:
        return {key: _render(getattr(self, name)) for key, name in _KEYS.items()}


def parse_engine(key: str, value: str) -> str:
    engine = value.strip()
    if engine not in ENGINES:
        raise ConfigError(
            f"Invalid value {value!r} for configuration {key}: expected one of "
            + " or ".join(repr(e) for e in ENGINES)
        )
    return engine


def parse_elr_version(key: str, value: str | int) -> int:
    """A feature level of eligible.leader.replicas.version: 0 (off) or 1 (on), the levels
    Kafka 4.1.1 knows."""
    level = parse_int(key, value)
    if level not in (0, 1):
        raise ConfigError(
            f"Invalid value {level} for configuration {key}: Kafka 4.1.1 knows the levels "
            "0 (ELR off) and 1 (ELR on)"
        )
    return level


def parse_metadata_version(key: str, value: str) -> str:
    """A MetadataVersion as Kafka's MetadataVersion.fromVersionString reads it: "3.7-IV2",
    or a release alone ("3.7") for that release's latest version; returned canonical."""
    text = value.strip()
    match = _RELEASE.fullmatch(text)
    if match is not None and match[3] is None:
        release = f"{match[1]}.{match[2]}-"
        of_release = [v for v in METADATA_VERSIONS if v.startswith(release)]
        if of_release:
            return of_release[-1]
    if text in METADATA_VERSIONS:
        return text
    if text in _UNSTABLE_METADATA_VERSIONS:
        problem = "an unstable version of Kafka 4.1.1, which no production cluster runs"
    elif match is not None and metadata_version_before(text, METADATA_VERSIONS[0]):
        problem = f"below {METADATA_VERSIONS[0]}, the oldest Kafka 4.1.1 supports"
    else:
        problem = "not a metadata version Kafka 4.1.1 knows"
    raise ConfigError(
        f"Invalid value {value!r} for configuration {key}: {problem}; expected one of "
        f"{METADATA_VERSIONS[0]} ... {METADATA_VERSIONS[-1]} (or a release such as 3.7)"
    )


def metadata_version_before(version: str, other: str) -> bool:
    """Whether metadata version `version` is older than `other` (both "X.Y-IVn")."""
    return _version_key(version) < _version_key(other)


def _version_key(version: str) -> tuple[int, int, int]:
    match = _RELEASE.fullmatch(version)
    if match is None:
        return (0, 0, 0)
    return (int(match[1]), int(match[2]), int(match[3] or 0))


def parse_min_insync_replicas(key: str, value: str | int) -> int:
    """min.insync.replicas: an INT, at least 1 (Kafka's ConfigDef: atLeast(1))."""
    count = parse_int(key, value)
    if count < 1:
        raise ConfigError(
            f"Invalid value {count} for configuration {key}: Value must be at least 1"
        )
    return count


def _render(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


_KEYS = {
    "auto.leader.rebalance.enable": "auto_leader_rebalance_enable",
    "leader.imbalance.per.broker.percentage": "leader_imbalance_per_broker_percentage",
    UNCLEAN_KEY: "unclean_leader_election_enable",
    "delete.topic.enable": "delete_topic_enable",
    "kcsim.simulate.brokers": "simulate_brokers",
    ENGINE_KEY: "engine",
    ELR_KEY: "eligible_leader_replicas_version",
    METADATA_VERSION_KEY: "metadata_version",
    MIN_ISR_KEY: "min_insync_replicas",
}
assert set(_KEYS.values()) == {f.name for f in fields(Settings)}


_DOTTED_NAME = re.compile(r"[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*\.[a-z0-9]+(?:[._-][a-z0-9]+)*")


def shown_key(key: str, supported: Iterable[str]) -> str:
    """How an error names an unknown key of a properties file that may hold secrets: a
    dotted lower-case name (Kafka's form) is quoted, and so is a key close to a supported
    one (with that one); anything else is not shown, since a secret wrapped onto a line
    of its own (a continuation without its backslash) reads as a key."""
    close = difflib.get_close_matches(key, list(supported), n=1, cutoff=0.6)
    if close:
        return f"{key!r} (did you mean {close[0]!r}?)"
    if _DOTTED_NAME.fullmatch(key):
        return repr(key)
    return (
        "in an entry that is no property name, not shown (a value on a line of its own? a "
        "line continues only after a trailing backslash)"
    )


def read_properties(text: str) -> dict[str, str]:
    """Java's Properties.load: `#`/`!` comment lines, a key ending at the first unescaped
    `=`, `:` or blank, a line continued by an odd number of trailing backslashes (the next
    line's leading blanks dropped), and backslash escapes (\\uXXXX, \\t, \\n, \\r, \\f,
    any other character stands for itself)."""
    values: dict[str, str] = {}
    lines = iter(_LINE_BREAK.split(text))
    for natural in lines:
        line = natural.lstrip(_BLANKS)
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1] + next(lines, "").lstrip(_BLANKS)
        key, value = _split_property(line)
        values[_unescape(key)] = _unescape(value)
    return values


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BLANKS = " \t\f"
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|u|.)", re.DOTALL)
_CONTROL_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _continues(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    index, escaped = 0, False
    while index < len(line):
        char = line[index]
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in "=:" or char in _BLANKS:
            break
        index += 1
    rest = line[index:].lstrip(_BLANKS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANKS)
    return line[:index], rest


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        code = match[1]
        if code == "u":
            raise ConfigError("Malformed \\uxxxx encoding in a configuration file")
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _CONTROL_ESCAPES.get(code, code)

    return _ESCAPE.sub(replace, text)
