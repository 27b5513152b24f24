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
