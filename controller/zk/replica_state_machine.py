"""ReplicaStateMachine (SPEC §6): seven replica states and what each transition sends."""

from __future__ import annotations

from collections.abc import Iterable

from controller.model import LeaderAndIsr, ReplicaState, TopicPartition
from controller.zk.batch import RequestBatch
from controller.zk.context import ControllerContext, Partition
from controller.zk.journal import Journal

Replica = tuple[TopicPartition, int]
RS = ReplicaState

VALID_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    RS.NEW: frozenset({RS.NON_EXISTENT}),
    RS.ONLINE: frozenset({RS.NEW, RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE}),
    RS.OFFLINE: frozenset({RS.NEW, RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE}),
    RS.DELETION_STARTED: frozenset({RS.OFFLINE}),
    RS.DELETION_SUCCESSFUL: frozenset({RS.DELETION_STARTED}),
    RS.DELETION_INELIGIBLE: frozenset({RS.OFFLINE, RS.DELETION_STARTED}),
    RS.NON_EXISTENT: frozenset({RS.DELETION_SUCCESSFUL}),
}
# Kafka prints a state's valid previous states in this order
_ORDER = list(RS)

ENTITY = "replica"


class ReplicaStateMachine:
    def __init__(self, context: ControllerContext, journal: Journal, batch: RequestBatch) -> None:
        self._context = context
        self._journal = journal
        self._batch = batch

    def handle_state_changes(self, replicas: Iterable[Replica], target: ReplicaState) -> None:
        """One batch for the whole call, replicas grouped by broker (in broker order)."""
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp, broker in replicas:
            by_broker.setdefault(broker, []).append(tp)
        if not by_broker:
            return
        self._batch.new_batch()
        for broker in sorted(by_broker):
            self._change_broker_replicas(broker, by_broker[broker], target)
        self._batch.send()

    def _change_broker_replicas(
        self, broker: int, partitions: list[TopicPartition], target: ReplicaState
    ) -> None:
        context = self._context
        valid: list[Partition] = []
        valid_before = VALID_PREVIOUS[target]
        for tp, record in context.records_of(partitions):  # one lookup per run of a topic
            if record is None:
                # the replica's partition is gone: Kafka would see NonExistentReplica
                self._log_invalid(tp, broker, RS.NON_EXISTENT, target)
                continue
            current = record.replica_states.get(broker, RS.NON_EXISTENT)
            if current in valid_before:
                valid.append(record)
            else:
                self._log_invalid(tp, broker, current, target)
        if not valid:
            return
        handler = {
            RS.NEW: self._to_new,
            RS.ONLINE: self._to_online,
            RS.OFFLINE: self._to_offline,
            RS.DELETION_STARTED: self._to_deletion_started,
        }.get(target, self._to_plain_state)
        handler(broker, valid, target)

    # ---- per-target transitions ----------------------------------------------------------

    def _to_new(self, broker: int, records: list[Partition], target: ReplicaState) -> None:
        for record in records:
            leadership = record.leadership
            current = record.replica_states.get(broker, RS.NON_EXISTENT)
            if leadership is not None:
                if leadership.leader == broker:
                    self._journal.state_change(
                        ENTITY,
                        record.tp,
                        broker,
                        current,
                        target,
                        leadership,
                        error=f"Replica {broker} for partition {record.tp} cannot be moved to "
                        "NewReplica state as it is being requested to become leader",
                    )
                    continue
                self._batch.add_leader_and_isr(
                    (broker,), record.tp, leadership, record.assignment, is_new=True, record=record
                )
            self._set(record, broker, current, target)

    def _to_online(self, broker: int, records: list[Partition], target: ReplicaState) -> None:
        for record in records:
            current = record.replica_states.get(broker, RS.NON_EXISTENT)
            if current is RS.NEW:
                assignment = record.assignment
                if broker not in assignment.replicas:
                    self._context.set_assignment(
                        record,
                        type(assignment)(
                            (*assignment.replicas, broker), assignment.adding, assignment.removing
                        ),
                    )
            elif record.leadership is not None:
                # the replica's broker is not checked for liveness (SPEC §6.2)
                self._batch.add_leader_and_isr(
                    (broker,),
                    record.tp,
                    record.leadership,
                    record.assignment,
                    is_new=False,
                    record=record,
                )
            self._set(record, broker, current, target)

    def _to_offline(self, broker: int, records: list[Partition], target: ReplicaState) -> None:
        context = self._context
        batch = self._batch
        batch.add_stop_replicas(broker, records, delete=False)
        with_leadership = [r for r in records if r.leadership is not None]
        without_leadership = [r for r in records if r.leadership is None]
        queued = context.topics_to_be_deleted  # is_queued_for_deletion, without a call each
        for record in with_leadership:
            current = record.replica_states.get(broker, RS.NON_EXISTENT)
            leadership = self._remove_from_isr(record, broker)
            if record.tp[0] not in queued:  # (tp.topic)
                recipients = [r for r in record.assignment.replicas if r != broker]
                batch.add_leader_and_isr(
                    recipients,
                    record.tp,
                    leadership,
                    record.assignment,
                    is_new=False,
                    record=record,
                )
            self._set(record, broker, current, target)
        registered = context.registered_broker_ids()
        for record in without_leadership:
            current = record.replica_states.get(broker, RS.NON_EXISTENT)
            batch.add_update_metadata(registered, (record.tp,))
            self._set(record, broker, current, target)

    def _to_deletion_started(
        self, broker: int, records: list[Partition], target: ReplicaState
    ) -> None:
        for record in records:
            current = record.replica_states.get(broker, RS.NON_EXISTENT)
            self._set(record, broker, current, target)
            self._batch.add_stop_replica((broker,), record.tp, delete=True, record=record)

    def _to_plain_state(self, broker: int, records: list[Partition], target: ReplicaState) -> None:
        """Ineligible, Successful (state only) and NonExistent (leaves the assignment)."""
        context = self._context
        for record in records:
            current = record.replica_states.get(broker, RS.NON_EXISTENT)
            if target is RS.NON_EXISTENT:
                context.set_assignment(record, record.assignment.remove_replica(broker))
                self._journal.state_change(
                    ENTITY, record.tp, broker, current, target, record.leadership
                )
                context.remove_replica_state(record, broker)
            else:
                self._set(record, broker, current, target)

    # ---- helpers -------------------------------------------------------------------------

    def _remove_from_isr(self, record: Partition, broker: int) -> LeaderAndIsr:
        """§6.3: the controller's ISR shrink. The last member is never removed, but a leader
        being removed still becomes -1; any write bumps the leader epoch."""
        context = self._context
        current = record.leadership
        assert current is not None
        if broker in current.isr:
            leader = -1 if current.leader == broker else current.leader
            isr = (
                current.isr
                if len(current.isr) == 1
                else tuple(r for r in current.isr if r != broker)
            )
            # new_leader_and_isr(leader, isr).written(epoch), without the proposal object:
            # this runs for every replica a broker's shutdown or failure removes
            updated = LeaderAndIsr.after_write(
                leader,
                current.leader_epoch + 1,
                isr,
                current.recovery,
                current.partition_epoch,
                context.epoch,
            )
        else:
            updated = current.stamped(context.epoch)  # no write; cache re-stamped
        context.set_leadership(record, updated)
        return updated

    def _set(
        self, record: Partition, broker: int, current: ReplicaState, target: ReplicaState
    ) -> None:
        self._context.set_replica_state(record, broker, target)
        journal = self._journal
        if journal.logs_state_changes:  # (a replica transition logs nothing else)
            journal.state_change(ENTITY, record.tp, broker, current, target, record.leadership)

    def _log_invalid(
        self, tp: TopicPartition, broker: int, current: ReplicaState, target: ReplicaState
    ) -> None:
        valid = ",".join(s.value for s in _ORDER if s in VALID_PREVIOUS[target])
        self._journal.state_change(
            ENTITY,
            tp,
            broker,
            current,
            target,
            self._context.leadership(tp),
            error=f"Replica {broker} for partition {tp} cannot move to {target} state. It should "
            f"be in one of {valid} states. Instead it is in {current} state",
        )
