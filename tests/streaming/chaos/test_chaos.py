"""The chaos generator (`streaming.chaos.generator.ChaosGenerator`): pure, no Kafka.

Same seed, same events; every fault kind shows up over a long run; every event parses
and applies through the core with no rejection, in both broker modes; ISR flaps and
broker answers are ones the controller accepts.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from itertools import islice

import pytest

from controller.config import Settings
from controller.events import Event, Rejection
from controller.parse import parse_event
from controller.simulator import RawEvent, Simulator
from schemas.events import EVENT_TYPES, KRAFT_EVENT_TYPES
from streaming.chaos.generator import FAULT_KINDS, ChaosGenerator, ClusterSpec, Fault
from streaming.chaos.produce import event_record
from tests.support.health_recount import STATE_COLUMNS, leader_changes, recount

SMALL = ClusterSpec(name="chaos", brokers=4, topics=2, partitions=3, rf=2)
SIMULATE = Settings(simulate_brokers=True)
REPLAY = Settings()
LONG_RUN = 1500  # faults: the rarest kind has weight 0.4 of ~22 (~27 expected)


@cache
def long_run(settings: Settings) -> tuple[tuple[Fault, ...], int]:
    generator = ChaosGenerator(11, SMALL, settings)
    faults = tuple(islice(generator.faults(), LONG_RUN))
    return faults, generator.dropped


def events_of(faults: tuple[Fault, ...]) -> list[dict]:
    return [event for fault in faults for event in fault.events]


def apply_all(settings: Settings, events: list[dict]):
    simulator = Simulator(settings)
    raws = [RawEvent(json.dumps(e), f"chaos/{i}") for i, e in enumerate(events)]
    return simulator, simulator.apply(raws)


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_events() -> None:
    first = list(islice(ChaosGenerator(5, SMALL).events(), 800))
    again = list(islice(ChaosGenerator(5, SMALL).events(), 800))
    assert first == again
    records = [event_record(e) for e in first]
    assert records == [event_record(e) for e in again]  # byte for byte on the wire


def test_different_seeds_differ() -> None:
    one = list(islice(ChaosGenerator(1, SMALL).events(), 300))
    two = list(islice(ChaosGenerator(2, SMALL).events(), 300))
    bootstrap = SMALL.brokers + SMALL.topics
    assert one[:bootstrap] != two[:bootstrap] or one[bootstrap:] != two[bootstrap:]
    assert [e["type"] for e in one[bootstrap:]] != [e["type"] for e in two[bootstrap:]]


def test_bootstrap_then_faults() -> None:
    faults = list(islice(ChaosGenerator(3, SMALL).faults(), 5))
    assert faults[0].kind == "bootstrap"
    types = [e["type"] for e in faults[0].events]
    assert types == ["broker_startup"] * SMALL.brokers + ["topic_creation"] * SMALL.topics
    assert {e["broker"] for e in faults[0].events[: SMALL.brokers]} == {1, 2, 3, 4}
    assert all(f.kind != "bootstrap" and f.events for f in faults[1:])


def test_seq_and_event_id_are_explicit_and_increasing() -> None:
    events = list(islice(ChaosGenerator(9, SMALL).events(), 500))
    assert [e["seq"] for e in events] == list(range(1, 501))
    assert len({e["event_id"] for e in events}) == 500
    assert all(e["event_id"] == f"chaos-9-{e['seq']}" for e in events)
    assert all(e["cluster"] == "chaos" for e in events)


# ----------------------------------------------------------------------------- coverage


@pytest.mark.parametrize("settings", [SIMULATE, REPLAY], ids=["simulate", "replay"])
def test_every_fault_kind_appears_over_a_long_run(settings: Settings) -> None:
    faults, _ = long_run(settings)
    kinds = Counter(f.kind for f in faults)
    assert set(kinds) == set(FAULT_KINDS), kinds


def test_every_event_type_appears() -> None:
    types = {e["type"] for s in (SIMULATE, REPLAY) for e in events_of(long_run(s)[0])}
    # the generator drives the §1 types (the KRaft controller's own are not generated yet)
    assert types == set(EVENT_TYPES) - set(KRAFT_EVENT_TYPES)


def test_rolling_restart_is_shutdown_failure_startup_per_broker() -> None:
    faults, _ = long_run(SIMULATE)
    rolling = next(f for f in faults if f.kind == "rolling_restart")
    steps = [(e["type"], e["broker"]) for e in rolling.events]
    brokers = [b for t, b in steps if t == "broker_startup"]
    expected = [
        step
        for b in brokers
        for step in (("controlled_shutdown", b), ("broker_failure", b), ("broker_startup", b))
    ]
    assert steps == expected and brokers


def test_isr_flap_shrinks_to_the_leader_and_expands_back() -> None:
    faults, _ = long_run(SIMULATE)
    flaps = [f for f in faults if f.kind == "isr_flap" and len(f.events) == 2]
    assert flaps
    for flap in flaps:
        shrink, expand = flap.events
        assert (shrink["topic"], shrink["partition"]) == (expand["topic"], expand["partition"])
        assert len(shrink["isr"]) == 1 and expand["isr"][0] == shrink["isr"][0]
        assert len(expand["isr"]) > 1


# ---------------------------------------------------------------------- validity


@pytest.mark.parametrize("settings", [SIMULATE, REPLAY], ids=["simulate", "replay"])
def test_events_parse(settings: Settings) -> None:
    for index, event in enumerate(events_of(long_run(settings)[0])):
        parsed = parse_event(json.dumps(event), f"chaos/{index}")
        assert isinstance(parsed, Event), (event, parsed)
        assert not isinstance(parsed, Rejection)
        assert parsed.header.seq == event["seq"]
        assert parsed.header.event_id == event["event_id"]


@pytest.mark.parametrize("settings", [SIMULATE, REPLAY], ids=["simulate", "replay"])
def test_events_apply_with_zero_rejections(settings: Settings) -> None:
    faults, dropped = long_run(settings)
    events = events_of(faults)
    assert dropped == 0
    simulator, output = apply_all(settings, events)
    assert output.appends["rejected_events"] == []
    assert output.appends["violations"] == []  # any row is a bug in kcsim
    assert len(output.appends["applied_events"]) == len(events)
    assert len(output.appends["health"]) == len(events)
    # the events are sensible: every AlterPartition (flaps and broker answers) is accepted
    isr_ids = {e["event_id"] for e in events if e["type"] == "isr_change"}
    isr_results = [r for r in output.appends["event_results"] if r["event_id"] in isr_ids]
    assert len(isr_results) == len(isr_ids)
    assert [r for r in isr_results if r["error"] is not None] == []
    # and the cluster stays in a sane range: some brokers up, churn bounded
    context = simulator.context("chaos")
    assert context.live_broker_ids()
    assert len(context.topics) <= 2 * SMALL.topics + 4


@pytest.mark.parametrize("settings", [SIMULATE, REPLAY], ids=["simulate", "replay"])
def test_health_counters_equal_a_full_recount_after_every_event(settings: Settings) -> None:
    """The incremental `health` row of every event against the figures counted over the
    whole state after it; no `violations` row on the way (CONTRACT §2)."""
    events = events_of(long_run(settings)[0])[:1500]
    simulator = Simulator(settings)
    before: list[dict] = []
    unclean = 0
    nonzero: set[str] = set()
    for index, event in enumerate(events):
        output = simulator.apply([RawEvent(json.dumps(event), f"chaos/{index}")])
        assert output.appends["violations"] == [], (event, output.appends["violations"])
        (row,) = output.appends["health"]
        after = [r for r in simulator.table_rows("partition_state")]
        expected = recount(after, simulator.table_rows("topics"), simulator.table_rows("brokers"))
        assert {c: row[c] for c in STATE_COLUMNS} == expected, (index, event)
        unclean += sum(1 for r in output.appends["state_changes"] if r["unclean"])
        assert row["unclean_elections"] == unclean
        assert row["leader_changes"] == leader_changes(before, after), (index, event)
        assert row["requests"] == len(output.appends["controller_requests"])
        before = after
        nonzero.update(c for c, value in row.items() if value)
    # the run exercises every figure (unclean elections only without simulated brokers)
    assert nonzero >= {*STATE_COLUMNS, "leader_changes", "requests"}
    assert unclean > 0 or settings is SIMULATE


def test_replay_mode_brokers_answer_deletions() -> None:
    """Without simulated brokers the generator sends the StopReplica answers, so topic
    deletions complete instead of waiting forever."""
    faults, _ = long_run(REPLAY)
    events = events_of(faults)
    deleted = {e["topic"] for e in events if e["type"] == "topic_deletion"}
    answered = {e["topic"] for e in events if e["type"] == "stop_replica_response"}
    assert deleted and answered and answered <= deleted
    simulator, _ = apply_all(REPLAY, events)
    context = simulator.context("chaos")
    stuck = set(context.topics_to_be_deleted)
    # a deletion can only wait for a broker that is down right now
    for topic in stuck:
        brokers = {
            b for tp in context.partitions_of_topic(topic) for b in context.assignment(tp).replicas
        }
        assert not brokers <= set(context.registered_broker_ids()), topic


def test_spec_validation() -> None:
    with pytest.raises(ValueError, match="brokers"):
        ClusterSpec(brokers=0)
    one = ChaosGenerator(1, ClusterSpec(brokers=1, topics=1, partitions=1, rf=3))
    events = list(islice(one.events(), 200))
    assert one.dropped == 0
    _, output = apply_all(Settings(), events)
    assert output.appends["rejected_events"] == []


# ----------------------------------------------------------------------- steady state


# of 600 faults, seed 11: every broker is live again after 198 of them
CHECKED_AT_LEAST = 100


def _settled_with_all_brokers_live(generator: ChaosGenerator, consumer: Settings) -> list[str]:
    """Apply each fault as the job would (with `consumer` settings); whenever every broker
    is live again, list what is still unfinished: reassignments and topic deletions. The
    run must reach that point often (CHECKED_AT_LEAST times), or it checks nothing."""
    simulator = Simulator(consumer)
    stuck: list[str] = []
    checked = 0
    for fault in islice(generator.faults(), 600):
        simulator.apply([RawEvent(json.dumps(e), "chaos") for e in fault.events])
        context = simulator.context(SMALL.name)
        if len(context.live_broker_ids()) < SMALL.brokers:
            continue
        checked += 1
        # (partitionsBeingReassigned may keep partitions whose reassignment is over, as
        # Kafka's does: a deleted topic's; only a stored adding/removing list is unfinished)
        moving = sorted(
            tp for tp in context.partitions_being_reassigned
            if context.assignment(tp).is_being_reassigned
        )  # fmt: skip
        if moving or context.topics_to_be_deleted:
            stuck.append(f"{fault.kind}: {moving} {sorted(context.topics_to_be_deleted)}")
    assert checked >= CHECKED_AT_LEAST, f"every broker was live at only {checked} faults"
    return stuck


def test_default_generator_matches_the_jobs_default_settings() -> None:
    """A generator built without settings targets a job with kcsim's defaults (replay
    mode): it emits the brokers' answers, so once every broker is back, every
    reassignment and topic deletion has finished (§14, §15) and the cluster does not
    drift into ever more work per event."""
    assert _settled_with_all_brokers_live(ChaosGenerator(11, SMALL), REPLAY) == []


def test_generator_answers_only_when_brokers_do_not() -> None:
    """The same holds with brokers simulated by the job; a replay-mode job fed a stream
    generated for simulated brokers gets no answers and is left with unfinished work."""
    assert _settled_with_all_brokers_live(ChaosGenerator(11, SMALL, SIMULATE), SIMULATE) == []
    assert _settled_with_all_brokers_live(ChaosGenerator(11, SMALL, SIMULATE), REPLAY) != []


def test_kraft_health_counts_a_new_partition_s_leader_as_a_change() -> None:
    """The KRaft engine's `leader_changes` counts as the ZooKeeper engine's (CONTRACT §2,
    "this event's"): a partition created with a leader is one change, a later move one
    more, against a recount of `partition_state` before and after every event of a chaos
    run (topic creations and deletions among them)."""
    settings = Settings(engine="kraft")
    events = events_of(long_run(REPLAY)[0])[:600]
    simulator = Simulator(settings)
    before: list[dict] = []
    created = 0
    for index, event in enumerate(events):
        output = simulator.apply([RawEvent(json.dumps(event), f"chaos/{index}")])
        assert output.appends["violations"] == [], (event, output.appends["violations"])
        (row,) = output.appends["health"]
        after = list(simulator.table_rows("partition_state"))
        assert row["leader_changes"] == leader_changes(before, after), (index, event)
        if event["type"] in ("topic_creation", "partition_creation"):
            created += row["leader_changes"]
        before = after
    assert created > 0  # the run creates topics, and their leaders count
