"""The metadata records the engine writes, with the fields SPEC-KRAFT §3.4 lists, in their
schema order, `topicId` replaced by `topic`."""

from __future__ import annotations

from typing import Any

from controller.kraft.outcome import Record
from controller.kraft.partition_registration import LRS_RECOVERING, PartitionRegistration

REGISTER_BROKER = "RegisterBrokerRecord"
UNREGISTER_BROKER = "UnregisterBrokerRecord"
TOPIC = "TopicRecord"
PARTITION = "PartitionRecord"
CONFIG = "ConfigRecord"
PARTITION_CHANGE = "PartitionChangeRecord"
REMOVE_TOPIC = "RemoveTopicRecord"
FEATURE_LEVEL = "FeatureLevelRecord"
BROKER_REGISTRATION_CHANGE = "BrokerRegistrationChangeRecord"
CLEAR_ELR = "ClearElrRecord"
# MV < 3.3 forms of a fenced change: never written by 4.1.1, replayed
FENCE_BROKER = "FenceBrokerRecord"
UNFENCE_BROKER = "UnfenceBrokerRecord"

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4

FENCE = 1
UNFENCE = -1
IN_CONTROLLED_SHUTDOWN = 1


def register_broker(
    broker: int,
    incarnation: str | None,
    epoch: int,
    rack: str | None,
    fenced: bool,
    in_controlled_shutdown: bool,
) -> Record:
    fields: dict[str, Any] = {"brokerId": broker}
    if incarnation is not None:
        fields["incarnationId"] = incarnation
    fields["brokerEpoch"] = epoch
    if rack is not None:
        fields["rack"] = rack
    fields["fenced"] = fenced
    fields["inControlledShutdown"] = in_controlled_shutdown
    return Record(REGISTER_BROKER, fields)


def unregister_broker(broker: int, epoch: int) -> Record:
    return Record(UNREGISTER_BROKER, {"brokerId": broker, "brokerEpoch": epoch})


def broker_fenced_change(broker: int, epoch: int, fenced: int) -> Record:
    """A BrokerRegistrationChangeRecord with `fenced` 1 (fence) or -1 (unfence)."""
    return Record(
        BROKER_REGISTRATION_CHANGE, {"brokerId": broker, "brokerEpoch": epoch, "fenced": fenced}
    )


def broker_shutdown_change(broker: int, epoch: int) -> Record:
    return Record(
        BROKER_REGISTRATION_CHANGE,
        {"brokerId": broker, "brokerEpoch": epoch, "inControlledShutdown": IN_CONTROLLED_SHUTDOWN},
    )


def topic(name: str) -> Record:
    return Record(TOPIC, {"name": name, "topic": name})


def remove_topic(name: str) -> Record:
    return Record(REMOVE_TOPIC, {"topic": name})


def partition(
    topic_name: str, partition_id: int, registration: PartitionRegistration, elr_enabled: bool
) -> Record:
    """A PartitionRecord (`PReg.toRecord`): ELR and LKE only when ELR is on and non-empty,
    the recovery state only when RECOVERING."""
    p = registration
    fields: dict[str, Any] = {
        "partitionId": partition_id,
        "topic": topic_name,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "removingReplicas": list(p.removing),
        "addingReplicas": list(p.adding),
        "leader": p.leader,
    }
    if p.leader_recovery_state == LRS_RECOVERING:
        fields["leaderRecoveryState"] = LRS_RECOVERING
    fields["leaderEpoch"] = p.leader_epoch
    fields["partitionEpoch"] = p.partition_epoch
    if elr_enabled:
        if p.elr:
            fields["eligibleLeaderReplicas"] = list(p.elr)
        if p.lke:
            fields["lastKnownElr"] = list(p.lke)
    return Record(PARTITION, fields)


def partition_change(fields: dict[str, Any]) -> Record:
    return Record(PARTITION_CHANGE, fields)


def config(resource_type: int, resource_name: str, name: str, value: str | None) -> Record:
    return Record(
        CONFIG,
        {
            "resourceType": resource_type,
            "resourceName": resource_name,
            "name": name,
            "value": value,
        },
    )


def clear_elr(topic_name: str) -> Record:
    return Record(CLEAR_ELR, {"topicName": topic_name})


def feature_level(name: str, level: int) -> Record:
    return Record(FEATURE_LEVEL, {"name": name, "featureLevel": level})
