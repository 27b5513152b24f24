"""controller.parse: Kafka's value rules for event lines (CONTRACT §1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.events import (
    AutoRebalanceCheck,
    BrokerFailure,
    BrokerStartup,
    ControlledShutdown,
    ControllerFailover,
    Event,
    Header,
    IsrChange,
    LeaderElection,
    ObservedEvent,
    ObservedPartition,
    PartitionCreation,
    PartitionReassignment,
    Rejection,
    StopReplicaResponse,
    StoredPartitionState,
    TopicConfigChange,
    TopicCreation,
    TopicDeletion,
)
from controller.model import TopicPartition
from controller.parse import parse_event, replicas_or_null
from schemas.events import COMMON_FIELDS, EVENT_FIELDS

SOURCE = "events.jsonl:7"


def line(**fields: Any) -> str:
    return json.dumps(fields)


def parsed(raw: str) -> Event:
    result = parse_event(raw, SOURCE)
    assert isinstance(result, Event), result
    return result


def body(**fields: Any) -> object:
    return parsed(line(**fields)).body


def rejected(raw: str, *fragments: str) -> Rejection:
    result = parse_event(raw, SOURCE)
    assert isinstance(result, Rejection), result
    assert result.source == SOURCE
    for fragment in fragments:
        assert fragment in result.reason
    return result


def reason(*fragments: str, **fields: Any) -> Rejection:
    return rejected(line(**fields), *fragments)


# ------------------------------------------------------------------------ good events


def test_header_defaults() -> None:
    raw = line(type="broker_failure", broker=1)
    assert parsed(raw) == Event(
        Header("broker_failure", "default", None, None, None, raw, SOURCE), BrokerFailure(1)
    )


def test_header_given() -> None:
    raw = line(
        type="broker_failure",
        broker=1,
        cluster="c1",
        event_id="e-1",
        seq=2**63 - 1,
        ts=1_700_000_000_000,
    )
    assert parsed(raw).header == Header(
        "broker_failure", "c1", "e-1", 2**63 - 1, 1_700_000_000_000, raw, SOURCE
    )


@pytest.mark.parametrize(
    ("ts", "millis"),
    [
        ("2024-01-01T00:00:00Z", 1_704_067_200_000),
        ("2024-01-01T00:00:00", 1_704_067_200_000),  # no offset: UTC
        ("2024-01-01T01:00:00+01:00", 1_704_067_200_000),
        ("2024-01-01T00:00:00.1239Z", 1_704_067_200_123),  # truncated to the millisecond
        ("1969-12-31T23:59:59.999Z", -1),
        # ISO 8601 forms Python 3.11's fromisoformat does not read: an ordinal date (the
        # 122nd day of 2024 is May 1, of 2023 May 2) and 24:00, the end of a day
        ("2024-122", 1_714_521_600_000),
        ("2024122T00:00Z", 1_714_521_600_000),
        ("2023-122T01:00:00+01:00", 1_682_985_600_000),
        ("2024-366", 1_735_603_200_000),
        ("2024-04-30T24:00", 1_714_521_600_000),
        ("2024-04-30T24:00:00.000Z", 1_714_521_600_000),
        ("2024-121T24Z", 1_714_521_600_000),
        ("2023-12-31T24:00:00-01:00", 1_704_070_800_000),
        (0, 0),
        (-5, -5),
    ],
)
def test_ts(ts: object, millis: int) -> None:
    assert parsed(line(type="auto_rebalance_check", ts=ts)).header.ts == millis


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"type": "broker_startup", "broker": 0}, BrokerStartup(0)),
        (
            {"type": "broker_startup", "broker": 2**31 - 1, "rack": "r1"},
            BrokerStartup(2**31 - 1, "r1"),
        ),
        ({"type": "broker_startup", "broker": 3, "rack": None}, BrokerStartup(3)),
        ({"type": "broker_failure", "broker": 4}, BrokerFailure(4)),
        ({"type": "controlled_shutdown", "broker": 1}, ControlledShutdown(1)),
        (
            {"type": "controlled_shutdown", "broker": 1, "broker_epoch": 2**40},
            ControlledShutdown(1, 2**40),
        ),
        (
            {"type": "topic_creation", "topic": "t", "partitions": 3, "replication_factor": 2},
            TopicCreation("t", partitions=3, replication_factor=2),
        ),
        (
            {
                "type": "topic_creation",
                "topic": "a.b_C-9",
                "assignment": {"1": [2, 0], "0": [0, 1]},
                "configs": {"unclean.leader.election.enable": True, "retention.ms": "1000"},
            },
            TopicCreation(
                "a.b_C-9",
                assignment={0: (0, 1), 1: (2, 0)},
                configs={"unclean.leader.election.enable": "true", "retention.ms": "1000"},
            ),
        ),
        (
            {"type": "partition_creation", "topic": "t", "assignment": {"3": [1], "2": [0]}},
            PartitionCreation("t", {2: (0,), 3: (1,)}),
        ),
        ({"type": "topic_deletion", "topic": "t"}, TopicDeletion("t")),
        (
            {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [3, 1]},
            PartitionReassignment("t", 0, (3, 1)),
        ),
        (
            {"type": "partition_reassignment", "topic": "t", "partition": 5, "replicas": None},
            PartitionReassignment("t", 5, None),
        ),
        (
            {"type": "isr_change", "topic": "t", "partition": 1, "isr": [1, 2]},
            IsrChange("t", 1, (1, 2)),
        ),
        (
            {
                "type": "isr_change",
                "topic": "t",
                "partition": 1,
                "isr": [2],
                "leader_epoch": 4,
                "partition_epoch": 9,
            },
            IsrChange("t", 1, (2,), 4, 9),
        ),
        ({"type": "leader_election", "election": "preferred"}, LeaderElection("preferred")),
        (
            {"type": "leader_election", "election": "unclean", "partitions": []},
            LeaderElection("unclean", ()),
        ),
        (
            {
                "type": "leader_election",
                "election": "unclean",
                "partitions": [
                    {"topic": "t", "partition": 1},
                    {"topic": "u", "partition": 0},
                    {"topic": "t", "partition": 1},
                ],
            },
            LeaderElection("unclean", (TopicPartition("t", 1), TopicPartition("u", 0))),
        ),
        ({"type": "auto_rebalance_check"}, AutoRebalanceCheck()),
        (
            {
                "type": "stop_replica_response",
                "topic": "t",
                "partition": 0,
                "broker": 2,
                "error": None,
            },
            StopReplicaResponse("t", 0, 2, None),
        ),
        (
            {
                "type": "stop_replica_response",
                "topic": "t",
                "partition": 0,
                "broker": 2,
                "error": "KAFKA_STORAGE_ERROR",
            },
            StopReplicaResponse("t", 0, 2, "KAFKA_STORAGE_ERROR"),
        ),
        (
            {
                "type": "stop_replica_response",
                "topic": "t",
                "partition": 0,
                "broker": 2,
                "error": "NONE",
            },
            StopReplicaResponse("t", 0, 2, None),
        ),
        (
            {
                "type": "topic_config_change",
                "topic": "t",
                "configs": {"unclean.leader.election.enable": " TRUE "},
            },
            TopicConfigChange("t", {"unclean.leader.election.enable": " TRUE "}),
        ),
        (
            {
                "type": "topic_config_change",
                "topic": "t",
                "configs": {"unclean.leader.election.enable": False},
            },
            TopicConfigChange("t", {"unclean.leader.election.enable": "false"}),
        ),
        ({"type": "controller_failover"}, ControllerFailover()),
        (
            {"type": "controller_failover", "controller": 2, "failed_brokers": [1, 0]},
            ControllerFailover(2, (1, 0)),
        ),
        ({"type": "controller_failover", "failed_brokers": []}, ControllerFailover(None, ())),
    ],
)
def test_good_events(fields: dict[str, Any], expected: object) -> None:
    assert body(**fields) == expected


def test_topic_name_limits() -> None:
    assert body(type="topic_deletion", topic="x" * 249) == TopicDeletion("x" * 249)
    assert body(type="topic_deletion", topic="...") == TopicDeletion("...")


def test_a_field_the_type_does_not_take_is_rejected_naming_the_closest() -> None:
    """CONTRACT §1: a misspelled optional field never silently changes a simulation."""
    rak = rejected(line(type="broker_startup", broker=1, rak="a"))
    assert rak.reason == (
        "field 'rak' is not a field of event type 'broker_startup': did you mean 'rack'?"
    )
    assert rak.cluster == "default"
    config = rejected(
        line(type="topic_creation", topic="t", partitions=1, replication_factor=1, config={})
    )
    assert config.reason.endswith("did you mean 'configs'?")
    # a field of another type is no field of this one; common fields are close too
    assert rejected(line(type="broker_failure", broker=1, rack="a")).reason.startswith(
        "field 'rack' is not a field of event type 'broker_failure'"
    )
    assert rejected(line(type="broker_failure", broker=1, event=4)).reason.endswith(
        "did you mean 'event_id'?"
    )
    # the fields it takes are checked first: their faults are the line's first
    assert rejected(line(type="broker_failure", broker=-1, rak="a")).reason == (
        "field 'broker' must be a non-negative 32-bit integer, got -1"
    )
    far = rejected(line(type="auto_rebalance_check", ticket="OPS-1"))
    assert far.reason == (
        "field 'ticket' is not a field of event type 'auto_rebalance_check' (its own fields: "
        "none; common: type, cluster, event_id, seq, ts, observed); put your own annotations "
        "under 'meta'"
    )
    # the first unknown field in the line's order is the one named
    assert "'zz'" in rejected('{"type":"broker_failure","zz":1,"broker":1,"aa":2}').reason


def test_meta_is_any_json_and_changes_nothing() -> None:
    for meta in ({"from": "ops", "n": [1, {"x": None}]}, "a note", 7, None, [], True):
        assert body(type="broker_failure", broker=1, meta=meta) == BrokerFailure(1)


def test_the_documented_fields_of_every_type_are_taken() -> None:
    """Every field the project declares for a type (a snapshot's `state` and `deletion`
    on topic_creation, `controller_epoch` on controller_failover) is a field of it."""
    from controller.parse import ALLOWED_FIELDS

    for event_type, specs in EVENT_FIELDS.items():
        names = {s.name for s in specs} | {s.name for s in COMMON_FIELDS} | {"meta"}
        assert ALLOWED_FIELDS[event_type] == names, event_type
    assert {"state", "deletion"} <= ALLOWED_FIELDS["topic_creation"]
    state = {"0": {"leader": 1, "leader_epoch": 2, "isr": [1], "partition_epoch": 3,
                   "controller_epoch": 1}}  # fmt: skip
    creation = body(type="topic_creation", topic="t", assignment={"0": [1]}, state=state)
    assert creation.state[0].leader_epoch == 2  # type: ignore[attr-defined]


def test_null_optional_fields_count_as_absent() -> None:
    event = parsed(
        line(
            type="isr_change",
            topic="t",
            partition=0,
            isr=[1],
            leader_epoch=None,
            cluster=None,
            seq=None,
            ts=None,
            event_id=None,
        )
    )
    assert event.body == IsrChange("t", 0, (1,))
    assert (event.header.cluster, event.header.seq, event.header.ts) == ("default", None, None)


def test_whitespace_around_the_object() -> None:
    assert parsed(' {"type": "auto_rebalance_check"}\t\r').body == AutoRebalanceCheck()


# ------------------------------------------------------------------------- bad lines


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (
            '{"type": "broker_failure" "broker": 1}',
            "not valid JSON: Expecting ',' delimiter at column 27",
        ),
        ('{"type": "broker_failure",\n"broker": }', "not valid JSON: Expecting value at line 2"),
        ("", "not valid JSON: Expecting value at column 1"),
        ('{"type": "auto_rebalance_check"} {}', "not valid JSON: Extra data"),
        ('{"type": "broker_failure", "broker": NaN}', "not valid JSON: NaN is not a JSON value"),
        ('{"type": "broker_failure", "broker": Infinity}', "Infinity is not a JSON value"),
        ("[1, 2]", "expected a JSON object, got [1,2]"),
        ('"broker_failure"', 'expected a JSON object, got "broker_failure"'),
        ("null", "expected a JSON object, got null"),
        (
            '{"type": "broker_failure", "broker": 1, "broker": 2}',
            "key 'broker' appears twice in one JSON object",
        ),
        ("[" * 100_000, "not valid JSON"),
        ('{"type":"broker_failure","broker":' + "9" * 5000 + "}", "not valid JSON"),
    ],
)
def test_not_json(raw: str, fragment: str) -> None:
    assert rejected(raw, fragment).cluster is None


def test_undecodable_bytes() -> None:
    # what read_events hands over for the bytes b'{"type":\xff ...' (surrogateescape)
    raw = b'{"type": "\xff"}'.decode("utf-8", "surrogateescape")
    result = rejected(raw, "line is not valid UTF-8 text: byte 0xff at column 11")
    assert result.raw == '{"type": "\ufffd"}'  # writable anywhere
    assert result.cluster is None


def test_lone_surrogate_in_the_text() -> None:
    rejected('{"type": "\ud800"}', "lone surrogate U+D800 at column 11")


def test_lone_surrogate_escape_in_a_string() -> None:
    reason("field 'rack' is not valid Unicode text", type="broker_startup", broker=1, rack="\udc80")


def test_type() -> None:
    result = reason(
        "unknown event type 'foo'; expected one of broker_startup, broker_failure",
        type="foo",
        cluster="c",
    )
    assert result.cluster == "c"
    reason("missing required field 'type'; expected one of broker_startup", broker=1)
    reason("field 'type' must be a string", type=3)
    reason("unknown event type 'Broker_Failure'", type="Broker_Failure", broker=1)


@pytest.mark.parametrize("cluster", ["", 5, ["a"], True])
def test_bad_cluster(cluster: object) -> None:
    assert (
        reason(
            "field 'cluster' must be a", type="broker_failure", broker=1, cluster=cluster
        ).cluster
        is None
    )


def test_rejection_carries_the_cluster_and_raw_text() -> None:
    raw = line(type="broker_failure", broker=-1, cluster="east")
    assert parse_event(raw, SOURCE) == Rejection(
        "east", raw, "field 'broker' must be a non-negative 32-bit integer, got -1", SOURCE
    )


def test_missing_required_field() -> None:
    reason("missing required field 'broker' for event type 'broker_failure'", type="broker_failure")
    # replicas: null cancels a reassignment, so the field itself must be there
    reason(
        "missing required field 'replicas' for event type 'partition_reassignment'",
        type="partition_reassignment",
        topic="t",
        partition=0,
    )
    reason(
        "missing required field 'error'",
        type="stop_replica_response",
        topic="t",
        partition=0,
        broker=1,
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (-1, "-1"),
        (2**31, "2147483648"),
        (True, "true"),
        (False, "false"),
        (1.0, "1.0"),
        ("1", '"1"'),
        ([1], "[1]"),
    ],
)
def test_broker_must_be_a_non_negative_int32(value: object, shown: str) -> None:
    reason(
        f"field 'broker' must be a non-negative 32-bit integer, got {shown}",
        type="broker_failure",
        broker=value,
    )
    reason(
        f"field 'broker' must be a non-negative 32-bit integer, got {shown}",
        type="controlled_shutdown",
        broker=value,
    )


def test_broker_or_brokers() -> None:
    """CONTRACT §1: `broker`, or `brokers` lost or started in one BrokerChange; a null
    `broker` is an absent one (as for every optional field)."""
    assert body(type="broker_failure", brokers=[3, 1]) == BrokerFailure(brokers=(3, 1))
    assert body(type="broker_startup", brokers=[2], rack="r") == BrokerStartup(
        rack="r", brokers=(2,)
    )
    reason("missing required field 'broker'", type="broker_failure", broker=None)
    reason("'brokers' must not repeat a broker", type="broker_startup", brokers=[1, 1])
    reason("non-negative 32-bit integer broker ids", type="broker_failure", brokers=[-1])
    reason("not both", type="broker_failure", broker=1, brokers=[2])


def test_partition_states() -> None:
    """A snapshot's stored partition states: znode contents, checked for types and ranges."""
    state = {
        "leader": -1,
        "leader_epoch": 4,
        "isr": [2],
        "partition_epoch": 9,
        "controller_epoch": 3,
        "leader_recovery_state": "RECOVERING",
    }
    parsed = body(
        type="partition_creation", topic="t", assignment={"1": [1, 2]}, state={"1": state}
    )
    assert parsed.state == {1: StoredPartitionState(-1, 4, (2,), 9, 3, "RECOVERING")}
    reason(
        "field 'state.1.leader' must be a broker id or -1, got -2",
        type="partition_creation",
        topic="t",
        assignment={"1": [1]},
        state={"1": {**state, "leader": -2}},
    )
    reason(
        "'state.1.leader_recovery_state' must be",
        type="partition_creation",
        topic="t",
        assignment={"1": [1]},
        state={"1": {**state, "leader_recovery_state": "DONE"}},
    )
    reason(
        "'state' names partitions [2]",
        type="partition_creation",
        topic="t",
        assignment={"1": [1]},
        state={"2": state},
    )


def test_partition_must_be_a_non_negative_int32() -> None:
    reason(
        "field 'partition' must be a non-negative 32-bit integer, got -3",
        type="isr_change",
        topic="t",
        partition=-3,
        isr=[1],
    )


def test_int32_and_int64_fields() -> None:
    reason(
        "field 'leader_epoch' must be a 32-bit integer, got 2147483648",
        type="isr_change",
        topic="t",
        partition=0,
        isr=[1],
        leader_epoch=2**31,
    )
    reason(
        "field 'partition_epoch' must be a 32-bit integer, got true",
        type="isr_change",
        topic="t",
        partition=0,
        isr=[1],
        partition_epoch=True,
    )
    reason(
        "field 'seq' must be a 64-bit integer, got 9223372036854775808",
        type="auto_rebalance_check",
        seq=2**63,
    )
    reason(
        "field 'seq' must be a 64-bit integer, got false", type="auto_rebalance_check", seq=False
    )
    reason(
        "field 'broker_epoch' must be a 64-bit integer, got 1.5",
        type="controlled_shutdown",
        broker=1,
        broker_epoch=1.5,
    )
    assert body(type="isr_change", topic="t", partition=0, isr=[1], leader_epoch=-(2**31)) == (
        IsrChange("t", 0, (1,), -(2**31))
    )


def test_string_fields() -> None:
    reason("field 'event_id' must be a string, got 12", type="auto_rebalance_check", event_id=12)
    reason("field 'rack' must be a string, got true", type="broker_startup", broker=1, rack=True)


@pytest.mark.parametrize(
    ("topic", "fragment"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        (".", "Topic name is invalid: '.' is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        ("x" * 250, "is longer than the max allowed length 249"),
        ("a b", "'a b' contains one or more characters other than ASCII alphanumerics, '.', '_'"),
        ("tópico", "contains one or more characters other than ASCII"),
        ("a/b", "contains one or more characters"),
        (7, "field 'topic' must be a string, got 7"),
    ],
)
def test_bad_topic(topic: object, fragment: str) -> None:
    reason("field 'topic'", fragment, type="topic_deletion", topic=topic)


@pytest.mark.parametrize(
    ("isr", "fragment"),
    [
        ([], "field 'isr' must not be empty"),
        ([1, 1], "field 'isr' must not repeat a broker, got [1,1]"),
        ([1, -1], "non-negative 32-bit integer broker ids, got -1 in [1,-1]"),
        ([1, True], "got true in [1,true]"),
        ([1, "2"], 'got "2"'),
        ([2**31], "got 2147483648"),
        ({"1": 2}, "field 'isr' must be a list of broker ids"),
        (None, "field 'isr' must be a list of broker ids, got null"),
    ],
)
def test_bad_replica_list(isr: object, fragment: str) -> None:
    reason(fragment, type="isr_change", topic="t", partition=0, isr=isr)


def test_reassignment_replicas() -> None:
    """Only what AlterPartitionReassignments cannot carry is a parse error: the
    controller refuses an empty, repeated or negative list itself (SPEC §14.1)."""
    reason(
        "field 'replicas' must hold 32-bit integer broker ids, got 2147483648",
        type="partition_reassignment",
        topic="t",
        partition=0,
        replicas=[1, 2**31],
    )
    reason(
        "field 'replicas' must be a list of broker ids, got 3",
        type="partition_reassignment",
        topic="t",
        partition=0,
        replicas=3,
    )


def test_replicas_or_null_helper() -> None:
    assert replicas_or_null("replicas", None) is None
    assert replicas_or_null("replicas", [2, 0]) == (2, 0)
    assert replicas_or_null("replicas", []) == ()
    assert replicas_or_null("replicas", [1, 1, -1]) == (1, 1, -1)


def test_failed_brokers() -> None:
    reason(
        "field 'failed_brokers' must not repeat a broker",
        type="controller_failover",
        failed_brokers=[1, 1],
    )
    reason(
        "field 'controller' must be a non-negative 32-bit integer",
        type="controller_failover",
        controller=-1,
    )


@pytest.mark.parametrize(
    ("assignment", "fragment"),
    [
        ({}, "field 'assignment' must assign at least one partition"),
        ([[1]], "field 'assignment' must be an object of partition"),
        ({"a": [1]}, "keys must be partition numbers written in decimal"),
        ({"-1": [1]}, 'got "-1"'),
        ({"01": [1]}, 'got "01"'),
        ({" 1": [1]}, 'got " 1"'),
        ({"2147483648": [1]}, 'got "2147483648"'),
        ({"1" * 5000: [1]}, "keys must be partition numbers"),
        ({"0": []}, "field 'assignment.0' must not be empty"),
        ({"0": [1, 1]}, "field 'assignment.0' must not repeat a broker"),
        ({"0": 1}, "field 'assignment.0' must be a list of broker ids"),
    ],
)
def test_bad_assignment(assignment: object, fragment: str) -> None:
    reason(fragment, type="partition_creation", topic="t", assignment=assignment)


def test_topic_creation_needs_one_way_to_assign() -> None:
    reason(
        "either 'assignment' or 'partitions' + 'replication_factor', not both",
        type="topic_creation",
        topic="t",
        assignment={"0": [1]},
        partitions=1,
    )
    reason("'partitions' is missing", type="topic_creation", topic="t")
    reason("'replication_factor' is missing", type="topic_creation", topic="t", partitions=2)
    reason("'partitions' is missing", type="topic_creation", topic="t", replication_factor=2)
    reason(
        "field 'partitions' must be at least 1, got 0",
        type="topic_creation",
        topic="t",
        partitions=0,
        replication_factor=1,
    )
    reason(
        "field 'replication_factor' must be at least 1, got -1",
        type="topic_creation",
        topic="t",
        partitions=1,
        replication_factor=-1,
    )
    reason(
        "field 'partitions' must be a 32-bit integer, got true",
        type="topic_creation",
        topic="t",
        partitions=True,
        replication_factor=1,
    )


def test_topic_creation_assignment_follows_kafka() -> None:
    reason(
        "partitions should be a consecutive 0-based integer sequence",
        type="topic_creation",
        topic="t",
        assignment={"0": [1], "2": [2]},
    )
    reason(
        "partitions should be a consecutive 0-based integer sequence",
        type="topic_creation",
        topic="t",
        assignment={"1": [1]},
    )


@pytest.mark.parametrize(
    ("configs", "fragment"),
    [
        (
            {"unclean.leader.election.enable": "yes"},
            "Invalid value 'yes' for configuration unclean.leader.election.enable",
        ),
        ({"unclean.leader.election.enable": ""}, "unclean.leader.election.enable"),
        ({"retention.ms": 1000}, "value of 'retention.ms' must be a string or boolean, got 1000"),
        ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
        ({"": "x"}, "keys must be non-empty config names"),
        (["a"], "field 'configs' must be an object"),
    ],
)
def test_bad_configs(configs: object, fragment: str) -> None:
    reason("field 'configs'", fragment, type="topic_config_change", topic="t", configs=configs)
    reason(
        fragment,
        type="topic_creation",
        topic="t",
        partitions=1,
        replication_factor=1,
        configs=configs,
    )


@pytest.mark.parametrize("election", ["Preferred", "clean", None, 1])
def test_bad_election(election: object) -> None:
    reason(
        'field \'election\' must be "preferred" or "unclean"',
        type="leader_election",
        election=election,
    )


@pytest.mark.parametrize(
    ("partitions", "fragment"),
    [
        ({"topic": "t", "partition": 0}, "field 'partitions' must be a list of"),
        ([["t", 0]], 'field \'partitions[0]\' must be {"topic", "partition"}'),
        ([{"topic": "t"}], "field 'partitions[0]' is missing 'partition'"),
        ([{"partition": 0}], "field 'partitions[0]' is missing 'topic'"),
        (
            [{"topic": "t", "partition": 0}, {"topic": "..", "partition": 0}],
            "field 'partitions[1].topic': Topic name is invalid",
        ),
        (
            [{"topic": "t", "partition": -1}],
            "field 'partitions[0].partition' must be a non-negative 32-bit integer",
        ),
    ],
)
def test_bad_partition_refs(partitions: object, fragment: str) -> None:
    reason(fragment, type="leader_election", election="preferred", partitions=partitions)


@pytest.mark.parametrize("error", ["kafka_storage_error", "", 5, False, "NOT AN ERROR"])
def test_bad_error(error: object) -> None:
    reason(
        "field 'error' must be a Kafka error code name",
        type="stop_replica_response",
        topic="t",
        partition=0,
        broker=1,
        error=error,
    )


@pytest.mark.parametrize(
    "ts",
    [
        "yesterday",
        "2024-13-01",
        True,
        1.5,
        [],
        2**63,
        "2023-366",  # 2023 has 365 days
        "2024-000",
        "0000-001",
        "2024-122T",
        "2024-05-01T24:01",  # only 24:00 is the end of a day
        "2024-05-01T24:00:01",
        "9999-12-31T24:00",  # past the last day a datetime holds
        "2024-05-01 T24:00",
    ],
)
def test_bad_ts(ts: object) -> None:
    reason("field 'ts' must be an ISO-8601 time", type="auto_rebalance_check", ts=ts)


def test_long_values_are_shortened_in_reasons() -> None:
    result = reason(
        "got -1 in [-1,0,1,2",
        "...",
        type="isr_change",
        topic="t",
        partition=0,
        isr=list(range(-1, 500)),
    )
    assert len(result.reason) < 250


# ------------------------------------------------------------------------ robustness

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
# Values that look almost right, so validators get past their first checks.
NEAR_VALUES = (
    JSON_VALUES
    | st.integers(-(2**64), 2**64)
    | st.lists(st.integers(-2, 5), max_size=4)
    | st.dictionaries(
        st.sampled_from(["0", "1", "2", "01", "x"]),
        st.lists(st.integers(-1, 3), max_size=3),
        max_size=3,
    )
    | st.dictionaries(
        st.sampled_from(["unclean.leader.election.enable", "x"]),
        st.none() | st.booleans() | st.text(max_size=6),
        max_size=2,
    )
    | st.lists(
        st.fixed_dictionaries(
            {"topic": st.sampled_from(["t", "", 1]), "partition": st.integers(-1, 2)}
        ),
        max_size=3,
    )
    | st.sampled_from(["preferred", "unclean", "t", "2024-01-01T00:00:00Z", "NONE"])
)
ALL_FIELDS = sorted(
    {s.name for s in COMMON_FIELDS} | {s.name for specs in EVENT_FIELDS.values() for s in specs}
)


@settings(max_examples=400, deadline=None)
@given(
    event_type=st.sampled_from([*EVENT_FIELDS, "nope"]),
    values=st.dictionaries(st.sampled_from(ALL_FIELDS), NEAR_VALUES, max_size=8),
)
def test_any_field_values_give_an_event_or_a_rejection(
    event_type: str, values: dict[str, Any]
) -> None:
    raw = json.dumps({"type": event_type, **values})
    result = parse_event(raw, SOURCE)
    assert isinstance(result, Event | Rejection)
    if isinstance(result, Rejection):
        assert result.reason
        result.raw.encode("utf-8")
        result.reason.encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_gives_an_event_or_a_rejection(raw: str) -> None:
    assert isinstance(parse_event(raw, SOURCE), Event | Rejection)


@settings(max_examples=200, deadline=None)
@given(st.binary())
def test_any_bytes_give_an_event_or_a_rejection(data: bytes) -> None:
    result = parse_event(data.decode("utf-8", "surrogateescape"), SOURCE)
    assert isinstance(result, Event | Rejection)
    if isinstance(result, Rejection):
        result.raw.encode("utf-8")


# ------------------------------------------------------------------------- observed

GOOD_STATE = {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 0, "isr": [1, 2]}


def with_observed(observed: Any, **fields: Any) -> str:
    return line(type="broker_failure", broker=1, observed=observed, **fields)


def test_observed_on_any_event_type() -> None:
    state = {**GOOD_STATE, "partition_epoch": 3, "controller_epoch": 2, "replicas": [2, 1]}
    header = parsed(with_observed({"partitions": [state], "unknown": 1})).header
    assert header.observed == (ObservedPartition("t", 0, 1, 0, (1, 2), 3, 2, (2, 1)),)
    raw = line(type="auto_rebalance_check", observed={"partitions": []})
    assert parsed(raw).header.observed == ()


def test_observed_optional_fields_absent_or_null_and_observed_null() -> None:
    nulls = {**GOOD_STATE, "partition_epoch": None, "controller_epoch": None, "replicas": None}
    for state in (GOOD_STATE, nulls):
        (entry,) = parsed(with_observed({"partitions": [state]})).header.observed
        assert entry == ObservedPartition("t", 0, 1, 0, (1, 2))
    assert parsed(with_observed(None)).header.observed is None
    no_leader = {**GOOD_STATE, "leader": -1, "isr": []}  # an empty ISR is a state too
    assert parsed(with_observed({"partitions": [no_leader]})).header.observed[0].leader == -1


@pytest.mark.parametrize(
    ("observed", "fragment"),
    [
        ([], "field 'observed' must be an object like"),
        ({}, "field 'observed' is missing 'partitions'"),
        ({"partitions": {"t": 0}}, "field 'observed.partitions' must be a list of partition"),
        ({"partitions": [GOOD_STATE, 3]}, "field 'observed.partitions[1]' must be a partition"),
        (
            {"partitions": [{k: v for k, v in GOOD_STATE.items() if k != "isr"}]},
            "field 'observed.partitions[0]' is missing 'isr'",
        ),
        (
            {"partitions": [{**GOOD_STATE, "topic": "a/b"}]},
            "field 'observed.partitions[0].topic': Topic name is invalid",
        ),
        (
            {"partitions": [{**GOOD_STATE, "partition": -1}]},
            "field 'observed.partitions[0].partition' must be a non-negative 32-bit integer",
        ),
        (
            {"partitions": [{**GOOD_STATE, "leader": -2}]},
            "field 'observed.partitions[0].leader' must be a broker id or -1",
        ),
        (
            {"partitions": [{**GOOD_STATE, "leader": None}]},
            "field 'observed.partitions[0].leader' must be a broker id or -1",
        ),
        (
            {"partitions": [{**GOOD_STATE, "leader_epoch": 2**31}]},
            "field 'observed.partitions[0].leader_epoch' must be a non-negative 32-bit",
        ),
        (
            {"partitions": [GOOD_STATE, {**GOOD_STATE, "isr": "1,2"}]},
            "field 'observed.partitions[1].isr' must be a list of broker ids",
        ),
        (
            {"partitions": [{**GOOD_STATE, "isr": [1, 1]}]},
            "field 'observed.partitions[0].isr' must not repeat a broker",
        ),
        (
            {"partitions": [{**GOOD_STATE, "isr": [1, -3]}]},
            "field 'observed.partitions[0].isr' must hold non-negative 32-bit integer",
        ),
        (
            {"partitions": [{**GOOD_STATE, "isr": [1, True]}]},
            "field 'observed.partitions[0].isr' must hold non-negative 32-bit integer",
        ),
        (
            {"partitions": [{**GOOD_STATE, "partition_epoch": -1}]},
            "field 'observed.partitions[0].partition_epoch' must be a non-negative",
        ),
        (
            {"partitions": [{**GOOD_STATE, "controller_epoch": "1"}]},
            "field 'observed.partitions[0].controller_epoch' must be a non-negative",
        ),
        (
            {"partitions": [{**GOOD_STATE, "replicas": []}]},
            "field 'observed.partitions[0].replicas' must not be empty",
        ),
        (
            {"partitions": [{**GOOD_STATE, "replicas": [2, 2]}]},
            "field 'observed.partitions[0].replicas' must not repeat a broker",
        ),
        (
            {"partitions": [GOOD_STATE, {**GOOD_STATE, "leader": 2}]},
            "field 'observed.partitions[1]' repeats partition t-0",
        ),
    ],
)
def test_malformed_observed_is_rejected_naming_the_field(observed: Any, fragment: str) -> None:
    result = rejected(with_observed(observed, event_id="e-1"), fragment)
    assert result.observed is None  # a malformed observed is no divergence of its own


def test_a_rejected_line_keeps_its_well_formed_observed_and_readable_ids() -> None:
    raw = line(
        type="broker_failure", broker="one", event_id="e-9", seq="x", ts=5,
        observed={"partitions": [GOOD_STATE]},
    )  # fmt: skip
    result = rejected(raw, "field 'seq'")
    assert result.observed == ObservedEvent(
        "e-9", None, 5, (ObservedPartition("t", 0, 1, 0, (1, 2)),)
    )
    assert rejected(line(broker=1, observed={"partitions": []}), "'type'").observed == (
        ObservedEvent(None, None, None, ())
    )
    assert rejected("[1]").observed is None
