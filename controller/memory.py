"""Keeping Python's cyclic garbage collector out of batch work."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic collector for a block (nested blocks are fine).

    A batch allocates millions of small acyclic objects (rows and their lists); every
    cyclic collection they trigger walks the whole cluster context and all rows built so
    far, for nothing (measured: a third of the core's time on a 100k-event batch, and
    more than half of turning its 600k request rows into Arrow). Reference counting
    still frees everything at once; the collector resumes after the block.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class LongLivedHeap:
    """Keeps the long-lived heap (cluster contexts) out of the cyclic collector's walks.

    A full collection walks every tracked object: at a million partitions, seconds each,
    for a context that holds no garbage (the core makes no reference cycles). `settle`,
    at a batch boundary, collects the young generations (what the last batch left in
    cycles) and freezes the survivors (`gc.freeze`), so later collections skip them.
    Frozen objects freed by reference counting leave the frozen set; frozen cycles are
    only freed by a full collection. One runs once the objects frozen since the last
    exceed a quarter of the heap it left (Python's own rule for full collections) plus
    `SLACK`: cycles made by other code (a Spark job's) leak at most that much, and a
    cluster that grows pays for its full collections in proportion, once per step.
    """

    GROWTH = 0.25
    SLACK = 200_000  # objects: a small process never pays a full collection for a batch

    __slots__ = ("_after_full", "_pending")

    def __init__(self) -> None:
        # not gc.get_freeze_count(): it walks the frozen set
        self._after_full = 0  # objects frozen by the last full collection
        self._pending = 0  # objects frozen since

    def settle(self) -> None:
        """At a batch boundary."""
        gc.collect(1)
        self._pending += len(gc.get_objects(2))  # the survivors: the rest is frozen
        gc.freeze()
        self._collect_if_grown()

    def freeze_batch(self) -> None:
        """At the end of a batch, with the collector still paused: what the batch made (its
        output rows, the context's new records) is frozen as it stands. Otherwise the first
        allocation after the pause runs a young collection over all of it, whose walk also
        visits every old object those point to, scattered over the heap: measured at 1M
        partitions, 0.16 s of a broker failure's 0.61 s of CPU, 1.3 s of a new broker's
        3.2 s. Sound because the core makes no reference cycles (tests/test_memory.py):
        what a batch made is freed by reference counting, frozen or not; so it is not
        counted towards the next full collection either (output rows would trigger one
        for nothing), only what survives between batches is (`settle`). What the caller
        made before the batch (its events, a Spark batch's objects) is young when the
        batch starts, so `settle` collects it first: only the core's own objects are frozen
        uncounted."""
        gc.freeze()

    def _collect_if_grown(self) -> None:
        if self._pending > self._after_full * self.GROWTH + self.SLACK:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self._after_full = gc.get_freeze_count()  # a walk, after the collection's
            self._pending = 0

    def settle_loaded(self) -> None:
        """After loading a heap that holds no cycles (contexts rebuilt from rows, with the
        collector paused): frozen as it is, and counted in the measure of later growth,
        without a collection. Even a young one would walk every loaded object for no
        garbage: 2.8 s of a 1M-partition cluster's 43 s restore. Counted without a walk:
        with the collector paused for the load, the youngest generation's count (tracked
        objects made, less those freed, since its last collection) is what the load made.
        `gc.get_freeze_count()` walks the whole frozen set of the process, which grows with
        every restore in it: three quarters of a test that restores after every event."""
        self._after_full = gc.get_count()[0]
        gc.freeze()
        self._pending = 0


@contextmanager
def frozen_heap_released() -> Iterator[None]:
    """For a one-shot `Simulator` in a process that outlives it (a Spark Python worker that
    applies one cluster per call): everything frozen meanwhile, its context and whatever
    the caller made around it (pandas and Arrow objects, some in cycles), goes back to the
    collector at the end. Kept frozen, the cycles among them would never be collected: no
    later `LongLivedHeap` counts them towards a full collection."""
    try:
        yield
    finally:
        gc.unfreeze()
