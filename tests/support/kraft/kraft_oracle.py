"""Runs the KRaft oracle (Kafka 4.1.1's own control managers, `tests/oracle/src`) on event
sequences and returns its per-event outputs, parsed.

One JVM processes every sequence given to one call: each sequence is a header line
`{"sequence": id, "settings": {...}}` followed by its events, and the oracle answers with
the header, one line per event and an `{"end": id}` line. The harness is test code: it
never runs in a user's path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streaming.jars import JarsMissingError, kraft_oracle_build

MAIN_CLASS = "org.apache.kafka.controller.KcsimOracle"
JVM_OPTIONS = ("-Xmx256m", "-Xss8m", "-XX:+UseSerialGC")


@dataclass(frozen=True, slots=True)
class OracleSequence:
    """One cluster's events, with the kcsim settings both sides run it under."""

    name: str
    events: tuple[Mapping[str, Any], ...]
    settings: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class OracleStep:
    """What Kafka's managers did for one event (`error` set when the harness itself failed).

    partitions / brokers: the whole state after the event, sorted by (topic, partition) and
    by broker id (the oracle prints only what changed; the driver carries the rest on)."""

    index: int
    records: tuple[Mapping[str, Any], ...]
    results: tuple[Mapping[str, Any], ...]
    partitions: tuple[Mapping[str, Any], ...]
    brokers: tuple[Mapping[str, Any], ...]
    error: str | None = None


class OracleUnavailableError(RuntimeError):
    """The oracle is not built, or java is missing."""


def classpath() -> str:
    try:
        return kraft_oracle_build().classpath()
    except JarsMissingError as error:
        raise OracleUnavailableError(
            f"{error} (python -m streaming.jars --only kraft-oracle)"
        ) from error


def java_binary() -> str:
    java = shutil.which("java")
    if java is None:
        raise OracleUnavailableError("`java` (17+) is not on PATH")
    return java


def encode(sequences: Iterable[OracleSequence]) -> Iterable[str]:
    for sequence in sequences:
        yield json.dumps({"sequence": sequence.name, "settings": dict(sequence.settings)})
        for event in sequence.events:
            yield json.dumps(dict(event))


def iter_oracle(sequences: Sequence[OracleSequence]) -> Iterator[tuple[str, list[OracleStep]]]:
    """Every sequence through one JVM, each sequence's steps yielded as soon as the oracle
    has finished it (so 10,000 sequences never sit in memory at once)."""
    with tempfile.TemporaryDirectory(prefix="kcsim-oracle-") as tmp:
        source = Path(tmp) / "events.jsonl"
        with source.open("w", encoding="utf-8") as handle:
            for line in encode(sequences):
                handle.write(line + "\n")
        errors = Path(tmp) / "stderr.txt"
        with source.open("rb") as stdin, errors.open("wb") as stderr:
            process = subprocess.Popen(
                [java_binary(), *JVM_OPTIONS, "-cp", classpath(), MAIN_CLASS],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, "JAVA_TOOL_OPTIONS": ""},
            )
            assert process.stdout is not None
            try:
                pending: list[str] = []
                for raw in process.stdout:
                    line = raw.decode("utf-8")
                    pending.append(line)
                    if line.startswith('{"end"'):
                        yield from parse_output(pending).items()
                        pending = []
            finally:
                process.stdout.close()
                code = process.wait()
        if code != 0:
            raise OracleUnavailableError(
                f"the oracle exited {code}: {errors.read_text(errors='replace')[-4000:]}"
            )


def run_oracle(sequences: Sequence[OracleSequence]) -> dict[str, list[OracleStep]]:
    """Every sequence through one JVM; the steps of each, by sequence name."""
    with tempfile.TemporaryDirectory(prefix="kcsim-oracle-") as tmp:
        source = Path(tmp) / "events.jsonl"
        with source.open("w", encoding="utf-8") as handle:
            for line in encode(sequences):
                handle.write(line + "\n")
        with source.open("rb") as stdin:
            done = subprocess.run(
                [java_binary(), *JVM_OPTIONS, "-cp", classpath(), MAIN_CLASS],
                stdin=stdin,
                capture_output=True,
                check=False,
                env={**os.environ, "JAVA_TOOL_OPTIONS": ""},
            )
    if done.returncode != 0:
        raise OracleUnavailableError(
            f"the oracle exited {done.returncode}: {done.stderr.decode(errors='replace')[-4000:]}"
        )
    return parse_output(done.stdout.decode("utf-8").splitlines())


def parse_output(lines: Iterable[str]) -> dict[str, list[OracleStep]]:
    out: dict[str, list[OracleStep]] = {}
    current: list[OracleStep] | None = None
    partitions: dict[str, Mapping[str, Any]] = {}
    brokers: dict[str, Mapping[str, Any]] = {}
    for line in lines:
        if not line.strip():
            continue
        node = json.loads(line)
        if "sequence" in node:
            current = out.setdefault(str(node["sequence"]), [])
            partitions, brokers = {}, {}
        elif "end" in node:
            current = None
        elif current is not None:
            for p in node.get("partitions", ()):
                partitions[f"{p['topic']}/{p['partition']}"] = p
            for key in node.get("removed_partitions", ()):
                partitions.pop(key, None)
            for b in node.get("brokers", ()):
                brokers[str(b["broker"])] = b
            for key in node.get("removed_brokers", ()):
                brokers.pop(key, None)
            current.append(
                OracleStep(
                    index=int(node["i"]),
                    records=tuple(node.get("records", ())),
                    results=tuple(node.get("results", ())),
                    partitions=tuple(
                        sorted(partitions.values(), key=lambda p: (p["topic"], p["partition"]))
                    ),
                    brokers=tuple(sorted(brokers.values(), key=lambda b: b["broker"])),
                    error=node.get("error"),
                )
            )
    return out


def run_one(
    events: Sequence[Mapping[str, Any]], settings: Mapping[str, str] | None = None
) -> list[OracleStep]:
    """One sequence alone (a fresh JVM): for hand-written checks."""
    sequence = OracleSequence("one", tuple(events), dict(settings or {}))
    return run_oracle([sequence])["one"]
