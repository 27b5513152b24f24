"""Topic configs validated as Kafka 3.7.1's LogConfig.validate does (CONTRACT §1:
`topic_creation` / `topic_config_change` `configs` "are validated as Kafka validates them
..., so a bad value is a rejected event")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.config import UNCLEAN_KEY, parse_bool
from controller.events import Rejection, TopicConfigChange
from controller.parse import parse_event
from controller.topic_configs import (
    TOPIC_CONFIGS,
    ConfigType,
    TopicConfigError,
    java_double_text,
    topic_config_error,
    validate_topic_configs,
)
from tests.support.scenario import Cluster

SOURCE = "events.jsonl:1"


def reason(configs: dict[str, Any], *fragments: str) -> None:
    """CONTRACT §1: both event types that carry `configs` reject them with one reason."""
    events = (
        {"type": "topic_config_change", "topic": "t", "configs": configs},
        {
            "type": "topic_creation",
            "topic": "t",
            "partitions": 1,
            "replication_factor": 1,
            "configs": configs,
        },
    )
    for event in events:
        result = parse_event(json.dumps(event), SOURCE)
        assert isinstance(result, Rejection), result
        assert result.reason.startswith("field 'configs': "), result.reason
        for fragment in fragments:
            assert fragment in result.reason, result.reason


def accepted(configs: dict[str, str]) -> None:
    event = {"type": "topic_config_change", "topic": "t", "configs": configs}
    result = parse_event(json.dumps(event), SOURCE)
    assert not isinstance(result, Rejection), result.reason
    assert result.body == TopicConfigChange("t", configs)  # stored as given


# ------------------------------------------------------------------------ the table


def test_table_holds_kafka_3_7_1_topic_configs() -> None:
    """CONTRACT §1: every name LogConfig 3.7.1 defines, and only those."""
    assert len(TOPIC_CONFIGS) == 31
    types = {name: config.type for name, config in TOPIC_CONFIGS.items()}
    assert types["retention.ms"] is ConfigType.LONG
    assert types["segment.bytes"] is ConfigType.INT
    assert types["min.cleanable.dirty.ratio"] is ConfigType.DOUBLE
    assert types["cleanup.policy"] is ConfigType.LIST
    assert types[UNCLEAN_KEY] is ConfigType.BOOLEAN
    assert types["compression.type"] is ConfigType.STRING
    for name in (
        "message.format.version",
        "message.timestamp.difference.max.ms",
        "message.downconversion.enable",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "remote.storage.enable",
        "local.retention.ms",
        "local.retention.bytes",
    ):
        assert name in TOPIC_CONFIGS


# ------------------------------------------------------------------------ refusals


def test_unknown_name() -> None:
    """CONTRACT §1: LogConfig.validateNames' wording."""
    reason({"no.such.config": "x"}, "Unknown topic config name: no.such.config")
    # a broker setting is not a topic config
    reason({"log.retention.ms": "1"}, "Unknown topic config name: log.retention.ms")


def test_unknown_name_comes_before_bad_values() -> None:
    """CONTRACT §1: Kafka checks every name before parsing any value."""
    reason({"retention.ms": "abc", "nope": "1"}, "Unknown topic config name: nope")


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            {"retention.ms": "abc"},
            "Invalid value 'abc' for configuration retention.ms: Not a number of type LONG",
        ),
        (
            {"retention.ms": "1.5"},
            "Invalid value '1.5' for configuration retention.ms: Not a number of type LONG",
        ),
        (
            {"retention.ms": "9223372036854775808"},  # Long.MAX_VALUE + 1
            "Invalid value '9223372036854775808' for configuration retention.ms: "
            "Not a number of type LONG",
        ),
        (
            {"retention.ms": "1_000"},  # Python's int() takes it, Java's does not
            "Not a number of type LONG",
        ),
        (
            {"retention.ms": ""},
            "Invalid value '' for configuration retention.ms: Not a number of type LONG",
        ),
        (
            {"segment.bytes": "2147483648"},  # Integer.MAX_VALUE + 1
            "Invalid value '2147483648' for configuration segment.bytes: Not a number of type INT",
        ),
        (
            {"min.insync.replicas": "two"},
            "Invalid value 'two' for configuration min.insync.replicas: Not a number of type INT",
        ),
        (
            {"min.cleanable.dirty.ratio": "half"},
            "Invalid value 'half' for configuration min.cleanable.dirty.ratio: "
            "Not a number of type DOUBLE",
        ),
        (
            {"preallocate": "yes"},
            "Invalid value 'yes' for configuration preallocate: "
            "Expected value to be either true or false",
        ),
        (
            {"message.downconversion.enable": "1"},
            "Invalid value '1' for configuration message.downconversion.enable: "
            "Expected value to be either true or false",
        ),
        (  # the existing unclean-key message is unchanged
            {UNCLEAN_KEY: "yes"},
            f"Invalid value 'yes' for configuration {UNCLEAN_KEY}: "
            "Expected value to be either true or false",
        ),
        (  # String.trim keeps a no-break space
            {UNCLEAN_KEY: "\u00a0true"},
            f"for configuration {UNCLEAN_KEY}: Expected value to be either true or false",
        ),
    ],
)
def test_bad_type(configs: dict[str, str], message: str) -> None:
    """CONTRACT §1: ConfigDef.parseType's reasons."""
    reason(configs, message)


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            {"min.insync.replicas": "-5"},
            "Invalid value -5 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            {"min.insync.replicas": " 0 "},
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            {"retention.ms": "-2"},
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        ),
        (
            {"segment.bytes": "13"},
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14",
        ),
        (
            {"local.retention.bytes": "-3"},
            "Invalid value -3 for configuration local.retention.bytes: Value must be at least -2",
        ),
        (
            {"min.cleanable.dirty.ratio": "1.5"},
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: "
            "Value must be no more than 1",
        ),
        (
            {"min.cleanable.dirty.ratio": "1e10"},
            "Invalid value 1.0E10 for configuration min.cleanable.dirty.ratio: "
            "Value must be no more than 1",
        ),
        (
            {"min.cleanable.dirty.ratio": "-0.1"},
            "Invalid value -0.1 for configuration min.cleanable.dirty.ratio: "
            "Value must be at least 0",
        ),
        (
            {"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "10"},
            "conflict topic config setting min.compaction.lag.ms (100) > "
            "max.compaction.lag.ms (10)",
        ),
    ],
)
def test_out_of_range(configs: dict[str, str], message: str) -> None:
    """CONTRACT §1: ConfigDef.Range's reasons, the parsed number shown as Java prints it."""
    reason(configs, message)


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (
            {"cleanup.policy": "banana"},
            "Invalid value 'banana' for configuration cleanup.policy: "
            "String must be one of: compact, delete",
        ),
        (
            {"cleanup.policy": "compact,Delete"},
            "Invalid value 'Delete' for configuration cleanup.policy: "
            "String must be one of: compact, delete",
        ),
        (
            {"compression.type": "brotli"},
            "Invalid value 'brotli' for configuration compression.type: "
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            {"message.timestamp.type": "createtime"},
            "Invalid value 'createtime' for configuration message.timestamp.type: "
            "String must be one of: CreateTime, LogAppendTime",
        ),
        (
            {"message.format.version": "9.9"},
            "Invalid value '9.9' for configuration message.format.version: "
            "Version 9.9 is not a valid version",
        ),
        (
            {"leader.replication.throttled.replicas": "0:1,x"},
            "Invalid value '[0:1, x]' for configuration leader.replication.throttled.replicas: "
            "leader.replication.throttled.replicas must be the literal '*' or a list of replicas",
        ),
    ],
)
def test_bad_enum(configs: dict[str, str], message: str) -> None:
    """CONTRACT §1: ValidString / ValidList and LogConfig's own validators."""
    reason(configs, message)


def test_first_bad_value_in_kafka_order() -> None:
    """CONTRACT §1: values are checked in LogConfig's definition order (segment.bytes is
    defined before retention.ms), whatever the input order."""
    with pytest.raises(TopicConfigError, match=r"configuration segment\.bytes:"):
        validate_topic_configs({"retention.ms": "x", "segment.bytes": "x"})


# ------------------------------------------------------------------------ acceptance


@pytest.mark.parametrize(
    "configs",
    [
        {"retention.ms": " 86400000 "},
        {"retention.ms": "+1000", "retention.bytes": "-12345"},
        {"retention.ms": "-1", "local.retention.ms": "-2"},
        {"segment.bytes": "\t1073741824\n"},
        {"min.insync.replicas": " 2"},
        {"min.cleanable.dirty.ratio": " 0.5 "},
        {"min.cleanable.dirty.ratio": "1"},
        {"min.cleanable.dirty.ratio": ".25d"},
        {"cleanup.policy": " compact , delete "},
        {"cleanup.policy": "compact"},
        {"compression.type": " zstd "},
        {"message.timestamp.type": "LogAppendTime"},
        {"message.format.version": "3.7.1"},
        {"message.format.version": "2.8-IV1"},
        {"message.format.version": "0.10.2"},
        {"preallocate": " TRUE "},
        {"remote.storage.enable": "false"},
        {UNCLEAN_KEY: " False "},
        {"leader.replication.throttled.replicas": "0:1, 1:2"},
        {"follower.replication.throttled.replicas": "*"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"},
    ],
)
def test_valid_values_with_blanks_accepted(configs: dict[str, str]) -> None:
    """CONTRACT §1: what Kafka takes is taken, and kept as given."""
    assert topic_config_error(configs) is None
    accepted(configs)


def test_json_booleans_become_text() -> None:
    """CONTRACT §1: `configs` values are string or bool."""
    result = parse_event(
        json.dumps({"type": "topic_config_change", "topic": "t", "configs": {"preallocate": True}}),
        SOURCE,
    )
    assert not isinstance(result, Rejection)
    assert result.body == TopicConfigChange("t", {"preallocate": "true"})


def test_unclean_key_still_reads_with_parse_bool() -> None:
    """Elections read the stored override back with controller.config.parse_bool."""
    for value in ("true", " TRUE ", "false"):
        assert topic_config_error({UNCLEAN_KEY: value}) is None
        parse_bool(UNCLEAN_KEY, value)


def test_java_double_text() -> None:
    assert [java_double_text(v) for v in (1.5, 1e10, 1e-5, 12345678.9, 0.001, -0.0)] == [
        "1.5",
        "1.0E10",
        "1.0E-5",
        "1.23456789E7",
        "0.001",
        "-0.0",
    ]


# ------------------------------------------------------------------------ end to end


def test_valid_change_applied_and_stored() -> None:
    """CONTRACT §1 topic_config_change: a valid change lands in the topics row, merged with
    the topic's earlier overrides, values as given."""
    c = Cluster(brokers=[1, 2])
    out = c.create("t", {0: [1, 2]}, configs={"cleanup.policy": "compact"})
    assert out.rejected == []
    out = c.send(
        {
            "type": "topic_config_change",
            "topic": "t",
            "configs": {"retention.ms": " 3600000 ", "min.insync.replicas": "2"},
        }
    )
    assert out.rejected == []
    topic = c.topic("t")
    assert topic is not None
    assert topic["configs"] == {
        "cleanup.policy": "compact",
        "retention.ms": " 3600000 ",
        "min.insync.replicas": "2",
    }


def test_refused_change_is_rejected_and_not_stored() -> None:
    """CONTRACT §1: a bad value is a rejected event; the topic keeps its configs."""
    c = Cluster(brokers=[1])
    c.create("t", {0: [1]}, configs={"retention.ms": "1000"})
    out = c.send(
        {
            "type": "topic_config_change",
            "topic": "t",
            "configs": {"retention.ms": "2000", "cleanup.policy": "banana"},
        }
    )
    assert [r["reason"] for r in out.rejected] == [
        "field 'configs': Invalid value 'banana' for configuration cleanup.policy: "
        "String must be one of: compact, delete"
    ]
    topic = c.topic("t")
    assert topic is not None
    assert topic["configs"] == {"retention.ms": "1000"}


def test_refused_creation_creates_nothing() -> None:
    """CONTRACT §1 topic_creation: bad `configs` reject the whole event."""
    c = Cluster(brokers=[1])
    out = c.create("t", {0: [1]}, configs={"no.such.config": "x"})
    assert [r["reason"] for r in out.rejected] == [
        "field 'configs': Unknown topic config name: no.such.config"
    ]
    assert c.topic("t") is None
    assert out.requests == [] and out.state_changes == []


def test_a_change_is_validated_with_the_topics_other_overrides() -> None:
    """CONTRACT §1: Kafka validates the topic's merged overrides, so a change that is
    fine alone but conflicts with an earlier override is refused."""
    c = Cluster(brokers=[1])
    c.create("t", {0: [1]}, configs={"max.compaction.lag.ms": "1000"})
    out = c.send(
        {"type": "topic_config_change", "topic": "t", "configs": {"min.compaction.lag.ms": "5000"}}
    )
    assert [r["reason"] for r in out.rejected] == [
        "field 'configs': conflict topic config setting min.compaction.lag.ms (5000) > "
        "max.compaction.lag.ms (1000)"
    ]
    assert c.topic("t")["configs"] == {"max.compaction.lag.ms": "1000"}


def test_long_values_are_refused_without_backtracking() -> None:
    """CONTRACT §1 (bad input never stops the run): a long malformed number or list is
    refused at once; the parsers take one pass over the text."""
    for configs in (
        {"min.cleanable.dirty.ratio": "1" * 20_000 + "x"},
        {"cleanup.policy": "compact" + " " * 20_000 + "x"},
    ):
        event = {"type": "topic_config_change", "topic": "t", "configs": configs}
        rejected = parse_event(json.dumps(event), "x")
        assert isinstance(rejected, Rejection)
        assert rejected.reason.startswith("field 'configs': Invalid value")


def test_overrides_stored_before_validation_do_not_block_changes() -> None:
    """A lake written before kcsim validated topic configs may hold overrides Kafka would
    refuse; a later valid change is applied (only the change is checked then)."""
    c = Cluster(brokers=[1])
    c.create("t", {0: [1]})
    c.context.set_topic_configs("t", {"retention.ms": "1 day"})  # as an old lake holds it
    c.restart()
    out = c.send({"type": "topic_config_change", "topic": "t", "configs": {UNCLEAN_KEY: "true"}})
    assert out.rejected == []
    assert c.topic("t")["configs"] == {"retention.ms": "1 day", UNCLEAN_KEY: "true"}
