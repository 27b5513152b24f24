"""Shared by the security tests: the kcsim CLI as a subprocess, and scans of files and
logs for secrets that must not be there."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.spark.job_process import ROOT, job_env

CORPUS = ROOT / "tests" / "data" / "corpus"


# a refused client must fail within this (bounded bootstrap, no endless reconnects)
REFUSED_WITHIN_S = 60


JOB_TIMEOUT_S = 420


def kcsim(*args: str, timeout: float = JOB_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming.cli", *args],
        capture_output=True, text=True, env=job_env(), cwd=ROOT, timeout=timeout, check=False,
    )  # fmt: skip


def files_holding(root: Path, secret: str) -> list[Path]:
    needle = secret.encode()
    return [p for p in sorted(root.rglob("*")) if p.is_file() and needle in p.read_bytes()]


# Spark's Kafka source in a plan of the event log
KAFKA_SCAN = b"org.apache.spark.sql.kafka010.KafkaSourceProvider$KafkaScan"


def unredacted_jaas(log: bytes) -> list[bytes]:
    """The JAAS options in a Spark event log that Spark's redaction did not mask."""
    return re.findall(rb"kafka\.sasl\.jaas\.config=(?!\*+\(redacted\)).{0,20}", log)
