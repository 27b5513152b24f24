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


def _row_values(row: dict) -> tuple:
    """A partition_state row's columns `BatchOutput.partition_changes` carries."""
    return (
        row["leader"],
        tuple(row["isr"] or ()),
        tuple(row["replicas"]),
        tuple(row["adding_replicas"]),
        tuple(row["removing_replicas"]),
    )


def _compare_changes(rows: Simulator, changes: Simulator, lines: list[RawEvent]) -> int:
    """Both through `lines`: the zk clusters' partition_state upserts and deletes given as
    partition_changes, every other output the same; the changes seen."""
    seen = 0
    for batch in _batches(lines):
        made, given = rows.apply(batch), changes.apply(batch)
        expected = [
            (r["cluster"], (r["topic"], r["partition"]), _row_values(r))
            for r in made.upserts["partition_state"]
        ] + [
            (r["cluster"], (r["topic"], r["partition"]), None)
            for r in made.deletes["partition_state"]
        ]
        assert sorted(given.partition_changes, key=str) == sorted(expected, key=str)
        assert given.upserts["partition_state"] == [] and given.deletes["partition_state"] == []
        for table in ("upserts", "deletes"):
            assert {t: r for t, r in getattr(given, table).items() if t != "partition_state"} == {
                t: r for t, r in getattr(made, table).items() if t != "partition_state"
            }
        assert {t: list(r) for t, r in given.appends.items()} == {
            t: list(r) for t, r in made.appends.items()
        }
        seen += len(given.partition_changes)
    return seen


def test_partition_changes_carry_the_partition_rows_values_under_zk() -> None:
    """`Simulator(partition_changes=True)` (`kcsim plan`'s): a zk cluster's changed
    partitions as values read from its records, the same as its partition_state rows'
    leader, ISR, replicas, adding and removing replicas; deleted ones as None."""
    settings = Settings()
    lines = list(read_events(CORPUS))
    half = len(lines) // 2
    rows, changes = Simulator(settings), Simulator(settings, partition_changes=True)
    seen = _compare_changes(rows, changes, lines[:half])
    tables = {t.name: list(rows.table_rows(t.name)) for t in STATE_TABLES}
    later = _compare_changes(
        Simulator.from_tables(settings, tables),
        Simulator.from_tables(settings, tables, partition_changes=True),
        lines[half:],
    )
    assert seen > 0 and later > 0


def test_partition_changes_leave_a_kraft_clusters_rows_as_they_are() -> None:
    lines = list(read_events(KRAFT_CORPUS))
    rows, changes = Simulator(KRAFT), Simulator(KRAFT, partition_changes=True)
    for batch in _batches(lines):
        made, given = rows.apply(batch), changes.apply(batch)
        assert given.partition_changes == []
        assert given.upserts == made.upserts and given.deletes == made.deletes
