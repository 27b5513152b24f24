"""AlterPartition from the partition leader (SPEC §13.1, §19.2, §19.16)."""

from __future__ import annotations

import pytest

from controller.config import Settings
from controller.model import LeaderAndIsr, ReplicaAssignment, TopicPartition
from controller.zk.alter_partition import AlterPartitionRequest, PartitionChange, alter_partition
from controller.zk.context import ControllerContext
from controller.zk.journal import Journal
from controller.zk.parts import ControllerParts
from tests.support.scenario import Cluster, entries

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"
UM_ALL = [(UM, 1, True), (UM, 2, True), (UM, 3, True)]


def shrunk_cluster() -> Cluster:
    """t-0 RS [1,2,3], leader 1, ISR [1] (followers bounced), leader epoch 2, version 2."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    c.fail(2)
    c.fail(3)
    c.start(2)
    c.start(3)
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 2, 2)
    return c


def test_accepted_expansion_keeps_leader_epoch() -> None:
    """§13.1 / §19.2: accepted -> partition epoch +1, leader epoch unchanged, controller epoch
    current; UpdateMetadata to all registered brokers; no LeaderAndIsr."""
    c = shrunk_cluster()
    out = c.isr("t", 0, [1, 3, 2])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 3, 2], 2, 3)
    assert c.partition("t", 0)["controller_epoch"] == 1
    row = out.result("t", 0)
    assert (row["error"], row["leader"], row["leader_epoch"], row["isr"]) == (None, 1, 2, [1, 3, 2])
    assert row["partition_epoch"] == 3
    assert out.sent() == UM_ALL
    um = entries(out.of(UM, 2)[0])[("t", 0)]
    assert (um["isr"], um["partition_epoch"], um["offline_replicas"]) == ([1, 3, 2], 3, [])
    assert out.state_changes == []


def test_accepted_shrink_keeps_leader_epoch() -> None:
    """§19.2: AlterPartition never bumps the leader epoch, shrink included."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    c.isr("t", 0, [1])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 0, 1)


def test_stale_partition_epoch_with_identical_content_succeeds() -> None:
    """§19.16 / §13.1 rule 4: idempotent retry -> success without a write, current state."""
    c = shrunk_cluster()
    c.isr("t", 0, [1, 2])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 2, 3)
    out = c.isr("t", 0, [1, 2], partition_epoch=2)
    row = out.result("t", 0)
    assert (row["error"], row["isr"], row["partition_epoch"]) == (None, [1, 2], 3)
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 2, 3)
    assert out.sent() == UM_ALL


def test_stale_partition_epoch_with_new_content_is_invalid_update_version() -> None:
    """§13.1 rule 5; every partition of the request is still re-announced."""
    c = shrunk_cluster()
    c.isr("t", 0, [1, 2])
    out = c.isr("t", 0, [1, 2, 3], partition_epoch=2)
    assert out.result("t", 0)["error"] == "INVALID_UPDATE_VERSION"
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 2, 3)
    assert out.sent() == UM_ALL


@pytest.mark.parametrize(
    ("epochs", "error"),
    [
        ({"leader_epoch": 3}, "NOT_CONTROLLER"),
        ({"partition_epoch": 3}, "NOT_CONTROLLER"),
        ({"leader_epoch": 1}, "FENCED_LEADER_EPOCH"),
        # the leader-epoch check comes first: NOT_CONTROLLER beats a stale partition epoch
        ({"leader_epoch": 3, "partition_epoch": 0}, "NOT_CONTROLLER"),
        # a fenced leader epoch beats idempotency
        ({"leader_epoch": 1, "partition_epoch": 2}, "FENCED_LEADER_EPOCH"),
    ],
)
def test_epoch_checks(epochs: dict[str, int], error: str) -> None:
    """§13.1 rules 2 and 3, in order."""
    c = shrunk_cluster()
    out = c.isr("t", 0, [1, 2], **epochs)
    assert out.result("t", 0)["error"] == error
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 2, 2)
    assert out.sent() == UM_ALL


def test_dead_isr_member_is_ineligible() -> None:
    """§13.1 rule 8 (KIP-841): an ISR member that is not live -> INELIGIBLE_REPLICA."""
    c = shrunk_cluster()
    c.fail(3)
    out = c.isr("t", 0, [1, 2, 3])
    row = out.result("t", 0)
    assert row["error"] == "INELIGIBLE_REPLICA"
    assert row["leader"] is None
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 2, 2)
    assert out.sent() == [(UM, 1, True), (UM, 2, True)]


def test_partition_without_leadership_is_unknown() -> None:
    """§13.1 rule 1: no cached leadership -> UNKNOWN_TOPIC_OR_PARTITION; the UpdateMetadata
    to every registered broker still goes out, with the partition skipped."""
    c = Cluster(brokers=[1, 2])
    c.fail(1)
    c.create("t", {0: [1]})
    out = c.isr("t", 0, [1])
    assert out.result("t", 0)["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert c.partition("t", 0)["state"] == "NewPartition"
    assert out.sent() == [(UM, 2, True)]
    assert (out.requests[0]["partitions"], out.requests[0]["live_brokers"]) == ([], [2])


@pytest.mark.parametrize(
    ("topic", "partition"),
    [
        ("t", 5),  # the topic exists, the partition does not
        ("nope", 0),  # no such topic (a request by topic name: the same rule 1)
    ],
)
def test_unknown_partition_still_sends_broker_only_update_metadata(
    topic: str, partition: int
) -> None:
    """§13.1: rule 1 answers UNKNOWN_TOPIC_OR_PARTITION, and after the (empty) ZK update
    Kafka sends UpdateMetadata to all registered brokers for the request's partitions minus
    the unknown ones: here none, so it carries only the live-broker list. A shutting-down
    broker is registered, so it is a recipient and in the list."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.shutdown(3)
    before = c.partition("t", 0)
    out = c.isr(topic, partition, [1])
    row = out.result(topic, partition)
    assert (row["error"], row["message"]) == (
        "UNKNOWN_TOPIC_OR_PARTITION",
        "The partition does not exist.",
    )
    assert (row["leader"], row["isr"], row["partition_epoch"]) == (None, None, None)
    assert out.sent() == UM_ALL
    for request in out.requests:
        assert request["controller_epoch"] == 1
        assert request["partitions"] == []
        assert request["live_brokers"] == [1, 2, 3]
    assert out.state_changes == []
    assert c.partition("t", 0) == before
    assert c.partition(topic, partition) is None


def test_alter_partition_with_no_registered_sender_sends_nothing() -> None:
    """§13.1 top level: a request whose sender has no registration is answered
    STALE_BROKER_EPOCH for every partition before anything else: no write and no
    UpdateMetadata (Kafka returns before its ZK update and sendUpdateMetadataRequest).
    kcsim's isr_change comes from the current leader; a partition whose leader is -1 (or
    dead) has none registered, and with no broker registered neither has an unknown one."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1]})
    c.fail(1)  # the last ISR member: leader -1, ISR [1], leader epoch 1
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 1, 1)
    out = c.isr("t", 0, [1])
    row = out.result("t", 0)
    assert (row["error"], row["message"]) == ("STALE_BROKER_EPOCH", "broker -1 is not registered")
    assert out.requests == [] and out.state_changes == []
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 1, 1)

    c.fail(2)  # nobody is registered
    out = c.isr("t", 7, [2])
    assert out.result("t", 7)["error"] == "STALE_BROKER_EPOCH"
    assert out.requests == []


@pytest.mark.parametrize(
    ("sender", "broker_epoch"),
    [(1, 10), (1, 12), (3, 13)],  # older, newer than registered (11); not registered
)
def test_stale_broker_epoch_sends_nothing(sender: int, broker_epoch: int) -> None:
    """§13.1 top level (KafkaController.tryProcessAlterPartition): a broker epoch other than
    the registered one, or a sender without a registration -> STALE_BROKER_EPOCH for every
    partition of the request, known or not; nothing written, no UpdateMetadata."""
    context = ControllerContext("c")
    context.register_broker(1, None, 11)
    context.register_broker(2, None, 12)
    context.add_topic("t", {})
    record = context.add_partition(TopicPartition("t", 0), ReplicaAssignment((1, 2)))
    current = LeaderAndIsr(1, 0, (1, 2), 0, controller_epoch=1)
    context.set_leadership(record, current)
    journal = Journal("c")
    journal.begin("e1", 1, None)
    parts = ControllerParts.wire(context, journal, Settings())
    changes = (
        PartitionChange(TopicPartition("t", 0), 0, (1,), 0),
        PartitionChange(TopicPartition("t", 9), 0, (1,), 0),
    )
    results = alter_partition(parts, AlterPartitionRequest(sender, broker_epoch, changes))
    assert {tp: r.error for tp, r in results.items()} == {
        TopicPartition("t", 0): "STALE_BROKER_EPOCH",
        TopicPartition("t", 9): "STALE_BROKER_EPOCH",
    }
    assert journal.requests == []
    assert context.leadership(TopicPartition("t", 0)) == current


def test_recovering_leader_may_recover_through_alter_partition() -> None:
    """§13.1: the requested recovery state is written; RECOVERING with |ISR| = 1 ... the
    request from kcsim's isr_change event carries RECOVERED, so the leader becomes
    RECOVERED (leader moves RECOVERING -> RECOVERED)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)
    c.fail(1)
    c.start(2)
    c.elect("unclean", [("t", 0)])
    assert c.partition("t", 0)["leader_recovery_state"] == "RECOVERING"
    c.start(1)
    out = c.isr("t", 0, [2, 1])
    assert out.result("t", 0)["error"] is None
    assert c.state("t", 0) == ("OnlinePartition", 2, [2, 1], 3, 4)
    assert c.partition("t", 0)["leader_recovery_state"] == "RECOVERED"
