"""The two state machines wired to a fresh context, batch and journal, and a LeaderAndIsr
maker; shared by the state machine and metadata entry tests."""

from __future__ import annotations

from typing import Any

from controller.config import Settings
from controller.model import (
    BrokerStatus,
    LeaderAndIsr,
    PartitionState,
    RecoveryState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from controller.zk.batch import RequestBatch
from controller.zk.context import ControllerContext, Partition
from controller.zk.journal import Journal
from controller.zk.partition_state_machine import PartitionStateMachine
from controller.zk.replica_state_machine import ReplicaStateMachine
from controller.zk.request_log import joined

PS = PartitionState
TP = TopicPartition("t", 0)
Row = dict[str, Any]


class Machines:
    """A controller context with brokers 1-3 registered (epoch 5), plus both machines."""

    def __init__(self, brokers: tuple[int, ...] = (1, 2, 3), settings: Settings | None = None):
        self.context = ControllerContext("c")
        self.context.epoch = 5
        for broker in brokers:
            self.context.register_broker(broker, None, 100 + broker)
        self.journal = Journal("c")
        self.journal.begin("e1", 1, None)
        self.batch = RequestBatch(self.context, self.journal)
        self.psm = PartitionStateMachine(
            self.context, self.journal, self.batch, settings or Settings()
        )
        self.rsm = ReplicaStateMachine(self.context, self.journal, self.batch)

    def add(
        self,
        replicas: tuple[int, ...] = (1, 2, 3),
        leadership: LeaderAndIsr | None = None,
        state: PartitionState = PS.NON_EXISTENT,
        replica_state: ReplicaState | None = None,
        tp: TopicPartition = TP,
    ) -> Partition:
        if tp.topic not in self.context.topics:
            self.context.add_topic(tp.topic, {})
        record = self.context.add_partition(tp, ReplicaAssignment(replicas))
        if leadership is not None:
            self.context.set_leadership(record, leadership)
        self.context.set_partition_state(record, state)
        if replica_state is not None:
            for broker in replicas:
                self.context.set_replica_state(record, broker, replica_state)
        return record

    def dead(self, broker: int) -> None:
        self.context.set_broker_status(broker, BrokerStatus.DEAD)

    def shutting_down(self, broker: int) -> None:
        self.context.set_broker_status(broker, BrokerStatus.SHUTTING_DOWN)

    def sent(self) -> list[tuple[str, int, bool]]:
        return [(r["type"], r["broker"], r["delivered"]) for r in self.journal.requests]

    def requests(self, type: str, broker: int | None = None) -> list[Row]:
        """The requests sent, each joined with its payload (partitions, live_brokers)."""
        log = self.journal.requests
        return [
            r
            for r in joined(log, log.payloads())
            if r["type"] == type and (broker is None or r["broker"] == broker)
        ]

    def entry(self, type: str, broker: int, tp: TopicPartition = TP) -> Row:
        (request,) = self.requests(type, broker)
        (found,) = [p for p in request["partitions"] if (p["topic"], p["partition"]) == tp]
        return found

    def changes(self) -> list[Row]:
        return self.journal.state_changes


def lai(leader: int, epoch: int, isr: tuple[int, ...], version: int, ctrl: int = 5) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, version, RecoveryState.RECOVERED, ctrl)
