"""PartitionStateMachine (SPEC §4): four partition states, initialization and elections."""

from __future__ import annotations

from collections.abc import Iterable

from controller.config import UNCLEAN_KEY, Settings, parse_bool
from controller.model import LeaderAndIsr, PartitionState, TopicPartition
from controller.zk.batch import RequestBatch
from controller.zk.context import ControllerContext, Partition
from controller.zk.election import (
    CONTROLLED_SHUTDOWN,
    PREFERRED,
    REASSIGN,
    ElectionResult,
    Strategy,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred,
    leader_for_reassign,
)
from controller.zk.journal import Journal

PS = PartitionState

VALID_PREVIOUS: dict[PartitionState, tuple[PartitionState, ...]] = {
    PS.NEW: (PS.NON_EXISTENT,),
    PS.ONLINE: (PS.NEW, PS.ONLINE, PS.OFFLINE),
    PS.OFFLINE: (PS.NEW, PS.ONLINE, PS.OFFLINE),
    PS.NON_EXISTENT: (PS.OFFLINE,),
}

ENTITY = "partition"


class StateChangeFailed(Exception):
    """Kafka's StateChangeFailedException: an election that found no leader, and the like."""


# An election outcome: the new leadership, or the reason it failed.
ElectionOutcome = LeaderAndIsr | StateChangeFailed


class PartitionStateMachine:
    def __init__(
        self,
        context: ControllerContext,
        journal: Journal,
        batch: RequestBatch,
        settings: Settings,
    ) -> None:
        self._context = context
        self._journal = journal
        self._batch = batch
        self._settings = settings

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: Strategy | None = None,
    ) -> dict[TopicPartition, ElectionOutcome]:
        """One batch per call. The result holds the outcome of each election run (not of
        New-partition initializations, nor of invalid transitions)."""
        partitions = list(partitions)
        if not partitions:
            return {}
        self._batch.new_batch()
        result = self._change(partitions, target, strategy)
        self._batch.send()
        return result

    def _change(
        self, partitions: list[TopicPartition], target: PartitionState, strategy: Strategy | None
    ) -> dict[TopicPartition, ElectionOutcome]:
        context = self._context
        valid: list[Partition] = []
        valid_before = VALID_PREVIOUS[target]
        for tp, record in context.records_of(partitions):  # one lookup per run of a topic
            current = PS.NON_EXISTENT if record is None else record.state
            if record is not None and current in valid_before:
                valid.append(record)
            else:
                self._log_invalid(tp, current, target)

        if target is PS.ONLINE:
            uninitialized = [r for r in valid if r.state is PS.NEW]
            to_elect = [r for r in valid if r.state is not PS.NEW]
            if uninitialized:
                self._initialize(uninitialized)
            if not to_elect:
                return {}
            if strategy is None:
                raise ValueError(
                    "Election strategy is a required field when the target state is OnlinePartition"
                )
            return self._elect(to_elect, strategy)

        for record in valid:
            current = record.state
            context.set_partition_state(record, target)
            self._journal.state_change(ENTITY, record.tp, None, current, target, record.leadership)
        return {}

    def _initialize(self, records: list[Partition]) -> None:
        """§4.3: leader = first live replica, ISR = the live replicas, epochs 0."""
        context = self._context
        epoch = context.epoch
        for record in records:
            replicas = record.assignment.replicas
            live = tuple(r for r in replicas if context.is_live(r))
            if not live:
                self._journal.state_change(
                    ENTITY,
                    record.tp,
                    None,
                    PS.NEW,
                    PS.ONLINE,
                    None,
                    error=f"Controller {context.controller_id} epoch {epoch} encountered error "
                    f"during state change of partition {record.tp} from New to Online, assigned "
                    f"replicas are [{','.join(map(str, replicas))}], live brokers are "
                    f"[{','.join(map(str, context.live_broker_ids()))}]. No assigned replica is "
                    "alive.",
                )
                continue
            leadership = LeaderAndIsr(live[0], 0, live, 0, controller_epoch=epoch)
            context.set_leadership(record, leadership)
            self._batch.add_leader_and_isr(
                live, record.tp, leadership, record.assignment, is_new=True, record=record
            )
            context.set_partition_state(record, PS.ONLINE)
            self._journal.state_change(ENTITY, record.tp, None, PS.NEW, PS.ONLINE, leadership)

    def _elect(
        self, records: list[Partition], strategy: Strategy
    ) -> dict[TopicPartition, ElectionOutcome]:
        """§4.4: elect with the strategy, write, and tell the strategy's recipients."""
        context = self._context
        results: dict[TopicPartition, ElectionOutcome] = {}
        for record in records:
            current_state = record.state
            leadership = record.leadership
            if leadership is None:
                failure = StateChangeFailed(
                    f"LeaderAndIsr information doesn't exist for partition {record.tp} in "
                    f"{current_state} state"
                )
                results[record.tp] = failure
                self._log_failed(record, current_state, failure)
                continue
            election = self._run_election(record, leadership, strategy)
            if election.leadership is None:
                failure = StateChangeFailed(
                    f"Failed to elect leader for partition {record.tp} under strategy {strategy}"
                )
                results[record.tp] = failure
                self._log_failed(record, current_state, failure)
                continue
            written = election.leadership.written(context.epoch)
            context.set_leadership(record, written)
            self._batch.add_leader_and_isr(
                election.recipients,
                record.tp,
                written,
                record.assignment,
                is_new=False,
                record=record,
            )
            context.set_partition_state(record, PS.ONLINE)
            self._journal.state_change(
                ENTITY, record.tp, None, current_state, PS.ONLINE, written, unclean=election.unclean
            )
            results[record.tp] = written
        return results

    def _run_election(
        self, record: Partition, leadership: LeaderAndIsr, strategy: Strategy
    ) -> ElectionResult:
        context = self._context
        replicas = record.assignment.replicas
        # is_live and is_registered as the sets' own tests: called in C, per replica
        live = context.live_broker_set()
        if strategy is REASSIGN:
            return leader_for_reassign(record.assignment.target, leadership, live.__contains__)
        if strategy is PREFERRED:
            return leader_for_preferred(replicas, leadership, live.__contains__)
        if strategy is CONTROLLED_SHUTDOWN:
            return leader_for_controlled_shutdown(
                replicas,
                leadership,
                context.registered_broker_set().__contains__,
                context.shutting_down,
            )
        # Offline: unclean only matters when no ISR member is live; then an admin-triggered
        # election allows it outright, otherwise the topic's config (or the default) decides.
        no_live_isr = live.isdisjoint(leadership.isr)
        unclean = no_live_isr and (strategy.allow_unclean or self.unclean_enabled(record.tp.topic))
        return leader_for_offline(replicas, leadership, live.__contains__, unclean)

    def unclean_enabled(self, topic: str) -> bool:
        info = self._context.topics.get(topic)
        override = None if info is None else info.configs.get(UNCLEAN_KEY)
        if override is None:
            # the dynamic cluster default (/config/brokers/<default>), else the static one
            override = self._context.cluster_configs.get(UNCLEAN_KEY)
            if override is None:
                return self._settings.unclean_leader_election_enable
        return parse_bool(UNCLEAN_KEY, override)

    def _log_failed(
        self, record: Partition, current: PartitionState, failure: StateChangeFailed
    ) -> None:
        self._journal.state_change(
            ENTITY, record.tp, None, current, PS.ONLINE, record.leadership, error=str(failure)
        )

    def _log_invalid(
        self, tp: TopicPartition, current: PartitionState, target: PartitionState
    ) -> None:
        valid = ",".join(s.value for s in VALID_PREVIOUS[target])
        self._journal.state_change(
            ENTITY,
            tp,
            None,
            current,
            target,
            self._context.leadership(tp),
            error=f"Partition {tp} should be in one of {valid} states before moving to {target} "
            f"state. Instead it is in {current} state",
        )
