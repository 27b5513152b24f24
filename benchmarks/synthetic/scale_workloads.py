"""The scaling workloads that bench_scale.py and bench_kraft.py both time: each a function
of (arguments, cluster size, repetition) giving the batches of events of one run, with an
untimed restore after each repetition for the single-event ones.

Brokers 1 and 2 (and 10r+1, 10r+2 for repetition r) are the single-event workloads'; the
rolling restart takes brokers 3 up to 3 + `--restarts`; partitions are named as
`workloads.topic_partition` names them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from workloads import topic_partition

Event = dict[str, object]
Batches = list[list[Event]]


# (arguments, cluster size, repetition) -> the events of one run of a workload
Maker = Callable[[argparse.Namespace, int, int], Batches]


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    batches: Maker  # timed
    restore: Maker = lambda args, size, rep: []  # untimed, after each repetition
    repeated: bool = False  # run --repeats times (single events: too short to time once)


# repetition r of a single-event workload takes broker 10r+1 (failure) or 10r+2 (controlled
# shutdown): one the workloads before it left alone, as the first (broker 1 or 2) is
def broker_failure(args: argparse.Namespace, size: int, rep: int) -> Batches:
    return [[{"type": "broker_failure", "broker": 10 * rep + 1}]]


def restart_one(args: argparse.Namespace, size: int, rep: int) -> Batches:
    return [[{"type": "broker_startup", "broker": 10 * rep + 1}]]


def controlled_shutdown(args: argparse.Namespace, size: int, rep: int) -> Batches:
    return [[{"type": "controlled_shutdown", "broker": 10 * rep + 2}]]


def restart_two(args: argparse.Namespace, size: int, rep: int) -> Batches:
    broker = 10 * rep + 2
    return [
        [{"type": "broker_failure", "broker": broker}],
        [{"type": "broker_startup", "broker": broker}],
    ]


def restart_events(broker: int) -> list[Event]:
    return [
        {"type": "controlled_shutdown", "broker": broker},
        {"type": "broker_failure", "broker": broker},
        {"type": "broker_startup", "broker": broker},
    ]


def rolling_restart(args: argparse.Namespace, size: int, rep: int) -> Batches:
    # one batch per broker: a startup's UpdateMetadata holds every partition
    return [restart_events(broker) for broker in range(3, 3 + args.restarts)]


def preferred_election(args: argparse.Namespace, size: int, rep: int) -> Batches:
    return [[{"type": "leader_election", "election": "preferred"}]]


def reassignment_wave(args: argparse.Namespace, size: int, rep: int) -> Batches:
    moves: list[Event] = []
    brokers = args.brokers
    for index in range(0, size, 100):  # every 100th partition: 1% of them
        topic, partition = topic_partition(index)
        first = (index + 7) % brokers
        target = [first, (first + 1) % brokers, (first + 2) % brokers]
        moves.append(
            {
                "type": "partition_reassignment",
                "topic": topic,
                "partition": partition,
                "replicas": target,
            }
        )
    return [moves[i : i + 1000] for i in range(0, len(moves), 1000)]


def topic_churn(args: argparse.Namespace, size: int, rep: int) -> Batches:
    batches: Batches = []
    for n in range(size // 2500):
        topic = f"churn-{n}"
        batches.append(
            [
                {"type": "topic_creation", "topic": topic, "partitions": 100,
                 "replication_factor": 3},
                {"type": "topic_deletion", "topic": topic},
            ]
        )  # fmt: skip
    return batches


WORKLOADS = (
    Workload("broker_failure", broker_failure, restart_one, repeated=True),
    Workload("controlled_shutdown", controlled_shutdown, restart_two, repeated=True),
    Workload("rolling_restart", rolling_restart),
    Workload("preferred_election", preferred_election),
    Workload("reassignment_wave", reassignment_wave),
    Workload("topic_churn", topic_churn),
)
