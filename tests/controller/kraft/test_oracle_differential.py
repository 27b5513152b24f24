"""kcsim's KRaft engine against Kafka 4.1.1's own controller code (the oracle), field by
field and record by record: every registered KRaft scenario, and seeded random legal
sequences (10,000 by default; KCSIM_ORACLE_SEQUENCES=N for more, KCSIM_ORACLE_SEED for
another first seed). The verdict is zero differences. On one, the message names the
seed, the shortest failing prefix of events and the first differing record or field.

Comparison rules (SPEC-KRAFT §22): kcsim's records are compared in the order kcsim writes
them, against Kafka's in the order Kafka appends them, except inside a walk over one of
Kafka's hash-ordered indexes (fence, unfence, controlled shutdown, registration cleanup,
unregistration, rebalance, periodic unclean election, ElectLeaders over every partition;
§22.1), whose PartitionChangeRecords the oracle puts in kcsim's (topic, partition) order,
one walk at a time (an unregistration's B2I walk stays before its B2E walk); ELR and LKE
lists keep their order (a reorder is a change, §22.2); an event kcsim's front door rejects
must leave the oracle writing nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import pytest

import controller.kraft as kraft
from tests.support.kraft.kraft_oracle import OracleSequence, OracleStep, iter_oracle
from tests.support.kraft.kraft_scenarios import scenarios
from tests.support.kraft.kraft_sequences import random_sequence

pytestmark = pytest.mark.oracle


SEQUENCES = int(os.environ.get("KCSIM_ORACLE_SEQUENCES", "10000"))
FIRST_SEED = int(os.environ.get("KCSIM_ORACLE_SEED", "0"))
LRS = {"RECOVERED": 0, "RECOVERING": 1, 0: 0, 1: 1}


def kcsim_step(controller: Any, event: Mapping[str, Any]) -> dict[str, Any]:
    try:
        outcome = controller.apply(dict(event))
    except kraft.KRaftRejection as rejection:
        return {"rejected": str(rejection)}
    records = [(r.type, _jsonable(r.fields)) for r in outcome.records]
    results = [
        {
            "topic": r.topic,
            "partition": r.partition,
            "error": r.error,
            "message": r.message,
            "leader": r.leader,
            "leader_epoch": r.leader_epoch,
            "isr": list(r.isr) if r.isr is not None else None,
            "partition_epoch": r.partition_epoch,
        }
        for r in outcome.results
    ]
    partitions = [
        {
            "topic": p.topic,
            "partition": p.partition,
            "leader": p.leader,
            "leader_epoch": p.leader_epoch,
            "isr": list(p.isr),
            "elr": list(p.elr),
            "last_known_elr": list(p.last_known_elr),
            "partition_epoch": p.partition_epoch,
            "replicas": list(p.replicas),
            "adding_replicas": list(p.adding_replicas),
            "removing_replicas": list(p.removing_replicas),
            "leader_recovery_state": LRS[p.leader_recovery_state],
        }
        for p in sorted(controller.partitions(), key=lambda p: (p.topic, p.partition))
    ]
    brokers = [
        {"broker": b.broker, "status": b.status, "broker_epoch": b.broker_epoch, "rack": b.rack}
        for b in sorted(controller.brokers(), key=lambda b: b.broker)
    ]
    return {"records": records, "results": results, "partitions": partitions, "brokers": brokers}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _election_rows_sorted(event: Mapping[str, Any], rows: list[dict[str, Any]]) -> list[Any]:
    if event.get("type") == "leader_election" and event.get("partitions") is None:
        return sorted(rows, key=lambda r: (r["topic"] or "", r["partition"] or -1))
    return rows


def _answers(event: Mapping[str, Any], rows: list[Any]) -> list[Any]:
    """The rows that carry an answer: a whole-event row without an error is a note (what a
    failover or an unfence did) except for a controlled shutdown, whose next state counts."""
    if event.get("type") == "controlled_shutdown":
        return rows
    return [r for r in rows if r["topic"] is not None or r["error"] is not None]


def first_difference(
    event: Mapping[str, Any], ours: dict[str, Any], oracle: OracleStep
) -> str | None:
    """The first field that differs, described; None when kcsim and Kafka agree."""
    if oracle.error is not None:
        return f"the oracle failed on this event:\n{oracle.error}"
    oracle_records = [(r["type"], r["record"]) for r in oracle.records]
    if "rejected" in ours:
        if oracle_records:
            return f"kcsim rejected it ({ours['rejected']}) but Kafka wrote {oracle_records}"
        return None
    for i, (mine, theirs) in enumerate(zip(ours["records"], oracle_records, strict=False)):
        if mine != theirs:
            return f"record {i}: kcsim {mine} != Kafka {theirs}"
    if len(ours["records"]) != len(oracle_records):
        n = min(len(ours["records"]), len(oracle_records))
        return (
            f"{len(ours['records'])} records from kcsim, {len(oracle_records)} from Kafka; "
            f"from record {n}: kcsim {ours['records'][n:]} / Kafka {oracle_records[n:]}"
        )
    mine_rows = _election_rows_sorted(event, _answers(event, ours["results"]))
    their_rows = _answers(event, list(oracle.results))
    key = ("topic", "partition", "error")
    mine_keys = [tuple(r[k] for k in key) for r in mine_rows]
    their_keys = [tuple(r[k] for k in key) for r in their_rows]
    if mine_keys != their_keys:
        return f"event_results (topic, partition, error): kcsim {mine_keys} != Kafka {their_keys}"
    for mine_row, their_row in zip(mine_rows, their_rows, strict=True):
        for field in ("leader", "leader_epoch", "isr", "partition_epoch"):
            mine_value = mine_row.get(field)
            if mine_value is not None and field in their_row and mine_value != their_row[field]:
                return f"event_results {field}: kcsim {mine_row} != Kafka {their_row}"
        if (
            event.get("type") == "controlled_shutdown"
            and mine_row["message"] != their_row["message"]
        ):
            mine_msg, their_msg = mine_row["message"], their_row["message"]
            return f"controlled_shutdown answer: kcsim {mine_msg} != Kafka {their_msg}"
    theirs_parts = {(p["topic"], p["partition"]): p for p in oracle.partitions}
    mine_parts = {(p["topic"], p["partition"]): p for p in ours["partitions"]}
    if set(theirs_parts) != set(mine_parts):
        return f"partitions: kcsim {sorted(mine_parts)} != Kafka {sorted(theirs_parts)}"
    for tp, theirs_p in theirs_parts.items():
        for field, value in mine_parts[tp].items():
            if theirs_p[field] != value:
                return f"partition {tp} {field}: kcsim {value} != Kafka {theirs_p[field]}"
    theirs_b = {b["broker"]: b for b in oracle.brokers}
    mine_b = {b["broker"]: b for b in ours["brokers"]}
    if set(theirs_b) != set(mine_b):
        return f"brokers: kcsim {sorted(mine_b)} != Kafka {sorted(theirs_b)}"
    for broker, theirs_row in theirs_b.items():
        for field, value in mine_b[broker].items():
            if theirs_row[field] != value:
                return f"broker {broker} {field}: kcsim {value} != Kafka {theirs_row[field]}"
    return None


def compare(sequence: OracleSequence, steps: list[OracleStep]) -> str | None:
    """None, or the report of the first difference with its shortest failing prefix."""
    controller = kraft.QuorumController(kraft.KRaftSettings.from_properties(sequence.settings))
    for index, event in enumerate(sequence.events):
        try:
            ours = kcsim_step(controller, event)
        except Exception as error:  # a crash of the engine is a difference too
            ours = {"crash": repr(error)}
        if "crash" in ours:
            problem: str | None = f"kcsim raised {ours['crash']}"
        else:
            problem = first_difference(event, ours, steps[index])
        if problem is not None:
            lines = [json.dumps(dict(e)) for e in sequence.events[: index + 1]]
            if len(lines) > 40:  # a scenario of a thousand partitions: its head and tail
                lines = [*lines[:10], f"... {len(lines) - 30} events ...", *lines[-20:]]
            prefix = "\n".join(lines)
            return (
                f"{sequence.name} (settings {dict(sequence.settings)}): event {index} "
                f"{json.dumps(dict(event))}\n  {problem}\n  shortest failing prefix "
                f"({index + 1} events):\n{prefix}"
            )
    return None


def run_differential(sequences: list[OracleSequence], limit: int = 5) -> list[str]:
    """Each sequence compared as the oracle finishes it; the first `limit` reports."""
    by_name = {s.name: s for s in sequences}
    failures: list[str] = []
    for name, steps in iter_oracle(sequences):
        problem = compare(by_name[name], steps)
        if problem is not None:
            failures.append(problem)
    return failures[:limit] + (
        [f"... {len(failures) - limit} more"] if len(failures) > limit else []
    )


def test_every_kraft_scenario_matches_kafka() -> None:
    """Every controller of every scenario test (tests/support/kraft/kraft_scenarios.py records
    them), each naming the SPEC-KRAFT section it follows. `kcsim.simulate.brokers` is kcsim's
    own broker model, with no counterpart in Kafka's controller: such a scenario is not one
    the oracle can answer."""
    found = scenarios()
    assert len(found) >= 70, f"only {len(found)} scenario controllers recorded"
    unnamed = [s.name for s in found if s.section is None]
    assert not unnamed, f"scenario tests naming no SPEC-KRAFT section: {unnamed}"
    comparable = [s for s in found if s.settings.get("kcsim.simulate.brokers") != "true"]
    failures = run_differential([s.sequence() for s in comparable], limit=50)
    assert not failures, "\n\n".join(failures)


def test_random_sequences_match_kafka() -> None:
    sequences = [random_sequence(seed) for seed in range(FIRST_SEED, FIRST_SEED + SEQUENCES)]
    failures = run_differential(sequences)
    assert not failures, f"{len(failures)} differing sequences:\n\n" + "\n\n".join(failures)
