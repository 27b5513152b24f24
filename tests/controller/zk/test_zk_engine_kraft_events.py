"""The ZooKeeper engine on the KRaft controller's own event types (CONTRACT §5): the
nearest thing a ZooKeeper-mode controller does, or nothing, each with an `event_results`
row saying which, and never a rejection for being the other controller's event."""

from __future__ import annotations

from controller.config import Settings
from tests.support.scenario import Cluster


def note(out) -> str:  # type: ignore[no-untyped-def]
    row = out.result()
    assert (row["topic"], row["partition"], row["error"]) == (None, None, None)
    return str(row["message"])


def test_broker_registration_is_broker_startup() -> None:
    """SPEC §8.2: the broker registers live and its offline partitions are elected."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.fail(1)
    c.fail(2)
    assert c.partition("t", 0)["leader"] == -1
    out = c.send({"type": "broker_registration", "broker": 2, "rack": "r2", "broker_epoch": 99})
    assert not out.rejected
    assert "applied as broker_startup" in note(out)
    assert c.partition("t", 0)["leader"] == 2
    broker = c.broker(2)
    assert (broker["status"], broker["rack"]) == ("live", "r2")
    assert broker["broker_epoch"] != 99  # a ZooKeeper broker epoch is its znode's czxid
    assert out.sent("LeaderAndIsr")  # the ZooKeeper controller's requests went out


def test_broker_unfence_feature_update_and_unclean_check_do_nothing() -> None:
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    before = c.partition("t", 0)
    for event in (
        {"type": "broker_unfence", "broker": 1},
        {"type": "broker_unfence", "broker": 42},  # never seen: still nothing, not rejected
        {"type": "unclean_election_check"},
        {"type": "feature_update", "features": {"eligible.leader.replicas.version": 0}},
    ):
        out = c.send(event)
        assert not out.rejected and not out.requests and not out.state_changes
        assert note(out).startswith("ZooKeeper engine: nothing to do")
    assert c.partition("t", 0) == before


def test_broker_unregistration_fails_a_live_broker_only() -> None:
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    out = c.send({"type": "broker_unregistration", "broker": 1})
    assert "applied as broker_failure" in note(out)
    assert c.broker(1)["status"] == "dead"
    assert (c.partition("t", 0)["leader"], c.partition("t", 0)["isr"]) == (2, [2])
    out = c.send({"type": "broker_unregistration", "broker": 1})  # dead now
    assert note(out) == "ZooKeeper engine: nothing to do (broker 1 is not registered)"
    assert not out.requests and not out.state_changes


def test_cluster_min_insync_replicas_counts_in_health() -> None:
    """health.at_min_isr reads the topic's min.insync.replicas, else the cluster's: the
    dynamic default once set, else the `min.insync.replicas` setting."""
    c = Cluster(Settings(min_insync_replicas=2), brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    c.isr("t", 0, [1, 2])
    assert c.health()["at_min_isr"] == 1  # 2 <= 2
    out = c.send({"type": "cluster_config_change", "configs": {"min.insync.replicas": "1"}})
    assert "cluster default set (min.insync.replicas=1)" in note(out)
    assert c.health()["at_min_isr"] == 0
    c.restart()  # the dynamic default is stored (the clusters table)
    assert c.context.cluster_configs == {"min.insync.replicas": "1"}
    c.isr("t", 0, [1])
    assert c.health()["at_min_isr"] == 1


def test_cluster_unclean_enable_elects_offline_partitions_at_once() -> None:
    """ZooKeeper mode: the default unclean.leader.election.enable turned on dynamically
    makes the controller elect every offline partition (UncleanLeaderElectionEnable),
    where KRaft waits for an unfence or its periodic task (SPEC-KRAFT §24 D11)."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    c.isr("t", 0, [1])
    c.fail(1)
    assert c.partition("t", 0)["leader"] == -1
    out = c.send(
        {"type": "cluster_config_change", "configs": {"unclean.leader.election.enable": True}}
    )
    assert "every offline partition elected again" in note(out)
    row = c.partition("t", 0)
    assert (row["leader"], row["isr"]) == (2, [2])
    assert [s["unclean"] for s in out.changes("partition", ok=True)] == [True]
    # already on: setting it again elects nothing
    again = c.send(
        {"type": "cluster_config_change", "configs": {"unclean.leader.election.enable": True}}
    )
    assert not again.state_changes


def test_a_brokers_own_config_changes_nothing() -> None:
    c = Cluster(brokers=[1])
    out = c.send(
        {"type": "cluster_config_change", "broker": 1, "configs": {"min.insync.replicas": "2"}}
    )
    assert "a config of broker 1 alone" in note(out)
    assert c.context.cluster_configs == {}


def test_isr_change_kraft_fields_are_accepted_by_zk() -> None:
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    out = c.isr("t", 0, [1], leader=1, broker_epochs={"1": 0}, leader_recovery_state="RECOVERED")
    assert not out.rejected
    assert c.partition("t", 0)["isr"] == [1]
