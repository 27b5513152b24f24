"""The pure mapping of KRaft metadata records to events (`streaming/importers/kraft_log_model.py`),
on records shaped as Kafka 4.1.1's decoder prints them, for cases the recorded run does not
hold: a cancelled reassignment, an unclean election, a re-registration, a deletion with a
replica's broker down (SPEC §13, §10, §8, §15)."""

from __future__ import annotations

from pathlib import Path

from streaming.importers.kraft_log_decoder import Record
from streaming.importers.kraft_log_model import KraftLogModel

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"


class Log:
    """Builds batches of records and feeds them to a model."""

    def __init__(self) -> None:
        self.model = KraftLogModel("c")
        self.offset = 0
        self.position = 0
        self.events: list[dict] = []

    def batch(self, *records: tuple[str, dict]) -> None:
        for kind, data in records:
            record = Record(
                Path("s.log"), self.position, self.offset, 1, 1000, kind, 0, data, False
            )
            self.events += self.model.feed(record)
            self.offset += 1
        self.position += 100

    def done(self) -> list[dict]:
        self.events += self.model.finish()
        return self.events


def register(broker: int, epoch: int) -> tuple[str, dict]:
    data = {"brokerId": broker, "brokerEpoch": epoch, "fenced": True, "rack": None}
    return "REGISTER_BROKER_RECORD", data


def unfence(broker: int, epoch: int) -> tuple[str, dict]:
    return "BROKER_REGISTRATION_CHANGE_RECORD", {
        "brokerId": broker,
        "brokerEpoch": epoch,
        "fenced": -1,
    }


def fence(broker: int, epoch: int) -> tuple[str, dict]:
    return "BROKER_REGISTRATION_CHANGE_RECORD", {
        "brokerId": broker,
        "brokerEpoch": epoch,
        "fenced": 1,
    }


def change(partition: int, **fields) -> tuple[str, dict]:
    return "PARTITION_CHANGE_RECORD", {"partitionId": partition, "topicId": TOPIC_ID, **fields}


def cluster_with_topic(replicas: list[list[int]]) -> Log:
    log = Log()
    for broker in (1, 2, 3, 4):
        log.batch(register(broker, broker))
        log.batch(unfence(broker, broker))
    partitions = [
        ("PARTITION_RECORD", {"partitionId": p, "topicId": TOPIC_ID, "replicas": r, "isr": r,
                              "leader": r[0], "leaderEpoch": 0, "partitionEpoch": 0})
        for p, r in enumerate(replicas)
    ]  # fmt: skip
    log.batch(("TOPIC_RECORD", {"name": "t", "topicId": TOPIC_ID}), *partitions)
    return log


def test_a_fencing_batch_observes_the_partition_changes_written_before_it() -> None:
    log = cluster_with_topic([[1, 2, 3]])
    # Kafka 4.1.1 writes the ISR changes first, the fencing record last, in one batch
    log.batch(change(0, isr=[1, 3]), fence(2, 2))
    failure = log.done()[-1]
    assert (failure["type"], failure["broker"]) == ("broker_failure", 2)
    (row,) = failure["observed"]["partitions"]
    assert (row["leader"], row["leader_epoch"], row["isr"], row["partition_epoch"]) == (
        1, 0, [1, 3], 1,
    )  # fmt: skip


def test_a_cancelled_reassignment() -> None:
    log = cluster_with_topic([[1, 2]])
    log.batch(change(0, replicas=[3, 1, 2], addingReplicas=[3], removingReplicas=[2]))
    log.batch(change(0, replicas=[1, 2], addingReplicas=[], removingReplicas=[]))
    started, cancelled = log.done()[-2:]
    assert (started["type"], started["replicas"]) == ("partition_reassignment", [3, 1])
    assert (cancelled["type"], cancelled["replicas"]) == ("partition_reassignment", None)
    assert cancelled["observed"]["partitions"][0]["replicas"] == [1, 2]


def test_a_completed_reassignment_is_the_alter_partition_that_completed_it() -> None:
    log = cluster_with_topic([[1, 2]])
    log.batch(change(0, replicas=[3, 1, 2], addingReplicas=[3], removingReplicas=[2]))
    log.batch(
        change(0, isr=[1, 3], leader=1, replicas=[3, 1], addingReplicas=[], removingReplicas=[])
    )
    completing = log.done()[-1]
    assert completing["type"] == "isr_change"
    assert completing["isr"] == [1, 2, 3] and "leader_epoch" not in completing
    row = completing["observed"]["partitions"][0]
    assert (row["replicas"], row["leader_epoch"], row["partition_epoch"]) == ([3, 1], 1, 2)


def test_elections_preferred_and_unclean() -> None:
    log = cluster_with_topic([[1, 2], [2, 3], [3, 4]])
    log.batch(change(0, leader=2))  # a leader move away: nothing names it
    log.batch(change(0, leader=1), change(1, leader=3, isr=[3]))
    log.batch(change(2, leader=4, isr=[4]))
    events = [e for e in log.done() if e["type"] == "leader_election"]
    assert [(e["election"], e["partitions"]) for e in events] == [
        ("preferred", [{"topic": "t", "partition": 0}]),
    ]
    # 0 moved to 2, 1 to 3, 2 to 4: to a replica of the ISR but not the first, which no
    # election of Kafka's does unasked (counted, not made into events)
    assert log.model.counts.unexplained == 3


def test_an_unclean_election() -> None:
    log = cluster_with_topic([[1, 2]])
    log.batch(change(0, isr=[1]))
    log.batch(fence(1, 1), change(0, leader=-1))
    log.batch(change(0, leader=2, isr=[2]))
    election = log.done()[-1]
    assert (election["type"], election["election"]) == ("leader_election", "unclean")


def test_a_new_incarnation_of_an_unfenced_broker_is_a_failure_then_a_startup() -> None:
    log = cluster_with_topic([[1, 2]])
    log.batch(register(2, 50))
    log.batch(unfence(2, 50))
    tail = [(e["type"], e.get("broker")) for e in log.done()[-2:]]
    assert tail == [("broker_failure", 2), ("broker_startup", 2)]


def test_a_deletion_with_a_replica_down_is_answered_when_its_broker_is_back() -> None:
    log = cluster_with_topic([[1, 2], [2, 3]])
    log.batch(fence(3, 3), change(1, isr=[2]))
    log.batch(("REMOVE_TOPIC_RECORD", {"topicId": TOPIC_ID}))
    log.batch(unfence(3, 3))
    events = log.done()
    deletion = next(i for i, e in enumerate(events) if e["type"] == "topic_deletion")
    answers = [(e["type"], e.get("partition"), e.get("broker"), "observed" in e)
               for e in events[deletion:]]  # fmt: skip
    assert answers == [
        ("topic_deletion", None, None, False),
        ("stop_replica_response", 0, 1, False),
        ("stop_replica_response", 0, 2, False),
        ("stop_replica_response", 1, 2, True),  # KRaft: gone; kcsim waits for broker 3
        ("broker_startup", None, 3, False),
        ("stop_replica_response", 1, 3, True),
    ]


def config(name: str, value: str | None, resource: str = "t", kind: int = 2) -> tuple[str, dict]:
    data = {"resourceType": kind, "resourceName": resource, "name": name, "value": value}
    return "CONFIG_RECORD", data


UNCLEAN = "unclean.leader.election.enable"


def test_a_topics_configs_at_creation_then_changed_and_deleted() -> None:
    """§16: the configs a topic is created with are its topic_creation's; a later change
    is a topic_config_change; a deleted unclean override falls back to the cluster's."""
    log = Log()
    log.batch(register(1, 1))
    log.batch(unfence(1, 1))
    partition = ("PARTITION_RECORD", {"partitionId": 0, "topicId": TOPIC_ID, "replicas": [1],
                                      "isr": [1], "leader": 1, "leaderEpoch": 0,
                                      "partitionEpoch": 0})  # fmt: skip
    # Kafka 4.1.1 writes a new topic's ConfigRecords between its TopicRecord and its
    # PartitionRecords
    log.batch(
        ("TOPIC_RECORD", {"name": "t", "topicId": TOPIC_ID}),
        config(UNCLEAN, "true"),
        config("retention.ms", "60000"),
        config("remote.log.copy.disable", "true"),  # a 4.x name kcsim (3.7.1) refuses
        partition,
    )
    log.batch(config(UNCLEAN, "false"), config("retention.ms", None))
    log.batch(config(UNCLEAN, "true", resource="", kind=4))  # the cluster default
    log.batch(config(UNCLEAN, None))
    log.batch(config("cleanup.policy", "compact", resource="gone"))  # no such topic
    events = log.done()
    creation = next(e for e in events if e["type"] == "topic_creation")
    assert creation["configs"] == {UNCLEAN: "true", "retention.ms": "60000"}
    changes = [e for e in events if e["type"] == "topic_config_change"]
    assert [(e["topic"], e["configs"]) for e in changes] == [
        ("t", {UNCLEAN: "false"}),  # retention.ms deleted: counted, kcsim acts on none
        ("t", {UNCLEAN: "true"}),  # the override deleted: the cluster default set above
    ]
    assert all("observed" not in e for e in changes)  # no partition written with them
    assert log.model.counts.configs_dropped == 2
    assert log.model.configs == {"t": {UNCLEAN: "true"}}
    (note,) = log.model.notes
    assert "(the cluster default) set to true" in note and "--set" in note


def test_a_config_change_that_elects_observes_its_whole_topic() -> None:
    log = cluster_with_topic([[1, 2], [2, 3]])
    log.batch(change(0, isr=[1]))
    log.batch(fence(1, 1), change(0, leader=-1))
    # unclean election enabled: the controller elects the leaderless partition in the batch
    log.batch(config(UNCLEAN, "true"), change(0, leader=2, isr=[2], leaderRecoveryState=1))
    event = log.done()[-1]
    assert (event["type"], event["configs"]) == ("topic_config_change", {UNCLEAN: "true"})
    rows = {r["partition"]: r for r in event["observed"]["partitions"]}
    assert sorted(rows) == [0, 1]
    assert (rows[0]["leader"], rows[0]["isr"], rows[0]["leader_recovery_state"]) == (
        2, [2], "RECOVERING",
    )  # fmt: skip


def test_a_snapshot_carries_a_topics_configs() -> None:
    log = Log()

    def snap(kind: str, data: dict) -> None:
        record = Record(Path("0-1.checkpoint"), 0, 10, 1, 1000, kind, 0, data, True)
        log.events.extend(log.model.feed(record))

    snap(*register(1, 1))
    snap("TOPIC_RECORD", {"name": "t", "topicId": TOPIC_ID})
    state = {"replicas": [1], "isr": [1], "leader": 1, "leaderEpoch": 3, "partitionEpoch": 4}
    snap("PARTITION_RECORD", {"partitionId": 0, "topicId": TOPIC_ID, **state})
    snap(*config(UNCLEAN, "true"))
    snap(*config(UNCLEAN, "false", resource="", kind=4))
    creation = next(e for e in log.done() if e["type"] == "topic_creation")
    assert creation["configs"] == {UNCLEAN: "true"}
    assert len(log.model.notes) == 1


def snapshot_log(partition: dict) -> Log:
    """A log that starts at a snapshot ending at offset 10 (brokers 1-3, topic t)."""
    log = Log()
    log.offset = 10

    def snap(kind: str, data: dict) -> None:
        record = Record(Path("10-1.checkpoint"), 0, 10, 1, 1000, kind, 0, data, True)
        log.events.extend(log.model.feed(record))

    for broker in (1, 2, 3):  # a snapshot holds registrations as they stand: unfenced
        kind, data = register(broker, broker)
        snap(kind, data | {"fenced": False})
    snap("TOPIC_RECORD", {"name": "t", "topicId": TOPIC_ID})
    snap("PARTITION_RECORD", {"partitionId": 0, "topicId": TOPIC_ID, **partition})
    return log


def test_a_snapshots_events_and_the_first_batch_after_it_have_distinct_ids() -> None:
    """The first segment batch after a snapshot starts at the snapshot's end offset: an
    event of that batch must not take a snapshot event's id (a replay would reject it as
    a duplicate and lose it)."""
    state = {"replicas": [1, 2], "isr": [1, 2], "leader": 1, "leaderEpoch": 0,
             "partitionEpoch": 0}  # fmt: skip
    log = snapshot_log(state)
    log.batch(register(4, 4), unfence(4, 4))
    events = log.done()
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    assert [e["broker"] for e in events if e["type"] == "broker_startup"] == [1, 2, 3, 4]


def test_a_reassignment_in_flight_in_a_snapshot_is_requested_after_the_failover() -> None:
    """SPEC §14: a snapshot's partition moving from [1, 2] to [3, 1] (adding 3, removing
    2) loads with its full replica set and is requested again after the failover, as the
    shadow's start does, so the completing change later finds kcsim reassigning too."""
    state = {"replicas": [3, 1, 2], "isr": [1, 2], "leader": 1, "leaderEpoch": 1,
             "partitionEpoch": 2, "addingReplicas": [3], "removingReplicas": [2]}  # fmt: skip
    events = snapshot_log(state).done()
    types = [e["type"] for e in events]
    assert types[-2:] == ["controller_failover", "partition_reassignment"]
    creation = next(e for e in events if e["type"] == "topic_creation")
    assert creation["assignment"] == {"0": [3, 1, 2]}
    assert events[-1]["replicas"] == [3, 1] and events[-1]["partition"] == 0
