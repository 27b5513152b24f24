"""Run as a script by tests/streaming/job/test_standalone.py: where an executor's Python finds
`controller`, before and after the driver ships the core (`streaming.job.ship_core`).

    python tests/support/spark/executor_probe.py MASTER_URL EXECUTOR_PYTHON DIR

Prints one JSON object: {"before": <the executor's import error, or the module's file>,
"after": <the same, once the zip is added>, "zip": <the zip's path on the driver>}.
A separate process because a process holds one SparkContext (the tests' local one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def controller_origin(_: object) -> str:
    """On an executor: the file `controller` is imported from, or the import's error."""
    try:
        import controller.simulator as simulator
    except ImportError as error:
        return f"ImportError: {error}"
    return str(simulator.__file__)


def main() -> None:
    master, python, directory = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    from streaming.job.ship_core import ship_core
    from streaming.lake.spark_session import build_session

    spark = build_session("kcsim-probe", master, {"spark.pyspark.python": python})
    try:
        context = spark.sparkContext
        before = context.parallelize([0], 1).map(controller_origin).collect()[0]
        zip_path = ship_core(context, directory)
        after = context.parallelize([0], 1).map(controller_origin).collect()[0]
    finally:
        spark.stop()
    print(json.dumps({"before": before, "after": after, "zip": str(zip_path)}))


if __name__ == "__main__":
    main()
