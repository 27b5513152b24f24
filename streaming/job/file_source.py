"""`kcsim run --source file:DIR`: event files taken in name order, whatever their times.

CONTRACT §1 says files apply in name order. Spark's own file source takes new files in
modification-time order (and, among files of one time, in listing order), so with
`--max-files-per-trigger` or a file copied late, its batches apply them in another order
than `kcsim replay`. This source lists the directory itself: a Python streaming data source
(Spark's `DataSourceStreamReader`) whose offset is the number of files it has *admitted*,
in the order it admitted them:

* each micro-batch admits the new files in name order, at most `--max-files-per-trigger`
  of them (or all, under `--once`: `Trigger.AvailableNow`, up to the files present at
  start), so batches of one file apply them exactly as replay does;
* the admitted names are written to `<checkpoint>/files/` (one small JSON file per
  admission, before Spark records the offset) and read back at restart, so a restarted
  query re-plans a batch with the same files and goes on with the next name;
* a file that appears after a file whose name sorts after it was admitted (a *late*
  file: copied out of order) cannot be applied in name order any more. It is admitted as
  late: every line of it is a `rejected_events` row whose reason names the file admitted
  before it, and nothing of it is applied. The run goes on, as for any bad input
  (CONTRACT §1); to apply its events, give them a name that sorts after the last file.

Which files are event files is replay's rule (`controller.replay.event_files`'
`is_event_file`): the files directly in the directory, not hidden (`.x`, `_x`), not a copy
in progress (`._COPYING_`). Write a file under a hidden name and rename it when complete,
as for Spark's file source.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)

from controller.replay.event_files import check_file_name, is_event_file

FORMAT = "kcsim_files"
# the rows: admission index, file name (relative to the directory), the name of the
# file admitted before it for a late file (null otherwise), the file's bytes
SCHEMA = "admitted long, name string, late_after string, content binary"
# tasks a batch's files are read in (contiguous runs of admitted files): each task is a
# Python worker's round trip, and the files' bytes all go to the driver anyway
_PARTITIONS = 4


@dataclass(frozen=True, slots=True)
class Admitted:
    name: str
    late_after: str | None  # a late file: the highest name admitted before it


class KcsimFiles(DataSource):
    """Options: `path` (the event directory: a local path or file: URI), `checkpoint` (the
    query's checkpoint directory: the admission log is its `files/`),
    `maxFilesPerTrigger`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return NameOrderReader(
            local_path(self.options["path"]),
            local_path(self.options["checkpoint"]),
            int(self.options.get("maxFilesPerTrigger") or 0) or None,
        )


class NameOrderReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, directory: str, checkpoint: str, max_files: int | None) -> None:
        self.directory = directory
        self.checkpoint = checkpoint
        self.log = os.path.join(checkpoint, "files")
        self.max_files = max_files
        self.admitted: list[Admitted] = read_admissions(self.log)
        self.target: set[str] | None = None  # Trigger.AvailableNow: the files present then
        self.migrated: dict[int, int] | None = None  # binaryFile batch -> files up to it

    # --------------------------------------------------------------- offsets
    def initialOffset(self) -> dict:
        return {"files": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_files) if self.max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = set(list_event_files(self.directory))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = self._index(start)
        capacity = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        # admitted by an attempt that never reached a batch: taken first, as admitted
        end = len(self.admitted) if capacity is None else min(len(self.admitted), begin + capacity)
        room = None if capacity is None else capacity - (end - begin)
        if end == len(self.admitted) and (room is None or room > 0):
            end += self._admit(room)
        return {"files": end}

    def _admit(self, room: int | None) -> int:
        """Admit new files, in name order, at most `room`; returns how many."""
        known = {a.name for a in self.admitted}
        present = list_event_files(self.directory)
        new = sorted(n for n in present if n not in known)
        if self.target is not None:
            new = [n for n in new if n in self.target]
        if not new:
            return 0
        high = max((a.name for a in self.admitted if a.late_after is None), default=None)
        late = [Admitted(n, high) for n in new if high is not None and n < high]
        fresh = [Admitted(n, None) for n in new if high is None or n > high]
        taken = (late + fresh)[:room] if room is not None else late + fresh
        write_admission(self.log, len(self.admitted), taken)
        self.admitted.extend(taken)
        return len(taken)

    def _index(self, offset: dict) -> int:
        """An offset as the number of files admitted before it. A checkpoint written with
        Spark's binaryFile source (kcsim before this source) holds that source's offsets
        (`logOffset`, its batch): its log of the files each batch took becomes the start
        of the admission log, so the query goes on with the next file."""
        if "files" in offset:
            return int(offset["files"])
        if "logOffset" not in offset:
            raise RuntimeError(f"the checkpoint's source offset {offset} is not a file offset")
        if self.migrated is None:
            self.migrated = self._migrate()
        batch = int(offset["logOffset"])
        return max((n for b, n in self.migrated.items() if b <= batch), default=0)

    def _migrate(self) -> dict[int, int]:
        by_batch = binary_file_log(os.path.join(self.checkpoint, "sources", "0"))
        names = [name for batch in sorted(by_batch) for name in sorted(by_batch[batch])]
        if not self.admitted:
            write_admission(self.log, 0, [Admitted(n, None) for n in names])
            self.admitted = read_admissions(self.log)
        counts: dict[int, int] = {}
        total = 0
        for batch in sorted(by_batch):
            total += len(by_batch[batch])
            counts[batch] = total
        return counts

    # ---------------------------------------------------------------- batches
    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = self._index(start), self._index(end)
        if stop > len(self.admitted):
            raise RuntimeError(
                f"the admission log {self.log} holds {len(self.admitted)} files, the "
                f"checkpoint's offset {stop}: it was removed or belongs to another checkpoint"
            )
        files = [
            (index, self.admitted[index].name, self.admitted[index].late_after)
            for index in range(begin, stop)
        ]
        size = -(-len(files) // _PARTITIONS)  # (ceiling)
        return [
            FilesPartition(self.directory, files[i : i + size]) for i in range(0, len(files), size)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's files as one Arrow batch (no row-by-row conversion)."""
        assert isinstance(partition, FilesPartition)
        contents = []
        for _, name, _ in partition.files:
            with open(os.path.join(partition.directory, name), "rb") as handle:
                contents.append(handle.read())
        indexes, names, late = zip(*partition.files, strict=True)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(indexes, pa.int64()),
                pa.array(names, pa.string()),
                pa.array(late, pa.string()),
                pa.array(contents, pa.binary()),
            ],
            names=["admitted", "name", "late_after", "content"],
        )


class FilesPartition(InputPartition):
    def __init__(self, directory: str, files: list[tuple[int, str, str | None]]) -> None:
        self.directory = directory
        self.files = files


# ------------------------------------------------------------------- files


def local_path(path: str) -> str:
    """An absolute local path from a plain path (relative or absolute) or a file: URI
    (`file:DIR`, `file:./DIR`, `file:/abs`, `file:///abs`)."""
    if is_remote(path):
        raise ValueError(f"expected a local path, got {path!r}")
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return os.path.abspath(unquote(parsed.path))
    return os.path.abspath(path)


def is_remote(path: str) -> bool:
    """A URI of another file system than the local one (s3a://, hdfs://, ...)."""
    scheme = urlparse(path).scheme
    return len(scheme) > 1 and scheme != "file"


def lake_path(path: str) -> str:
    """What Spark and Delta are given for a path a user typed: an absolute local path for a
    local one (a relative `lake` would be read as a table name), a remote URI as it is."""
    return path.rstrip("/") if is_remote(path) else local_path(path)


def list_event_files(directory: str) -> list[str]:
    """The event files directly in `directory` (replay's rule), refusing a name that is
    not UTF-8 as replay does."""
    names = [e.name for e in os.scandir(directory) if e.is_file() and is_event_file(e.name)]
    for name in names:
        check_file_name(name)
    return names


_LOG_SUFFIX = ".json"


def binary_file_log(directory: str) -> dict[int, set[str]]:
    """The file names each batch took, from the log Spark's file source keeps in a
    checkpoint (`sources/0/<batch>` and its `<batch>.compact` files: a version line, then
    one JSON object per file with its `path` and `batchId`)."""
    by_batch: dict[int, set[str]] = {}
    if not os.path.isdir(directory):
        return by_batch
    for entry in os.listdir(directory):
        if not entry.removesuffix(".compact").isdigit():
            continue
        with open(os.path.join(directory, entry), encoding="utf-8") as handle:
            for line in handle.read().splitlines()[1:]:
                if line.strip():
                    item = json.loads(line)
                    name = os.path.basename(local_path(item["path"]))
                    by_batch.setdefault(int(item["batchId"]), set()).add(name)
    return by_batch


def read_admissions(log: str) -> list[Admitted]:
    """The admission log: files `<first index>.json`, each a JSON list of
    [name, late_after] from that index on."""
    admitted: list[Admitted] = []
    if not os.path.isdir(log):
        return admitted
    entries = sorted(
        int(name.removesuffix(_LOG_SUFFIX))
        for name in os.listdir(log)
        if name.endswith(_LOG_SUFFIX) and name.removesuffix(_LOG_SUFFIX).isdigit()
    )
    for first in entries:
        with open(os.path.join(log, f"{first}{_LOG_SUFFIX}"), encoding="utf-8") as handle:
            items = json.load(handle)
        if first > len(admitted):
            raise RuntimeError(f"the admission log {log} misses files before {first}")
        del admitted[first:]
        admitted.extend(Admitted(name, late_after) for name, late_after in items)
    return admitted


def write_admission(log: str, first: int, files: list[Admitted]) -> None:
    """Durably, before the offset that covers them is returned to Spark."""
    os.makedirs(log, exist_ok=True)
    path = os.path.join(log, f"{first}{_LOG_SUFFIX}")
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump([[a.name, a.late_after] for a in files], handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
