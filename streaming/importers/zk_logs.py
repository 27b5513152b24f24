"""`kcsim import zk-logs DIR --out EVENTS`: a ZooKeeper-mode cluster's controller.log and
state-change.log files (every broker's, rotations included) → CONTRACT §1 events.

Streams: each broker directory's files are read in rotation order, one line at a time,
and the brokers' streams are merged by timestamp (a k-way merge), so memory stays flat
whatever the logs' size. The facts (`zk_log_lines`) go through the pure `ZkLogModel`.
Every line that is not understood is counted and reported with its file and line number.
The output is written under a hidden temporary name and renamed once complete; `--out -`
writes to stdout (for `kcsim replay -`); an existing directory (a `kcsim run --source
file:DIR`) gets a new `import-<first seq>.jsonl` file.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import re
import sys
from collections.abc import Iterator
from io import BufferedIOBase
from pathlib import Path
from typing import NamedTuple

from streaming.importers.output import FileOutput, Problem, ProgressBar, Report, write_events
from streaming.importers.zk_log_lines import (
    KNOWN,
    Layout,
    LayoutError,
    is_continuation,
    parse_message,
)
from streaming.importers.zk_log_model import ZkLogModel

KINDS = ("controller.log", "state-change.log")  # merge rank at equal times: event lines first
_PROGRESS_EVERY = 65_536  # lines between progress bar updates
# log4j stamps a line when its thread logs it, before the thread takes the appender's
# lock: lines of one file written by two threads can go back by a few milliseconds
# (seen in Kafka 3.7.1's controller.log). Only a larger step back is out of order.
_THREAD_SKEW_MS = 1_000


DEFAULT_PATTERN = "[%d] %p %m (%c)%n"  # Kafka's log4j.properties


class Record(NamedTuple):
    ts: int
    rank: int
    stream: int
    line: int
    path: Path
    message: str
    level: str


def main(args: argparse.Namespace) -> int:
    """`kcsim import zk-logs`."""
    try:
        layout = Layout.from_pattern(args.pattern or DEFAULT_PATTERN)
    except LayoutError as error:
        print(f"kcsim import: {error}", file=sys.stderr)
        return 2
    if not args.dir.is_dir():
        print(f"kcsim import: not a directory: {args.dir}", file=sys.stderr)
        return 2
    streams = log_streams(args.dir)
    if not streams:
        print(
            f"kcsim import: no controller.log* or state-change.log* file under {args.dir}",
            file=sys.stderr,
        )
        return 2
    report = Report(files=sum(len(files) for _, files in streams))
    model = ZkLogModel(args.cluster)
    total = sum(path.stat().st_size for _, files in streams for path in files)
    with FileOutput(args.out) as out, ProgressBar(total) as progress:
        records = heapq.merge(
            *(
                _records(i, rank, files, layout, report, progress)
                for i, (rank, files) in enumerate(streams)
            )
        )
        for record in records:
            fact = parse_message(record.message)
            if fact is None:
                report.add(Problem(record.path, record.line, "not understood", record.message))
                continue
            report.understood[record.path] = report.understood.get(record.path, 0) + 1
            if fact.kind == KNOWN and isinstance(fact.value, str):
                report.benign[fact.value] = report.benign.get(fact.value, 0) + 1
            write_events(out, model.feed(fact, record.ts), report)
        write_events(out, model.finish(), report)
    _unsupported(report, streams)
    if not args.quiet:
        _print_report(report, model, args.out)
    return 1 if report.problem_count else 0


# ----------------------------------------------------------------------------- files


def log_streams(root: Path) -> list[tuple[int, list[Path]]]:
    """(kind rank, files oldest first) per directory and kind, in directory order."""
    groups: dict[tuple[Path, int], list[Path]] = {}
    for path in sorted(root.rglob("*")):
        for rank, base in enumerate(KINDS):
            if path.is_file() and (path.name == base or path.name.startswith(base + ".")):
                groups.setdefault((path.parent, rank), []).append(path)
    return [
        # (mypy infers no type for a lambda with a default)
        (rank, sorted(files, key=lambda p, b=KINDS[rank]: _rotation_key(p.name, b)))  # type: ignore[misc]
        for (_, rank), files in sorted(groups.items())
    ]


def _rotation_key(name: str, base: str) -> tuple[int, int, str]:
    """Oldest first: dated suffixes (DailyRollingFileAppender) in date order, numbered ones
    (RollingFileAppender: .1 is the newest backup) highest first, the live file last."""
    suffix = name[len(base) :].removesuffix(".gz").lstrip(".")
    if not suffix:
        return (2, 0, "")
    if suffix.isdigit() and len(suffix) < 4:
        return (1, -int(suffix), "")
    return (0, 0, suffix)


def _open(path: Path) -> BufferedIOBase:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")


def _records(
    stream: int, rank: int, files: list[Path], layout: Layout, report: Report, progress
) -> Iterator[Record]:
    """A broker's lines of one kind, files in rotation order, as merge-ordered records."""
    last_ts = -1
    for path in files:
        line_no, pending = 0, 0
        try:
            with _open(path) as handle:
                for raw in handle:
                    line_no += 1
                    pending += len(raw)
                    if line_no % _PROGRESS_EVERY == 0:
                        progress(pending)
                        pending = 0
                    report.lines += 1
                    complete = raw.endswith(b"\n")
                    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                    if not text.strip():
                        continue
                    parsed = layout.parse(text)
                    if parsed is None:
                        if not complete:
                            report.add(Problem(path, line_no, "truncated last line", text))
                        elif is_continuation(text):
                            report.continuation += 1
                        else:
                            report.add(Problem(path, line_no, "not a log line", text))
                        continue
                    report.first_line.setdefault(path, (line_no, parsed.message))
                    if "\ufffd" in text:
                        report.add(Problem(path, line_no, "bytes that are not UTF-8", text))
                        continue
                    if parsed.ts_ms < last_ts - _THREAD_SKEW_MS:
                        report.add(Problem(path, line_no, "earlier than the line before", text))
                    # the merge of the files needs each file's keys in order: a line that
                    # went back by a thread's skew keeps its place in the file
                    last_ts = max(last_ts, parsed.ts_ms)
                    yield Record(last_ts, rank, stream, line_no, path, parsed.message, parsed.level)
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            report.add(Problem(path, line_no + 1, "unreadable", str(error)))
        progress(pending)


_KRAFT = re.compile(r"^\[(QuorumController|RaftManager|KafkaRaftClient) ")


def _unsupported(report: Report, streams: list[tuple[int, list[Path]]]) -> None:
    """A file with log lines none of which is understood is another format or version."""
    for _, files in streams:
        for path in files:
            if path in report.understood or path not in report.first_line:
                continue
            line, message = report.first_line[path]
            what = (
                "a KRaft controller's log (not ZooKeeper mode)"
                if _KRAFT.match(message)
                else "no line is a Kafka 2.4-3.9 ZooKeeper-mode controller's"
            )
            report.add(Problem(path, line, f"unsupported log: {what}", message))


def _print_report(report: Report, model: ZkLogModel, out: str) -> None:
    for problem in report.problems:
        print(f"kcsim import: {problem}", file=sys.stderr)
    if report.problem_count > len(report.problems):
        print(
            f"kcsim import: ... and {report.problem_count - len(report.problems)} more",
            file=sys.stderr,
        )
    counts = model.counts
    print(
        f"kcsim import: {report.lines} lines in {report.files} files, {report.events} events, "
        f"{report.problem_count} lines not understood or bad, {counts.inactive} lines of "
        f"inactive controllers, {counts.inferred_isr_changes} ISR changes inferred, "
        f"{counts.unattributed} state lines outside any event -> {out}",
        file=sys.stderr,
    )
    if report.benign:
        kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(report.benign.items()))
        print(
            f"kcsim import: {sum(report.benign.values())} lines of a known kind that is no "
            f"controller event skipped ({kinds})",
            file=sys.stderr,
        )
    if superseded := model.possibly_superseded():
        shown = ", ".join(f"{t}-{p}" for t, p in superseded[:5])
        more = ", ..." if len(superseded) > 5 else ""
        print(
            f"kcsim import: {len(superseded)} partition(s) end with a live replica outside "
            f"the ISR ({shown}{more}): the AlterPartition adding it back is logged at DEBUG "
            "only, so their last observed state may be superseded (README: what the logs "
            "cannot say)",
            file=sys.stderr,
        )
