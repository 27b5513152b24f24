"""Bad input lines (CONTRACT §1): each one is a rejected_events row with an actionable
reason, nothing else changes, and the lines after it are processed as if it never came."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.config import Settings
from controller.simulator import BatchOutput, RawEvent, Simulator
from schemas import TABLES

UNCLEAN = "unclean.leader.election.enable"
SETUP = [
    {"type": "broker_startup", "broker": 0},
    {"type": "broker_startup", "broker": 1},
    {"type": "broker_startup", "broker": 2},
    {"type": "topic_creation", "topic": "t", "assignment": {"0": [0, 1], "1": [1, 2]}},
    {"type": "topic_creation", "topic": "u", "assignment": {"0": [2]}},
    {"type": "topic_creation", "topic": "a.b", "partitions": 1, "replication_factor": 2},
    {"type": "isr_change", "topic": "t", "partition": 0, "isr": [0], "event_id": "shrink-1"},
    {"type": "auto_rebalance_check", "seq": 100},
]
# what comes after a bad line, to show that processing goes on unchanged
FOLLOW_UP = [
    {"type": "broker_failure", "broker": 1},
    {"type": "topic_deletion", "topic": "u"},
    {"type": "broker_startup", "broker": 1},
]


def line(event: dict[str, Any] | str) -> str:
    return event if isinstance(event, str) else json.dumps(event)


def cluster(events: list[dict[str, Any] | str] = SETUP) -> Simulator:
    simulator = Simulator(Settings())
    output = simulator.apply(RawEvent(line(e), f"setup:{i}") for i, e in enumerate(events))
    assert not output.appends["rejected_events"], output.appends["rejected_events"]
    return simulator


def state(simulator: Simulator) -> dict[str, list[dict[str, Any]]]:
    return {name: list(simulator.table_rows(name)) for name, table in TABLES.items() if table.key}


def without_source(output: BatchOutput) -> dict[str, Any]:
    return {"appends": output.appends, "upserts": output.upserts, "deletes": output.deletes}


# (bad line, fragments its reason must contain)
BAD_LINES: list[tuple[str, dict[str, Any] | str, tuple[str, ...]]] = [
    # not an event at all
    ("not json", "this is not json", ("not valid JSON",)),
    ("empty line", "", ("not valid JSON",)),
    ("truncated", '{"type": "broker_startup", "broker": 3', ("not valid JSON",)),
    ("a list", "[1, 2]", ("expected a JSON object",)),
    ("NaN", '{"type": "broker_startup", "broker": NaN}', ("NaN",)),
    ("duplicate key", '{"type": "broker_failure", "broker": 1, "broker": 2}', ("twice",)),
    ("lone surrogate", '{"type": "broker_startup", "broker": 3}\udcff', ("UTF-8",)),
    # type
    ("no type", {"broker": 1}, ("missing required field 'type'", "broker_startup")),
    ("unknown type", {"type": "broker_explosion", "broker": 1}, ("unknown event type",)),
    ("type not a string", {"type": 7}, ("field 'type'",)),
    # missing or mistyped fields
    ("missing broker", {"type": "broker_failure"}, ("missing required field 'broker'",)),
    ("broker as string", {"type": "broker_failure", "broker": "1"}, ("field 'broker'",)),
    ("negative broker", {"type": "broker_startup", "broker": -1}, ("non-negative",)),
    ("bool broker", {"type": "broker_startup", "broker": True}, ("field 'broker'",)),
    ("huge broker", {"type": "broker_startup", "broker": 2**31}, ("32-bit",)),
    ("null broker", {"type": "broker_startup", "broker": None}, ("'broker'",)),
    ("seq not int", {"type": "auto_rebalance_check", "seq": "7"}, ("field 'seq'",)),
    ("bad ts", {"type": "auto_rebalance_check", "ts": "yesterday"}, ("field 'ts'", "ISO-8601")),
    ("empty cluster", {"type": "auto_rebalance_check", "cluster": ""}, ("field 'cluster'",)),
    ("bad topic name", {"type": "topic_deletion", "topic": "no spaces"}, ("Topic name",)),
    ("topic '..'", {"type": "topic_deletion", "topic": ".."}, ("Topic name",)),
    (
        "missing replicas",
        {"type": "partition_reassignment", "topic": "t", "partition": 0},
        ("missing required field 'replicas'",),
    ),
    (
        "partition as string",
        {"type": "isr_change", "topic": "t", "partition": "0", "isr": [0]},
        ("field 'partition'",),
    ),
    ("bad election", {"type": "leader_election", "election": "dirty"}, ("preferred",)),
    (
        "partitions not a list",
        {"type": "leader_election", "election": "preferred", "partitions": "all"},
        ("field 'partitions'",),
    ),
    (
        "partition ref without partition",
        {"type": "leader_election", "election": "preferred", "partitions": [{"topic": "t"}]},
        ("missing 'partition'",),
    ),
    (
        "bad error code",
        {
            "type": "stop_replica_response",
            "topic": "t",
            "partition": 0,
            "broker": 0,
            "error": "oops",
        },
        ("field 'error'",),
    ),
    (
        "unclean not a boolean",
        {"type": "topic_config_change", "topic": "t", "configs": {UNCLEAN: "maybe"}},
        (UNCLEAN, "true or false"),
    ),
    (
        "config value null",
        {"type": "topic_config_change", "topic": "t", "configs": {UNCLEAN: None}},
        ("Null value",),
    ),
    # empty or duplicate replica lists
    (
        "empty assignment list",
        {"type": "topic_creation", "topic": "v", "assignment": {"0": []}},
        ("'assignment.0'", "must not be empty"),
    ),
    (
        "duplicate assignment list",
        {"type": "topic_creation", "topic": "v", "assignment": {"0": [1, 1]}},
        ("'assignment.0'", "must not repeat"),
    ),
    (
        "empty assignment",
        {"type": "topic_creation", "topic": "v", "assignment": {}},
        ("'assignment'", "at least one partition"),
    ),
    (
        "partition key not a number",
        {"type": "partition_creation", "topic": "t", "assignment": {"x": [0]}},
        ("'assignment'", "partition numbers"),
    ),
    (
        "assignment with a partition gap",
        {"type": "topic_creation", "topic": "v", "assignment": {"0": [0], "2": [0, 1]}},
        ("consecutive 0-based",),
    ),
    (
        "broker and brokers",
        {"type": "broker_startup", "broker": 0, "brokers": [1]},
        ("either 'broker'", "not both"),
    ),
    ("neither broker nor brokers", {"type": "broker_failure"}, ("'brokers'", "required")),
    ("empty brokers", {"type": "broker_failure", "brokers": []}, ("'brokers'", "empty")),
    (
        "state without assignment",
        {
            "type": "topic_creation",
            "topic": "v",
            "partitions": 1,
            "replication_factor": 1,
            "state": {},
        },
        ("'state' needs an 'assignment'",),
    ),
    (
        "state of an unassigned partition",
        {
            "type": "topic_creation",
            "topic": "v",
            "assignment": {"0": [0]},
            "state": {
                "1": {
                    "leader": 0,
                    "leader_epoch": 0,
                    "isr": [0],
                    "partition_epoch": 0,
                    "controller_epoch": 1,
                }
            },
        },
        ("'state'", "[1]", "does not assign"),
    ),
    (
        "state without its leader epoch",
        {
            "type": "topic_creation",
            "topic": "v",
            "assignment": {"0": [0]},
            "state": {"0": {"leader": 0, "isr": [0], "partition_epoch": 0, "controller_epoch": 1}},
        },
        ("'state.0'", "'leader_epoch'"),
    ),
    (
        "both creation forms",
        {
            "type": "topic_creation",
            "topic": "v",
            "assignment": {"0": [0]},
            "partitions": 1,
            "replication_factor": 1,
        },
        ("either",),
    ),
    (
        "no replication factor",
        {"type": "topic_creation", "topic": "v", "partitions": 2},
        ("'replication_factor' is missing",),
    ),
    (
        "zero partitions",
        {"type": "topic_creation", "topic": "v", "partitions": 0, "replication_factor": 1},
        ("'partitions'", "at least 1"),
    ),
    (
        "more partitions than kcsim holds",
        {"type": "topic_creation", "topic": "v", "partitions": 2**31 - 1, "replication_factor": 1},
        ("2,147,483,647 partitions", "at most 1,000,000"),
    ),
    (
        "reassignment to a non-integer broker",
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [0, "1"]},
        ("'replicas'", "32-bit integer broker ids"),
    ),
    (
        "empty isr",
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": []},
        ("'isr'", "must not be empty"),
    ),
    (
        "duplicate isr",
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [0, 0]},
        ("'isr'", "must not repeat"),
    ),
    (
        "duplicate failed brokers",
        {"type": "controller_failover", "failed_brokers": [1, 1]},
        ("'failed_brokers'", "must not repeat"),
    ),
    # unknown broker or topic where one is required
    ("unknown broker fails", {"type": "broker_failure", "broker": 9}, ("unknown broker 9",)),
    (
        "unknown broker shuts down",
        {"type": "controlled_shutdown", "broker": 9},
        ("unknown broker 9",),
    ),
    ("unknown topic deleted", {"type": "topic_deletion", "topic": "nope"}, ("'nope'",)),
    (
        "unknown topic configured",
        {"type": "topic_config_change", "topic": "nope", "configs": {UNCLEAN: True}},
        ("unknown topic 'nope'",),
    ),
    (
        "unknown topic grows",
        {"type": "partition_creation", "topic": "nope", "assignment": {"0": [0]}},
        ("unknown topic 'nope'",),
    ),
    (
        "existing partition created",
        {"type": "partition_creation", "topic": "t", "assignment": {"1": [0], "2": [0]}},
        ("[1]", "already exist"),
    ),
    (
        "unknown brokers fail together",
        {"type": "broker_failure", "brokers": [1, 8, 9]},
        ("unknown brokers [8, 9]",),
    ),
    (
        "existing topic created",
        {"type": "topic_creation", "topic": "t", "partitions": 1, "replication_factor": 1},
        ("'t' already exists",),
    ),
    (
        "colliding topic created",
        {"type": "topic_creation", "topic": "a_b", "partitions": 1, "replication_factor": 1},
        ("collides", "a.b"),
    ),
    (
        "replication factor too large",
        {"type": "topic_creation", "topic": "v", "partitions": 1, "replication_factor": 4},
        ("Replication factor: 4", "3"),
    ),
    (
        "stop replica from unknown broker",
        {"type": "stop_replica_response", "topic": "t", "partition": 0, "broker": 9, "error": None},
        ("unknown broker 9",),
    ),
    (
        "stop replica of unknown topic",
        {
            "type": "stop_replica_response",
            "topic": "nope",
            "partition": 0,
            "broker": 0,
            "error": None,
        },
        ("unknown topic 'nope'",),
    ),
    (
        # 1 itself is accepted before any failover: a snapshot names the first controller
        "controller epoch not greater",
        {"type": "controller_failover", "controller": 0, "controller_epoch": 0},
        ("controller_epoch 0", "not greater", "epoch 1"),
    ),
    (
        "unknown failed broker",
        {"type": "controller_failover", "failed_brokers": [9]},
        ("failed_brokers", "9"),
    ),
    (
        "event for a cluster that knows nothing",
        {"type": "broker_failure", "broker": 0, "cluster": "elsewhere"},
        ("unknown broker 0",),
    ),
    # replays and ordering
    (
        "duplicate event_id",
        {"type": "auto_rebalance_check", "event_id": "shrink-1"},
        ("duplicate event_id 'shrink-1'",),
    ),
    (
        "duplicate implicit event_id",
        {"type": "auto_rebalance_check", "event_id": "default:2"},
        ("duplicate event_id 'default:2'",),
    ),
    ("seq backwards", {"type": "auto_rebalance_check", "seq": 50}, ("seq 50", "100")),
    (
        "empty event_id",
        {"type": "auto_rebalance_check", "event_id": ""},
        ("field 'event_id' must be a non-empty string",),
    ),
    (
        "seq repeated",
        {"type": "auto_rebalance_check", "seq": 100, "event_id": "again"},
        ("seq 100 does not increase", "last applied seq is 100"),
    ),
    (
        "seq repeated, implicit event_id",
        {"type": "auto_rebalance_check", "seq": 100},
        ("the default event_id 'default:100' (cluster:seq) is already taken", "give this"),
    ),
]


@pytest.mark.parametrize(
    ("bad", "fragments"), [(b, f) for _, b, f in BAD_LINES], ids=[n for n, _, _ in BAD_LINES]
)
def test_bad_line_is_rejected_and_changes_nothing(
    bad: dict[str, Any] | str, fragments: tuple[str, ...]
) -> None:
    simulator = cluster()
    before = state(simulator)
    raw = line(bad)
    output = simulator.apply([RawEvent(raw, "events.jsonl:42")])
    (rejection,) = output.appends["rejected_events"]
    assert rejection["source"] == "events.jsonl:42"
    assert rejection["raw"] == raw.encode("utf-8", "replace").decode("utf-8") or (
        "\ufffd" in rejection["raw"]
    )
    for fragment in fragments:
        assert fragment in rejection["reason"], (fragment, rejection["reason"])
    assert set(rejection) == set(TABLES["rejected_events"].column_names)
    # nothing else: no other row appended, no state row touched
    for name, rows in output.appends.items():
        assert name == "rejected_events" or not rows, (name, rows)
    assert not any(output.upserts.values()), output.upserts
    assert not any(output.deletes.values()), output.deletes
    assert state(simulator) == before


@pytest.mark.parametrize("bad", [b for _, b, _ in BAD_LINES], ids=[n for n, _, _ in BAD_LINES])
def test_processing_goes_on_after_a_bad_line(bad: dict[str, Any] | str) -> None:
    """The lines around a bad one give exactly what they give without it, in one batch."""
    with_bad, without = cluster(), cluster()
    good = [line(e) for e in FOLLOW_UP]
    mixed = [good[0], line(bad), good[1], line(bad), good[2]]
    out_with = with_bad.apply(RawEvent(x, "in") for x in mixed)
    out_without = without.apply(RawEvent(x, "in") for x in good)
    assert len(out_with.appends["rejected_events"]) == 2
    assert len(out_with.appends["applied_events"]) == 3
    out_with.appends["rejected_events"] = []
    assert without_source(out_with) == without_source(out_without)
    assert state(with_bad) == state(without)


def test_values_nested_up_to_the_decoders_limit_are_rejected_not_raised() -> None:
    """A field nested as deep as the JSON decoder goes: the reason quoting it must not
    raise where the decoder did not (the encoder runs deeper in the stack). The depths
    sweep the window between the two limits, wherever this stack puts it."""
    limit = sys.getrecursionlimit()
    lines = [
        RawEvent('{"type":"broker_startup","broker":' + "[" * d + "]" * d + "}", f"deep:{d}")
        for d in range(limit - 120, limit + 5)
    ]
    output = cluster().apply(lines)
    reasons = [r["reason"] for r in output.appends["rejected_events"]]
    assert len(reasons) == len(lines)
    assert all("broker" in r or "nested too deeply" in r for r in reasons), set(reasons)


def test_a_rejected_line_consumes_no_seq_and_no_event_id() -> None:
    simulator = cluster()
    output = simulator.apply(
        [
            RawEvent(line({"type": "broker_failure", "broker": 9, "event_id": "x"}), "a:1"),
            RawEvent(line({"type": "broker_failure", "broker": 1, "event_id": "x"}), "a:2"),
            RawEvent(line({"type": "auto_rebalance_check"}), "a:3"),
        ]
    )
    assert len(output.appends["rejected_events"]) == 1
    applied = output.appends["applied_events"]
    assert [(r["event_id"], r["seq"]) for r in applied] == [("x", 101), ("default:102", 102)]


def test_a_clusters_first_seq_may_be_any_int64_and_none_follows_the_largest() -> None:
    """CONTRACT §1 `seq`: when given it must increase, so a cluster's first event may
    carry any int64 (0 included, as a Kafka offset would); an event without one gets the
    last applied seq + 1, and after the largest int64 there is none to give."""
    top = 2**63 - 1
    for first in (0, -5):
        output = Simulator(Settings()).apply(
            [
                RawEvent(line({"type": "broker_startup", "broker": 1, "seq": first}), "a:1"),
                RawEvent(line({"type": "broker_startup", "broker": 2}), "a:2"),
            ]
        )
        assert output.appends["rejected_events"] == []
        seqs = [r["seq"] for r in output.appends["applied_events"]]
        assert seqs == [first, first + 1]
    output = Simulator(Settings()).apply(
        [
            RawEvent(line({"type": "broker_startup", "broker": 1, "seq": top}), "a:1"),
            RawEvent(line({"type": "broker_startup", "broker": 2}), "a:2"),
        ]
    )
    assert [r["seq"] for r in output.appends["applied_events"]] == [top]
    (rejected,) = output.appends["rejected_events"]
    assert rejected["source"] == "a:2" and "largest int64" in rejected["reason"]


def test_every_rejection_names_its_cluster_when_it_can() -> None:
    simulator = cluster()
    output = simulator.apply(
        [
            RawEvent("garbage", "a:1"),
            RawEvent(line({"type": "nope", "cluster": "c2"}), "a:2"),
            RawEvent(line({"type": "broker_failure", "broker": 9}), "a:3"),
        ]
    )
    clusters = [r["cluster"] for r in output.appends["rejected_events"]]
    assert clusters == [None, "c2", "default"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELD_NAMES = st.sampled_from(
    [
        "type",
        "broker",
        "topic",
        "partition",
        "replicas",
        "isr",
        "assignment",
        "partitions",
        "replication_factor",
        "configs",
        "election",
        "error",
        "seq",
        "event_id",
        "ts",
        "cluster",
        "failed_brokers",
        "controller",
        "leader_epoch",
        "partition_epoch",
        "broker_epoch",
        "rack",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    event_type=st.sampled_from(
        [
            "broker_startup",
            "broker_failure",
            "controlled_shutdown",
            "topic_creation",
            "partition_creation",
            "topic_deletion",
            "partition_reassignment",
            "isr_change",
            "leader_election",
            "auto_rebalance_check",
            "stop_replica_response",
            "topic_config_change",
            "controller_failover",
            "bogus",
        ]
    ),
    fields=st.dictionaries(FIELD_NAMES, JSON_VALUES, max_size=5),
    text=st.text(max_size=30),
)
def test_arbitrary_lines_never_escape(event_type: str, fields: dict, text: str) -> None:
    """Any line at all is applied or rejected — one row, never an exception — and a
    rejected one changes nothing."""
    simulator = cluster()
    for raw in (json.dumps({"type": event_type, **fields}), text):
        before = state(simulator)
        output = simulator.apply([RawEvent(raw, "fuzz:1")])
        decided = output.appends["applied_events"] + output.appends["rejected_events"]
        assert len(decided) == 1
        if output.appends["rejected_events"]:
            assert output.appends["rejected_events"][0]["reason"]
            assert not any(output.upserts.values()) and not any(output.deletes.values())
            assert state(simulator) == before
