"""Local JVM processes for `kcsim kafka-local`: launch detached, find by pid file, stop.

Shared by the KRaft single node (`kafka_local`) and the ZooKeeper-mode cluster
(`zk_cluster`). Every process runs in its own session, detached from the caller, so a
`start` returns while it keeps running and any later command can signal it through its
pid file. A pid only counts as ours while /proc shows a live process whose command line
holds the expected markers (main class, config file), so a recycled pid is never signalled.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from controller.config import read_properties

# Starts the process as a grandchild: the launcher exits at once, so the process is
# reparented to init and no Python process is left holding an unreaped child.
_LAUNCHER = """
import subprocess, sys
log = open(sys.argv[1], "ab")
proc = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log,
                        stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
print(proc.pid)
"""

POLL_S = 0.1


class LocalClusterError(RuntimeError):
    """A local broker or ZooKeeper could not be started or stopped."""


class JavaMissingError(LocalClusterError):
    """No `java` to run a local cluster with."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # the servers bind with SO_REUSEADDR too: connections of a stopped server left in
        # TIME_WAIT must not make its old port look taken (a restart keeps its address)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def accepts_connections(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def read_properties_file(path: Path) -> dict[str, str]:
    """A properties file the local clusters wrote (Kafka reads the same files), parsed
    as Java parses it; empty when there is none."""
    return read_properties(path.read_text()) if path.is_file() else {}


def write_properties(path: Path, props: Mapping[str, object]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in props.items()))


def read_user_password(path: Path, option: str) -> tuple[str, str]:
    """The one line USER:PASSWORD of a local cluster's credentials file (`option` names
    it in errors, which never quote the file)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise LocalClusterError(f"cannot read {option} {path}: {error.strerror}") from None
    username, sep, password = text.partition(":")
    if not sep or not username or not password or "\n" in text:
        raise LocalClusterError(f"{option} {path} must hold one line USER:PASSWORD")
    return username, password


def java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise JavaMissingError("`java` (17+) is not on PATH and JAVA_HOME is not set")
    return found


def launch_detached(command: list[str], output: Path, pid_file: Path) -> int:
    """Run `command` in its own session, stdout and stderr appended to `output`; the pid
    is written to `pid_file` and returned."""
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(output), *command],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    pid = int(launched.stdout.strip())
    pid_file.write_text(f"{pid}\n")
    return pid


def is_running(pid: int, markers: Iterable[str]) -> bool:
    """True while `pid` is a live (not zombie) process whose argv holds every marker."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    args = cmdline.split(b"\0")
    return state not in ("Z", "X") and all(m.encode() in args for m in markers)


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def running_pid(pid_file: Path, markers: Iterable[str]) -> int | None:
    """The pid in `pid_file` if that process is still ours and alive, else None."""
    pid = read_pid(pid_file)
    return pid if pid is not None and is_running(pid, markers) else None


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no {path.name})"
    return "\n".join(text.splitlines()[-lines:])


def wait_until(condition: Callable[[], bool], timeout_s: float, poll_s: float = POLL_S) -> bool:
    """Poll `condition` until it holds (True) or the deadline passes (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send `sig` to the process group `pid` leads (its own session, see launch_detached)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgid(pid), sig)


KILL_WAIT_S = 10.0  # a process SIGKILL has not ended by then is stuck in the kernel


def terminate(pid: int, markers: Iterable[str], timeout_s: float) -> None:
    """SIGTERM, and SIGKILL if the process outlives `timeout_s`; returns once it is gone
    (LocalClusterError if even SIGKILL does not end it)."""
    markers = tuple(markers)
    if not is_running(pid, markers):
        return
    signal_group(pid, signal.SIGTERM)
    if wait_until(lambda: not is_running(pid, markers), timeout_s, 0.2):
        return
    signal_group(pid, signal.SIGKILL)
    if not wait_until(lambda: not is_running(pid, markers), KILL_WAIT_S, 0.2):
        raise LocalClusterError(f"process {pid} is still running {KILL_WAIT_S:.0f} s after SIGKILL")


def kraft_cluster_id() -> str:
    """A new KRaft cluster id in Kafka's Uuid text form: url-safe base64 of 16 bytes, no
    padding; like Kafka's Uuid.randomUuid, never one starting with "-" (it would read as
    an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text
