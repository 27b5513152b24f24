"""`violations` and `health` (CONTRACT §2): each invariant broken by an `observed` state and
by an imported partition `state` (kcsim's own state then breaks it), the checks of kcsim's
own state on the partitions an event touched, deliveries to dead brokers, and the health
figures on small crafted clusters (SPEC §4.3 first leaders, §6.3 ISR removal, §12.3 the
rebalance ratio), across a restart and a failover.
"""

from __future__ import annotations

import json
from typing import Any

from controller import invariants
from controller.config import Settings
from controller.health import HealthTracker
from controller.model import (
    BrokerStatus,
    LeaderAndIsr,
    PartitionState,
    ReplicaAssignment,
    TopicPartition,
)
from controller.simulator import BatchOutput, RawEvent, Simulator
from controller.zk.context import ControllerContext
from controller.zk.journal import Journal
from tests.support.health_recount import STATE_COLUMNS, recount

Row = dict[str, Any]
BROKERS = [{"type": "broker_startup", "broker": b} for b in (1, 2, 3)]


class Cluster:
    """One cluster fed one event at a time."""

    def __init__(self, settings: Settings | None = None, events: list[Row] = BROKERS) -> None:
        self.simulator = Simulator(settings or Settings())
        self.lines = 0
        self.appended: dict[str, list[Row]] = {}
        for event in events:
            self.send(event)

    def send(self, event: Row, observed: list[Row] | None = None) -> BatchOutput:
        self.lines += 1
        if observed is not None:
            event = {**event, "observed": {"partitions": observed}}
        output = self.simulator.apply([RawEvent(json.dumps(event), f"test:{self.lines}")])
        assert output.appends["rejected_events"] == [], output.appends["rejected_events"]
        for name, rows in output.appends.items():
            self.appended.setdefault(name, []).extend(rows)
        return output

    def violations(self, event: Row, observed: list[Row] | None = None) -> list[Row]:
        return [brief(r) for r in self.send(event, observed).appends["violations"]]

    def health(self, event: Row) -> Row:
        (row,) = self.send(event).appends["health"]
        return row


def brief(row: Row) -> Row:
    return {k: row[k] for k in ("source", "invariant", "topic", "partition", "broker")}


def seen(topic: str, partition: int, leader: int, epoch: int, isr: list[int], **more: Any) -> Row:
    return {
        "topic": topic,
        "partition": partition,
        "leader": leader,
        "leader_epoch": epoch,
        "isr": isr,
        **more,
    }


def violation(source: str, invariant: str, partition: int = 0, broker: int | None = None) -> Row:
    return {
        "source": source,
        "invariant": invariant,
        "topic": "t",
        "partition": partition,
        "broker": broker,
    }


def observed(invariant: str, partition: int = 0, broker: int | None = None) -> Row:
    return violation(invariants.OBSERVED, invariant, partition, broker)


def simulated(invariant: str, partition: int = 0, broker: int | None = None) -> Row:
    return violation(invariants.SIMULATED, invariant, partition, broker)


STARTUP_4 = {"type": "broker_startup", "broker": 4}
CREATE_T = {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2, 3]}}


# ------------------------------------------------------------------------- observed states


def test_observed_states_breaking_each_invariant() -> None:
    cluster = Cluster()
    cluster.send(CREATE_T)
    # a leader outside its ISR, an ISR member that is not a replica
    assert cluster.violations(
        STARTUP_4, [seen("t", 0, 1, 0, [2, 3]), seen("t", 1, 2, 0, [2, 4], replicas=[1, 2, 3])]
    ) == [
        observed(invariants.LEADER_IN_ISR, 0, broker=1),
        observed(invariants.ISR_IN_REPLICAS, 1, broker=4),
    ]
    # an online partition (it has a leader) with an empty ISR; no replicas: not compared
    assert cluster.violations(
        {"type": "auto_rebalance_check"}, [seen("t", 2, 3, 0, []), seen("t", 3, 3, 0, [3, 9])]
    ) == [
        observed(invariants.LEADER_IN_ISR, 2, broker=3),
        observed(invariants.ONLINE_ISR_NOT_EMPTY, 2),
    ]


def test_observed_epochs_never_go_down_and_one_leader_per_epoch() -> None:
    cluster = Cluster()
    cluster.send(CREATE_T)
    first = seen("t", 0, 1, 5, [1, 2], partition_epoch=7, controller_epoch=3)
    assert cluster.violations({"type": "auto_rebalance_check"}, [first]) == []
    lower = seen("t", 0, 1, 4, [1, 2], partition_epoch=6, controller_epoch=2)
    assert cluster.violations({"type": "auto_rebalance_check"}, [lower]) == [
        observed(invariants.CONTROLLER_EPOCH_NEVER_DECREASES),
        observed(invariants.LEADER_EPOCH_NEVER_DECREASES),
        observed(invariants.PARTITION_EPOCH_NEVER_DECREASES),
    ]
    rows = cluster.send({"type": "auto_rebalance_check"}, [seen("t", 0, 2, 4, [1, 2])])
    (row,) = rows.appends["violations"]
    assert brief(row) == observed(invariants.ONE_LEADER_PER_EPOCH, broker=2)
    assert row["detail"] == "leader_epoch 4 had leader 1, now 2"
    assert row["event_id"] == f"default:{cluster.lines}" and row["seq"] == cluster.lines
    # epochs left out are not compared; a higher epoch with another leader is fine
    assert cluster.violations({"type": "auto_rebalance_check"}, [seen("t", 0, 3, 5, [3])]) == []


def test_a_recreated_topic_starts_over() -> None:
    """Deleted (SPEC §15, brokers answering at once) and created again: epochs from 0."""
    cluster = Cluster(Settings(simulate_brokers=True))
    cluster.send(CREATE_T, [seen("t", 0, 1, 9, [1, 2, 3], partition_epoch=9)])
    cluster.send({"type": "topic_deletion", "topic": "t"})
    assert "t" not in cluster.simulator.context("default").topics
    again = seen("t", 0, 1, 0, [1, 2, 3], partition_epoch=0)
    assert cluster.violations(CREATE_T, [again]) == []


# ------------------------------------------------------------ kcsim's own (imported) state


def test_an_imported_state_breaking_invariants_is_kcsim_state_breaking_them() -> None:
    """Snapshot `state` is cached as it is (README, contract additions): the state
    kcsim then holds breaks the invariants, once, on the event that brought it."""
    cluster = Cluster()
    stored = {"leader_epoch": 3, "partition_epoch": 4, "controller_epoch": 1}
    creation = {
        "type": "topic_creation",
        "topic": "t",
        "assignment": {"0": [1, 2, 3], "1": [1, 2, 3], "2": [2, 3, 1]},
        "state": {
            "0": {"leader": 1, "isr": [2, 3], **stored},  # leader outside its ISR
            "1": {"leader": 2, "isr": [2, 5], **stored},  # 5 is not a replica
            "2": {"leader": 2, "isr": [], **stored},  # online, empty ISR
        },
    }
    assert cluster.violations(creation) == [
        simulated(invariants.LEADER_IN_ISR, 0, broker=1),
        simulated(invariants.ISR_IN_REPLICAS, 1, broker=5),
        simulated(invariants.LEADER_IN_ISR, 2, broker=2),
        simulated(invariants.ONLINE_ISR_NOT_EMPTY, 2),
    ]
    # not touched again: nothing more
    assert cluster.violations({"type": "auto_rebalance_check"}) == []


def test_kcsim_state_checks_epochs_and_leaders_of_touched_partitions() -> None:
    """The tracker on a context changed by hand (no controller code path does this)."""
    context = ControllerContext("c")
    for broker in (1, 2, 3):
        context.register_broker(broker, None, broker)
    context.add_topic("t", {})
    tp = TopicPartition("t", 0)
    record = context.add_partition(tp, ReplicaAssignment((1, 2, 3)))
    context.set_leadership(record, LeaderAndIsr(1, 5, (1, 2, 3), 8, controller_epoch=2))
    context.set_partition_state(record, PartitionState.ONLINE)
    tracker = HealthTracker(context)
    context.clear_dirty()

    def changed(leadership: LeaderAndIsr) -> list[tuple[str, int | None]]:
        context.set_leadership(record, leadership)
        _, found = tracker.update(context)
        return [(v.invariant, v.broker) for v in found]

    assert changed(LeaderAndIsr(2, 5, (1, 2, 3), 9, controller_epoch=2)) == [
        (invariants.ONE_LEADER_PER_EPOCH, 2)
    ]
    assert changed(LeaderAndIsr(2, 4, (1, 2, 3), 8, controller_epoch=1)) == [
        (invariants.LEADER_EPOCH_NEVER_DECREASES, None),
        (invariants.PARTITION_EPOCH_NEVER_DECREASES, None),
        (invariants.CONTROLLER_EPOCH_NEVER_DECREASES, None),
    ]
    # an untouched partition is not looked at, however wrong
    record.leadership = LeaderAndIsr(3, 0, (), 0)
    assert tracker.update(context) == (0, [])


def test_a_request_delivered_to_a_dead_broker() -> None:
    journal = Journal("c")
    journal.begin("c:1", 1, None)
    journal.request(1, "LeaderAndIsr", 2, True, [], None)
    journal.fan_out(1, "UpdateMetadata", [1, 2, 3], {1, 2, 3}.__contains__, [], [1, 2, 3])
    journal.request(1, "StopReplica", 3, False, [], None)  # not delivered: fine
    journal.check_deliveries(frozenset({1}))
    assert [(v.invariant, v.broker, v.detail) for v in journal.violations] == [
        (
            invariants.NO_DELIVERY_TO_DEAD_BROKER,
            2,
            "a LeaderAndIsr request was delivered to broker 2, which is not registered",
        ),
        (
            invariants.NO_DELIVERY_TO_DEAD_BROKER,
            2,
            "a UpdateMetadata request was delivered to broker 2, which is not registered",
        ),
        (
            invariants.NO_DELIVERY_TO_DEAD_BROKER,
            3,
            "a UpdateMetadata request was delivered to broker 3, which is not registered",
        ),
    ]
    journal.violations.clear()
    journal.check_deliveries(frozenset())  # each body is checked once
    assert journal.violations == []


def test_a_broker_failure_sends_nothing_delivered_to_the_dead_broker() -> None:
    """SPEC §8.2: the dead broker's requests are dropped (delivered false), so the check
    finds nothing; the same requests marked delivered would be rows."""
    cluster = Cluster()
    cluster.send(CREATE_T)
    output = cluster.send({"type": "broker_failure", "broker": 2})
    assert output.appends["violations"] == []
    status = cluster.simulator.context("default").brokers[2].status
    assert status is BrokerStatus.DEAD


def test_the_last_isr_member_kafka_keeps_outside_the_replicas_is_no_violation() -> None:
    """SPEC §14.6 then §6.3: [2] reassigned to [0, 1]; 0 joins the ISR, 2 dies (0 leads,
    ISR [0]); the cancellation stops the adding replicas 0 and 1, and Kafka never removes
    a partition's last ISR member, so t stays leaderless with ISR [0] and replicas [2]:
    Kafka's own state, so no violation. The same state observed is none either; an ISR
    of two with a non-replica still is."""
    cluster = Cluster(events=[{"type": "broker_startup", "broker": b} for b in (0, 1, 2)])
    cluster.send({"type": "topic_creation", "topic": "t", "assignment": {"0": [2]}})
    cluster.send(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [0, 1]}
    )
    cluster.send({"type": "isr_change", "topic": "t", "partition": 0, "isr": [2, 0]})
    cluster.send({"type": "broker_failure", "broker": 2})
    cancel = {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": None}
    assert cluster.violations(cancel) == []
    record = cluster.simulator.context("default").partition(TopicPartition("t", 0))
    assert record is not None and record.leadership is not None
    assert (record.leadership.leader, record.leadership.isr) == (-1, (0,))
    assert record.assignment.replicas == (2,)
    check = {"type": "auto_rebalance_check"}
    assert cluster.violations(check, [seen("t", 0, -1, 9, [0], replicas=[2])]) == []
    assert cluster.violations(check, [seen("t", 0, 2, 10, [2, 0], replicas=[2])]) == [
        observed(invariants.ISR_IN_REPLICAS, broker=0)
    ]


# ------------------------------------------------------------------------------- health


def test_health_of_a_small_cluster_event_by_event() -> None:
    cluster = Cluster(Settings(auto_leader_rebalance_enable=False))
    row = cluster.health(
        {
            "type": "topic_creation",
            "topic": "t",
            "assignment": {"0": [1, 2, 3], "1": [2, 3, 1], "2": [1, 3]},
            "configs": {"min.insync.replicas": "2"},
        }
    )
    # §4.3: every partition led by its first replica, ISR = replicas
    assert {c: row[c] for c in STATE_COLUMNS} == {
        "partitions": 3,
        "offline": 0,
        "under_replicated": 0,
        "at_min_isr": 1,  # t-2: ISR [1, 3], 2 <= min.insync.replicas 2
        "not_preferred": 0,
        "max_broker_imbalance": 0.0,
        "live_brokers": 3,
    }
    assert row["leader_changes"] == 3 and row["requests"] > 0
    # §6.3/§8.2: broker 1 fails; t-0 and t-2 get leader 3, 1 leaves every ISR
    row = cluster.health({"type": "broker_failure", "broker": 1})
    assert {c: row[c] for c in STATE_COLUMNS} == {
        "partitions": 3,
        "offline": 0,
        "under_replicated": 3,
        "at_min_isr": 3,
        "not_preferred": 2,
        "max_broker_imbalance": 1.0,  # broker 1: 2 of 2 preferred partitions led by others
        "live_brokers": 2,
    }
    assert row["leader_changes"] == 2 and row["unclean_elections"] == 0
    # the topic's min.insync.replicas down to 1: only t-2 (ISR [3]) is at it
    row = cluster.health(
        {"type": "topic_config_change", "topic": "t", "configs": {"min.insync.replicas": "1"}}
    )
    assert row["at_min_isr"] == 1 and row["leader_changes"] == 0


def test_unclean_elections_count_and_go_on_after_a_restart() -> None:
    cluster = Cluster(Settings(unclean_leader_election_enable=True))
    cluster.send({"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2]}})
    cluster.send({"type": "isr_change", "topic": "t", "partition": 0, "isr": [1]})
    cluster.send({"type": "broker_failure", "broker": 1})  # 2 is elected from outside the ISR
    assert cluster.appended["health"][-1]["unclean_elections"] == 1
    tables = {
        name: list(cluster.simulator.table_rows(name))
        for name in ("partition_state", "replica_state", "brokers", "topics", "clusters")
    }
    tables["applied_events"] = cluster.appended["applied_events"]
    tables["health"] = cluster.appended["health"]
    restarted = Simulator.from_tables(Settings(unclean_leader_election_enable=True), tables)
    event = RawEvent(json.dumps({"type": "broker_startup", "broker": 1}), "test:next")
    (after,) = restarted.apply([event]).appends["health"]
    (live,) = cluster.simulator.apply([event]).appends["health"]
    assert after == live and after["unclean_elections"] == 1


def test_failover_recounts_everything() -> None:
    """A failover replaces the context (SPEC §7.2): the counters are rebuilt from it."""
    cluster = Cluster()
    cluster.send(CREATE_T)
    cluster.send({"type": "broker_failure", "broker": 1})
    output = cluster.send({"type": "controller_failover"})
    assert output.appends["violations"] == []
    (row,) = output.appends["health"]
    simulator = cluster.simulator
    expected = recount(
        simulator.table_rows("partition_state"),
        simulator.table_rows("topics"),
        simulator.table_rows("brokers"),
    )
    assert {c: row[c] for c in STATE_COLUMNS} == expected
    assert row["under_replicated"] == 1 and row["not_preferred"] == 1


def test_kraft_reassignment_over_one_adding_a_replica_it_drops_is_no_violation() -> None:
    """SPEC-KRAFT §13.2: a new target that drops the replica an ongoing reassignment is
    adding writes only `removingReplicas` (its `adding` is empty, so the old one stays):
    Kafka 4.1.1's own classes leave broker 1 both adding and removing. kcsim's state does
    the same, and `violations` does not call Kafka's own state broken."""
    cluster = Cluster(Settings(engine="kraft"))
    cluster.send({"type": "topic_creation", "topic": "t", "assignment": {"0": [2, 3]}})
    cluster.send({"type": "broker_failure", "brokers": [3]})  # ISR [2]: nothing completes
    cluster.send({"type": "partition_reassignment", "topic": "t", "partition": 0,
                  "replicas": [2, 3, 1]})  # fmt: skip
    output = cluster.send(
        {"type": "partition_reassignment", "topic": "t", "partition": 0, "replicas": [2, 3]}
    )
    (record,) = output.appends["metadata_records"]
    # `replicas` is [2, 3, 1] already (target ++ removing), so only removing is written
    assert json.loads(record["record"]) == {"partitionId": 0, "topic": "t", "removingReplicas": [1]}
    (state,) = [r for r in cluster.simulator.table_rows("partition_state") if r["topic"] == "t"]
    assert (state["replicas"], state["adding_replicas"], state["removing_replicas"]) == (
        [2, 3, 1], [1], [1],
    )  # fmt: skip
    assert state["isr"] == [2]
    assert output.appends["violations"] == []
