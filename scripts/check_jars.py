"""Smoke test of the JVM jars: a Delta round trip and a Kafka batch read through Spark.

    python scripts/check_jars.py [--bootstrap HOST:PORT]

Without --bootstrap it starts (and afterwards stops) a local broker in a temp dir.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafka import KafkaProducer  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402

from streaming.lake.spark_session import build_session  # noqa: E402
from streaming.local_clusters import kafka_local  # noqa: E402


def check(bootstrap: str, work: Path) -> None:
    topic = f"kcsim-check-{int(time.time())}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(5):
        producer.send(topic, key=b"c1", value=f'{{"n": {i}}}'.encode())
    producer.flush()
    producer.close()

    t0 = time.monotonic()
    spark = build_session("kcsim-check-jars")
    print(f"session up in {time.monotonic() - t0:.1f}s", flush=True)
    try:
        lake = str(work / "lake" / "t")
        spark.range(10).withColumnRenamed("id", "n").write.format("delta").save(lake)
        spark.range(10, 15).withColumnRenamed("id", "n").write.format("delta").mode("append").save(
            lake
        )
        total = spark.read.format("delta").load(lake).count()
        assert total == 15, total
        spark.sql(f"DELETE FROM delta.`{lake}` WHERE n < 5")
        assert spark.read.format("delta").load(lake).count() == 10
        history = spark.sql(f"DESCRIBE HISTORY delta.`{lake}`").count()
        print(f"delta ok: 15 rows written, 10 after DELETE, {history} versions", flush=True)

        rows = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(value AS STRING) AS v")
            .collect()
        )
        values = sorted(r.v for r in rows)
        assert values == [f'{{"n": {i}}}' for i in range(5)], values
        print(f"kafka ok: read {len(values)} records from {topic} via spark.read", flush=True)

        sink = str(work / "lake" / "stream")
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
            .writeStream.format("delta")
            .option("checkpointLocation", str(work / "checkpoints" / "stream"))
            .trigger(availableNow=True)
            .start(sink)
        )
        query.awaitTermination(120)
        streamed = spark.read.format("delta").load(sink).count()
        assert streamed == 5, streamed
        print(f"streaming ok: {streamed} records Kafka -> Delta (availableNow)", flush=True)
    finally:
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kcsim-check-") as tmp:
        work = Path(tmp)
        if args.bootstrap:
            check(args.bootstrap, work)
            return 0
        bootstrap = kafka_local.start(work / "kafka")
        try:
            check(bootstrap, work)
        finally:
            kafka_local.stop(work / "kafka")
    return 0


if __name__ == "__main__":
    sys.exit(main())
