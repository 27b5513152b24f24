"""`kcsim import kraft-log` on a committed real metadata log: the run of
tests/streaming/importers/test_import_kraft_log_real.py on the 3-node KRaft cluster (Kafka 4.1.1),
recorded from the quorum leader with a snapshot every 20 s (tests/data/kraft-4.1.1: the segment and
the snapshot at offset 138). Decoded by Kafka's own DumpLogSegments (needs `java` and
`.kafka/libs`). SPEC §8-§15 for the events; bad input as CONTRACT §1 and the README say.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.cli import main
from streaming.importers.kraft_log_decoder import DecoderError, decoder_command, log_files
from streaming.jars import kafka_libs_dir
from tests.support.differential.divergence_classes import EXPECTED_CLASSES, divergence_classes

ROOT = Path(__file__).resolve().parents[3]
LOG = ROOT / "tests/data/kraft-4.1.1/__cluster_metadata-0"
SEGMENT = "00000000000000000000.log"

RUN = [
    "controller_failover",
    # registrations (fenced, with their epochs), each then unfenced by its heartbeat
    "broker_registration", "broker_registration", "broker_unfence", "broker_unfence",
    "broker_registration", "broker_unfence",
    "topic_creation", "topic_creation",
    # the quorum leader (node 1) killed: a new controller, then node 1 fenced and back
    "controller_failover", "broker_failure", "broker_registration", "broker_unfence",
    "isr_change", "isr_change", "isr_change", "isr_change",
    # node 3: controlled shutdown, fenced at its end (then the redundant fence of its
    # SHUTDOWN_NOW, SPEC-KRAFT §8), back
    "controlled_shutdown", "broker_failure", "broker_failure", "broker_registration",
    "broker_unfence",
    "isr_change", "isr_change", "isr_change", "isr_change",
    # two reassignments, the second completed by the AlterPartition adding its new replica
    "partition_reassignment", "partition_reassignment", "isr_change",
    "leader_election",
    # node 3 killed, audit deleted meanwhile (at once, KRaft sends no StopReplica); back
    "broker_failure", "topic_deletion", "broker_registration", "broker_unfence",
    "isr_change", "isr_change", "isr_change",
]  # fmt: skip


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def import_log(directory: Path, out: Path, *extra: str) -> int:
    return main(["import", "kraft-log", str(directory), "--out", str(out), "--quiet", *extra])


def replay(events: Path, out: Path, *settings: str) -> dict[str, list[dict]]:
    assert main(["replay", str(events), "--out", str(out), *settings]) == 0
    return {p.stem: read(p) for p in out.glob("*.jsonl")}


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def test_recorded_run_becomes_its_inputs(tmp_path):
    out = tmp_path / "events.jsonl"
    assert import_log(LOG, out) == 0
    events = read(out)
    assert [e["type"] for e in events] == RUN
    assert [e["seq"] for e in events] == list(range(1, len(RUN) + 1))
    # each failover names the new quorum leader
    assert [e["controller"] for e in of(events, "controller_failover")] == [1, 2]
    # registrations carry the log's epochs and incarnations; a restart after a fence
    # that the log shows as clean names the epoch the broker had
    registrations = of(events, "broker_registration")
    assert [e["broker"] for e in registrations] == [2, 1, 3, 1, 3, 3]
    first = {e["broker"]: e["broker_epoch"] for e in registrations[:3]}
    assert all(e["incarnation"] for e in registrations)
    assert registrations[3]["previous_broker_epoch"] == first[1]
    assert "previous_broker_epoch" not in registrations[0]
    # a registration observes its broker fenced, the unfence live
    assert registrations[1]["observed"] == {"brokers": [{"broker": 1, "status": "fenced"}]}
    unfence = of(events, "broker_unfence")[0]
    assert unfence["observed"]["brokers"] == [{"broker": 1, "status": "live"}]
    creation = of(events, "topic_creation")[0]
    assert creation["assignment"] == {"0": [1, 2, 3], "1": [2, 3, 1], "2": [3, 1, 2]}
    rows = creation["observed"]["partitions"]
    assert [r["leader"] for r in rows] == [1, 2, 3]
    assert all(r["elr"] == [] and r["last_known_elr"] == [] for r in rows)
    assert all("controller_epoch" not in r for r in rows)  # none in KRaft (CONTRACT §5)
    # the controlled shutdown's partition changes, written after its record, are its own
    (shutdown,) = of(events, "controlled_shutdown")
    assert shutdown["broker"] == 3
    assert shutdown["observed"]["brokers"] == [{"broker": 3, "status": "shutting_down"}]
    assert shutdown["observed"]["partitions"]
    assert all(3 not in r["isr"] for r in shutdown["observed"]["partitions"])
    # a reassignment adding a replica, then the AlterPartition that completed it
    adding = of(events, "partition_reassignment")[1]
    completing = events[events.index(adding) + 1]
    assert (adding["topic"], adding["partition"], adding["replicas"]) == ("audit", 0, [1, 3])
    assert adding["observed"]["partitions"][0]["replicas"] == [1, 3, 2]
    assert completing["type"] == "isr_change" and sorted(completing["isr"]) == [1, 2, 3]
    # sent by the leader 2, which the completion removed: the new leader is 1
    assert completing["leader"] == 2
    (row,) = completing["observed"]["partitions"]
    assert (row["replicas"], row["leader"], row["isr"]) == ([1, 3], 1, [1, 3])
    # the deletion observes the topic gone
    (deletion,) = of(events, "topic_deletion")
    assert deletion["observed"] == {"partitions": []}


def test_the_import_replays_exactly_under_kraft(tmp_path):
    """CONTRACT §5: no divergence under the KRaft engine, every event applied."""
    out = tmp_path / "events.jsonl"
    assert import_log(LOG, out) == 0
    tables = replay(out, tmp_path / "tables", "--set", "kcsim.engine=kraft")
    assert tables["rejected_events"] == []
    assert tables["divergences"] == []
    assert sum(1 for e in read(out) if "observed" in e) >= 30


def test_under_zookeeper_mode_the_divergences_are_the_documented_classes(tmp_path):
    out = tmp_path / "events.jsonl"
    assert import_log(LOG, out) == 0
    tables = replay(out, tmp_path / "tables")
    assert tables["rejected_events"] == []
    assert divergence_classes(read(out), tables["divergences"]) == EXPECTED_CLASSES


def test_a_log_starting_at_a_snapshot(tmp_path):
    out = tmp_path / "events.jsonl"
    assert import_log(LOG, out, "--from-snapshot") == 0
    events = read(out)
    kinds = [e["type"] for e in events]
    # at the snapshot node 3 was fenced (killed) and audit deleted: every registration
    # with its epoch, brokers 1 and 2 unfenced, orders with its stored state
    assert kinds[:6] == [
        "broker_registration", "broker_unfence", "broker_registration", "broker_unfence",
        "broker_registration", "cluster_config_change",
    ]  # fmt: skip
    assert [e["broker"] for e in events[:5]] == [1, 1, 2, 2, 3]
    creation, failover = events[6], events[7]
    assert (creation["type"], failover["type"]) == ("topic_creation", "controller_failover")
    assert creation["assignment"] == {"0": [2, 3], "1": [2, 3, 1], "2": [3, 1, 2]}
    observed = failover["observed"]["partitions"]
    assert [(r["topic"], r["partition"]) for r in observed] == [("orders", p) for p in range(3)]
    for row in observed:
        state = creation["state"][str(row["partition"])]
        assert {k: state[k] for k in ("leader", "leader_epoch", "isr", "partition_epoch")} == {
            k: row[k] for k in ("leader", "leader_epoch", "isr", "partition_epoch")
        }
    statuses = {b["broker"]: b["status"] for b in failover["observed"]["brokers"]}
    assert statuses == {1: "live", 2: "live", 3: "fenced"}
    # kcsim loads the snapshot's state as it is, and the log after it replays exactly
    tables = replay(out, tmp_path / "tables", "--set", "kcsim.engine=kraft")
    assert tables["rejected_events"] == [] and tables["divergences"] == []


def test_stdout_feeds_replay(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = (
        f"{sys.executable} -m streaming.cli import kraft-log {LOG} --out - --quiet | "
        f"{sys.executable} -m streaming.cli replay - --out {tmp_path / 'tables'}"
    )
    done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(read(tmp_path / "tables" / "applied_events.jsonl")) == len(RUN)


def test_a_run_source_directory_gets_a_complete_file(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    assert import_log(LOG, source) == 0
    files = sorted(p.name for p in source.iterdir())
    assert files == [f"import-{1:020d}.jsonl"]


def copy_log(tmp_path: Path) -> Path:
    target = tmp_path / "__cluster_metadata-0"
    target.mkdir()
    shutil.copy(LOG / SEGMENT, target / SEGMENT)
    return target


def test_a_truncated_tail_keeps_everything_before_it(tmp_path, capsys):
    log = copy_log(tmp_path)
    size = (log / SEGMENT).stat().st_size
    os.truncate(log / SEGMENT, size - 40)
    out = tmp_path / "events.jsonl"
    assert import_log(log, out) == 1
    error = capsys.readouterr().err
    assert f"{log / SEGMENT}: position " in error and "truncated" in error
    position = int(error.split("position ")[1].split(":")[0])
    assert 0 < position < size - 40
    events = read(out)
    assert [e["type"] for e in events] == RUN[: len(events)] and len(events) >= len(RUN) - 1


def test_a_corrupt_batch_stops_the_import_there(tmp_path, capsys):
    log = copy_log(tmp_path)
    data = bytearray((log / SEGMENT).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (log / SEGMENT).write_bytes(bytes(data))
    out = tmp_path / "events.jsonl"
    assert import_log(log, out) == 1
    error = capsys.readouterr().err
    assert f"{log / SEGMENT}: position " in error
    assert "corrupt batch" in error or "was due" in error or "cannot be decoded" in error
    events = read(out)
    assert 0 < len(events) < len(RUN)
    assert [e["type"] for e in events] == RUN[: len(events)]


def test_an_empty_directory_writes_nothing(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "events.jsonl"
    assert import_log(empty, out) == 2
    error = capsys.readouterr().err
    assert f"{empty}: no segment" in error
    assert not out.exists() and not list(tmp_path.glob(".*tmp"))


def test_an_old_record_format_is_refused(tmp_path, capsys):
    log = tmp_path / "v1"
    generator = ROOT / "benchmarks" / "readers" / "KraftLogGenerator.java"
    subprocess.run(
        ["java", "-Xmx128m", "-cp", str(kafka_libs_dir() / "*"), str(generator), str(log),
         "200", "100", "1"],
        check=True, capture_output=True,
    )  # fmt: skip
    out = tmp_path / "events.jsonl"
    assert import_log(log, out) == 1
    error = capsys.readouterr().err
    assert f"{log / SEGMENT}: position " in error and "record format v1" in error
    # the brokers' batch before it (format v2) is imported
    assert [e["type"] for e in read(out)] == ["broker_registration", "broker_unfence"] * 3


def touch(directory: Path, *names: str) -> None:
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"")


def test_which_files_a_log_directory_gives(tmp_path):
    full = tmp_path / "full"
    touch(full, f"{0:020d}.log", f"{500:020d}.log", f"{300:020d}-{4:010d}.checkpoint")
    files = log_files(full)
    assert (files.snapshot, files.start_offset) == (None, 0)
    assert [p.name for p in files.segments] == [f"{0:020d}.log", f"{500:020d}.log"]
    latest = log_files(full, from_snapshot=True)
    assert latest.snapshot == full / f"{300:020d}-{4:010d}.checkpoint"
    assert latest.start_offset == 300
    # segments that start after 0: the earliest snapshot at or after their base
    cut = tmp_path / "cut"
    touch(cut, f"{200:020d}.log", f"{700:020d}.log", f"{100:020d}-{3:010d}.checkpoint",
          f"{250:020d}-{3:010d}.checkpoint", f"{800:020d}-{5:010d}.checkpoint")  # fmt: skip
    files = log_files(cut)
    assert files.snapshot == cut / f"{250:020d}-{3:010d}.checkpoint"
    assert [p.name for p in files.segments] == [f"{200:020d}.log", f"{700:020d}.log"]
    # the latest snapshot is past every segment's records below 700
    assert [p.name for p in log_files(cut, from_snapshot=True).segments] == [f"{700:020d}.log"]
    uncovered = tmp_path / "uncovered"
    touch(uncovered, f"{200:020d}.log", f"{100:020d}-{3:010d}.checkpoint")
    with pytest.raises(DecoderError, match="no snapshot covers"):
        log_files(uncovered)


def test_a_path_with_a_comma_is_refused_by_name(tmp_path: Path) -> None:
    """Kafka's decoder takes its files as one comma-separated list."""
    with pytest.raises(DecoderError, match=r"a,b\.log"):
        decoder_command([tmp_path / "a,b.log"])
