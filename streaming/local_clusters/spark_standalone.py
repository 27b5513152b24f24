"""A Spark standalone cluster on this machine: a master and workers, the classes the
pyspark package ships (`bin/spark-class ...deploy.master.Master` / `...worker.Worker`).

For the tests and `benchmarks/synthetic/bench_fleet.py`: everything on 127.0.0.1, free ports, small
JVMs, work directories under one directory. Each daemon is a child process of the caller
in its own process group, so a worker and the executors it forks are stopped (or killed,
to test a lost worker) together. Readiness is read from the master's web UI (`/json/`),
never waited for by the clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from streaming.local_clusters.processes import free_ports, log_tail, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
START_TIMEOUT_S = 120.0
# The daemons' own heaps (not the executors'): they only schedule.
DAEMON_MEMORY = "256m"


class StandaloneError(RuntimeError):
    """The master or a worker did not start."""


def spark_home() -> Path:
    """The pyspark package: it holds `bin/spark-class` and Spark's jars."""
    import pyspark  # the package only (no JVM); its path is SPARK_HOME for a pip install

    return Path(pyspark.__file__).parent


def daemon_env(base: Mapping[str, str], directory: Path) -> dict[str, str]:
    """The daemons' environment: loopback, small heaps, logs and pid files under
    `directory`. PYTHONPATH is dropped: executors inherit the worker's environment, and
    their Python must see only what the job ships (and what their interpreter has)."""
    env = {k: v for k, v in base.items() if k != "PYTHONPATH"}
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        SPARK_LOG_DIR=str(directory / "logs"),
        SPARK_PID_DIR=str(directory),
        SPARK_LOCAL_DIRS=str(directory / "local"),
    )
    return env


@dataclass(slots=True)
class Daemon:
    """One JVM (a master or a worker), its log, its process group."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    ui_port: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the group: the daemon and, for a worker, its executors and their
        Python workers; returns once the daemon is reaped."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the group (a worker stops its executors), SIGKILL what outlives it."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout_s)
        self.kill()  # also whatever of the group outlived the daemon


@dataclass(slots=True)
class StandaloneCluster:
    """A running master and its workers."""

    directory: Path
    master: Daemon
    master_port: int
    ui_port: int
    env: dict[str, str]
    workers: list[Daemon] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def state(self) -> dict:
        """The master's status page as JSON (workers, applications), or {} if down."""
        return _get_json(f"http://127.0.0.1:{self.ui_port}/json/")

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def add_worker(self, cores: int = 1, memory: str = "1g") -> Daemon:
        """Start a worker and return once the master lists it as ALIVE."""
        index = len(self.workers)
        port, ui_port = free_ports(2)
        work = self.directory / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        wanted = self.alive_workers() + 1
        daemon = _launch(
            f"worker-{index}",
            [
                WORKER_CLASS, "--host", "127.0.0.1", "--port", str(port),
                "--webui-port", str(ui_port), "--cores", str(cores), "--memory", memory,
                "--work-dir", str(work), self.url,
            ],
            self.directory,
            self.env,
            ui_port,
        )  # fmt: skip
        self.workers.append(daemon)
        if not wait_until(lambda: not daemon.alive() or self.alive_workers() >= wanted, 60):
            raise StandaloneError(f"worker {index} did not register:\n{log_tail(daemon.log)}")
        if not daemon.alive():
            raise StandaloneError(f"worker {index} exited:\n{log_tail(daemon.log)}")
        return daemon

    def worker_running(self, app_id: str, executor_id: str) -> Daemon | None:
        """The live worker that runs the application's executor, if any."""
        for worker in self.workers:
            if worker.alive():
                page = _get_json(f"http://127.0.0.1:{worker.ui_port}/json/")
                for executor in page.get("executors", []):
                    if (executor.get("appid"), str(executor.get("id"))) == (app_id, executor_id):
                        return worker
        return None

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.master.stop()


def _get_json(url: str) -> dict:
    """A daemon's status page as JSON, or {} while it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)
    except (OSError, ValueError):
        return {}


def _launch(
    name: str, args: list[str], directory: Path, env: Mapping[str, str], ui_port: int
) -> Daemon:
    log = directory / f"{name}.log"
    with log.open("ab") as out:
        # spark-class execs the JVM: the pid is the JVM's, and leads its own group
        proc = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=directory,
            start_new_session=True,
        )
    return Daemon(name, proc, log, ui_port)


def start(
    directory: Path,
    workers: int = 2,
    *,
    cores: int = 1,
    memory: str = "1g",
    env: Mapping[str, str] | None = None,
) -> StandaloneCluster:
    """A master and `workers` workers of `cores` cores and `memory` each; returns once
    all are registered. On failure, whatever was started is stopped."""
    directory.mkdir(parents=True, exist_ok=True)
    full_env = daemon_env(env if env is not None else os.environ, directory)
    port, ui_port = free_ports(2)
    master = _launch(
        "master",
        [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui_port)],
        directory,
        full_env,
        ui_port,
    )
    cluster = StandaloneCluster(directory, master, port, ui_port, full_env)
    try:
        up = wait_until(
            lambda: not master.alive() or cluster.state().get("status") == "ALIVE",
            START_TIMEOUT_S,
        )
        if not up or not master.alive():
            raise StandaloneError(f"the master did not start:\n{log_tail(master.log)}")
        for _ in range(workers):
            cluster.add_worker(cores, memory)
    except BaseException:
        cluster.stop()
        raise
    return cluster
