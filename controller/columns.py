"""A table's rows held as one list per column, as a columnar reader (Arrow) hands them out.

A restart reloads a cluster from its state tables: at a million partitions, 3M
replica_state rows and 1M partition_state rows. Turned into a dict per row they cost
more than the context built from them (~2 µs a row); read column by column and zipped,
no per-row dict is made at all. `Columns` iterates as rows too, for the readers of the
small tables that want them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import eq
from typing import Any


@dataclass(frozen=True, slots=True)
class Columns:
    """Rows of the columns `names`, `values[i]` holding column `names[i]`'s value of
    every row, in row order (all of one length)."""

    names: tuple[str, ...]
    values: tuple[list[Any], ...]

    @classmethod
    def of_rows(cls, rows: Iterable[Mapping[str, Any]], names: Sequence[str]) -> Columns:
        """Rows (mappings; a column missing from a row is None) as columns `names`."""
        if isinstance(rows, Columns):
            return cls(tuple(names), tuple(rows.column(name) for name in names))
        rows = list(rows)
        return cls(tuple(names), tuple([row.get(name) for row in rows] for name in names))

    def __len__(self) -> int:
        return len(self.values[0]) if self.values else 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Each row as a dict, in `names` order."""
        return map(dict, map(zip, repeat(self.names), zip(*self.values, strict=True)))

    def column(self, name: str) -> list[Any]:
        return self.values[self.names.index(name)]

    def where(self, name: str, value: object) -> Columns:
        """The rows whose column `name` equals `value` (the same object when all do: one
        cluster's lake)."""
        keep = list(map(eq, self.column(name), repeat(value)))
        if all(keep):
            return self
        return Columns(self.names, tuple(list(compress(column, keep)) for column in self.values))

    def tuples(self, *names: str) -> Iterator[tuple[Any, ...]]:
        """Each row's values of the columns `names`, as a tuple."""
        return zip(*map(self.column, names), strict=True)
