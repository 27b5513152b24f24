"""A `kcsim plan` prediction checked against what a real cluster did.

The prediction is the plan's `--json` document: per step the partitions without a leader
and under `min.insync.replicas` at any moment of the step, and the state (leader, ISR,
replicas) after it of every partition the step changed (`states`; the state before the
first step holds them all). What happened is a `kcsim shadow` recording of the cluster
while the same steps were performed: its events in order, each carrying `observed`, the
state the real controller had written for the partitions it touched. `Marks` cut the
recording into the plan's steps (the number of events written when a step began), and
`compare` says, step by step, where the two differ: a partition without a leader (or
under min ISR) at some moment of a step on one side only, or a leader, ISR or replica
list that differs once the step has settled.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

from streaming.cli import main

Name = str  # "topic-partition"


class State(NamedTuple):
    leader: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]


class Difference(NamedTuple):
    step: int  # 0: the state before the first step
    label: str
    what: str  # offline | under_min_isr | leader | isr | replicas | missing
    partition: Name | None
    predicted: Any
    observed: Any

    def __str__(self) -> str:
        where = f" {self.partition}" if self.partition else ""
        return (
            f"step {self.step} ({self.label}){where} {self.what}: predicted "
            f"{self.predicted}, observed {self.observed}"
        )


@dataclass(slots=True)
class StepView:
    """One step on one side: who was without a leader or under min ISR at some moment,
    and every partition's state once the step had settled."""

    index: int
    label: str
    offline: set[Name] = field(default_factory=set)
    under_min_isr: set[Name] = field(default_factory=set)
    states: dict[Name, State] = field(default_factory=dict)


def _state(entry: Mapping[str, Any], before: State | None) -> State:
    replicas = entry.get("replicas")
    return State(
        int(entry["leader"]),
        tuple(entry["isr"]),
        tuple(replicas) if replicas is not None else (before.replicas if before else ()),
    )


def predicted(doc: Mapping[str, Any], keep: Callable[[Name], bool]) -> list[StepView]:
    """The plan's steps (index 0: before), restricted to the partitions `keep` takes."""
    states: dict[Name, State] = {}
    out = []
    for step in [doc["before"], *doc["steps"]]:
        for name, entry in step["states"].items():
            if not keep(name):
                continue
            if entry is None:
                states.pop(name, None)
            else:
                states[name] = _state(entry, states.get(name))
        out.append(
            StepView(
                step["step"],
                step["label"],
                {n for n in step["offline_partitions"] if keep(n)},
                {n for n in step["under_min_isr_partitions"] if keep(n)},
                dict(states),
            )
        )
    return out


def observed(
    events: Sequence[Mapping[str, Any]],
    marks: Sequence[int],
    labels: Sequence[str],
    keep: Callable[[Name], bool],
    min_isr: Callable[[Name], int],
) -> list[StepView]:
    """The recording cut at `marks` (marks[0]: the events of the state before the first
    step; marks[i]: the events up to the end of step i), each event a moment: after it,
    a partition whose state says leader -1 is without a leader, one led with fewer ISR
    members than `min_isr` is under min ISR."""
    assert len(marks) == len(labels), (marks, labels)
    states: dict[Name, State] = {}
    out = []
    start = 0
    for index, (end, label) in enumerate(zip(marks, labels, strict=True)):
        view = StepView(index, label)
        for event in events[start:end]:
            if event.get("type") == "topic_deletion":
                for name in [n for n in states if n.rsplit("-", 1)[0] == event.get("topic")]:
                    del states[name]
            for entry in (event.get("observed") or {}).get("partitions", ()):
                name = f"{entry['topic']}-{entry['partition']}"
                if keep(name):
                    states[name] = _state(entry, states.get(name))
            if index:  # moments of a step (the state before is one moment: its end)
                _flag(view, states, min_isr)
        _flag(view, states, min_isr)
        view.states = dict(states)
        out.append(view)
        start = end
    return out


def _flag(view: StepView, states: Mapping[Name, State], min_isr: Callable[[Name], int]) -> None:
    for name, state in states.items():
        if state.leader < 0:
            view.offline.add(name)
        elif len(state.isr) < min_isr(name):
            view.under_min_isr.add(name)


def carried_over(plan: Sequence[StepView], min_isr: Callable[[Name], int]) -> dict[int, StepView]:
    """Per start step (`start B`), the partitions of B that the step before left without a
    leader or under min ISR: a real cluster shows them so for the first moments of the
    start too, until B is back (registered, under KRaft also unfenced) and has caught up,
    where the plan's start is one moment, after the catch-up (docs/guide/plan.md, "What a real
    cluster shows between the moments")."""
    out = {}
    for before, step in pairwise(plan):
        if not step.label.startswith("start "):
            continue
        broker = int(step.label.split()[1])
        view = StepView(step.index, step.label)
        _flag(view, {n: s for n, s in before.states.items() if broker in s.replicas}, min_isr)
        out[step.index] = view
    return out


def compare(
    plan: Sequence[StepView],
    real: Sequence[StepView],
    carried: Mapping[int, StepView] | None = None,
) -> list[Difference]:
    """Every difference, step by step. `carried` (`carried_over`): per step, partitions a
    real cluster may show without a leader or under min ISR besides those predicted."""
    assert [s.label for s in plan] == [s.label for s in real], "the steps differ"
    out: list[Difference] = []
    for mine, theirs in zip(plan, real, strict=True):
        step = (mine.index, mine.label)
        extra = (carried or {}).get(mine.index) or StepView(mine.index, mine.label)
        for what, a, b, more in (
            ("offline", mine.offline, theirs.offline, extra.offline),
            ("under_min_isr", mine.under_min_isr, theirs.under_min_isr, extra.under_min_isr),
        ):
            if not a <= b <= a | more:
                out.append(Difference(*step, what, None, sorted(a), sorted(b)))
        for name in sorted(mine.states.keys() | theirs.states.keys()):
            p, r = mine.states.get(name), theirs.states.get(name)
            if p is None or r is None:
                out.append(Difference(*step, "missing", name, p, r))
                continue
            if p.leader != r.leader:
                out.append(Difference(*step, "leader", name, p.leader, r.leader))
            if p.isr != r.isr:
                out.append(Difference(*step, "isr", name, list(p.isr), list(r.isr)))
            if p.replicas != r.replicas and r.replicas:
                out.append(Difference(*step, "replicas", name, list(p.replicas), list(r.replicas)))
    return out


Topics = Mapping[str, tuple[Mapping[int, Sequence[int]], int]]  # topic: (assignment, min ISR)


def checked(
    doc: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]],
    marks: Sequence[int],
    topics: Topics,
) -> tuple[str, list[tuple[str, list[str], list[str]]], list[StepView]]:
    """The prediction against the recording, for the partitions of `topics`: the
    differences (`report`); per step the partitions seen without a leader and under min
    ISR beyond the prediction (those `carried_over` allows); the steps as they happened."""

    def keep(name: str) -> bool:
        return name.rsplit("-", 1)[0] in topics

    def min_isr(name: str) -> int:
        return topics[name.rsplit("-", 1)[0]][1]

    labels = ["before", *(s["label"] for s in doc["steps"])]
    mine = predicted(doc, keep)
    real = observed(events, marks, labels, keep, min_isr)
    differences = report(compare(mine, real, carried_over(mine, min_isr)))
    beyond = [
        (r.label, sorted(r.offline - p.offline), sorted(r.under_min_isr - p.under_min_isr))
        for p, r in zip(mine, real, strict=True)
        if r.offline - p.offline or r.under_min_isr - p.under_min_isr
    ]
    return differences, beyond, real


def report(differences: Iterable[Difference]) -> str:
    return "\n".join(map(str, differences)) or "no difference"


def reassignment_file(moves: Iterable[tuple[str, int, Sequence[int]]]) -> dict[str, Any]:
    """A plan in `kafka-reassign-partitions`' JSON format."""
    return {
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
            for t, p, r in moves
        ],
    }


def prediction(out: Path, state: Sequence[str], steps: str) -> dict[str, Any]:
    """The plan's `--json` document for `steps` from the state `state` names (`--state ...`
    and, for a KRaft cluster, `--engine kraft`), written to `out`: no proposal, since
    the steps are performed as requested, and exit status 0 or 4 (safe or not)."""
    code = main(["plan", *state, "--steps", steps, "--json", str(out), "--no-propose", "--quiet"])
    assert code in (0, 4), code
    return json.loads(out.read_text())
