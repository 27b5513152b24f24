"""Both state machines and the request batch, driven directly (SPEC §3, §4, §6).

Every (from, to) pair of both tables is tried: valid ones change the state, invalid ones
leave it and log an `ok = false` row. The requests each transition sends are checked
against §6.2 / §4.3 / §4.4, and the batch's own rules against §3.
"""

from __future__ import annotations

import itertools

import pytest

from controller.model import (
    LeaderAndIsr,
    PartitionState,
    RecoveryState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from controller.zk.election import CONTROLLED_SHUTDOWN, PREFERRED, REASSIGN, offline_strategy
from controller.zk.partition_state_machine import StateChangeFailed
from tests.support.machines import PS, TP, Machines, lai

RS = ReplicaState

# SPEC §4.1 and §6.1, written out independently of the code under test
PARTITION_VALID_PREVIOUS = {
    PS.NEW: {PS.NON_EXISTENT},
    PS.ONLINE: {PS.NEW, PS.ONLINE, PS.OFFLINE},
    PS.OFFLINE: {PS.NEW, PS.ONLINE, PS.OFFLINE},
    PS.NON_EXISTENT: {PS.OFFLINE},
}
REPLICA_VALID_PREVIOUS = {
    RS.NEW: {RS.NON_EXISTENT},
    RS.ONLINE: {RS.NEW, RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE},
    RS.OFFLINE: {RS.NEW, RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE},
    RS.DELETION_STARTED: {RS.OFFLINE},
    RS.DELETION_SUCCESSFUL: {RS.DELETION_STARTED},
    RS.DELETION_INELIGIBLE: {RS.OFFLINE, RS.DELETION_STARTED},
    RS.NON_EXISTENT: {RS.DELETION_SUCCESSFUL},
}


UM_ALL = [("UpdateMetadata", 1, True), ("UpdateMetadata", 2, True), ("UpdateMetadata", 3, True)]


# ==== Partition state machine ================================================================

STRATEGY_FOR_ONLINE = offline_strategy(False)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(list(PS), list(PS))))
def test_partition_transition_table(source: PartitionState, target: PartitionState) -> None:
    """§4.1, §19.7: every pair; invalid ones keep the state, log ok=false and are not in
    the result."""
    m = Machines()
    leadership = None if source in (PS.NEW, PS.NON_EXISTENT) else lai(1, 0, (1, 2, 3), 0)
    m.add(leadership=leadership, state=source)
    result = m.psm.handle_state_changes([TP], target, STRATEGY_FOR_ONLINE)
    record = m.context.partition(TP)
    assert record is not None
    (change,) = m.changes()
    assert (change["from_state"], change["to_state"]) == (source, target)
    if source in PARTITION_VALID_PREVIOUS[target]:
        assert record.state is target
        assert change["ok"] is True
    else:
        assert record.state is source
        assert change["ok"] is False
        assert "should be in one of" in change["error"]
        assert result == {}
        assert m.journal.requests == []


def test_partition_new_from_nonexistent_sends_nothing() -> None:
    """§4.2: NewPartition: state only, no requests."""
    m = Machines()
    m.add()
    assert m.psm.handle_state_changes([TP], PS.NEW) == {}
    assert m.context.partition(TP).state is PS.NEW  # type: ignore[union-attr]
    assert m.journal.requests == []


@pytest.mark.parametrize("target", [PS.OFFLINE, PS.NON_EXISTENT])
def test_partition_offline_and_nonexistent_send_nothing(target: PartitionState) -> None:
    """§4.2: Offline / NonExistent: state only, no ZK write, no requests."""
    m = Machines()
    m.add(leadership=lai(1, 3, (1, 2), 4), state=PS.OFFLINE)
    assert m.psm.handle_state_changes([TP], target) == {}
    record = m.context.partition(TP)
    assert record is not None and record.state is target
    assert record.leadership == lai(1, 3, (1, 2), 4)
    assert m.journal.requests == []


def test_new_partition_to_online_initializes_and_sends_is_new_to_live_replicas_only() -> None:
    """§4.3 / §19.5: leader = first live replica, ISR = live replicas (shutting-down excluded),
    epoch 0, version 0; LeaderAndIsr isNew=true to the ISR only; UpdateMetadata to all."""
    m = Machines(brokers=(1, 2, 3, 4))
    m.dead(1)
    m.shutting_down(4)
    m.add(replicas=(1, 2, 3, 4), state=PS.NEW)
    result = m.psm.handle_state_changes([TP], PS.ONLINE, STRATEGY_FOR_ONLINE)
    assert result == {}  # initializations are not part of the result
    record = m.context.partition(TP)
    assert record is not None and record.state is PS.ONLINE
    assert record.leadership == lai(2, 0, (2, 3), 0)
    assert m.sent() == [
        ("LeaderAndIsr", 2, True),
        ("LeaderAndIsr", 3, True),
        ("UpdateMetadata", 2, True),
        ("UpdateMetadata", 3, True),
        ("UpdateMetadata", 4, True),
    ]
    entry = m.entry("LeaderAndIsr", 2)
    assert entry["is_new"] is True
    assert (entry["leader"], entry["leader_epoch"], entry["isr"]) == (2, 0, [2, 3])
    assert entry["replicas"] == [1, 2, 3, 4]
    um = m.entry("UpdateMetadata", 4)
    assert um["offline_replicas"] == [1, 4]


def test_new_partition_to_online_without_live_replica_fails_and_stays_new() -> None:
    """§4.3: no live replica -> failure logged, partition stays NewPartition, no requests."""
    m = Machines()
    m.dead(1)
    m.dead(2)
    m.add(replicas=(1, 2), state=PS.NEW)
    assert m.psm.handle_state_changes([TP], PS.ONLINE, STRATEGY_FOR_ONLINE) == {}
    record = m.context.partition(TP)
    assert record is not None and record.state is PS.NEW and record.leadership is None
    (change,) = m.changes()
    assert change["ok"] is False
    assert "No assigned replica is alive" in change["error"]
    assert m.journal.requests == []


def test_offline_partition_to_online_elects_and_writes() -> None:
    """§4.4 / §5.1: Offline -> Online elects in place; epoch+1, version+1, stamped with my
    controller epoch; LeaderAndIsr isNew=false to live replicas."""
    m = Machines()
    m.dead(1)
    m.add(leadership=lai(1, 4, (1, 2, 3), 9, ctrl=2), state=PS.OFFLINE)
    result = m.psm.handle_state_changes([TP], PS.ONLINE, STRATEGY_FOR_ONLINE)
    assert result == {TP: lai(2, 5, (2, 3), 10)}
    record = m.context.partition(TP)
    assert record is not None and record.state is PS.ONLINE
    assert record.leadership == lai(2, 5, (2, 3), 10)
    assert m.sent() == [
        ("LeaderAndIsr", 2, True),
        ("LeaderAndIsr", 3, True),
        ("UpdateMetadata", 2, True),
        ("UpdateMetadata", 3, True),
    ]
    entry = m.entry("LeaderAndIsr", 3)
    assert entry["is_new"] is False
    assert (entry["controller_epoch"], entry["partition_epoch"]) == (5, 10)


def test_online_partition_election_failure_keeps_state_and_reports() -> None:
    """§4.4 step 3: no leader -> Left(StateChangeFailed) with Kafka's message; state unchanged."""
    m = Machines()
    m.add(leadership=lai(2, 4, (2, 3), 9), state=PS.ONLINE)
    result = m.psm.handle_state_changes([TP], PS.ONLINE, PREFERRED)
    failure = result[TP]
    assert isinstance(failure, StateChangeFailed)
    assert str(failure) == (
        "Failed to elect leader for partition t-0 under strategy "
        "PreferredReplicaPartitionLeaderElectionStrategy"
    )
    record = m.context.partition(TP)
    assert record is not None and record.state is PS.ONLINE
    assert record.leadership == lai(2, 4, (2, 3), 9)
    assert m.journal.requests == []


def test_online_partition_preferred_election_recipients_all_replicas() -> None:
    """§5.3: recipients = all of RS (a dead one is dropped at send: delivered=false)."""
    m = Machines()
    m.dead(3)
    m.add(leadership=lai(2, 4, (1, 2), 9), state=PS.ONLINE)
    result = m.psm.handle_state_changes([TP], PS.ONLINE, PREFERRED)
    assert result == {TP: lai(1, 5, (1, 2), 10)}
    assert m.sent() == [
        ("LeaderAndIsr", 1, True),
        ("LeaderAndIsr", 2, True),
        ("LeaderAndIsr", 3, False),
        ("UpdateMetadata", 1, True),
        ("UpdateMetadata", 2, True),
    ]


def test_online_partition_reassign_election_uses_target_replicas() -> None:
    """§5.2: leader = first TRS live ISR member; recipients all TRS."""
    m = Machines(brokers=(1, 2, 3, 4))
    record = m.add(replicas=(3, 4, 1), leadership=lai(1, 2, (1, 3, 4), 3), state=PS.ONLINE)
    m.context.set_assignment(record, ReplicaAssignment((3, 4, 1), (3, 4), (1,)))
    result = m.psm.handle_state_changes([TP], PS.ONLINE, REASSIGN)
    assert result == {TP: lai(3, 3, (1, 3, 4), 4)}
    assert m.sent()[:2] == [("LeaderAndIsr", 3, True), ("LeaderAndIsr", 4, True)]


def test_online_partition_controlled_shutdown_election() -> None:
    """§5.4: the shutting-down broker still receives the LeaderAndIsr."""
    m = Machines()
    m.shutting_down(1)
    m.add(leadership=lai(1, 0, (1, 2, 3), 0), state=PS.ONLINE)
    result = m.psm.handle_state_changes([TP], PS.ONLINE, CONTROLLED_SHUTDOWN)
    assert result == {TP: lai(2, 1, (2, 3), 1)}
    assert m.sent() == [
        ("LeaderAndIsr", 1, True),
        ("LeaderAndIsr", 2, True),
        ("LeaderAndIsr", 3, True),
        *UM_ALL,
    ]


def test_online_partition_unclean_uses_topic_config() -> None:
    """§5.1: with allowUnclean=false the topic's config decides (override, else default)."""
    m = Machines()
    m.dead(1)
    m.context.add_topic("t", {"unclean.leader.election.enable": "true"})
    m.add(leadership=lai(1, 4, (1,), 9), state=PS.OFFLINE)
    result = m.psm.handle_state_changes([TP], PS.ONLINE, offline_strategy(False))
    expected = LeaderAndIsr(2, 5, (2,), 10, RecoveryState.RECOVERING, 5)
    assert result == {TP: expected}
    (change,) = m.changes()
    assert change["unclean"] is True


def test_online_partition_unclean_default_off() -> None:
    """§5.1: default unclean.leader.election.enable is false."""
    m = Machines()
    m.dead(1)
    m.add(leadership=lai(1, 4, (1,), 9), state=PS.OFFLINE)
    result = m.psm.handle_state_changes([TP], PS.ONLINE, offline_strategy(False))
    assert isinstance(result[TP], StateChangeFailed)
    assert m.context.partition(TP).state is PS.OFFLINE  # type: ignore[union-attr]


def test_online_partition_admin_unclean_ignores_config() -> None:
    """§5.1: allowUnclean=true (admin-triggered) elects without reading the config."""
    m = Machines()
    m.dead(1)
    m.context.add_topic("t", {"unclean.leader.election.enable": "false"})
    m.add(leadership=lai(1, 4, (1,), 9), state=PS.OFFLINE)
    result = m.psm.handle_state_changes([TP], PS.ONLINE, offline_strategy(True))
    assert isinstance(result[TP], LeaderAndIsr) and result[TP].leader == 2


def test_empty_partition_list_opens_no_batch() -> None:
    """§4.2 step 1."""
    m = Machines()
    assert m.psm.handle_state_changes([], PS.ONLINE, PREFERRED) == {}
    assert m.journal.requests == [] and m.changes() == []


# ==== Replica state machine ==================================================================


@pytest.mark.parametrize(("source", "target"), list(itertools.product(list(RS), list(RS))))
def test_replica_transition_table(source: ReplicaState, target: ReplicaState) -> None:
    """§6.1, §19.7: every pair; invalid ones are skipped (state unchanged) and logged ok=false."""
    m = Machines()
    record = m.add(replicas=(1, 2), leadership=lai(2, 0, (1, 2), 0), state=PS.ONLINE)
    if source is not RS.NON_EXISTENT:
        m.context.set_replica_state(record, 1, source)
    m.rsm.handle_state_changes([(TP, 1)], target)
    now = m.context.replica_state(TP, 1)
    (change,) = [c for c in m.changes() if c["broker"] == 1]
    assert (change["from_state"], change["to_state"]) == (source, target)
    if source in REPLICA_VALID_PREVIOUS[target]:
        assert change["ok"] is True
        assert now is (None if target is RS.NON_EXISTENT else target)
    else:
        assert change["ok"] is False
        assert now is (None if source is RS.NON_EXISTENT else source)
        assert m.journal.requests == []


def test_replica_new_sends_is_new_leader_and_isr() -> None:
    """§6.2 NewReplica with leadership: LeaderAndIsr(current, isNew=true) to r + UM to all."""
    m = Machines()
    m.add(replicas=(1, 2), leadership=lai(1, 3, (1,), 7, ctrl=2), state=PS.ONLINE)
    m.rsm.handle_state_changes([(TP, 2)], RS.NEW)
    assert m.context.replica_state(TP, 2) is RS.NEW
    assert m.sent() == [("LeaderAndIsr", 2, True), *UM_ALL]
    entry = m.entry("LeaderAndIsr", 2)
    assert entry["is_new"] is True
    assert (entry["leader"], entry["leader_epoch"], entry["isr"], entry["partition_epoch"]) == (
        1,
        3,
        [1],
        7,
    )
    assert entry["controller_epoch"] == 2  # the writer's epoch (§19.8)


def test_replica_new_for_the_leader_fails() -> None:
    """§6.2 NewReplica: r is the leader -> failure logged, stays NonExistentReplica."""
    m = Machines()
    m.add(replicas=(1, 2), leadership=lai(1, 3, (1,), 7), state=PS.ONLINE)
    m.rsm.handle_state_changes([(TP, 1)], RS.NEW)
    assert m.context.replica_state(TP, 1) is None
    (change,) = m.changes()
    assert change["ok"] is False
    assert "being requested to become leader" in change["error"]
    assert m.journal.requests == []


def test_replica_new_without_leadership_sends_nothing() -> None:
    """§6.2 NewReplica without leadership info: state only."""
    m = Machines()
    m.add(replicas=(1, 2), state=PS.NEW)
    m.rsm.handle_state_changes([(TP, 1), (TP, 2)], RS.NEW)
    assert m.context.partition(TP).replica_states == {1: RS.NEW, 2: RS.NEW}  # type: ignore[union-attr]
    assert m.journal.requests == []


def test_replica_online_from_new_sends_nothing_and_appends_to_assignment() -> None:
    """§6.2 OnlineReplica from NewReplica: no request; r not in RS is appended."""
    m = Machines()
    record = m.add(replicas=(1, 2), leadership=lai(1, 0, (1, 2), 0), state=PS.ONLINE)
    m.context.set_replica_state(record, 3, RS.NEW)
    m.rsm.handle_state_changes([(TP, 3)], RS.ONLINE)
    assert m.context.replica_state(TP, 3) is RS.ONLINE
    assert record.assignment.replicas == (1, 2, 3)
    assert m.journal.requests == []


@pytest.mark.parametrize("source", [RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE])
def test_replica_online_from_existing_sends_leader_and_isr(source: ReplicaState) -> None:
    """§6.2 OnlineReplica from Online/Offline/Ineligible: LeaderAndIsr(current, isNew=false)
    to r, liveness not checked (a dead r's request is undelivered)."""
    m = Machines()
    m.dead(2)
    record = m.add(replicas=(1, 2), leadership=lai(1, 3, (1,), 7), state=PS.ONLINE)
    m.context.set_replica_state(record, 2, source)
    m.rsm.handle_state_changes([(TP, 2)], RS.ONLINE)
    assert m.context.replica_state(TP, 2) is RS.ONLINE
    assert m.sent() == [
        ("LeaderAndIsr", 2, False),
        ("UpdateMetadata", 1, True),
        ("UpdateMetadata", 3, True),
    ]
    assert m.requests("LeaderAndIsr")[0]["partitions"][0]["is_new"] is False


def test_replica_online_from_offline_without_leadership_sends_nothing() -> None:
    """§6.2: no leadership info -> no LeaderAndIsr."""
    m = Machines()
    m.add(replicas=(1, 2), state=PS.NEW, replica_state=RS.OFFLINE)
    m.rsm.handle_state_changes([(TP, 1)], RS.ONLINE)
    assert m.context.replica_state(TP, 1) is RS.ONLINE
    assert m.journal.requests == []


def test_replica_offline_follower_shrinks_isr_with_epoch_bump() -> None:
    """§6.2 OfflineReplica / §6.3 / §19.2: StopReplica(delete=false) to r with the epoch before
    the shrink; ISR minus r, leaderEpoch+1, version+1; LeaderAndIsr to RS minus r; UM to all."""
    m = Machines()
    m.add(leadership=lai(1, 3, (1, 2, 3), 7, ctrl=2), state=PS.ONLINE, replica_state=RS.ONLINE)
    m.rsm.handle_state_changes([(TP, 2)], RS.OFFLINE)
    record = m.context.partition(TP)
    assert record is not None
    assert record.leadership == lai(1, 4, (1, 3), 8)
    assert record.replica_states[2] is RS.OFFLINE
    assert m.sent() == [
        ("LeaderAndIsr", 1, True),
        ("LeaderAndIsr", 3, True),
        *UM_ALL,
        ("StopReplica", 2, True),
    ]
    stop = m.entry("StopReplica", 2)
    assert (stop["delete_partition"], stop["leader_epoch"]) == (False, 3)
    entry = m.entry("LeaderAndIsr", 3)
    assert (entry["leader"], entry["leader_epoch"], entry["isr"], entry["partition_epoch"]) == (
        1,
        4,
        [1, 3],
        8,
    )
    assert entry["is_new"] is False


def test_replica_offline_leader_leaves_no_leader() -> None:
    """§6.3: removing the leader -> leader -1, epoch+1 (ReplicaStateMachineTest
    testOnlineReplicaToOfflineReplicaTransition)."""
    m = Machines()
    m.add(
        replicas=(1, 2), leadership=lai(1, 0, (1, 2), 0), state=PS.ONLINE, replica_state=RS.ONLINE
    )
    m.rsm.handle_state_changes([(TP, 1)], RS.OFFLINE)
    assert m.context.leadership(TP) == lai(-1, 1, (2,), 1)
    assert [r["broker"] for r in m.requests("LeaderAndIsr")] == [2]


def test_replica_offline_last_isr_member_is_kept_and_each_repeat_bumps() -> None:
    """§6.3 / §19.3: the last ISR member is never removed; as leader it yields leader -1,
    ISR [r]; repeating bumps the epoch again each time."""
    m = Machines()
    m.add(replicas=(1, 2), leadership=lai(1, 0, (1,), 0), state=PS.ONLINE, replica_state=RS.ONLINE)
    m.rsm.handle_state_changes([(TP, 1)], RS.OFFLINE)
    assert m.context.leadership(TP) == lai(-1, 1, (1,), 1)
    m.rsm.handle_state_changes([(TP, 1)], RS.OFFLINE)
    assert m.context.leadership(TP) == lai(-1, 2, (1,), 2)


def test_replica_offline_not_in_isr_no_write_but_restamped() -> None:
    """§6.3: r not in ISR -> no ZK write (epochs unchanged), cache stamped with my epoch
    while the znode keeps the last writer's; the LeaderAndIsr still goes to RS minus r,
    carrying the cached epoch."""
    m = Machines()
    m.add(leadership=lai(1, 3, (1, 3), 7, ctrl=2), state=PS.ONLINE, replica_state=RS.ONLINE)
    m.rsm.handle_state_changes([(TP, 2)], RS.OFFLINE)
    cached = m.context.leadership(TP)
    assert cached is not None
    assert (cached.controller_epoch, cached.stored_controller_epoch) == (5, 2)
    assert cached.as_stored() == lai(1, 3, (1, 3), 7, ctrl=2)
    assert m.context.restamped_partitions == {TP}
    assert [r["broker"] for r in m.requests("LeaderAndIsr")] == [1, 3]
    assert m.entry("LeaderAndIsr", 1)["controller_epoch"] == 5
    # a later write stores and caches the same epoch again
    m.rsm.handle_state_changes([(TP, 3)], RS.OFFLINE)
    written = m.context.leadership(TP)
    assert written == lai(1, 4, (1,), 8, ctrl=5)
    assert written is not None and written.stored_controller_epoch == 5
    assert m.context.restamped_partitions == set()


def test_replica_offline_of_deleting_topic_sends_only_stop_replica() -> None:
    """§6.2 / §15.3: topic queued for deletion -> StopReplica with epoch -2, ISR write still
    happens, but no LeaderAndIsr and no UpdateMetadata."""
    m = Machines()
    m.add(leadership=lai(1, 3, (1, 2, 3), 7), state=PS.ONLINE, replica_state=RS.ONLINE)
    m.context.topics_to_be_deleted.add("t")
    m.rsm.handle_state_changes([(TP, 2)], RS.OFFLINE)
    assert m.sent() == [("StopReplica", 2, True)]
    assert m.entry("StopReplica", 2)["leader_epoch"] == -2
    assert m.context.leadership(TP) == lai(1, 4, (1, 3), 8)


def test_replica_offline_without_leadership_sends_broker_only_update_metadata() -> None:
    """§6.2 step 3 (ReplicaStateMachineTest testNewReplicaToOfflineReplicaTransition):
    StopReplica(epoch -1) + UpdateMetadata with no partitions to all registered brokers."""
    m = Machines()
    m.add(replicas=(1, 2), state=PS.NEW, replica_state=RS.NEW)
    m.rsm.handle_state_changes([(TP, 1)], RS.OFFLINE)
    assert m.context.replica_state(TP, 1) is RS.OFFLINE
    assert m.sent() == [*UM_ALL, ("StopReplica", 1, True)]
    assert m.requests("UpdateMetadata", 1)[0]["partitions"] == []
    assert m.entry("StopReplica", 1)["leader_epoch"] == -1


def test_replica_deletion_started_sends_stop_replica_delete() -> None:
    """§6.2 ReplicaDeletionStarted: StopReplica(delete=true) to r."""
    m = Machines()
    m.add(leadership=lai(1, 3, (1, 2, 3), 7), state=PS.OFFLINE, replica_state=RS.OFFLINE)
    m.context.topics_to_be_deleted.add("t")
    m.rsm.handle_state_changes([(TP, 1), (TP, 2)], RS.DELETION_STARTED)
    assert m.sent() == [("StopReplica", 1, True), ("StopReplica", 2, True)]
    stop = m.entry("StopReplica", 2)
    assert (stop["delete_partition"], stop["leader_epoch"]) == (True, -2)
    assert m.context.replica_state(TP, 2) is RS.DELETION_STARTED


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (RS.OFFLINE, RS.DELETION_INELIGIBLE),
        (RS.DELETION_STARTED, RS.DELETION_INELIGIBLE),
        (RS.DELETION_STARTED, RS.DELETION_SUCCESSFUL),
    ],
)
def test_replica_deletion_bookkeeping_states_send_nothing(
    source: ReplicaState, target: ReplicaState
) -> None:
    """§6.2: ReplicaDeletionIneligible / ReplicaDeletionSuccessful are state only."""
    m = Machines()
    m.add(leadership=lai(1, 3, (1, 2, 3), 7), state=PS.OFFLINE, replica_state=source)
    m.rsm.handle_state_changes([(TP, 1)], target)
    assert m.context.replica_state(TP, 1) is target
    assert m.journal.requests == []


def test_replica_nonexistent_leaves_assignment() -> None:
    """§6.2 NonExistentReplica: r leaves RS/AR/RR and its state entry goes."""
    m = Machines()
    record = m.add(leadership=lai(1, 3, (1, 2, 3), 7), state=PS.ONLINE)
    m.context.set_assignment(record, ReplicaAssignment((1, 2, 3), (1,), (3,)))
    m.context.set_replica_state(record, 3, RS.DELETION_SUCCESSFUL)
    m.context.set_replica_state(record, 1, RS.DELETION_SUCCESSFUL)
    m.rsm.handle_state_changes([(TP, 3), (TP, 1)], RS.NON_EXISTENT)
    assert record.assignment == ReplicaAssignment((2,), (), ())
    assert 3 not in record.replica_states and 1 not in record.replica_states
    assert m.journal.requests == []


def test_replica_changes_are_grouped_by_broker_in_one_batch() -> None:
    """§6.2: one batch for the whole call: one request per broker and type."""
    m = Machines()
    t1 = TopicPartition("t", 1)
    m.add(leadership=lai(1, 0, (1, 2, 3), 0), state=PS.ONLINE, replica_state=RS.ONLINE)
    m.add(leadership=lai(2, 0, (1, 2, 3), 0), state=PS.ONLINE, replica_state=RS.ONLINE, tp=t1)
    m.rsm.handle_state_changes([(TP, 3), (t1, 3)], RS.OFFLINE)
    assert m.sent() == [
        ("LeaderAndIsr", 1, True),
        ("LeaderAndIsr", 2, True),
        *UM_ALL,
        ("StopReplica", 3, True),
    ]
    assert len(m.requests("StopReplica")[0]["partitions"]) == 2
    assert len(m.requests("UpdateMetadata", 1)[0]["partitions"]) == 2


# ==== Request batch (§3) =======================================================================


def test_batch_last_add_wins_and_is_new_is_sticky() -> None:
    """§3.2: a later add for (broker, tp) overwrites the entry, but isNew stays true."""
    m = Machines()
    record = m.add(leadership=lai(1, 0, (1,), 0), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_leader_and_isr([2], TP, lai(1, 0, (1,), 0), record.assignment, is_new=True)
    m.batch.add_leader_and_isr([2], TP, lai(1, 1, (1, 2), 1), record.assignment, is_new=False)
    m.batch.send()
    (request,) = m.requests("LeaderAndIsr")
    (entry,) = request["partitions"]
    assert (entry["leader_epoch"], entry["isr"], entry["is_new"]) == (1, [1, 2], True)


def test_batch_delete_partition_is_sticky() -> None:
    """§3.3: StopReplica delete=true is not cleared by a later delete=false."""
    m = Machines()
    m.add(leadership=lai(1, 6, (1,), 0), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_stop_replica([2], TP, delete=True)
    m.batch.add_stop_replica([2], TP, delete=False)
    m.batch.send()
    (entry,) = m.requests("StopReplica")[0]["partitions"]
    assert (entry["delete_partition"], entry["leader_epoch"]) == (True, 6)


def test_batch_leader_and_isr_implies_update_metadata_to_every_registered_broker() -> None:
    """§3.2: any LeaderAndIsr adds UpdateMetadata for tp to every registered broker
    (shutting-down included, dead excluded), even for an empty recipient list."""
    m = Machines(brokers=(1, 2, 3, 4))
    m.shutting_down(3)
    m.dead(4)
    record = m.add(replicas=(1, 2, 3, 4), leadership=lai(1, 0, (1, 2), 0), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_leader_and_isr([], TP, lai(1, 0, (1, 2), 0), record.assignment, is_new=False)
    m.batch.send()
    assert m.sent() == [
        ("UpdateMetadata", 1, True),
        ("UpdateMetadata", 2, True),
        ("UpdateMetadata", 3, True),
    ]
    (entry,) = m.requests("UpdateMetadata", 1)[0]["partitions"]
    assert entry["offline_replicas"] == [3, 4]
    assert m.requests("UpdateMetadata", 1)[0]["live_brokers"] == [1, 2, 3]


def test_batch_unregistered_recipients_are_not_delivered_and_negative_ids_skipped() -> None:
    """§3.2 / §3.5: dead brokers' requests are dropped (delivered=false); ids < 0 skipped."""
    m = Machines()
    m.dead(3)
    record = m.add(leadership=lai(1, 0, (1,), 0), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_leader_and_isr([-1, 3], TP, lai(1, 0, (1,), 0), record.assignment, False)
    m.batch.add_stop_replica([-1, 3], TP, delete=False)
    m.batch.send()
    assert m.sent() == [
        ("LeaderAndIsr", 3, False),
        ("UpdateMetadata", 1, True),
        ("UpdateMetadata", 2, True),
        ("StopReplica", 3, False),
    ]


def test_batch_order_is_leader_and_isr_then_update_metadata_then_stop_replica() -> None:
    """§3.5: every broker sees LeaderAndIsr < UpdateMetadata < StopReplica in one flush."""
    m = Machines()
    record = m.add(leadership=lai(1, 0, (1,), 0), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_stop_replica([1], TP, delete=False)
    m.batch.add_update_metadata([1])
    m.batch.add_leader_and_isr([1], TP, lai(1, 0, (1,), 0), record.assignment, False)
    m.batch.send()
    by_broker_1 = [r["type"] for r in m.journal.requests if r["broker"] == 1]
    assert by_broker_1 == ["LeaderAndIsr", "UpdateMetadata", "StopReplica"]
    assert [r["request_seq"] for r in m.journal.requests] == [1, 2, 3, 4, 5]


def test_batch_update_metadata_during_delete() -> None:
    """§3.4: topic queued for deletion -> leader -2, leaderEpoch 0, zkVersion 0, ISR and
    controllerEpoch as cached."""
    m = Machines()
    m.add(leadership=lai(2, 7, (2, 3), 9, ctrl=3), state=PS.ONLINE)
    m.context.topics_to_be_deleted.add("t")
    m.batch.new_batch()
    m.batch.add_update_metadata([1], [TP])
    m.batch.send()
    (entry,) = m.requests("UpdateMetadata")[0]["partitions"]
    assert (entry["leader"], entry["leader_epoch"], entry["partition_epoch"]) == (-2, 0, 0)
    assert (entry["isr"], entry["controller_epoch"]) == ([2, 3], 3)


def test_batch_update_metadata_content_is_computed_at_add_time() -> None:
    """§3.4 / §19.8: a later change to the cache does not alter an entry already added."""
    m = Machines()
    record = m.add(leadership=lai(2, 7, (2, 3), 9), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_update_metadata([1], [TP])
    m.context.set_leadership(record, lai(3, 8, (3,), 10))
    m.batch.send()
    (entry,) = m.requests("UpdateMetadata")[0]["partitions"]
    assert (entry["leader"], entry["leader_epoch"]) == (2, 7)


def test_batch_update_metadata_without_brokers_sends_nothing() -> None:
    """§3.5 step 2: partition states without a broker set send nothing."""
    m = Machines()
    m.add(leadership=lai(2, 7, (2, 3), 9), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_update_metadata([], [TP])
    m.batch.send()
    assert m.journal.requests == []


def test_batch_update_metadata_skips_partitions_without_leadership() -> None:
    """§3.4: no leadership info -> partition skipped ("Leader not yet assigned")."""
    m = Machines()
    m.add(state=PS.NEW)
    m.batch.new_batch()
    m.batch.add_update_metadata([1, 2], [TP])
    m.batch.send()
    assert m.sent() == [("UpdateMetadata", 1, True), ("UpdateMetadata", 2, True)]
    assert m.requests("UpdateMetadata", 1)[0]["partitions"] == []


def test_batch_stop_replica_epoch_captured_at_add_time() -> None:
    """§3.3: StopReplica leaderEpoch = cached epoch now, -1 without leadership info."""
    m = Machines()
    record = m.add(leadership=lai(2, 7, (2, 3), 9), state=PS.ONLINE)
    t1 = TopicPartition("t", 1)
    m.add(state=PS.NEW, tp=t1)
    m.batch.new_batch()
    m.batch.add_stop_replica([1], TP, delete=False)
    m.batch.add_stop_replica([1], t1, delete=False)
    m.context.set_leadership(record, lai(2, 8, (2,), 10))
    m.batch.send()
    epochs = {p["partition"]: p["leader_epoch"] for p in m.requests("StopReplica")[0]["partitions"]}
    assert epochs == {0: 7, 1: -1}


def test_batch_new_batch_refuses_pending_entries() -> None:
    """§3: newBatch() throws IllegalStateException while the previous batch has entries."""
    m = Machines()
    m.add(leadership=lai(2, 7, (2, 3), 9), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_stop_replica([1], TP, delete=False)
    with pytest.raises(RuntimeError):
        m.batch.new_batch()


def test_batch_request_header_epoch_is_current_controller_epoch() -> None:
    """§3.5 / §19.8: the request's controllerEpoch is the current one, the per-partition one
    is the writer's."""
    m = Machines()
    record = m.add(leadership=lai(2, 7, (2, 3), 9, ctrl=1), state=PS.ONLINE)
    m.batch.new_batch()
    m.batch.add_leader_and_isr([2], TP, record.leadership, record.assignment, False)  # type: ignore[arg-type]
    m.batch.send()
    (request,) = m.requests("LeaderAndIsr")
    assert request["controller_epoch"] == 5
    assert request["partitions"][0]["controller_epoch"] == 1
