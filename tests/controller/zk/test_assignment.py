"""controller.zk.assignment against Kafka 3.7.1's own AdminUtils tests.

Expected assignments are those of core/src/test/scala/unit/kafka/admin/AdminRackAwareTest.scala
at tag 3.7.1; the distribution checks port RackAwareTest.checkReplicaDistribution. Kafka's
tests that use a random start index are run here with kcsim's fixed start index 0 (their
checks hold for any start index).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.zk.assignment import AssignmentError, assign_replicas, rack_alternated_brokers

Assignment = Mapping[int, tuple[int, ...]]
SIX_BROKERS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


# AdminRackAwareTest.testReplicaAssignment: 5 rack-less brokers, 10 partitions, RF 3,
# assignReplicasToBrokers(brokers, 10, 3, 0, -1).
def test_rack_unaware_matches_kafka() -> None:
    assert assign_replicas({b: None for b in range(5)}, 10, 3) == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


# AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers:
# assignReplicasToBrokers(brokers, 7, 3, 0, 0).
def test_rack_aware_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(racks, 7, 3) == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


def refusal(brokers: Mapping[int, str | None], partitions: int, rf: int) -> AssignmentError:
    with pytest.raises(AssignmentError) as caught:
        assign_replicas(brokers, partitions, rf)
    return caught.value


# AdminRackAwareTest.testReplicaAssignment: RF 0 and RF 6 over 5 brokers are refused.
def test_replication_factor_errors() -> None:
    brokers = dict.fromkeys(range(5))
    error = refusal(brokers, 10, 0)
    assert (error.error, str(error)) == (
        "INVALID_REPLICATION_FACTOR",
        "Replication factor must be larger than 0.",
    )
    error = refusal(brokers, 10, 6)
    assert (error.error, str(error)) == (
        "INVALID_REPLICATION_FACTOR",
        "Replication factor: 6 larger than available brokers: 5.",
    )
    assert str(refusal({1: None, 2: None}, 1, 3)) == (
        "Replication factor: 3 larger than available brokers: 2."
    )
    assert str(refusal({}, 1, 1)) == "Replication factor: 1 larger than available brokers: 0."


def test_partition_count_error() -> None:
    error = refusal({0: None}, 0, 1)
    assert (error.error, str(error)) == (
        "INVALID_PARTITIONS",
        "Number of partitions must be larger than 0.",
    )


def test_some_brokers_without_rack() -> None:
    assert str(refusal({0: "a", 1: None, 2: "b"}, 3, 2)) == (
        "Not all brokers have rack information for replica rack aware assignment."
    )


def test_rack_unaware_walks_brokers_in_id_order() -> None:
    # ZooKeeper lists broker ids sorted; the mapping's order must not matter.
    assert assign_replicas({7: None, 3: None, 5: None}, 3, 2) == {
        0: (3, 5),
        1: (5, 7),
        2: (7, 3),
    }


def test_single_broker() -> None:
    assert assign_replicas({4: None}, 3, 1) == {0: (4,), 1: (4,), 2: (4,)}
    assert assign_replicas({4: "r"}, 2, 1) == {0: (4,), 1: (4,)}


# ------------------------------------------------ RackAwareTest.checkReplicaDistribution


def check_distribution(
    assignment: Assignment,
    racks: Mapping[int, str],
    partitions: int,
    replication_factor: int,
    *,
    rack_aware: bool = True,
    leaders: bool = True,
    replicas: bool = True,
) -> None:
    assert sorted(assignment) == list(range(partitions))
    for replica_list in assignment.values():
        assert len(set(replica_list)) == len(replica_list) == replication_factor
    if rack_aware:
        for replica_list in assignment.values():
            assert len({racks[b] for b in replica_list}) == replication_factor
    if leaders:
        counts = Counter(replica_list[0] for replica_list in assignment.values())
        assert sorted(counts.values()) == [partitions // len(racks)] * len(racks)
    if replicas:
        counts = Counter(b for replica_list in assignment.values() for b in replica_list)
        per_broker = partitions * replication_factor // len(racks)
        assert sorted(counts.values()) == [per_broker] * len(racks)


@pytest.mark.parametrize(
    ("name", "racks", "partitions", "rf", "flags"),
    [
        ("testAssignmentWithRackAware", SIX_BROKERS, 6, 3, {}),
        (
            "testAssignmentWithRackAwareWithUnevenReplicas",
            SIX_BROKERS,
            13,
            3,
            {"leaders": False, "replicas": False},
        ),
        (
            "testAssignmentWithRackAwareWithUnevenRacks",
            {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"},
            12,
            3,
            {"replicas": False},
        ),
        ("testAssignmentWith2ReplicasRackAware", SIX_BROKERS, 12, 2, {}),
        ("testAssignmentWith2ReplicasRackAwareWith6Partitions", SIX_BROKERS, 6, 2, {}),
        (
            "testAssignmentWith2ReplicasRackAwareWith6PartitionsAnd3Brokers",
            {0: "rack1", 1: "rack2", 4: "rack3"},
            3,
            2,
            {},
        ),
        (
            "testLargeNumberPartitionsAssignment",
            {
                0: "rack1",
                1: "rack2",
                2: "rack2",
                3: "rack3",
                4: "rack3",
                5: "rack1",
                6: "rack1",
                7: "rack2",
                8: "rack2",
                9: "rack3",
                10: "rack1",
                11: "rack3",
            },
            96,
            3,
            {},
        ),
        (
            "testSkipBrokerWithReplicaAlreadyAssigned",
            {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"},
            6,
            4,
            {"rack_aware": False, "leaders": False, "replicas": False},
        ),
    ],
)
def test_kafka_distribution_checks(
    name: str, racks: dict[int, str], partitions: int, rf: int, flags: dict[str, bool]
) -> None:
    del name  # the Kafka test it ports
    check_distribution(assign_replicas(racks, partitions, rf), racks, partitions, rf, **flags)


def test_more_replicas_than_racks() -> None:  # AdminRackAwareTest.testMoreReplicasThanRacks
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas(racks, 6, 5)
    assert all(len(r) == 5 for r in assignment.values())
    assert all(len({racks[b] for b in r}) == 3 for r in assignment.values())


def test_less_replicas_than_racks() -> None:  # AdminRackAwareTest.testLessReplicasThanRacks
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas(racks, 6, 2)
    assert all(len({racks[b] for b in r}) == 2 for r in assignment.values())


def test_single_rack() -> None:  # AdminRackAwareTest.testSingleRack
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas(racks, 6, 3)
    assert all(len(r) == 3 for r in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == dict.fromkeys(range(6), 1)


@given(
    brokers=st.dictionaries(
        st.integers(0, 50), st.sampled_from(["a", "b", "c"]), min_size=1, max_size=8
    ),
    partitions=st.integers(1, 40),
    data=st.data(),
)
def test_always_distinct_full_lists(
    brokers: dict[int, str], partitions: int, data: st.DataObject
) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    for racks in (brokers, dict.fromkeys(brokers)):
        assignment = assign_replicas(racks, partitions, rf)
        assert sorted(assignment) == list(range(partitions))
        for replica_list in assignment.values():
            assert len(set(replica_list)) == rf
            assert set(replica_list) <= set(brokers)
