"""CONTRACT §5's event types and fields through the parser: Kafka's value rules, each bad
value a `rejected_events` reason naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.events import (
    BrokerRegistration,
    ClusterConfigChange,
    FeatureUpdate,
    IsrChange,
    ObservedBroker,
    Rejection,
)
from controller.parse import parse_event


def parse(event: dict[str, Any]):  # type: ignore[no-untyped-def]
    return parse_event(json.dumps(event), "test:1")


def reason(event: dict[str, Any]) -> str:
    parsed = parse(event)
    assert isinstance(parsed, Rejection), parsed
    return parsed.reason


def test_every_kraft_type_parses() -> None:
    parsed = parse(
        {"type": "broker_registration", "broker": 1, "rack": "a", "broker_epoch": 7,
         "previous_broker_epoch": -1, "incarnation": "G0x5tD2hRq6OZ2ktKk1gWg"}
    )  # fmt: skip
    assert parsed.body == BrokerRegistration(1, "a", 7, -1, "G0x5tD2hRq6OZ2ktKk1gWg")
    for event in (
        {"type": "broker_unfence", "broker": 1},
        {"type": "broker_unregistration", "broker": 1},
        {"type": "unclean_election_check"},
    ):
        assert not isinstance(parse(event), Rejection)
    change = parse(
        {"type": "cluster_config_change", "broker": 3000, "configs": {
            "min.insync.replicas": "2", "unclean.leader.election.enable": True, "x.y": "z"}}
    )  # fmt: skip
    assert change.body == ClusterConfigChange(
        {"min.insync.replicas": "2", "unclean.leader.election.enable": "true", "x.y": "z"}, 3000
    )
    feature = parse({"type": "feature_update", "features": {"eligible.leader.replicas.version": 0}})
    assert feature.body == FeatureUpdate({"eligible.leader.replicas.version": 0})


def test_isr_change_kraft_fields() -> None:
    parsed = parse(
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2], "leader": 1,
         "broker_epochs": {"2": 5, "1": -1}, "leader_recovery_state": "RECOVERED"}
    )  # fmt: skip
    assert parsed.body == IsrChange("t", 0, (1, 2), None, None, 1, {1: -1, 2: 5}, "RECOVERED")


def test_observed_kraft_fields_and_brokers() -> None:
    parsed = parse(
        {"type": "broker_unfence", "broker": 1, "observed": {
            "partitions": [{"topic": "t", "partition": 0, "leader": -1, "leader_epoch": 3,
                            "isr": [], "elr": [2], "last_known_elr": [-1],
                            "leader_recovery_state": "RECOVERING"}],
            "brokers": [{"broker": 1, "status": "fenced"}]}}
    )  # fmt: skip
    (entry,) = parsed.header.observed
    assert (entry.elr, entry.last_known_elr, entry.leader_recovery_state) == (
        (2,), (-1,), "RECOVERING",
    )  # fmt: skip
    assert parsed.header.observed_brokers == (ObservedBroker(1, "fenced"),)
    brokers_only = parse(
        {"type": "broker_unfence", "broker": 1,
         "observed": {"brokers": [{"broker": 1, "status": "live"}]}}
    )  # fmt: skip
    assert brokers_only.header.observed == ()


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"type": "broker_registration"}, "missing required field 'broker'"),
        ({"type": "broker_registration", "broker": -1}, "field 'broker' must be a non-negative"),
        ({"type": "broker_registration", "broker": 1, "broker_epoch": -1},
         "field 'broker_epoch' must be a non-negative 64-bit integer"),
        ({"type": "broker_registration", "broker": 1, "previous_broker_epoch": -2},
         "field 'previous_broker_epoch' must be a broker epoch"),
        ({"type": "broker_registration", "broker": 1, "incarnation": 5},
         "field 'incarnation' must be a string"),
        ({"type": "broker_unfence", "broker": "1"}, "field 'broker' must be a non-negative"),
        ({"type": "broker_unregistration"}, "missing required field 'broker'"),
        ({"type": "cluster_config_change", "configs": {}}, "must set at least one config"),
        ({"type": "cluster_config_change", "configs": {"min.insync.replicas": "0"}},
         "min.insync.replicas: Value must be at least 1"),
        ({"type": "cluster_config_change",
          "configs": {"unclean.leader.election.enable": "yes"}},
         "unclean.leader.election.enable: Expected value to be either true or false"),
        ({"type": "cluster_config_change", "configs": {"a": None}}, "a null value deletes"),
        ({"type": "cluster_config_change", "configs": {"a": 1}}, "must be a string or boolean"),
        ({"type": "cluster_config_change", "configs": {"a": "b"}, "broker": -3},
         "field 'broker' must be a non-negative"),
        ({"type": "feature_update", "features": {}}, "must name at least one feature"),
        ({"type": "feature_update", "features": {"metadata.version": 27}},
         "names the feature \"metadata.version\", which kcsim does not model"),
        ({"type": "feature_update", "features": {"eligible.leader.replicas.version": "1"}},
         "must be a 16-bit integer"),
        ({"type": "feature_update", "features": {"eligible.leader.replicas.version": 40000}},
         "must be a 16-bit integer"),
        ({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1], "leader": -1},
         "field 'leader' must be a non-negative"),
        ({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1],
          "broker_epochs": {"x": 1}}, "keys must be broker ids"),
        ({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1],
          "broker_epochs": {"1": "5"}}, "field 'broker_epochs.1' must be a broker epoch"),
        ({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1],
          "leader_recovery_state": "DONE"}, "must be \"RECOVERED\" or \"RECOVERING\""),
        ({"type": "broker_unfence", "broker": 1,
          "observed": {"brokers": [{"broker": 1, "status": "dead"}]}},
         "field 'observed.brokers[0].status' must be one of"),
        ({"type": "broker_unfence", "broker": 1, "observed": {"partitions": [
            {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 0, "isr": [1],
             "elr": [2, 2]}]}}, "must not repeat a broker"),
    ],
)  # fmt: skip
def test_bad_values_are_rejected_naming_the_field(event: dict[str, Any], expected: str) -> None:
    assert expected in reason(event)
