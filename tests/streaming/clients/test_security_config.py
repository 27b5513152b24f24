"""`--kafka-config` and `--zookeeper-config` parsing: what each
property becomes for kafka-python, Spark and kazoo, and that no error or repr shows a
value. The same configs against real brokers: tests/streaming/clients/test_security_kafka.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.clients.kafka_config import KafkaClientConfig, KafkaConfigError
from streaming.clients.zookeeper_config import ZooKeeperClientConfig, ZooKeeperConfigError
from streaming.lake.spark_session import REDACTION_REGEX

SECRET = "Pa55-w0rd:with=odd;chars"
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="alice" password="{SECRET}";'
)


def write(tmp_path: Path, text: str, name: str = "client.properties") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_scram_properties_become_kafka_python_arguments(tmp_path: Path) -> None:
    # a JAAS line continued over two lines, as Kafka's docs write it
    path = write(
        tmp_path,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="alice" \\\n    password="{SECRET}";\n',
    )
    config = KafkaClientConfig.load(path)
    args = config.kafka_python()
    assert args["security_protocol"] == "SASL_PLAINTEXT"
    assert args["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (args["sasl_plain_username"], args["sasl_plain_password"]) == ("alice", SECRET)
    assert args["bootstrap_timeout_ms"] <= 30_000  # a refused client fails, it does not hang
    assert SECRET not in repr(config)
    options = config.spark_options()
    assert options["kafka.security.protocol"] == "SASL_PLAINTEXT"
    assert options["kafka.sasl.jaas.config"].endswith(f'password="{SECRET}";')


def test_plain_jaas_with_escaped_quote_and_unquoted_values() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=bob "
        'password="a\\"b";'
    )
    config = KafkaClientConfig(
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}
    )
    args = config.kafka_python()
    assert (args["sasl_plain_username"], args["sasl_plain_password"]) == ("bob", 'a"b')
    assert args["ssl_check_hostname"] is True


def test_pem_ssl_properties() -> None:
    config = KafkaClientConfig(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/client.pem",
            "ssl.key.password": SECRET,
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    args = config.kafka_python()
    assert args["ssl_cafile"] == "/ca.pem"
    assert args["ssl_certfile"] == args["ssl_keyfile"] == "/client.pem"
    assert args["ssl_password"] == SECRET
    assert args["ssl_check_hostname"] is False


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"sasl.login.callback.handler.class": SECRET}, "'sasl.login.callback.handler.class'"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
             "sasl.jaas.config": JAAS},
            "sasl.mechanism",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": JAAS},
            "PlainLoginModule",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": JAAS.replace(f'password="{SECRET}"', "")},
            "no password",
        ),
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/t.jks",
             "ssl.truststore.password": SECRET},
            "'ssl.truststore.password'",
        ),
        ({"security.protocol": "SSL", "ssl.truststore.location": "/t.jks"}, "must be PEM"),
        ({"sasl.jaas.config": JAAS}, "need security.protocol SASL_PLAINTEXT"),
        ({"security.protocol": SECRET}, "security.protocol must be one of"),
    ],
)  # fmt: skip
def test_refused_properties_name_the_key_never_the_value(
    tmp_path: Path, props: dict[str, str], named: str
) -> None:
    path = write(tmp_path, "".join(f"{k}={v}\n" for k, v in props.items()))
    with pytest.raises(KafkaConfigError) as refused:
        KafkaClientConfig.load(path)
    assert named in str(refused.value)
    assert SECRET not in str(refused.value)


def test_no_file_is_plaintext() -> None:
    assert KafkaClientConfig.load(None).kafka_python()["security_protocol"] == "PLAINTEXT"
    assert KafkaClientConfig.load(None).spark_options() == {}


def test_zookeeper_digest_sasl_and_tls(tmp_path: Path) -> None:
    digest = ZooKeeperClientConfig.load(write(tmp_path, f"digest=kcsim:{SECRET}\n", "zk"))
    assert digest.kazoo_args() == {"auth_data": [("digest", f"kcsim:{SECRET}")]}
    assert digest.authenticated and SECRET not in repr(digest)
    sasl = ZooKeeperClientConfig(
        {"sasl.mechanism": "digest-md5", "sasl.username": "u", "sasl.password": SECRET}
    )
    assert sasl.kazoo_args() == {
        "sasl_options": {"mechanism": "DIGEST-MD5", "username": "u", "password": SECRET}
    }
    tls = ZooKeeperClientConfig(
        {"ssl": "true", "ssl.ca": "/ca.pem", "ssl.certfile": "/c.pem", "ssl.keyfile": "/k.pem",
         "ssl.verify": "false"}
    )  # fmt: skip
    assert tls.kazoo_args() == {
        "use_ssl": True,
        "verify_certs": False,
        "check_hostname": False,
        "ca": "/ca.pem",
        "certfile": "/c.pem",
        "keyfile": "/k.pem",
    }
    assert ZooKeeperClientConfig.load(None).kazoo_args() == {}


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"password": SECRET}, "'password'"),
        ({"digest": SECRET.replace(":", "")}, "digest must be USER:PASSWORD"),
        ({"sasl.password": SECRET}, "needs sasl.mechanism"),
        ({"sasl.mechanism": "DIGEST-MD5", "sasl.username": "u"}, "needs sasl.password"),
        ({"ssl.ca": "/ca.pem"}, "needs ssl=true"),
        ({"ssl": SECRET}, "ssl must be true or false"),
    ],
)
def test_refused_zookeeper_config_names_the_key(props: dict[str, str], named: str) -> None:
    with pytest.raises(ZooKeeperConfigError) as refused:
        ZooKeeperClientConfig(props).kazoo_args()
    assert named in str(refused.value)
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize(
    "key",
    ["kafka.sasl.jaas.config", "kafka.ssl.key.password", "kafka.ssl.keystore.key",
     "kafka.ssl.truststore.password", "spark.hadoop.fs.s3a.secret.key"],
)  # fmt: skip
def test_redaction_pattern_covers_kafka_secret_options(key: str) -> None:
    import re

    assert re.search(REDACTION_REGEX, key)
    assert not re.search(REDACTION_REGEX, "kafka.bootstrap.servers")


def test_a_java_store_for_kafka_python_says_what_to_give_instead() -> None:
    config = KafkaClientConfig(
        {"security.protocol": "SSL", "ssl.truststore.location": "/t.p12",
         "ssl.truststore.type": "PKCS12"}
    )  # fmt: skip
    with pytest.raises(KafkaConfigError) as refused:
        config.kafka_python()
    assert "give ssl.truststore.type=PEM" in str(refused.value)
    assert "keytool -exportcert -rfc" in str(refused.value)


def test_a_secret_wrapped_onto_its_own_line_is_never_shown_as_a_key(tmp_path: Path) -> None:
    """A continuation line without its trailing backslash makes the next line a key of its
    own: the refusal must not quote it (it is the password)."""
    kafka = write(
        tmp_path,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password=\n    Hunter2-S3cret;\n',
    )
    with pytest.raises(KafkaConfigError, match="no property name, not shown") as error:
        KafkaClientConfig.load(kafka).kafka_python()
    assert "Hunter2" not in str(error.value)
    zookeeper = write(tmp_path, "digest=alice:\nHunter2-S3cret\n", "zk.properties")
    with pytest.raises(ZooKeeperConfigError, match="no property name, not shown") as zk_error:
        ZooKeeperClientConfig.load(zookeeper).kazoo_args()
    assert "Hunter2" not in str(zk_error.value)
    # a misspelt property name is still named, so the user can find it
    typo = write(tmp_path, "security.protocl=SSL\n", "typo.properties")
    expected = r"unsupported key 'security\.protocl' \(did you mean 'security\.protocol'\?\)"
    with pytest.raises(KafkaConfigError, match=expected):
        KafkaClientConfig.load(typo).kafka_python()
