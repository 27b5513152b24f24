"""The few Java library behaviours whose results reach Kafka's records: `java.util.Random`
(the placer's generator, SPEC-KRAFT §11.3), `HashSet<Integer>` and `HashMap<String>`
iteration orders (§22.2, §22.3) and `String.hashCode`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")

_MASK48 = (1 << 48) - 1
_MULTIPLIER = 0x5DEECE66D
_ADDEND = 0xB
_INT_MASK = 0xFFFFFFFF


class JavaRandom:
    """`java.util.Random`, bit for bit (a 48-bit linear congruential generator)."""

    __slots__ = ("seed",)

    def __init__(self, seed: int) -> None:
        self.seed = (seed ^ _MULTIPLIER) & _MASK48

    def _next(self, bits: int) -> int:
        self.seed = (self.seed * _MULTIPLIER + _ADDEND) & _MASK48
        return self.seed >> (48 - bits)

    def next_int(self, bound: int) -> int:
        """`nextInt(bound)` for bound > 0."""
        if bound <= 0:
            raise ValueError("bound must be positive")
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if u - r + m < (1 << 31):
                return r
            u = self._next(31)

    def shuffle(self, items: list[T]) -> None:
        """`Collections.shuffle(list, random)`."""
        for i in range(len(items), 1, -1):
            j = self.next_int(i)
            items[i - 1], items[j] = items[j], items[i - 1]


def _int32(value: int) -> int:
    value &= _INT_MASK
    return value - (1 << 32) if value >= (1 << 31) else value


def string_hash(text: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split() if text else ():
        h = (31 * h + int(unit, 16)) & _INT_MASK
    return _int32(h)


def _spread(h: int) -> int:
    """`HashMap.hash`: h ^ (h >>> 16), on the 32-bit value."""
    h &= _INT_MASK
    return h ^ (h >> 16)


def _table_size_for(capacity: int) -> int:
    n = 1
    while n < capacity:
        n *= 2
    return n


def hash_order(keys: Sequence[T], hashes: Sequence[int], initial_capacity: int = 16) -> list[T]:
    """Iteration order of a Java HashMap/HashSet after inserting `keys` (distinct, in this
    order) with these `hashCode`s into a table of `initial_capacity`: buckets ascending,
    insertion order within a bucket (resizes keep each chain's relative order)."""
    cap = _table_size_for(initial_capacity)
    for count in range(1, len(keys) + 1):
        if count > int(cap * 0.75):
            cap *= 2
    mask = cap - 1
    indexed = [(_spread(h) & mask, i) for i, h in enumerate(hashes)]
    indexed.sort()
    return [keys[i] for _, i in indexed]


def hash_set_order(first: Sequence[int], then: Iterable[int]) -> list[int]:
    """Iteration order of `new HashSet<Integer>(first)` after adding each of `then`
    (SPEC-KRAFT §22.2)."""
    capacity = max(int(len(first) / 0.75) + 1, 16)
    seen: dict[int, None] = {}
    for x in first:
        seen.setdefault(x, None)
    for x in then:
        seen.setdefault(x, None)
    keys = list(seen)
    if len(keys) <= 1:
        return keys
    return hash_order(keys, keys, capacity)


def string_hash_map_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a `HashMap<String, ...>` (default capacity) filled in this
    order (SPEC-KRAFT §22.3)."""
    distinct = list(dict.fromkeys(keys))
    return hash_order(distinct, [string_hash(k) for k in distinct])
