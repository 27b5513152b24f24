"""Invariants Kafka's controller keeps (CONTRACT §2 `violations`), checked on one partition's
state at a time: kcsim's own after every event that touched it (`simulated`; a row is a
bug in kcsim, an imported state that breaks them, or the one state Kafka's controller
also writes that README's `violations` names), and a real controller's, as an event's
`observed` gives it (`observed`).

Pure functions over plain values: the caller keeps what a partition looked like before
(`Epochs`), so that a check costs the partition, never the cluster.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

SIMULATED = "simulated"
OBSERVED = "observed"

# what must hold (the `invariant` column)
LEADER_IN_ISR = "leader_in_isr"
ISR_IN_REPLICAS = "isr_in_replicas"
ONLINE_ISR_NOT_EMPTY = "online_isr_not_empty"
LEADER_EPOCH_NEVER_DECREASES = "leader_epoch_never_decreases"
PARTITION_EPOCH_NEVER_DECREASES = "partition_epoch_never_decreases"
CONTROLLER_EPOCH_NEVER_DECREASES = "controller_epoch_never_decreases"
ONE_LEADER_PER_EPOCH = "one_leader_per_leader_epoch"
NO_DELIVERY_TO_DEAD_BROKER = "no_request_delivered_to_dead_broker"


class Violation(NamedTuple):
    source: str  # SIMULATED | OBSERVED
    invariant: str
    topic: str | None
    partition: int | None
    broker: int | None
    detail: str


class Epochs(Protocol):
    """What a partition's later state is checked against: its last leader and epochs."""

    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def partition_epoch(self) -> int | None: ...
    @property
    def controller_epoch(self) -> int | None: ...


class SeenEpochs(NamedTuple):
    """An observed partition's last leader and epochs (None: not given)."""

    leader: int
    leader_epoch: int
    partition_epoch: int | None
    controller_epoch: int | None


def check_partition(
    source: str,
    topic: str,
    partition: int,
    before: Epochs | None,
    leader: int,
    leader_epoch: int,
    partition_epoch: int | None,
    controller_epoch: int | None,
    isr: tuple[int, ...],
    replicas: tuple[int, ...] | None,
    online: bool,
    out: list[Violation],
) -> None:
    """Append to `out` every invariant a partition's state breaks. `before` is its previous
    state (None: first seen, or its topic was re-created); `replicas` None when unknown
    (an observed state that leaves them out); `online`: the partition claims a leader."""
    if leader >= 0 and leader not in isr:
        out.append(
            Violation(
                source,
                LEADER_IN_ISR,
                topic,
                partition,
                leader,
                f"leader {leader} is not in the ISR {list(isr)}",
            )
        )
    # Kafka never removes a partition's last ISR member (SPEC §6.3): a reassignment
    # cancelled after its adding replica became that member (§14.6) leaves it, leaderless,
    # outside the replicas; Kafka's controller writes that state, so it is not a violation
    kept_last = leader < 0 and len(isr) == 1
    if replicas is not None and not kept_last:
        for broker in isr:
            if broker not in replicas:
                out.append(
                    Violation(
                        source,
                        ISR_IN_REPLICAS,
                        topic,
                        partition,
                        broker,
                        f"ISR member {broker} is not a replica: ISR {list(isr)}, "
                        f"replicas {list(replicas)}",
                    )
                )
    if online and not isr:
        out.append(
            Violation(
                source,
                ONLINE_ISR_NOT_EMPTY,
                topic,
                partition,
                None,
                f"the partition is online (leader {leader}) with an empty ISR",
            )
        )
    if before is None:
        return
    if leader_epoch < before.leader_epoch:
        out.append(
            Violation(
                source,
                LEADER_EPOCH_NEVER_DECREASES,
                topic,
                partition,
                None,
                f"leader_epoch went from {before.leader_epoch} to {leader_epoch}",
            )
        )
    elif leader_epoch == before.leader_epoch and leader != before.leader:
        out.append(
            Violation(
                source,
                ONE_LEADER_PER_EPOCH,
                topic,
                partition,
                leader,
                f"leader_epoch {leader_epoch} had leader {before.leader}, now {leader}",
            )
        )
    # (spelled out, not looped over: this runs for every partition an event touches)
    was = before.partition_epoch
    if was is not None and partition_epoch is not None and partition_epoch < was:
        out.append(
            Violation(
                source,
                PARTITION_EPOCH_NEVER_DECREASES,
                topic,
                partition,
                None,
                f"partition_epoch went from {was} to {partition_epoch}",
            )
        )
    was = before.controller_epoch
    if was is not None and controller_epoch is not None and controller_epoch < was:
        out.append(
            Violation(
                source,
                CONTROLLER_EPOCH_NEVER_DECREASES,
                topic,
                partition,
                None,
                f"controller_epoch went from {was} to {controller_epoch}",
            )
        )


def delivered_to_dead(broker: int, request_type: str) -> Violation:
    """A request marked delivered to a broker that had no registration when it was sent."""
    return Violation(
        SIMULATED,
        NO_DELIVERY_TO_DEAD_BROKER,
        None,
        None,
        broker,
        f"a {request_type} request was delivered to broker {broker}, which is not registered",
    )


def rows(
    cluster: str, event_id: str | None, seq: int | None, ts: int | None, found: list[Violation]
) -> list[dict[str, object]]:
    """`violations` rows of one event, in a fixed order (both engines alike)."""
    found.sort(key=_order)
    return [
        {
            "cluster": cluster,
            "event_id": event_id,
            "seq": seq,
            "ts": ts,
            "source": v.source,
            "invariant": v.invariant,
            "topic": v.topic,
            "partition": v.partition,
            "broker": v.broker,
            "detail": v.detail,
        }
        for v in found
    ]


def _order(v: Violation) -> tuple[object, ...]:
    return (
        v.source,
        v.topic or "",
        -1 if v.partition is None else v.partition,
        v.invariant,
        -1 if v.broker is None else v.broker,
        v.detail,
    )
