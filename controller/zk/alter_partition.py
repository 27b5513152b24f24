"""AlterPartition from a partition leader (SPEC §13.1): validate, write, tell everyone."""

from __future__ import annotations

from typing import NamedTuple

from controller.model import LeaderAndIsr, RecoveryState, TopicPartition
from controller.zk.context import ControllerContext
from controller.zk.parts import ControllerParts


# The request and its answers are built for every isr_change: named tuples (immutable, and
# built in one call where a frozen dataclass sets each field through object.__setattr__).
class PartitionChange(NamedTuple):
    """One partition of an AlterPartition request: what its leader proposes."""

    tp: TopicPartition
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    recovery: RecoveryState = RecoveryState.RECOVERED


class AlterPartitionRequest(NamedTuple):
    broker: int
    broker_epoch: int
    partitions: tuple[PartitionChange, ...]


class AlterPartitionResult(NamedTuple):
    error: str | None  # Kafka's error code name; None on success
    leadership: LeaderAndIsr | None = None
    message: str | None = None


def alter_partition(
    parts: ControllerParts, request: AlterPartitionRequest
) -> dict[TopicPartition, AlterPartitionResult]:
    """Kafka's tryProcessAlterPartition (request version 3: INELIGIBLE_REPLICA). A top-level
    error answers every partition. The caller runs maybeCompleteReassignment afterwards."""
    context = parts.context
    registered = context.brokers.get(request.broker)
    stale: AlterPartitionResult | None = None
    if registered is None or not context.is_registered(request.broker):
        stale = AlterPartitionResult(
            "STALE_BROKER_EPOCH", message=f"broker {request.broker} is not registered"
        )
    elif registered.epoch != request.broker_epoch:
        stale = AlterPartitionResult(
            "STALE_BROKER_EPOCH",
            message=f"broker epoch {request.broker_epoch} is not the registered epoch "
            f"{registered.epoch}",
        )
    if stale is not None:
        return {change.tp: stale for change in request.partitions}
    results: dict[TopicPartition, AlterPartitionResult] = {}
    for change in request.partitions:
        record = context.partition(change.tp)
        current = None if record is None else record.leadership
        result = _validate(context, request.broker, change, current)
        if result is None:
            assert record is not None and current is not None  # accepted: both exist
            # the proposal after its conditional write; the leader epoch is not bumped
            written = LeaderAndIsr.after_write(
                request.broker,
                change.leader_epoch,
                change.isr,
                change.recovery,
                current.partition_epoch,
                context.epoch,
            )
            context.set_leadership(record, written)
            result = AlterPartitionResult(None, written)
        results[change.tp] = result
    # every partition of the request, accepted or not, is re-announced (one without
    # leadership is skipped); the UpdateMetadata goes out even when none is left: it then
    # carries only the live brokers (KafkaController.tryProcessAlterPartition)
    parts.send_update_metadata(context.registered_broker_ids(), list(results))
    return results


def _validate(
    context: ControllerContext,
    broker: int,
    request: PartitionChange,
    current: LeaderAndIsr | None,
) -> AlterPartitionResult | None:
    """The first matching rule of §13.1 against the partition's cached leadership
    `current`; None means accepted."""
    if current is None:
        return AlterPartitionResult(
            "UNKNOWN_TOPIC_OR_PARTITION", message="The partition does not exist."
        )
    if (
        request.partition_epoch > current.partition_epoch
        or request.leader_epoch > current.leader_epoch
    ):
        return AlterPartitionResult(
            "NOT_CONTROLLER", message="the request is ahead of the controller's state"
        )
    if request.leader_epoch < current.leader_epoch:
        return AlterPartitionResult(
            "FENCED_LEADER_EPOCH",
            message=f"leader epoch {request.leader_epoch} is older than {current.leader_epoch}",
        )
    if (
        broker == current.leader
        and request.isr == current.isr
        and request.recovery is current.recovery
    ):
        # an idempotent retry: success, no write (partition epoch may be stale)
        return AlterPartitionResult(None, current)
    if request.partition_epoch < current.partition_epoch:
        return AlterPartitionResult(
            "INVALID_UPDATE_VERSION",
            message=f"partition epoch {request.partition_epoch} is older "
            f"than {current.partition_epoch}",
        )
    if request.recovery is RecoveryState.RECOVERING and len(request.isr) > 1:
        return AlterPartitionResult(
            "INVALID_REQUEST", message="leader is recovering and ISR is greater than 1"
        )
    if current.recovery is RecoveryState.RECOVERED and request.recovery is RecoveryState.RECOVERING:
        return AlterPartitionResult(
            "INVALID_REQUEST",
            message="the leader recovery state cannot change from RECOVERED to RECOVERING",
        )
    live = context.live_broker_set()
    if not live.issuperset(request.isr):  # (in C: this runs for every change accepted)
        ineligible = sorted(set(request.isr) - live)
        return AlterPartitionResult(
            "INELIGIBLE_REPLICA",
            message=f"ineligible replicas {ineligible} in the new ISR {list(request.isr)}",
        )
    return None
