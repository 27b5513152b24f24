"""The core (`controller/`, `schemas/`) as a zip for executors that do not have kcsim.

`--fleet` applies clusters in `applyInPandas` on the executors, whose Python must import
`controller` and `schemas` (the function Spark ships refers to the core's classes by
module), and the file source's tasks read event files there (`streaming.job.file_source`,
shipped with them). On a cluster (any master but `local`), the job builds this zip from
the modules the driver runs and adds it with `SparkContext.addPyFile`: Spark copies it to
every executor and puts it first on its Python workers' path, so executors need only
pyspark, pandas and pyarrow. The zip is built from source files only, with fixed
timestamps, so the same code gives the same bytes (and the same name, which holds a hash
of them).
"""

from __future__ import annotations

import hashlib
import importlib
import io
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

CORE_PACKAGES = ("controller", "schemas")
# Modules of `streaming` that executors run: the job's file source reads the event files
# in its tasks (`streaming.job.file_source`), with its packages' `__init__` (docstrings
# only: importing them imports nothing else).
SHIPPED_MODULES = ("streaming.job.file_source",)
# Zip's earliest representable time: the bytes depend on the sources alone.
_EPOCH = (1980, 1, 1, 0, 0, 0)


def core_zip_bytes(
    packages: tuple[str, ...] = CORE_PACKAGES, modules: tuple[str, ...] = SHIPPED_MODULES
) -> bytes:
    """A zip of every `.py` file of `packages`, and of `modules` with the `__init__.py`
    of each package above them, as the driver imports them."""
    files: dict[str, Path] = {}
    for package in packages:
        root = _source(package).parent
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                files[f"{package}/{path.relative_to(root).as_posix()}"] = path
    for dotted in modules:
        parts = dotted.split(".")
        for depth in range(1, len(parts)):
            package = ".".join(parts[:depth])
            files[f"{package.replace('.', '/')}/__init__.py"] = _source(package)
        files[f"{dotted.replace('.', '/')}.py"] = _source(dotted)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, files[name].read_bytes())
    return buffer.getvalue()


def _source(module_name: str) -> Path:
    module = importlib.import_module(module_name)
    assert module.__file__ is not None
    return Path(module.__file__)


def write_core_zip(directory: Path) -> Path:
    """The zip in `directory`, named `kcsim-core-<hash>.zip`."""
    data = core_zip_bytes()
    path = directory / f"kcsim-core-{hashlib.sha256(data).hexdigest()[:12]}.zip"
    path.write_bytes(data)
    return path


def is_local_master(master: str) -> bool:
    """`local`, `local[N]`, `local[*]`, `local[N,F]`: executors are the driver's process,
    which imports the core already."""
    return master == "local" or master.startswith("local[")


def ship_core(context: SparkContext, directory: Path) -> Path:
    """Build the zip in `directory` and add it to the context's Python files."""
    path = write_core_zip(directory)
    context.addPyFile(str(path))
    return path
