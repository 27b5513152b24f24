"""Secured Kafka and ZooKeeper for real: a KRaft broker started with
SASL/SCRAM-SHA-256 (`kafka-local start --sasl-scram`), the producer, the job's source
(Spark's Java client) and sink (kafka-python), and the shadow's Kafka output
authenticating through `--kafka-config`; the shadow reading a digest-protected chroot
through `--zookeeper-config`. Wrong or missing
credentials give a clear error within a deadline. Every file a run wrote (lake,
checkpoint, Spark event log, shadow output and state) and its stdout/stderr are searched
for the password: none may hold it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from kafka import KafkaConsumer
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

from streaming.chaos.produce import scenario_records
from streaming.clients.kafka_config import KafkaClientConfig
from streaming.local_clusters import kafka_local
from tests.support.clusters.security import (
    CORPUS,
    KAFKA_SCAN,
    REFUSED_WITHIN_S,
    files_holding,
    kcsim,
    unredacted_jaas,
)
from tests.support.spark.job_process import ROOT, job_env

pytestmark = [pytest.mark.kafka]

USER = "kcsim-user"
SHADOW = [sys.executable, "-m", "streaming.cli", "shadow", "--metadata-log"]


class ScramKafka(NamedTuple):
    bootstrap: str
    config: Path  # the client.properties `kafka-local start --sasl-scram` wrote
    wrong: Path  # the same with a wrong password
    password: str
    data_dir: Path  # the broker's: its __cluster_metadata-0 is under data/


@pytest.fixture(scope="module")
def scram_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramKafka]:
    base = tmp_path_factory.mktemp("scram")
    password = f"pw-{uuid.uuid4().hex}"
    credentials = base / "credentials"
    credentials.write_text(f"{USER}:{password}\n")
    data_dir = base / "kafka"
    started = kcsim(
        "kafka-local", "start", "--dir", str(data_dir), "--sasl-scram", str(credentials)
    )
    assert started.returncode == 0, started.stderr
    assert password not in started.stdout + started.stderr
    bootstrap = started.stdout.splitlines()[-1]
    try:
        config = kafka_local.client_properties(data_dir)
        wrong = base / "wrong.properties"
        wrong.write_text(config.read_text().replace(password, "not-the-password"))
        yield ScramKafka(bootstrap, config, wrong, password, data_dir)
    finally:
        kafka_local.stop(data_dir)


def read_topic(kafka: ScramKafka, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=kafka.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        **KafkaClientConfig.load(kafka.config).kafka_python(),
    )
    try:
        return [record.value for record in consumer]
    finally:
        consumer.close()


def test_scram_broker_refuses_plaintext_and_the_credentials_never_reach_ps(
    scram_kafka: ScramKafka,
) -> None:
    cmdlines = [p.read_bytes() for p in Path("/proc").glob("[0-9]*/cmdline") if p.exists()]
    assert not [c for c in cmdlines if scram_kafka.password.encode() in c]
    no_config = kcsim(
        "produce", "--bootstrap", scram_kafka.bootstrap, "--topic", "nope",
        "--scenario", str(CORPUS), "--quiet", timeout=REFUSED_WITHIN_S,
    )  # fmt: skip
    assert no_config.returncode == 1
    assert "cannot reach" in no_config.stderr


def test_producer_authenticates_and_a_wrong_password_fails_fast(
    scram_kafka: ScramKafka, tmp_path: Path
) -> None:
    topic = f"sec-produce-{uuid.uuid4().hex[:8]}"
    produced = kcsim(
        "produce", "--bootstrap", scram_kafka.bootstrap, "--topic", topic,
        "--scenario", str(CORPUS), "--quiet", "--kafka-config", str(scram_kafka.config),
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    lines = [record.value for record in scenario_records(CORPUS)]
    assert read_topic(scram_kafka, topic) == lines

    started = time.monotonic()
    refused = kcsim(
        "produce", "--bootstrap", scram_kafka.bootstrap, "--topic", topic,
        "--scenario", str(CORPUS), "--quiet", "--kafka-config", str(scram_kafka.wrong),
        timeout=REFUSED_WITHIN_S,
    )  # fmt: skip
    assert time.monotonic() - started < REFUSED_WITHIN_S
    assert refused.returncode == 1
    assert "refused the SASL credentials" in refused.stderr, refused.stderr
    assert len(read_topic(scram_kafka, topic)) == len(lines)  # nothing more was produced
    for out in (produced, refused):
        assert scram_kafka.password not in out.stdout + out.stderr


@pytest.mark.spark
def test_job_source_and_sink_authenticate_and_no_file_holds_the_secret(
    scram_kafka: ScramKafka, tmp_path: Path
) -> None:
    events, requests = (f"sec-{name}-{uuid.uuid4().hex[:8]}" for name in ("events", "requests"))
    produced = kcsim(
        "produce", "--bootstrap", scram_kafka.bootstrap, "--topic", events,
        "--scenario", str(CORPUS), "--quiet", "--kafka-config", str(scram_kafka.config),
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    written = tmp_path / "written"
    event_log = written / "event-log"
    event_log.mkdir(parents=True)
    ran = kcsim(
        "run", "--source", f"kafka:{scram_kafka.bootstrap}/{events}",
        "--sink", f"kafka:{scram_kafka.bootstrap}/{requests}",
        "--lake", str(written / "lake"), "--once",
        "--kafka-config", str(scram_kafka.config),
        "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={event_log}",
        # plain text (Spark 4 compresses it by default), so the search below can see it
        "--conf", "spark.eventLog.compress=false",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert " events," in ran.stderr
    # the job read every event (source) and produced its requests (sink)
    values = read_topic(scram_kafka, requests)
    records = [json.loads(v) for v in values]
    assert records and {r["type"] for r in records} >= {"UpdateMetadata", "LeaderAndIsr"}
    # the event log was written and covers the Kafka source's reads; no JAAS line is in it
    # unredacted (the source's plan names its scan, not its options; the sink produces
    # from the driver with kafka-python, outside Spark)
    logs = [p for p in event_log.rglob("*") if p.is_file()]
    log_text = b"".join(p.read_bytes() for p in logs)
    assert KAFKA_SCAN in log_text
    assert unredacted_jaas(log_text) == []
    assert files_holding(written, scram_kafka.password) == []
    assert scram_kafka.password not in ran.stdout + ran.stderr
    assert [v for v in values if scram_kafka.password.encode() in v] == []


@pytest.mark.spark
def test_job_with_a_wrong_password_stops_with_a_clear_error(
    scram_kafka: ScramKafka, tmp_path: Path
) -> None:
    ran = kcsim(
        "run", "--source", f"kafka:{scram_kafka.bootstrap}/sec-wrong-{uuid.uuid4().hex[:8]}",
        "--lake", str(tmp_path / "lake"), "--once", "--kafka-config", str(scram_kafka.wrong),
    )  # fmt: skip
    # refused before Spark starts: one line and status 2, as for any source it cannot use
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert "kcsim run: --source: cannot reach Kafka at" in ran.stderr
    assert "refused the SASL credentials" in ran.stderr
    assert not (tmp_path / "lake").exists()
    assert scram_kafka.password not in ran.stdout + ran.stderr


# ------------------------------------------------------------------ shadow (ZooKeeper)


def copy_tree(source: KazooClient, target: KazooClient, path: str, to: str, acl: list) -> None:
    """`path` and everything under it, as `to`, every copied znode with `acl` only."""
    if not source.exists(path):
        return
    data, _ = source.get(path)
    target.create(to, data, acl=acl, makepath=False)
    for child in source.get_children(path):
        copy_tree(source, target, f"{path}/{child}", f"{to}/{child}", acl)


@pytest.mark.zk
def test_shadow_reads_a_digest_protected_chroot_only_with_credentials(
    zk_cluster, scram_kafka: ScramKafka, tmp_path: Path
) -> None:
    zk_password = f"zk-{uuid.uuid4().hex}"
    chroot = f"/secure-{uuid.uuid4().hex[:8]}"
    acl = [make_digest_acl("kcsim", zk_password, all=True)]
    owner = KazooClient(hosts=zk_cluster.zookeeper, auth_data=[("digest", f"kcsim:{zk_password}")])
    owner.start(timeout=30)
    try:
        # a copy of the real cluster's znodes under a chroot only "kcsim" may read
        owner.create(chroot, b"", acl=acl)
        for path in ("/brokers", "/controller", "/controller_epoch", "/config", "/admin"):
            copy_tree(zk_cluster.client, owner, path, chroot + path, acl)
        zk_config = tmp_path / "zookeeper.properties"
        zk_config.write_text(f"digest=kcsim:{zk_password}\n")
        topic = f"sec-shadow-{uuid.uuid4().hex[:8]}"
        address = zk_cluster.zookeeper + chroot

        def shadow(*extra: str) -> subprocess.CompletedProcess[str]:
            return kcsim(
                "shadow", "--zookeeper", address, "--out", f"kafka:{scram_kafka.bootstrap}/{topic}",
                "--kafka-config", str(scram_kafka.config), "--cluster", "secure", "--once",
                "--state", str(tmp_path / "state.json"), *extra, timeout=REFUSED_WITHIN_S * 2,
            )  # fmt: skip

        refused = shadow()
        assert refused.returncode == 1
        assert "refused to let the shadow read the cluster's znodes (NoAuth" in refused.stderr
        assert "give credentials with --zookeeper-config" in refused.stderr
        with pytest.raises(NoAuthError):  # the ACLs hold: this is not a shadow defect
            zk_cluster.client.get_children(f"{chroot}/brokers/ids")

        read = shadow("--zookeeper-config", str(zk_config))
        assert read.returncode == 0, read.stderr
        values = read_topic(scram_kafka, topic)
        out = [json.loads(v) for v in values]
        started = {e["broker"] for e in out if e["type"] == "broker_startup"}
        assert started == set(zk_cluster.registered())
        assert all(e["cluster"] == "secure" for e in out)
        for result in (refused, read):
            for secret in (zk_password, scram_kafka.password):
                assert secret not in result.stdout + result.stderr
        assert files_holding(tmp_path, zk_password) == [zk_config]
        assert files_holding(tmp_path, scram_kafka.password) == []
        assert [v for v in values if zk_password.encode() in v] == []
    finally:
        owner.delete(chroot, recursive=True)
        owner.stop()
        owner.close()


# ------------------------------------------------------------------ shadow (KRaft)


def test_kraft_shadow_asks_the_quorum_with_credentials_and_keeps_them_out(
    scram_kafka: ScramKafka, tmp_path: Path
) -> None:
    """`kcsim shadow --metadata-log` asks a SCRAM broker for the quorum's high watermark
    with `--command-config`; a wrong password is said (and retried), never shown; no file
    the shadow wrote holds the password."""
    log = scram_kafka.data_dir / "data" / "__cluster_metadata-0"
    out = tmp_path / "out"
    ran = kcsim(
        "shadow", "--metadata-log", str(log), "--bootstrap-server", scram_kafka.bootstrap,
        "--command-config", str(scram_kafka.config), "--out", f"file:{out}", "--once",
        timeout=REFUSED_WITHIN_S,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    written = [json.loads(x) for p in sorted(out.glob("shadow-*.jsonl")) for x in p.open()]
    assert [e["type"] for e in written][:1] == ["controller_failover"]
    assert any(e["type"] == "broker_registration" for e in written)
    assert files_holding(out, scram_kafka.password) == []
    assert scram_kafka.password not in ran.stdout + ran.stderr
    refused = subprocess.Popen(
        [*SHADOW, str(log), "--bootstrap-server", scram_kafka.bootstrap, "--command-config",
         str(scram_kafka.wrong), "--out", f"file:{tmp_path / 'refused'}"],
        stderr=subprocess.PIPE, text=True, env=job_env(), cwd=ROOT,
    )  # fmt: skip
    assert refused.stderr is not None
    try:
        start = refused.stderr.readline()  # what it follows and where it writes
        first = refused.stderr.readline()
    finally:
        refused.terminate()
        rest = refused.communicate(timeout=REFUSED_WITHIN_S)[1]
    assert start.startswith("kcsim shadow: following the KRaft metadata log")
    assert "did not answer (the broker refused the SASL credentials" in first
    assert "retrying in 1 s" in first
    assert scram_kafka.password not in start + first + rest
    assert "not-the-password" not in start + first + rest
