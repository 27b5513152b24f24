"""A real KRaft cluster (`streaming/local_clusters/kraft_cluster.py`) driven from outside:
`KraftCluster` reads its partitions, quorum and fencing through kafka-python's admin
client and stops and starts its nodes; `KraftChaos` is a seeded chaos driver over it,
used by the differential tests and by the soak (`streaming/chaos/soak.py`).

`KraftChaos`: operations chosen at random with weights, each one waiting on the condition
that says it took effect (a broker fenced, a node up, a leader moved, a reassignment
complete, a config visible), never on a clock. At most one broker and one controller are
down at a time (one node, where nodes are both), so the quorum stands and every RF-3
partition keeps a leader; a down node is started again by a later operation (its weight
grows with the time it has been down) and by `settle()` at the end. Every kill -9 of a
broker is noted in `kills` (the broker, and `time.monotonic()` just before the signal).
"""

from __future__ import annotations

import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeVar

from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    NewPartitions,
    NewTopic,
)
from kafka.errors import KafkaError, for_code

from streaming.jars import kafka_libs_dir
from streaming.local_clusters import kraft_cluster as cluster
from streaming.local_clusters.processes import java

_T = TypeVar("_T")
WAIT_S = 90.0


class Partition(NamedTuple):
    """A partition as the cluster's metadata shows it."""

    leader: int
    leader_epoch: int
    isr: frozenset[int]
    replicas: tuple[int, ...]


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll `condition` until it holds (a KafkaError counts as "not yet"); fail the test
    with `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except KafkaError:
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.2)


@dataclass(frozen=True, slots=True)
class KraftCluster:
    dir: Path
    bootstrap: str
    nodes: tuple[int, ...]

    def admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(
            bootstrap_servers=self.bootstrap, client_id="kcsim-chaos", request_timeout_ms=10000
        )

    def layout(self) -> cluster.Layout:
        return cluster.load_layout(self.dir)

    def kill(self, node: int) -> None:
        cluster.kill_node(self.dir, node)

    def shutdown(self, node: int) -> None:
        cluster.shutdown_node(self.dir, node)

    def start(self, node: int) -> None:
        cluster.start_node(self.dir, node)

    def running(self) -> set[int]:
        layout = self.layout()
        return {n for n in self.nodes if layout.pid(n) is not None}

    def unfenced(self) -> set[int] | None:
        return cluster.unfenced_brokers(self.layout())

    def wait_fenced(self, node: int) -> None:
        wait_for(lambda: node not in (self.unfenced() or {node}), f"node {node} fenced")

    def quorum_leader(self) -> int | None:
        admin = self.admin()
        try:
            quorum = admin.describe_metadata_quorum()["topics"][0]["partitions"][0]
        finally:
            admin.close()
        leader = quorum["leader_id"]
        return None if leader < 0 else int(leader)

    def partitions(self, topic: str) -> dict[int, Partition]:
        admin = self.admin()
        try:
            described = admin.describe_topics([topic])[0]
        finally:
            admin.close()
        if described["error_code"]:  # an unknown topic is described, not raised
            raise for_code(described["error_code"])(topic)
        return {
            p["partition_index"]: Partition(
                p["leader_id"],
                p["leader_epoch"],
                frozenset(p["isr_nodes"]),
                tuple(p["replica_nodes"]),
            )
            for p in described["partitions"]
        }

    def topics(self) -> set[str]:
        admin = self.admin()
        try:
            return set(admin.list_topics())
        finally:
            admin.close()

    def wait_partitions(
        self, topic: str, condition: Callable[[dict[int, Partition]], bool], what: str
    ) -> None:
        wait_for(lambda: condition(self.partitions(topic)), f"{topic}: {what}")

    def wait_isr_full(self, topic: str) -> None:
        self.wait_partitions(
            topic,
            lambda ps: bool(ps) and all(p.isr == set(p.replicas) for p in ps.values()),
            "ISR full",
        )

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        configs: Mapping[str, str] | None = None,
    ) -> None:
        admin = self.admin()
        try:
            replicas = {p: list(r) for p, r in assignment.items()}
            new = NewTopic(topic, -1, -1, replica_assignments=replicas, topic_configs=configs)
            admin.create_topics([new])
        finally:
            admin.close()

        def created(ps: dict[int, Partition]) -> bool:
            return len(ps) == len(assignment) and all(p.leader >= 0 for p in ps.values())

        self.wait_partitions(topic, created, "created")

    def alter_topic_configs(self, topic: str, changes: Mapping[str, str | None]) -> None:
        """IncrementalAlterConfigs of one topic: a value sets the key, None deletes it."""
        self._alter_configs(ConfigResourceType.TOPIC, topic, changes)

    def alter_broker_configs(self, broker: str, changes: Mapping[str, str | None]) -> None:
        """The same for one broker's dynamic configs (kafka-python refuses the name "" of
        the cluster-wide default)."""
        self._alter_configs(ConfigResourceType.BROKER, broker, changes)

    def alter_cluster_configs(self, changes: Mapping[str, str]) -> None:
        """Set the cluster-wide default of broker configs (resource name "") with Kafka's
        own ConfigCommand (kafka-configs.sh --entity-default), one JVM; with ELR on, Kafka
        refuses a node-level min.insync.replicas (KIP-966), so this is the way to set it."""
        pairs = ",".join(f"{k}={v}" for k, v in changes.items())
        command = [
            java(), "-cp", f"{kafka_libs_dir()}/*", "kafka.admin.ConfigCommand",
            "--bootstrap-server", self.bootstrap, "--entity-type", "brokers",
            "--entity-default", "--alter", "--add-config", pairs,
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    def _alter_configs(
        self, kind: ConfigResourceType, name: str, changes: Mapping[str, str | None]
    ) -> None:
        ops = {k: (AlterConfigOp.DELETE, None) if v is None else v for k, v in changes.items()}
        admin = self.admin()
        try:
            admin.alter_configs([ConfigResource(kind, name, ops)])
        finally:
            admin.close()

    def reassign(self, targets: Mapping[tuple[str, int], Sequence[int]]) -> None:
        admin = self.admin()
        try:
            admin.alter_partition_reassignments(
                {TopicPartition(t, p): list(r) for (t, p), r in targets.items()}
            )
        finally:
            admin.close()

    def elect_preferred(self, topic: str, partitions: Sequence[int]) -> None:
        admin = self.admin()
        try:
            admin.elect_leaders(0, {topic: list(partitions)}, raise_errors=False)
        finally:
            admin.close()

    def elect_unclean(self, topic: str, partitions: Sequence[int]) -> None:
        """ElectLeaders UNCLEAN (election type 1) of some partitions of one topic."""
        admin = self.admin()
        try:
            admin.elect_leaders(1, {topic: list(partitions)}, raise_errors=False)
        finally:
            admin.close()

    def delete_topic(self, topic: str) -> None:
        admin = self.admin()
        try:
            admin.delete_topics([topic])
        finally:
            admin.close()
        wait_for(lambda: topic not in self.topics(), f"{topic} deleted")

    def ensure_all_up(self) -> None:
        for node in self.nodes:
            if node not in self.running():
                self.start(node)
        wait_for(lambda: set(self.nodes) <= (self.unfenced() or set()), "every node unfenced")


MAX_PARTITIONS = 6


@dataclass(slots=True)
class KraftChaos:
    kraft: KraftCluster
    topics: tuple[str, ...]
    seed: int
    random: random.Random = field(init=False)
    done: Counter[str] = field(default_factory=Counter)
    down: dict[int, int] = field(default_factory=dict)  # node -> op number it went down
    kills: list[tuple[int, float]] = field(default_factory=list)  # broker, monotonic time

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)

    # ------------------------------------------------------------ the run

    def run(self, count: int) -> Counter[str]:
        for _ in range(count):
            self.step()
        return self.done

    def step(self) -> None:
        """One operation, drawn with weights; the n-th one sees n done before it."""
        ops = self._choices(sum(self.done.values()))
        names = list(ops)
        name = self.random.choices(names, weights=[ops[k][0] for k in names])[0]
        # an operation with nothing to do here does another, and says which
        self.done[ops[name][1]() or name] += 1

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

        def answered() -> bool:
            got.append(ask())
            return True

        wait_for(answered, what)
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
        self.kills.append((broker, time.monotonic()))
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
