"""The core's zip for executors without kcsim (`streaming.job.ship_core`): self-contained,
reproducible, shipped on cluster masters only. (On a real standalone cluster:
tests/streaming/job/test_standalone.py.)"""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from streaming.job.ship_core import core_zip_bytes, is_local_master, write_core_zip

ROOT = Path(__file__).resolve().parents[3]


def test_zip_holds_every_core_source_file_and_nothing_else() -> None:
    names = set(zipfile.ZipFile(io.BytesIO(core_zip_bytes())).namelist())
    expected = {
        path.relative_to(ROOT).as_posix()
        for package in ("controller", "schemas")
        for path in (ROOT / package).rglob("*.py")
    }
    # the job's file source, which executors run, with its packages' __init__
    expected |= {
        "streaming/__init__.py",
        "streaming/job/__init__.py",
        "streaming/job/file_source.py",
    }
    assert names == expected
    assert "controller/simulator.py" in names and "schemas/__init__.py" in names


def test_same_sources_give_the_same_bytes_and_name(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    one, two = write_core_zip(first), write_core_zip(second)
    assert one.name == two.name and one.read_bytes() == two.read_bytes()


def test_an_interpreter_without_site_packages_runs_the_core_from_the_zip(tmp_path: Path) -> None:
    """`python -S -I`: no site-packages (no kcsim install), no PYTHONPATH, no current
    directory; only the zip on the path. The core imports nothing but the standard
    library, so it applies an event there."""
    zip_path = write_core_zip(tmp_path)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from controller.config import Settings\n"
        "from controller.simulator import RawEvent, Simulator\n"
        "out = Simulator(Settings()).apply([RawEvent("
        '\'{"type":"broker_startup","broker":1}\', \'x:1\')])\n'
        "import controller.simulator as m; print(m.__file__)\n"
        "print(len(out.appends['applied_events']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-I", "-c", script, str(zip_path)],
        capture_output=True, text=True, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    origin, applied = done.stdout.split()
    assert origin == f"{zip_path}/controller/simulator.py"
    assert applied == "1"


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[2,3]", True),
        ("local-cluster[2,1,1024]", False),
        ("spark://127.0.0.1:7077", False),
        ("yarn", False),
        ("k8s://https://host:6443", False),
    ],
)
def test_the_core_is_shipped_on_every_master_but_local(master: str, local: bool) -> None:
    assert is_local_master(master) is local
