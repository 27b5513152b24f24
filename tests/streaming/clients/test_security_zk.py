"""A real secured ZooKeeper for the shadow: `kcsim kafka-local start
--zk --zk-sasl FILE --zk-tls --zk-chroot /PATH` runs ZooKeeper 3.8.4 requiring SASL
DIGEST-MD5 of every session on a TLS-only port, and a Kafka 3.7.1 broker that reaches it
through the same security (JAAS `Client` section, Netty TLS client) with its znodes under
the chroot. `kcsim shadow` records the cluster's snapshot and a topic creation through
`--zookeeper-config`, writing to a TLS Kafka (`--kafka-config`, `kafka-local --tls`); a
wrong password, no SASL, or another CA gives a clear error within a deadline. No secret
(ZooKeeper password, keystore passwords) is on a command line, in a log, or in anything
the shadow wrote or printed."""

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
from kafka.admin import KafkaAdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import SessionClosedRequireSaslError
from kazoo.security import Permissions

from streaming.clients.kafka_config import KafkaClientConfig
from streaming.clients.zookeeper_config import ZooKeeperClientConfig
from streaming.local_clusters import zk_cluster
from tests.support.clusters.security import REFUSED_WITHIN_S, files_holding, kcsim
from tests.support.clusters.tls_kafka import TlsKafka, tls_kafka  # noqa: F401
from tests.support.spark.job_process import ROOT, job_env

pytestmark = [pytest.mark.kafka, pytest.mark.zk]

WAIT_S = 90.0


class SecuredZk(NamedTuple):
    zookeeper: str  # 127.0.0.1:PORT/chroot
    bootstrap: str  # the broker's plaintext listener
    config: Path  # DIR/zookeeper-client.properties
    password: str  # the SASL user's
    layout: zk_cluster.Layout


@pytest.fixture(scope="module")
def secured_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredZk]:
    base = tmp_path_factory.mktemp("zksec")
    password = f"zk-{uuid.uuid4().hex}"
    credentials = base / "credentials"
    credentials.write_text(f"kcsim:{password}\n")
    data_dir = base / "cluster"
    chroot = f"/kafka-{uuid.uuid4().hex[:8]}"
    started = kcsim(
        "kafka-local", "start", "--zk", "--brokers", "1", "--dir", str(data_dir),
        "--zk-sasl", str(credentials), "--zk-tls", "--zk-chroot", chroot,
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        assert password not in started.stdout + started.stderr
        zookeeper, bootstrap = started.stdout.splitlines()[-2:]
        assert zookeeper.endswith(chroot)
        layout = zk_cluster.load_layout(data_dir)
        yield SecuredZk(zookeeper, bootstrap, layout.zookeeper_client_config, password, layout)
    finally:
        zk_cluster.stop(data_dir)


def secured_client(zk: SecuredZk, hosts: str) -> KazooClient:
    args = ZooKeeperClientConfig.load(zk.config).kazoo_args()
    client = KazooClient(hosts=hosts, **args)
    client.start(timeout=30)
    return client


def shadow(zk: SecuredZk, config: Path | None, *extra: str) -> subprocess.CompletedProcess[str]:
    given = () if config is None else ("--zookeeper-config", str(config))
    return kcsim(
        "shadow", "--zookeeper", zk.zookeeper, *given, "--cluster", "secured", "--once",
        *extra, timeout=REFUSED_WITHIN_S * 2,
    )  # fmt: skip


def test_zookeeper_requires_sasl_over_tls_and_the_broker_uses_the_chroot(
    secured_zk: SecuredZk,
) -> None:
    root = secured_zk.zookeeper.rsplit("/", 1)[0]  # without the chroot
    chroot = "/" + secured_zk.zookeeper.rsplit("/", 1)[1]
    client = secured_client(secured_zk, root)
    try:
        assert client.get_children(f"{chroot}/brokers/ids") == ["1"]
        assert not client.exists("/brokers")  # the broker wrote under the chroot only
        # zookeeper.set.acl: the brokers' identity may change what they wrote, others read
        acls, _ = client.get_acls(f"{chroot}/brokers/ids/1")
        assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {
            ("sasl", "kcsim", Permissions.ALL),
            ("world", "anyone", Permissions.READ),
        }
    finally:
        client.stop()
        client.close()
    # TLS with the right CA but no SASL: ZooKeeper closes the session at its first request
    tls_only = {
        k: v
        for k, v in ZooKeeperClientConfig.load(secured_zk.config).kazoo_args().items()
        if k != "sasl_options"
    }
    anonymous = KazooClient(hosts=root, **tls_only)
    try:
        anonymous.start(timeout=30)
        with pytest.raises(SessionClosedRequireSaslError):
            anonymous.get_children("/")
    finally:
        anonymous.stop()
        anonymous.close()
    props = secured_zk.config.read_text()
    assert "sasl.mechanism=DIGEST-MD5\n" in props and "ssl=true\n" in props
    layout = secured_zk.layout
    secrets = (secured_zk.password, layout.tls.password())
    cmdlines = [p.read_bytes() for p in Path("/proc").glob("[0-9]*/cmdline") if p.exists()]
    for secret in secrets:
        assert not [c for c in cmdlines if secret.encode() in c]
    # the password is in the JAAS files and the client properties only (all mode 0600)
    holding = files_holding(layout.root, secured_zk.password)
    assert {p.relative_to(layout.root).as_posix() for p in holding} == {
        "zookeeper/jaas.conf",
        "broker-jaas.conf",
        "zookeeper-client.properties",
    }
    assert all(p.stat().st_mode & 0o077 == 0 for p in holding)
    assert files_holding(layout.root, layout.tls.password()) == [layout.tls.password_file]


def test_shadow_records_a_secured_cluster_and_a_topic_creation_into_tls_kafka(
    secured_zk: SecuredZk,
    tls_kafka: TlsKafka,  # noqa: F811
    tmp_path: Path,
) -> None:
    topic_out = f"shadow-out-{uuid.uuid4().hex[:8]}"
    state = tmp_path / "state.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "shadow", "--zookeeper", secured_zk.zookeeper,
         "--zookeeper-config", str(secured_zk.config), "--cluster", "secured",
         "--out", f"kafka:{tls_kafka.bootstrap}/{topic_out}",
         "--kafka-config", str(tls_kafka.config), "--state", str(state), "--settle-ms", "300"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job_env(), cwd=ROOT,
    )  # fmt: skip
    consumer = KafkaConsumer(
        topic_out,
        bootstrap_servers=tls_kafka.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
        **KafkaClientConfig.load(tls_kafka.config).kafka_python(),
    )
    events: list[dict] = []

    def read_until(done, what: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not done():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, f"no {what} from the shadow in {WAIT_S}s"
            events.extend(json.loads(record.value) for record in consumer)

    try:
        read_until(lambda: any(e["type"] == "controller_failover" for e in events), "snapshot")
        assert {e["broker"] for e in events if e["type"] == "broker_startup"} == {1}
        created = f"secured-{uuid.uuid4().hex[:8]}"
        admin = KafkaAdminClient(bootstrap_servers=secured_zk.bootstrap)
        try:
            admin.create_topics([NewTopic(created, num_partitions=2, replication_factor=1)])
        finally:
            admin.close()
        read_until(
            lambda: any(e.get("topic") == created for e in events if e["type"] == "topic_creation"),
            "topic_creation",
        )
        creation = next(e for e in events if e.get("topic") == created)
        assert creation["assignment"] == {"0": [1], "1": [1]}
    finally:
        consumer.close()
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    secrets = (secured_zk.password, secured_zk.layout.tls.password(), tls_kafka.keystore_password)
    for secret in secrets:
        assert secret not in out + err
        assert secret not in json.dumps(events)
        assert files_holding(tmp_path, secret) == []


@pytest.mark.parametrize("case", ["wrong password", "no sasl", "another CA"])
def test_shadow_refused_by_the_secured_zookeeper_says_why(
    secured_zk: SecuredZk, tmp_path: Path, case: str
) -> None:
    props = secured_zk.config.read_text()
    config = tmp_path / "zookeeper.properties"
    if case == "wrong password":
        config.write_text(props.replace(secured_zk.password, "not-the-password"))
        expected = "the SASL user and password of --zookeeper-config were refused"
    elif case == "no sasl":
        config.write_text("".join(line + "\n" for line in props.splitlines() if "sasl" not in line))
        expected = "it requires SASL authentication: give sasl.* in --zookeeper-config"
    else:
        config = other_ca_config_zk(props, tmp_path)
        expected = "its certificate was not verified"
    started = time.monotonic()
    refused = shadow(secured_zk, config, "--out", f"file:{tmp_path / 'out'}")
    assert time.monotonic() - started < REFUSED_WITHIN_S
    assert refused.returncode == 1
    assert expected in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert secured_zk.password not in refused.stdout + refused.stderr
    assert not list((tmp_path / "out").glob("*.jsonl"))


def other_ca_config_zk(props: str, base: Path) -> Path:
    from streaming.local_clusters.tls import ensure_tls

    other = ensure_tls(base / "other-ca")
    config = base / "zookeeper.properties"
    config.write_text(
        "".join(
            f"ssl.ca={other.ca}\n" if line.startswith("ssl.ca=") else line + "\n"
            for line in props.splitlines()
        )
    )
    return config
