"""Brokers lost or started together: one BrokerChange (SPEC §8.1, §8.2, §8.3, §9.1).

A zone outage takes a third of a 9-broker cluster (racks a, b, c: brokers 1-3, 4-6, 7-9)
at once. Kafka's BrokerChange reads every registration that vanished and runs ONE
onBrokerFailure for all of them: one offline election over all their partitions, with the
dead brokers already out of the live set. One event per broker runs three, and an
election in the first may pick a leader the second takes away.
"""

from __future__ import annotations

from tests.support.scenario import Cluster, Output, entries, lai

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"
ZONE_A = [1, 2, 3]


def nine_brokers() -> Cluster:
    """`orders`: rack-aware (Kafka's placement), one replica per rack. `legacy`: an
    explicit assignment with two replicas in zone a (what a topic created before the racks
    were set, or moved by hand, looks like), led by 1."""
    c = Cluster()
    for broker in range(1, 10):
        c.send({"type": "broker_startup", "broker": broker, "rack": "abc"[(broker - 1) // 3]})
    c.send({"type": "topic_creation", "topic": "orders", "partitions": 3, "replication_factor": 3})
    c.create("legacy", {0: [1, 2, 4]})
    assert [c.partition("orders", p)["replicas"] for p in range(3)] == [
        [1, 4, 7],
        [4, 7, 2],
        [7, 2, 5],
    ]
    assert c.state("legacy", 0) == ("OnlinePartition", 1, [1, 2, 4], 0, 0)
    return c


def partitions(request: dict) -> list[tuple[str, int]]:
    return sorted(entries(request))


def test_zone_outage_in_one_broker_change() -> None:
    """§8.1 dead brokers -> §8.3 onBrokerFailure([1, 2, 3]) -> §9.1: the partitions led in
    the zone (orders-0 by 1, legacy-0 by 1) go Offline and are elected once, among the
    brokers still live; then the zone's replicas go OfflineReplica in one batch."""
    c = nine_brokers()
    out = c.send({"type": "broker_failure", "brokers": ZONE_A})
    assert out.rejected == []
    assert [c.broker(b)["status"] for b in ZONE_A] == ["dead"] * 3
    # one election each: legacy-0 skips broker 2 (dead too) and goes straight to 4
    assert c.state("legacy", 0) == ("OnlinePartition", 4, [4], 1, 1)
    assert c.state("orders", 0) == ("OnlinePartition", 4, [4, 7], 1, 1)
    # followers lost in the zone: the ISR shrink of §9.1 step 5, one epoch each
    assert c.state("orders", 1) == ("OnlinePartition", 4, [4, 7], 1, 1)
    assert c.state("orders", 2) == ("OnlinePartition", 7, [7, 5], 1, 1)
    assert c.replicas("legacy", 0) == {1: "OfflineReplica", 2: "OfflineReplica", 4: "OnlineReplica"}
    live = [4, 5, 6, 7, 8, 9]
    assert out.sent() == [
        # step 4: one election pass over both offline partitions
        (LAI, 4, True),
        (LAI, 7, True),
        *[(UM, b, True) for b in live],
        # step 5: OfflineReplica for every zone replica, one batch (brokers 1, 2 in it:
        # RS minus the removed replica still names the other dead one; dropped at send)
        (LAI, 1, False),
        (LAI, 2, False),
        (LAI, 4, True),
        (LAI, 5, True),
        (LAI, 7, True),
        *[(UM, b, True) for b in live],
        (SR, 1, False),
        (SR, 2, False),
    ]
    election_to_4, shrink_to_4 = out.of(LAI, 4)
    assert partitions(election_to_4) == [("legacy", 0), ("orders", 0)]
    assert lai(entries(election_to_4)[("legacy", 0)]) == (4, 1, [4], 1)
    assert partitions(out.of(LAI, 7)[0]) == [("orders", 0)]
    assert partitions(shrink_to_4) == [("legacy", 0), ("orders", 0), ("orders", 1)]
    assert lai(entries(shrink_to_4)[("orders", 1)]) == (4, 1, [4, 7], 1)
    # legacy-0 is sent again at the same epoch (no ISR write: 1 and 2 already left it)
    assert lai(entries(shrink_to_4)[("legacy", 0)]) == (4, 1, [4], 1)
    assert partitions(out.of(LAI, 5)[0]) == [("orders", 2)]
    assert partitions(out.of(SR, 2)[0]) == [("legacy", 0), ("orders", 1), ("orders", 2)]
    # broker 3 hosts nothing; no broker-only UpdateMetadata (step 7: replicas went offline)
    assert all(r["partitions"] for r in out.of(UM))
    assert all(r["live_brokers"] == live for r in out.of(UM))


def test_zone_outage_one_broker_at_a_time() -> None:
    """The same outage as three BrokerChanges. legacy-0 is elected twice: broker 1's
    failure hands it to 2 (still live then, first in RS order in the ISR), broker 2's
    failure to 4: leader epoch 2, where one change gives 1. The rack-aware partitions
    lose one replica each, so their epochs agree with the one-change outcome; only the
    number and grouping of requests differ."""
    c = nine_brokers()
    first = c.fail(1)
    assert c.state("legacy", 0) == ("OnlinePartition", 2, [2, 4], 1, 1)
    assert first.sent() == [
        (LAI, 2, True),
        (LAI, 4, True),
        (LAI, 7, True),
        *[(UM, b, True) for b in range(2, 10)],
        (LAI, 2, True),
        (LAI, 4, True),
        (LAI, 7, True),
        *[(UM, b, True) for b in range(2, 10)],
        (SR, 1, False),
    ]
    assert lai(entries(first.of(LAI, 2)[0])[("legacy", 0)]) == (2, 1, [2, 4], 1)
    second = c.fail(2)
    assert second.sent() == [
        (LAI, 4, True),
        *[(UM, b, True) for b in range(3, 10)],
        (LAI, 1, False),
        (LAI, 4, True),
        (LAI, 5, True),
        (LAI, 7, True),
        *[(UM, b, True) for b in range(3, 10)],
        (SR, 2, False),
    ]
    assert lai(entries(second.of(LAI, 4)[0])[("legacy", 0)]) == (4, 2, [4], 2)
    third = c.fail(3)  # no replicas: §9.1 step 7, the live-broker list alone
    assert third.sent() == [(UM, b, True) for b in range(4, 10)]
    assert all(r["partitions"] == [] for r in third.requests)

    assert c.state("legacy", 0) == ("OnlinePartition", 4, [4], 2, 2)
    assert c.state("orders", 0) == ("OnlinePartition", 4, [4, 7], 1, 1)
    assert c.state("orders", 1) == ("OnlinePartition", 4, [4, 7], 1, 1)
    assert c.state("orders", 2) == ("OnlinePartition", 7, [7, 5], 1, 1)
    requests = len(first.requests) + len(second.requests) + len(third.requests)
    together = nine_brokers().send({"type": "broker_failure", "brokers": ZONE_A})
    assert (requests, len(together.requests)) == (49, 21)


def test_zone_comes_back_in_one_broker_change() -> None:
    """§8.1 new brokers -> one onBrokerStartup([1, 2, 3]) (§8.2): UpdateMetadata without
    partitions to the brokers already there, every partition with a leader to the new
    ones, then OnlineReplica for all their replicas in one batch (the current state,
    isNew=false; no election, no ISR change). `rack` applies to each; broker epochs
    follow the order the brokers are listed in."""
    c = nine_brokers()
    c.send({"type": "broker_failure", "brokers": ZONE_A})
    out = c.send({"type": "broker_startup", "brokers": [3, 1, 2], "rack": "a"})
    everyone = list(range(1, 10))
    assert out.sent() == [
        *[(UM, b, True) for b in range(4, 10)],
        *[(UM, b, True) for b in ZONE_A],
        (LAI, 1, True),
        (LAI, 2, True),
        *[(UM, b, True) for b in everyone],
    ]
    assert all(r["partitions"] == [] for r in out.of(UM)[:6])
    assert partitions(out.of(UM, 1)[0]) == [
        ("legacy", 0),
        ("orders", 0),
        ("orders", 1),
        ("orders", 2),
    ]
    to_2 = entries(out.of(LAI, 2)[0])
    assert sorted(to_2) == [("legacy", 0), ("orders", 1), ("orders", 2)]
    assert {tp: (lai(e), e["is_new"]) for tp, e in to_2.items()} == {
        ("legacy", 0): ((4, 1, [4], 1), False),
        ("orders", 1): ((4, 1, [4, 7], 1), False),
        ("orders", 2): ((7, 1, [7, 5], 1), False),
    }
    assert [(c.broker(b)["broker_epoch"], c.broker(b)["rack"]) for b in (3, 1, 2)] == [
        (10, "a"),
        (11, "a"),
        (12, "a"),
    ]
    assert c.state("legacy", 0) == ("OnlinePartition", 4, [4], 1, 1)
    assert c.replicas("legacy", 0) == {1: "OnlineReplica", 2: "OnlineReplica", 4: "OnlineReplica"}


def test_new_and_bounced_brokers_in_one_change() -> None:
    """§8.1 processing order: new brokers first (one onBrokerStartup), then the bounced
    ones (still registered, a newer registration): onBrokerFailure of them, then
    onBrokerStartup with their new epochs."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2], 1: [3, 4]})
    out: Output = c.send({"type": "broker_startup", "brokers": [4, 2]})
    assert out.sent() == [
        # new: 4
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
        (UM, 4, True),
        (LAI, 4, True),
        *[(UM, b, True) for b in (1, 2, 3, 4)],
        # bounced: 2 fails (t-0's ISR shrinks to [1])...
        (LAI, 1, True),
        (UM, 1, True),
        (UM, 3, True),
        (UM, 4, True),
        (SR, 2, False),
        # ...and starts again
        (UM, 1, True),
        (UM, 3, True),
        (UM, 4, True),
        (UM, 2, True),
        (LAI, 2, True),
        *[(UM, b, True) for b in (1, 2, 3, 4)],
    ]
    assert lai(entries(out.of(LAI, 2)[0])[("t", 0)]) == (1, 1, [1], 1)
    assert [c.broker(b)["broker_epoch"] for b in (1, 2, 3, 4)] == [1, 5, 3, 4]
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 1, 1)
    assert [(s["broker"], s["from_state"], s["to_state"]) for s in out.changes("replica")] == [
        (4, "OnlineReplica", "OnlineReplica"),
        (2, "OnlineReplica", "OfflineReplica"),
        (2, "OfflineReplica", "OnlineReplica"),
    ]


def test_lost_brokers_already_dead_change_nothing() -> None:
    """A BrokerChange only sees registrations that vanished: brokers already dead are not
    in it; with none left, nothing happens (ZooKeeper shows no change)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    c.fail(1)
    out = c.send({"type": "broker_failure", "brokers": [1, 2]})
    assert c.state("t", 0) == ("OnlinePartition", 3, [3], 2, 2)
    assert partitions(out.of(LAI, 3)[0]) == [("t", 0)]
    out = c.send({"type": "broker_failure", "brokers": [1, 2]})
    assert out.requests == [] and out.state_changes == [] and out.rejected == []


def test_partition_led_by_the_first_of_two_lost_brokers() -> None:
    """The brief's example: [1, 2, 3] led by 1, brokers 1 and 2 lost together -> leader 3
    at leader_epoch + 1 (one election); one after the other -> 2, then 3, at + 2."""
    together = Cluster(brokers=[1, 2, 3])
    together.create("t", {0: [1, 2, 3]})
    together.send({"type": "broker_failure", "brokers": [2, 1]})
    assert together.state("t", 0) == ("OnlinePartition", 3, [3], 1, 1)
    apart = Cluster(brokers=[1, 2, 3])
    apart.create("t", {0: [1, 2, 3]})
    apart.fail(1)
    assert apart.state("t", 0) == ("OnlinePartition", 2, [2, 3], 1, 1)
    apart.fail(2)
    assert apart.state("t", 0) == ("OnlinePartition", 3, [3], 2, 2)
