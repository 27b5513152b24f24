"""`kcsim kafka-local start --zk`: a ZooKeeper-mode Apache Kafka 3.7.1 cluster on 127.0.0.1.

One ZooKeeper and N brokers (ids 1..N), each its own detached JVM (see local_process),
jars from `.kafka-zk/libs`. Everything lives under the cluster directory:

    DIR/cluster.properties          broker count and every port (kept across restarts)
    DIR/log4j.properties            the brokers' logging (Kafka's usual appenders)
    DIR/zookeeper/                  zoo.cfg, data/, zookeeper.pid, zookeeper.log
    DIR/broker-ID/                  server.properties, data/, broker.pid, stdout.log,
                                    logs/{server,controller,state-change}.log

A broker counts as up once its ephemeral /brokers/ids/ID znode exists, read with kazoo.

A secured ZooKeeper (`start --zk --zk-sasl FILE --zk-tls --zk-chroot /PATH`, any of the
three): SASL DIGEST-MD5 required of every client (the server's JAAS `Server` section, the
brokers' `Client` section, both mode 0600), TLS only (a secureClientPort with a certificate
of a CA made in DIR/tls by `local_tls`, no plaintext port), and the brokers' znodes under
a chroot. DIR/zookeeper-client.properties (mode 0600) is the `--zookeeper-config` of
`kcsim shadow` and of kcsim's own ZooKeeper sessions here.
Sizing: the JVMs are small (see JVM_FLAGS) so that ZooKeeper, three brokers and a Spark
job fit a 2-core machine; the README's ZooKeeper-mode section has the measured figures.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import signal
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from streaming.jars import JarsMissingError, kafka_zk_libs_dir
from streaming.local_clusters.processes import (
    LocalClusterError,
    accepts_connections,
    free_ports,
    is_running,
    java,
    launch_detached,
    log_tail,
    port_free,
    read_properties_file,
    read_user_password,
    running_pid,
    signal_group,
    terminate,
    wait_until,
    write_properties,
)
from streaming.local_clusters.tls import TlsFiles, ensure_tls, write_private

if TYPE_CHECKING:
    from kazoo.client import KazooClient

DEFAULT_DIR = Path(".kcsim/kafka-zk")
DEFAULT_BROKERS = 3
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
BROKER_MAIN = "kafka.Kafka"
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

# Small heaps, the serial collector (no GC threads to share 2 cores) and C1 only: the
# brokers idle most of the time, so C2's peak speed is worth less than a fast start-up.
JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)
ZOOKEEPER_HEAP = ("-Xms32m", "-Xmx128m")
BROKER_HEAP = ("-Xms64m", "-Xmx384m")

# ZooKeeper's tick bounds the sessions it grants to [2, 20] ticks by default; a short tick
# lets a broker ask for a 6 s session, so a SIGKILLed broker's registration vanishes fast.
ZOOKEEPER_TICK_MS = 500
BROKER_SESSION_TIMEOUT_MS = 6000

# Kafka's log4j 1.x layout (reload4j reads it), with the controller at INFO rather than
# Kafka's TRACE; the importer of controller.log / state-change.log expects this pattern.
_PATTERN = "[%d] %p %m (%c)%n"
_APPENDERS = {
    "kafkaAppender": "server.log",
    "stateChangeAppender": "state-change.log",
    "requestAppender": "kafka-request.log",
    "cleanerAppender": "log-cleaner.log",
    "controllerAppender": "controller.log",
    "authorizerAppender": "kafka-authorizer.log",
}
_LOGGERS = {
    # logger: (level, appender); each goes to its own file only (additivity off)
    "kafka.request.logger": ("WARN", "requestAppender"),
    "kafka.network.RequestChannel$": ("WARN", "requestAppender"),
    "kafka.controller": ("INFO", "controllerAppender"),
    "kafka.log.LogCleaner": ("INFO", "cleanerAppender"),
    "state.change.logger": ("INFO", "stateChangeAppender"),
    "kafka.authorizer.logger": ("INFO", "authorizerAppender"),
}


def broker_log4j() -> str:
    lines = ["log4j.rootLogger=INFO, kafkaAppender"]
    for name, file in _APPENDERS.items():
        prefix = f"log4j.appender.{name}"
        lines += [
            f"{prefix}=org.apache.log4j.DailyRollingFileAppender",
            f"{prefix}.DatePattern='.'yyyy-MM-dd-HH",
            f"{prefix}.File=${{kafka.logs.dir}}/{file}",
            f"{prefix}.layout=org.apache.log4j.PatternLayout",
            f"{prefix}.layout.ConversionPattern={_PATTERN}",
        ]
    lines += ["log4j.logger.org.apache.zookeeper=INFO", "log4j.logger.kafka=INFO"]
    for logger, (level, appender) in _LOGGERS.items():
        lines += [f"log4j.logger.{logger}={level}, {appender}", f"log4j.additivity.{logger}=false"]
    return "\n".join(lines) + "\n"


ZOOKEEPER_LOG4J = f"""\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern={_PATTERN}
"""


class ClusterAddress(NamedTuple):
    zookeeper: str  # HOST:PORT
    bootstrap: str  # every broker, comma separated


class ProcessStatus(NamedTuple):
    name: str  # "zookeeper" or "broker-ID"
    pid: int | None  # None when not running
    port: int
    registered: bool | None  # brokers: /brokers/ids/ID exists; None for ZooKeeper


@dataclass(frozen=True, slots=True)
class ZkSecurity:
    """How ZooKeeper is secured; the credentials live in files, never here."""

    sasl: bool = False  # DIGEST-MD5 required of every client
    tls: bool = False  # the client port is TLS only
    chroot: str = ""  # "" or "/path": where the brokers keep their znodes

    @property
    def secured(self) -> bool:
        return self.sasl or self.tls


@dataclass(frozen=True, slots=True)
class SaslUser:
    """ZooKeeper's one SASL user; `repr` hides the password."""

    username: str
    password: str = field(repr=False)

    @classmethod
    def read(cls, path: Path) -> SaslUser:
        username, password = read_user_password(path, "--zk-sasl")
        if any(c in username + password for c in '"\\ ;'):  # JAAS quoting; one token each
            raise LocalClusterError(
                f'--zk-sasl {path}: the user and password may not hold " \\ ; or spaces'
            )
        return cls(username, password)


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a cluster's files live, and its ports (read from cluster.properties)."""

    root: Path
    zookeeper_port: int
    broker_ports: Mapping[int, int]  # broker id -> PLAINTEXT port
    security: ZkSecurity = ZkSecurity()

    @property
    def zookeeper(self) -> str:
        """ZooKeeper's address as the brokers and the shadow take it (with the chroot)."""
        return f"127.0.0.1:{self.zookeeper_port}{self.security.chroot}"

    @property
    def zookeeper_client_config(self) -> Path:
        """The `--zookeeper-config` file of a secured ZooKeeper (mode 0600)."""
        return self.root / "zookeeper-client.properties"

    @property
    def tls(self) -> TlsFiles:
        return TlsFiles(self.root / "tls")

    def kazoo_args(self) -> dict[str, object]:
        """kazoo's arguments for a session with this cluster's ZooKeeper."""
        if not self.security.secured:
            return {}
        from streaming.clients.zookeeper_config import ZooKeeperClientConfig

        return ZooKeeperClientConfig.load(self.zookeeper_client_config).kazoo_args()

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.broker_ports.values())

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(self.broker_ports)

    @property
    def zookeeper_dir(self) -> Path:
        return self.root / "zookeeper"

    @property
    def zookeeper_config(self) -> Path:
        return self.zookeeper_dir / "zoo.cfg"

    def broker_dir(self, broker: int) -> Path:
        if broker not in self.broker_ports:
            ids = ", ".join(map(str, self.broker_ids))
            raise LocalClusterError(f"no broker {broker} in {self.root} (brokers: {ids})")
        return self.root / f"broker-{broker}"

    def broker_config(self, broker: int) -> Path:
        return self.broker_dir(broker) / "server.properties"

    def zookeeper_pid(self) -> int | None:
        return running_pid(self.zookeeper_dir / "zookeeper.pid", self._zookeeper_markers())

    def broker_pid(self, broker: int) -> int | None:
        return running_pid(self.broker_dir(broker) / "broker.pid", self._broker_markers(broker))

    def _zookeeper_markers(self) -> tuple[str, ...]:
        return (ZOOKEEPER_MAIN, str(self.zookeeper_config))

    def _broker_markers(self, broker: int) -> tuple[str, ...]:
        return (BROKER_MAIN, str(self.broker_config(broker)))

    def broker_running(self, pid: int, broker: int) -> bool:
        return is_running(pid, self._broker_markers(broker))

    def zookeeper_running(self, pid: int) -> bool:
        return is_running(pid, self._zookeeper_markers())

    def save(self) -> None:
        props: dict[str, object] = {"brokers": len(self.broker_ports)}
        props["zookeeper.port"] = self.zookeeper_port
        props.update({f"broker.{b}.port": port for b, port in self.broker_ports.items()})
        props["zookeeper.sasl"] = str(self.security.sasl).lower()
        props["zookeeper.tls"] = str(self.security.tls).lower()
        props["zookeeper.chroot"] = self.security.chroot
        write_properties(self.root / "cluster.properties", props)


def is_cluster_dir(data_dir: Path) -> bool:
    return (data_dir / "cluster.properties").is_file()


def load_layout(data_dir: Path) -> Layout:
    data_dir = data_dir.resolve()
    props = read_properties_file(data_dir / "cluster.properties")
    try:
        count = int(props["brokers"])
        security = ZkSecurity(
            props.get("zookeeper.sasl") == "true",
            props.get("zookeeper.tls") == "true",
            props.get("zookeeper.chroot", ""),
        )
        return Layout(
            data_dir,
            int(props["zookeeper.port"]),
            {b: int(props[f"broker.{b}.port"]) for b in range(1, count + 1)},
            security,
        )
    except (KeyError, ValueError) as error:
        raise LocalClusterError(
            f"{data_dir} holds no ZooKeeper-mode cluster (cluster.properties missing or bad: "
            f"{error!r}); start one with `kcsim kafka-local start --zk --dir {data_dir}`"
        ) from error


def _new_layout(data_dir: Path, brokers: int, security: ZkSecurity) -> Layout:
    """The previous run's ports when the directory has them and they are free, else new."""
    if is_cluster_dir(data_dir):
        old = load_layout(data_dir)
        if len(old.broker_ports) != brokers:
            raise LocalClusterError(
                f"{data_dir} holds a {len(old.broker_ports)}-broker cluster, not {brokers}: "
                "use another --dir"
            )
        if old.security != security:
            raise LocalClusterError(
                f"{data_dir} holds a cluster whose ZooKeeper security is {old.security}, "
                "not what was given: give the same --zk-sasl/--zk-tls/--zk-chroot, or another --dir"
            )
        running = old.zookeeper_pid() is not None or any(
            old.broker_pid(b) is not None for b in old.broker_ids
        )
        ports = [old.zookeeper_port, *old.broker_ports.values()]
        if running or all(port_free(p) for p in ports):
            return old
    zookeeper_port, *broker_ports = free_ports(brokers + 1)
    return Layout(data_dir, zookeeper_port, dict(enumerate(broker_ports, start=1)), security)


def _classpath() -> str:
    try:
        return str(kafka_zk_libs_dir() / "*")
    except JarsMissingError as error:
        raise LocalClusterError(str(error)) from error


def _zookeeper_config(layout: Layout) -> dict[str, object]:
    config: dict[str, object] = {
        "tickTime": ZOOKEEPER_TICK_MS,
        "dataDir": layout.zookeeper_dir / "data",
        "clientPort": layout.zookeeper_port,
        "clientPortAddress": "127.0.0.1",
        "maxClientCnxns": 0,
        "minSessionTimeout": 2 * ZOOKEEPER_TICK_MS,
        "maxSessionTimeout": 60 * ZOOKEEPER_TICK_MS,
        "admin.enableServer": "false",
        "autopurge.purgeInterval": 0,
    }
    if layout.security.sasl:
        # every session must authenticate with SASL before anything else (ZooKeeper 3.7+)
        config["authProvider.sasl"] = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
        config["enforce.auth.enabled"] = "true"
        config["enforce.auth.schemes"] = "sasl"
    if layout.security.tls:
        # TLS only: the port is a secure one, served by Netty (NIO has no TLS)
        del config["clientPort"], config["clientPortAddress"]
        tls = layout.tls
        config.update(
            {
                "secureClientPort": layout.zookeeper_port,
                "secureClientPortAddress": "127.0.0.1",
                "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
                "ssl.keyStore.location": tls.keystore,
                "ssl.keyStore.type": "PKCS12",
                "ssl.keyStore.passwordPath": tls.password_file,  # a file: no password here
                "ssl.trustStore.location": tls.ca,
                "ssl.trustStore.type": "PEM",
                "ssl.clientAuth": "none",
            }
        )
    return config


def _zookeeper_tls_client(layout: Layout) -> dict[str, object]:
    """The brokers' ZooKeeper client settings for a TLS-only ZooKeeper."""
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.truststore.location": layout.tls.ca,
        "zookeeper.ssl.truststore.type": "PEM",
    }


def _jaas_quote(value: str) -> str:
    return '"' + value + '"'  # SaslUser refuses quotes and backslashes


def _write_security_files(layout: Layout, user: SaslUser | None) -> None:
    """The JAAS files (server and brokers) and the client properties; secrets only in
    files of mode 0600. A restart without --zk-sasl keeps the files it finds."""
    security = layout.security
    if not security.secured:
        return
    if security.tls:
        ensure_tls(layout.tls.root)
    client = layout.zookeeper_client_config
    if security.sasl and user is None:
        if not (layout.zookeeper_dir / "jaas.conf").is_file() or not client.is_file():
            raise LocalClusterError(f"{layout.root}'s ZooKeeper requires SASL: give --zk-sasl")
        return
    lines: list[str] = []
    if user is not None:
        layout.zookeeper_dir.mkdir(parents=True, exist_ok=True)
        write_private(
            layout.zookeeper_dir / "jaas.conf",
            "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            f"  user_{user.username}={_jaas_quote(user.password)};\n}};\n",
        )
        write_private(
            layout.root / "broker-jaas.conf",
            "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            f"  username={_jaas_quote(user.username)}\n"
            f"  password={_jaas_quote(user.password)};\n}};\n",
        )
        lines += ["sasl.mechanism=DIGEST-MD5", f"sasl.username={user.username}",
                  f"sasl.password={user.password}"]  # fmt: skip
    if security.tls:
        lines += ["ssl=true", f"ssl.ca={layout.tls.ca}", "ssl.check.hostname=true"]
    write_private(client, "".join(line + "\n" for line in lines))


def broker_config(
    layout: Layout, broker: int, overrides: Mapping[str, str] | None = None
) -> dict[str, object]:
    listener = f"PLAINTEXT://127.0.0.1:{layout.broker_ports[broker]}"
    props: dict[str, object] = {
        "broker.id": broker,
        "zookeeper.connect": layout.zookeeper,  # with the chroot: Kafka creates it
        "zookeeper.session.timeout.ms": BROKER_SESSION_TIMEOUT_MS,
        "listeners": listener,
        "advertised.listeners": listener,
        "log.dirs": layout.broker_dir(broker) / "data",
        "num.partitions": 1,
        "default.replication.factor": 1,
        "min.insync.replicas": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "transaction.state.log.num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0,
        # tests trigger preferred elections themselves (--set-broker to turn this back on)
        "auto.leader.rebalance.enable": "false",
        "delete.topic.enable": "true",
        "controlled.shutdown.enable": "true",
        # A controlled shutdown that cannot move every leadership (the last broker of a
        # `stop`) retries 3 times; 1 s apart instead of Kafka's 5 s keeps `stop` short.
        "controlled.shutdown.retry.backoff.ms": 1000,
        "unclean.leader.election.enable": "false",
        # a stalled follower leaves the ISR after 10 s instead of Kafka's 30 s
        "replica.lag.time.max.ms": 10000,
        # Small machine (2 cores, small heaps): few threads, a small cleaner buffer
        # (Kafka's 128 MiB default would take a third of the heap).
        "num.network.threads": 2,
        "num.io.threads": 2,
        "num.replica.fetchers": 1,
        "num.recovery.threads.per.data.dir": 1,
        "background.threads": 2,
        "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": 8 * 1024 * 1024,
    }
    if layout.security.tls:
        props.update(_zookeeper_tls_client(layout))
    if layout.security.sasl:
        # as a secured production cluster runs: the znodes Kafka writes are writable by
        # the brokers' SASL identity only (readers still see the non-sensitive ones)
        props["zookeeper.set.acl"] = "true"
    props.update(overrides or {})
    return props


def _jvm(heap: Iterable[str], log4j: Path, *system_properties: str) -> list[str]:
    return [
        java(),
        *heap,
        *JVM_FLAGS,
        f"-Dlog4j.configuration=file:{log4j}",
        *system_properties,
        "-cp",
        _classpath(),
    ]


@contextmanager
def zookeeper_client(
    hosts: str, timeout_s: float = 15.0, security: Mapping[str, object] | None = None
) -> Iterator[KazooClient]:
    """A started kazoo client (imported here: `kill` and `stop` need no ZooKeeper client);
    `security`: kazoo arguments (`Layout.kazoo_args`)."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    # kazoo warns of every dropped connection, including the one its own stop() closes:
    # keep its noise out of the commands' output (connection failures still raise)
    quiet = logging.getLogger("streaming.local_clusters.zk_cluster.kazoo")
    quiet.setLevel(logging.ERROR)
    client = KazooClient(hosts=hosts, timeout=10.0, logger=quiet, **(security or {}))
    try:
        with warnings.catch_warnings():
            # a chroot the brokers have not created yet is expected here
            warnings.filterwarnings("ignore", "No chroot path exists")
            client.start(timeout=timeout_s)
    except KazooTimeoutError as error:
        client.close()
        raise LocalClusterError(f"cannot connect to ZooKeeper at {hosts}: {error}") from error
    try:
        yield client
    finally:
        client.stop()
        client.close()


def registered_brokers(client: KazooClient) -> set[int]:
    """The ids under /brokers/ids (ephemeral: one per live broker session)."""
    if not client.exists("/brokers/ids"):
        return set()
    return {int(child) for child in client.get_children("/brokers/ids")}


def _start_zookeeper(layout: Layout, timeout_s: float) -> None:
    if layout.zookeeper_pid() is None:
        (layout.zookeeper_dir / "data").mkdir(parents=True, exist_ok=True)
        write_properties(layout.zookeeper_config, _zookeeper_config(layout))
        log4j = layout.zookeeper_dir / "log4j.properties"
        log4j.write_text(ZOOKEEPER_LOG4J)
        jaas = layout.zookeeper_dir / "jaas.conf"
        sasl = (f"-Djava.security.auth.login.config={jaas}",) if layout.security.sasl else ()
        command = _jvm(ZOOKEEPER_HEAP, log4j, "-Dzookeeper.jmx.log4j.disable=true", *sasl)
        launch_detached(
            [*command, ZOOKEEPER_MAIN, str(layout.zookeeper_config)],
            layout.zookeeper_dir / "zookeeper.log",
            layout.zookeeper_dir / "zookeeper.pid",
        )
    pid = layout.zookeeper_pid()

    def ready() -> bool:
        if pid is None or not layout.zookeeper_running(pid):
            raise LocalClusterError(
                "ZooKeeper exited during start-up; log:\n"
                + log_tail(layout.zookeeper_dir / "zookeeper.log")
            )
        return accepts_connections(layout.zookeeper_port)

    if not wait_until(ready, timeout_s):
        raise LocalClusterError(f"ZooKeeper did not listen on {layout.zookeeper} in {timeout_s}s")


def _launch_broker(layout: Layout, broker: int) -> None:
    home = layout.broker_dir(broker)
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    jaas = layout.root / "broker-jaas.conf"
    sasl = (f"-Djava.security.auth.login.config={jaas}",) if layout.security.sasl else ()
    command = _jvm(BROKER_HEAP, layout.root / "log4j.properties", f"-Dkafka.logs.dir={logs}", *sasl)
    launch_detached(
        [*command, BROKER_MAIN, str(layout.broker_config(broker))],
        home / "stdout.log",
        home / "broker.pid",
    )


def _broker_failure(layout: Layout, broker: int) -> str:
    home = layout.broker_dir(broker)
    return (
        f"broker {broker} exited during start-up; {home / 'logs' / 'server.log'}:\n"
        f"{log_tail(home / 'logs' / 'server.log')}\nstdout:\n{log_tail(home / 'stdout.log', 10)}"
    )


def startup_complete(layout: Layout, broker: int) -> bool:
    """True once the broker's latest start-up has finished (server.log says "started").

    Kafka registers /brokers/ids/ID midway through start-up; a SIGTERM before start-up
    completes makes it halt without a controlled shutdown, and its port may not accept
    connections yet. server.log rolls hourly: no "starting" line in it means the start
    was in an older file, so it is long over."""
    try:
        text = (layout.broker_dir(broker) / "logs" / "server.log").read_text(errors="replace")
    except OSError:
        return False
    starting = text.rfind(" starting (kafka.server.KafkaServer)")
    return starting < 0 or text.find("] started (kafka.server.KafkaServer)", starting) >= 0


def wait_registered(layout: Layout, brokers: Iterable[int], timeout_s: float) -> None:
    """Until every broker in `brokers` has its /brokers/ids znode and has finished starting
    up; fails fast if one dies."""
    wanted = set(brokers)
    with zookeeper_client(layout.zookeeper, security=layout.kazoo_args()) as client:

        def ready() -> bool:
            for broker in wanted:
                if layout.broker_pid(broker) is None:
                    raise LocalClusterError(_broker_failure(layout, broker))
            return wanted <= registered_brokers(client) and all(
                startup_complete(layout, broker) for broker in wanted
            )

        if not wait_until(ready, timeout_s):
            missing = sorted(wanted - registered_brokers(client))
            starting = sorted(b for b in wanted if not startup_complete(layout, b))
            raise LocalClusterError(
                f"within {timeout_s:.0f}s, brokers {missing} did not register and "
                f"brokers {starting} did not finish starting up"
            )


@contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    # Two concurrent starts on one directory would launch everything twice: serialize.
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def start(
    data_dir: Path = DEFAULT_DIR,
    *,
    brokers: int = DEFAULT_BROKERS,
    overrides: Mapping[str, str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
    security: ZkSecurity = ZkSecurity(),
    sasl_user: SaslUser | None = None,
) -> ClusterAddress:
    """Start ZooKeeper and every broker not already running; returns once all are
    registered. `overrides` are broker settings, written into each server.properties;
    `security` secures ZooKeeper (`sasl_user`: its one SASL user, needed at the first
    start)."""
    if brokers < 1:
        raise LocalClusterError(f"--brokers must be at least 1, not {brokers}")
    data_dir = data_dir.resolve()
    with _locked(data_dir):
        if security.chroot and (not security.chroot.startswith("/") or security.chroot == "/"):
            raise LocalClusterError(
                f"--zk-chroot must be an absolute path, not {security.chroot!r}"
            )
        layout = _new_layout(data_dir, brokers, security)
        layout.save()
        _write_security_files(layout, sasl_user)
        (data_dir / "log4j.properties").write_text(broker_log4j())
        try:
            _start_zookeeper(layout, timeout_s)
            down = [b for b in layout.broker_ids if layout.broker_pid(b) is None]
            _wait_stale_registrations(layout, down)
            for broker in layout.broker_ids:
                if layout.broker_pid(broker) is None:
                    layout.broker_dir(broker).mkdir(parents=True, exist_ok=True)
                    config = broker_config(layout, broker, overrides)
                    write_properties(layout.broker_config(broker), config)
                    _launch_broker(layout, broker)
            wait_registered(layout, layout.broker_ids, timeout_s)
        except LocalClusterError:
            _stop_locked(layout, STOP_TIMEOUT_S)
            raise
    return ClusterAddress(layout.zookeeper, layout.bootstrap)


def _wait_stale_registrations(layout: Layout, brokers: Iterable[int]) -> None:
    """Wait until brokers that are not running have no /brokers/ids znode: a killed
    broker's lingers until its session expires (also across a ZooKeeper restart, which
    keeps sessions), and Kafka fails to register over it."""
    stale = set(brokers)
    if not stale:
        return
    with zookeeper_client(layout.zookeeper, security=layout.kazoo_args()) as client:
        gone = wait_until(
            lambda: not stale & registered_brokers(client), BROKER_SESSION_TIMEOUT_MS / 1000 * 3
        )
        if not gone:
            left = sorted(stale & registered_brokers(client))
            raise LocalClusterError(f"brokers {left} are registered by processes not ours")


def start_broker(data_dir: Path, broker: int, *, timeout_s: float = START_TIMEOUT_S) -> None:
    """Start one broker again, with its id, port, settings and log dirs; returns once it is
    registered. A killed broker's znode outlives it by up to a session timeout; starting
    before it is gone would fail Kafka's registration, so that wait comes first."""
    layout = load_layout(data_dir)
    with _locked(layout.root):
        if layout.zookeeper_pid() is None:
            raise LocalClusterError(f"ZooKeeper of {layout.root} is not running: start --zk first")
        if layout.broker_pid(broker) is None:
            _wait_stale_registrations(layout, (broker,))
            port = layout.broker_ports[broker]
            if not wait_until(lambda: port_free(port), 30.0):
                raise LocalClusterError(f"broker {broker}'s port {port} is taken")
            _launch_broker(layout, broker)
        wait_registered(layout, (broker,), timeout_s)


def kill_broker(data_dir: Path, broker: int) -> None:
    """SIGKILL one broker; returns once the process is gone (its znode may linger for up
    to a session timeout, as in a real crash)."""
    layout = load_layout(data_dir)
    pid = layout.broker_pid(broker)
    if pid is None:
        raise LocalClusterError(f"broker {broker} of {layout.root} is not running")
    signal_group(pid, signal.SIGKILL)
    if not wait_until(lambda: not layout.broker_running(pid, broker), 30.0):
        raise LocalClusterError(f"broker {broker} (pid {pid}) survived SIGKILL")


def shutdown_broker(data_dir: Path, broker: int, *, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM one broker, which then shuts down under control (the controller moves its
    leaderships away first); returns once the process has exited."""
    layout = load_layout(data_dir)
    pid = layout.broker_pid(broker)
    if pid is None:
        raise LocalClusterError(f"broker {broker} of {layout.root} is not running")
    signal_group(pid, signal.SIGTERM)
    if not wait_until(lambda: not layout.broker_running(pid, broker), timeout_s, 0.05):
        raise LocalClusterError(
            f"broker {broker} (pid {pid}) runs on {timeout_s:.0f}s after SIGTERM"
        )


def _controller_last(layout: Layout, running: list[int]) -> list[int]:
    """Brokers in stop order: the controller last, so each controlled shutdown is served
    by a controller that stays (no failover in between)."""
    controller = None
    if layout.zookeeper_pid() is not None:
        try:
            with zookeeper_client(layout.zookeeper, 5.0, layout.kazoo_args()) as client:
                controller = controller_id(client)
        except LocalClusterError:
            controller = None
    return sorted(running, key=lambda broker: broker == controller)


def controller_id(client: KazooClient) -> int | None:
    """The broker id in /controller, or None while no controller is elected."""
    from kazoo.exceptions import NoNodeError

    try:
        data, _ = client.get("/controller")
    except NoNodeError:
        return None
    return int(json.loads(data)["brokerid"])


def _stop_locked(layout: Layout, timeout_s: float) -> None:
    running = [b for b in layout.broker_ids if layout.broker_pid(b) is not None]
    for broker in _controller_last(layout, running):
        pid = layout.broker_pid(broker)
        if pid is not None:
            terminate(pid, (BROKER_MAIN, str(layout.broker_config(broker))), timeout_s)
    zookeeper = layout.zookeeper_pid()
    if zookeeper is not None:
        terminate(zookeeper, (ZOOKEEPER_MAIN, str(layout.zookeeper_config)), timeout_s)
    ports = [layout.zookeeper_port, *layout.broker_ports.values()]
    if not wait_until(lambda: all(port_free(p) for p in ports), 10.0):
        taken = [p for p in ports if not port_free(p)]
        raise LocalClusterError(f"ports {taken} of {layout.root} are still taken after stop")


def stop(data_dir: Path = DEFAULT_DIR, *, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop every broker (controlled shutdown, the controller last), then ZooKeeper; a
    process that outlives `timeout_s` is killed. Returns once no process or port is left."""
    if not is_cluster_dir(data_dir):
        return
    layout = load_layout(data_dir)
    with _locked(layout.root):
        _stop_locked(layout, timeout_s)


def status(data_dir: Path) -> list[ProcessStatus]:
    layout = load_layout(data_dir)
    registered: set[int] = set()
    if layout.zookeeper_pid() is not None:
        with zookeeper_client(layout.zookeeper, 5.0, layout.kazoo_args()) as client:
            registered = registered_brokers(client)
    rows = [ProcessStatus("zookeeper", layout.zookeeper_pid(), layout.zookeeper_port, None)]
    for broker, port in layout.broker_ports.items():
        pid = layout.broker_pid(broker)
        rows.append(ProcessStatus(f"broker-{broker}", pid, port, broker in registered))
    return rows


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LocalClusterError(f"--set-broker wants KEY=VALUE, not {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def main(args: argparse.Namespace) -> int:
    """`kcsim kafka-local ACTION` for a ZooKeeper-mode cluster (kafka_local dispatches)."""
    data_dir: Path = args.dir or DEFAULT_DIR
    started = time.monotonic()
    if args.action == "start" and args.broker is None:
        security = ZkSecurity(args.zk_sasl is not None, args.zk_tls, args.zk_chroot or "")
        user = None if args.zk_sasl is None else SaslUser.read(args.zk_sasl)
        if is_cluster_dir(data_dir) and args.zk_sasl is None and not args.zk_tls:
            # a restart keeps the directory's security unless told otherwise
            stored = load_layout(data_dir).security
            if args.zk_chroot is not None and args.zk_chroot != stored.chroot:
                raise LocalClusterError(
                    f"{data_dir} holds a cluster under chroot {stored.chroot or '/'!r}, "
                    f"not {args.zk_chroot!r}: give a fresh --dir for another chroot"
                )
            security = stored
        address = start(
            data_dir,
            brokers=args.brokers,
            overrides=parse_overrides(args.set_broker),
            security=security,
            sasl_user=user,
        )
        took = time.monotonic() - started
        if security.secured:
            config = load_layout(data_dir).zookeeper_client_config
            print(f"shadow: --zookeeper-config {config}")
        print(f"ZooKeeper-mode cluster in {data_dir} is up ({took:.1f}s); ZooKeeper, bootstrap:")
        print(address.zookeeper)
        print(address.bootstrap)
    elif args.action == "start":
        start_broker(data_dir, args.broker)
        print(f"broker {args.broker} is registered ({time.monotonic() - started:.1f}s)")
    elif args.action == "kill":
        kill_broker(data_dir, args.broker)
        print(f"broker {args.broker} killed")
    elif args.action == "shutdown":
        shutdown_broker(data_dir, args.broker)
        print(f"broker {args.broker} shut down ({time.monotonic() - started:.1f}s)")
    elif args.action == "stop":
        stop(data_dir)
        print(f"ZooKeeper-mode cluster in {data_dir} stopped")
    else:
        for row in status(data_dir):
            state = f"pid {row.pid}" if row.pid is not None else "not running"
            registered = "" if row.registered is None else f", registered: {row.registered}"
            print(f"{row.name}: {state}, 127.0.0.1:{row.port}{registered}")
    return 0
