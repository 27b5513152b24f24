"""Memory of the core across batches (controller.memory).

`LongLivedHeap` freezes what survives a batch so that cyclic collections skip it; that is
only sound if the core makes no reference cycles (a frozen cycle is freed by nothing but
a full collection). A chaos run with every fault kind, failovers included (each replaces
the controller and its context), must leave no cyclic garbage behind, batch after batch.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from collections import Counter
from itertools import islice
from pathlib import Path

from controller.config import Settings
from controller.memory import LongLivedHeap, frozen_heap_released
from controller.simulator import RawEvent, Simulator
from streaming.chaos.generator import ChaosGenerator, ClusterSpec

ROOT = Path(__file__).resolve().parents[2]
SPEC = ClusterSpec(name="chaos", brokers=5, topics=3, partitions=4, rf=3)


def chaos_batches(settings: Settings, events: int, size: int) -> list[list[RawEvent]]:
    generator = ChaosGenerator(3, SPEC, settings)
    raws = [
        RawEvent(json.dumps(e), f"chaos/{i}")
        for i, e in enumerate(islice(generator.events(), events))
    ]
    return [raws[i : i + size] for i in range(0, len(raws), size)]


def test_the_core_makes_no_reference_cycles() -> None:
    """Counted in a fresh interpreter: a collection counts the whole process's cyclic
    garbage, and threads that other tests leave running in a pytest worker (Kafka
    clients, py4j) can make some while the batches apply."""
    for simulate_brokers in (False, True):
        done = subprocess.run(
            [sys.executable, "-c", f"{_COUNT}({simulate_brokers})"],
            capture_output=True, text=True, cwd=ROOT, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        types, garbage = json.loads(done.stdout.splitlines()[-1])
        assert types["controller_failover"] >= 5 and types["topic_deletion"] >= 5, types
        assert garbage == [0] * len(garbage)


_COUNT = "from tests.controller.test_memory import print_garbage_per_window as f; f"


def print_garbage_per_window(simulate_brokers: bool) -> None:
    """Print the event types of a chaos run and the cyclic garbage each 15 batches left."""
    settings = Settings(simulate_brokers=simulate_brokers)
    batches = chaos_batches(settings, 3000, 40)
    types = Counter(json.loads(e.raw)["type"] for batch in batches for e in batch)
    _cyclic_garbage()  # what the imports left
    gc.disable()  # only the collections below: each counts the cyclic garbage
    simulator = Simulator(settings)
    garbage = []
    for index, batch in enumerate(batches):
        output = simulator.apply(batch)
        assert output.appends["rejected_events"] == []
        del output
        # with collection off, a cycle made in any batch is still there to be counted at
        # the next collection; each one walks the whole heap, so one every 15 batches
        if index % 15 == 14:
            garbage.append(_cyclic_garbage())
    del simulator
    garbage.append(_cyclic_garbage())
    print(json.dumps([types, garbage]))


def test_apply_stops_taking_events_once_the_output_is_large() -> None:
    """Simulator.apply's max_output: a batch ends after the event that brings its output
    (rows, a request body counting its partitions) to the bound; the rest stay in the
    iterator and apply as the next batch, with the same rows."""
    events = [
        {"type": "broker_startup", "broker": 1},
        {"type": "broker_startup", "broker": 2},
        {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2], "1": [2, 1]}},
        {"type": "broker_failure", "broker": 2},
    ]
    raws = [RawEvent(json.dumps(e), f"x:{i}") for i, e in enumerate(events)]
    whole = Simulator(Settings()).apply(raws)
    simulator = Simulator(Settings())
    pending = iter(raws)
    first = simulator.apply(pending, max_output=1)
    assert first.events == 1 and [r["seq"] for r in first.appends["applied_events"]] == [1]
    second = simulator.apply(pending, max_output=20)  # the creation: 22 rows and entries
    assert second.events == 2
    third = simulator.apply(pending, max_output=20)
    assert third.events == 1
    assert simulator.apply(pending, max_output=20).events == 0
    for table in ("state_changes", "event_results", "applied_events"):
        assert [*first.appends[table], *second.appends[table], *third.appends[table]] == list(
            whole.appends[table]
        )
    assert list(simulator.table_rows("partition_state")) == whole.upserts["partition_state"]


def test_settle_freezes_survivors_and_a_full_collection_frees_frozen_cycles() -> None:
    class SmallHeap(LongLivedHeap):
        SLACK = 1_000

    heap = SmallHeap()
    heap.settle()
    survivor = _Node()
    heap.settle()
    assert gc.is_tracked(survivor)
    assert not any(o is survivor for o in gc.get_objects())  # frozen: in no generation
    cycle = _Node()
    cycle.next = cycle
    heap.settle()  # frozen with the rest: no collection frees it from here
    probe = weakref.ref(cycle)
    del cycle
    gc.collect()
    assert probe() is not None
    grown = [_Node() for _ in range(2_000)]  # past SLACK: the next settle is a full collection
    heap.settle()
    assert probe() is None
    assert all(gc.is_tracked(node) for node in grown)  # live objects stay, frozen again


def _cyclic_garbage() -> int:
    """Objects a full collection frees, frozen ones included (a batch's are frozen at its
    end), refrozen after."""
    gc.unfreeze()
    try:
        return gc.collect()
    finally:
        gc.freeze()


class _Node:
    next: _Node | None = None


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle, as pandas and Arrow objects can make


def test_a_one_shot_simulators_frozen_heap_goes_back_to_the_collector() -> None:
    """The fleet's Python workers build a Simulator per cluster and call; what its load and
    batch froze (and the caller's cycles made meanwhile) must be collectable afterwards,
    or a long-lived worker keeps every such cycle for ever."""
    gc.collect()
    with frozen_heap_released():
        cycle = _Node()
        alive = weakref.ref(cycle)
        simulator = Simulator.from_tables(Settings(), {})
        simulator.apply(chaos_batches(Settings(), 20, 20)[0])  # freezes at the batch's end
        del cycle, simulator
        gc.collect()
        assert alive() is not None  # frozen: no collection sees it
    gc.collect()
    assert alive() is None
