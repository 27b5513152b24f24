"""The extra Spark jars add to pyspark's own jars without duplicating any of them."""

from __future__ import annotations

import re
from pathlib import Path

import pyspark

from streaming.jars import spark_jars

VERSION = re.compile(r"^\d+\.\d")


def artifact(jar: str) -> str:
    """`spark-sql-kafka-0-10_2.13-4.2.0.jar` -> `spark-sql-kafka-0-10_2.13`."""
    parts = Path(jar).name.removesuffix(".jar").split("-")
    for i, part in enumerate(parts):
        if i and VERSION.match(part):
            return "-".join(parts[:i])
    return "-".join(parts)


def test_extra_jars_are_present_and_disjoint_from_pyspark() -> None:
    ours = {artifact(j) for j in spark_jars()}
    assert {
        "delta-spark_4.2_2.13",
        "delta-storage",
        "spark-sql-kafka-0-10_2.13",
        "spark-token-provider-kafka-0-10_2.13",
        "kafka-clients",
        "commons-pool2",
    } <= ours
    shipped = {artifact(str(j)) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    assert not ours & shipped, f"jars that pyspark already ships: {sorted(ours & shipped)}"
