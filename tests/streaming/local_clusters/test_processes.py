"""The local clusters' shared process helpers (`streaming.local_clusters.processes`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.local_clusters import processes
from streaming.local_clusters.processes import JavaMissingError, LocalClusterError


def test_a_missing_java_is_its_own_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # a directory without java
    with pytest.raises(JavaMissingError, match="`java` \\(17\\+\\) is not on PATH") as raised:
        processes.java()
    # the commands that catch a local cluster's errors catch this one too
    assert isinstance(raised.value, LocalClusterError)


def test_java_home_wins_over_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert processes.java() == str(java)


def test_properties_files_round_trip_through_the_one_java_parser(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    written = {
        "security.protocol": "SASL_SSL",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="kcsim" password="pw9Xq+/=";',
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "ssl.truststore.location": "/tmp/kcsim tls/ca.p12",
    }
    processes.write_properties(path, written)
    assert processes.read_properties_file(path) == written
    # comments as Java skips them, and a missing file reads as empty
    path.write_text("# a comment\n! another\nbroker = 9092\n")
    assert processes.read_properties_file(path) == {"broker": "9092"}
    assert processes.read_properties_file(tmp_path / "absent.properties") == {}
