"""Comparing whole tables: the Delta lake's rows against the core's, as multisets."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from schemas import TABLES

Rows = dict[str, list[dict[str, Any]]]


def lake_rows(spark, lake: Path) -> Rows:
    """Every table of the lake, as the core's rows."""
    from streaming.lake.spark_schemas import arrow_to_rows

    return {
        name: arrow_to_rows(spark.read.format("delta").load(str(lake / name)).toArrow(), name)
        for name in TABLES
    }


def canonical(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def assert_same_tables(actual: Rows, expected: Rows) -> None:
    """Equal as multisets, table by table (append-only rows have no order to compare)."""
    for name in TABLES:
        got, want = canonical(actual[name]), canonical(expected[name])
        assert got == want, (
            f"{name}: {sum(got.values())} rows, expected {sum(want.values())}; "
            f"missing {list((want - got).elements())[:2]}, "
            f"extra {list((got - want).elements())[:2]}"
        )
