"""The four leader election algorithms as pure functions (SPEC §5, EL `Election`).

Includes every row of the SPEC §5.5 table (assignment [2,4]) and Kafka's
PartitionLeaderElectionAlgorithmsTest cases.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.model import LeaderAndIsr, RecoveryState
from controller.zk.election import (
    CONTROLLED_SHUTDOWN,
    PREFERRED,
    REASSIGN,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred,
    leader_for_reassign,
    offline_strategy,
)

RECOVERED = RecoveryState.RECOVERED
RECOVERING = RecoveryState.RECOVERING


def state(leader: int, isr: tuple[int, ...], epoch: int = 5, version: int = 7) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, version, RECOVERED, controller_epoch=3)


def online(*brokers: int) -> Callable[[int], bool]:
    live = set(brokers)
    return lambda b: b in live


# ---- §5.5 table, row by row -----------------------------------------------------------------


def test_offline_table_row_live_isr_member_leads_and_isr_drops_dead() -> None:
    """§5.5 offline | ISR [2,4] | live {4} -> leader 4, ISR [4]."""
    result = leader_for_offline((2, 4), state(2, (2, 4)), online(4), unclean_enabled=False)
    assert result.leadership == LeaderAndIsr(4, 6, (4,), 7, RECOVERED, 3)
    assert result.recipients == (4,)
    assert result.unclean is False


def test_offline_table_row_unclean_off_no_leader() -> None:
    """§5.5 offline, unclean off | ISR [2] | live {4} -> none."""
    result = leader_for_offline((2, 4), state(2, (2,)), online(4), unclean_enabled=False)
    assert result.leadership is None
    assert result.recipients == (4,)


def test_offline_table_row_unclean_on_recovering() -> None:
    """§5.5 offline, unclean on | ISR [2] | live {4} -> leader 4, ISR [4], RECOVERING."""
    result = leader_for_offline((2, 4), state(2, (2,)), online(4), unclean_enabled=True)
    assert result.leadership == LeaderAndIsr(4, 6, (4,), 7, RECOVERING, 3)
    assert result.unclean is True
    assert result.recipients == (4,)


def test_reassign_table_row_live_isr_member_of_target() -> None:
    """§5.5 reassign (TRS [2,4]) | ISR [2,4] | live {4} -> 4; recipients all of TRS."""
    result = leader_for_reassign((2, 4), state(2, (2, 4)), online(4))
    assert result.leadership == LeaderAndIsr(4, 6, (2, 4), 7, RECOVERED, 3)
    assert result.recipients == (2, 4)


@pytest.mark.parametrize(("isr", "live"), [((2,), ()), ((), (2,))])
def test_reassign_table_rows_none(isr: tuple[int, ...], live: tuple[int, ...]) -> None:
    """§5.5 reassign | [2] / [] | {} / {2} -> none."""
    result = leader_for_reassign((2, 4), state(2, isr), online(*live))
    assert result.leadership is None
    assert result.recipients == (2, 4)


def test_preferred_table_row_head_leads() -> None:
    """§5.5 preferred | ISR [2,4] | live {2,4} -> 2, ISR unchanged."""
    result = leader_for_preferred((2, 4), state(4, (2, 4)), online(2, 4))
    assert result.leadership == LeaderAndIsr(2, 6, (2, 4), 7, RECOVERED, 3)
    assert result.recipients == (2, 4)


def test_preferred_table_row_head_not_in_isr() -> None:
    """§5.5 preferred | ISR [4] | live {2,4} -> none (2 not in ISR)."""
    result = leader_for_preferred((2, 4), state(4, (4,)), online(2, 4))
    assert result.leadership is None
    assert result.recipients == (2, 4)


def test_controlled_shutdown_table_row_moves_leader() -> None:
    """§5.5 controlled shutdown | ISR [2,4] | live {2,4} | shutting down {2} -> 4, ISR [4]."""
    result = leader_for_controlled_shutdown((2, 4), state(2, (2, 4)), online(2, 4), {2})
    assert result.leadership == LeaderAndIsr(4, 6, (4,), 7, RECOVERED, 3)
    assert result.recipients == (2, 4)  # the shutting-down broker too


def test_controlled_shutdown_table_row_isr_only_shutting_down() -> None:
    """§5.5 controlled shutdown | ISR [2] | live {2,4} | shutting down {2} -> none."""
    result = leader_for_controlled_shutdown((2, 4), state(2, (2,)), online(2, 4), {2})
    assert result.leadership is None


def test_controlled_shutdown_table_row_all_shutting_down() -> None:
    """§5.5 controlled shutdown | ISR [2,4] | shutting down {2,4} -> none."""
    result = leader_for_controlled_shutdown((2, 4), state(2, (2, 4)), online(2, 4), {2, 4})
    assert result.leadership is None
    assert result.recipients == (2, 4)


# ---- §5.1 Offline, further cases ------------------------------------------------------------


def test_offline_leader_is_first_in_assignment_order_not_isr_order() -> None:
    """§5.1: leader = first replica in assignment order that is live and in ISR."""
    result = leader_for_offline((3, 1, 2), state(9, (2, 1, 3)), online(1, 2), False)
    assert result.leadership is not None
    assert result.leadership.leader == 1
    # new ISR keeps the old ISR order, filtered to live replicas
    assert result.leadership.isr == (2, 1)
    assert result.recipients == (1, 2)


def test_offline_same_leader_still_bumps_epoch() -> None:
    """§5: every success bumps leaderEpoch by 1, even when the leader does not change."""
    result = leader_for_offline((1, 2), state(1, (1, 2)), online(1, 2), False)
    assert result.leadership == LeaderAndIsr(1, 6, (1, 2), 7, RECOVERED, 3)


def test_offline_unclean_picks_first_live_replica_in_assignment_order() -> None:
    """§5.1 unclean: first live replica of the assignment, ISR [leader]."""
    result = leader_for_offline((1, 2, 3), state(1, (1,)), online(3, 2), True)
    assert result.leadership is not None
    assert (result.leadership.leader, result.leadership.isr) == (2, (2,))
    assert result.leadership.recovery is RECOVERING


def test_offline_unclean_enabled_but_clean_leader_available_is_clean() -> None:
    """§5.1: unclean only matters when no live ISR member exists; recovery unchanged."""
    result = leader_for_offline((1, 2, 3), state(1, (1, 3)), online(2, 3), True)
    assert result.leadership is not None
    assert result.leadership.leader == 3
    assert result.leadership.isr == (3,)
    assert result.leadership.recovery is RECOVERED
    assert result.unclean is False


def test_offline_keeps_recovering_state_on_clean_election() -> None:
    """§5.1 recovery state: leader in old ISR -> unchanged (kept from old state)."""
    old = LeaderAndIsr(1, 2, (1,), 3, RECOVERING, 1)
    result = leader_for_offline((1, 2), old, online(1, 2), False)
    assert result.leadership == LeaderAndIsr(1, 3, (1,), 3, RECOVERING, 1)


def test_offline_no_live_replica_at_all() -> None:
    """PartitionLeaderElectionAlgorithmsTest: unclean enabled but nothing live -> none."""
    result = leader_for_offline((1, 2), state(1, (1, 2)), online(), True)
    assert result.leadership is None
    assert result.recipients == ()


def test_offline_leader_minus_one_elects_from_isr() -> None:
    """§1.2 / §6.3: leader -1 with ISR [r] (last member removed as leader) re-elects r."""
    result = leader_for_offline((1, 2), state(-1, (2,)), online(1, 2), False)
    assert result.leadership is not None
    assert (result.leadership.leader, result.leadership.isr) == (2, (2,))


# ---- §5.2 Reassign ---------------------------------------------------------------------------


def test_reassign_first_target_replica_in_isr_wins() -> None:
    """§5.2: TRS order decides, ISR unchanged, recipients all TRS replicas incl. dead."""
    result = leader_for_reassign((4, 5, 6), state(1, (1, 6, 5, 4)), online(1, 5, 6))
    assert result.leadership == LeaderAndIsr(5, 6, (1, 6, 5, 4), 7, RECOVERED, 3)
    assert result.recipients == (4, 5, 6)


def test_reassign_ignores_live_isr_members_outside_target() -> None:
    """§5.2: only TRS members may lead."""
    result = leader_for_reassign((4,), state(1, (1,)), online(1, 4))
    assert result.leadership is None


# ---- §5.3 Preferred --------------------------------------------------------------------------


def test_preferred_head_dead() -> None:
    """§5.3: RS.head must be live."""
    result = leader_for_preferred((2, 4), state(4, (2, 4)), online(4))
    assert result.leadership is None


def test_preferred_when_already_leader_bumps_epoch() -> None:
    """§5: an election to the same leader still bumps the epoch."""
    result = leader_for_preferred((2, 4), state(2, (2, 4)), online(2, 4))
    assert result.leadership == LeaderAndIsr(2, 6, (2, 4), 7, RECOVERED, 3)


# ---- §5.4 Controlled shutdown ----------------------------------------------------------------


def test_controlled_shutdown_leader_must_be_registered() -> None:
    """§5.4: candidates = registered replicas; a dead ISR member cannot lead."""
    registered = online(1, 3)  # 2 is dead
    result = leader_for_controlled_shutdown((1, 2, 3), state(1, (1, 2, 3)), registered, {1})
    assert result.leadership is not None
    assert result.leadership.leader == 3
    # dead 2 stays in the ISR: only shutting-down brokers are removed
    assert result.leadership.isr == (2, 3)
    assert result.recipients == (1, 3)


def test_controlled_shutdown_removes_every_shutting_down_broker_from_isr() -> None:
    """§5.4: ISR minus all currently shutting-down brokers, not only the leader."""
    result = leader_for_controlled_shutdown((1, 2, 3), state(1, (1, 2, 3)), online(1, 2, 3), {1, 2})
    assert result.leadership is not None
    assert (result.leadership.leader, result.leadership.isr) == (3, (3,))
    assert result.leadership.leader_epoch == 6


# ---- strategies --------------------------------------------------------------------------------


def test_strategy_names_are_kafkas() -> None:
    """§12.2: failure messages name the strategy as Kafka's toString does."""
    assert str(PREFERRED) == "PreferredReplicaPartitionLeaderElectionStrategy"
    assert str(REASSIGN) == "ReassignPartitionLeaderElectionStrategy"
    assert str(CONTROLLED_SHUTDOWN) == "ControlledShutdownPartitionLeaderElectionStrategy"
    assert str(offline_strategy(False)) == "OfflinePartitionLeaderElectionStrategy(false)"
    assert str(offline_strategy(True)) == "OfflinePartitionLeaderElectionStrategy(true)"
