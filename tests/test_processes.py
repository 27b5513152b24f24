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
