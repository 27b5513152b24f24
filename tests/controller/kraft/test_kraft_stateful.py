"""Hypothesis stateful test of the KRaft engine over random legal event sequences:
SPEC-KRAFT §21's invariants after every event, a rejected event changes nothing, and
replaying every record written so far into an empty controller rebuilds the same state
(records are the single source of truth, SPEC-KRAFT §1.4)."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from controller.kraft import KRaftRejection, KRaftSettings, QuorumController, Record

BROKERS = st.integers(min_value=1, max_value=5)
TOPICS = st.sampled_from(["a", "b", "c"])


def _log_state(qc: QuorumController) -> dict[str, Any]:
    """The state the log determines (soft heartbeat state left out, and the ELR indexes of
    the controllers deposed since, which their restarts rebuilt: SPEC-KRAFT §2.3, §18)."""
    data = qc.dump()
    replication = {k: v for k, v in data["replication_control"].items() if k != "b2e_nodes"}
    return {
        "partitions": replication,
        "configs": data["configuration_control"]["configs"],
        "features": data["feature_control"],
        "registrations": data["cluster_control"]["registrations"],
        "next_offset": data["next_offset"],
    }


class KRaftMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.qc: QuorumController
        self.records: list[Record] = []
        self.leaders: dict[tuple[str, int, int, int], int] = {}
        self.incarnations: dict[str, int] = {}
        self.last_epochs: dict[int, int] = {}
        self.controller_epoch = 1

    @initialize(min_isr=st.integers(1, 3), elr=st.sampled_from([0, 1, 1]), unclean=st.booleans())
    def start(self, min_isr: int, elr: int, unclean: bool) -> None:
        self.settings = KRaftSettings(
            eligible_leader_replicas_version=elr,
            min_insync_replicas=min_isr,
            unclean_leader_election_enable=unclean,
        )
        self.qc = QuorumController(self.settings)

    # -- applying events ---------------------------------------------------------------
    def apply(self, event: dict[str, Any]) -> None:
        before = json.dumps(self.qc.dump(), sort_keys=True)
        prior = {(v.topic, v.partition): v for v in self.qc.partitions()}
        try:
            outcome = self.qc.apply(event)
        except KRaftRejection:
            assert json.dumps(self.qc.dump(), sort_keys=True) == before
            return
        self.records.extend(outcome.records)
        for record in outcome.records:
            f = record.fields
            if record.type == "RemoveTopicRecord":
                self.incarnations[f["topic"]] = self.incarnations.get(f["topic"], 0) + 1
            if record.type == "RegisterBrokerRecord" and "incarnationId" not in f:
                # V11: a new incarnation's epoch grows
                assert f["brokerEpoch"] > self.last_epochs.get(f["brokerId"], -1)
                self.last_epochs[f["brokerId"]] = f["brokerEpoch"]
        # V9: epochs never go down (a re-created topic starts over)
        removed = set(outcome.removed_topics)
        for view in self.qc.partitions():
            old = prior.get((view.topic, view.partition))
            if old is not None and view.topic not in removed:
                assert view.leader_epoch >= old.leader_epoch
                assert view.partition_epoch >= old.partition_epoch
        # V12
        assert self.qc.controller_epoch >= self.controller_epoch
        self.controller_epoch = self.qc.controller_epoch

    def _registered(self) -> list[int]:
        return sorted(self.qc.cluster_control.registrations)

    def _partitions(self) -> list[tuple[str, int]]:
        return [(v.topic, v.partition) for v in self.qc.partitions()]

    @rule(broker=BROKERS, rack=st.sampled_from([None, "r1", "r2"]))
    def broker_startup(self, broker: int, rack: str | None) -> None:
        event: dict[str, Any] = {"type": "broker_startup", "broker": broker}
        if rack is not None:
            event["rack"] = rack
        self.apply(event)

    @rule(broker=BROKERS, clean=st.booleans(), same=st.booleans())
    def broker_registration(self, broker: int, clean: bool, same: bool) -> None:
        event: dict[str, Any] = {"type": "broker_registration", "broker": broker}
        view = self.qc.broker(broker)
        if clean and view is not None:
            event["previous_broker_epoch"] = view.broker_epoch
        if same:
            event["incarnation"] = f"i{broker}"
        self.apply(event)

    @rule(broker=BROKERS)
    def broker_unfence(self, broker: int) -> None:
        self.apply({"type": "broker_unfence", "broker": broker})

    @rule(brokers=st.lists(BROKERS, min_size=1, max_size=3, unique=True))
    def broker_failure(self, brokers: list[int]) -> None:
        self.apply({"type": "broker_failure", "brokers": brokers})

    @rule(broker=BROKERS)
    def controlled_shutdown(self, broker: int) -> None:
        self.apply({"type": "controlled_shutdown", "broker": broker})

    @rule(broker=BROKERS)
    def broker_unregistration(self, broker: int) -> None:
        self.apply({"type": "broker_unregistration", "broker": broker})

    @rule(
        topic=TOPICS,
        assignment=st.lists(
            st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True),
            min_size=1,
            max_size=3,
        ),
        min_isr=st.sampled_from([None, "1", "2", "3"]),
    )
    def create_explicit(self, topic: str, assignment: list[list[int]], min_isr: str | None) -> None:
        event: dict[str, Any] = {
            "type": "topic_creation",
            "topic": topic,
            "assignment": {str(i): a for i, a in enumerate(assignment)},
        }
        if min_isr is not None:
            event["configs"] = {"min.insync.replicas": min_isr}
        self.apply(event)

    @rule(topic=TOPICS, partitions=st.integers(1, 4), rf=st.integers(1, 4))
    def create_placed(self, topic: str, partitions: int, rf: int) -> None:
        self.apply(
            {
                "type": "topic_creation",
                "topic": topic,
                "partitions": partitions,
                "replication_factor": rf,
            }
        )

    @rule(topic=TOPICS, replicas=st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True))
    def partition_creation(self, topic: str, replicas: list[int]) -> None:
        parts = [p for t, p in self._partitions() if t == topic]
        if parts:
            self.apply(
                {
                    "type": "partition_creation",
                    "topic": topic,
                    "assignment": {str(max(parts) + 1): replicas},
                }
            )

    @rule(topic=TOPICS)
    def topic_deletion(self, topic: str) -> None:
        self.apply({"type": "topic_deletion", "topic": topic})

    @precondition(lambda self: bool(self._partitions()))
    @rule(
        data=st.data(),
        replicas=st.one_of(
            st.none(), st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True)
        ),
    )
    def partition_reassignment(self, data: st.DataObject, replicas: list[int] | None) -> None:
        topic, partition = data.draw(st.sampled_from(self._partitions()))
        self.apply(
            {
                "type": "partition_reassignment",
                "topic": topic,
                "partition": partition,
                "replicas": replicas,
            }
        )

    @precondition(lambda self: bool(self._partitions()))
    @rule(data=st.data(), recovered=st.booleans())
    def isr_change(self, data: st.DataObject, recovered: bool) -> None:
        topic, partition = data.draw(st.sampled_from(self._partitions()))
        view = self.qc.partition(topic, partition)
        assert view is not None
        others = [r for r in view.replicas if r != view.leader]
        chosen = data.draw(st.lists(st.sampled_from(others), unique=True)) if others else []
        isr = ([view.leader] if view.leader >= 0 else []) + chosen
        if data.draw(st.booleans()):
            isr = list(reversed(isr))
        event: dict[str, Any] = {
            "type": "isr_change",
            "topic": topic,
            "partition": partition,
            "isr": isr,
        }
        if recovered:
            event["leader_recovery_state"] = "RECOVERED"
        self.apply(event)

    @rule(data=st.data(), unclean=st.booleans(), everything=st.booleans())
    def leader_election(self, data: st.DataObject, unclean: bool, everything: bool) -> None:
        event: dict[str, Any] = {
            "type": "leader_election",
            "election": "unclean" if unclean else "preferred",
        }
        if not everything and self._partitions():
            topic, partition = data.draw(st.sampled_from(self._partitions()))
            event["partitions"] = [{"topic": topic, "partition": partition}]
        self.apply(event)

    @rule()
    def auto_rebalance_check(self) -> None:
        self.apply({"type": "auto_rebalance_check"})

    @rule()
    def unclean_election_check(self) -> None:
        self.apply({"type": "unclean_election_check"})

    @rule(topic=TOPICS, min_isr=st.sampled_from(["1", "2", "3"]), unclean=st.booleans())
    def topic_config_change(self, topic: str, min_isr: str, unclean: bool) -> None:
        self.apply(
            {
                "type": "topic_config_change",
                "topic": topic,
                "configs": {
                    "min.insync.replicas": min_isr,
                    "unclean.leader.election.enable": unclean,
                },
            }
        )

    @rule(min_isr=st.sampled_from(["1", "2", "3"]), node=st.sampled_from([None, 1, 100]))
    def cluster_config_change(self, min_isr: str, node: int | None) -> None:
        event: dict[str, Any] = {
            "type": "cluster_config_change",
            "configs": {"min.insync.replicas": min_isr},
        }
        if node is not None:
            event["broker"] = node
        self.apply(event)

    @rule(level=st.integers(0, 1))
    def feature_update(self, level: int) -> None:
        self.apply(
            {"type": "feature_update", "features": {"eligible.leader.replicas.version": level}}
        )

    @rule(controller=st.sampled_from([100, 101]), failed=st.lists(BROKERS, max_size=2, unique=True))
    def controller_failover(self, controller: int, failed: list[int]) -> None:
        self.apply(
            {"type": "controller_failover", "controller": controller, "failed_brokers": failed}
        )

    # -- invariants (SPEC-KRAFT §21) --------------------------------------------------------
    @invariant()
    def partition_invariants(self) -> None:
        if not hasattr(self, "qc"):
            return
        regs = self.qc.cluster_control.registrations
        for v in self.qc.partitions():
            isr, elr, replicas = v.isr, v.elr, v.replicas
            if v.leader != -1:
                assert v.leader in isr, v  # V1
                r = regs.get(v.leader)
                assert r is not None and not r.fenced, v  # V4
            assert set(isr) <= set(replicas), v  # V2
            for values in (replicas, isr, elr):
                assert len(set(values)) == len(values), v
            assert not set(isr) & set(elr), v  # V3
            if not isr:
                assert v.leader == -1, v  # V5
            if v.leader_recovery_state == "RECOVERING":
                assert len(isr) <= 1, v  # V6
            if not self.qc.elr_ever_disabled:  # V7
                assert len(v.last_known_elr) <= 1, v
                if v.last_known_elr:
                    assert v.leader == -1, v
            adding, removing = v.adding_replicas, v.removing_replicas  # V8
            assert set(adding) <= set(replicas) and set(removing) <= set(replicas), v
            assert not set(adding) & set(removing), v
            assert list(adding) == sorted(adding) and list(removing) == sorted(removing), v
            key = (v.topic, self.incarnations.get(v.topic, 0), v.partition, v.leader_epoch)
            assert self.leaders.setdefault(key, v.leader) == v.leader, v  # V10

    @invariant()
    def records_rebuild_the_state(self) -> None:
        if not hasattr(self, "qc"):
            return
        fresh = QuorumController(self.settings)
        for record in self.records:
            fresh.replay(Record(record.type, json.loads(json.dumps(record.fields))))
        assert _log_state(fresh) == _log_state(self.qc)

    @invariant()
    def dump_round_trips(self) -> None:
        if not hasattr(self, "qc"):
            return
        data = json.loads(json.dumps(self.qc.dump()))
        assert QuorumController.load(self.settings, data).dump() == data

    @invariant()
    def soft_state_and_partitions_restore(self) -> None:
        """A restart's path: `soft_state()` plus the partitions and topic configs (what the
        state tables hold) rebuild the whole state, B2E's stale entries included (§2.3)."""
        if not hasattr(self, "qc"):
            return
        rc = self.qc.replication_control
        restored = QuorumController.restore(
            self.settings,
            json.loads(json.dumps(self.qc.soft_state())),
            {t: self.qc.configuration_control.topic_configs(t) for t in rc.topics},
            [(t, pid, p) for t, parts in rc.topics.items() for pid, p in parts.items()],
        )
        assert _comparable(restored.dump()) == _comparable(self.qc.dump())


def _comparable(data: dict[str, Any]) -> dict[str, Any]:
    """A dump with B2E's entry lists as sorted multisets (their order is never read)."""

    def multisets(rows: list[Any]) -> list[Any]:
        b2e = [[b, {t: sorted(ps) for t, ps in topics.items() if ps}] for b, topics in rows]
        return [e for e in b2e if e[1]]

    replication = data["replication_control"]
    replication = {
        **replication,
        "b2e": multisets(replication["b2e"]),
        "b2e_nodes": [[node, multisets(rows)] for node, rows in replication["b2e_nodes"]],
    }
    return {**data, "replication_control": replication}


TestKRaftMachine = KRaftMachine.TestCase
TestKRaftMachine.settings = settings(
    # KRAFT_STATEFUL_EXAMPLES=2000 for a longer search
    max_examples=int(os.environ.get("KRAFT_STATEFUL_EXAMPLES", "150")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
