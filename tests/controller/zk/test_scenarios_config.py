"""Unclean-election config events (SPEC §16, §5.1)."""

from __future__ import annotations

from controller.config import Settings
from tests.support.scenario import Cluster, Output, entries, lai

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"
UNCLEAN = "unclean.leader.election.enable"


def stuck_offline(settings: Settings | None = None) -> Cluster:
    """t-0 RS [1,2]: both died (leader -1, ISR [1]); 2 came back but is not in the ISR."""
    c = Cluster(settings=settings, brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)
    c.fail(1)
    c.start(2)
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 2, 2)
    return c


def config_change(c: Cluster, configs: dict[str, str]) -> Output:
    return c.send({"type": "topic_config_change", "topic": "t", "configs": configs})


def test_turning_unclean_on_elects_offline_partitions() -> None:
    """§16: TopicUncleanLeaderElectionEnable -> triggerOnlinePartitionStateChange(topic) with
    allowUnclean=false, the fresh config deciding: leader 2, ISR [2], RECOVERING, epoch+1."""
    c = stuck_offline()
    out = c.send({"type": "topic_config_change", "topic": "t", "configs": {UNCLEAN: "true"}})
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 3, 3)
    assert c.partition("t", 0)["leader_recovery_state"] == "RECOVERING"
    assert c.topic("t")["configs"] == {UNCLEAN: "true"}
    assert out.sent() == [(LAI, 2, True), (UM, 2, True), (UM, 3, True)]
    entry = entries(out.of(LAI, 2)[0])[("t", 0)]
    assert lai(entry) == (2, 3, [2], 3)
    assert entry["leader_recovery_state"] == "RECOVERING"
    (change,) = out.changes("partition")
    assert change["unclean"] is True


def test_turning_unclean_off_does_nothing() -> None:
    """§16: only a true value enqueues the election event."""
    c = stuck_offline()
    out = c.send({"type": "topic_config_change", "topic": "t", "configs": {UNCLEAN: False}})
    assert out.requests == [] and out.state_changes == []
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 2, 2)


def test_blank_padded_true_is_valid_but_triggers_no_election() -> None:
    """§16: TopicConfigHandler reads the override with Scala's `toBoolean`, which keeps
    blanks, so " TRUE " enqueues no election; the config is valid (Kafka's parser trims
    it) and the next trigger, a broker change, elects uncleanly with it."""
    c = stuck_offline()
    out = config_change(c, {UNCLEAN: " TRUE "})
    assert out.rejected == [] and out.requests == [] and out.state_changes == []
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 2, 2)
    c.start(3)
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 3, 3)
    assert c.partition("t", 0)["leader_recovery_state"] == "RECOVERING"
    # case alone does not matter to toBoolean
    c = stuck_offline()
    config_change(c, {UNCLEAN: "True"})
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 3, 3)


def test_topic_created_with_unclean_on_elects_at_failure() -> None:
    """§5.1: the topic's override decides a clean election's fallback."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]}, configs={UNCLEAN: "true"})
    c.fail(2)
    c.fail(1)
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 2, 2)
    c.start(2)
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 3, 3)


def test_cluster_default_unclean() -> None:
    """§5.1: no override -> the broker default (unclean.leader.election.enable setting)."""
    c = Cluster(settings=Settings(unclean_leader_election_enable=True), brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(2)
    c.fail(1)
    c.start(2)
    assert c.state("t", 0) == ("OnlinePartition", 2, [2], 3, 3)
    assert c.partition("t", 0)["leader_recovery_state"] == "RECOVERING"


def test_override_false_beats_cluster_default() -> None:
    """§5.1: a topic override wins over the broker default."""
    c = Cluster(settings=Settings(unclean_leader_election_enable=True), brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]}, configs={UNCLEAN: "false"})
    c.fail(2)
    c.fail(1)
    c.start(2)
    assert c.state("t", 0) == ("OfflinePartition", -1, [1], 2, 2)


def test_config_change_with_unclean_already_on_triggers_again() -> None:
    """§16 / Kafka's TopicConfigHandler: every change after which the topic's override reads
    true enqueues TopicUncleanLeaderElectionEnable, so New/Offline partitions of the topic are
    tried again (here: none can be elected, the failure is logged again)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]}, configs={UNCLEAN: "true"})
    c.fail(2)
    c.fail(1)
    out = config_change(c, {"retention.ms": "1000"})
    failed = out.changes("partition", ok=False)
    assert [(s["from_state"], s["to_state"]) for s in failed] == [
        ("OfflinePartition", "OnlinePartition")
    ]


def test_invalid_unclean_value_is_rejected() -> None:
    """CONTRACT topic_config_change: a value Kafka refuses is a rejected event."""
    c = stuck_offline()
    out = c.send({"type": "topic_config_change", "topic": "t", "configs": {UNCLEAN: "yes"}})
    assert len(out.rejected) == 1
    assert c.topic("t")["configs"] == {}
