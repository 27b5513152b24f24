"""`kcsim import zk-logs` on committed logs: real Kafka 3.7.1 logs of the local ZooKeeper-mode
cluster (tests/data/zk-logs-3.7.1: create, kill and restart, controlled shutdown, preferred
election, reassignment, new partitions, deletion, failover: SPEC §8-§16, §7.2), and
snippets written by hand in the 2.4 and 3.9 formats; then bad input."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streaming.cli import main

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).parents[2] / "data"


def run(source: Path, out: Path, *extra: str) -> tuple[int, list[dict[str, Any]]]:
    status = main(["import", "zk-logs", str(source), "--out", str(out), "--cluster", "c", *extra])
    events = [json.loads(x) for x in out.read_text().splitlines()] if out.is_file() else []
    return status, events


def final_states(events: list[dict[str, Any]]) -> dict[tuple[str, int], tuple]:
    states = {}
    for event in events:
        for row in event.get("observed", {}).get("partitions", []):
            key = (row["topic"], row["partition"])
            states[key] = (
                row["leader"],
                row["leader_epoch"],
                row["isr"],
                row.get("partition_epoch"),
            )
    return states


def test_real_371_logs_give_every_event_in_order(tmp_path, capsys):
    status, events = run(DATA / "zk-logs-3.7.1", tmp_path / "events.jsonl")
    assert status == 0, capsys.readouterr().err
    types = [e["type"] for e in events]
    assert types == [
        "broker_startup", "controller_failover", "broker_startup", "broker_startup",
        "topic_creation", "topic_creation",
        "broker_failure", "broker_startup", "isr_change", "isr_change",
        "controlled_shutdown", "broker_failure", "broker_startup", "isr_change",
        "leader_election", "partition_reassignment", "isr_change", "partition_creation",
        "isr_change", "topic_deletion", "stop_replica_response", "stop_replica_response",
        "stop_replica_response", "isr_change", "controller_failover", "broker_startup",
    ]  # fmt: skip
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["event_id"] == "c:log:1:0" and events[-1]["event_id"] == "c:log:2:2"
    kept, gone = "imp-35fda284f5", "impdel-62ebd1adc4"
    # SPEC §9: the killed broker 1 leaves the ISRs; its partitions get new leaders
    failure = events[6]
    assert failure["broker"] == 1
    rows = {(r["topic"], r["partition"]): r for r in failure["observed"]["partitions"]}
    assert (rows[kept, 0]["leader"], rows[kept, 0]["isr"]) == (2, [2])
    assert rows[gone, 0]["isr"] == [2, 3]
    # the AlterPartitions after its restart (DEBUG in Kafka) are inferred from version gaps
    assert events[8] | {"event_id": 0, "seq": 0, "ts": 0} == {
        "type": "isr_change", "cluster": "c", "event_id": 0, "seq": 0, "ts": 0,
        "topic": gone, "partition": 0, "isr": [2, 3, 1], "leader_epoch": 1, "partition_epoch": 1,
    }  # fmt: skip
    shutdown = events[10]
    assert (shutdown["broker"], shutdown["broker_epoch"]) == (2, 64)
    assert events[11]["observed"] == {"partitions": []}  # nothing left to write (SPEC §9.2)
    election = events[14]
    assert election["partitions"] == [{"topic": kept, "partition": 1}]
    assert election["observed"]["partitions"][0]["leader"] == 2
    assert events[15]["replicas"] == [3, 1]
    done = events[16]["observed"]["partitions"][0]
    assert (done["leader"], done["isr"], done["replicas"], done["partition_epoch"]) == (
        3, [3, 1], [3, 1], 7,
    )  # fmt: skip
    assert events[17]["assignment"] == {"3": [2, 1]}
    assert events[22]["observed"] == {"partitions": [], "deleted_topics": [gone]}
    failover = events[24]
    assert (failover["controller"], failover["controller_epoch"]) == (2, 2)
    assert failover["failed_brokers"] == [3]
    assert final_states(events)[kept, 2] == (1, 3, [1], 4)


def test_24_format_snippet(tmp_path):
    status, events = run(DATA / "zk-logs-2.4", tmp_path / "e.jsonl")
    assert status == 0
    assert [e["type"] for e in events] == [
        "broker_startup", "broker_startup", "controller_failover", "topic_creation",
        "controlled_shutdown", "broker_failure",
    ]  # fmt: skip
    assert events[3]["assignment"] == {"0": [1, 2]}
    assert events[4]["broker_epoch"] == 101
    [row] = events[4]["observed"]["partitions"]
    assert (row["leader"], row["leader_epoch"], row["isr"], row["partition_epoch"]) == (
        1,
        1,
        [1],
        1,
    )
    assert events[2]["event_id"] == "c:log:5:2"


def test_39_format_snippet(tmp_path):
    status, events = run(DATA / "zk-logs-3.9", tmp_path / "e.jsonl")
    assert status == 0
    types = [e["type"] for e in events]
    assert types[-5:] == [
        "topic_creation", "topic_config_change", "isr_change", "auto_rebalance_check",
        "leader_election",
    ]  # fmt: skip
    assert events[-4]["configs"] == {"unclean.leader.election.enable": "true"}
    assert events[-3]["partition_epoch"] == 0  # a gap of 0 -> 3: an unseen write first
    [row] = events[-2]["observed"]["partitions"]
    assert (row["topic"], row["partition"], row["partition_epoch"]) == ("orders", 1, 3)
    assert events[-1]["election"] == "unclean"
    [row] = events[-1]["observed"]["partitions"]
    assert (row["leader"], row["isr"]) == (2, [2])


def test_interleaved_brokers_and_rotated_files_merge_by_time(tmp_path):
    logs = tmp_path / "logs"
    src = (DATA / "zk-logs-3.9/controller.log").read_text().splitlines(keepends=True)
    (logs / "b2").mkdir(parents=True)
    # the same controller's log rotated hourly: the older part under a dated name
    (logs / "b2/controller.log.2024-11-01-07").write_text("".join(src[:4]))
    (logs / "b2/controller.log").write_text("".join(src[4:]))
    shutil.copy(DATA / "zk-logs-3.9/state-change.log", logs / "b2/state-change.log")
    (logs / "b1").mkdir()  # another broker that never was the controller
    (logs / "b1/controller.log").write_text(
        "[2024-11-01 08:00:02,500] INFO [Controller id=1] Resigned"
        " (kafka.controller.KafkaController)\n"
    )
    status, events = run(logs, tmp_path / "e.jsonl")
    _, expected = run(DATA / "zk-logs-3.9", tmp_path / "x.jsonl")
    assert status == 0 and events == expected


def test_empty_directory_is_an_error_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "logs").mkdir()
    status, _ = run(tmp_path / "logs", tmp_path / "e.jsonl")
    assert status == 2 and not (tmp_path / "e.jsonl").exists()
    assert "no controller.log* or state-change.log* file under" in capsys.readouterr().err


def test_truncated_tail_imports_everything_before_it(tmp_path, capsys):
    logs = tmp_path / "logs"
    shutil.copytree(DATA / "zk-logs-3.9", logs)
    path = logs / "controller.log"
    path.write_text(path.read_text() + "[2024-11-01 08:00:05,000] INFO [Contr")
    status, events = run(logs, tmp_path / "e.jsonl")
    _, expected = run(DATA / "zk-logs-3.9", tmp_path / "x.jsonl")
    assert status == 1 and events == expected
    assert f"{path}:9: truncated last line" in capsys.readouterr().err


def test_corrupt_and_unknown_lines_are_reported_with_file_and_line(tmp_path, capsys):
    logs = tmp_path / "logs"
    shutil.copytree(DATA / "zk-logs-3.9", logs)
    path = logs / "controller.log"
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(3, b"\x00\xff\xfe garbage\n")
    lines.insert(5, b"[2024-11-01 08:00:01,500] INFO [Controller id=2] Something new (x)\n")
    path.write_bytes(b"".join(lines))
    status, events = run(logs, tmp_path / "e.jsonl")
    _, expected = run(DATA / "zk-logs-3.9", tmp_path / "x.jsonl")
    err = capsys.readouterr().err
    assert status == 1 and events == expected
    assert f"{path}:4: not a log line" in err
    assert f"{path}:6: not understood: [Controller id=2] Something new" in err
    assert "2 lines not understood or bad" in err


def test_unsupported_log_is_named(tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "controller.log").write_text(
        "[2024-11-01 08:00:00,000] INFO [QuorumController id=1] Becoming the active controller"
        " at epoch 1 (org.apache.kafka.controller.QuorumController)\n"
    )
    status, events = run(logs, tmp_path / "e.jsonl")
    assert status == 1 and events == []
    err = capsys.readouterr().err
    assert f"{logs / 'controller.log'}:1: unsupported log: a KRaft controller's log" in err


def test_custom_pattern(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("controller.log", "state-change.log"):
        lines = (DATA / "zk-logs-3.9" / name).read_text().splitlines()
        out = []
        for line in lines:  # "[%d] %p %m (%c)%n" -> "%d{ISO8601} [%t] %-5p %c - %m%n"
            ts, rest = line[1:24], line[26:]
            level, _, rest = rest.partition(" ")
            message, _, logger = rest.rpartition(" (")
            out.append(f"{ts} [main] {level:<5} {logger[:-1]} - {message}")
        (logs / name).write_text("\n".join(out) + "\n")
    status, events = run(logs, tmp_path / "e.jsonl", "--pattern", "%d{ISO8601} [%t] %-5p %c - %m%n")
    _, expected = run(DATA / "zk-logs-3.9", tmp_path / "x.jsonl")
    assert status == 0 and events == expected


def test_directory_output_is_a_run_source_file(tmp_path):
    out = tmp_path / "events"
    out.mkdir()
    status = main(["import", "zk-logs", str(DATA / "zk-logs-2.4"), "--out", str(out)])
    assert status == 0
    [path] = list(out.iterdir())
    assert path.name == f"import-{1:020d}.jsonl"
    assert len(path.read_text().splitlines()) == 6


def test_gzip_rotations_are_read(tmp_path):
    with gzip.open(DATA / "zk-logs-3.7.1/broker-3/controller.log.gz", "rt") as handle:
        assert "successfully elected" in handle.read()


@pytest.mark.parametrize("pattern", ["%m%n", "[%d{HH:mm}] %m%n"])
def test_unusable_pattern_is_a_usage_error(tmp_path, pattern, capsys):
    status = main(
        [
            "import",
            "zk-logs",
            str(DATA / "zk-logs-2.4"),
            "--out",
            str(tmp_path / "e"),
            "--pattern",
            pattern,
        ]
    )
    assert status == 2 and not (tmp_path / "e").exists()


def test_import_piped_into_replay(tmp_path):
    """`kcsim import zk-logs DIR --out - | kcsim replay - --out TABLES`"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = f"{sys.executable} -m streaming.cli"
    shell = (
        f"{command} import zk-logs {DATA / 'zk-logs-2.4'} --out - --quiet | "
        f"{command} replay - --out {tmp_path / 'tables'} --quiet"
    )
    done = subprocess.run(shell, shell=True, env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # (1: replay rejected an imported event)
    rows = [json.loads(x) for x in (tmp_path / "tables/partition_state.jsonl").open()]
    [row] = rows
    assert (row["topic"], row["leader"], row["isr"]) == ("t", 1, [1])
    sources = [json.loads(x) for x in (tmp_path / "tables/applied_events.jsonl").open()]
    assert len(sources) == 6
    assert list((tmp_path / "tables/rejected_events.jsonl").open()) == []


def test_a_threads_skew_is_not_out_of_order_but_a_step_back_is(tmp_path, capsys):
    # log4j stamps a line before its thread takes the appender's lock: a few ms back is
    # how Kafka 3.7.1's own controller.log looks; seconds back is a file out of order
    logs = tmp_path / "logs"
    shutil.copytree(DATA / "zk-logs-3.9", logs)
    path = logs / "controller.log"
    lines = path.read_bytes().splitlines(keepends=True)
    skewed = b"[2024-11-01 07:59:59,999] WARN [RequestSendThread controllerId=2] skew (x)\n"
    back = b"[2024-11-01 07:00:00,000] WARN [RequestSendThread controllerId=2] back (x)\n"
    first_ts = lines[0][1:24]
    assert first_ts == b"2024-11-01 08:00:00,000", first_ts  # the snippet's first stamp
    path.write_bytes(b"".join([lines[0], skewed, *lines[1:]]))
    status, events = run(logs, tmp_path / "e.jsonl")
    _, expected = run(DATA / "zk-logs-3.9", tmp_path / "x.jsonl")
    assert "earlier than the line before" not in capsys.readouterr().err
    assert events == expected
    path.write_bytes(b"".join([lines[0], back, *lines[1:]]))
    status, _ = run(logs, tmp_path / "f.jsonl")
    assert status == 1
    assert f"{path}:2: earlier than the line before" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("source", "flag"), [("zk-logs", ["--from-snapshot"]), ("kraft-log", ["--pattern", "%m%n"])]
)
def test_an_option_of_the_other_importer_is_a_usage_error(tmp_path, source, flag, capsys):
    """Each importer is a subcommand with its own options: the other's is unknown."""
    with pytest.raises(SystemExit) as stopped:
        main(["import", source, str(DATA / "zk-logs-2.4"), "--out", str(tmp_path / "e"), *flag])
    assert stopped.value.code == 2 and not (tmp_path / "e").exists()
    assert f"unrecognized arguments: {flag[0]}" in capsys.readouterr().err


def test_producer_id_blocks_are_skipped_and_counted_not_problems(tmp_path, capsys):
    """Kafka 3.7's controller logs the producer id blocks it hands out (any cluster with
    idempotent producers): a known kind with no event, counted, status 0."""
    logs = tmp_path / "logs"
    shutil.copytree(DATA / "zk-logs-3.7.1", logs)
    packed = logs / "broker-3" / "controller.log.gz"
    lines = gzip.decompress(packed.read_bytes()).splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b"Starting topic deletion" in line)
    lines[at:at] = [
        b"[2026-11-24 16:06:29,300] INFO [Controller id=3] Acquired new producerId block "
        b"ProducerIdsBlock(assignedBrokerId=1, firstProducerId=0, size=1000) by writing to Zk "
        b"with path version 1 (kafka.controller.KafkaController)\n",
        b"[2026-11-24 16:06:29,301] INFO [Controller id=3] Read current producerId block "
        b"ProducerIdsBlock(assignedBrokerId=1, firstProducerId=0, size=1000), Zk path version 1 "
        b"(kafka.controller.KafkaController)\n",
    ]
    packed.write_bytes(gzip.compress(b"".join(lines)))
    status, events = run(logs, tmp_path / "e.jsonl")
    _, expected = run(DATA / "zk-logs-3.7.1", tmp_path / "x.jsonl")
    err = capsys.readouterr().err
    assert status == 0, err
    assert events == expected
    assert "0 lines not understood or bad" in err
    assert (
        "kcsim import: 2 lines of a known kind that is no controller event skipped "
        "(producer id block: 2)"
    ) in err


def test_the_import_names_partitions_whose_last_state_may_be_superseded(tmp_path, capsys):
    """The log ends with broker 1 back (SPEC §7.2's failover, then its startup): the
    AlterPartitions that add it back to its partitions' ISRs are DEBUG lines, so the
    import's last observed states of those partitions may be older than the znodes'."""
    status, events = run(DATA / "zk-logs-3.7.1", tmp_path / "e.jsonl")
    assert status == 0
    err = capsys.readouterr().err.splitlines()
    kept = "imp-35fda284f5"
    assert err[-1] == (
        f"kcsim import: 3 partition(s) end with a live replica outside the ISR ({kept}-0, "
        f"{kept}-1, {kept}-2): the AlterPartition adding it back is logged at DEBUG only, so "
        "their last observed state may be superseded (README: what the logs cannot say)"
    )
    final = final_states(events)
    assert all(len(final[kept, p][2]) < 3 for p in range(3))
