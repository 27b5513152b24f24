"""Partition reassignment, KIP-455 (SPEC §14, §19.10-§19.12)."""

from __future__ import annotations

from tests.support.scenario import Cluster, entries, lai

LAI, UM, SR = "LeaderAndIsr", "UpdateMetadata", "StopReplica"


def assignment(c: Cluster, topic: str = "t", partition: int = 0) -> tuple:
    row = c.partition(topic, partition)
    assert row is not None
    return (row["replicas"], row["adding_replicas"], row["removing_replicas"])


def test_single_replica_move_integration_example() -> None:
    """§14.8 first example (ControllerIntegrationTest.testPartitionReassignment), §19.10:
    [C] -> [O]: A1 +1 (1); the adding replica gets two isNew=true LeaderAndIsr; O joins the
    ISR via AlterPartition (no bump); B3 elects O (2); B4 removes C (3)."""
    c = Cluster(brokers=[0, 1])
    c.create("t", {0: [0]})
    out = c.reassign("t", 0, [1])
    assert assignment(c) == ([1, 0], [1], [0])
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 1, 1)
    assert c.replica("t", 0, 1) == "NewReplica"
    row = out.result("t", 0)
    assert row["error"] is None
    assert out.sent() == [
        # A1: isNew=false to ORS, isNew=true to AR
        (LAI, 0, True),
        (LAI, 1, True),
        (UM, 0, True),
        (UM, 1, True),
        # A2: NewReplica -> another isNew=true, same epoch
        (LAI, 1, True),
        (UM, 0, True),
        (UM, 1, True),
    ]
    a1_origin, a1_adding, a2_adding = out.of(LAI)
    assert entries(a1_origin)[("t", 0)]["is_new"] is False
    assert entries(a1_adding)[("t", 0)]["is_new"] is True
    assert entries(a2_adding)[("t", 0)]["is_new"] is True
    for request in (a1_origin, a1_adding, a2_adding):
        entry = entries(request)[("t", 0)]
        assert lai(entry) == (0, 1, [0], 1)
        assert (entry["replicas"], entry["adding_replicas"], entry["removing_replicas"]) == (
            [1, 0],
            [1],
            [0],
        )

    out = c.isr("t", 0, [0, 1])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 3, 4)
    assert assignment(c) == ([1], [], [])
    assert c.replicas("t", 0) == {1: "OnlineReplica"}
    assert out.result("t", 0)["error"] is None
    assert out.sent() == [
        (UM, 0, True),  # AlterPartition
        (UM, 1, True),
        (LAI, 1, True),  # B3: Reassign election, to TRS
        (UM, 0, True),
        (UM, 1, True),
        (LAI, 1, True),  # B4: OfflineReplica of 0
        (UM, 0, True),
        (UM, 1, True),
        (SR, 0, True),
        (SR, 0, True),  # B5: ReplicaDeletionStarted
        (UM, 0, True),  # B8
        (UM, 1, True),
    ]
    b3, b4 = (entries(r)[("t", 0)] for r in out.of(LAI, 1))
    assert lai(b3) == (1, 2, [0, 1], 3)
    assert lai(b4) == (1, 3, [1], 4)
    assert b4["replicas"] == [1]
    stop_offline, stop_delete = (entries(r)[("t", 0)] for r in out.of(SR, 0))
    assert (stop_offline["delete_partition"], stop_offline["leader_epoch"]) == (False, 2)
    assert (stop_delete["delete_partition"], stop_delete["leader_epoch"]) == (True, 3)
    b8 = entries(out.of(UM, 0)[-1])[("t", 0)]
    assert (b8["leader"], b8["leader_epoch"], b8["replicas"]) == (1, 3, [1])


def test_move_with_target_going_offline_resumes_on_startup() -> None:
    """§14.8 second example, §19.10: the target is offline (here: fails right after the
    submission, as the API only accepts live targets), progress stalls; when it starts the
    reassignment resumes with another A1 bump (2); then B3 (3), B4 (4). The restarted
    replica is already OnlineReplica, so A2's NewReplica is invalid and skipped."""
    c = Cluster(brokers=[0, 1])
    c.create("t", {0: [0]})
    c.reassign("t", 0, [1])
    c.fail(1)
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 1, 1)
    assert c.replica("t", 0, 1) == "OfflineReplica"

    out = c.start(1)
    assert c.state("t", 0) == ("OnlinePartition", 0, [0], 2, 2)
    assert c.replica("t", 0, 1) == "OnlineReplica"
    invalid = out.changes("replica", ok=False)
    assert [(s["broker"], s["from_state"], s["to_state"]) for s in invalid] == [
        (1, "OnlineReplica", "NewReplica")
    ]
    # A1 of the resumption: isNew=true to the adding replica
    resumed = [entries(r)[("t", 0)] for r in out.of(LAI, 1)]
    assert [(e["leader_epoch"], e["is_new"]) for e in resumed] == [(1, False), (2, True)]

    c.isr("t", 0, [0, 1])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1], 4, 5)
    assert assignment(c) == ([1], [], [])


def test_three_replicas_to_three_new_ones() -> None:
    """§14.8 third example, §19.11: [1,2,3] -> [4,5,6]: A1 (1); B3 leader 4 (2); B4 removes
    1, 2, 3 one at a time (3, 4, 5); old replicas get StopReplica(delete=false) then
    StopReplica(delete=true)."""
    c = Cluster(brokers=[1, 2, 3, 4, 5, 6])
    c.create("t", {0: [1, 2, 3]})
    out = c.reassign("t", 0, [4, 5, 6])
    assert assignment(c) == ([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2, 3], 1, 1)
    # A1 + one NewReplica batch per adding replica
    assert [r["broker"] for r in out.of(LAI)] == [1, 2, 3, 4, 5, 6, 4, 5, 6]
    assert [entries(r)[("t", 0)]["is_new"] for r in out.of(LAI)] == [False] * 3 + [True] * 6

    out = c.isr("t", 0, [1, 2, 3, 4, 5, 6])
    assert c.state("t", 0) == ("OnlinePartition", 4, [4, 5, 6], 5, 6)
    assert assignment(c) == ([4, 5, 6], [], [])
    assert c.replicas("t", 0) == {b: "OnlineReplica" for b in (4, 5, 6)}
    # one OfflineReplica batch: survivors get the final state once (last add wins)
    offline_batch = [r for r in out.requests if r["type"] == LAI][3:]
    assert [r["broker"] for r in offline_batch] == [4, 5, 6]
    assert all(lai(entries(r)[("t", 0)]) == (4, 5, [4, 5, 6], 6) for r in offline_batch)
    stops = out.of(SR)
    assert [(r["broker"], entries(r)[("t", 0)]["delete_partition"]) for r in stops] == [
        (1, False),
        (2, False),
        (3, False),
        (1, True),
        (2, True),
        (3, True),
    ]
    # each StopReplica(delete=false) carries the epoch as it was when it was added
    assert [entries(r)[("t", 0)]["leader_epoch"] for r in stops] == [2, 3, 4, 5, 5, 5]


def test_reassignment_to_identical_replicas() -> None:
    """§14.8 fourth example: not being reassigned -> completes at once; B3 bumps the epoch
    once (leader unchanged, LeaderAndIsr to the replicas); nothing stopped."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    out = c.reassign("t", 0, [1, 2, 3])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2, 3], 1, 1)
    assert assignment(c) == ([1, 2, 3], [], [])
    assert out.sent() == [
        (LAI, 1, True),
        (LAI, 2, True),
        (LAI, 3, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 3, True),
        (UM, 1, True),  # B8
        (UM, 2, True),
        (UM, 3, True),
    ]
    assert out.result("t", 0)["error"] is None


def test_shrink_completes_immediately() -> None:
    """§14.8 fifth example: [1,2,3] -> [1,2]: R = ([1,2,3], [], [3]), TRS in ISR -> B3 bump (1),
    B4 remove 3 (2)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    out = c.reassign("t", 0, [1, 2])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 2, 2)
    assert assignment(c) == ([1, 2], [], [])
    assert c.replicas("t", 0) == {1: "OnlineReplica", 2: "OnlineReplica"}
    b3 = entries(out.of(LAI, 1)[0])[("t", 0)]
    assert lai(b3) == (1, 1, [1, 2, 3], 1)
    assert b3["removing_replicas"] == []  # the completed assignment
    assert [r["broker"] for r in out.of(LAI)] == [1, 2, 1, 2]
    assert [(r["broker"], entries(r)[("t", 0)]["delete_partition"]) for r in out.of(SR)] == [
        (3, False),
        (3, True),
    ]


def test_cancellation_stops_adding_replicas() -> None:
    """§14.6: cancel -> R = (ORS, [], []); U3 stops and deletes the adding replicas (no ISR
    write: they never joined); then Phase B at once: leader in ORS and live -> epoch bump."""
    c = Cluster(brokers=[1, 2, 3, 4])
    c.create("t", {0: [1, 2]})
    c.reassign("t", 0, [3, 4])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 1, 1)
    out = c.reassign("t", 0, None)
    assert out.result("t", 0)["error"] is None
    assert assignment(c) == ([1, 2], [], [])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 2, 2)
    assert c.replicas("t", 0) == {1: "OnlineReplica", 2: "OnlineReplica"}
    assert [(r["broker"], entries(r)[("t", 0)]["delete_partition"]) for r in out.of(SR)] == [
        (3, False),
        (4, False),
        (3, True),
        (4, True),
    ]
    # U3's LeaderAndIsr (no write, epoch 1) to the remaining replicas, then B3's (epoch 2)
    epochs = [(r["broker"], entries(r)[("t", 0)]["leader_epoch"]) for r in out.of(LAI)]
    assert epochs == [(1, 1), (2, 1), (1, 2), (2, 2)]


def test_cancellation_keeps_stored_order() -> None:
    """§14.6: [1,2,3] -> [3,4,2] is stored as [3,4,2,1]; cancelling gives ORS in stored order."""
    c = Cluster(brokers=[1, 2, 3, 4])
    c.create("t", {0: [1, 2, 3]})
    c.reassign("t", 0, [3, 4, 2])
    assert assignment(c) == ([3, 4, 2, 1], [4], [1])
    c.reassign("t", 0, None)
    assert assignment(c) == ([3, 2, 1], [], [])
    assert c.partition("t", 0)["leader"] == 1


def test_cancel_without_reassignment_in_progress() -> None:
    """§14.1: cancel with nothing in flight -> NO_REASSIGNMENT_IN_PROGRESS."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    out = c.reassign("t", 0, None)
    assert out.result("t", 0)["error"] == "NO_REASSIGNMENT_IN_PROGRESS"
    assert out.result("t", 0)["message"] == "No partition reassignment is in progress."
    assert out.requests == []
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 0, 0)


def test_reassigning_a_partition_without_leadership_is_an_unknown_server_error() -> None:
    """§14.3: a partition never initialized (its only replica was dead at creation) has
    no leadership, so phase A1 fails (partitionLeadershipInfo(tp).get); Kafka logs it
    and answers ApiError(UNKNOWN_SERVER_ERROR) with the code's default message. Phase U
    stays done: the stored assignment already holds the new replicas."""
    c = Cluster(brokers=[1, 2])
    c.fail(2)
    c.create("t", {0: [2]})
    assert c.partition("t", 0)["state"] == "NewPartition"
    out = c.reassign("t", 0, [1])
    row = out.result("t", 0)
    assert (row["error"], row["message"]) == (
        "UNKNOWN_SERVER_ERROR",
        "The server experienced an unexpected error when processing the request.",
    )
    assert assignment(c) == ([1, 2], [1], [2])


def test_cancel_after_a_leaderless_reassignment_keeps_an_isr_member_outside_rs() -> None:
    """§14.3 then §14.6, as Kafka's controller does it. The reassignment of a partition
    that never had a leader fails at A1, before A2 gives the adding replica a state. When
    the original replica's broker comes, the New partition's first election (§4.3) takes
    the first live replica of RS: the adding one, with both in the ISR. Cancelling stops
    that replica (§14.5), but its OfflineReplica transition is invalid (no state: §6.1),
    so it leaves RS without leaving the ISR; B3's Reassign election (§5.2) moves the
    leadership to the original replica. Kafka stores that state, and kcsim reports what
    it breaks: an ISR member that is not a replica."""
    c = Cluster(brokers=[1, 2])
    c.fail(2)
    c.create("t", {0: [2]})
    assert c.reassign("t", 0, [1]).result("t", 0)["error"] == "UNKNOWN_SERVER_ERROR"
    assert c.replicas("t", 0) == {2: "OnlineReplica"}  # the adding replica 1 has no state
    c.start(2)
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2], 0, 0)
    out = c.reassign("t", 0, None)
    assert out.result("t", 0)["error"] is None
    assert assignment(c) == ([2], [], [])
    assert c.state("t", 0) == ("OnlinePartition", 2, [1, 2], 1, 1)
    assert c.replicas("t", 0) == {2: "OnlineReplica"}
    stopped = [(s["broker"], s["to_state"], s["ok"]) for s in out.changes("replica")]
    assert stopped == [
        (1, "OfflineReplica", False),
        (1, "ReplicaDeletionStarted", False),
        (1, "ReplicaDeletionSuccessful", False),
        (1, "NonExistentReplica", False),
    ]
    assert out.sent() == [
        (LAI, 2, True),
        (UM, 1, True),
        (UM, 2, True),
        (UM, 1, True),
        (UM, 2, True),
    ]
    assert [(v["invariant"], v["broker"], v["detail"]) for v in out.violations] == [
        ("isr_in_replicas", 1, "ISR member 1 is not a replica: ISR [1, 2], replicas [2]")
    ]


def test_replacing_an_in_flight_reassignment() -> None:
    """§14.7: [1,2,3] -> [4,5,6] then -> [7,8,9]: [7,8,9,1,2,3], AR [7,8,9], RR [1,2,3];
    U3 stops and deletes 4,5,6; phase A for 7,8,9 (another bump)."""
    c = Cluster(brokers=range(1, 10))
    c.create("t", {0: [1, 2, 3]})
    c.reassign("t", 0, [4, 5, 6])
    out = c.reassign("t", 0, [7, 8, 9])
    assert assignment(c) == ([7, 8, 9, 1, 2, 3], [7, 8, 9], [1, 2, 3])
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2, 3], 2, 2)
    assert sorted(c.replicas("t", 0)) == [1, 2, 3, 7, 8, 9]
    assert c.replica("t", 0, 7) == "NewReplica"
    assert [(r["broker"], entries(r)[("t", 0)]["delete_partition"]) for r in out.of(SR)] == [
        (4, False),
        (5, False),
        (6, False),
        (4, True),
        (5, True),
        (6, True),
    ]
    adding = [r for r in out.of(LAI) if r["broker"] in (7, 8, 9)]
    # U3's OfflineReplica batch already tells the new RS (isNew=false); then A1 and A2
    assert [(r["broker"], entries(r)[("t", 0)]["is_new"]) for r in adding] == [
        (7, False),
        (8, False),
        (9, False),
        (7, True),
        (8, True),
        (9, True),
        (7, True),
        (8, True),
        (9, True),
    ]


def test_api_validation_refuses_new_replicas_that_are_not_live() -> None:
    """§14.1 / §19.12: new replicas must be live and not shutting down ->
    INVALID_REPLICA_ASSIGNMENT; nothing changes."""
    c = Cluster(brokers=[1, 2, 3, 4])
    c.create("t", {0: [1, 2]})
    c.fail(3)
    c.shutdown(4)
    for target in ([1, 3], [1, 4]):
        out = c.reassign("t", 0, target)
        assert out.result("t", 0)["error"] == "INVALID_REPLICA_ASSIGNMENT"
        assert out.requests == [] and out.state_changes == []
    assert assignment(c) == ([1, 2], [], [])


def test_api_validation_refuses_empty_repeated_and_negative_targets() -> None:
    """§14.1 validateReplicas, in its order: empty, then repeated ids, then negative
    ids, then new replicas not live. Each is an INVALID_REPLICA_ASSIGNMENT answer (an
    event_results row, not a rejected event: CONTRACT §1), before the partition is even
    looked up, and nothing changes."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.fail(3)
    cases = [
        ("t", [], "Empty replica list specified in partition reassignment."),
        ("t", [3, 3], "Duplicate replica ids in partition reassignment replica list: [3, 3]"),
        ("t", [1, -1], "Invalid broker id in replica list: [1, -1]"),
        ("gone", [], "Empty replica list specified in partition reassignment."),
    ]
    for topic, target, message in cases:
        out = c.reassign(topic, 0, target)
        assert out.rejected == []
        assert out.result(topic, 0)["error"] == "INVALID_REPLICA_ASSIGNMENT"
        assert out.result(topic, 0)["message"] == message
        assert out.requests == [] and out.state_changes == []
    assert assignment(c) == ([1, 2], [], [])


def test_api_validation_allows_dead_replicas_already_assigned() -> None:
    """§14.1: only the adding replicas (reassignTo(target).AR) are checked."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2, 3]})
    c.fail(3)
    out = c.reassign("t", 0, [3, 1])
    assert out.result("t", 0)["error"] is None
    assert assignment(c) == ([3, 1, 2], [], [2])


def test_unknown_partition_and_deleting_topic() -> None:
    """§14.1 maybeTriggerPartitionReassignment: unknown partition or topic queued for
    deletion -> UNKNOWN_TOPIC_OR_PARTITION."""
    c = Cluster(brokers=[1, 2])
    c.create("t", {0: [1, 2]})
    out = c.reassign("t", 3, [1, 2])
    assert out.result("t", 3)["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    c.fail(2)
    c.delete("t")
    out = c.reassign("t", 0, [1])
    assert out.result("t", 0)["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_leader_dead_in_target_is_reelected_on_completion() -> None:
    """§14.3 B3: leader in TRS but not live -> Reassign election (first TRS live ISR member)."""
    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [1, 2]})
    c.reassign("t", 0, [1, 2, 3])
    c.isr("t", 0, [1, 2, 3])  # completes: [1,2,3] is TRS; B3 bumps (2)
    assert c.state("t", 0) == ("OnlinePartition", 1, [1, 2, 3], 2, 3)
    assert assignment(c) == ([1, 2, 3], [], [])
