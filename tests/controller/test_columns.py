"""`Columns` (a table's rows as one list per column) and the state round-trip through it:
a restart's load of the large tables column by column (SPEC §7.2: what is stored is all a
new controller knows, so the reload must lose nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.columns import Columns
from controller.config import Settings
from controller.replay.event_files import read_events
from controller.simulator import Simulator
from controller.snapshot import COLUMNAR_TABLES
from schemas import STATE_TABLES, TABLES, MapOf
from schemas.types import contains

NAMES = ("cluster", "topic", "broker")
ROWS = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "cluster": st.sampled_from(["a", "b"]),
            "topic": st.text(max_size=3),
            "broker": st.integers(-1, 3),
        },
    ),
    max_size=8,
)
LOGS = [
    Path(__file__).parents[1] / "data" / "corpus",
    Path(__file__).parents[2] / "examples" / "events",
]


@given(ROWS)
def test_columns_of_rows_iterate_as_the_rows_with_missing_values_as_none(
    rows: list[dict[str, Any]],
) -> None:
    columns = Columns.of_rows(rows, NAMES)
    expected = [{name: row.get(name) for name in NAMES} for row in rows]
    assert len(columns) == len(rows)
    assert list(columns) == expected
    assert list(columns.tuples("broker", "topic")) == [
        (row["broker"], row["topic"]) for row in expected
    ]
    assert list(Columns.of_rows(columns, ("topic",))) == [{"topic": r["topic"]} for r in expected]


@given(ROWS, st.sampled_from(["a", "b"]))
def test_where_keeps_the_rows_of_one_value_in_order(
    rows: list[dict[str, Any]], cluster: str
) -> None:
    columns = Columns.of_rows(rows, NAMES)
    kept = columns.where("cluster", cluster)
    assert list(kept) == [row for row in columns if row["cluster"] == cluster]
    if all(row.get("cluster") == cluster for row in rows):
        assert kept is columns  # (one cluster's lake: no copy)


def test_columns_of_different_lengths_are_refused_when_read() -> None:
    columns = Columns(("a", "b"), ([1, 2], [1]))
    with pytest.raises(ValueError):
        list(columns.tuples("a", "b"))


def test_the_columnar_tables_have_no_map_columns() -> None:
    """Arrow hands a map column to Python as a list of pairs: the tables a reader hands
    over as Columns must have none (the rows path turns maps into dicts)."""
    for name in COLUMNAR_TABLES:
        assert not any(
            contains(c.type, lambda t: isinstance(t, MapOf)) for c in TABLES[name].columns
        )


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
@pytest.mark.parametrize("columnar", [False, True], ids=["rows", "columns"])
@pytest.mark.parametrize("reverse", [False, True], ids=["by-key", "reversed"])
def test_a_cluster_reloaded_from_its_tables_has_the_same_rows(
    log: Path, columnar: bool, reverse: bool
) -> None:
    """Every state-table row (states, leaders, ISRs, epochs, each replica's last event)
    is the same after `Simulator.from_tables`, from rows or from Columns, whether the rows
    come by key (as a lake's do) or not."""
    simulator = Simulator(Settings())
    simulator.apply(read_events(log))
    tables: dict[str, Any] = {t.name: list(simulator.table_rows(t.name)) for t in STATE_TABLES}
    if reverse:
        tables = {name: rows[::-1] for name, rows in tables.items()}
    tables["applied_events"] = []
    if columnar:
        for name in COLUMNAR_TABLES:
            tables[name] = Columns.of_rows(tables[name], TABLES[name].column_names)
    reloaded = Simulator.from_tables(Settings(), tables)
    for table in STATE_TABLES:
        before = list(simulator.table_rows(table.name))
        assert list(reloaded.table_rows(table.name)) == before, table.name
    event_ids = {row["last_event_id"] for row in tables["replica_state"]}
    assert len(event_ids) > 1  # (replicas changed by different events: a loss would show)


def test_arrow_columns_are_the_columns_values_with_one_object_per_distinct_value() -> None:
    """The restore's reader (`Lake.load_rows`): each column's values as Arrow gives them,
    over several chunks, nulls and lists included, a list of integers as a tuple; the
    repeated values of a string, integer or integer-list column are one object each (the
    context keeps the event ids, leaders and replica lists it loads)."""
    import pyarrow as pa

    from streaming.lake.spark_schemas import arrow_to_columns

    topics = [f"orders-{i % 3:04d}-of-a-long-topic-name" for i in range(30)]
    batches = [
        pa.record_batch(
            {
                "topic": pa.array(topics[start : start + 10]),
                "partition": pa.array(range(start, start + 10)),
                "leader": pa.array([None if i == 7 else 1000 + i % 2 for i in range(10)]),
                "isr": pa.array([[1, 2], [], None, [300, 2, 1]] * 2 + [[1, 2]] * 2),
                "event_id": pa.array([None if i == 4 else f"e-{i % 2}" for i in range(10)]),
            }
        )
        for start in (0, 10, 20)
    ]
    table = pa.Table.from_batches(batches)
    columns = arrow_to_columns(table)
    assert columns.names == tuple(table.column_names)
    expected = {name: table.column(name).to_pylist() for name in table.column_names}
    expected["isr"] = [None if v is None else tuple(v) for v in expected["isr"]]
    assert dict(zip(columns.names, columns.values, strict=True)) == expected
    assert len({id(topic) for topic in columns.column("topic")}) == 3
    assert len({id(leader) for leader in columns.column("leader")}) == 3  # 1000, 1001, None
    assert len({id(isr) for isr in columns.column("isr")}) == 4  # (1, 2), (), None, (300, 2, 1)
    empty = arrow_to_columns(table.slice(0, 0))
    assert list(empty.values) == [[], [], [], [], []]
