"""`kcsim import kraft-log` reads back the KRaft controller's inputs (SPEC-KRAFT §23.2,
§23.3): a log written by the KRaft engine for a sequence of events, imported, and replayed
under `kcsim.engine=kraft`, writes the same records in the same order and leaves the same
partitions and brokers; the replay of the import reports no divergence.

The logs are the engine's own records (it is checked against Kafka's control managers by
the oracle, tests/oracle/) for the seeded random sequences of the differential test
(`tests/support/kraft/kraft_sequences.py`: registrations, fences, controlled shutdowns,
unfences, AlterPartitions, elections of every kind, reassignments and cancels, config and
feature changes, ELR and the last known leader), written in Kafka's decoder form: names
in upper snake case, `topicId` for the topic. Kafka's raft layer packs several operations
into one batch (SPEC-KRAFT §23.3), so each sequence is also read with its operations
packed at random into shared batches: attribution goes by content, not by batch.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from controller.kraft.outcome import KRaftRejection
from controller.kraft.outcome import Record as EngineRecord
from controller.kraft.quorum_controller import QuorumController
from controller.kraft.settings import KRaftSettings
from streaming.cli import main
from streaming.importers.kraft_log_decoder import Record
from streaming.importers.kraft_log_model import KraftLogModel
from tests.support.kraft.kraft_sequences import random_sequence

SEEDS = range(40)


def decoder_form(record: EngineRecord) -> tuple[str, dict[str, Any]]:
    """An engine record as Kafka's decoder prints it."""
    kind = re.sub(r"(?<!^)(?=[A-Z])", "_", record.type).upper()
    fields = dict(record.fields)
    if "topic" in fields:
        fields["topicId"] = f"id-{fields.pop('topic')}"
    return kind, fields


def engine_log(
    settings: Mapping[str, str], events: tuple[Mapping[str, Any], ...]
) -> tuple[list[list[tuple[int, str, dict[str, Any]]]], list[EngineRecord], QuorumController]:
    """The batches (epoch, type, fields) the engine writes for `events`, one per operation
    outcome, a LeaderChange for each failover; its records; the controller."""
    controller = QuorumController(KRaftSettings.from_properties(dict(settings)))
    batches: list[list[tuple[int, str, dict[str, Any]]]] = []
    written: list[EngineRecord] = []
    epoch = 1
    batches.append([(epoch, "LeaderChange", {"leaderId": 1})])
    for event in events:
        if event["type"] == "controller_failover":
            epoch += 1
            leader = int(event.get("controller") or 1)
            batches.append([(epoch, "LeaderChange", {"leaderId": leader})])
        try:
            outcome = controller.apply(event)
        except KRaftRejection:
            continue
        if outcome.records:
            written += outcome.records
            batches.append([(epoch, *decoder_form(r)) for r in outcome.records])
    return batches, written, controller


def pack(batches: list[list[Any]], rng: random.Random | None) -> list[list[Any]]:
    """Consecutive batches merged at random (never across a LeaderChange)."""
    if rng is None:
        return batches
    out: list[list[Any]] = []
    for batch in batches:
        control = batch[0][1] == "LeaderChange"
        if out and not control and out[-1][0][1] != "LeaderChange" and rng.random() < 0.5:
            out[-1] = out[-1] + batch
        else:
            out.append(list(batch))
    return out


def imported(batches: list[list[tuple[int, str, dict[str, Any]]]]) -> list[dict[str, Any]]:
    model = KraftLogModel("c")
    events: list[dict[str, Any]] = []
    offset = 0
    for position, batch in enumerate(batches):
        for epoch, kind, fields in batch:
            record = Record(Path("0.log"), position, offset, epoch, 1000 + position, kind, 0,
                            json.loads(json.dumps(fields)), False)  # fmt: skip
            events += model.feed(record)
            offset += 1
    return events + model.finish()


def replayed(
    settings: Mapping[str, str], events: list[dict[str, Any]]
) -> tuple[list[EngineRecord], QuorumController]:
    controller = QuorumController(KRaftSettings.from_properties(dict(settings)))
    written: list[EngineRecord] = []
    for event in events:
        written += controller.apply(event).records
    return written, controller


def state(controller: QuorumController) -> tuple[list[Any], list[Any]]:
    return list(controller.partitions()), list(controller.brokers())


@pytest.mark.parametrize("packed", [False, True], ids=["one-batch-per-operation", "packed"])
@pytest.mark.parametrize("seed", SEEDS)
def test_an_imported_log_replays_to_the_same_records(seed: int, packed: bool) -> None:
    sequence = random_sequence(seed)
    batches, written, original = engine_log(sequence.settings, sequence.events)
    events = imported(pack(batches, random.Random(seed) if packed else None))
    again, replay = replayed(sequence.settings, events)
    assert [(r.type, r.fields) for r in again] == [(r.type, r.fields) for r in written]
    assert state(replay) == state(original)


def test_the_replay_of_an_import_has_no_divergence(tmp_path: Path) -> None:
    """Through `kcsim replay --set kcsim.engine=kraft`: every event's `observed` (partition
    states with ELR, LKE and LRS, broker statuses) matches the simulation."""
    checked = 0
    for seed in range(8):
        sequence = random_sequence(seed)
        batches, _, _ = engine_log(sequence.settings, sequence.events)
        events = imported(pack(batches, random.Random(seed)))
        checked += sum(1 for e in events if "observed" in e)
        path = tmp_path / f"events-{seed}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
        out = tmp_path / f"tables-{seed}"
        sets = [x for k, v in sequence.settings.items() for x in ("--set", f"{k}={v}")]
        argv = ["replay", str(path), "--out", str(out), "--set", "kcsim.engine=kraft", *sets]
        assert main(argv) == 0
        assert (out / "rejected_events.jsonl").read_text() == ""
        assert (out / "divergences.jsonl").read_text() == "", seed
    assert checked > 100
