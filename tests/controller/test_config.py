"""Simulation settings (CONTRACT §1, settings table): Kafka's property names, read as
Kafka reads them: a Java .properties file (`--config`) then `--set key=value` overrides;
an unknown key or a value of the wrong type is an error at start-up naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.config import ConfigError, Settings, read_properties


def test_defaults_are_kafkas() -> None:
    assert Settings.load().as_properties() == {
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.per.broker.percentage": "10",
        "unclean.leader.election.enable": "false",
        "delete.topic.enable": "true",
        "kcsim.simulate.brokers": "false",
        "kcsim.engine": "zk",
        "eligible.leader.replicas.version": "1",
        "metadata.version": "4.1-IV1",
        "min.insync.replicas": "1",
    }


def test_properties_file_as_java_reads_it(tmp_path: Path) -> None:
    """Properties.load(InputStream): ISO 8859-1 bytes, comments, `=`/`:`/blank
    separators, continuation lines and \\uXXXX escapes."""
    config = tmp_path / "kcsim.properties"
    config.write_bytes(
        b"# caf\xe9: a Latin-1 comment\n"
        b"! another comment\n"
        b"delete.topic.enable = fal\\u0073e\n"
        b"auto.leader.rebalance.enable:false\n"
        b"leader.imbalance.per.broker.percentage   2\\\n"
        b"    5\n"
        b"unclean.leader.election.enable=TRUE  \n"
    )
    settings = Settings.load(config)
    assert settings == Settings(
        auto_leader_rebalance_enable=False,
        leader_imbalance_per_broker_percentage=25,
        unclean_leader_election_enable=True,
        delete_topic_enable=False,
    )


def test_set_overrides_the_file(tmp_path: Path) -> None:
    config = tmp_path / "kcsim.properties"
    config.write_text("delete.topic.enable=false\n")
    settings = Settings.load(config, ["delete.topic.enable=true", "kcsim.simulate.brokers=true"])
    assert settings.delete_topic_enable and settings.simulate_brokers


def test_escapes_and_separators() -> None:
    text = "a\\=b=c\\td\nkey\\ with\\ blanks : v\\\\\nempty\n\\u00e9t\\u00e9=\\u2603\n"
    assert read_properties(text) == {
        "a=b": "c\td",
        "key with blanks": "v\\",
        "empty": "",
        "\u00e9t\u00e9": "\u2603",
    }
    with pytest.raises(ConfigError, match="Malformed"):
        read_properties("k=\\u12g4\n")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("150", 150), ("-1", -1), (" +7 ", 7), ("\uff15", 5), ("2147483647", 2**31 - 1)],
)
def test_imbalance_percentage_is_any_java_int(value: str, expected: int) -> None:
    """KafkaConfig defines it as INT without a validator: Integer.parseInt of the trimmed
    text (which takes any Unicode decimal digit), no range beyond int32."""
    settings = Settings.load(overrides=[f"leader.imbalance.per.broker.percentage={value}"])
    assert settings.leader_imbalance_per_broker_percentage == expected


@pytest.mark.parametrize("value", ["1_0", "1.5", "ten", "", "2147483648", "0x10"])
def test_imbalance_percentage_refuses_what_java_refuses(value: str) -> None:
    with pytest.raises(ConfigError) as error:
        Settings.load(overrides=[f"leader.imbalance.per.broker.percentage={value}"])
    assert "for configuration leader.imbalance.per.broker.percentage: Not a number of type INT" in (
        str(error.value)
    )


def test_unknown_key_and_bad_boolean_name_the_key() -> None:
    with pytest.raises(ConfigError, match=re.escape("'no.such.key'")):
        Settings.load(overrides=["no.such.key=1"])
    message = "delete.topic.enable: Expected value to be either true or false"
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.load(overrides=["delete.topic.enable=yes"])


# ---- the KRaft engine's settings (CONTRACT §5, SPEC-KRAFT §1.2-§1.3) ----------------------


def test_engine_and_kraft_settings() -> None:
    settings = Settings.load(
        overrides=[
            "kcsim.engine=kraft",
            "eligible.leader.replicas.version=0",
            "metadata.version=4.0-IV3",
            "min.insync.replicas=2",
        ]
    )
    assert settings.kraft
    assert settings.eligible_leader_replicas_version == 0
    assert settings.metadata_version == "4.0-IV3"
    assert settings.min_insync_replicas == 2
    assert not Settings.load().kraft


def test_metadata_version_release_alone_is_its_latest_and_sets_the_elr_default() -> None:
    """A release names its latest metadata version (MetadataVersion.fromVersionString); a
    cluster formatted before 4.1-IV0 has ELR off unless told otherwise."""

    def elr(version: str) -> int:
        return Settings.load(
            overrides=[f"metadata.version={version}"]
        ).eligible_leader_replicas_version

    assert Settings.load(overrides=["metadata.version=3.7"]).metadata_version == "3.7-IV4"
    assert (elr("3.7"), elr("4.0-IV1"), elr("4.1-IV0"), elr("4.1")) == (0, 0, 1, 1)
    on = Settings.load(overrides=["metadata.version=4.0-IV1", "eligible.leader.replicas.version=1"])
    assert on.eligible_leader_replicas_version == 1


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("kcsim.engine=zookeeper", "kcsim.engine: expected one of 'zk' or 'kraft'"),
        ("kcsim.engine=KRaft", "kcsim.engine"),
        ("eligible.leader.replicas.version=2", "eligible.leader.replicas.version: Kafka 4.1.1"),
        ("eligible.leader.replicas.version=-1", "eligible.leader.replicas.version"),
        ("eligible.leader.replicas.version=on", "eligible.leader.replicas.version: Not a number"),
        ("metadata.version=3.3-IV2", "metadata.version: below 3.3-IV3"),
        ("metadata.version=4.2-IV0", "metadata.version: an unstable version"),
        ("metadata.version=4.1-IV9", "metadata.version: not a metadata version"),
        ("metadata.version=latest", "metadata.version: not a metadata version"),
        ("min.insync.replicas=0", "min.insync.replicas: Value must be at least 1"),
        ("min.insync.replicas=two", "min.insync.replicas: Not a number of type INT"),
    ],
)
def test_bad_kraft_settings_name_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Settings.load(overrides=[override])


def test_elr_on_needs_metadata_version_4_0_iv1() -> None:
    """Feature.validateVersion: eligible.leader.replicas.version 1 depends on
    metadata.version 4.0-IV1 (SPEC-KRAFT §1.2)."""
    with pytest.raises(ConfigError, match=r"eligible\.leader\.replicas\.version.*4\.0-IV1"):
        Settings.load(overrides=["metadata.version=3.9", "eligible.leader.replicas.version=1"])


def test_engine_option_is_the_setting() -> None:
    from streaming.cli import build_parser, load_settings

    argv = ["replay", "events", "--out", "x", "--engine", "kraft"]
    parser, _ = build_parser(argv)
    args = parser.parse_args(argv)
    assert load_settings(args).engine == "kraft"
    argv = ["whatif", "events", "--engine", "kraft", "--vs", "kcsim.engine=zk"]
    parser, _ = build_parser(argv)
    assert load_settings(parser.parse_args(argv)).kraft
