"""Leader elections on demand (SPEC §12): admin-triggered and the auto rebalance check."""

from __future__ import annotations

from collections.abc import Iterable

from controller.model import NO_LEADER, PartitionState, TopicPartition
from controller.zk.context import Partition
from controller.zk.election import PREFERRED, leader_for_preferred, offline_strategy
from controller.zk.partition_state_machine import ElectionOutcome, StateChangeFailed
from controller.zk.parts import ControllerParts

PREFERRED_ELECTION = "preferred"
UNCLEAN_ELECTION = "unclean"


class LeaderElections:
    def __init__(self, parts: ControllerParts) -> None:
        self._parts = parts

    def admin_election(self, election: str, requested: Iterable[TopicPartition] | None) -> None:
        """ReplicaLeaderElection triggered by the AdminClient; one event_results row per
        partition. `requested=None` means every partition the brokers know of, and then,
        as KafkaApis does, ELECTION_NOT_NEEDED answers are left out."""
        context = self._parts.context
        journal = self._parts.journal
        all_requested = requested is None
        unknown: list[TopicPartition] = []
        deleting: list[TopicPartition] = []
        if requested is None:
            # what the brokers' metadata caches hold: partitions with a leader, minus those
            # of topics being deleted (the UpdateMetadata with leader -2 removed them); for
            # a preferred election only those not led by their preferred replica (the
            # others are not electable, and with every partition requested get no answer)
            live = (
                context.records_not_led_by_preferred()
                if election == PREFERRED_ELECTION
                else context.records_with_leaders()
            )
        else:
            partitions = list(dict.fromkeys(requested))
            live = []
            for tp in partitions:
                record = context.partition(tp)
                if record is None:
                    unknown.append(tp)
                elif context.is_queued_for_deletion(tp.topic):
                    deleting.append(tp)
                else:
                    live.append(record)
        if requested is not None and any(record.leadership is None for record in live):
            # Kafka's `partitionLeadershipInfo(tp).get` throws: the event fails and the
            # callback never runs, so the client's request times out.
            for tp in partitions:
                journal.result(
                    tp.topic,
                    tp.partition,
                    "REQUEST_TIMED_OUT",
                    "the controller failed the election request: a partition has "
                    "no leader and ISR yet",
                )
            return
        electable: list[TopicPartition] = []
        not_needed: list[TopicPartition] = []
        is_electable = (
            self._preferred_not_leading
            if election == PREFERRED_ELECTION
            else (self._leader_offline)
        )
        for record in live:
            (electable if is_electable(record) else not_needed).append(record.tp)
        outcomes = self.on_replica_election(electable, election, admin=True)
        failure_code = (
            "PREFERRED_LEADER_NOT_AVAILABLE"
            if election == PREFERRED_ELECTION
            else "ELIGIBLE_LEADERS_NOT_AVAILABLE"
        )
        for tp, outcome in outcomes.items():
            if isinstance(outcome, StateChangeFailed):
                journal.result(tp.topic, tp.partition, failure_code, str(outcome))
            else:
                journal.result(tp.topic, tp.partition, None, None, outcome)
        if not all_requested:
            for tp in not_needed:
                journal.result(
                    tp.topic,
                    tp.partition,
                    "ELECTION_NOT_NEEDED",
                    "Leader election not needed for topic partition.",
                )
        for tp in deleting:
            journal.result(
                tp.topic, tp.partition, "INVALID_TOPIC_EXCEPTION", "The topic is being deleted"
            )
        for tp in unknown:
            journal.result(
                tp.topic,
                tp.partition,
                "UNKNOWN_TOPIC_OR_PARTITION",
                "The partition does not exist.",
            )

    @staticmethod
    def _preferred_not_leading(record: Partition) -> bool:
        leadership = record.leadership
        assert leadership is not None
        return leadership.leader != record.assignment.replicas[0]

    def _leader_offline(self, record: Partition) -> bool:
        leadership = record.leadership
        assert leadership is not None
        return leadership.leader == NO_LEADER or not self._parts.context.is_live(leadership.leader)

    def on_replica_election(
        self, partitions: list[TopicPartition], election: str, admin: bool
    ) -> dict[TopicPartition, ElectionOutcome]:
        strategy = PREFERRED if election == PREFERRED_ELECTION else offline_strategy(admin)
        return self._parts.partitions.handle_state_changes(
            partitions, PartitionState.ONLINE, strategy
        )

    def auto_rebalance(self) -> None:
        """checkAndTriggerAutoLeaderRebalance (§12.3, 3.4+: runs during reassignments)."""
        parts = self._parts
        if not parts.settings.auto_leader_rebalance_enable:
            return
        context = parts.context
        by_preferred: dict[int, list[TopicPartition]] = {}
        for record in context.all_partitions():
            if context.is_queued_for_deletion(record.tp.topic) or not record.assignment.replicas:
                continue
            by_preferred.setdefault(record.assignment.replicas[0], []).append(record.tp)
        threshold = parts.settings.leader_imbalance_per_broker_percentage / 100
        for preferred in sorted(by_preferred):
            partitions = by_preferred[preferred]
            not_preferred = []
            for tp in partitions:
                leadership = context.leadership(tp)
                if leadership is not None and leadership.leader != preferred:
                    not_preferred.append(tp)
            if len(not_preferred) / len(partitions) > threshold:
                candidates = [tp for tp in not_preferred if self._can_preferred_lead(tp)]
                self.on_replica_election(candidates, PREFERRED_ELECTION, admin=False)

    def _can_preferred_lead(self, tp: TopicPartition) -> bool:
        context = self._parts.context
        leadership = context.leadership(tp)
        assert leadership is not None
        assignment = context.assignment(tp).replicas
        return leader_for_preferred(assignment, leadership, context.is_live).leadership is not None
