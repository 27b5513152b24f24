"""The KRaft engine: Apache Kafka 4.1.1's KRaft controller, pure Python (SPEC-KRAFT.md).

One `QuorumController` is one simulated KRaft cluster. `apply(event)` takes the JSON object
of one CONTRACT §1/§5 event (field names as in the contract, "type" included; assignment
keys may be "0" strings or ints), generates the metadata records Kafka's controller would
write from the current state, replays them (records are the single source of truth, as in
Kafka's QuorumController) and returns an `Outcome`:

    controller = QuorumController(KRaftSettings.from_properties(props), cluster="default")
    outcome = controller.apply({"type": "broker_startup", "broker": 1})
    outcome.records        # tuple[Record]: type + fields, Kafka's append order
    outcome.results        # tuple[Result]: event_results rows
    outcome.changes        # tuple[PartitionChange]: state_changes partition rows
    outcome.changed_partitions / removed_partitions / changed_brokers / removed_brokers /
    outcome.changed_topics / removed_topics       # what the tables must upsert or delete
    outcome.elr_elections / last_known_leader_elections / unclean_elections  # health

An event the front door must reject (unknown topic or broker, deletion disabled, bad
config value) raises `KRaftRejection` before anything changes. Every other answer,
errors included, is an `event_results` row.

Read-only views: `partitions()`, `partition(topic, p)`, `brokers()`, `broker(id)`,
`topics()`, `controller_epoch` (kcsim's count of active controllers), `active_controller`
(the node id of the last failover, or None), `elr_enabled`.

Persistence: `dump()` is a JSON-compatible dict of everything needed to continue exactly
(registrations, partitions, configs, features, indexes with their stale entries, soft
state, the placer's generator, the record counter); `QuorumController.load(settings, d)`
continues from it. `soft_state()` is the part of it that the state tables do not hold
(no partitions, no topic configs): `QuorumController.restore(settings, soft, topic
configs, partitions)` continues from it and the partitions, as a restart does.
`replay(record)` applies one record (a `Record` or its JSON form) as Kafka's replay does:
replaying `outcome.records` of every event, from an empty controller with the same
settings, rebuilds the same state.
"""

from controller.kraft.outcome import (
    RECOVERED,
    RECOVERING,
    BrokerView,
    KRaftRejection,
    Outcome,
    PartitionChange,
    PartitionView,
    Record,
    Result,
    TopicView,
)
from controller.kraft.quorum_controller import QuorumController
from controller.kraft.settings import KRaftSettings

__all__ = [
    "RECOVERED",
    "RECOVERING",
    "BrokerView",
    "KRaftRejection",
    "KRaftSettings",
    "Outcome",
    "PartitionChange",
    "PartitionView",
    "QuorumController",
    "Record",
    "Result",
    "TopicView",
]
