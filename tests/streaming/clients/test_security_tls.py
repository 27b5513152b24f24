"""Kafka over TLS for real: `kcsim kafka-local start --tls` makes a
CA and the broker's certificate (keytool) and listens with SSL, or SASL_SSL with
`--sasl-scram`. One `client.properties` (a PEM truststore) serves Spark's Java client (the
job's source) and kafka-python (`kcsim produce`, the job's sink); a client trusting another CA
fails within a deadline with a clear error. The broker's keystore password is on no
command line, in no client file, and in no file a job wrote or its output."""

from __future__ import annotations

import json
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from kafka import KafkaConsumer

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
from tests.support.clusters.tls_kafka import TlsKafka, start_broker

pytestmark = [pytest.mark.kafka]


def read_topic(bootstrap: str, config: Path, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        **KafkaClientConfig.load(config).kafka_python(),
    )
    try:
        return [record.value for record in consumer]
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, config: Path | None, timeout: float = 300):
    extra = () if config is None else ("--kafka-config", str(config))
    return kcsim(
        "produce", "--bootstrap", bootstrap, "--topic", topic, "--scenario", str(CORPUS),
        "--quiet", *extra, timeout=timeout,
    )  # fmt: skip


class JobRun(NamedTuple):
    written: Path  # every file the job wrote is under it
    event_log: bytes  # Spark's event log
    output: str  # the job's stdout and stderr


def job_through(bootstrap: str, config: Path, prefix: str, tmp_path: Path) -> JobRun:
    """The corpus produced, then `kcsim run --once` from that topic with the request sink on
    another, both through `config`, Spark's event log on. The sink's records are read back
    and checked."""
    events, requests = (f"{prefix}-{name}-{uuid.uuid4().hex[:8]}" for name in ("ev", "req"))
    assert produce(bootstrap, events, config).returncode == 0
    written = tmp_path / "written"
    event_log = written / "event-log"
    event_log.mkdir(parents=True)
    ran = kcsim(
        "run", "--source", f"kafka:{bootstrap}/{events}",
        "--sink", f"kafka:{bootstrap}/{requests}",
        "--lake", str(written / "lake"), "--once", "--kafka-config", str(config),
        "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={event_log}",
        "--conf", "spark.eventLog.compress=false",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    records = [json.loads(v) for v in read_topic(bootstrap, config, requests)]
    assert records and {r["type"] for r in records} >= {"UpdateMetadata", "LeaderAndIsr"}
    log = b"".join(p.read_bytes() for p in event_log.rglob("*") if p.is_file())
    return JobRun(written, log, ran.stdout + ran.stderr)


def test_tls_broker_files_and_a_plaintext_client_is_refused(tls_kafka: TlsKafka) -> None:
    props = tls_kafka.config.read_text()
    assert "security.protocol=SSL\n" in props and "ssl.truststore.type=PEM\n" in props
    assert stat.S_IMODE(tls_kafka.config.stat().st_mode) == 0o600
    tls = kafka_local.tls_dir(tls_kafka.data_dir)
    assert stat.S_IMODE((tls / "store.password").stat().st_mode) == 0o600
    assert {p.name for p in tls.iterdir()} == {"ca.pem", "server.p12", "store.password"}
    assert tls_kafka.keystore_password not in props
    cmdlines = [p.read_bytes() for p in Path("/proc").glob("[0-9]*/cmdline") if p.exists()]
    assert not [c for c in cmdlines if tls_kafka.keystore_password.encode() in c]
    # Kafka prints password-typed configs as [hidden]: its log holds no secret
    kafka_log = (tls_kafka.data_dir / "kafka.log").read_bytes()
    assert b"ssl.keystore.password = [hidden]" in kafka_log
    assert tls_kafka.keystore_password.encode() not in kafka_log
    refused = produce(tls_kafka.bootstrap, "nope", None, timeout=REFUSED_WITHIN_S)
    assert refused.returncode == 1
    assert "cannot reach" in refused.stderr


def test_producer_over_tls_and_a_client_trusting_another_ca_fails_fast(
    tls_kafka: TlsKafka,
) -> None:
    topic = f"tls-produce-{uuid.uuid4().hex[:8]}"
    produced = produce(tls_kafka.bootstrap, topic, tls_kafka.config)
    assert produced.returncode == 0, produced.stderr
    lines = [record.value for record in scenario_records(CORPUS)]
    assert read_topic(tls_kafka.bootstrap, tls_kafka.config, topic) == lines

    started = time.monotonic()
    refused = produce(tls_kafka.bootstrap, topic, tls_kafka.wrong_ca, timeout=REFUSED_WITHIN_S)
    assert time.monotonic() - started < REFUSED_WITHIN_S
    assert refused.returncode == 1
    assert "the broker's certificate was not verified" in refused.stderr, refused.stderr
    assert len(read_topic(tls_kafka.bootstrap, tls_kafka.config, topic)) == len(lines)


@pytest.mark.spark
def test_job_source_and_sink_over_tls_and_no_file_holds_the_keystore_password(
    tls_kafka: TlsKafka, tmp_path: Path
) -> None:
    run = job_through(tls_kafka.bootstrap, tls_kafka.config, "tls", tmp_path)
    # Spark's Java client read the TLS broker (its scan is in the event log) with the PEM
    # truststore of the config, and kafka-python produced the sink's records (job_through)
    assert KAFKA_SCAN in run.event_log
    assert files_holding(run.written, tls_kafka.keystore_password) == []
    assert tls_kafka.keystore_password not in run.output


@pytest.mark.spark
def test_job_trusting_another_ca_stops_with_a_clear_error(
    tls_kafka: TlsKafka, tmp_path: Path
) -> None:
    started = time.monotonic()
    ran = kcsim(
        "run", "--source", f"kafka:{tls_kafka.bootstrap}/tls-wrong-{uuid.uuid4().hex[:8]}",
        "--lake", str(tmp_path / "lake"), "--once", "--kafka-config", str(tls_kafka.wrong_ca),
    )  # fmt: skip
    # refused before Spark starts: one line and status 2, as for any source it cannot use
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert "kcsim run: --source: cannot reach Kafka at" in ran.stderr
    assert "TLS handshake" in ran.stderr
    assert not (tmp_path / "lake").exists()
    assert time.monotonic() - started < 300


class SaslSslKafka(NamedTuple):
    bootstrap: str
    config: Path
    password: str  # the SCRAM user's
    keystore_password: str
    credentials: Path  # the --sasl-scram file
    base: Path


@pytest.fixture(scope="module")
def sasl_ssl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSslKafka]:
    base = tmp_path_factory.mktemp("sasl-ssl")
    password = f"pw-{uuid.uuid4().hex}"
    credentials = base / "credentials"
    credentials.write_text(f"tls-user:{password}\n")
    bootstrap, data_dir = start_broker(base, "--sasl-scram", str(credentials))
    try:
        keystore_password = (kafka_local.tls_dir(data_dir) / "store.password").read_text().strip()
        config = kafka_local.client_properties(data_dir)
        yield SaslSslKafka(bootstrap, config, password, keystore_password, credentials, base)
    finally:
        kafka_local.stop(data_dir)


def test_sasl_ssl_broker_authenticates_over_tls(sasl_ssl_kafka: SaslSslKafka) -> None:
    kafka = sasl_ssl_kafka
    props = kafka.config.read_text()
    assert "security.protocol=SASL_SSL\n" in props and "ssl.truststore.type=PEM\n" in props
    topic = f"sasl-ssl-{uuid.uuid4().hex[:8]}"
    produced = produce(kafka.bootstrap, topic, kafka.config)
    assert produced.returncode == 0, produced.stderr
    corpus = len(list(scenario_records(CORPUS)))
    assert len(read_topic(kafka.bootstrap, kafka.config, topic)) == corpus
    wrong = kafka.base / "wrong.properties"
    wrong.write_text(props.replace(kafka.password, "not-the-password"))
    refused = produce(kafka.bootstrap, topic, wrong, timeout=REFUSED_WITHIN_S)
    assert refused.returncode == 1
    assert "refused the SASL credentials" in refused.stderr, refused.stderr
    data_dir = kafka.config.parent
    for secret in (kafka.password, kafka.keystore_password):
        for out in (produced, refused):
            assert secret not in out.stdout + out.stderr
        assert secret.encode() not in (data_dir / "kafka.log").read_bytes()


@pytest.mark.spark
def test_job_over_sasl_ssl_and_no_file_holds_either_secret(
    sasl_ssl_kafka: SaslSslKafka, tmp_path: Path
) -> None:
    kafka = sasl_ssl_kafka
    run = job_through(kafka.bootstrap, kafka.config, "ss", tmp_path)
    assert KAFKA_SCAN in run.event_log
    assert unredacted_jaas(run.event_log) == []
    for secret in (kafka.password, kafka.keystore_password):
        assert files_holding(run.written, secret) == []
        assert secret not in run.output


def test_sasl_ssl_restart_keeps_the_ca_and_needs_the_user_again(
    sasl_ssl_kafka: SaslSslKafka,
) -> None:
    kafka = sasl_ssl_kafka
    data_dir = kafka.config.parent
    ca = (kafka_local.tls_dir(data_dir) / "ca.pem").read_bytes()
    kafka_local.stop(data_dir)
    again = kcsim("kafka-local", "start", "--dir", str(data_dir), "--tls")
    assert again.returncode == 1
    assert "started with --sasl-scram: give it again" in again.stderr
    restarted, _ = start_broker(kafka.base, "--sasl-scram", str(kafka.credentials))
    # the clients' file is still valid: same CA, same user
    assert (kafka_local.tls_dir(data_dir) / "ca.pem").read_bytes() == ca
    topic = f"sasl-ssl-again-{uuid.uuid4().hex[:8]}"
    assert produce(restarted, topic, kafka.config).returncode == 0
    assert len(read_topic(restarted, kafka.config, topic)) == len(list(scenario_records(CORPUS)))
