"""AlterPartition from the partition leader (SPEC §13.1, §19.2, §19.16)."""

from __future__ import annotations

import pytest
from scenario import Cluster, entries

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
    """§13.1 rule 1: no cached leadership -> UNKNOWN_TOPIC_OR_PARTITION."""
    c = Cluster(brokers=[1, 2])
    c.fail(1)
    c.create("t", {0: [1]})
    out = c.isr("t", 0, [1])
    assert out.result("t", 0)["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert c.partition("t", 0)["state"] == "NewPartition"


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
