"""The pure mapping of KRaft metadata records to the KRaft controller's inputs
(`streaming/importers/kraft_log_model.py`, SPEC-KRAFT §23.2-§23.3), on records shaped as
Kafka 4.1.1's decoder prints them: batches that pack several operations, registrations
clean and unclean, unfence elections, controlled shutdowns, configs with their
ClearElrRecords, features, AlterPartitions ending a recovery, elections, reassignments.
Each crafted log's import is replayed under `kcsim.engine=kraft` and must leave no
divergence (its records are the ones the engine writes for those inputs)."""

from __future__ import annotations

import json
from pathlib import Path

from streaming.cli import main
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
                Path("s.log"), self.position, self.offset, 1, 1000 + self.position, kind, 0,
                data, False,
            )  # fmt: skip
            self.events += self.model.feed(record)
            self.offset += 1
        self.position += 100

    def done(self) -> list[dict]:
        self.events += self.model.finish()
        return self.events


def register(broker: int, epoch: int) -> tuple[str, dict]:
    data = {"brokerId": broker, "incarnationId": f"i{epoch}", "brokerEpoch": epoch}
    return "REGISTER_BROKER_RECORD", data | {"fenced": True, "inControlledShutdown": False}


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


def shutting(broker: int, epoch: int) -> tuple[str, dict]:
    return "BROKER_REGISTRATION_CHANGE_RECORD", {
        "brokerId": broker,
        "brokerEpoch": epoch,
        "inControlledShutdown": 1,
    }


def config(kind: int, resource: str, name: str, value: str | None) -> tuple[str, dict]:
    return "CONFIG_RECORD", {
        "resourceType": kind,
        "resourceName": resource,
        "name": name,
        "value": value,
    }


def replays_exactly(events: list[dict], tmp_path: Path, *settings: str) -> None:
    """The events through `kcsim replay --set kcsim.engine=kraft`: all applied, every
    `observed` matched."""
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    out = tmp_path / "tables"
    argv = ["replay", str(path), "--out", str(out), "--set", "kcsim.engine=kraft"]
    assert main([*argv, *(x for s in settings for x in ("--set", s))]) == 0
    assert (out / "rejected_events.jsonl").read_text() == ""
    assert (out / "divergences.jsonl").read_text() == ""


def by_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def test_registrations_and_unfences_are_the_brokers_inputs(tmp_path: Path) -> None:
    """§6, §7: a registration (fenced, its epoch and incarnation), then the heartbeat that
    unfences it; the first registration has no previous epoch."""
    log = cluster_with_topic([[1, 2, 3]])
    events = log.done()
    kinds = [e["type"] for e in events[:2]]
    assert kinds == ["broker_registration", "broker_unfence"]
    first = events[0]
    assert (first["broker"], first["broker_epoch"], first["incarnation"]) == (1, 1, "i1")
    assert "previous_broker_epoch" not in first
    assert first["observed"] == {"brokers": [{"broker": 1, "status": "fenced"}]}
    assert events[1]["observed"] == {"brokers": [{"broker": 1, "status": "live"}]}
    replays_exactly(events, tmp_path)


def test_a_batch_packing_a_fence_and_another_leaders_alter_partition(tmp_path: Path) -> None:
    """§23.3: the raft layer packed a leader's AlterPartition (dropping 3) with the fence
    of broker 2 (its removal written before the fence record): two operations, cut by
    content: the change that drops 3 is an isr_change before the fence."""
    log = cluster_with_topic([[1, 2, 3], [1, 3, 2]])
    log.batch(change(1, isr=[1, 2]), change(0, isr=[1, 3]), change(1, isr=[1]), fence(2, 2))
    events = log.done()
    alter, failure = events[-2:]
    assert (alter["type"], alter["partition"], alter["isr"], alter["leader"]) == (
        "isr_change", 1, [1, 2], 1,
    )  # fmt: skip
    assert (failure["type"], failure["broker"]) == ("broker_failure", 2)
    rows = failure["observed"]["partitions"]
    assert [(r["partition"], r["isr"], r["partition_epoch"]) for r in rows] == [
        (0, [1, 3], 1),
        (1, [1], 2),
    ]
    assert failure["observed"]["brokers"] == [{"broker": 2, "status": "fenced"}]
    replays_exactly(events, tmp_path)


def test_a_restart_after_a_clean_shutdown_names_its_previous_epoch(tmp_path: Path) -> None:
    """§6.1: a re-registration whose records take the broker out of no ELR is clean."""
    log = cluster_with_topic([[1, 2, 3]])
    log.batch(change(0, isr=[1, 3]), fence(2, 2))
    log.batch(register(2, 40))
    log.batch(unfence(2, 40))
    events = log.done()
    registration = by_type(events, "broker_registration")[-1]
    assert (registration["broker_epoch"], registration["previous_broker_epoch"]) == (40, 2)
    replays_exactly(events, tmp_path)


def test_a_restart_that_takes_the_broker_out_of_an_elr_was_unclean(tmp_path: Path) -> None:
    """§6.1, §19: with min.insync.replicas 2, fencing 2 then 3 leaves ISR [1] and ELR
    [2]...; the records before 2's new registration remove it from the ELR: the unclean
    path (no previous epoch), which replays to the same records."""
    log = cluster_with_topic([[1, 2, 3]])
    log.batch(change(0, isr=[1, 3], eligibleLeaderReplicas=[]), fence(2, 2))
    log.batch(change(0, isr=[1], eligibleLeaderReplicas=[3]), fence(3, 3))
    log.batch(change(0, eligibleLeaderReplicas=[]), register(3, 50))
    events = log.done()
    registration = by_type(events, "broker_registration")[-1]
    assert registration["broker"] == 3 and "previous_broker_epoch" not in registration
    assert registration["observed"]["partitions"][0]["elr"] == []
    replays_exactly(events, tmp_path, "min.insync.replicas=2")


def test_a_controlled_shutdown_owns_the_removals_after_its_record(tmp_path: Path) -> None:
    """§9: the heartbeat asking to shut down: its record, then the leaderships taken."""
    log = cluster_with_topic([[2, 1, 3], [1, 2, 3]])
    log.batch(shutting(2, 2), change(0, isr=[1, 3], leader=1), change(1, isr=[1, 3]))
    log.batch(fence(2, 2))
    events = log.done()
    shutdown, failure = events[-2:]
    assert (shutdown["type"], shutdown["broker"]) == ("controlled_shutdown", 2)
    assert shutdown["observed"]["brokers"] == [{"broker": 2, "status": "shutting_down"}]
    assert [r["leader"] for r in shutdown["observed"]["partitions"]] == [1, 1]
    assert (failure["type"], failure["observed"]["brokers"][0]["status"]) == (
        "broker_failure", "fenced",
    )  # fmt: skip
    replays_exactly(events, tmp_path)


def test_the_unfence_owns_its_elections_an_unclean_run_does_not(tmp_path: Path) -> None:
    """§7, §15: 1's unfence elects it (ISR member); in the same batch the unclean
    election of another partition, whose winner 1 was outside ISR and ELR, is a
    leader_election of its own (RECOVERING)."""
    log = cluster_with_topic([[1, 2], [2, 1]])
    log.batch(change(0, isr=[2], leader=2), change(1, isr=[2]), fence(1, 1))
    log.batch(change(0, isr=[2], leader=-1), change(1, leader=-1), fence(2, 2))
    log.batch(register(1, 60))
    log.batch(
        unfence(1, 60),
        change(0, leader=1, isr=[1], leaderRecoveryState=1),
        change(1, leader=1, isr=[1], leaderRecoveryState=1),
    )
    events = log.done()
    unfence_event, election = events[-2:]
    assert unfence_event["type"] == "broker_unfence"
    assert "partitions" not in unfence_event["observed"]
    assert (election["type"], election["election"]) == ("leader_election", "unclean")
    assert election["partitions"] == [
        {"topic": "t", "partition": 0},
        {"topic": "t", "partition": 1},
    ]
    assert {r["leader_recovery_state"] for r in election["observed"]["partitions"]} == {
        "RECOVERING"
    }
    replays_exactly(events, tmp_path, "eligible.leader.replicas.version=0")


def test_an_alter_partition_ending_a_recovery(tmp_path: Path) -> None:
    """§20: the leader's AlterPartition that ends RECOVERING carries the state."""
    log = cluster_with_topic([[1, 2], [2, 1]])
    log.batch(change(0, isr=[2], leader=2), change(1, isr=[2]), fence(1, 1))
    log.batch(change(0, isr=[2], leader=-1), change(1, leader=-1), fence(2, 2))
    log.batch(register(1, 60))
    log.batch(unfence(1, 60))
    log.batch(change(0, leader=1, isr=[1], leaderRecoveryState=1))
    log.batch(change(0, leaderRecoveryState=0))
    events = log.done()
    ended = events[-1]
    assert (ended["type"], ended["isr"], ended["leader"]) == ("isr_change", [1], 1)
    assert ended["leader_recovery_state"] == "RECOVERED"
    replays_exactly(events, tmp_path, "eligible.leader.replicas.version=0")


def test_a_cluster_min_isr_change_owns_its_clear_elr(tmp_path: Path) -> None:
    """§16, §19: a cluster-wide min.insync.replicas: ConfigRecord then ClearElrRecord,
    which clears every ELR (PE+1); format-time records are settings, not inputs."""
    log = Log()
    log.batch(config(4, "", "min.insync.replicas", "1"))
    for broker in (1, 2, 3):
        log.batch(register(broker, broker))
        log.batch(unfence(broker, broker))
    log.batch(
        ("TOPIC_RECORD", {"name": "t", "topicId": TOPIC_ID}),
        ("PARTITION_RECORD", {"partitionId": 0, "topicId": TOPIC_ID, "replicas": [1, 2, 3],
                              "isr": [1, 2, 3], "leader": 1, "leaderEpoch": 0,
                              "partitionEpoch": 0}),
    )  # fmt: skip
    log.batch(config(4, "", "min.insync.replicas", "3"), ("CLEAR_ELR_RECORD", {}))
    log.batch(change(0, isr=[1, 3], eligibleLeaderReplicas=[2]), fence(2, 2))
    log.batch(config(4, "", "min.insync.replicas", "2"), ("CLEAR_ELR_RECORD", {}))
    events = log.done()
    assert "format time" in log.model.notes[0]
    changes = by_type(events, "cluster_config_change")
    assert [c["configs"] for c in changes] == [
        {"min.insync.replicas": "3"},
        {"min.insync.replicas": "2"},
    ]
    assert "broker" not in changes[0] and "observed" not in changes[0]
    (row,) = changes[1]["observed"]["partitions"]
    assert (row["elr"], row["partition_epoch"]) == ([], 2)
    replays_exactly(events, tmp_path)


def test_a_feature_update_owns_its_config_records(tmp_path: Path) -> None:
    """§17: turning ELR on writes the cluster min.insync.replicas, then the level."""
    log = cluster_with_topic([[1, 2, 3]])
    log.batch(
        config(4, "", "min.insync.replicas", "1"),
        ("FEATURE_LEVEL_RECORD", {"name": "eligible.leader.replicas.version", "featureLevel": 1}),
    )
    events = log.done()
    assert events[-1]["type"] == "feature_update"
    assert events[-1]["features"] == {"eligible.leader.replicas.version": 1}
    assert not by_type(events, "cluster_config_change")
    replays_exactly(events, tmp_path, "eligible.leader.replicas.version=0")


def test_reassignments_started_cancelled_and_completed(tmp_path: Path) -> None:
    """§13: a start (target = replicas - removing), a cancel (back to replicas - adding:
    `replicas` null), and the AlterPartition that completes one."""
    log = cluster_with_topic([[1, 2]])
    log.batch(change(0, replicas=[3, 1, 2], addingReplicas=[3], removingReplicas=[2]))
    # the cancel bumps the leader epoch (PartitionReassignmentRevert, D14)
    log.batch(change(0, leader=1, replicas=[1, 2], addingReplicas=[], removingReplicas=[]))
    log.batch(change(0, replicas=[3, 1, 2], addingReplicas=[3], removingReplicas=[2]))
    log.batch(
        change(0, isr=[1, 3], leader=1, replicas=[3, 1], addingReplicas=[], removingReplicas=[])
    )
    events = log.done()
    started, cancelled, again, completing = events[-4:]
    assert (started["type"], started["replicas"]) == ("partition_reassignment", [3, 1])
    assert (cancelled["type"], cancelled["replicas"]) == ("partition_reassignment", None)
    assert again["replicas"] == [3, 1]
    # the request's ISR: the record's, then the members the completion removed
    assert (completing["type"], completing["isr"]) == ("isr_change", [1, 3, 2])
    replays_exactly(events, tmp_path)


def test_a_deletion_observes_the_topic_gone(tmp_path: Path) -> None:
    """§12: one RemoveTopicRecord, whoever is down."""
    log = cluster_with_topic([[1, 2]])
    log.batch(change(0, isr=[1]), fence(2, 2))
    log.batch(("REMOVE_TOPIC_RECORD", {"topicId": TOPIC_ID}))
    events = log.done()
    assert events[-1]["type"] == "topic_deletion"
    assert events[-1]["observed"] == {"partitions": []}
    assert not by_type(events, "stop_replica_response")
    replays_exactly(events, tmp_path)


def test_end_batch_gives_a_batch_at_once_stamped_with_its_append_time() -> None:
    """For a reader at the high watermark (the shadow): no next record needed."""
    model = KraftLogModel("c")
    for offset, (kind, data) in enumerate([register(1, 0), unfence(1, 0)]):
        model.feed(Record(Path("0.log"), 7, offset, 3, 1_700_000_000_123, kind, 0, data, False))
    events = model.end_batch()
    assert [e["type"] for e in events] == ["broker_registration", "broker_unfence"]
    assert {e["ts"] for e in events} == {"2023-11-14T22:13:20.123"}
    assert [e["event_id"] for e in events] == ["c:kraft:0:0", "c:kraft:0:1"]
    assert model.end_batch() == [] and model.finish() == []


def test_an_unclean_restart_owns_the_repeats_of_its_elr_walk(tmp_path: Path) -> None:
    """§6.1, §2.3, §23.2: a ClearElrRecord leaves broker 3 listed in the controller's
    broker -> ELR index for partitions whose ELR it cleared; 3 rejoins their ISR and
    leaves it again (an ELR again), then restarts after a kill -9. The unclean path's ELR
    walk visits each partition once per index entry: the same record twice, both before
    the RegisterBrokerRecord. Both are the registration's, which observes the state the
    second left (partition epoch +2), and nothing is left unexplained. A seeded soak's
    records, RF 2 and min.insync.replicas 2."""
    log = cluster_with_topic([[3, 1], [1, 3]])
    log.batch(
        change(0, leader=1, isr=[1], eligibleLeaderReplicas=[3]),
        change(1, isr=[1], eligibleLeaderReplicas=[3]),
        fence(3, 3),
    )
    log.batch(config(2, "t", "min.insync.replicas", "1"), ("CLEAR_ELR_RECORD", {"topicName": "t"}))
    log.batch(register(3, 40))
    log.batch(unfence(3, 40))
    log.batch(change(0, isr=[1, 3]), change(1, isr=[1, 3]))
    log.batch(config(2, "t", "min.insync.replicas", "2"), ("CLEAR_ELR_RECORD", {"topicName": "t"}))
    log.batch(
        change(0, isr=[1], eligibleLeaderReplicas=[3]),
        change(1, isr=[1], eligibleLeaderReplicas=[3]),
        fence(3, 40),
    )
    walk = [change(p, eligibleLeaderReplicas=[]) for p in (0, 1, 0, 1)]
    log.batch(*walk, register(3, 60))
    log.batch(unfence(3, 60))
    events = log.done()
    registration = by_type(events, "broker_registration")[-1]
    assert registration["broker_epoch"] == 60 and "previous_broker_epoch" not in registration
    rows = registration["observed"]["partitions"]
    assert [(r["partition"], r["elr"], r["partition_epoch"]) for r in rows] == [
        (0, [], 6),
        (1, [], 6),
    ]
    assert log.model.counts.unexplained == 0 and log.model.unexplained_notes == []
    replays_exactly(events, tmp_path, "min.insync.replicas=2")


def test_a_change_no_event_explains_is_described() -> None:
    """§23.2: a change no cause can own (here a leader epoch bump and nothing else) is
    counted and described (offset, partition, record, what it changed) for the reader to
    say: the shadow's log keeps what the metadata log may have deleted since."""
    log = cluster_with_topic([[1, 2]])
    log.batch(change(0, leader=1))
    log.done()
    assert log.model.counts.unexplained == 1
    (note,) = log.model.unexplained_notes
    assert note.startswith(f"offset {log.offset - 1}: PartitionChangeRecord of t-0 {{'leader': 1}}")
    assert "leader 1 -> 1" in note and "partition epoch 0 -> 1" in note
