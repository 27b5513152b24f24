"""Request sink benchmark: `RequestSink.send` (the driver's kafka-python producer) alone.

Run by hand (not a test):

    python benchmarks/live/bench_sink.py --partitions 1500,20000 --clusters 4

Starts a local broker (or uses `--bootstrap`). For each size, the core applies a small
scenario (brokers start, a topic of that many partitions is created, a broker stops and
comes back) on `--clusters` clusters, and the batch's records go to a fresh topic of
`--topic-partitions` partitions through `RequestSink.send`, timed until every record is
acknowledged. Then the same batch again as a re-run (`may_be_rerun`): the read-back of
the topic's tail and no record sent. Printed per size: records, MB, seconds and
records/s and MB/s of the send, seconds of the re-run. Figures depend on the machine and
on whatever else runs on it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402

from controller.config import Settings  # noqa: E402
from controller.simulator import RawEvent, Simulator  # noqa: E402
from streaming.job.request_sink import RequestSink, payload_records  # noqa: E402
from streaming.local_clusters import kafka_local  # noqa: E402


def scenario(partitions: int) -> list[dict]:
    return [
        *({"type": "broker_startup", "broker": b} for b in (1, 2, 3)),
        {"type": "topic_creation", "topic": "big", "partitions": partitions,
         "replication_factor": 2},
        {"type": "controlled_shutdown", "broker": 2},
        {"type": "broker_failure", "broker": 2},
        {"type": "broker_startup", "broker": 2},
    ]  # fmt: skip


def batch(partitions: int, clusters: int) -> tuple[list[dict], list[dict]]:
    lines = [
        RawEvent(json.dumps({**e, "cluster": f"bench-{c}"}), f"bench:{c}:{i}")
        for i, e in enumerate(scenario(partitions))
        for c in range(clusters)
    ]
    output = Simulator(Settings()).apply(lines)
    return list(output.appends["controller_requests"]), list(output.appends["request_payloads"])


def measure(bootstrap: str, partitions: int, clusters: int, topic_partitions: int) -> str:
    topic = f"kcsim-bench-sink-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, topic_partitions, 1)])
    finally:
        admin.close()
    requests, payloads = batch(partitions, clusters)
    sink = RequestSink(bootstrap, topic)
    try:
        records = payload_records(requests, payloads, sink.max_record_bytes())
        size = sum(len(r.key) + len(r.value) for r in records) / 1e6
        started = time.monotonic()
        sink.send(requests, payloads, may_be_rerun=False)
        sent = time.monotonic() - started
        started = time.monotonic()
        skipped = sink.send(requests, payloads, may_be_rerun=True)
        rerun = time.monotonic() - started
    finally:
        sink.close()
    assert skipped == len(records), (skipped, len(records))
    return (
        f"{partitions:>8} partitions x {clusters} clusters: {len(records):>6} records, "
        f"{size:8.1f} MB; send {sent:6.2f} s ({len(records) / sent:8.0f} records/s, "
        f"{size / sent:6.1f} MB/s); re-run (read-back, nothing sent) {rerun:6.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1500,20000", help="comma-separated sizes")
    parser.add_argument("--clusters", type=int, default=4)
    parser.add_argument("--topic-partitions", type=int, default=3)
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kcsim-bench-sink-") as work:
        data_dir = Path(work) / "kafka"
        bootstrap = args.bootstrap or kafka_local.start(data_dir)
        try:
            for size in (int(s) for s in args.partitions.split(",")):
                print(measure(bootstrap, size, args.clusters, args.topic_partitions), flush=True)
        finally:
            if args.bootstrap is None:
                kafka_local.stop(data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
