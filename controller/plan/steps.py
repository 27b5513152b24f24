"""What an operation is made of: steps, each a few actions the planner turns into events.

A step is what an operator waits on and looks at: stopping a broker, starting it again,
moving one partition. Its actions are fixed events (CONTRACT §1/§5 bodies) or events the
planner derives from the state at the moment it reaches them:

* `CatchUp(b)`: broker b's replicas rejoin the ISR of every partition with a live leader
  (the leader's AlterPartition once the replica has caught up);
* `CompleteReassignment(key)`: a reassignment's adding replicas catch up, which completes
  it;
* `Hold(keys)`: the plan waits until every live replica of these partitions is back in
  their ISR.

Under `kcsim.simulate.brokers=true` (the plan's default) the core's simulated brokers do
the first two themselves, as Kafka's brokers do: one AlterPartition per leader for all
the partitions it leads, inside the event that made them possible. The planner then adds
nothing for them; with `kcsim.simulate.brokers=false` it writes one `isr_change` per
partition.

`parse_*` turn the command's STEPS into steps and raise `PlanInputError` naming what is
wrong (an unknown broker, topic or partition; a field of a reassignment file).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.plan.view import LIVE, ClusterView, Key, key_name

ROLL = "roll:"
REASSIGN = "reassign:"
DECOMMISSION = "decommission:"
ROLL_KINDS = ("clean", "crash")
# where the controller's automatic preferred-leader rebalance runs (`--auto-rebalance`)
REBALANCE_AT = ("end", "each-start")


class PlanInputError(ValueError):
    """Bad usage or input: exit status 2, the message says what and where."""


class ImpossibleStep(PlanInputError):
    """A step the cluster cannot take in the state it is in by then."""

    def __init__(self, step: Step, reason: str) -> None:
        super().__init__(f"step {step.index} ({step.label}) is impossible: {reason}")
        self.step = step
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Event:
    body: Mapping[str, Any]  # a §1/§5 event, without `cluster` (the planner adds it)


@dataclass(frozen=True, slots=True)
class CatchUp:
    broker: int


@dataclass(frozen=True, slots=True)
class CompleteReassignment:
    key: Key


@dataclass(frozen=True, slots=True)
class Hold:
    keys: tuple[Key, ...]


Action = Event | CatchUp | CompleteReassignment | Hold


@dataclass(frozen=True, slots=True)
class Step:
    index: int  # 1-based, in the plan's order
    label: str
    kind: str  # stop | crash | start | reassign | hold | rebalance | event
    actions: tuple[Action, ...]
    broker: int | None = None


@dataclass(slots=True)
class StepList:
    """Steps numbered as they are added."""

    steps: list[Step] = field(default_factory=list)

    def add(self, label: str, kind: str, *actions: Action, broker: int | None = None) -> None:
        self.steps.append(Step(len(self.steps) + 1, label, kind, tuple(actions), broker))


# ---- roll --------------------------------------------------------------------------------


def parse_broker_list(text: str, what: str) -> list[int]:
    items = [item.strip() for item in text.split(",")]
    if not text.strip() or not all(items):
        raise PlanInputError(f"{what}: expected broker ids separated by commas, got {text!r}")
    brokers = []
    for item in items:
        try:
            broker = int(item)
        except ValueError:
            raise PlanInputError(f"{what}: {item!r} is not a broker id") from None
        if broker < 0:
            raise PlanInputError(f"{what}: {broker} is not a broker id (ids are non-negative)")
        brokers.append(broker)
    repeated = sorted({b for b in brokers if brokers.count(b) > 1})
    if repeated:
        raise PlanInputError(f"{what}: broker {_join(repeated)} listed more than once")
    return brokers


def check_rollable(brokers: Sequence[int], view: ClusterView, what: str) -> None:
    """Every broker known and live (a roll restarts running brokers)."""
    known = view.known_brokers()
    unknown = [b for b in brokers if b not in known]
    if unknown:
        raise PlanInputError(
            f"{what}: unknown broker{_s(unknown)} {_join(unknown)} (the state knows "
            f"{_join(sorted(known)) or 'none'})"
        )
    down = [
        (b, view.brokers[b].status if b in view.brokers else "not registered")
        for b in brokers
        if b not in view.brokers or view.brokers[b].status != LIVE
    ]
    if down:
        listed = ", ".join(f"{b} ({status})" for b, status in down)
        raise PlanInputError(f"{what}: a roll restarts live brokers; not live: {listed}")


def roll_steps(
    brokers: Sequence[int],
    view: ClusterView,
    kind: str = "clean",
    holds: Mapping[int, Sequence[Key]] | None = None,
) -> list[Step]:
    """Per broker: stop (a controlled shutdown, then its failure; `crash`: the failure
    alone), start (its registration, with its rack) and the catch-up. `holds`: before
    stopping a broker, wait until these partitions' live replicas are all in their ISR."""
    steps = StepList()
    for broker in brokers:
        held = (holds or {}).get(broker)
        if held:
            steps.add(
                f"hold before {broker}: {len(held)} partition{_s(held)} catch up",
                "hold",
                Hold(tuple(held)),
                broker=broker,
            )
        if kind == "crash":
            steps.add(
                f"crash {broker}",
                "crash",
                Event({"type": "broker_failure", "broker": broker}),
                broker=broker,
            )
        else:
            steps.add(
                f"stop {broker}",
                "stop",
                Event({"type": "controlled_shutdown", "broker": broker}),
                Event({"type": "broker_failure", "broker": broker}),
                broker=broker,
            )
        startup: dict[str, Any] = {"type": "broker_startup", "broker": broker}
        rack = view.brokers[broker].rack if broker in view.brokers else None
        if rack is not None:
            startup["rack"] = rack
        steps.add(f"start {broker}", "start", Event(startup), CatchUp(broker), broker=broker)
    return steps.steps


def parse_roll(spec: str, view: ClusterView) -> list[int]:
    brokers = parse_broker_list(spec[len(ROLL) :], "roll")
    check_rollable(brokers, view, "roll")
    return brokers


# ---- reassignment (kafka-reassign-partitions' JSON) --------------------------------------

Move = tuple[str, int, tuple[int, ...]]  # topic, partition, target replicas
_ENTRY_FIELDS = ("topic", "partition", "replicas", "log_dirs")
_TOP_FIELDS = ("version", "partitions")


def parse_reassignment_json(text: str, source: str) -> list[Move]:
    """A plan in `kafka-reassign-partitions`' format, `{"version": 1, "partitions":
    [{"topic", "partition", "replicas", "log_dirs"?}]}`, checked as that tool checks it
    (and stricter on unknown fields, which it ignores: a misspelled one is named)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise PlanInputError(f"{source}: not JSON: {error}") from None
    if not isinstance(data, dict):
        raise PlanInputError(f"{source}: expected a JSON object with `version` and `partitions`")
    _unknown_fields(data, _TOP_FIELDS, source, "")
    version = data.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise PlanInputError(f"{source}: version: {json.dumps(version)} is not supported (1 is)")
    if "partitions" not in data:
        raise PlanInputError(f"{source}: partitions: missing (the list of partitions to move)")
    entries = data["partitions"]
    if not isinstance(entries, list):
        raise PlanInputError(f"{source}: partitions: expected a list, got {_kind(entries)}")
    if not entries:
        raise PlanInputError(f"{source}: partitions: empty (nothing to reassign)")
    moves: list[Move] = []
    seen: set[Key] = set()
    for n, entry in enumerate(entries):
        where = f"{source}: partitions[{n}]"
        if not isinstance(entry, dict):
            raise PlanInputError(f"{where}: expected an object, got {_kind(entry)}")
        _unknown_fields(entry, _ENTRY_FIELDS, source, f"partitions[{n}].")
        for name in ("topic", "partition", "replicas"):
            if name not in entry:
                raise PlanInputError(f"{where}.{name}: missing")
        topic, partition, replicas = entry["topic"], entry["partition"], entry["replicas"]
        if not isinstance(topic, str) or not topic:
            raise PlanInputError(f"{where}.topic: expected a topic name, got {_kind(topic)}")
        if not _is_int(partition) or partition < 0:
            raise PlanInputError(
                f"{where}.partition: expected a partition number, got {json.dumps(partition)}"
            )
        if not isinstance(replicas, list) or not replicas:
            raise PlanInputError(
                f"{where}.replicas: expected a non-empty list of broker ids, got "
                f"{json.dumps(replicas)}"
            )
        if not all(_is_int(b) and b >= 0 for b in replicas):
            raise PlanInputError(
                f"{where}.replicas: expected broker ids, got {json.dumps(replicas)}"
            )
        if len(set(replicas)) != len(replicas):
            raise PlanInputError(
                f"{where}.replicas: a broker listed twice in {json.dumps(replicas)}"
            )
        if "log_dirs" in entry:
            dirs = entry["log_dirs"]
            if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
                raise PlanInputError(f"{where}.log_dirs: expected a list of strings")
            if len(dirs) != len(replicas):
                raise PlanInputError(
                    f"{where}.log_dirs: {len(dirs)} entries for {len(replicas)} replicas"
                )
        key = (topic, partition)
        if key in seen:
            raise PlanInputError(f"{where}: {key_name(key)} is listed twice")
        seen.add(key)
        moves.append((topic, partition, tuple(replicas)))
    return moves


def check_moves(moves: Sequence[Move], view: ClusterView, source: str) -> None:
    """Every topic, partition and broker the plan names is known; the error lists all the
    unknown ones, of each kind, so one run of the fix is enough."""
    unknown_topics = sorted({t for t, _, _ in moves if t not in view.min_isr})
    unknown = [
        key_name((t, p)) for t, p, _ in moves if t in view.min_isr and (t, p) not in view.partitions
    ]
    known = view.known_brokers()
    brokers = sorted({b for _, _, replicas in moves for b in replicas if b not in known})
    problems = []
    if unknown_topics:
        problems.append(f"unknown topic{_s(unknown_topics)}: {', '.join(unknown_topics)}")
    if unknown:
        problems.append(f"unknown partition{_s(unknown)}: {', '.join(unknown)}")
    if brokers:
        problems.append(f"unknown broker{_s(brokers)}: {_join(brokers)}")
    if problems:
        raise PlanInputError(f"{source}: {'; '.join(problems)}")


def reassign_steps(moves: Sequence[Move], first_index: int = 1) -> list[Step]:
    steps = StepList()
    for topic, partition, replicas in moves:
        steps.add(
            f"move {key_name((topic, partition))} to {list(replicas)}",
            "reassign",
            Event(
                {
                    "type": "partition_reassignment",
                    "topic": topic,
                    "partition": partition,
                    "replicas": list(replicas),
                }
            ),
            CompleteReassignment((topic, partition)),
        )
    return renumber(steps.steps, first_index)


def with_rebalance(steps: Sequence[Step], at: str) -> list[Step]:
    """The steps with one run of the controller's automatic preferred-leader rebalance
    check (an `auto_rebalance_check` event: SPEC §12.3, SPEC-KRAFT §15.2) after the last
    step (`end`), or after every start (`each-start`: an operator who waits at least
    `leader.imbalance.check.interval.seconds` between brokers), numbered again."""
    check = Event({"type": "auto_rebalance_check"})
    out: list[Step] = []
    for step in steps:
        out.append(step)
        if at == "each-start" and step.kind == "start":
            out.append(Step(0, f"auto rebalance after start {step.broker}", "rebalance", (check,)))
    if at == "end":
        out.append(Step(0, "auto rebalance", "rebalance", (check,)))
    return renumber(out, 1)


def renumber(steps: Iterable[Step], first_index: int) -> list[Step]:
    return [
        Step(first_index + n, s.label, s.kind, s.actions, s.broker) for n, s in enumerate(steps)
    ]


def reassignment_json(moves: Sequence[Move]) -> dict[str, Any]:
    """Kafka's format, as `kafka-reassign-partitions --generate` prints a proposal."""
    return {
        "version": 1,
        "partitions": [
            {
                "topic": topic,
                "partition": partition,
                "replicas": list(replicas),
                "log_dirs": ["any"] * len(replicas),
            }
            for topic, partition, replicas in moves
        ],
    }


# ---- a file of events ----------------------------------------------------------------------

_TOPIC_TYPES = ("isr_change", "partition_reassignment", "topic_deletion", "topic_config_change")


def parse_event_lines(text: str, source: str, cluster: str, view: ClusterView) -> list[Step]:
    """One step per event. Topics and partitions that neither the state nor an earlier
    step creates are listed together, as one error."""
    steps = StepList()
    topics = {t: {p for (tt, p) in view.partitions if tt == t} for t in view.min_isr}
    unknown: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            body = json.loads(line)
        except json.JSONDecodeError as error:
            raise PlanInputError(f"{where}: not JSON: {error}") from None
        if not isinstance(body, dict) or not isinstance(body.get("type"), str):
            raise PlanInputError(f"{where}: expected an event object with a `type`")
        given = body.pop("cluster", cluster)
        if given != cluster:
            raise PlanInputError(
                f"{where}: the event is of cluster {given!r}; the plan is of {cluster!r}"
            )
        unknown.extend(f"{where}: {name}" for name in _unknown_names(body, topics))
        steps.add(f"line {number}: {_describe(body)}", "event", Event(body))
    if unknown:
        raise PlanInputError("unknown topics or partitions:\n  " + "\n  ".join(unknown))
    if not steps.steps:
        raise PlanInputError(f"{source}: no events")
    return steps.steps


def _unknown_names(body: dict[str, Any], topics: dict[str, set[int]]) -> list[str]:
    kind = body["type"]
    topic = body.get("topic")
    if kind == "topic_creation" and isinstance(topic, str):
        assignment = body.get("assignment")
        count = body.get("partitions")
        if isinstance(assignment, dict):
            topics.setdefault(topic, set()).update(int(p) for p in assignment if p.isdigit())
        elif isinstance(count, int):
            topics.setdefault(topic, set()).update(range(count))
        return []
    if kind == "partition_creation" and isinstance(topic, str):
        if topic not in topics:
            return [f"topic {topic}"]
        assignment = body.get("assignment")
        if isinstance(assignment, dict):
            topics[topic].update(int(p) for p in assignment if p.isdigit())
        return []
    if kind == "topic_deletion" and isinstance(topic, str):
        if topic not in topics:
            return [f"topic {topic}"]
        del topics[topic]
        return []
    if kind == "leader_election" and isinstance(body.get("partitions"), list):
        out = []
        for ref in body["partitions"]:
            if isinstance(ref, dict) and isinstance(ref.get("topic"), str):
                out.extend(_unknown_partition(ref["topic"], ref.get("partition"), topics))
        return out
    if kind in _TOPIC_TYPES and isinstance(topic, str):
        return _unknown_partition(topic, body.get("partition"), topics)
    return []


def _unknown_partition(topic: str, partition: object, topics: dict[str, set[int]]) -> list[str]:
    if topic not in topics:
        return [f"topic {topic}"]
    if _is_int(partition) and partition not in topics[topic]:
        return [f"partition {key_name((topic, partition))}"]  # type: ignore[arg-type]
    return []


def _describe(body: Mapping[str, Any]) -> str:
    parts = [str(body["type"])]
    for name in ("broker", "brokers", "topic", "partition", "replicas", "isr"):
        if name in body:
            parts.append(f"{name}={json.dumps(body[name])}")
    return " ".join(parts)


# ---- helpers ---------------------------------------------------------------------------------


def _unknown_fields(data: dict[str, Any], known: Sequence[str], source: str, prefix: str) -> None:
    for name in data:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise PlanInputError(
                f"{source}: {prefix}{name}: not a field of kafka-reassign-partitions' "
                f"format{hint}; its fields: {', '.join(known)}"
            )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: object) -> str:
    return json.dumps(value) if not isinstance(value, dict | list) else type(value).__name__


def _join(values: Iterable[int]) -> str:
    return ", ".join(str(v) for v in values)


def _s(values: Sequence[object]) -> str:
    return "" if len(values) == 1 else "s"
