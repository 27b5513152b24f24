"""TopicDeletionManager (SPEC §15): queue, start, retry, halt and complete topic deletion."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from controller.model import PartitionState, ReplicaState, TopicPartition
from controller.zk.context import ControllerContext
from controller.zk.partition_state_machine import PartitionStateMachine
from controller.zk.replica_state_machine import ReplicaStateMachine

Replica = tuple[TopicPartition, int]
RS = ReplicaState


class TopicDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        replica_machine: ReplicaStateMachine,
        partition_machine: PartitionStateMachine,
        send_update_metadata: Callable[[Iterable[TopicPartition]], None],
        enabled: bool,
    ) -> None:
        self._context = context
        self._replicas = replica_machine
        self._partitions = partition_machine
        self._send_update_metadata = send_update_metadata
        self.enabled = enabled

    def init(self, queued: Iterable[str], ineligible: Iterable[str]) -> None:
        """After failover: the queue as stored, ineligibility recomputed (§7.2 step 5-6)."""
        if not self.enabled:
            return
        context = self._context
        context.topics_to_be_deleted.update(queued)
        context.topics_ineligible_for_deletion.update(
            set(ineligible) & context.topics_to_be_deleted
        )

    def try_topic_deletion(self) -> None:
        if self.enabled:
            self.resume_deletions()

    def enqueue(self, topics: Iterable[str]) -> None:
        if self.enabled:
            self._context.topics_to_be_deleted.update(topics)
            self.resume_deletions()

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> None:
        if not self.enabled:
            return
        context = self._context
        resumed = set(topics) & context.topics_to_be_deleted
        if resumed:
            context.topics_ineligible_for_deletion -= resumed
            self.resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[Replica]) -> None:
        if not self.enabled:
            return
        failed = [r for r in replicas if self._context.is_queued_for_deletion(r[0].topic)]
        if failed:
            self._replicas.handle_state_changes(failed, RS.DELETION_INELIGIBLE)
            self.mark_ineligible({tp.topic for tp, _ in failed})
            self.resume_deletions()

    def complete_replica_deletion(self, replicas: Iterable[Replica]) -> None:
        succeeded = [
            r for r in replicas if self.enabled and self._context.is_queued_for_deletion(r[0].topic)
        ]
        self._replicas.handle_state_changes(succeeded, RS.DELETION_SUCCESSFUL)
        self.resume_deletions()

    def mark_ineligible(self, topics: Iterable[str]) -> None:
        if not self.enabled:
            return
        context = self._context
        halted = set(topics) & context.topics_to_be_deleted
        context.topics_ineligible_for_deletion |= halted

    def resume_deletions(self) -> None:
        context = self._context
        retry: list[str] = []
        eligible: list[str] = []
        for topic in sorted(context.topics_to_be_deleted):
            if context.are_all_replicas_in_state(topic, RS.DELETION_SUCCESSFUL):
                self._complete_delete_topic(topic)
            elif not context.is_any_replica_in_state(topic, RS.DELETION_STARTED) and (
                context.is_any_replica_in_state(topic, RS.DELETION_INELIGIBLE)
            ):
                retry.append(topic)
            if self._is_eligible(topic):
                eligible.append(topic)
        if retry:
            # reset Ineligible -> Offline, even while the topic is still ineligible (§19.14)
            failed = [
                r for t in retry for r in context.replicas_in_state(t, RS.DELETION_INELIGIBLE)
            ]
            self._replicas.handle_state_changes(failed, RS.OFFLINE)
        if eligible:
            self._on_topic_deletion(eligible)

    def _is_eligible(self, topic: str) -> bool:
        context = self._context
        return (
            context.is_queued_for_deletion(topic)
            and not context.is_any_replica_in_state(topic, RS.DELETION_STARTED)
            and topic not in context.topics_ineligible_for_deletion
        )

    def _complete_delete_topic(self, topic: str) -> None:
        context = self._context
        successful = context.replicas_in_state(topic, RS.DELETION_SUCCESSFUL)
        self._replicas.handle_state_changes(successful, RS.NON_EXISTENT)
        context.remove_topic(topic)

    def _on_topic_deletion(self, topics: list[str]) -> None:
        context = self._context
        unseen = [t for t in topics if t not in context.topics_with_deletion_started]
        if unseen:
            partitions = [tp for t in unseen for tp in context.partitions_of_topic(t)]
            self._partitions.handle_state_changes(partitions, PartitionState.OFFLINE)
            self._partitions.handle_state_changes(partitions, PartitionState.NON_EXISTENT)
            context.topics_with_deletion_started.update(unseen)
        self._send_update_metadata([tp for t in topics for tp in context.partitions_of_topic(t)])
        self._on_partition_deletion(topics)

    def _on_partition_deletion(self, topics: list[str]) -> None:
        context = self._context
        dead: list[Replica] = []
        retry: list[Replica] = []
        with_dead: list[str] = []
        for topic in topics:
            topic_dead = []
            for tp, broker in context.replicas_of_topic(topic):
                if not context.is_live(broker):
                    topic_dead.append((tp, broker))
                elif context.replica_state(tp, broker) is not RS.DELETION_SUCCESSFUL:
                    retry.append((tp, broker))
            dead.extend(topic_dead)
            if topic_dead:
                with_dead.append(topic)
        self._replicas.handle_state_changes(dead, RS.DELETION_INELIGIBLE)
        self._replicas.handle_state_changes(retry, RS.OFFLINE)
        self._replicas.handle_state_changes(retry, RS.DELETION_STARTED)
        if with_dead:
            self.mark_ineligible(with_dead)
