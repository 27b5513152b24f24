"""`kcsim run --fleet` on a real Spark standalone cluster: a master and two workers
(tests/support/spark/standalone_cluster.py) whose executors' Python cannot import kcsim, so
the core reaches them only in the zip the job ships (`streaming.job.ship_core`).

The expected rows are `kcsim replay`'s: the core applying the whole stream in one process
(`controller.replay.event_files.read_events` + `Simulator.apply`), as in
tests/streaming/job/test_spark_job.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.replay.event_files import read_events
from streaming.local_clusters.processes import free_port
from tests.support.corpus import CORPUS, replay_rows
from tests.support.spark.job_process import ROOT, JobProcess, job_env
from tests.support.spark.lake_tables import assert_same_tables, lake_rows
from tests.support.spark.spark_session import spark  # noqa: F401  (the session-scoped fixture)
from tests.support.spark.standalone_cluster import Standalone, standalone_cluster  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB_TIMEOUT_S = 600


def fleet_args(
    cluster: Standalone, source: Path, lake: Path, *extra: str, once: bool = True
) -> list[str]:
    return [
        "--source", f"file:{source}", "--lake", str(lake), "--fleet",
        *(["--once"] if once else []),
        "--master", cluster.url, "--max-files-per-trigger", "1",
        "--conf", f"spark.pyspark.python={cluster.python}",
        *extra,
    ]  # fmt: skip


def test_executors_import_the_core_only_from_the_shipped_zip(
    standalone_cluster: Standalone,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Without the zip an executor cannot import `controller`; with it, it imports it from
    the zip: what makes the fleet tests below prove the shipping."""
    probe = subprocess.run(
        [
            sys.executable, str(ROOT / "tests" / "support" / "spark" / "executor_probe.py"),
            standalone_cluster.url, str(standalone_cluster.python), str(tmp_path),
        ],
        capture_output=True, text=True, env=job_env(), cwd=ROOT, timeout=JOB_TIMEOUT_S,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    assert found["before"] == "ImportError: No module named 'controller'"
    shipped = Path(found["zip"]).name
    assert shipped.startswith("kcsim-core-") and shipped.endswith(".zip")
    assert found["after"].endswith(f"{shipped}/controller/simulator.py")


# --------------------------------------------------------------- a worker killed


def fleet_stream(target: Path, clusters: int, partitions: int, files: int) -> Path:
    """`clusters` clusters of 3 brokers and one topic, whose brokers then fail and come
    back in turn, and the corpus (clusters default, east and west, every event type, bad
    lines); every file holds the next slice of every cluster's events and of the corpus
    (each batch touches every cluster), files in name order with increasing modification
    times."""
    target.mkdir(parents=True)
    per_cluster: list[list[str]] = []
    for index in range(clusters):
        cluster = f"c{index:02d}"
        events: list[dict] = [
            {"type": "broker_startup", "cluster": cluster, "broker": b} for b in (1, 2, 3)
        ]
        events.append(
            {
                "type": "topic_creation", "cluster": cluster, "topic": "orders",
                "partitions": partitions, "replication_factor": 3,
            }
        )  # fmt: skip
        for step in range(3 * files):
            broker = 1 + step % 3
            events.append({"type": "broker_failure", "cluster": cluster, "broker": broker})
            events.append({"type": "broker_startup", "cluster": cluster, "broker": broker})
        per_cluster.append([json.dumps(e, separators=(",", ":")) for e in events])
    size = -(-len(per_cluster[0]) // files)
    corpus = [e.raw for e in read_events(CORPUS)]
    corpus_size = -(-len(corpus) // files)
    start = time.time() - 1000
    for number in range(files):
        piece = slice(number * size, (number + 1) * size)
        lines = [line for events in per_cluster for line in events[piece]]
        lines += corpus[number * corpus_size : (number + 1) * corpus_size]
        path = target / f"part-{number:03d}.jsonl"
        path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
        os.utime(path, (start + number, start + number))
    return target


def _get(url: str) -> list | dict | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.load(response)
    except (OSError, ValueError):
        return None


def test_worker_killed_mid_batch_loses_and_doubles_nothing(
    spark,  # noqa: F811
    standalone_cluster: Standalone,  # noqa: F811
    tmp_path: Path,
) -> None:
    """`kcsim run --fleet --master spark://...`: every table equals `kcsim replay`'s rows
    though a worker (with its executor) is SIGKILLed while a task of a later batch runs on
    it: the driver loses the executor, the batch's tasks run again on the other worker,
    and every append-only row is there once. The corpus rides along, so every event type
    and every bad line goes through the executors; batches 1 and 2 rebuild their clusters
    from what the batches before them wrote."""
    files = 3  # the kill lands in batch 1 or 2, whose tasks then run again elsewhere
    # 96 clusters: each of a batch's two apply tasks takes 48, and runs for 1.7-3.4 s here
    # (with 24 they ran 0.8-1.6 s, too short to be caught reliably)
    clusters = 96
    source = fleet_stream(tmp_path / "events", clusters=clusters, partitions=60, files=files)
    lake = tmp_path / "lake"
    ui = free_port()
    # not --once: the driver (and its REST API) stays up until the test has seen the loss
    job = JobProcess(
        fleet_args(
            standalone_cluster, source, lake,
            "--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={ui}",
            once=False,
        )
    )  # fmt: skip
    api = f"http://127.0.0.1:{ui}/api/v1/applications"
    try:
        job.wait_batches(1, timeout=JOB_TIMEOUT_S)
        app, executor, finished = kill_a_busy_worker(job, standalone_cluster, api, files)
        # the driver lost the executor (its running task runs again elsewhere), and every
        # batch completed
        job.wait_until(lambda: executor_lost(api, app, executor), JOB_TIMEOUT_S)
        job.wait_batches(files, timeout=JOB_TIMEOUT_S)
        assert finished < job.batches() == files
    finally:
        job.kill()
        standalone_cluster.ensure_workers()
    rows = lake_rows(spark, lake)
    assert_same_tables(rows, replay_rows(source))
    fleet = {f"c{index:02d}" for index in range(clusters)}  # the corpus's clusters aside
    seqs = [(r["cluster"], r["seq"]) for r in rows["applied_events"] if r["cluster"] in fleet]
    assert len(seqs) == len(set(seqs)) == clusters * (4 + 2 * 3 * files)


def kill_a_busy_worker(
    job: JobProcess, cluster: Standalone, api: str, batches: int
) -> tuple[str, str, int]:
    """Poll the driver's REST API until a task has been running on an executor for a
    while (so it is not about to end), then SIGKILL the worker that runs that executor
    (and so the executor): (application, executor, batches done before). Fails at once
    if the job finishes all its `batches` first."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        assert job.proc.poll() is None, job.tail()
        assert time.monotonic() < deadline, "no task ran long on an executor after batch 0"
        assert job.batches() < batches, f"no task ran {RUNNING_S} s in batches 1 to {batches - 1}"
        apps = _get(api) or []
        app = apps[0]["id"] if apps else None
        for executor in running_task_executors(api, app, RUNNING_S) if app else ():
            worker = cluster.cluster.worker_running(app, executor)
            if worker is not None:
                finished = job.batches()
                worker.kill()
                return app, executor, finished
        time.sleep(0.05)


# A task of the apply stage runs for 1.7 s or more (above); one seen running this long is
# not about to end before the kill lands (the status store lags the executors by up to
# ~0.1 s, the poll takes about as long). The other stages' tasks ran at most 0.4 s here;
# one caught past this on a slower machine may end just before the kill, which then still
# lands in the batch (its executor lost, the batch not yet committed).
RUNNING_S = 0.5


def running_task_executors(api: str, app: str, at_least_s: float) -> list[str]:
    """Executors running a task launched at least `at_least_s` ago."""
    now = datetime.now(UTC)
    found = []
    for stage in _get(f"{api}/{app}/stages?status=active&details=true") or []:
        for task in (stage.get("tasks") or {}).values():
            launched = datetime.strptime(
                task["launchTime"].replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z"
            )
            if task["status"] == "RUNNING" and (now - launched).total_seconds() >= at_least_s:
                found.append(str(task["executorId"]))
    return found


def executor_lost(api: str, app: str, executor: str) -> bool:
    """The driver lists the executor as gone. (Its running task is then re-run elsewhere;
    the status API does not reliably count that task as failed, so this is not asked:
    the batches completing with the replay's rows, each once, is what the test checks.)"""
    executors = _get(f"{api}/{app}/allexecutors") or []
    return any(e["id"] == executor and not e["isActive"] for e in executors)
