"""A registry of the KRaft scenario tests' event lists, so the differential oracle replays
every scenario through Kafka's own controller code too (tests/controller/kraft/
test_oracle_differential.py).

A scenario test registers its events once, at import time of its module:

    from tests.support.kraft_scenarios import scenario

    FENCE_BELOW_MIN_ISR = scenario(
        "fence-below-min-isr",            # unique name
        "SPEC-KRAFT §8",                  # the section it follows
        [{"type": "broker_startup", "brokers": [1, 2, 3]}, ...],
        settings={"min.insync.replicas": "2"},
    )

and uses the returned `KRaftScenario` (its `events` and `settings`) in its own asserts.
The differential test imports the scenario modules listed in SCENARIO_MODULES and
compares every registered scenario, event by event.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.support.kraft_oracle import OracleSequence

# Modules whose import registers scenarios (the lead adds the kraft scenario test modules).
SCENARIO_MODULES: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class KRaftScenario:
    name: str
    section: str
    events: tuple[Mapping[str, Any], ...]
    settings: Mapping[str, str]

    def sequence(self) -> OracleSequence:
        return OracleSequence(f"scenario-{self.name}", self.events, self.settings)


_REGISTRY: dict[str, KRaftScenario] = {}


def scenario(
    name: str,
    section: str,
    events: Sequence[Mapping[str, Any]],
    settings: Mapping[str, str] | None = None,
) -> KRaftScenario:
    """Register one scenario (the same name twice must be the same scenario)."""
    made = KRaftScenario(name, section, tuple(dict(e) for e in events), dict(settings or {}))
    known = _REGISTRY.setdefault(name, made)
    if known != made:
        raise ValueError(f"two different KRaft scenarios named {name!r}")
    return made


def all_scenarios() -> list[KRaftScenario]:
    """Every scenario, once the modules of SCENARIO_MODULES are imported."""
    for module in SCENARIO_MODULES:
        importlib.import_module(module)
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]
