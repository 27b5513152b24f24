"""Proposals: a safe order for a roll (with holds where no order suffices), and the
reassignment that empties a broker for a decommission.

Both are searched on a model of the state (`ClusterView`: replicas, ISR, leader, live
brokers, min ISR per topic), in time linear in the replicas concerned, and then checked
by planning them through the core like any plan: the model proposes, the controller's
rules judge.

**Roll order.** Stopping broker B leaves partition p with its ISR less B; p stays led and
at or above min ISR iff B is not in p's ISR or |ISR(p)| - 1 >= min ISR(p). A restarted
broker catches up and rejoins the ISR of the partitions it hosts that have a live leader,
so rolling brokers only ever adds ISR members: once B is safe to stop it stays so. Hence
a greedy search is complete: repeatedly take the first broker of the requested order
that is safe to stop now; if every remaining broker is blocked, no order without waiting
exists, and the search adds a hold before the first remaining broker (wait until every
live replica of the partitions that block it is back in their ISR, which the leaders do
once those replicas catch up). A partition blocks a broker for good, whatever the order
and however long one waits, when it has fewer live replicas than min ISR + 1 (RF 1 on a
rolled broker, RF 2 with min ISR 2, a replica on a broker that is down): then no safe
order exists, and those partitions are named. Cost: one pass over the partitions to
find the blocking ones, then per rolled broker the partitions it hosts (O(replicas)), and
O(brokers²) to pick the next broker.

**Decommission.** Every partition with a replica on B gets B's replica replaced by one on
a live broker that holds none of the partition yet: the same rack as B where such a
broker exists (the partition's rack spread unchanged), else a rack the partition does not
use yet, else any; among those the broker with the fewest replicas (after the moves so
far), then the lowest id. B is taken out of the list and the new broker appended: the
first replica, the preferred leader, stays the same unless it was B, and then the next
one in the list, which Kafka's controller also elects when the reassignment completes
(the first live in-sync broker of the target list). So leadership moves only for the
partitions B leads, which any plan must move: the fewest leader moves possible, and none
later from a preferred-leader election. Cost: O(replicas on B times brokers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.plan.steps import Move, PlanInputError
from controller.plan.view import LIVE, ClusterView, Key, key_name


@dataclass(slots=True)
class RollProposal:
    order: list[int]
    holds: dict[int, list[Key]] = field(default_factory=dict)  # broker -> wait for these
    # partitions no order or wait makes safe, each with the brokers it blocks and why
    impossible: dict[Key, str] = field(default_factory=dict)

    @property
    def exists(self) -> bool:
        return not self.impossible


def search_roll(view: ClusterView, brokers: Sequence[int]) -> RollProposal:
    """A roll of `brokers` (in that order of preference) that keeps every partition led
    and at or above min ISR at every step, or the partitions that make that impossible."""
    live = view.live_brokers()
    rolling = set(brokers)
    # per partition concerned: its ISR (live members), the live replicas lagging, min ISR
    isr: dict[Key, set[int]] = {}
    lagging: dict[Key, set[int]] = {}
    minimum: dict[Key, int] = {}
    blockers: dict[int, set[Key]] = {b: set() for b in brokers}
    impossible: dict[Key, str] = {}
    held_from_start: list[Key] = []
    rolled: set[Key] = set()
    for broker in brokers:
        rolled.update(view.hosted.get(broker, ()))
    # the partitions a rolled broker hosts, and those already offline or under min ISR
    # (the verdict counts them at every step until mended)
    for key in sorted(rolled | view.offline | view.under_min_isr):
        part = view.partitions[key]
        m = view.min_isr_of(key)
        live_replicas = [b for b in part.replicas if b in live]
        if part.leader < 0 or part.leader not in live:
            impossible[key] = "has no live leader before the first step" + (
                " (its topic is queued for deletion)" if key[0] in view.deleting else ""
            )
            continue
        if key not in rolled and len(live_replicas) < m:
            impossible[key] = (
                f"is under min ISR {m} before the first step, with {len(live_replicas)} live "
                f"replica{'s' if len(live_replicas) != 1 else ''} to mend it"
            )
            continue
        if key in rolled and len(live_replicas) - 1 < m:
            down = [b for b in part.replicas if b not in live]
            why = f"{len(live_replicas)} live replica{'s' if len(live_replicas) != 1 else ''}"
            why += f" {live_replicas}" + (f" (down: {down})" if down else "")
            left = "without a leader" if len(live_replicas) <= 1 else "under min ISR"
            them = "it" if len(live_replicas) == 1 else "any of them"
            impossible[key] = f"{why}, min ISR {m}: stopping {them} leaves it {left}"
            continue
        members = {b for b in part.isr if b in live}
        isr[key], lagging[key], minimum[key] = members, set(live_replicas) - members, m
        if len(members) < m:
            held_from_start.append(key)  # under min ISR already: only a wait mends it
        elif len(members) - 1 < m:
            for b in members & rolling:
                blockers[b].add(key)
    proposal = RollProposal([], {}, impossible)
    if impossible:
        return proposal
    pending = list(brokers)
    first_hold = sorted(held_from_start)

    def catch_up(keys: Sequence[Key], joining: int | None) -> None:
        """`joining` rejoins the ISR of `keys` (None: every lagging live replica does)."""
        for key in keys:
            members = isr[key]
            if joining is None:
                members |= lagging[key]
                lagging[key] = set()
            elif joining in lagging[key]:
                members.add(joining)
                lagging[key].discard(joining)
            else:
                continue
            blocks = len(members) - 1 < minimum[key]
            for b in members & rolling:
                if blocks:
                    blockers[b].add(key)
                else:
                    blockers[b].discard(key)

    catch_up(first_hold, None)
    while pending:
        ready = next((b for b in pending if not blockers[b]), None)
        waited: list[Key] = []
        if ready is None:  # every remaining broker blocked: wait before the first one
            ready = pending[0]
            waited = sorted(blockers[ready])
            catch_up(waited, None)
        if not proposal.order and first_hold:
            waited = sorted(set(waited) | set(first_hold))
        if waited:
            proposal.holds[ready] = waited
        pending.remove(ready)
        proposal.order.append(ready)
        catch_up([k for k in view.hosted.get(ready, ()) if k in isr], ready)
    return proposal


def describe_roll(proposal: RollProposal, requested: Sequence[int]) -> list[str]:
    """The proposal in words, for the terminal and the JSON."""
    if not proposal.exists:
        lines = ["no safe order exists: whatever the order and however long each step waits,"]
        for key, why in sorted(proposal.impossible.items()):
            lines.append(f"  {key_name(key)}: {why}")
        return lines
    lines = []
    if proposal.order != list(requested):
        lines.append("safe order: roll:" + ",".join(map(str, proposal.order)))
    for broker, keys in proposal.holds.items():
        shown = ", ".join(key_name(k) for k in keys[:10])
        more = f" and {len(keys) - 10} more" if len(keys) > 10 else ""
        lines.append(
            f"hold before stopping {broker} until the ISR of {shown}{more} holds every live "
            "replica again"
        )
    if not lines:
        lines.append("the requested order is safe")
    return lines


# ---- decommission ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decommission:
    broker: int
    moves: list[Move]
    leader_moves: int  # partitions B leads: their leadership must move
    # partitions with no live replica but B's while B is down: their moves cannot finish
    # (nothing to copy from) until B returns
    stranded: tuple[str, ...] = ()


def propose_decommission(view: ClusterView, broker: int) -> Decommission:
    if broker not in view.known_brokers():
        known = ", ".join(map(str, sorted(view.known_brokers()))) or "none"
        raise PlanInputError(f"decommission: unknown broker {broker} (the state knows {known})")
    live = sorted(b for b in view.live_brokers() if b != broker)
    racks = {b: info.rack for b, info in view.brokers.items()}
    load = {b: 0 for b in live}
    for b, count in view.replicas_per_broker().items():
        if b in load:
            load[b] = count
    own_rack = racks.get(broker)
    moves: list[Move] = []
    stuck: list[str] = []
    stranded: list[str] = []
    running = view.registered_brokers()
    leads = 0
    for key in sorted(view.hosted.get(broker, ())):
        part = view.partitions[key]
        rest = [b for b in part.replicas if b != broker]
        candidates = [b for b in live if b not in part.replicas]
        if not candidates:
            stuck.append(key_name(key))
            continue
        used = {racks.get(b) for b in rest}
        same = [b for b in candidates if own_rack is not None and racks.get(b) == own_rack]
        fresh = [b for b in candidates if racks.get(b) is not None and racks.get(b) not in used]
        pool = same or fresh or candidates
        chosen = min(pool, key=lambda b: (load[b], b))
        load[chosen] += 1
        moves.append((key[0], key[1], (*rest, chosen)))
        leads += part.leader == broker
        if broker not in running and not running.intersection(rest):
            stranded.append(key_name(key))
    if stuck:
        shown = ", ".join(stuck[:20]) + (f" and {len(stuck) - 20} more" if len(stuck) > 20 else "")
        raise PlanInputError(
            f"decommission: broker {broker}'s replicas of {shown} have nowhere to go: every "
            "live broker already holds a replica of them"
        )
    return Decommission(broker, moves, leads, tuple(stranded))


def is_live(view: ClusterView, broker: int) -> bool:
    info = view.brokers.get(broker)
    return info is not None and info.status == LIVE
