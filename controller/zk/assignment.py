"""Kafka's broker-side replica assignment for topic_creation with partitions + replication_factor.

A reimplementation of `org.apache.kafka.admin.AdminUtils.assignReplicasToBrokers` (Kafka
3.7.1, server-common), which ZK mode's CreateTopics path (`ZkAdminManager.createTopics`,
`AdminZkClient.createTopic`) calls. Kafka picks the start index and the first replica
shift at random; kcsim fixes both to 0 (`fixedStartIndex = 0`, `startPartitionId = 0`,
the path Kafka takes when a start index is given) so every engine and every run agrees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class AssignmentError(ValueError):
    """Kafka refused to assign: `error` is Kafka's error code name, str() its message."""

    # Not a frozen dataclass: Python (and pytest, hypothesis) set attributes such as
    # __notes__ on exceptions.
    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


INVALID_PARTITIONS = "INVALID_PARTITIONS"
INVALID_REPLICATION_FACTOR = "INVALID_REPLICATION_FACTOR"
# AdminOperationException has no error code of its own; the CreateTopics API answers it
# with UNKNOWN_SERVER_ERROR (ApiError.fromThrowable's fallback).
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"


def assign_replicas(
    brokers: Mapping[int, str | None], partitions: int, replication_factor: int
) -> dict[int, tuple[int, ...]]:
    """Partition → replicas (first = preferred leader) over `brokers` (id → rack or None).

    Rack-aware when every broker has a rack; AssignmentError when only some have one.
    Rack-unaware assignment walks the brokers in id order, as ZooKeeper lists them
    (`KafkaZkClient.getSortedBrokerList`)."""
    if partitions <= 0:
        raise AssignmentError(INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError(
            INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > len(brokers):
        raise AssignmentError(
            INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}.",
        )
    racks = {broker: rack for broker, rack in brokers.items() if rack is not None}
    if not racks:
        return _rack_unaware(sorted(brokers), partitions, replication_factor)
    if len(racks) < len(brokers):
        raise AssignmentError(
            UNKNOWN_SERVER_ERROR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    return _rack_aware(racks, partitions, replication_factor)


def _rack_unaware(
    brokers: Sequence[int], partitions: int, replication_factor: int
) -> dict[int, tuple[int, ...]]:
    count = len(brokers)
    result: dict[int, tuple[int, ...]] = {}
    shift = 0
    for partition in range(partitions):
        # after each full round the followers move one further, so the lists vary
        if partition > 0 and partition % count == 0:
            shift += 1
        first = partition % count
        followers = (
            brokers[_replica_index(first, shift, j, count)] for j in range(replication_factor - 1)
        )
        result[partition] = (brokers[first], *followers)
    return result


def _rack_aware(
    racks: Mapping[int, str], partitions: int, replication_factor: int
) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated_brokers(racks)
    count = len(arranged)
    rack_count = len(set(racks.values()))
    result: dict[int, tuple[int, ...]] = {}
    shift = 0
    for partition in range(partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = partition % count
        chosen = [arranged[first]]
        used_racks = {racks[arranged[first]]}
        step = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * rack_count, step, count)]
                step += 1
                # Prefer a rack without a replica, then a broker without one; once every
                # rack (broker) has one, any will do.
                rack_ok = racks[broker] not in used_racks or len(used_racks) == rack_count
                broker_ok = broker not in chosen or len(chosen) == count
                if rack_ok and broker_ok:
                    chosen.append(broker)
                    used_racks.add(racks[broker])
                    break
        result[partition] = tuple(chosen)
    return result


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn (racks in name order, brokers in id order):
    rack1: 0, 1; rack2: 3 → [0, 3, 1]."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max(len(column) for column in columns)
    return [column[row] for row in range(depth) for column in columns if row < len(column)]


def _replica_index(first: int, shift: int, replica: int, count: int) -> int:
    return (first + 1 + (shift + replica) % (count - 1)) % count
