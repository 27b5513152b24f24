"""`kcsim kafka-local start|stop`: a single-node Apache Kafka broker in KRaft mode.

One JVM plays both roles (process.roles=broker,controller) and listens on 127.0.0.1
only, on free ports. Everything lives under the data directory: server.properties,
the log dirs, kafka.log (the JVM's output), kafka.pid and bootstrap.txt. The broker
runs in its own process group, detached from the caller, so `start` returns while it
keeps running and `stop` (from any process) ends it through the pid file.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from streaming.jars import JarsMissingError, kafka_libs_dir

DEFAULT_DIR = Path(".kcsim/kafka")
HEAP = "-Xmx512m"
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
MAIN_CLASS = "kafka.Kafka"

# Starts the broker as a grandchild: the launcher exits at once, so the broker is
# reparented to init and no Python process is left holding an unreaped child.
_LAUNCHER = """
import subprocess, sys
log = open(sys.argv[1], "ab")
proc = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log,
                        stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
print(proc.pid)
"""

# Everything to stdout, which the launcher sends to DIR/kafka.log.
LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


class KafkaLocalError(RuntimeError):
    """The broker could not be started or stopped."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # the broker binds with SO_REUSEADDR too: connections of a stopped broker left in
        # TIME_WAIT must not make its old port look taken (a restart keeps its address)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _read_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                props[key.strip()] = value.strip()
    return props


def _ports(data_dir: Path) -> tuple[int, int]:
    """Broker and controller ports: the previous run's if still free, else new ones."""
    previous = _read_properties(data_dir / "ports.properties")
    with contextlib.suppress(KeyError, ValueError):
        broker, controller = int(previous["broker"]), int(previous["controller"])
        if _port_free(broker) and _port_free(controller):
            return broker, controller
    broker = _free_port()
    controller = _free_port()
    while controller == broker:
        controller = _free_port()
    return broker, controller


def _server_properties(data_dir: Path, broker_port: int, controller_port: int) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
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
    return "".join(f"{key}={value}\n" for key, value in props.items())


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise KafkaLocalError("`java` (17+) is not on PATH and JAVA_HOME is not set")
    return java


def _cluster_id() -> str:
    # Kafka's Uuid text form: url-safe base64 of 16 bytes, no padding; like Kafka's
    # Uuid.randomUuid, never one starting with "-" (it would read as an option).
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _is_broker(pid: int) -> bool:
    """True while `pid` is a live (not zombie) JVM running kafka.Kafka."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and MAIN_CLASS.encode() in cmdline.split(b"\0")


def _read_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "kafka.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _log_tail(data_dir: Path, lines: int = 30) -> str:
    try:
        text = (data_dir / "kafka.log").read_text(errors="replace")
    except OSError:
        return "(no kafka.log)"
    return "\n".join(text.splitlines()[-lines:])


def _wait_ready(bootstrap: str, pid: int, data_dir: Path, timeout_s: float) -> None:
    """Wait until the broker is registered and answers metadata requests."""
    from kafka import KafkaAdminClient  # imported here: `stop` needs no Kafka client
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if not _is_broker(pid):
            raise KafkaLocalError(f"Kafka exited during start-up; log:\n{_log_tail(data_dir)}")
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap, request_timeout_ms=5000, client_id="kcsim-kafka-local"
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
    raise KafkaLocalError(
        f"Kafka did not become ready at {bootstrap} within {timeout_s:.0f}s "
        f"(last error: {last_error!r}); log:\n{_log_tail(data_dir)}"
    )


def start(data_dir: Path = DEFAULT_DIR, *, timeout_s: float = START_TIMEOUT_S) -> str:
    """Start the broker (or find it running) and return its bootstrap address."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    # Two concurrent starts on one directory would both format it: serialize them.
    with (data_dir / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _start_locked(data_dir, timeout_s)


def _start_locked(data_dir: Path, timeout_s: float) -> str:
    bootstrap_file = data_dir / "bootstrap.txt"
    pid = _read_pid(data_dir)
    running_port = _read_properties(data_dir / "ports.properties").get("broker")
    if pid is not None and _is_broker(pid) and running_port:
        # Already running (maybe still starting, from another process): reuse it.
        bootstrap = f"127.0.0.1:{running_port}"
        _wait_ready(bootstrap, pid, data_dir, timeout_s)
        return bootstrap

    try:
        classpath = str(kafka_libs_dir() / "*")
    except JarsMissingError as error:
        raise KafkaLocalError(str(error)) from error
    java = _java()
    broker_port, controller_port = _ports(data_dir)
    (data_dir / "ports.properties").write_text(
        f"broker={broker_port}\ncontroller={controller_port}\n"
    )
    properties = data_dir / "server.properties"
    properties.write_text(_server_properties(data_dir, broker_port, controller_port))
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(LOG4J2)
    jvm = [
        java,
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
    if not (data_dir / "data" / "meta.properties").is_file():
        formatted = subprocess.run(
            [*jvm, "kafka.tools.StorageTool", "format", "--ignore-formatted",
             f"--cluster-id={_cluster_id()}", f"--config={properties}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if formatted.returncode != 0:
            raise KafkaLocalError(
                "kafka-storage format failed:\n"
                + "\n".join((formatted.stdout + formatted.stderr).splitlines()[-15:])
            )

    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(data_dir / "kafka.log"), *jvm, MAIN_CLASS,
         str(properties)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    pid = int(launched.stdout.strip())
    (data_dir / "kafka.pid").write_text(f"{pid}\n")
    bootstrap = f"127.0.0.1:{broker_port}"
    try:
        _wait_ready(bootstrap, pid, data_dir, timeout_s)
    except KafkaLocalError:
        stop(data_dir)
        raise
    bootstrap_file.write_text(bootstrap + "\n")
    return bootstrap


def stop(data_dir: Path = DEFAULT_DIR, *, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop the broker started in `data_dir` (SIGTERM to its group, then SIGKILL)."""
    data_dir = data_dir.resolve()
    pid = _read_pid(data_dir)
    if pid is not None and _is_broker(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _is_broker(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _is_broker(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            while _is_broker(pid) and time.monotonic() < deadline + 10:
                time.sleep(0.2)
    for name in ("kafka.pid", "bootstrap.txt"):
        (data_dir / name).unlink(missing_ok=True)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help=f"data directory (default {DEFAULT_DIR})"
    )


def main(args: argparse.Namespace) -> int:
    try:
        if args.action == "start":
            bootstrap = start(args.dir)
            print(f"Kafka (KRaft, pid file {args.dir / 'kafka.pid'}) is up; bootstrap:")
            print(bootstrap)
        else:
            stop(args.dir)
            print(f"Kafka in {args.dir} stopped")
    except KafkaLocalError as error:
        print(f"kcsim kafka-local: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m streaming.kafka_local")
    configure(_parser)
    sys.exit(main(_parser.parse_args()))
