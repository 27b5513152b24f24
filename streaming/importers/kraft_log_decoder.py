"""A KRaft `__cluster_metadata` log directory, decoded by Kafka's own tool.

`kafka.tools.DumpLogSegments --cluster-metadata-decoder` (from the jars kcsim installs,
`.kafka/libs`, Kafka 4.1.1) runs as one small JVM over the chosen files; its stdout is read
line by line and only the parts kcsim needs are taken from each line: a batch header's
byte position, quorum leader epoch and validity, and each record's offset, time and JSON
payload (Kafka's own JSON form of the metadata record, `MetadataJsonConverters`). No byte
of the binary format is parsed here.

Which files: the segments (`<base offset>.log`) in offset order and, when the segments
do not start at offset 0 (older ones were deleted after a snapshot), the earliest
snapshot (`<end offset>-<epoch>.checkpoint`) at or after the first segment's base: its
records are the cluster's state at its end offset, the segments' records from there on
follow it. `--from-snapshot` takes the latest snapshot and the records after it.

Problems (a truncated tail, a batch whose CRC fails, offsets that jump, a record the
decoder cannot read, a record format before v2) end the stream at that point with a
`Problem` naming the file and byte position: what came before is complete and usable.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from streaming.jars import JarsMissingError, kafka_libs_dir
from streaming.local_clusters.processes import LocalClusterError, java

MAIN = "kafka.tools.DumpLogSegments"
JVM_FLAGS = ("-Xmx256m", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_BATCH_FIELDS = re.compile(
    r"baseOffset: (-?\d+) lastOffset: (-?\d+) .*?partitionLeaderEpoch: (-?\d+) "
    r".*?isControl: (\w+) .*?position: (\d+) CreateTime: (-?\d+) size: (\d+) magic: (\d+) "
    r".*?isvalid: (\w+)"
)
_INVALID_TAIL = re.compile(r"^Found (\d+) invalid bytes at the end of (.+)$")


class DecoderError(RuntimeError):
    """The log directory cannot be decoded at all (no files, no java, no jars)."""


class Record(NamedTuple):
    """One metadata record as Kafka's decoder printed it."""

    path: Path  # the segment or snapshot it is in
    position: int  # byte position of its batch in that file
    offset: int  # its log offset (a snapshot's records: the snapshot's end offset)
    epoch: int  # the batch's partitionLeaderEpoch: the quorum (controller) leader epoch
    ts: int  # the record's CreateTime (epoch ms)
    type: str  # "PARTITION_RECORD", ...; control records: "LeaderChange", ...
    version: int
    data: dict[str, Any]
    snapshot: bool  # from a snapshot (.checkpoint)


class Problem(NamedTuple):
    path: Path
    position: int  # byte position in the file
    what: str

    def __str__(self) -> str:
        return f"{self.path}: position {self.position}: {self.what}"


@dataclass(frozen=True, slots=True)
class LogFiles:
    """The files to decode, in order, and where the segments' records start."""

    snapshot: Path | None
    segments: tuple[Path, ...]
    start_offset: int  # the first segment record to take (the snapshot's end offset, or 0)

    def all(self) -> list[Path]:
        return ([self.snapshot] if self.snapshot else []) + list(self.segments)

    def total_bytes(self) -> int:
        return sum(path.stat().st_size for path in self.all())


def log_files(directory: Path, *, from_snapshot: bool = False) -> LogFiles:
    """The segments and (when needed) the snapshot of a `__cluster_metadata-0` directory."""
    if not directory.is_dir():
        raise DecoderError(f"not a directory: {directory}")
    segments = sorted(p for p in directory.iterdir() if _SEGMENT.match(p.name))
    snapshots = sorted(
        (int(m.group(1)), p) for p in directory.iterdir() if (m := _SNAPSHOT.match(p.name))
    )
    if not segments and not snapshots:
        raise DecoderError(
            f"{directory}: no segment (<offset>.log) or snapshot (<offset>-<epoch>.checkpoint): "
            "not a KRaft __cluster_metadata log directory"
        )
    first_base = int(_SEGMENT.match(segments[0].name).group(1)) if segments else None  # type: ignore[union-attr]
    if not from_snapshot and first_base == 0:
        return LogFiles(None, tuple(segments), 0)
    usable = [(end, p) for end, p in snapshots if first_base is None or end >= first_base]
    if not usable:
        raise DecoderError(
            f"{directory}: the segments start at offset {first_base} and no snapshot covers "
            "the records before it"
        )
    end, snapshot = usable[-1] if from_snapshot else usable[0]
    kept = [p for p in segments if _next_base(segments, p) > end]
    return LogFiles(snapshot, tuple(kept), end)


def _next_base(segments: list[Path], path: Path) -> int:
    """The base offset of the segment after `path` (a segment holds records below it)."""
    index = segments.index(path)
    if index + 1 == len(segments):
        return 1 << 62
    return int(segments[index + 1].name[:20])


def decoder_command(files: list[Path]) -> list[str]:
    if commas := [f for f in files if "," in str(f)]:
        # DumpLogSegments takes its files as one comma-separated list
        raise DecoderError(f"{commas[0]}: a path with a comma cannot be given to Kafka's decoder")
    try:
        libs = kafka_libs_dir()
    except JarsMissingError as error:
        raise DecoderError(str(error)) from None
    try:
        java_bin = java()
    except LocalClusterError as error:
        raise DecoderError(str(error)) from None
    return [
        java_bin,
        *JVM_FLAGS,
        "-cp",
        str(libs / "*"),
        MAIN,
        "--cluster-metadata-decoder",
        "--files",
        ",".join(str(f) for f in files),
    ]


@dataclass(slots=True)
class _Batch:
    position: int = 0
    epoch: int = 0
    ts: int = 0
    control: bool = False


class Decoded:
    """Iterate to get the records; afterwards `problem` holds what ended the stream early
    (None: every file was read to its end), `bytes_read` the batches' bytes so far."""

    def __init__(self, files: LogFiles) -> None:
        self.files = files
        self.problem: Problem | None = None
        self.bytes_read = 0
        # the file and batch being read (before any: the first file)
        self._where: tuple[Path, int] = (files.all()[0] if files.all() else Path("."), 0)

    def __iter__(self) -> Iterator[Record]:
        paths = self.files.all()
        command = decoder_command(paths)
        by_text = {str(p): p for p in paths}
        # stderr to a file: a pipe nobody reads until the end could fill and stall the JVM
        with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as errors:
            process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1 << 16,
            )
            try:
                assert process.stdout is not None
                try:
                    yield from self._parse(process.stdout, by_text)
                except (ValueError, KeyError, IndexError, TypeError) as error:
                    # a line of the decoder's output this reader does not know
                    path, position = self._where
                    self.problem = Problem(path, position, f"unreadable decoder output: {error}")
            finally:
                if self.problem is not None or process.poll() is None:
                    process.kill()
                code = process.wait()
                if self.problem is None and code != 0:
                    errors.seek(0)
                    path, position = self._where  # where the decoder stopped
                    failed = f"the decoder failed: {_last_error(errors.read())}"
                    self.problem = Problem(path, position, failed)

    def _parse(self, lines: Iterator[str], by_text: dict[str, Path]) -> Iterator[Record]:
        path = Path(".")
        snapshot = False
        snapshot_offset = 0
        batch = _Batch()
        expected: int | None = None  # the next offset a segment record must have
        start = self.files.start_offset
        for line in lines:
            if line.startswith("| offset: "):
                head, sep, payload = line.partition(" payload: ")
                offset = int(head[10 : head.index(" ", 10)])
                if not snapshot:
                    if expected is not None and offset != expected:
                        self.problem = Problem(
                            path, batch.position, f"offset {offset} where {expected} was due"
                        )
                        return
                    expected = offset + 1
                if batch.control or not sep:
                    # a control record: "... headerKeys: [] LeaderChange: {json}"
                    _, _, tail = line.partition(" headerKeys: ")
                    kind, _, payload = tail.partition("] ")[2].partition(" ")
                    kind = kind.rstrip(":")
                    data = _json(payload)
                    if kind in ("SnapshotHeader", "SnapshotFooter") or data is None:
                        continue
                    version = int(data.get("version", 0))
                    if snapshot or offset >= start:
                        yield Record(
                            path, batch.position, offset, batch.epoch, batch.ts, kind, version,
                            data, snapshot,
                        )  # fmt: skip
                    continue
                if payload.startswith("Error at "):
                    self.problem = Problem(
                        path,
                        batch.position,
                        f"record at offset {offset} cannot be decoded by Kafka 4.1.1's "
                        f"metadata decoder (a newer or corrupt record): {payload.strip()}",
                    )
                    return
                record = _json(payload)
                if record is None:
                    self.problem = Problem(path, batch.position, f"unreadable record: {line}")
                    return
                if snapshot or offset >= start:
                    yield Record(
                        path, batch.position, snapshot_offset if snapshot else offset,
                        batch.epoch, batch.ts, record["type"], int(record["version"]),
                        record["data"], snapshot,
                    )  # fmt: skip
            elif line.startswith("baseOffset: "):
                fields = _BATCH_FIELDS.search(line)
                if fields is None:
                    self.problem = Problem(path, batch.position, f"unreadable batch: {line}")
                    return
                base, _, epoch, control, position, ts, size, magic, valid = fields.groups()
                batch = _Batch(int(position), int(epoch), int(ts), control == "true")
                self._where = (path, batch.position)
                if magic != "2":
                    self.problem = Problem(
                        path,
                        batch.position,
                        f"record format v{magic}: not a KRaft metadata log (it needs v2)",
                    )
                    return
                if valid != "true":
                    self.problem = Problem(
                        path, batch.position, f"corrupt batch at offset {base} (CRC mismatch)"
                    )
                    return
                self.bytes_read += int(size)
            elif line.startswith("offset: ") and " magic: " in line:
                # a message set of the formats before v2 (DumpLogSegments prints its entries
                # without a batch header): no KRaft log holds them
                position = int(line.split(" position: ", 1)[1].split(" ", 1)[0])
                magic = line.split(" magic: ", 1)[1].split(" ", 1)[0]
                self.problem = Problem(
                    path,
                    position,
                    f"record format v{magic}: not a KRaft metadata log (it needs v2)",
                )
                return
            elif line.startswith("Dumping "):
                name = line[8:].rstrip("\n")
                path = by_text.get(name, Path(name))
                snapshot = path.name.endswith(".checkpoint")
                batch = _Batch()
                self._where = (path, 0)
                if not snapshot and expected is None:
                    expected = int(path.name[:20])
            elif line.startswith("Snapshot end offset: "):
                snapshot_offset = int(line[21:].split(",", 1)[0])
            elif (invalid := _INVALID_TAIL.match(line.rstrip("\n"))) is not None:
                size = path.stat().st_size
                self.problem = Problem(
                    path,
                    size - int(invalid.group(1)),
                    f"truncated: the last {invalid.group(1)} bytes are not a whole batch",
                )
                return
            # other lines ("Log starting offset", the end-of-file summaries of offsets
            # the check above already reported) carry nothing more


def _json(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("\t")]
    return lines[-1] if lines else "no message"
