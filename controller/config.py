"""Simulation settings, named as Kafka names them (CONTRACT §1, settings table)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from controller.java_text import java_equals_ignore_case
from controller.topic_configs import ConfigType, TopicConfig, TopicConfigError, parse_value

UNCLEAN_KEY = "unclean.leader.election.enable"


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
    return int(_parse(key, value, ConfigType.INT))  # type: ignore[call-overload]


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
            else:
                kwargs[name] = parse_bool(key, raw)
        return cls(**kwargs)  # type: ignore[arg-type]

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


def _render(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


_KEYS = {
    "auto.leader.rebalance.enable": "auto_leader_rebalance_enable",
    "leader.imbalance.per.broker.percentage": "leader_imbalance_per_broker_percentage",
    UNCLEAN_KEY: "unclean_leader_election_enable",
    "delete.topic.enable": "delete_topic_enable",
    "kcsim.simulate.brokers": "simulate_brokers",
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
