"""`kcsim kafka-local topic create NAME --assignment 0:1,2,3/1:2,3,1`: a topic on a local
cluster with the replicas placed as given, through Kafka's own admin API (CreateTopics
with a replica assignment, as `kafka-topics --create --replica-assignment` sends it).

`--assignment` names each partition: `PARTITION:REPLICA,...`, partitions separated by `/`.
`--replica-assignment` is Kafka's own form (`kafka-topics --replica-assignment`): the
partitions in order, separated by `,`, each one's replicas separated by `:`
(`1:2:3,2:3:1`). Either way the first replica is the preferred leader, partitions are
0..N-1 and each has the same number of distinct replicas (Kafka's own rule).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from streaming.local_clusters.processes import LocalClusterError

__all__ = ["create_topic", "parse_assignment", "parse_replica_assignment"]


def parse_assignment(text: str) -> dict[int, list[int]]:
    """`0:1,2,3/1:2,3,1` -> {0: [1, 2, 3], 1: [2, 3, 1]}; a LocalClusterError naming the
    part that is wrong."""
    assignment: dict[int, list[int]] = {}
    for part in text.split("/"):
        partition, sep, replicas = part.partition(":")
        try:
            if not sep:
                raise ValueError
            number = int(partition)
            brokers = [int(b) for b in replicas.split(",")]
        except ValueError:
            raise LocalClusterError(
                f"--assignment: {part!r} is not PARTITION:BROKER,BROKER,... (e.g. 0:1,2,3/1:2,3,1)"
            ) from None
        if number in assignment:
            raise LocalClusterError(f"--assignment: partition {number} is given twice")
        assignment[number] = brokers
    if sorted(assignment) != list(range(len(assignment))):
        raise LocalClusterError(
            f"--assignment: partitions must be 0..{len(assignment) - 1}, not {sorted(assignment)}"
        )
    return _checked(assignment, "--assignment")


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's `1:2:3,2:3:1` -> {0: [1, 2, 3], 1: [2, 3, 1]}."""
    try:
        assignment = {
            number: [int(b) for b in part.split(":")] for number, part in enumerate(text.split(","))
        }
    except ValueError:
        raise LocalClusterError(
            f"--replica-assignment: {text!r} is not BROKER:BROKER,... per partition "
            "(e.g. 1:2:3,2:3:1)"
        ) from None
    return _checked(assignment, "--replica-assignment")


def _checked(assignment: dict[int, list[int]], option: str) -> dict[int, list[int]]:
    for number, brokers in assignment.items():
        if len(set(brokers)) != len(brokers):
            raise LocalClusterError(f"{option}: partition {number} repeats a broker")
    if len({len(r) for r in assignment.values()}) != 1:
        raise LocalClusterError(f"{option}: every partition needs as many replicas")
    return assignment


def create_topic(
    bootstrap: str,
    name: str,
    assignment: Mapping[int, list[int]],
    configs: Mapping[str, str],
    client_config: Mapping[str, Any],
) -> None:
    """Create the topic through the cluster's admin API; Kafka's error as a
    LocalClusterError (a broker not registered, a topic that exists, ...)."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError

    topic = NewTopic(
        name,
        num_partitions=-1,
        replication_factor=-1,
        replica_assignments={p: list(r) for p, r in assignment.items()},
        topic_configs=dict(configs),
    )
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            request_timeout_ms=15_000,
            client_id="kcsim-kafka-local",
            **client_config,
        )
    except (KafkaError, OSError) as error:
        raise LocalClusterError(f"no Kafka at {bootstrap}: {error}") from None
    try:
        admin.create_topics([topic], validate_only=False, raise_errors=True)
    except KafkaError as error:
        raise LocalClusterError(f"creating {name}: {_reason(error)}") from None
    finally:
        admin.close()


def _reason(error: Exception) -> str:
    """Kafka's own message of a refused CreateTopics (kafka-python's text holds the whole
    request and response)."""
    found = re.search(r"error_message=(['\"])(.*?)\1", str(error))
    return f"{type(error).__name__}: {found.group(2)}" if found else str(error)
