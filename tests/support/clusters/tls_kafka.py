"""A local Kafka broker started with --tls for the whole module (fixture `tls_kafka`), and
a client configuration that trusts another CA."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from streaming.local_clusters import kafka_local
from streaming.local_clusters.tls import ensure_tls
from tests.support.clusters.security import (
    kcsim,
)


class TlsKafka(NamedTuple):
    bootstrap: str
    config: Path  # the client.properties `kafka-local start --tls` wrote
    wrong_ca: Path  # the same, trusting another CA
    keystore_password: str
    data_dir: Path


def start_broker(base: Path, *extra: str) -> tuple[str, Path]:
    data_dir = base / "kafka"
    started = kcsim("kafka-local", "start", "--dir", str(data_dir), "--tls", *extra)
    assert started.returncode == 0, started.stderr
    return started.stdout.splitlines()[-1], data_dir


def other_ca_config(config: Path, base: Path) -> Path:
    other = ensure_tls(base / "other-ca")
    wrong = base / "wrong-ca.properties"
    lines = config.read_text().splitlines()
    wrong.write_text(
        "".join(
            f"ssl.truststore.location={other.ca}\n"
            if line.startswith("ssl.truststore.location=")
            else line + "\n"
            for line in lines
        )
    )
    return wrong


@pytest.fixture(scope="module")
def tls_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsKafka]:
    base = tmp_path_factory.mktemp("tls")
    bootstrap, data_dir = start_broker(base)
    try:
        config = kafka_local.client_properties(data_dir)
        password = kafka_local.tls_dir(data_dir).joinpath("store.password").read_text().strip()
        yield TlsKafka(bootstrap, config, other_ca_config(config, base), password, data_dir)
    finally:
        kafka_local.stop(data_dir)
