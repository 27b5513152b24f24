"""pytest fixture: one local SparkSession with Delta for the whole test run.

A session costs ~6 s to start, so every Spark test shares this one. Test modules (or
tests/conftest.py) import `spark` from here; tests using it are marked `spark`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from streaming.jars import JarsMissingError
    from streaming.lake.spark_session import build_session

    try:
        session = build_session(
            "kcsim-tests",
            "local[2]",
            {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        )
    except JarsMissingError as error:
        # a failure, not a skip: a skip would leave every Spark and Delta test out of a
        # green run (`python -m streaming.jars` resolves them)
        pytest.fail(str(error), pytrace=False)
    try:
        yield session
    finally:
        session.stop()
