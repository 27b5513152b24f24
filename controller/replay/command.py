"""`kcsim replay EVENTS --out DIR`: the local engine (CONTRACT §3).

Streams a JSON-lines file (or a directory of them) through `Simulator` in one process and
writes every table of `schemas.TABLES` as `DIR/<table>.jsonl`: append-only tables as the
batches produce them, state tables once at the end. No Spark. The events are read by
`event_files`, the tables written by `table_files` (`--compress`: Zstandard).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from controller.config import Settings
from controller.replay.event_files import (
    STDIN,
    EventFileNameError,
    read_events,
    skipped_files_warning,
)
from controller.replay.table_files import AppendFiles, write_tables
from controller.simulator import Simulator
from schemas import APPEND_TABLES, STATE_TABLES

DEFAULT_BATCH_SIZE = 10_000
REJECTIONS_SHOWN = 5  # rejected lines whose reason replay prints
# a batch's output held at once, in rows and request-body partition entries (~0.5-1 KB
# each in memory): replay's memory follows it, whatever the cluster's size
DEFAULT_BATCH_OUTPUT = 250_000


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "events", type=Path, help="JSON-lines file, a directory of them, or - (stdin)"
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for <table>.jsonl")
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        help=f"events per Simulator.apply call (default {DEFAULT_BATCH_SIZE}); "
        "results do not depend on it",
    )
    parser.add_argument(
        "--batch-output",
        type=positive_int,
        default=DEFAULT_BATCH_OUTPUT,
        help="a batch ends once its output holds this many rows, a request body counting "
        f"one per partition it names (default {DEFAULT_BATCH_OUTPUT:,}; a single event's "
        "output is never split); results do not depend on it",
    )
    parser.add_argument(
        "--compress",
        action="store_true",
        help="write DIR/<table>.jsonl.zst (Zstandard, level 1, an 8 MiB window: ~170x "
        "smaller for a large cluster's requests) instead of DIR/<table>.jsonl",
    )
    parser.add_argument("--quiet", action="store_true", help="no summary or warning on stderr")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


@dataclass(frozen=True, slots=True)
class Summary:
    events: int
    rejected: int
    requests: int
    seconds: float
    # the first rejected lines' "<source>: <reason>", at most REJECTIONS_SHOWN
    first_rejections: tuple[str, ...] = ()

    def line(self, out: Path) -> str:
        return (
            f"kcsim replay: {self.events} events, {self.rejected} rejected, "
            f"{self.requests} requests in {self.seconds:.2f} s -> {out}"
        )

    def rejections(self, out: Path) -> str:
        """What exit status 1 means, for the terminal: the count and the first reasons."""
        more = self.rejected - len(self.first_rejections)
        return "\n".join(
            [
                f"kcsim replay: {self.rejected} event(s) rejected, each a row of "
                f"{out / 'rejected_events.jsonl'}; the first:",
                *(f"  {line}" for line in self.first_rejections),
                *([f"  ... and {more} more"] if more > 0 else []),
            ]
        )


def main(args: argparse.Namespace) -> int:
    source: Path = args.events
    if source != STDIN and not source.exists():
        print(f"kcsim replay: no such file or directory: {source}", file=sys.stderr)
        return 2
    if args.out.exists() and not args.out.is_dir():
        print(f"kcsim replay: --out must be a directory, {args.out} is a file", file=sys.stderr)
        return 2
    try:
        if not args.quiet and source != STDIN:
            warning = skipped_files_warning(source)
            if warning:
                print(f"kcsim replay: {warning}", file=sys.stderr)
        summary = replay(
            args.settings, source, args.out, args.batch_size, args.batch_output, args.compress
        )
    except (EventFileNameError, OSError) as error:
        print(f"kcsim replay: {error}", file=sys.stderr)
        return 2
    except Exception:  # status 1 means "rejected events", not this
        traceback.print_exc()
        print("kcsim replay: internal error (a bug in kcsim: the traceback is above)",
              file=sys.stderr)  # fmt: skip
        return 3
    if not args.quiet:
        print(summary.line(args.out), file=sys.stderr)
        if summary.rejected:
            print(summary.rejections(args.out), file=sys.stderr)
    # the exit status says whether anything was rejected
    return 1 if summary.rejected else 0


def replay(
    settings: Settings,
    source: Path,
    out: Path,
    batch_size: int = DEFAULT_BATCH_SIZE,
    batch_output: int = DEFAULT_BATCH_OUTPUT,
    compress: bool = False,
) -> Summary:
    """Apply the events under `source` and write every table to `out` (Zstandard with
    `compress`)."""
    started = time.monotonic()
    simulator = Simulator(settings, state_rows=False)  # the state tables: written at the end
    events = rejected = requests = 0
    first_rejections: list[str] = []
    lines = read_events(source)  # lists the files now, before any output file exists
    out.mkdir(parents=True, exist_ok=True)
    with AppendFiles(out, APPEND_TABLES, compress) as appends:
        while True:
            # the events a batch does not take stay in `lines` for the next
            output = simulator.apply(islice(lines, batch_size), batch_output)
            if output.events == 0:
                break
            events += output.events
            rejections = output.appends.get("rejected_events", ())
            rejected += len(rejections)
            for row in rejections[: REJECTIONS_SHOWN - len(first_rejections)]:
                first_rejections.append(f"{row['source']}: {row['reason']}")
            requests += len(output.appends.get("controller_requests", ()))
            for table, rows in output.appends.items():
                appends.write(table, rows)
            del output  # not alive through the next batch
    state_tables = {t.name: simulator.table_rows(t.name) for t in STATE_TABLES}
    write_tables(out, state_tables, compress, ordered=True)
    seconds = time.monotonic() - started
    return Summary(events, rejected, requests, seconds, tuple(first_rejections))
