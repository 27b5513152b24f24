"""The pieces every controller handler works with, wired once per cluster."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.config import Settings
from controller.model import TopicPartition
from controller.zk.batch import RequestBatch
from controller.zk.context import ControllerContext
from controller.zk.deletion import TopicDeletionManager
from controller.zk.journal import Journal
from controller.zk.partition_state_machine import PartitionStateMachine
from controller.zk.replica_state_machine import ReplicaStateMachine


@dataclass(frozen=True, slots=True)
class ControllerParts:
    context: ControllerContext
    journal: Journal
    settings: Settings
    batch: RequestBatch
    replicas: ReplicaStateMachine
    partitions: PartitionStateMachine
    deletion: TopicDeletionManager

    @classmethod
    def wire(
        cls, context: ControllerContext, journal: Journal, settings: Settings
    ) -> ControllerParts:
        # Kafka gives each state machine and the controller a batch of its own; none of
        # them nests a batch in another, so one shared batch sends the same requests.
        batch = RequestBatch(context, journal)
        replicas = ReplicaStateMachine(context, journal, batch)
        partitions = PartitionStateMachine(context, journal, batch, settings)

        def send_update_metadata(tps: Iterable[TopicPartition]) -> None:
            send_update_metadata_request(context, batch, context.registered_broker_ids(), tps)

        deletion = TopicDeletionManager(
            context, replicas, partitions, send_update_metadata, settings.delete_topic_enable
        )
        return cls(context, journal, settings, batch, replicas, partitions, deletion)

    def send_update_metadata(
        self, brokers: Iterable[int], tps: Iterable[TopicPartition] = ()
    ) -> None:
        send_update_metadata_request(self.context, self.batch, brokers, tps)

    def send_full_update_metadata(self, brokers: Iterable[int]) -> None:
        """sendUpdateMetadataRequest(brokers, every partition with a leader): what a new
        broker is sent, from the records rather than looking each partition up."""
        batch = self.batch
        batch.new_batch()
        batch.add_update_metadata(brokers)
        batch.add_full_update_metadata()
        batch.send()


def send_update_metadata_request(
    context: ControllerContext,
    batch: RequestBatch,
    brokers: Iterable[int],
    tps: Iterable[TopicPartition],
) -> None:
    """KafkaController.sendUpdateMetadataRequest: a batch of its own."""
    batch.new_batch()
    batch.add_update_metadata(brokers, tps)
    batch.send()
