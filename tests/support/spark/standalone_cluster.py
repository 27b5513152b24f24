"""pytest fixture: a real Spark standalone cluster (a master and two workers of 1 core and
1 GiB each, `streaming.local_clusters.spark_standalone`) whose executors run an interpreter without
kcsim.

`bare_python` is that interpreter: a venv (no pip) whose one `.pth` line puts this
environment's site-packages on its path. A `.pth` line is a plain path entry, and `.pth`
files inside an entry are not processed, so kcsim's editable install (a `.pth` finder in
site-packages) is not there: pandas, pyarrow and pyspark import, `controller` does not.
The workers run without PYTHONPATH (`streaming.local_clusters.spark_standalone.daemon_env`), so the
core can only reach executors the way the job ships it.

Tests that use the cluster are marked `spark` and `slow`. A test that kills a worker
calls `ensure_workers()` in a `finally`, so every test finds two live workers.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from streaming.local_clusters import spark_standalone as standalone

WORKERS = 2


def bare_python(directory: Path) -> Path:
    """A Python that sees this environment's packages but not kcsim (see module doc)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(directory)], check=True)
    python = directory / "bin" / "python"
    venv_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(venv_site) / "outer-site-packages.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    return python


@dataclass(frozen=True, slots=True)
class Standalone:
    cluster: standalone.StandaloneCluster
    python: Path  # the executors' interpreter: cannot import kcsim

    @property
    def url(self) -> str:
        return self.cluster.url

    def ensure_workers(self, count: int = WORKERS) -> None:
        """Start workers until `count` are alive (after a test killed one)."""
        while self.cluster.alive_workers() < count:
            self.cluster.add_worker()


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    python = bare_python(tmp_path_factory.mktemp("bare-python"))
    cluster = standalone.start(tmp_path_factory.mktemp("spark-standalone"), WORKERS)
    try:
        yield Standalone(cluster, python)
    finally:
        cluster.stop()
