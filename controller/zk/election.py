"""The four leader election algorithms (SPEC §5), as pure functions.

Each takes the stored leadership and the facts it needs, and returns an `ElectionResult`:
the new leadership (None when no leader can be chosen) and the brokers that get the
LeaderAndIsr. Every success bumps the leader epoch by one, even for the same leader.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from itertools import filterfalse

from controller.model import LeaderAndIsr

IsOnline = Callable[[int], bool]


@dataclass(frozen=True, slots=True)
class ElectionResult:
    leadership: LeaderAndIsr | None
    recipients: tuple[int, ...]
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class Strategy:
    """A PartitionLeaderElectionStrategy; `str()` is Kafka's toString, used in messages."""

    name: str
    allow_unclean: bool = False

    def __str__(self) -> str:
        if self.name == "OfflinePartitionLeaderElectionStrategy":
            return f"{self.name}({str(self.allow_unclean).lower()})"
        return self.name


def offline_strategy(allow_unclean: bool) -> Strategy:
    return Strategy("OfflinePartitionLeaderElectionStrategy", allow_unclean)


REASSIGN = Strategy("ReassignPartitionLeaderElectionStrategy")
PREFERRED = Strategy("PreferredReplicaPartitionLeaderElectionStrategy")
CONTROLLED_SHUTDOWN = Strategy("ControlledShutdownPartitionLeaderElectionStrategy")


def leader_for_offline(
    assignment: tuple[int, ...],
    current: LeaderAndIsr,
    is_online: IsOnline,
    unclean_enabled: bool,
) -> ElectionResult:
    """§5.1: the first live ISR member in assignment order; else, if unclean election is
    enabled, the first live replica, alone in the ISR and RECOVERING."""
    # (filter and a plain loop rather than generators: an election runs for every
    # partition a failed or shutting-down broker led)
    live = tuple(filter(is_online, assignment))
    isr = current.isr
    for leader in live:
        if leader in isr:
            new_isr = tuple(filter(is_online, isr))
            return ElectionResult(current.new_leader_and_isr(leader, new_isr), live)
    if unclean_enabled and live:
        leader = live[0]
        return ElectionResult(
            current.new_recovering_leader_and_isr(leader, (leader,)), live, unclean=True
        )
    return ElectionResult(None, live)


def leader_for_reassign(
    target: tuple[int, ...], current: LeaderAndIsr, is_online: IsOnline
) -> ElectionResult:
    """§5.2: the first target replica that is live and in the ISR; ISR unchanged; every
    target replica is a recipient, live or not."""
    leader = next((r for r in target if is_online(r) and r in current.isr), None)
    return ElectionResult(None if leader is None else current.new_leader(leader), target)


def leader_for_preferred(
    assignment: tuple[int, ...], current: LeaderAndIsr, is_online: IsOnline
) -> ElectionResult:
    """§5.3: the preferred replica (RS head) iff live and in the ISR."""
    head = assignment[0] if assignment else None
    if head is not None and is_online(head) and head in current.isr:
        return ElectionResult(current.new_leader(head), assignment)
    return ElectionResult(None, assignment)


def leader_for_controlled_shutdown(
    assignment: tuple[int, ...],
    current: LeaderAndIsr,
    is_registered: IsOnline,
    shutting_down: Collection[int],
) -> ElectionResult:
    """§5.4: the first registered ISR member not shutting down; the ISR loses every
    shutting-down broker; registered replicas (shutting-down ones too) are recipients."""
    candidates = tuple(filter(is_registered, assignment))
    isr = current.isr
    for leader in candidates:
        if leader in isr and leader not in shutting_down:
            new_isr = tuple(filterfalse(shutting_down.__contains__, isr))
            return ElectionResult(current.new_leader_and_isr(leader, new_isr), candidates)
    return ElectionResult(None, candidates)
