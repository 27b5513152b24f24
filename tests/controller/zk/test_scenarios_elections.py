"""Leader elections on demand: admin-triggered and auto rebalance (SPEC §12, §19.18)."""

from __future__ import annotations

from controller.config import Settings
from controller.model import ReplicaAssignment, TopicPartition
from tests.support.scenario import Cluster, entries, lai

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"
PREFERRED_FAILURE = (
    "Failed to elect leader for partition t-0 under strategy "
    "PreferredReplicaPartitionLeaderElectionStrategy"
)


def not_preferred_cluster() -> Cluster:
    """t-0 RS [1,2] led by 2 with ISR [2,1] (leader epoch 1, partition epoch 2)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(1)
    c.start(1)
    c.isr("t", 0, [2, 1])
    assert c.state("t", 0) == ("OnlinePartition", 2, [2, 1], 1, 2)
    return c


def test_admin_preferred_election() -> None:
    """§12.2 / §5.3: leader -> RS.head, ISR unchanged, epoch+1, version+1; LeaderAndIsr to all
    of RS; the answer carries the new state."""
    c = not_preferred_cluster()
    out = c.elect("preferred", [("t", 0)])
    assert c.state("t", 0) == ("OnlinePartition", 1, [2, 1], 2, 3)
    row = out.result("t", 0)
    assert (row["error"], row["leader"], row["leader_epoch"], row["isr"]) == (None, 1, 2, [2, 1])
    assert row["partition_epoch"] == 3
    assert out.sent() == [
        (LAI, 1, True),
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
    ]
    assert lai(entries(out.of(LAI, 2)[0])[("t", 0)]) == (1, 2, [2, 1], 3)


def test_admin_preferred_election_not_needed() -> None:
    """§12.2: leader == RS.head -> ELECTION_NOT_NEEDED, nothing sent."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    out = c.elect("preferred", [("t", 0)])
    assert out.result("t", 0)["error"] == "ELECTION_NOT_NEEDED"
    assert out.requests == [] and out.state_changes == []


def test_admin_preferred_election_preferred_not_in_isr() -> None:
    """§12.2: the election fails -> PREFERRED_LEADER_NOT_AVAILABLE with the exception's message."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.fail(1)
    c.start(1)  # 1 back, but not in the ISR
    out = c.elect("preferred", [("t", 0)])
    row = out.result("t", 0)
    assert (row["error"], row["message"]) == ("PREFERRED_LEADER_NOT_AVAILABLE", PREFERRED_FAILURE)
    assert out.requests == []
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 1, 1)


def test_admin_election_unknown_and_deleting_partitions() -> None:
    """§12.2: unknown -> UNKNOWN_TOPIC_OR_PARTITION; queued for deletion ->
    INVALID_TOPIC_EXCEPTION."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.create("d", {0: [1, 2]})
    c.fail(2)  # keeps d's deletion from completing
    c.delete("d")
    out = c.elect("preferred", [("t", 5), ("nope", 0), ("d", 0)])
    assert out.result("t", 5)["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert out.result("nope", 0)["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    row = out.result("d", 0)
    assert (row["error"], row["message"]) == (
        "INVALID_TOPIC_EXCEPTION",
        "The topic is being deleted",
    )
    assert out.requests == []


def test_admin_unclean_election_not_needed_when_leader_live() -> None:
    """§12.2: UNCLEAN is electable only when the leader is -1 or not live."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    out = c.elect("unclean", [("t", 0)])
    assert out.result("t", 0)["error"] == "ELECTION_NOT_NEEDED"


def test_admin_unclean_election_elects_outside_isr() -> None:
    """§12.1 / §5.1: admin UNCLEAN uses allowUnclean=true regardless of config; leader = first
    live replica, ISR [leader], RECOVERING; LeaderAndIsr to live replicas."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)
    c.fail(1)  # leader 1 was the last ISR member: leader -1, ISR [1]
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 2, 2)
    c.start(2)  # not in the ISR: the clean election fails
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 2, 2)
    out = c.elect("unclean", [("t", 0)])
    row = out.result("t", 0)
    assert (row["error"], row["leader"], row["leader_epoch"], row["isr"]) == (None, 2, 3, [2])
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 3, 3)
    assert c.partition("t", 0)["leader_recovery_state"] == "RECOVERING"
    assert out.sent() == [(LAI, 2, True), (UM, 2, True), (UM, 3, True)]
    assert entries(out.of(LAI, 2)[0])[("t", 0)]["leader_recovery_state"] == "RECOVERING"
    (change,) = out.changes("partition")
    assert (change["from_state"], change["to_state"], change["unclean"]) == (
        "OfflinePartition",
        "OnlinePartition",
        True,
    )


def test_admin_unclean_election_with_no_live_replica() -> None:
    """§12.2: StateChangeFailed -> ELIGIBLE_LEADERS_NOT_AVAILABLE."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)
    c.fail(1)
    out = c.elect("unclean", [("t", 0)])
    row = out.result("t", 0)
    assert row["error"] == "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    assert row["message"] == (
        "Failed to elect leader for partition t-0 under strategy "
        "OfflinePartitionLeaderElectionStrategy(true)"
    )
    assert out.requests == []


def test_admin_election_of_all_partitions_omits_not_needed() -> None:
    """§12.2 broker side: partitions = null means all; ELECTION_NOT_NEEDED entries are
    filtered from the response."""
    c = not_preferred_cluster()
    c.create("u", {0: [1, 2]})
    out = c.elect("preferred")
    assert [(r["topic"], r["partition"], r["error"]) for r in out.results] == [("t", 0, None)]


# ---- auto rebalance (§12.3) --------------------------------------------------------------------


def imbalanced(not_preferred: int, total: int) -> Cluster:
    """`total` partitions preferring broker 1; the first `not_preferred` led by 2 with 1 in ISR."""
    c = Cluster(brokers=[1, 2, 3])
    c.fail(1)
    c.create("a", {p: [1, 2] for p in range(not_preferred)})
    c.start(1)
    for p in range(not_preferred):
        c.isr("a", p, [2, 1])
    if total > not_preferred:
        c.create("b", {p: [1, 2] for p in range(total - not_preferred)})
    return c


def test_auto_rebalance_one_of_ten_does_not_trigger() -> None:
    """§12.3: ratio 1/10 = 0.10 is not > 0.10."""
    c = imbalanced(1, 10)
    out = c.send({"type": "auto_rebalance_check"})
    assert out.requests == [] and out.state_changes == []
    assert c.state("a", 0)[1] == 2


def test_auto_rebalance_two_of_ten_triggers_one_batch() -> None:
    """§12.3: 2/10 > 0.10 -> preferred election for the candidates, one PSM batch per broker."""
    c = imbalanced(2, 10)
    out = c.send({"type": "auto_rebalance_check"})
    assert c.state("a", 0) == ("OnlinePartition", 1, [2, 1], 1, 2)
    assert c.state("a", 1) == ("OnlinePartition", 1, [2, 1], 1, 2)
    assert out.sent() == [
        (LAI, 1, True),
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
    ]
    assert set(entries(out.of(LAI, 1)[0])) == {("a", 0), ("a", 1)}
    assert out.results == []


def test_auto_rebalance_one_of_one_triggers() -> None:
    """§12.3: 1 of 1 triggers."""
    c = imbalanced(1, 1)
    c.send({"type": "auto_rebalance_check"})
    assert c.state("a", 0) == ("OnlinePartition", 1, [2, 1], 1, 2)


def test_auto_rebalance_disabled() -> None:
    """§12.3 / §7.2 step 13: auto.leader.rebalance.enable=false -> nothing happens."""
    c = Cluster(settings=Settings(auto_leader_rebalance_enable=False), brokers=[1, 2, 3])
    c.fail(1)
    c.create("a", {0: [1, 2]})
    c.start(1)
    c.isr("a", 0, [2, 1])
    out = c.send({"type": "auto_rebalance_check"})
    assert out.requests == []
    assert c.state("a", 0)[1] == 2


def test_auto_rebalance_leader_minus_one_counts_as_not_preferred() -> None:
    """§19.18: a partition with leader -1 counts as "not preferred" in the ratio (it cannot
    itself be elected: its preferred replica is not in the ISR)."""
    c = Cluster(brokers=[1, 2, 3])
    c.fail(1)
    c.create("a", {0: [1, 3], 1: [1, 2]})  # a-0 led by 3, a-1 led by 2
    c.start(1)
    c.isr("a", 1, [2, 1])
    c.create("b", {p: [1, 2] for p in range(8)})
    c.fail(3)  # a-0: leader -1, ISR [3]
    assert c.state("a", 0) == ("OfflinePartition", -1, [3], 1, 1)
    out = c.send({"type": "auto_rebalance_check"})
    # 2 of 10 not preferred -> a-1 (the only candidate) is elected
    assert c.state("a", 1) == ("OnlinePartition", 1, [2, 1], 1, 2)
    assert c.state("a", 0) == ("OfflinePartition", -1, [3], 1, 1)
    assert {(p["topic"], p["partition"]) for p in out.of(LAI, 1)[0]["partitions"]} == {("a", 1)}


def test_auto_rebalance_skips_candidates_whose_preferred_is_not_in_isr() -> None:
    """§12.3: candidates need B replicaOnline and in the cached ISR; failures only logged."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(1)
    c.start(1)  # 1 is not in the ISR
    out = c.send({"type": "auto_rebalance_check"})
    assert out.requests == [] and out.results == []


def test_admin_election_of_all_partitions_leaves_out_deleting_topics() -> None:
    """§12.2 broker side / §3.4: "all partitions" are those in the broker's metadata cache;
    the UpdateMetadata with leader -2 sent when deletion starts removed the deleting topic's
    partitions from it, so they get no answer at all (not INVALID_TOPIC_EXCEPTION)."""
    c = not_preferred_cluster()
    c.create("d", {0: [1, 3]})
    c.fail(3)  # keeps d's deletion from completing
    c.delete("d")
    out = c.elect("preferred")
    assert [(r["topic"], r["partition"], r["error"]) for r in out.results] == [("t", 0, None)]


def test_auto_rebalance_denominator_counts_partitions_without_leadership() -> None:
    """§12.3 / §19.18: `total` includes partitions without leadership info. Such a partition
    with a live preferred replica cannot arise from events (it would be initialized), so it
    is planted in the context: 1 not preferred of 9 + 1 leaderless = 1/10, no election."""
    c = imbalanced(1, 9)
    c.context.add_topic("c", {})
    c.context.add_partition(TopicPartition("c", 0), ReplicaAssignment((1, 2)))
    out = c.send({"type": "auto_rebalance_check"})
    assert out.requests == []
    assert c.state("a", 0)[1] == 2
    # without it: 1/9 > 0.10
    control = imbalanced(1, 9)
    control.send({"type": "auto_rebalance_check"})
    assert control.state("a", 0)[1] == 1
