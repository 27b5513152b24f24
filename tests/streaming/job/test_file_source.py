"""The job's file source (`streaming.job.file_source`) on its own, without a query: which
files each batch takes, whatever their modification times, across restarts, and a late
file. (`test_spark_job.py` runs it under Spark against replay.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles

from streaming.job.file_source import NameOrderReader


def write_files(directory: Path, names: list[str], mtimes: list[float]) -> None:
    directory.mkdir(exist_ok=True)
    start = time.time() - 1000
    for name, offset in zip(names, mtimes, strict=True):
        path = directory / name
        path.write_text(f'{{"type":"broker_startup","broker":{len(name)}}}\n')
        os.utime(path, (start + offset, start + offset))


def batch_files(reader: NameOrderReader, start: dict, end: dict) -> list[tuple[str, str | None]]:
    return [
        (name, late_after)
        for partition in reader.partitions(start, end)
        for _, name, late_after in partition.files  # type: ignore[attr-defined]
    ]


def batches(reader: NameOrderReader, start: dict, limit) -> tuple[list[list], dict]:
    """Batches until the source has nothing new: each batch's (name, late_after)."""
    taken = []
    while (end := reader.latestOffset(start, limit)) != start:
        taken.append(batch_files(reader, start, end))
        start = end
    return taken, start


def test_files_come_in_name_order_whatever_their_mtimes(tmp_path: Path) -> None:
    events = tmp_path / "events"
    # newest first, and two sharing a time
    write_files(events, ["c.jsonl", "a.jsonl", "d.jsonl", "b.jsonl"], [0, 3, 1, 1])
    write_files(events, ["_hidden.jsonl", "e.jsonl._COPYING_"], [0, 0])
    reader = NameOrderReader(str(events), str(tmp_path / "checkpoint"), 1)
    assert reader.getDefaultReadLimit() == ReadMaxFiles(1)
    taken, end = batches(reader, reader.initialOffset(), ReadMaxFiles(1))
    assert taken == [[("a.jsonl", None)], [("b.jsonl", None)], [("c.jsonl", None)],
                     [("d.jsonl", None)]]  # fmt: skip
    assert end == {"files": 4}
    [batch] = reader.read(reader.partitions({"files": 0}, {"files": 1})[0])
    assert batch.to_pylist() == [
        {"admitted": 0, "name": "a.jsonl", "late_after": None,
         "content": b'{"type":"broker_startup","broker":7}\n'}
    ]  # fmt: skip


def test_a_restart_goes_on_with_the_next_name_and_replans_a_batch_alike(tmp_path: Path) -> None:
    events, checkpoint = tmp_path / "events", str(tmp_path / "checkpoint")
    write_files(events, ["b.jsonl", "a.jsonl", "c.jsonl"], [0, 1, 2])
    first = NameOrderReader(str(events), checkpoint, None)
    end = first.latestOffset({"files": 0}, ReadMaxFiles(2))
    assert batch_files(first, {"files": 0}, end) == [("a.jsonl", None), ("b.jsonl", None)]

    write_files(events, ["ab.jsonl", "d.jsonl"], [5, 4])  # while the query was down
    again = NameOrderReader(str(events), checkpoint, None)
    # the batch the checkpoint had planned (not committed): the same files
    assert batch_files(again, {"files": 0}, end) == [("a.jsonl", None), ("b.jsonl", None)]
    taken, _ = batches(again, end, ReadAllAvailable())
    # ab.jsonl sorts before b.jsonl, which was taken: late, rejected by the job
    assert taken == [[("ab.jsonl", "b.jsonl"), ("c.jsonl", None), ("d.jsonl", None)]]


def test_a_file_admitted_but_not_yet_in_a_batch_is_taken_first_after_a_crash(
    tmp_path: Path,
) -> None:
    """latestOffset writes what it admits before Spark records the offset: a crash between
    the two leaves admitted files that the next start takes before any newer name."""
    events, checkpoint = tmp_path / "events", str(tmp_path / "checkpoint")
    write_files(events, ["b.jsonl"], [0])
    NameOrderReader(str(events), checkpoint, None).latestOffset({"files": 0}, ReadMaxFiles(1))
    write_files(events, ["a.jsonl"], [1])  # arrives after b was admitted: late
    again = NameOrderReader(str(events), checkpoint, None)
    taken, _ = batches(again, {"files": 0}, ReadMaxFiles(1))
    assert taken == [[("b.jsonl", None)], [("a.jsonl", "b.jsonl")]]


def test_available_now_stops_at_the_files_present_at_its_start(tmp_path: Path) -> None:
    events = tmp_path / "events"
    write_files(events, ["a.jsonl", "b.jsonl"], [0, 0])
    reader = NameOrderReader(str(events), str(tmp_path / "checkpoint"), None)
    reader.prepareForTriggerAvailableNow()
    end = reader.latestOffset({"files": 0}, ReadMaxFiles(1))
    write_files(events, ["c.jsonl"], [1])
    taken, _ = batches(reader, end, ReadMaxFiles(1))
    assert taken == [[("b.jsonl", None)]]


def test_a_checkpoint_of_sparks_binary_file_source_goes_on_from_its_files(tmp_path: Path) -> None:
    """A query checkpointed by Spark's own file source (kcsim before this source) resumes:
    the files its batches took count as admitted, in their batches' order."""
    events, checkpoint = tmp_path / "events", tmp_path / "checkpoint"
    write_files(events, ["a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl"], [0, 1, 2, 3])
    log = checkpoint / "sources" / "0"
    log.mkdir(parents=True)
    for batch, name in enumerate(["b.jsonl", "a.jsonl"]):  # mtime order, not name order
        entry = {"path": (events / name).as_uri(), "timestamp": 0, "batchId": batch}
        (log / str(batch)).write_text("v1\n" + json.dumps(entry))
    reader = NameOrderReader(str(events), str(checkpoint), None)
    start = {"logOffset": 1}
    assert batch_files(reader, {"logOffset": 0}, start) == [("a.jsonl", None)]
    taken, end = batches(reader, start, ReadAllAvailable())
    assert taken == [[("c.jsonl", None), ("d.jsonl", None)]]
    assert end == {"files": 4}
