"""`kcsim kafka-local start --nodes N`: a KRaft cluster of N combined nodes on 127.0.0.1.

Each node is its own detached JVM (see local_process) playing both roles
(process.roles=broker,controller); the N nodes are the quorum's voters (a static quorum,
`controller.quorum.voters`). `start(..., voters=V)` makes only nodes 1..V voters and the
others brokers alone, so several brokers can be down while the quorum stands.
`start(..., controllers=C)` (`--controllers C`) is the layout production clusters use:
the N nodes are brokers alone (ids 1..N) and C more nodes (ids N+1..N+C) are controllers
alone (process.roles=controller), the quorum's only voters. Jars from
`.kafka/libs` (Kafka 4.1.1). Everything lives under the cluster directory:

    DIR/kraft-cluster.properties    node count, every port, the cluster id (kept across restarts)
    DIR/log4j2.properties           the nodes' logging (to each node's stdout.log)
    DIR/node-ID/                    server.properties, data/ (with __cluster_metadata-0),
                                    node.pid, stdout.log

A broker counts as up once the cluster's metadata lists it as unfenced; a controller-only
node once the quorum reports it as a voter caught up with the leader since it started.
`kill` sends SIGKILL (the controller fences a broker once its session times out; killing
the active controller makes the quorum elect another), `shutdown` SIGTERM (a broker's
controlled shutdown: it asks the controller to move its leaderships away, then is
fenced), `start` starts a stopped node again.
The single-node default of `kcsim kafka-local start` is `kafka_local`'s, unchanged.
"""

from __future__ import annotations

import argparse
import fcntl
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from streaming.jars import JarsMissingError, kafka_libs_dir
from streaming.local_clusters.processes import (
    KILL_WAIT_S,
    LocalClusterError,
    free_ports,
    is_running,
    java,
    kraft_cluster_id,
    launch_detached,
    log_tail,
    read_properties_file,
    running_pid,
    signal_group,
    wait_until,
    write_properties,
)

_T = TypeVar("_T")

DEFAULT_DIR = Path(".kcsim/kafka-kraft")
MAIN = "kafka.Kafka"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
# Small heaps, the serial collector and C1 only, as the ZooKeeper-mode cluster's brokers.
JVM_FLAGS = (
    "-Xms64m",
    "-Xmx320m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
# A SIGKILLed node is fenced once its heartbeats stop for this long (Kafka's default 9 s).
SESSION_TIMEOUT_MS = 6000

# `overrides` for a cluster that writes a metadata snapshot after 8 KiB of records or 10 s
# (Kafka's defaults: 20 MiB, 1 h). A restarted node replays the log after its newest
# snapshot as one delta, and Kafka 4.1.1 fails on a delta that holds both a topic's
# creation and a cluster-wide ClearElrRecord (a NullPointerException in
# `TopicsDelta.maybeReplayClearElrRecord`; the node exits): a cluster whose
# `min.insync.replicas` changes cluster-wide and whose nodes restart after needs them.
# Segments are kept (retention at its defaults): the log still starts at offset 0.
SNAPSHOTS = {
    "metadata.log.max.record.bytes.between.snapshots": "8192",
    "metadata.log.max.snapshot.interval.ms": "10000",
}
# ... and a log that also rolls its segments and deletes the ones a snapshot covers, as a
# long-running cluster's does (the shadow's soak and differential tests follow it through
# that); `internal.metadata.log.segment.bytes` because `metadata.log.segment.bytes` is at
# least 8 MiB
ROLLING_LOG = {
    "internal.metadata.log.segment.bytes": "16384",
    **SNAPSHOTS,
    "metadata.max.retention.bytes": "32768",
    "metadata.max.retention.ms": "30000",
    "internal.metadata.delete.delay.millis": "1000",
}

# Everything to stdout, which each launcher sends to its node's log file; the single local
# broker (kafka_local) logs the same way.
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a KRaft cluster's files live, its ports and cluster id."""

    root: Path
    cluster_id: str
    broker_ports: Mapping[int, int]  # node id -> PLAINTEXT port
    controller_ports: Mapping[int, int]  # node id -> CONTROLLER port
    voters: int = 0  # nodes 1..voters are quorum voters (0: all of them)
    controllers: int = 0  # controller-only nodes after the brokers, the only voters

    def is_voter(self, node: int) -> bool:
        if self.controllers:
            return node in self.controller_ids
        return self.voters == 0 or node <= self.voters

    @property
    def node_ids(self) -> tuple[int, ...]:
        """The nodes that are brokers (all of them unless controllers are separate)."""
        return tuple(self.broker_ports)

    @property
    def controller_ids(self) -> tuple[int, ...]:
        """The controller-only nodes (none in the combined layout)."""
        return tuple(n for n in self.controller_ports if n not in self.broker_ports)

    @property
    def all_nodes(self) -> tuple[int, ...]:
        """Every node that runs a process: the brokers, then any controller-only nodes."""
        return (*self.node_ids, *self.controller_ids)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.broker_ports.values())

    def node_dir(self, node: int) -> Path:
        if node not in self.controller_ports:
            raise LocalClusterError(f"no node {node} in {self.root} (nodes: {self.all_nodes})")
        return self.root / f"node-{node}"

    def config(self, node: int) -> Path:
        return self.node_dir(node) / "server.properties"

    def metadata_log(self, node: int) -> Path:
        """The node's copy of the `__cluster_metadata` log."""
        return self.node_dir(node) / "data" / "__cluster_metadata-0"

    def markers(self, node: int) -> tuple[str, ...]:
        return (MAIN, str(self.config(node)))

    def pid(self, node: int) -> int | None:
        return running_pid(self.node_dir(node) / "node.pid", self.markers(node))

    def save(self) -> None:
        props: dict[str, object] = {"nodes": len(self.broker_ports), "cluster.id": self.cluster_id}
        props["voters"] = self.voters
        props["controllers"] = self.controllers
        for node in self.node_ids:
            props[f"node.{node}.port"] = self.broker_ports[node]
        for node in self.all_nodes:
            props[f"node.{node}.controller.port"] = self.controller_ports[node]
        write_properties(self.root / "kraft-cluster.properties", props)


def is_cluster_dir(data_dir: Path) -> bool:
    return (data_dir / "kraft-cluster.properties").is_file()


def load_layout(data_dir: Path) -> Layout:
    data_dir = data_dir.resolve()
    props = read_properties_file(data_dir / "kraft-cluster.properties")
    try:
        brokers = int(props["nodes"])
        controllers = int(props.get("controllers", 0))
        nodes = range(1, brokers + controllers + 1)
        return Layout(
            data_dir,
            props["cluster.id"],
            {n: int(props[f"node.{n}.port"]) for n in nodes if n <= brokers},
            {n: int(props[f"node.{n}.controller.port"]) for n in nodes},
            int(props.get("voters", 0)),
            controllers,
        )
    except (KeyError, ValueError) as error:
        raise LocalClusterError(
            f"{data_dir} holds no KRaft cluster (kraft-cluster.properties missing or bad: "
            f"{error!r}); start one with `kcsim kafka-local start --nodes 3 --dir {data_dir}`"
        ) from error


def _new_layout(data_dir: Path, nodes: int, voters: int = 0, controllers: int = 0) -> Layout:
    if is_cluster_dir(data_dir):
        old = load_layout(data_dir)
        if (len(old.node_ids), old.controllers) != (nodes, controllers):
            raise LocalClusterError(
                f"{data_dir} holds a cluster of {len(old.node_ids)} brokers and "
                f"{old.controllers or 'no'} separate controllers"
            )
        return old
    ports = free_ports(2 * nodes + controllers)
    ids = range(1, nodes + controllers + 1)
    return Layout(
        data_dir,
        kraft_cluster_id(),
        {n: ports[n - 1] for n in ids if n <= nodes},
        {n: ports[nodes + n - 1] for n in ids},
        voters,
        controllers,
    )


def node_config(
    layout: Layout, node: int, overrides: Mapping[str, str] | None = None
) -> dict[str, object]:
    ports = layout.controller_ports
    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in ports.items() if layout.is_voter(n))
    replication = min(3, len(layout.node_ids))
    roles = ["broker"] if node in layout.broker_ports else []
    listeners = [f"PLAINTEXT://127.0.0.1:{layout.broker_ports[node]}"] if roles else []
    if layout.is_voter(node):
        roles.append("controller")
        listeners.append(f"CONTROLLER://127.0.0.1:{ports[node]}")
    props: dict[str, object] = {
        "process.roles": ",".join(roles),
        "node.id": node,
        "controller.quorum.voters": voters,
        "listeners": ",".join(listeners),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "log.dirs": layout.node_dir(node) / "data",
        "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 1,
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        # the scenario triggers preferred elections itself
        "auto.leader.rebalance.enable": "false",
        "unclean.leader.election.enable": "false",
        "replica.lag.time.max.ms": 10000,
        # small machine (2 cores, small heaps): few threads, a small cleaner buffer
        "num.network.threads": 2,
        "num.io.threads": 2,
        "num.replica.fetchers": 1,
        "num.recovery.threads.per.data.dir": 1,
        "background.threads": 2,
        "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
    }
    if "broker" in roles:
        props["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{layout.broker_ports[node]}"
        props["inter.broker.listener.name"] = "PLAINTEXT"
    props.update(overrides or {})
    return props


def _jvm(layout: Layout) -> list[str]:
    try:
        classpath = str(kafka_libs_dir() / "*")
    except JarsMissingError as error:
        raise LocalClusterError(str(error)) from error
    log4j = layout.root / "log4j2.properties"
    return [java(), *JVM_FLAGS, f"-Dlog4j2.configurationFile={log4j}", "-cp", classpath]


def _format(layout: Layout, node: int) -> None:
    if (layout.node_dir(node) / "data" / "meta.properties").is_file():
        return
    command = [*_jvm(layout), "kafka.tools.StorageTool", "format", "--ignore-formatted",
               f"--cluster-id={layout.cluster_id}", f"--config={layout.config(node)}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise LocalClusterError(f"formatting node {node} failed:\n{tail}")


def _launch(layout: Layout, node: int) -> None:
    home = layout.node_dir(node)
    launch_detached(
        [*_jvm(layout), MAIN, str(layout.config(node))], home / "stdout.log", home / "node.pid"
    )


def _ask_any_broker(layout: Layout, ask: Callable[[Any], _T]) -> _T | None:
    """`ask(admin)` of the first running broker that answers; None when none did."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    for node in layout.node_ids:
        if layout.pid(node) is None:
            continue
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=f"127.0.0.1:{layout.broker_ports[node]}",
                request_timeout_ms=5000,
                client_id="kcsim-kafka-local",
            )
        except (KafkaError, OSError, ValueError):
            continue
        try:
            return ask(admin)
        except (KafkaError, OSError):
            continue
        finally:
            admin.close()
    return None


def unfenced_brokers(layout: Layout) -> set[int] | None:
    """The brokers the cluster's metadata lists (unfenced), asked of any running node;
    None when no node answered (not the same as "none is unfenced")."""

    def ask(admin: Any) -> set[int]:
        brokers = admin.describe_cluster().get("brokers", ())
        return {int(b["broker_id"]) for b in brokers if not b.get("is_fenced")}

    return _ask_any_broker(layout, ask)


def caught_up_voters(layout: Layout, since_ms: int) -> set[int] | None:
    """The quorum's voters that have caught up with its leader at or after `since_ms`
    (DescribeMetadataQuorum, asked of any running broker; the leader counts once one is
    elected); None when no broker answered."""

    def ask(admin: Any) -> set[int]:
        quorum = admin.describe_metadata_quorum()["topics"][0]["partitions"][0]
        leader = int(quorum["leader_id"])
        return {
            int(voter["replica_id"])
            for voter in quorum["current_voters"]
            if int(voter["replica_id"]) == leader
            or int(voter["last_caught_up_timestamp"]) >= since_ms
        }

    return _ask_any_broker(layout, ask)


def wait_up(layout: Layout, nodes: Iterable[int], timeout_s: float) -> None:
    """Wait until each of `nodes` is up: a broker unfenced, a controller-only node caught
    up with the quorum's leader since this wait began."""
    wanted = set(nodes)
    brokers = wanted & set(layout.node_ids)
    controllers = wanted - brokers
    since_ms = int(time.time() * 1000)

    def ready() -> bool:
        for node in wanted:
            if layout.pid(node) is None:
                raise LocalClusterError(
                    f"node {node} exited during start-up; log:\n"
                    + log_tail(layout.node_dir(node) / "stdout.log")
                )
        if not brokers <= (unfenced_brokers(layout) or set()):
            return False
        return not controllers or controllers <= (caught_up_voters(layout, since_ms) or set())

    if not wait_until(ready, timeout_s, 0.5):
        raise LocalClusterError(f"nodes {sorted(wanted)} were not up within {timeout_s:.0f}s")


@contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def start(
    data_dir: Path = DEFAULT_DIR,
    *,
    nodes: int = 3,
    voters: int = 0,
    controllers: int = 0,
    overrides: Mapping[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> str:
    """Start every node not running; returns the bootstrap address once all are up."""
    if nodes < 1:
        raise LocalClusterError(f"--nodes must be at least 1, not {nodes}")
    if controllers < 0 or (controllers and voters):
        raise LocalClusterError("--controllers takes a count of separate voters, not with voters")
    data_dir = data_dir.resolve()
    with _locked(data_dir):
        layout = _new_layout(data_dir, nodes, voters, controllers)
        layout.save()
        (layout.root / "log4j2.properties").write_text(LOG4J2)
        try:
            for node in layout.all_nodes:
                if layout.pid(node) is None:
                    layout.node_dir(node).mkdir(parents=True, exist_ok=True)
                    write_properties(layout.config(node), node_config(layout, node, overrides))
                    _format(layout, node)
                    _launch(layout, node)
            wait_up(layout, layout.all_nodes, timeout_s)
        except LocalClusterError:
            _stop_locked(layout, STOP_TIMEOUT_S)
            raise
    return layout.bootstrap


def start_node(data_dir: Path, node: int, *, timeout_s: float = START_TIMEOUT_S) -> None:
    """Start one stopped node again (same id, ports, data); returns once it is up."""
    layout = load_layout(data_dir)
    with _locked(layout.root):
        if layout.pid(node) is None:
            _launch(layout, node)
        wait_up(layout, (node,), timeout_s)


def kill_node(data_dir: Path, node: int) -> None:
    """SIGKILL one node; returns once the process is gone (it stays unfenced until its
    session times out, as after a real crash)."""
    layout = load_layout(data_dir)
    pid = layout.pid(node)
    if pid is None:
        raise LocalClusterError(f"node {node} of {layout.root} is not running")
    signal_group(pid, signal.SIGKILL)
    if not wait_until(lambda: not is_running(pid, layout.markers(node)), 30.0):
        raise LocalClusterError(f"node {node} (pid {pid}) survived SIGKILL")


def shutdown_node(data_dir: Path, node: int, *, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM one node: a controlled shutdown; returns once the process has exited."""
    layout = load_layout(data_dir)
    pid = layout.pid(node)
    if pid is None:
        raise LocalClusterError(f"node {node} of {layout.root} is not running")
    signal_group(pid, signal.SIGTERM)
    if not wait_until(lambda: not is_running(pid, layout.markers(node)), timeout_s, 0.05):
        raise LocalClusterError(f"node {node} (pid {pid}) runs on {timeout_s:.0f}s after SIGTERM")


def _stop_locked(layout: Layout, timeout_s: float) -> None:
    """SIGTERM to every node at once (one by one, the last ones would wait for a quorum
    that is gone), SIGKILL to any that outlives `timeout_s`."""
    pids = {n: pid for n in layout.all_nodes if (pid := layout.pid(n)) is not None}
    for pid in pids.values():
        signal_group(pid, signal.SIGTERM)

    def all_gone() -> bool:
        return not any(is_running(pid, layout.markers(n)) for n, pid in pids.items())

    if not wait_until(all_gone, timeout_s, 0.2):
        for node, pid in pids.items():
            if is_running(pid, layout.markers(node)):
                signal_group(pid, signal.SIGKILL)
        if not wait_until(all_gone, KILL_WAIT_S, 0.2):
            raise LocalClusterError(
                f"a KRaft node is still running {KILL_WAIT_S:.0f} s after SIGKILL"
            )


def stop(data_dir: Path = DEFAULT_DIR, *, timeout_s: float = STOP_TIMEOUT_S) -> None:
    if not is_cluster_dir(data_dir):
        return
    layout = load_layout(data_dir)
    with _locked(layout.root):
        _stop_locked(layout, timeout_s)


def main(args: argparse.Namespace) -> int:
    """`kcsim kafka-local ACTION` for a KRaft cluster (kafka_local dispatches)."""
    data_dir: Path = args.dir or DEFAULT_DIR
    began = time.monotonic()
    node = args.broker
    if args.action == "start" and node is None:
        controllers = getattr(args, "controllers", None) or 0
        bootstrap = start(data_dir, nodes=args.nodes, controllers=controllers)
        took = time.monotonic() - began
        shape = (
            f"{args.nodes} brokers and {controllers} controllers"
            if controllers
            else (f"{args.nodes} nodes")
        )
        print(f"KRaft cluster of {shape} in {data_dir} is up ({took:.1f}s); bootstrap:")
        print(bootstrap)
    elif args.action == "start":
        start_node(data_dir, node)
        print(f"node {node} is up ({time.monotonic() - began:.1f}s)")
    elif args.action == "kill":
        kill_node(data_dir, node)
        print(f"node {node} killed")
    elif args.action == "shutdown":
        shutdown_node(data_dir, node)
        print(f"node {node} shut down ({time.monotonic() - began:.1f}s)")
    elif args.action == "stop":
        stop(data_dir)
        print(f"KRaft cluster in {data_dir} stopped")
    else:
        layout = load_layout(data_dir)
        unfenced = unfenced_brokers(layout) or set()
        for n in layout.all_nodes:
            pid = layout.pid(n)
            state = f"pid {pid}" if pid is not None else "not running"
            if n in layout.broker_ports:
                where = f"broker 127.0.0.1:{layout.broker_ports[n]}, unfenced: {n in unfenced}"
            else:
                where = f"controller 127.0.0.1:{layout.controller_ports[n]}"
            print(f"node-{n}: {state}, {where}")
    return 0
