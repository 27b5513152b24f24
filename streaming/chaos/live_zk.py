"""A real ZooKeeper-mode cluster (`streaming/local_clusters/zk_cluster.py`) driven from
outside: `ZkCluster` reads its znodes (kazoo) and stops and starts its brokers; the
operations the differential tests and the soak make (topics written as AdminZkClient
writes them, reassignments, deletions) each wait for their effect in ZooKeeper;
`shadow_lag` says what a `kcsim shadow`'s saved view still lacks of ZooKeeper's present
state; `ZkChaos` is a seeded chaos driver over it, used by the differential tests and by
the soak (`streaming/chaos/soak.py`).
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from streaming.local_clusters import zk_cluster as cluster
from streaming.shadow.model import ShadowModel
from streaming.shadow.znode_reader import Reader

PREFERRED = 0  # ElectLeaders' election type

WAIT_S = 60.0


class PartitionState(NamedTuple):
    """A partition's state znode, /brokers/topics/T/partitions/P/state."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int  # the znode's version
    mzxid: int  # the transaction that last wrote it (orders it against other znodes)


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll `condition` until it holds; fail the test with `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.1)


@dataclass(frozen=True, slots=True)
class ZkCluster:
    """A running cluster: its addresses, broker control and a ZooKeeper session to read
    znodes with (`client`, kazoo)."""

    zookeeper: str  # 127.0.0.1:PORT
    bootstrap: str  # every broker, comma separated
    dir: Path
    brokers: tuple[int, ...]  # (1, 2, 3)
    client: KazooClient

    def kill(self, broker: int) -> None:
        """SIGKILL; returns once the process is gone (its znode lingers up to 6 s)."""
        cluster.kill_broker(self.dir, broker)

    def shutdown(self, broker: int) -> None:
        """SIGTERM: a controlled shutdown; returns once the process has exited."""
        cluster.shutdown_broker(self.dir, broker)

    def start(self, broker: int) -> None:
        """Start a stopped broker again (same id, port, log dirs); returns once registered."""
        cluster.start_broker(self.dir, broker)

    def bootstrap_of(self, broker: int) -> str:
        return f"127.0.0.1:{cluster.load_layout(self.dir).broker_ports[broker]}"

    def registered(self) -> set[int]:
        return cluster.registered_brokers(self.client)

    def controller_id(self) -> int | None:
        return cluster.controller_id(self.client)

    def wait_registered(self, brokers: Iterable[int], timeout_s: float = WAIT_S) -> None:
        wanted = set(brokers)
        wait_for(lambda: wanted <= self.registered(), f"brokers {wanted} registered", timeout_s)

    def wait_unregistered(self, brokers: Iterable[int], timeout_s: float = WAIT_S) -> None:
        gone = set(brokers)
        wait_for(lambda: not gone & self.registered(), f"brokers {gone} gone", timeout_s)

    def wait_controller(self, timeout_s: float = WAIT_S) -> int:
        wait_for(lambda: self.controller_id() is not None, "a controller", timeout_s)
        controller = self.controller_id()
        assert controller is not None
        return controller

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        """The state znode, or None before the controller has written it."""
        try:
            data, stat = self.client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        except NoNodeError:
            return None
        state = json.loads(data)
        return PartitionState(
            leader=state["leader"],
            leader_epoch=state["leader_epoch"],
            isr=tuple(state["isr"]),
            controller_epoch=state["controller_epoch"],
            partition_epoch=stat.version,
            mzxid=stat.mzxid,
        )

    def wait_partition_state(
        self,
        topic: str,
        partition: int,
        condition: Callable[[PartitionState], bool],
        what: str,
        timeout_s: float = WAIT_S,
    ) -> PartitionState:
        """Poll the state znode until `condition` holds; returns that state."""
        seen: list[PartitionState] = []

        def holds() -> bool:
            state = self.partition_state(topic, partition)
            if state is not None:
                seen[:] = [state]
            return state is not None and condition(state)

        try:
            wait_for(holds, f"{topic}-{partition}: {what}", timeout_s)
        except AssertionError as error:
            raise AssertionError(f"{error}; last state {seen}") from None
        return seen[0]

    def broker_change_zxid(self) -> int:
        """The transaction of the latest registration or deregistration (/brokers/ids
        pzxid): compared with a state znode's mzxid, it orders the two changes."""
        _, stat = self.client.get("/brokers/ids")
        return int(stat.pzxid)

    def running(self) -> set[int]:
        layout = cluster.load_layout(self.dir)
        return {b for b in self.brokers if layout.broker_pid(b) is not None}

    def ensure_all_up(self) -> None:
        """Start every broker that is down and wait until all are registered and a
        controller is elected: the state every test finds the shared cluster in."""
        for broker in self.brokers:
            if broker not in self.running():
                self.start(broker)
        self.wait_registered(self.brokers)
        self.wait_controller()


def unique_topic(prefix: str = "kcsim") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topic(
    zk: ZkCluster,
    topic: str,
    assignment: Mapping[int, Sequence[int]],
    configs: Mapping[str, str] | None = None,
) -> None:
    """Create `topic` with explicit replica assignments ({partition: [replicas]}, the first
    replica preferred) and wait until the controller has written every partition's state."""
    admin = KafkaAdminClient(bootstrap_servers=zk.bootstrap, client_id="kcsim-tests")
    try:
        admin.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=-1,
                    replication_factor=-1,
                    replica_assignments={p: list(r) for p, r in assignment.items()},
                    topic_configs=dict(configs or {}),
                )
            ]
        )
    finally:
        admin.close()
    for partition in assignment:
        zk.wait_partition_state(topic, partition, lambda _: True, "state znode written")


def admin(zk: ZkCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=zk.bootstrap, client_id="kcsim-differential")


def topic_znode(zk: ZkCluster, topic: str) -> dict[str, Any] | None:
    try:
        return json.loads(zk.client.get(f"/brokers/topics/{topic}")[0])
    except NoNodeError:
        return None


def assignment_of(zk: ZkCluster, topic: str) -> dict[int, list[int]]:
    znode = topic_znode(zk, topic)
    assert znode is not None, f"topic {topic} has no znode"
    return {int(p): r for p, r in znode["partitions"].items()}


def wait_settled(zk: ZkCluster, timeout_s: float = 60.0) -> None:
    """Every partition of the cluster (other tests' topics too: their catch-up would race
    the next operation) with a live ISR member led by a live broker, with every live
    replica back in its ISR: elections and a restart's catch-up are done."""

    def settled() -> bool:
        live = zk.registered()
        for topic in zk.client.get_children("/brokers/topics"):
            znode = topic_znode(zk, topic)
            if znode is None:
                continue  # deleted meanwhile
            for p, replicas in znode["partitions"].items():
                state = zk.partition_state(topic, int(p))
                if state is None:
                    return False
                up = [b for b in replicas if b in live]
                if not set(state.isr) & live:
                    continue  # only dead brokers in the ISR: offline until one is back
                if state.leader not in live or not set(up) <= set(state.isr):
                    return False
        return True

    wait_for(settled, "live leaders and full ISRs", timeout_s)


def wait_left(zk: ZkCluster, broker: int, topics: list[str], timeout_s: float = 60.0) -> None:
    """`broker` unregistered and out of every ISR of `topics` that has another member."""
    zk.wait_unregistered([broker], timeout_s)

    def left() -> bool:
        for topic in topics:
            for p in assignment_of(zk, topic):
                state = zk.partition_state(topic, p)
                if state is None or (broker in state.isr and len(state.isr) > 1):
                    return False
                if state.leader == broker:
                    return False
        return True

    wait_for(left, f"broker {broker} out of the ISRs of {topics}", timeout_s)


def delete_topics(zk: ZkCluster, topics: list[str], timeout_s: float = 60.0) -> None:
    """Delete (those that exist) and wait until their znodes and deletion requests are
    gone."""
    existing = [t for t in topics if topic_znode(zk, t) is not None]
    if not existing:
        return
    client = admin(zk)
    try:
        client.delete_topics(existing)
    finally:
        client.close()
    wait_for(
        lambda: all(
            topic_znode(zk, t) is None and not zk.client.exists(f"/admin/delete_topics/{t}")
            for t in topics
        ),
        f"{topics} deleted",
        timeout_s,
    )


def write_topic_znode(zk: ZkCluster, topic: str, assignment: dict[int, list[int]]) -> None:
    """Create `topic` as ZooKeeper-mode admin tools do (AdminZkClient: the config znode,
    then the topic znode the controller watches), which allows partitions with different
    replica counts (CreateTopics refuses them); waits for every state znode."""
    configs = {"version": 1, "config": {}}
    zk.client.create(f"/config/topics/{topic}", json.dumps(configs).encode())
    partitions = {str(p): r for p, r in assignment.items()}
    znode = {"version": 3, "partitions": partitions, "adding_replicas": {}}
    znode["removing_replicas"] = {}
    zk.client.create(f"/brokers/topics/{topic}", json.dumps(znode).encode())
    for partition in assignment:
        zk.wait_partition_state(topic, partition, lambda _: True, "state znode written")


def shadow_lag(client: KazooClient, state_path: Path) -> list[str]:
    """What ZooKeeper holds now and a shadow's saved view (`state_path`, written after
    each flush, so nothing of it is pending) does not: brokers, topics, partition states,
    deletions, controller. Empty: the shadow has caught up."""
    try:
        saved = ShadowModel.from_json(json.loads(state_path.read_text()))
    except (FileNotFoundError, ValueError):
        return ["no saved state yet"]
    snap = Reader(client, None).snapshot()
    lag = [
        f"broker {b}"
        for b in saved.brokers.keys() | snap.brokers.keys()
        if saved.brokers.get(b) != snap.brokers.get(b)
    ]
    topics = {t: info for t, (info, _) in snap.topics.items()}
    lag += [
        f"topic {t}"
        for t in saved.topics.keys() | topics.keys()
        if saved.topics.get(t) != topics.get(t)
    ]
    states = {tp: state for tp, (state, _) in snap.states.items()}
    lag += [
        f"state {tp}: {saved.states.get(tp)} != {states.get(tp)}"
        for tp in saved.states.keys() | states.keys()
        if saved.states.get(tp) != states.get(tp)
    ]
    if saved.deleting != set(snap.deletes):
        lag.append(f"deletions {saved.deleting} != {set(snap.deletes)}")
    if saved.controller != (snap.controller[0] if snap.controller else None):
        lag.append(f"controller {saved.controller}")
    return lag


def _led_by(broker: int) -> Callable[[PartitionState], bool]:
    return lambda state: state.leader == broker


class ZkChaos:
    """Seeded random operations on the cluster, each legal in the cluster's present state,
    each followed by a wait for its effect in ZooKeeper and by `caught_up()`, the wait for
    the shadow to have written it (so that each operation's writes are attributed to it,
    not to the next). Every kill -9 is noted in `kills` (the broker, and
    `time.monotonic()` just before the signal)."""

    def __init__(
        self, zk: ZkCluster, caught_up: Callable[[], None], seed: int, topics: list[str]
    ) -> None:
        self.zk, self.caught_up, self.rng = zk, caught_up, random.Random(seed)
        self.topics = topics  # the topics it created and has not deleted
        self.down: set[int] = set()
        self.done: list[str] = []
        self.kills: list[tuple[int, float]] = []

    def live(self) -> list[int]:
        return [b for b in self.zk.brokers if b not in self.down]

    def replicas(self, count: int) -> list[int]:
        """`count` distinct brokers, the first one live (so the partition gets a leader)."""
        first = self.rng.choice(self.live())
        rest = self.rng.sample([b for b in self.zk.brokers if b != first], count - 1)
        return [first, *rest]

    def choices(self) -> list[tuple[str, int]]:
        ops = [("elect", 4), ("reassign", 4)] if self.topics else []
        if len(self.topics) < 4:
            ops.append(("create", 3))
        if self.topics:
            ops.append(("add", 2))
            if not self.down:
                ops.append(("delete", 2))
        if self.down:
            ops.append(("start", 6))
        else:
            ops += [("shutdown", 3), ("kill", 1)]
        return ops

    def step(self) -> None:
        ops = self.choices()
        name = self.rng.choices([o for o, _ in ops], weights=[w for _, w in ops])[0]
        if getattr(self, name)():  # False: nothing to do in the cluster's present state
            self.done.append(name)
            self.caught_up()

    def create(self) -> bool:
        topic = unique_topic("chaos")
        count = self.rng.randint(1, 3)
        assignment = {p: self.replicas(self.rng.randint(1, 3)) for p in range(count)}
        write_topic_znode(self.zk, topic, assignment)  # SPEC §10.3
        self.topics.append(topic)
        wait_settled(self.zk)
        return True

    def add(self) -> bool:
        """PartitionModifications (SPEC §10.2): the topic znode with partitions added, as
        AdminZkClient.addPartitions writes it."""
        topic = self.rng.choice(self.topics)
        path = f"/brokers/topics/{topic}"
        data, stat = self.zk.client.get(path)
        znode = json.loads(data)
        if znode.get("adding_replicas"):
            return False
        first = len(znode["partitions"])
        added = {str(first + i): self.replicas(self.rng.randint(1, 3)) for i in range(2)}
        znode["partitions"].update(added)
        self.zk.client.set(path, json.dumps(znode).encode(), version=stat.version)
        for p in added:
            self.zk.wait_partition_state(topic, int(p), lambda _: True, "created")
        wait_settled(self.zk)
        return True

    def delete(self) -> bool:
        topic = self.topics.pop(self.rng.randrange(len(self.topics)))
        delete_topics(self.zk, [topic])  # SPEC §15, every broker up
        return True

    def elect(self) -> bool:
        """A preferred election (SPEC §12.1) of the partitions not led by a live first
        replica that is in their ISR."""
        live = set(self.live())
        wanted: dict[str, list[int]] = {}
        for topic in self.topics:
            for p, replicas in assignment_of(self.zk, topic).items():
                state = self.zk.partition_state(topic, p)
                first = replicas[0]
                if state and state.leader != first and first in live and first in state.isr:
                    wanted.setdefault(topic, []).append(p)
        if not wanted:
            return False
        with closing(admin(self.zk)) as client:  # a fresh one: brokers come and go
            client.elect_leaders(PREFERRED, wanted)
        for topic, partitions in wanted.items():
            first_of = assignment_of(self.zk, topic)
            for p in partitions:
                self.zk.wait_partition_state(topic, p, _led_by(first_of[p][0]), "preferred")
        return True

    def reassign(self) -> bool:
        """A reassignment to live brokers run to completion (SPEC §14)."""
        topic = self.rng.choice(self.topics)
        current = assignment_of(self.zk, topic)
        p = self.rng.choice(sorted(current))
        live = self.live()
        state = self.zk.partition_state(topic, p)
        if state is None or state.leader not in live:
            return False  # no leader for new replicas to catch up from
        target = self.rng.sample(live, self.rng.randint(1, len(live)))
        if target == current[p]:
            return False
        with closing(admin(self.zk)) as client:
            client.alter_partition_reassignments({TopicPartition(topic, p): target})

        def done() -> bool:
            znode = topic_znode(self.zk, topic) or {}
            return not znode.get("adding_replicas") and assignment_of(self.zk, topic)[p] == target

        wait_for(done, f"{topic}-{p} reassigned to {target}")
        wait_settled(self.zk)
        return True

    def shutdown(self) -> bool:
        broker = self.rng.choice(self.live())
        self.zk.shutdown(broker)  # SPEC §11 (and §7.2 when it is the controller)
        self.down.add(broker)
        wait_left(self.zk, broker, self.topics)
        self.zk.wait_controller()
        return True

    def kill(self) -> bool:
        broker = self.rng.choice(self.live())
        self.kills.append((broker, time.monotonic()))
        self.zk.kill(broker)  # SPEC §8.3, §9.1 (and §7.2 when it is the controller)
        self.down.add(broker)
        wait_left(self.zk, broker, self.topics)
        self.zk.wait_controller()
        return True

    def start(self) -> bool:
        broker = self.down.pop()
        self.zk.start(broker)  # SPEC §8.2, then the leaders' AlterPartitions (§13.1)
        wait_settled(self.zk)
        return True
