"""`Simulator.apply` takes an event already parsed (`controller.events.Event`) as it takes
its line: every row the same (CONTRACT §5's tables; a rejection's row carries the line
from the event's header), under either engine. `kcsim plan` gives the core its derived
AlterPartitions so."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.config import Settings
from controller.events import Event
from controller.parse import parse_event
from controller.replay.event_files import read_events
from controller.simulator import RawEvent, Simulator
from schemas import STATE_TABLES
from tests.support.corpus import CORPUS, KRAFT, KRAFT_CORPUS


@pytest.mark.parametrize(("settings", "corpus"), [(Settings(), CORPUS), (KRAFT, KRAFT_CORPUS)])
def test_a_parsed_event_gives_the_rows_of_its_line(settings: Settings, corpus: Path) -> None:
    lines = list(read_events(corpus))
    as_lines, as_parsed = Simulator(settings), Simulator(settings)
    kinds: set[str] = set()
    for start in range(0, len(lines), 5):
        batch = lines[start : start + 5]
        parsed: list[RawEvent | Event] = []
        for line in batch:
            event = parse_event(line.raw, line.source)
            parsed.append(event if isinstance(event, Event) else line)
            kinds.add(type(event).__name__)
        made, given = as_lines.apply(batch), as_parsed.apply(parsed)
        assert {t: list(r) for t, r in given.appends.items()} == {
            t: list(r) for t, r in made.appends.items()
        }
        assert given.upserts == made.upserts and given.deletes == made.deletes
    for table in STATE_TABLES:
        assert list(as_parsed.table_rows(table.name)) == list(as_lines.table_rows(table.name))
    assert kinds == {"Event", "Rejection"}  # (both paths taken)
