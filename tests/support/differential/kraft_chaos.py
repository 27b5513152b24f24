"""A seeded chaos driver for a real KRaft cluster of separate brokers and controllers
(`kcsim kafka-local start --nodes 3 --controllers 3`): operations chosen at random with
weights, each one waiting on the condition that says it took effect (a broker fenced, a
node up, a leader moved, a reassignment complete, a config visible), never on a clock.

At most one broker and one controller are down at a time, so the quorum stands and every
RF-3 partition keeps a leader; a down node is started again by a later operation (its
weight grows with the time it has been down) and by `settle()` at the end.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions

from tests.support.clusters.kraft_cluster import KraftCluster, Partition, wait_for

MAX_PARTITIONS = 6
_T = TypeVar("_T")


@dataclass(slots=True)
class KraftChaos:
    kraft: KraftCluster
    topics: tuple[str, ...]
    seed: int
    random: random.Random = field(init=False)
    done: Counter[str] = field(default_factory=Counter)
    down: dict[int, int] = field(default_factory=dict)  # node -> op number it went down

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)

    # ------------------------------------------------------------ the run

    def run(self, count: int) -> Counter[str]:
        for n in range(count):
            ops = self._choices(n)
            names = list(ops)
            name = self.random.choices(names, weights=[ops[k][0] for k in names])[0]
            # an operation with nothing to do here does another, and says which
            self.done[ops[name][1]() or name] += 1
        return self.done

    def _choices(self, n: int) -> dict[str, tuple[float, Callable[[], str | None]]]:
        layout = self.kraft.layout()
        brokers_down = [b for b in self.down if b in layout.node_ids]
        controllers_down = [c for c in self.down if c in layout.controller_ids]
        ops: dict[str, tuple[float, Callable[[], str | None]]] = {
            "preferred_election": (3, self.preferred_election),
            "min_isr_change": (2, self.min_isr_change),
            "unclean_toggle": (1, self.unclean_toggle),
            "reassignment": (3, self.reassignment),
            "partition_addition": (1, self.partition_addition),
        }
        if not brokers_down:
            ops["broker_kill"] = (1, self.broker_kill)
            ops["broker_shutdown"] = (1, self.broker_shutdown)
        if not controllers_down:
            ops["controller_kill"] = (0.7, self.controller_kill)
        if self.down:
            longest = n - min(self.down.values())
            ops["node_start"] = (1 + longest, self.node_start)
        return ops

    def settle(self) -> None:
        """Every node up again, every partition's ISR full."""
        for node in sorted(self.down):
            self.kraft.start(node)
        self.down.clear()
        for topic in self.topics:
            self.kraft.wait_isr_full(topic)

    # ------------------------------------------------------------ operations

    def _retry(self, ask: Callable[[], _T], what: str) -> _T:
        """`ask()` until it answers: with a broker down, the admin client may first try
        that broker (a KafkaError, counted as "not yet")."""
        got: list[_T] = []
        wait_for(lambda: bool(got.append(ask()) or True), what)
        return got[0]

    def _partitions(self, topic: str) -> dict[int, Partition]:
        return self._retry(lambda: self.kraft.partitions(topic), f"{topic} described")

    def _topic(self) -> str:
        return self.random.choice(self.topics)

    def _up_brokers(self) -> list[int]:
        return [b for b in self.kraft.nodes if b not in self.down]

    def preferred_election(self) -> None:
        topic = self._topic()
        parts = self._partitions(topic)

        def preferred(ps: dict[int, Partition]) -> bool:
            return all(
                p.leader == p.replicas[0]
                for p in ps.values()
                if p.replicas[0] in p.isr and p.replicas[0] not in self.down
            )

        def elected() -> bool:
            # ElectLeaders' errors are answers, not raised (a controller failing over,
            # a broker just back): asked again until the leaders are the preferred ones;
            # a partition already led by its preferred replica writes nothing
            self.kraft.elect_preferred(topic, sorted(parts))
            return preferred(self.kraft.partitions(topic))

        wait_for(elected, f"{topic}: preferred leaders")

    def _set_topic_config(self, topic: str, key: str, value: str) -> None:
        self._retry(lambda: self.kraft.alter_topic_configs(topic, {key: value}), "AlterConfigs")

        def visible() -> bool:
            admin = self.kraft.admin()
            try:
                answer = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            finally:
                admin.close()
            # {resource type: {resource name: {key: {"value": ..., ...}}}}
            entries = [by_name.get(topic, {}).get(key) for by_name in answer.values()]
            return any(isinstance(e, dict) and e.get("value") == value for e in entries)

        wait_for(visible, f"{topic}: {key}={value}")

    def min_isr_change(self) -> None:
        self._set_topic_config(self._topic(), "min.insync.replicas", self.random.choice("12"))

    def unclean_toggle(self) -> None:
        value = self.random.choice(("true", "false"))
        self._set_topic_config(self._topic(), "unclean.leader.election.enable", value)

    def reassignment(self) -> str | None:
        topic = self._topic()
        parts = self._partitions(topic)
        partition = self.random.choice(sorted(parts))
        rf = len(parts[partition].replicas)
        up = self._up_brokers()
        if len(up) < rf:
            self.preferred_election()
            return "preferred_election"
        target = self.random.sample(up, rf)
        self._retry(lambda: self.kraft.reassign({(topic, partition): target}), "reassignment")

        def complete(ps: dict[int, Partition]) -> bool:
            p = ps[partition]
            return list(p.replicas) == target and p.isr == set(target) and p.leader >= 0

        self.kraft.wait_partitions(topic, complete, f"partition {partition} moved to {target}")
        return None

    def partition_addition(self) -> str | None:
        topic = self._topic()
        count = len(self._partitions(topic))
        if count >= MAX_PARTITIONS:
            self.min_isr_change()
            return "min_isr_change"
        admin = self.kraft.admin()
        try:
            admin.create_partitions({topic: NewPartitions(count + 1)})
        finally:
            admin.close()

        def added(ps: dict[int, Partition]) -> bool:
            return len(ps) == count + 1 and all(p.leader >= 0 for p in ps.values())

        self.kraft.wait_partitions(topic, added, f"{count + 1} partitions")
        return None

    def broker_kill(self) -> None:
        broker = self.random.choice(self._up_brokers())
        self.kraft.kill(broker)
        self.kraft.wait_fenced(broker)
        self.down[broker] = sum(self.done.values())

    def broker_shutdown(self) -> None:
        broker = self.random.choice(self._up_brokers())
        self.kraft.shutdown(broker)  # returns once the process has exited
        self.kraft.wait_fenced(broker)
        self.down[broker] = sum(self.done.values())

    def controller_kill(self) -> None:
        leader = self._retry(self.kraft.quorum_leader, "the quorum leader")
        assert leader is not None
        self.kraft.kill(leader)
        wait_for(lambda: self.kraft.quorum_leader() not in (None, leader), "a new quorum leader")
        self.down[leader] = sum(self.done.values())

    def node_start(self) -> None:
        node = min(self.down, key=lambda n: self.down[n])
        self.kraft.start(node)  # returns once it is up (unfenced, or caught up)
        del self.down[node]
