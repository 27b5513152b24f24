"""ControllerBrokerRequestBatch (SPEC §3): collects requests per broker, flushes them.

One flush sends, in order, one LeaderAndIsr, then one UpdateMetadata, then one
StopReplica per broker. Brokers without a registration at send time are kept as rows
with `delivered = false` (Kafka drops them).

A request entry (a dict of `schemas.tables.REQUEST_PARTITION`) is never changed once
built: one entry is shared by every recipient of a LeaderAndIsr add, an unchanged
partition's UpdateMetadata entry by every body naming it (`MetadataEntries`), and the
replay writer reuses the text of an unchanged entry of the last long UpdateMetadata body,
found by its identity (`controller.replay.table_files.EntryTexts`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from controller.model import EPOCH_DURING_DELETE, LeaderAndIsr, TopicPartition
from controller.model import ReplicaAssignment as Assignment
from controller.zk.context import ControllerContext, Partition
from controller.zk.journal import Journal
from controller.zk.metadata_entries import MetadataEntries

Row = dict[str, Any]

LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STOP_REPLICA = "StopReplica"


def _leader_and_isr_entry(
    tp: TopicPartition, leadership: LeaderAndIsr, assignment: Assignment, is_new: bool
) -> Row:
    # one literal, in REQUEST_PARTITION's field order
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "controller_epoch": leadership.controller_epoch,
        "leader": leadership.leader,
        "leader_epoch": leadership.leader_epoch,
        "isr": list(leadership.isr),
        "partition_epoch": leadership.partition_epoch,
        "replicas": list(assignment.replicas),
        "adding_replicas": list(assignment.adding),
        "removing_replicas": list(assignment.removing),
        "leader_recovery_state": str(leadership.recovery),
        "offline_replicas": None,
        "is_new": is_new,
        "delete_partition": None,
    }


def _stop_replica_entry(tp: TopicPartition, leader_epoch: int, delete: bool) -> Row:
    # one literal, in REQUEST_PARTITION's field order
    return {
        "topic": tp.topic,
        "partition": tp.partition,
        "controller_epoch": None,
        "leader": None,
        "leader_epoch": leader_epoch,
        "isr": None,
        "partition_epoch": None,
        "replicas": None,
        "adding_replicas": None,
        "removing_replicas": None,
        "leader_recovery_state": None,
        "offline_replicas": None,
        "is_new": None,
        "delete_partition": delete,
    }


class RequestBatch:
    def __init__(self, context: ControllerContext, journal: Journal) -> None:
        self._context = context
        self._journal = journal
        self._leader_and_isr: dict[int, dict[TopicPartition, Row]] = {}
        self._stop_replica: dict[int, dict[TopicPartition, Row]] = {}
        self._update_metadata_brokers: set[int] = set()
        # "every registered broker", resolved at send time; broker registrations never
        # change while a batch is open, so this equals adding them one by one
        self._update_metadata_all_registered = False
        self._update_metadata_partitions: dict[TopicPartition, Row] = {}
        # a body of every partition with a leader, while nothing else is in the batch's
        # UpdateMetadata: its partitions and entries as lists (no dict of 100k+ keys built
        # to be read back in the same order)
        self._update_metadata_body: tuple[list[TopicPartition], list[Row]] | None = None
        self._entries = MetadataEntries()  # kept across batches: entries reused unchanged
        # StopReplica(delete=true) deliveries for topics whose deletion has started: the
        # brokers' answers become TopicDeletionStopReplicaResponseReceived events
        self.deletion_deliveries: list[tuple[int, list[TopicPartition]]] = []

    def new_batch(self) -> None:
        if (
            self._leader_and_isr
            or self._stop_replica
            or self._update_metadata_brokers
            or self._update_metadata_all_registered
            or self._update_metadata_partitions
            or self._update_metadata_body is not None
        ):
            raise RuntimeError(
                "Controller to broker state change requests batch is not empty "
                "while creating a new one"
            )

    def add_leader_and_isr(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        leadership: LeaderAndIsr,
        assignment: Assignment,
        is_new: bool,
        record: Partition | None = None,
    ) -> None:
        """`record`: the partition's, when the caller holds it (saves a lookup)."""
        entry: Row | None = None  # one entry for every recipient that has no sticky isNew
        leader_and_isr = self._leader_and_isr
        for broker in brokers:
            if broker < 0:
                continue
            per_broker = leader_and_isr.get(broker)
            if per_broker is None:  # (not setdefault: no dict made per call)
                per_broker = leader_and_isr[broker] = {}
            previous = per_broker.get(tp)
            # isNew is sticky within a batch: a later add for the same broker cannot clear it
            if previous is not None and previous["is_new"] and not is_new:
                per_broker[tp] = _leader_and_isr_entry(tp, leadership, assignment, True)
                continue
            if entry is None:
                entry = _leader_and_isr_entry(tp, leadership, assignment, is_new)
            per_broker[tp] = entry
        # any LeaderAndIsr implies an UpdateMetadata of the partition to every registered broker
        self._update_metadata_all_registered = True
        if record is None:
            record = self._context.partition(tp)
        if record is not None:
            context = self._context
            if self._update_metadata_body is not None:
                self._merge_full_body()
            self._entries.add_one(
                self._update_metadata_partitions,
                record,
                context.topics_to_be_deleted,
                context.live_broker_set(),
            )

    def add_stop_replica(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        delete: bool,
        record: Partition | None = None,
    ) -> None:
        """`record`: the partition's, when the caller holds it (saves a lookup)."""
        leader_epoch = self._context.leader_epoch_for_stop_replica(tp, record)
        for broker in brokers:
            if broker < 0:
                continue
            per_broker = self._stop_replica.setdefault(broker, {})
            previous = per_broker.get(tp)
            per_broker[tp] = _stop_replica_entry(
                tp, leader_epoch, delete or (previous is not None and previous["delete_partition"])
            )

    def add_stop_replicas(self, broker: int, records: Iterable[Partition], delete: bool) -> None:
        """add_stop_replica to one broker of each of these partitions (by their records),
        in order: a broker's shutdown or failure stops thousands at once, so the per-call
        lookups are done once."""
        if broker < 0:
            return
        deleting = self._context.topics_to_be_deleted
        per_broker: dict[TopicPartition, Row] | None = None
        for record in records:
            if per_broker is None:  # (none for no partition: no empty request)
                per_broker = self._stop_replica.setdefault(broker, {})
            tp = record.tp
            leadership = record.leadership
            # leader_epoch_for_stop_replica
            if deleting and tp[0] in deleting:  # (tp.topic)
                leader_epoch = -2
            else:
                leader_epoch = -1 if leadership is None else leadership.leader_epoch
            previous = per_broker.get(tp)
            per_broker[tp] = _stop_replica_entry(
                tp, leader_epoch, delete or (previous is not None and previous["delete_partition"])
            )

    def add_update_metadata(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        self._update_metadata_brokers.update(filter((0).__le__, brokers))  # ids >= 0
        context = self._context
        topics = context.topics
        self.add_update_metadata_records(
            record
            for tp in partitions
            if (topic := topics.get(tp.topic)) is not None
            and (record := topic.partitions.get(tp.partition)) is not None
        )

    def add_update_metadata_records(self, records: Iterable[Partition]) -> None:
        """add_update_metadata for partitions given by their records (recipients added
        apart): a new broker's UpdateMetadata walks every record, so no lookup by name."""
        context = self._context
        if self._update_metadata_body is not None:
            self._merge_full_body()
        self._entries.add_to(
            self._update_metadata_partitions,
            records,
            context.topics_to_be_deleted,  # is_queued_for_deletion
            context.live_broker_set(),
        )

    def add_full_update_metadata(self) -> None:
        """add_update_metadata_records of every partition with a leader
        (`ControllerContext.records_with_leaders`): the entries unchanged since the last
        such body are not looked at one by one."""
        context = self._context
        tps, entries = self._entries.full_body(context)
        if self._update_metadata_partitions or self._update_metadata_body is not None:
            self._merge_full_body()
            self._update_metadata_partitions.update(zip(tps, entries, strict=True))
        else:
            self._update_metadata_body = (tps, entries)

    def _merge_full_body(self) -> None:
        """Move a full body held as lists into the dict of partitions, before more adds."""
        body = self._update_metadata_body
        if body is not None:
            self._update_metadata_partitions.update(zip(*body, strict=True))
            self._update_metadata_body = None

    def send(self) -> None:
        """sendRequestsToBrokers: flush every accumulator, in Kafka's order."""
        context = self._context
        journal = self._journal
        epoch = context.epoch
        for broker in sorted(self._leader_and_isr):
            states = list(self._leader_and_isr[broker].values())
            journal.request(
                epoch, LEADER_AND_ISR, broker, context.is_registered(broker), states, None
            )
        self._leader_and_isr.clear()

        recipients = self._update_metadata_brokers
        if self._update_metadata_all_registered:
            recipients.update(context.registered_broker_ids())
        if recipients:
            # one payload, shared by every recipient
            body = self._update_metadata_body
            states = (
                body[1] if body is not None else list(self._update_metadata_partitions.values())
            )
            live_brokers = list(context.registered_broker_ids())
            journal.fan_out(
                epoch,
                UPDATE_METADATA,
                sorted(recipients),
                context.registered_broker_set().__contains__,  # is_registered, in C
                states,
                live_brokers,
            )
        recipients.clear()
        self._update_metadata_all_registered = False
        self._update_metadata_partitions.clear()
        self._update_metadata_body = None

        started = context.topics_with_deletion_started
        for broker in sorted(self._stop_replica):
            per_broker = self._stop_replica[broker]
            delivered = context.is_registered(broker)
            journal.request(epoch, STOP_REPLICA, broker, delivered, list(per_broker.values()), None)
            deleting = [
                tp for tp, e in per_broker.items() if e["delete_partition"] and tp.topic in started
            ]
            if delivered and deleting:
                self.deletion_deliveries.append((broker, deleting))
        self._stop_replica.clear()
        journal.check_deliveries(context.registered_broker_set())  # as at send time


__all__ = [
    "EPOCH_DURING_DELETE",
    "LEADER_AND_ISR",
    "STOP_REPLICA",
    "UPDATE_METADATA",
    "RequestBatch",
]
