"""The KRaft scenario tests' event lists, for the differential oracle
(tests/controller/kraft/test_oracle_differential.py).

Every scenario test under tests/controller/kraft/ (the `test_kraft_*.py` files but the
stateful property test) drives one or more `QuorumController`s with events and asserts on
what they write. `scenarios()` runs those test files in a child pytest with this module
loaded as a plugin (`-p tests.support.kraft.kraft_scenarios`); the plugin records, for each
controller a test builds, its settings and every event applied to it, in order, with the
test's id and the SPEC-KRAFT section its docstring (or name) follows. The differential test
then replays each recorded list through Kafka's own control managers and compares record by
record. So a new scenario test is compared as soon as it exists, and the differential test
imports no test module.

A controller made by `QuorumController.load` continues another controller's history (the
persistence test applies the same events to the original, which is recorded whole); it is
not a sequence of its own and is left out.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.kraft.kraft_oracle import OracleSequence

OUTPUT_ENV = "KCSIM_KRAFT_SCENARIO_RECORD"
SCENARIO_DIR = Path(__file__).resolve().parents[2] / "controller" / "kraft"
# Not scenario tests: random sequences (the generator covers them) and the oracle's own tests.
NOT_SCENARIOS = frozenset({"test_kraft_stateful.py"})
_SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)")
_NAMED = re.compile(r"^test_(?:s(\d+)(?:_(\d+))?|(25)_(\d+))")


@dataclass(frozen=True, slots=True)
class KRaftScenario:
    """One controller of one scenario test: its settings and the events applied to it."""

    name: str
    section: str | None
    events: tuple[Mapping[str, Any], ...]
    settings: Mapping[str, str]

    def sequence(self) -> OracleSequence:
        return OracleSequence(f"scenario {self.name} ({self.section})", self.events, self.settings)


def scenario_files() -> list[Path]:
    return [p for p in sorted(SCENARIO_DIR.glob("test_kraft_*.py")) if p.name not in NOT_SCENARIOS]


def section_of(name: str, doc: str | None) -> str | None:
    """The SPEC-KRAFT section a test follows: the first § of its docstring, else its name's
    (test_s11_4_... is §11.4, test_25_07_... is §25.7)."""
    found = _SECTION.search(doc or "")
    if found:
        return f"SPEC-KRAFT §{found.group(1)}"
    named = _NAMED.match(name)
    if named is None:
        return None
    major, minor = (named.group(1), named.group(2)) if named.group(1) else named.group(3, 4)
    return f"SPEC-KRAFT §{major}" + (f".{int(minor)}" if minor else "")


def scenarios() -> list[KRaftScenario]:
    """Every scenario test's controllers, recorded by running the scenario files in a child
    pytest. Raises RuntimeError (with pytest's output) when that run fails: a failing
    scenario test leaves its list incomplete."""
    with tempfile.TemporaryDirectory(prefix="kcsim-scenarios-") as tmp:
        out = Path(tmp) / "scenarios.jsonl"
        root = SCENARIO_DIR.parents[2]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "tests.support.kraft.kraft_scenarios",
                "-p",
                "no:cacheprovider",
                "-m",
                "not oracle",
                *(str(p) for p in scenario_files()),
            ],
            cwd=root,
            env={**os.environ, OUTPUT_ENV: str(out)},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"the scenario tests failed, so their event lists are incomplete:\n"
                f"{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
            )
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return [KRaftScenario(r["name"], r["section"], tuple(r["events"]), r["settings"]) for r in rows]


# -- the plugin (active only in the child pytest, which sets OUTPUT_ENV) --------------------


def settings_properties(settings: Any) -> dict[str, str]:
    """KRaftSettings as the properties both sides read (KRaftSettings.from_properties)."""

    def flag(value: bool) -> str:
        return "true" if value else "false"

    return {
        "metadata.version": settings.metadata_version,
        "eligible.leader.replicas.version": str(settings.eligible_leader_replicas_version),
        "min.insync.replicas": str(settings.min_insync_replicas),
        "unclean.leader.election.enable": flag(settings.unclean_leader_election_enable),
        "auto.leader.rebalance.enable": flag(settings.auto_leader_rebalance_enable),
        "delete.topic.enable": flag(settings.delete_topic_enable),
        "kcsim.simulate.brokers": flag(settings.simulate_brokers),
    }


@dataclass(slots=True)
class _Recorded:
    settings: dict[str, str]
    events: list[dict[str, Any]]
    restored: bool = False


class _Recorder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.current: list[_Recorded] | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from controller.kraft import QuorumController

        recorder = self
        original_init = QuorumController.__init__
        original_apply = QuorumController.apply
        original_load = QuorumController.load.__func__  # type: ignore[attr-defined]

        def init(self: Any, settings: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self, settings, *args, **kwargs)
            recorded = _Recorded(settings_properties(settings), [])
            self._kcsim_recorded = recorded
            if recorder.current is not None:
                recorder.current.append(recorded)

        def apply(self: Any, event: Mapping[str, Any]) -> Any:
            recorded = getattr(self, "_kcsim_recorded", None)
            if recorded is not None:
                recorded.events.append(json.loads(json.dumps(dict(event))))
            return original_apply(self, event)

        def load(cls: Any, settings: Any, data: Mapping[str, Any]) -> Any:
            restored = original_load(cls, settings, data)
            restored._kcsim_recorded.restored = True
            return restored

        monkeypatch.setattr(QuorumController, "__init__", init)
        monkeypatch.setattr(QuorumController, "apply", apply)
        monkeypatch.setattr(QuorumController, "load", classmethod(load))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        self.current = []
        yield
        controllers = [c for c in self.current if c.events and not c.restored]
        self.current = None
        function = getattr(item, "function", None)
        section = section_of(item.name, getattr(function, "__doc__", None))
        with self.path.open("a", encoding="utf-8") as handle:
            for index, recorded in enumerate(controllers):
                suffix = f" #{index + 1}" if len(controllers) > 1 else ""
                row = {
                    "name": f"{item.nodeid}{suffix}",
                    "section": section,
                    "settings": recorded.settings,
                    "events": recorded.events,
                }
                handle.write(json.dumps(row) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    target = os.environ.get(OUTPUT_ENV)
    if not target:
        return
    recorder = _Recorder(Path(target))
    patcher = pytest.MonkeyPatch()
    recorder.install(patcher)
    config.add_cleanup(patcher.undo)
    config.pluginmanager.register(recorder, "kcsim-kraft-scenario-recorder")
