"""The test corpora (tests/data/corpus for either engine, tests/data/corpus-kraft for the
KRaft engine) as a job's source directory, and the rows the core itself gives for them:
the reference of the Spark job's parity tests."""

from __future__ import annotations

import os
import time
from pathlib import Path

from controller.config import Settings
from controller.replay.event_files import read_events
from controller.simulator import RawEvent, Simulator
from schemas import APPEND_TABLES, STATE_TABLES
from tests.support.spark.lake_tables import Rows

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
# SPEC-KRAFT's paths through the KRaft engine: registrations, unfence, fences (the no-op
# one too), controlled shutdown, creation (explicit and placed), reassignment and cancel,
# AlterPartition with ELR shrink and its refusals, ELR and last-known-leader elections,
# config changes, feature updates, deletion, failover, unregistration; two clusters
KRAFT_CORPUS = CORPUS.parent / "corpus-kraft"
KRAFT = Settings(engine="kraft")


def copy_corpus(target: Path, lines_per_file: int | None = None, corpus: Path = CORPUS) -> Path:
    """The corpus in `target`, files in name order with increasing modification times
    (the order the file source picks them up); optionally re-split into small files."""
    target.mkdir(parents=True)
    sources = sorted(corpus.glob("*.jsonl"))
    if lines_per_file is None:
        names = [(p.name, p.read_bytes()) for p in sources]
    else:
        lines = [line for p in sources for line in p.read_bytes().splitlines(keepends=True)]
        names = [
            (f"part-{i // lines_per_file:03d}.jsonl", b"".join(lines[i : i + lines_per_file]))
            for i in range(0, len(lines), lines_per_file)
        ]
    start = time.time() - 1000
    for index, (name, data) in enumerate(names):
        path = target / name
        path.write_bytes(data)
        os.utime(path, (start + index, start + index))
    return target


def simulate(events: list[RawEvent], batches: int = 1, settings: Settings | None = None) -> Rows:
    simulator = Simulator(settings or Settings())
    appends: Rows = {t.name: [] for t in APPEND_TABLES}
    size = max(1, -(-len(events) // batches))
    for start in range(0, len(events), size):
        output = simulator.apply(events[start : start + size])
        for name, rows in output.appends.items():
            appends[name].extend(rows)
    state = {t.name: list(simulator.table_rows(t.name)) for t in STATE_TABLES}
    return {**appends, **state}


def replay_rows(directory: Path, settings: Settings | None = None) -> Rows:
    return simulate(list(read_events(directory)), settings=settings)
