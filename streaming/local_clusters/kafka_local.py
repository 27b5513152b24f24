"""`kcsim kafka-local start|stop|status`: a single-node Apache Kafka broker in KRaft mode.

With `--zk` (or `--broker ID`, `kill`, `shutdown`) the command runs the ZooKeeper-mode
cluster of `zk_cluster` instead; with `--nodes N` (or a directory holding one) the KRaft
cluster of N combined nodes of `kraft_cluster`. `status` and `topic create` act on
whichever kind the directory holds. `topic create NAME --assignment ...` creates a topic
with its replicas placed as given (`topics`), on any of the three.

One JVM plays both roles (process.roles=broker,controller) and listens on 127.0.0.1
only, on free ports. Everything lives under the data directory: server.properties,
the log dirs, kafka.log (the JVM's output), kafka.pid and bootstrap.txt. The broker
runs in its own process group, detached from the caller, so `start` returns while it
keeps running and `stop` (from any process) ends it through the pid file.

With `--sasl-scram FILE` (a file holding `USER:PASSWORD`) the client listener is
SASL_PLAINTEXT with SCRAM-SHA-256: the user's credential is written into the metadata log
when the directory is formatted (`kafka-storage format --add-scram`), the broker uses it
for its own inter-broker connection, and `DIR/client.properties` (mode 0600) is the client
properties file the other commands take as `--kafka-config`. The password goes through
files only (the format command's arguments are a JVM @argfile), never a command line.

With `--tls` the client listener is SSL (SASL_SSL with `--sasl-scram` too): a CA and the
broker's certificate are made in DIR/tls at the first TLS start (`local_tls`, keytool),
and `DIR/client.properties` trusts the CA through a PEM file (`ssl.truststore.type=PEM`),
which both Spark's Java client and kafka-python read.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.jars import JarsMissingError, kafka_libs_dir
from streaming.local_clusters import kraft_cluster, zk_cluster
from streaming.local_clusters.processes import (
    LocalClusterError,
    free_ports,
    is_running,
    java,
    kraft_cluster_id,
    launch_detached,
    log_tail,
    port_free,
    read_pid,
    read_properties_file,
    read_user_password,
    terminate,
)
from streaming.local_clusters.tls import TlsFiles, ensure_tls, write_private
from streaming.local_clusters.topics import (
    create_topic,
    parse_assignment,
    parse_replica_assignment,
)

DEFAULT_DIR = Path(".kcsim/kafka")
HEAP = "-Xmx384m"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
MAIN_CLASS = "kafka.Kafka"
SCRAM_MECHANISM = "SCRAM-SHA-256"


def _ports(data_dir: Path) -> tuple[int, int]:
    """Broker and controller ports: the previous run's if still free, else new ones."""
    previous = read_properties_file(data_dir / "ports.properties")
    with contextlib.suppress(KeyError, ValueError):
        broker, controller = int(previous["broker"]), int(previous["controller"])
        if port_free(broker) and port_free(controller):
            return broker, controller
    broker, controller = free_ports(2)
    return broker, controller


@dataclass(frozen=True, slots=True)
class ScramUser:
    """The one SCRAM user of a secured broker; `repr` hides the password."""

    username: str
    password: str = field(repr=False)

    @classmethod
    def read(cls, path: Path) -> ScramUser:
        username, password = read_user_password(path, "--sasl-scram")
        for name, value in (("user", username), ("password", password)):
            # kafka-storage's [name=...,password=...] syntax and JAAS quoting
            if any(c in value for c in ',[]="\\'):
                raise LocalClusterError(
                    f'--sasl-scram {path}: the {name} may not hold , [ ] = " or \\'
                )
        return cls(username, password)

    def jaas(self) -> str:
        return (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{self.username}" password="{self.password}";'
        )


def listener_protocol(scram: ScramUser | None, tls: TlsFiles | None) -> str:
    """The client listener's security protocol (and name)."""
    return ("SASL_" if scram is not None else "") + ("SSL" if tls is not None else "PLAINTEXT")


def _server_properties(
    data_dir: Path,
    broker_port: int,
    controller_port: int,
    scram: ScramUser | None = None,
    tls: TlsFiles | None = None,
) -> str:
    listener = listener_protocol(scram, tls)
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"{listener}://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"{listener}://127.0.0.1:{broker_port}",
        "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": listener,
        "log.dirs": str(data_dir / "data"),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "auto.create.topics.enable": "true",
        # One broker: every internal topic has to fit on it.
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Small machine (2 cores): few threads.
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "2",
    }
    if scram is not None:
        props.update(
            {
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
                f"listener.name.{listener.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
                    scram.jaas()
                ),
            }
        )
    if tls is not None:
        # the broker's own (inter-broker) connections trust the same CA as clients
        props.update(
            {
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": str(tls.keystore),
                "ssl.keystore.password": tls.password(),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(tls.ca),
            }
        )
    return "".join(f"{key}={value}\n" for key, value in props.items())


def _is_broker(pid: int) -> bool:
    """True while `pid` is a live (not zombie) JVM running kafka.Kafka."""
    return is_running(pid, (MAIN_CLASS,))


def _read_pid(data_dir: Path) -> int | None:
    return read_pid(data_dir / "kafka.pid")


def _log_tail(data_dir: Path, lines: int = 30) -> str:
    return log_tail(data_dir / "kafka.log", lines)


def _wait_ready(bootstrap: str, pid: int, data_dir: Path, timeout_s: float) -> None:
    """Wait until the broker is registered and answers metadata requests."""
    from kafka import KafkaAdminClient  # imported here: `stop` needs no Kafka client
    from kafka.errors import KafkaError

    client_config = _client_config(data_dir)

    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if not _is_broker(pid):
            raise LocalClusterError(f"Kafka exited during start-up; log:\n{_log_tail(data_dir)}")
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap,
                request_timeout_ms=5000,
                client_id="kcsim-kafka-local",
                **client_config,
            )
            try:
                # A broker shows up in metadata only once the controller has unfenced it.
                if admin.describe_cluster().get("brokers"):
                    return
            finally:
                admin.close()
        except (KafkaError, OSError) as error:
            last_error = error
        time.sleep(0.5)
    raise LocalClusterError(
        f"Kafka did not become ready at {bootstrap} within {timeout_s:.0f}s "
        f"(last error: {last_error!r}); log:\n{_log_tail(data_dir)}"
    )


def client_properties(data_dir: Path) -> Path:
    """The client properties file of a broker started with SCRAM (`--kafka-config`)."""
    return data_dir.resolve() / "client.properties"


def _client_config(data_dir: Path) -> dict[str, Any]:
    from streaming.clients.kafka_config import KafkaClientConfig

    path = client_properties(data_dir)
    return KafkaClientConfig.load(path if path.is_file() else None).kafka_python()


def _client_properties_text(scram: ScramUser | None, tls: TlsFiles | None) -> str:
    # Java properties: the JAAS line's backslashes and quotes need no escaping, but a
    # backslash would (ScramUser refuses them)
    lines = [f"security.protocol={listener_protocol(scram, tls)}"]
    if scram is not None:
        lines += [f"sasl.mechanism={SCRAM_MECHANISM}", f"sasl.jaas.config={scram.jaas()}"]
    if tls is not None:
        # PEM: Java's clients (Kafka 2.7+) and kafka-python both read it; no password
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={tls.ca}"]
    return "".join(line + "\n" for line in lines)


def tls_dir(data_dir: Path) -> Path:
    """Where `--tls` keeps the CA and the broker's keystore."""
    return data_dir.resolve() / "tls"


def start(
    data_dir: Path = DEFAULT_DIR,
    *,
    timeout_s: float = START_TIMEOUT_S,
    scram: ScramUser | None = None,
    tls: bool = False,
) -> str:
    """Start the broker (or find it running) and return its bootstrap address. With
    `scram`, clients must authenticate as that user (see `client_properties`); the
    credential is created when the directory is first formatted. With `tls`, the
    listener is SSL (or SASL_SSL) with a certificate of a CA made for the directory."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    # Two concurrent starts on one directory would both format it: serialize them.
    with (data_dir / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _start_locked(data_dir, timeout_s, scram, tls)


def _start_locked(data_dir: Path, timeout_s: float, scram: ScramUser | None, tls: bool) -> str:
    bootstrap_file = data_dir / "bootstrap.txt"
    pid = _read_pid(data_dir)
    running_port = read_properties_file(data_dir / "ports.properties").get("broker")
    if pid is not None and _is_broker(pid) and running_port:
        # Already running (maybe still starting, from another process): reuse it.
        bootstrap = f"127.0.0.1:{running_port}"
        _wait_ready(bootstrap, pid, data_dir, timeout_s)
        return bootstrap

    try:
        classpath = str(kafka_libs_dir() / "*")
    except JarsMissingError as error:
        raise LocalClusterError(str(error)) from error
    java_bin = java()
    broker_port, controller_port = _ports(data_dir)
    (data_dir / "ports.properties").write_text(
        f"broker={broker_port}\ncontroller={controller_port}\n"
    )
    properties = data_dir / "server.properties"
    formatted_before = (data_dir / "data" / "meta.properties").is_file()
    # a SCRAM broker's client.properties has a JAAS line (a TLS-only one has none)
    previous = read_properties_file(client_properties(data_dir))
    if scram is None and formatted_before and "sasl.jaas.config" in previous:
        raise LocalClusterError(
            f"{data_dir} holds a broker started with --sasl-scram: give it again"
        )
    tls_files = ensure_tls(tls_dir(data_dir)) if tls else None
    write_private(
        properties, _server_properties(data_dir, broker_port, controller_port, scram, tls_files)
    )
    if scram is None and tls_files is None:
        client_properties(data_dir).unlink(missing_ok=True)
    else:
        write_private(client_properties(data_dir), _client_properties_text(scram, tls_files))
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(kraft_cluster.LOG4J2)  # to stdout: the launcher's DIR/kafka.log
    jvm = [
        java_bin,
        HEAP,
        "-Xms128m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        f"-Dkafka.logs.dir={data_dir}",
        "-cp",
        classpath,
    ]

    # Format once; a later start keeps the data (meta.properties is there).
    if not formatted_before:
        format_args = ["kafka.tools.StorageTool", "format", "--ignore-formatted",
                       f"--cluster-id={kraft_cluster_id()}", f"--config={properties}"]  # fmt: skip
        if scram is not None:
            format_args.append(
                f"--add-scram={SCRAM_MECHANISM}=[name={scram.username},password={scram.password}]"
            )
        # an @argfile (java's own): the password stays out of the process's command line
        argfile = data_dir / "format.args"
        write_private(argfile, "\n".join(f'"{a}"' for a in format_args) + "\n")
        try:
            formatted = subprocess.run(
                [*jvm, f"@{argfile}"], capture_output=True, text=True, check=False
            )
        finally:
            argfile.unlink(missing_ok=True)
        if formatted.returncode != 0:
            raise LocalClusterError(
                "kafka-storage format failed:\n"
                + "\n".join((formatted.stdout + formatted.stderr).splitlines()[-15:])
            )

    pid = launch_detached(
        [*jvm, MAIN_CLASS, str(properties)], data_dir / "kafka.log", data_dir / "kafka.pid"
    )
    bootstrap = f"127.0.0.1:{broker_port}"
    try:
        _wait_ready(bootstrap, pid, data_dir, timeout_s)
    except LocalClusterError:
        stop(data_dir)
        raise
    bootstrap_file.write_text(bootstrap + "\n")
    return bootstrap


def stop(data_dir: Path = DEFAULT_DIR, *, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop the broker started in `data_dir` (SIGTERM to its group, then SIGKILL)."""
    data_dir = data_dir.resolve()
    pid = _read_pid(data_dir)
    if pid is not None:
        terminate(pid, (MAIN_CLASS,), timeout_s)
    for name in ("kafka.pid", "bootstrap.txt"):
        (data_dir / name).unlink(missing_ok=True)


ACTIONS = ("start", "stop", "kill", "shutdown", "status", "topic")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=ACTIONS,
        help="start, stop, kill/shutdown one broker (--broker ID), status of every process, "
        "or `topic create NAME --assignment ...`",
    )
    parser.add_argument(
        "words", nargs="*", metavar="create NAME", help="topic: `create` and the topic's name"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        help=f"data directory (default {DEFAULT_DIR}, or {zk_cluster.DEFAULT_DIR} with --zk)",
    )
    parser.add_argument(
        "--sasl-scram",
        type=Path,
        metavar="FILE",
        help="KRaft broker: SASL/SCRAM-SHA-256 for the user in FILE (one line USER:PASSWORD); "
        "clients then need DIR/client.properties as --kafka-config",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="KRaft broker: a TLS listener (SASL_SSL with --sasl-scram), its certificate "
        "from a CA made in DIR/tls; clients then need DIR/client.properties as --kafka-config",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        metavar="N",
        help="a KRaft cluster of N combined broker+controller nodes (N voters; ids 1..N); "
        "kill/shutdown/start one with --broker ID",
    )
    parser.add_argument(
        "--controllers",
        type=int,
        metavar="C",
        help="with --nodes N: the N nodes are brokers only and C more nodes (ids N+1..N+C) "
        "are controllers only, the quorum's voters (default: none, combined nodes)",
    )
    topic = parser.add_argument_group("topic create (any kind of local cluster)")
    placed = topic.add_mutually_exclusive_group()
    placed.add_argument(
        "--assignment",
        metavar="P:B,B,.../P:B,B,...",
        help="each partition's replicas, the first its preferred leader (e.g. 0:1,2,3/1:2,3,1)",
    )
    placed.add_argument(
        "--replica-assignment",
        metavar="B:B:...,B:B:...",
        help="the same in Kafka's kafka-topics form: the partitions in order, each one's "
        "replicas separated by colons (e.g. 1:2:3,2:3:1)",
    )
    topic.add_argument(
        "--config",
        dest="topic_configs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic setting, e.g. min.insync.replicas=2 (repeatable)",
    )
    zk = parser.add_argument_group("ZooKeeper-mode cluster (Kafka 3.7.1)")
    zk.add_argument("--zk", action="store_true", help="one ZooKeeper and --brokers brokers")
    zk.add_argument(
        "--brokers",
        type=int,
        default=zk_cluster.DEFAULT_BROKERS,
        metavar="N",
        help="start --zk: the number of brokers",
    )
    zk.add_argument("--broker", type=int, metavar="ID", help="start/kill/shutdown this broker only")
    zk.add_argument(
        "--zk-sasl",
        type=Path,
        metavar="FILE",
        help="ZooKeeper requires SASL DIGEST-MD5 of every client; FILE holds its one user "
        "(one line USER:PASSWORD), which the brokers and kcsim use",
    )
    zk.add_argument("--zk-tls", action="store_true", help="ZooKeeper's client port is TLS only")
    zk.add_argument("--zk-chroot", metavar="/PATH", help="the brokers' znodes under this chroot")
    zk.add_argument(
        "--set-broker",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting for `start --zk` (repeatable)",
    )


def _zk_mode(args: argparse.Namespace) -> bool:
    """The ZooKeeper-mode cluster is meant: asked for, or only it has the action, or the
    directory holds one."""
    return (
        args.zk
        or args.broker is not None
        or args.action in ("kill", "shutdown", "status")
        or (args.dir is not None and zk_cluster.is_cluster_dir(args.dir))
    )


def _kraft_cluster_mode(args: argparse.Namespace) -> bool:
    """The KRaft cluster of N nodes is meant: --nodes given, or the directory holds one;
    without --dir, an action on one broker means the default KRaft cluster's when that is
    the only cluster in the default directories."""
    if args.nodes is not None or getattr(args, "controllers", None):
        return True
    if args.dir is not None:
        return kraft_cluster.is_cluster_dir(args.dir)
    one_broker = args.broker is not None or args.action in ("kill", "shutdown", "status")
    return (
        one_broker
        and not args.zk
        and kraft_cluster.is_cluster_dir(kraft_cluster.DEFAULT_DIR)
        and not zk_cluster.is_cluster_dir(zk_cluster.DEFAULT_DIR)
    )


def _is_node_dir(data_dir: Path) -> bool:
    """The directory holds the single-node broker (of `start` without --zk/--nodes)."""
    return (data_dir / "server.properties").is_file() and not (
        zk_cluster.is_cluster_dir(data_dir) or kraft_cluster.is_cluster_dir(data_dir)
    )


def _node_mode(args: argparse.Namespace) -> bool:
    """`status` or `topic` on the single-node broker: its directory given, or without --dir
    the default one when no cluster is in the default directories."""
    if args.action not in ("status", "topic") or args.zk or args.nodes is not None:
        return False
    if args.dir is not None:
        return _is_node_dir(args.dir)
    return (
        _is_node_dir(DEFAULT_DIR)
        and not zk_cluster.is_cluster_dir(zk_cluster.DEFAULT_DIR)
        and not kraft_cluster.is_cluster_dir(kraft_cluster.DEFAULT_DIR)
    )


def node_status(data_dir: Path) -> str:
    """The single-node broker's status line: its pid, address and whether it answers."""
    pid = _read_pid(data_dir)
    port = read_properties_file(data_dir / "ports.properties").get("broker")
    if pid is None or not _is_broker(pid):
        return f"broker (KRaft, single node): not running, 127.0.0.1:{port}"
    return f"broker (KRaft, single node): pid {pid}, 127.0.0.1:{port}"


def _bootstrap_of(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The bootstrap address and client settings of the local cluster `args` names."""
    if _node_mode(args):
        data_dir = args.dir or DEFAULT_DIR
        port = read_properties_file(data_dir / "ports.properties").get("broker")
        return f"127.0.0.1:{port}", _client_config(data_dir)
    if _kraft_cluster_mode(args):
        return kraft_cluster.load_layout(args.dir or kraft_cluster.DEFAULT_DIR).bootstrap, {}
    data_dir = args.dir or zk_cluster.DEFAULT_DIR
    if not zk_cluster.is_cluster_dir(data_dir):
        raise LocalClusterError(f"{data_dir} holds no local cluster (start one first)")
    return zk_cluster.load_layout(data_dir).bootstrap, {}


def topic_command(args: argparse.Namespace) -> int:
    """`kafka-local topic create NAME --assignment ...`."""
    if len(args.words) != 2 or args.words[0] != "create":
        raise LocalClusterError("topic: give `topic create NAME --assignment ...`")
    if args.assignment is not None:
        assignment = parse_assignment(args.assignment)
    elif args.replica_assignment is not None:
        assignment = parse_replica_assignment(args.replica_assignment)
    else:
        raise LocalClusterError(
            "topic create needs --assignment P:B,B,.../P:B,B,... or --replica-assignment "
            "B:B,B:B (Kafka's form)"
        )
    configs: dict[str, str] = {}
    for item in args.topic_configs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise LocalClusterError(f"topic create: --config wants KEY=VALUE, not {item!r}")
        configs[key] = value
    bootstrap, client_config = _bootstrap_of(args)
    name = args.words[1]
    create_topic(bootstrap, name, assignment, configs, client_config)
    placed = "/".join(f"{p}:{','.join(map(str, r))}" for p, r in sorted(assignment.items()))
    print(f"topic {name} created at {bootstrap}: {placed}")
    return 0


def main(args: argparse.Namespace) -> int:
    try:
        if args.words and args.action != "topic":
            raise LocalClusterError(f"unexpected words after {args.action}: {' '.join(args.words)}")
        if args.action == "topic":
            return topic_command(args)
        if _node_mode(args):
            print(node_status(args.dir or DEFAULT_DIR))
            return 0
        if _kraft_cluster_mode(args):
            if (
                args.zk
                or args.sasl_scram is not None
                or args.tls
                or args.set_broker
                or args.zk_sasl
                or args.zk_tls
                or args.zk_chroot
            ):
                raise LocalClusterError(
                    "--nodes (KRaft cluster) takes no --zk/--zk-*/--sasl-scram/--tls/--set-broker"
                )
            if args.action in ("kill", "shutdown") and args.broker is None:
                raise LocalClusterError(f"`{args.action}` needs --broker ID")
            if args.nodes is None:
                args.dir = args.dir or kraft_cluster.DEFAULT_DIR
                layout = kraft_cluster.load_layout(args.dir)
                args.nodes = len(layout.node_ids)
                args.controllers = args.controllers or layout.controllers
            return kraft_cluster.main(args)
        if _zk_mode(args):
            if args.action in ("kill", "shutdown") and args.broker is None:
                raise LocalClusterError(f"`{args.action}` needs --broker ID")
            if args.sasl_scram is not None or args.tls:
                raise LocalClusterError(
                    "--sasl-scram and --tls apply to the KRaft broker (not --zk)"
                )
            return zk_cluster.main(args)
        if args.set_broker or args.zk_sasl or args.zk_tls or args.zk_chroot:
            raise LocalClusterError(
                "--set-broker and --zk-* apply to the ZooKeeper-mode cluster (--zk)"
            )
        data_dir = args.dir or DEFAULT_DIR
        if args.action == "start":
            scram = None if args.sasl_scram is None else ScramUser.read(args.sasl_scram)
            bootstrap = start(data_dir, scram=scram, tls=args.tls)
            if scram is not None or args.tls:
                print(f"clients: --kafka-config {client_properties(data_dir)}")
            print(f"Kafka (KRaft, pid file {data_dir / 'kafka.pid'}) is up; bootstrap:")
            print(bootstrap)
        else:
            stop(data_dir)
            print(f"Kafka in {data_dir} stopped")
    except LocalClusterError as error:
        print(f"kcsim kafka-local: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m streaming.local_clusters.kafka_local")
    configure(_parser)
    sys.exit(main(_parser.parse_args()))
