"""Partition reassignment, KIP-455 (SPEC §14): phases U, A and B, cancel and replace."""

from __future__ import annotations

from controller.model import PartitionState, ReplicaAssignment, ReplicaState, TopicPartition
from controller.zk.election import REASSIGN
from controller.zk.parts import ControllerParts

RS = ReplicaState


class ReassignmentFailed(Exception):
    """An unexpected failure inside onPartitionReassignment: Kafka answers
    UNKNOWN_SERVER_ERROR (the phases already run stay done)."""


class ReassignmentError(Exception):
    """A request the API refuses, with Kafka's error code name."""

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message or code)
        self.code = code
        self.message = message


class Reassignments:
    def __init__(self, parts: ControllerParts) -> None:
        self._parts = parts

    # ---- API entry (§14.1) ---------------------------------------------------------------

    def submit(self, tp: TopicPartition, target: tuple[int, ...] | None) -> None:
        """AlterPartitionReassignments for one partition. Raises ReassignmentError with
        Kafka's answer when refused."""
        context = self._parts.context
        current = context.assignment(tp)
        if target is not None:
            self._validate(current, target)
        if current.is_being_reassigned:
            reassignment = current.reassign_to(target if target is not None else current.origin)
        elif target is not None:
            reassignment = current.reassign_to(target)
        else:
            raise ReassignmentError(  # ApiError(code): the code's default message
                "NO_REASSIGNMENT_IN_PROGRESS", "No partition reassignment is in progress."
            )
        # maybeTriggerPartitionReassignment
        if context.is_queued_for_deletion(tp.topic) or not current.replicas:
            raise ReassignmentError("UNKNOWN_TOPIC_OR_PARTITION", "The partition does not exist.")
        try:
            self.on_partition_reassignment(tp, reassignment)
        except ReassignmentFailed as failure:
            # Kafka logs the cause and answers ApiError(UNKNOWN_SERVER_ERROR), default message
            raise ReassignmentError(
                "UNKNOWN_SERVER_ERROR",
                "The server experienced an unexpected error when processing the request.",
            ) from failure

    def _validate(self, current: ReplicaAssignment, target: tuple[int, ...]) -> None:
        if not target:
            raise ReassignmentError(
                "INVALID_REPLICA_ASSIGNMENT",
                "Empty replica list specified in partition reassignment.",
            )
        if len(set(target)) != len(target):
            raise ReassignmentError(
                "INVALID_REPLICA_ASSIGNMENT",
                f"Duplicate replica ids in partition reassignment replica list: {list(target)}",
            )
        if any(r < 0 for r in target):
            raise ReassignmentError(
                "INVALID_REPLICA_ASSIGNMENT", f"Invalid broker id in replica list: {list(target)}"
            )
        adding = current.reassign_to(target).adding
        context = self._parts.context
        not_live = [r for r in adding if not context.is_live(r)]
        if not_live:
            raise ReassignmentError(
                "INVALID_REPLICA_ASSIGNMENT",
                "Replica assignment has brokers that are not alive. Replica "
                f"list: {list(adding)}, live broker list: "
                f"{context.live_broker_ids()}",
            )

    # ---- onPartitionReassignment (§14.3) -------------------------------------------------

    def on_partition_reassignment(
        self, tp: TopicPartition, reassignment: ReplicaAssignment
    ) -> None:
        parts = self._parts
        context = parts.context
        parts.deletion.mark_ineligible((tp.topic,))
        self._update_current_reassignment(tp, reassignment)
        if not self._is_complete(tp, reassignment):
            # A1: bump the leader epoch and send the new assignment; A2: start adding replicas
            self._update_leader_epoch_and_send(tp, reassignment)
            for replica in reassignment.adding:
                parts.replicas.handle_state_changes([(tp, replica)], RS.NEW)
            return
        record = context.partition(tp)
        assert record is not None
        # B1 .. B8
        parts.replicas.handle_state_changes([(tp, r) for r in reassignment.adding], RS.ONLINE)
        completed = ReplicaAssignment(reassignment.target)
        context.set_assignment(record, completed)
        self._move_leader_if_required(tp, completed)
        self._stop_removed_replicas(tp, reassignment.removing)
        context.partitions_being_reassigned.discard(tp)
        parts.send_update_metadata(context.registered_broker_ids(), (tp,))
        parts.deletion.resume_deletion_for_topics((tp.topic,))

    def maybe_complete(self, tp: TopicPartition) -> None:
        """maybeCompleteReassignment: after an ISR change of a reassigning partition."""
        assignment = self._parts.context.assignment(tp)
        if self._is_complete(tp, assignment):
            self.on_partition_reassignment(tp, assignment)

    def resume(self, tp: TopicPartition) -> None:
        self.on_partition_reassignment(tp, self._parts.context.assignment(tp))

    def _update_current_reassignment(
        self, tp: TopicPartition, reassignment: ReplicaAssignment
    ) -> None:
        context = self._parts.context
        record = context.partition(tp)
        assert record is not None
        current = record.assignment
        if current != reassignment:
            context.set_assignment(record, reassignment)
            unneeded = [r for r in current.replicas if r not in reassignment.replicas]
            if unneeded:
                self._stop_removed_replicas(tp, tuple(unneeded))
        context.partitions_being_reassigned.add(tp)

    def _is_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        if not assignment.is_being_reassigned:
            return True
        leadership = self._parts.context.leadership(tp)
        return leadership is not None and set(assignment.target) <= set(leadership.isr)

    def _move_leader_if_required(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        context = self._parts.context
        leadership = context.leadership(tp)
        if leadership is None:
            raise ReassignmentFailed(f"No leadership information for partition {tp}")
        leader = leadership.leader
        if leader in assignment.replicas and context.is_live(leader):
            self._update_leader_epoch_and_send(tp, assignment)
        else:
            # an election failure is only logged (state_changes); the flow goes on
            self._parts.partitions.handle_state_changes([tp], PartitionState.ONLINE, REASSIGN)

    def _update_leader_epoch_and_send(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        parts = self._parts
        context = parts.context
        record = context.partition(tp)
        if record is None or record.leadership is None:
            raise ReassignmentFailed(
                f"Cannot update leader epoch for partition {tp} as leaderAndIsr path is empty. "
                "This could mean we somehow tried to reassign a partition that doesn't exist"
            )
        updated = record.leadership.new_epoch().written(context.epoch)
        context.set_leadership(record, updated)
        batch = parts.batch
        batch.new_batch()
        batch.add_leader_and_isr(assignment.origin, tp, updated, assignment, is_new=False)
        batch.add_leader_and_isr(assignment.adding, tp, updated, assignment, is_new=True)
        batch.send()

    def _stop_removed_replicas(self, tp: TopicPartition, removed: tuple[int, ...]) -> None:
        """§14.5: four separate batches: Offline, DeletionStarted, DeletionSuccessful,
        NonExistent."""
        replicas = self._parts.replicas
        doomed = [(tp, r) for r in removed]
        for target in (RS.OFFLINE, RS.DELETION_STARTED, RS.DELETION_SUCCESSFUL, RS.NON_EXISTENT):
            replicas.handle_state_changes(doomed, target)
