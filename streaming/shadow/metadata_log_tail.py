"""Reading a KRaft `__cluster_metadata-0` directory as it grows, for `kcsim shadow
--metadata-log`: one long-lived JVM (`streaming/shadow/java/MetadataLogTail.java`) that
reads and decodes with Kafka 4.1.1's own classes, asked for the whole batches past a
byte position and below an offset (the quorum's high watermark).

Why a long-lived JVM: `kafka-dump-log` (what `kcsim import kraft-log` runs) starts a JVM
per call and reads whole files, about 1 s of CPU per start on this kind of machine, and a
metadata log grows every 500 ms (the quorum leader's NoOps); the tail's JVM starts once,
and a poll then costs a read of the new bytes. Its classes are compiled by the install
(`scripts/install.sh`, `python -m streaming.jars`) into `.metadata-log-tail/classes/`,
beside `.kafka/libs` which they run with; a checkout whose reader is missing or older
than its source compiles it at the first start (javac, a few seconds), saying so.

The files are only read: the JVM opens each one read only, per request, and takes no lock,
so a segment Kafka deletes or renames meanwhile is simply missing at the next request.
`LogCursor` holds the reading position across files: segments are `<base offset>.log`, in
base-offset order; an offset names a position across them.
"""

from __future__ import annotations

import fcntl
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from streaming.importers.kraft_log_decoder import Record
from streaming.jars import (
    JarsMissingError,
    OracleBuild,
    compile_oracle,
    metadata_log_tail_build,
)
from streaming.local_clusters.processes import LocalClusterError, java

MAIN = "kcsim.shadow.MetadataLogTail"
JVM_FLAGS = ("-Xmx192m", "-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
SEGMENT = re.compile(r"^(\d{20})\.log$")
SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
NO_LIMIT = (1 << 63) - 1
MAX_BATCHES = 2000  # per request: memory holds this many decoded batches at most


class TailError(RuntimeError):
    """The directory cannot be read as a KRaft metadata log (exit status 2)."""


@contextmanager
def _compile_lock(build: OracleBuild) -> Iterator[None]:
    build.classes.parent.mkdir(parents=True, exist_ok=True)
    with (build.classes.parent / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@dataclass(frozen=True, slots=True)
class Batch:
    path: Path
    position: int
    size: int
    base: int
    last: int
    epoch: int  # the quorum leader epoch that wrote it
    ts: int  # its CreateTime (epoch ms): the events' `ts`
    records: tuple[Record, ...]


@dataclass(frozen=True, slots=True)
class End:
    position: int  # the byte position after the last batch returned
    size: int  # the file's size when read
    stop: str  # limit | eof | partial | corrupt | missing | max
    detail: str


def segments(directory: Path) -> list[tuple[int, Path]]:
    return sorted((int(m.group(1)), p) for p in directory.iterdir() if (m := SEGMENT.match(p.name)))


def snapshots(directory: Path) -> list[tuple[int, Path]]:
    """(end offset, path) of every snapshot, oldest first (a snapshot's records are the
    state before its end offset, exclusive)."""
    return sorted(
        (int(m.group(1)), p) for p in directory.iterdir() if (m := SNAPSHOT.match(p.name))
    )


def check_directory(directory: Path) -> None:
    """A clear error naming the directory when it is not a readable metadata log."""
    if not directory.exists():
        raise TailError(f"{directory}: no such directory (give a node's __cluster_metadata-0)")
    if not directory.is_dir():
        raise TailError(f"{directory}: not a directory (give a node's __cluster_metadata-0)")
    try:
        names = list(directory.iterdir())
    except OSError as error:
        raise TailError(f"{directory}: cannot be read: {error.strerror or error}") from None
    if not any(SEGMENT.match(p.name) or SNAPSHOT.match(p.name) for p in names):
        raise TailError(
            f"{directory}: no segment (<offset>.log) or snapshot (<offset>-<epoch>.checkpoint): "
            "not a KRaft __cluster_metadata log directory"
        )
    for _, path in segments(directory)[:1]:
        try:
            with path.open("rb"):
                pass
        except OSError as error:
            raise TailError(f"{path}: cannot be read: {error.strerror or error}") from None


class LogTail:
    """The JVM reading the log. Use as a context manager; `read` is one request."""

    def __init__(self) -> None:
        build = metadata_log_tail_build()
        try:
            if not build.is_current():
                with _compile_lock(build):  # two shadows starting at once compile it once
                    if not build.is_current():
                        print(
                            f"kcsim: compiling the metadata log reader into {build.classes} "
                            "(`python -m streaming.jars` builds it at install)",
                            file=sys.stderr,
                            flush=True,
                        )
                        compile_oracle(build)
            classpath = build.classpath()
            java_bin = java()
        except (JarsMissingError, LocalClusterError) as error:
            raise TailError(f"cannot start the metadata log reader: {error}") from None
        # stderr to a file: a pipe nobody reads could fill and stall the JVM
        self._stderr: IO[str] = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # noqa: SIM115
        self._process = subprocess.Popen(
            [java_bin, *JVM_FLAGS, "-cp", classpath, MAIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            bufsize=1 << 16,
        )

    def __enter__(self) -> LogTail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._stderr.close()

    def read(
        self,
        path: Path,
        position: int,
        *,
        below: int = NO_LIMIT,
        start: int = 0,
        snapshot_end: int | None = None,
    ) -> tuple[list[Batch], End]:
        """The whole batches of `path` from byte `position`, skipping those that end before
        offset `start`, stopping before the first that reaches offset `below`. A snapshot's
        records (`snapshot_end` given) carry its end offset as theirs, as
        `kcsim import kraft-log`'s do."""
        if "\t" in str(path) or "\n" in str(path):
            raise TailError(f"{path}: a path with a tab or newline cannot be read")
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(f"READ\t{path}\t{position}\t{start}\t{below}\t{MAX_BATCHES}\n")
            stdin.flush()
        except BrokenPipeError:
            raise TailError(f"the metadata log reader stopped: {self._last_error()}") from None
        batches: list[Batch] = []
        while True:
            line = stdout.readline()
            if not line:
                raise TailError(f"the metadata log reader stopped: {self._last_error()}")
            value: dict[str, Any] = json.loads(line)
            if "end" in value:
                end = value["end"]
                return batches, End(end["position"], end["size"], end["stop"], end["detail"])
            batches.append(_batch(path, value, snapshot_end))

    def _last_error(self) -> str:
        self._stderr.seek(0)
        lines = [x for x in self._stderr.read().splitlines() if x.strip() and x[0] != "\t"]
        return lines[-1] if lines else f"exit status {self._process.poll()}"


def _batch(path: Path, value: dict[str, Any], snapshot_end: int | None) -> Batch:
    head = value["batch"]
    position, epoch, ts = int(head["position"]), int(head["epoch"]), int(head["ts"])
    snapshot = snapshot_end is not None
    records = tuple(
        Record(
            path,
            position,
            snapshot_end if snapshot_end is not None else int(r["offset"]),
            epoch,
            ts,
            str(r["type"]),
            int(r["version"]),
            r["data"],
            snapshot,
        )
        for r in value["records"]
    )
    return Batch(
        path, position, int(head["size"]), int(head["base"]), int(head["last"]), epoch, ts, records
    )
