"""`Simulator(checks=False, state_changes=False)`, the front door `kcsim plan` drives: no
`health` or `violations` rows, no `state_changes` rows, and every other row the same as
without those options (CONTRACT §5's tables), under either engine, from the first event
and from stored tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config import Settings
from controller.replay.event_files import read_events
from controller.simulator import RawEvent, Simulator
from schemas import STATE_TABLES
from tests.support.corpus import CORPUS, KRAFT, KRAFT_CORPUS

UNCHECKED = ("health", "violations")


def _batches(lines: list[RawEvent]) -> list[list[RawEvent]]:
    return [lines[start : start + 5] for start in range(0, len(lines), 5)]


def _compare(
    checked: Simulator,
    unchecked: Simulator,
    lines: list[RawEvent],
    left_out_tables: tuple[str, ...] = UNCHECKED,
) -> dict[str, int]:
    """Both simulators through `lines`; the rows of each left-out table the checked one
    wrote."""
    counts = dict.fromkeys(left_out_tables, 0)
    for batch in _batches(lines):
        made, left_out = checked.apply(batch), unchecked.apply(batch)
        for table in left_out_tables:
            assert list(left_out.appends[table]) == []
            counts[table] += len(made.appends[table])
        assert {t: list(r) for t, r in left_out.appends.items() if t not in left_out_tables} == {
            t: list(r) for t, r in made.appends.items() if t not in left_out_tables
        }
        assert left_out.upserts == made.upserts and left_out.deletes == made.deletes
    for table in STATE_TABLES:
        assert list(unchecked.table_rows(table.name)) == list(checked.table_rows(table.name))
    return counts


@pytest.mark.parametrize(("settings", "corpus"), [(Settings(), CORPUS), (KRAFT, KRAFT_CORPUS)])
def test_without_checks_the_output_is_the_same_less_health_and_violations(
    settings: Settings, corpus: Path
) -> None:
    lines = list(read_events(corpus))
    half = len(lines) // 2
    checked, unchecked = Simulator(settings), Simulator(settings, checks=False)
    counts = _compare(checked, unchecked, lines[:half])
    # continued from the stored tables: the checked one as a restart does, the other without
    tables = {t.name: list(checked.table_rows(t.name)) for t in STATE_TABLES}
    restarted = Simulator.from_tables(settings, tables)
    unchecked_restart = Simulator.from_tables(settings, tables, checks=False)
    later = _compare(restarted, unchecked_restart, lines[half:])
    # (the comparison proves nothing unless the checked runs wrote both tables)
    assert counts["health"] > 0 and later["health"] > 0
    assert counts["violations"] + later["violations"] > 0


@pytest.mark.parametrize(("settings", "corpus"), [(Settings(), CORPUS), (KRAFT, KRAFT_CORPUS)])
def test_without_the_state_change_log_the_output_is_the_same_less_its_rows(
    settings: Settings, corpus: Path
) -> None:
    lines = list(read_events(corpus))
    half = len(lines) // 2
    logged, unlogged = Simulator(settings), Simulator(settings, state_changes=False)
    counts = _compare(logged, unlogged, lines[:half], ("state_changes",))
    tables = {t.name: list(logged.table_rows(t.name)) for t in STATE_TABLES}
    restarted = Simulator.from_tables(settings, tables)
    unlogged_restart = Simulator.from_tables(settings, tables, state_changes=False)
    later = _compare(restarted, unlogged_restart, lines[half:], ("state_changes",))
    # (the comparison proves nothing unless the logged runs wrote state changes)
    assert counts["state_changes"] > 0 and later["state_changes"] > 0
