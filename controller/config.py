"""Simulation settings, named as Kafka names them (CONTRACT §1, settings table)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path

UNCLEAN_KEY = "unclean.leader.election.enable"


class ConfigError(ValueError):
    """A setting that Kafka would refuse at start-up; the message names the key."""


def parse_bool(key: str, value: str | bool) -> bool:
    """Kafka's boolean config parser: true/false, case-insensitive, surrounding blanks ignored."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ConfigError(
        f"Invalid value {value!r} for configuration {key}: Expected value to be "
        "either true or false"
    )


def scala_to_boolean(value: str) -> bool:
    """`Try(value.toBoolean).getOrElse(false)` in Scala 2.13: "true" in any case is true,
    anything else false; unlike Kafka's config parser, blanks are not ignored."""
    return value.lower() == "true"


def parse_int(key: str, value: str | int) -> int:
    if isinstance(value, bool):
        raise ConfigError(
            f"Invalid value {value!r} for configuration {key}: Not a number of type INT"
        )
    try:
        return int(str(value).strip())
    except ValueError:
        raise ConfigError(
            f"Invalid value {value!r} for configuration {key}: Not a number of type INT"
        ) from None


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
                number = parse_int(key, raw)
                if not 0 <= number <= 100:
                    raise ConfigError(
                        f"Invalid value {raw!r} for configuration {key}: "
                        "Value must be between 0 and 100"
                    )
                kwargs[name] = number
            else:
                kwargs[name] = parse_bool(key, raw)
        return cls(**kwargs)  # type: ignore[arg-type]

    @classmethod
    def load(cls, config_file: Path | None = None, overrides: Iterable[str] = ()) -> Settings:
        """`--config FILE` then repeated `--set key=value`, the latter winning."""
        values: dict[str, str] = {}
        if config_file is not None:
            values.update(read_properties(config_file.read_text(encoding="utf-8")))
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


def read_properties(text: str) -> dict[str, str]:
    """A Java .properties reader covering what config files use: comments, = or : separators,
    and backslash line continuations."""
    values: dict[str, str] = {}
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            pending += stripped[:-1]
            continue
        logical = pending + stripped
        pending = ""
        key, value = _split_property(logical)
        values[key] = value
    if pending:
        key, value = _split_property(pending)
        values[key] = value
    return values


def _split_property(line: str) -> tuple[str, str]:
    for index, char in enumerate(line):
        if char in "=:" or char.isspace():
            rest = line[index:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            return line[:index], rest
    return line, ""
