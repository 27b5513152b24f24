"""`kcsim import kraft-log PATH --out EVENTS`: a KRaft cluster's `__cluster_metadata` log
(segments, and a snapshot when the log starts at one) → the KRaft controller's inputs
(CONTRACT §5 events, with `observed`).

Kafka's own decoder reads the files (`kraft_log_decoder`, a JVM streaming its output);
the pure `KraftLogModel` turns the records into events, one batch at a time, so memory
holds the cluster (brokers, partitions), not the log. The output goes where `kcsim
import zk-logs` writes it (a file renamed once complete, a `kcsim run` source directory,
or stdout), with the same tqdm bar of bytes on a terminal. A log that ends early (a
truncated tail, a corrupt batch, a record the decoder cannot read) keeps the events of
everything before that point, names the file and byte position, and exits with status 1.
"""

from __future__ import annotations

import argparse
import sys

from streaming.importers.kraft_log_decoder import Decoded, DecoderError, log_files
from streaming.importers.kraft_log_model import KraftLogModel
from streaming.importers.output import FileOutput, ProgressBar, Report, write_events

_PROGRESS_EVERY = 4096  # records between progress bar updates


def main(args: argparse.Namespace) -> int:
    try:
        files = log_files(args.dir, from_snapshot=args.from_snapshot)
    except DecoderError as error:
        print(f"kcsim import: {error}", file=sys.stderr)
        return 2
    decoded = Decoded(files)
    model = KraftLogModel(args.cluster)
    report = Report(files=len(files.all()))
    try:
        with FileOutput(args.out) as out, ProgressBar(files.total_bytes()) as progress:
            shown = 0
            for record in decoded:
                write_events(out, model.feed(record), report)
                if model.counts.records % _PROGRESS_EVERY == 0:
                    progress(decoded.bytes_read - shown)
                    shown = decoded.bytes_read
            write_events(out, model.finish(), report)
            progress(decoded.bytes_read - shown)
    except DecoderError as error:
        print(f"kcsim import: {error}", file=sys.stderr)
        return 2
    if decoded.problem is not None:
        print(f"kcsim import: {decoded.problem} (the events before it are written)",
              file=sys.stderr)  # fmt: skip
    for note in model.notes:  # always: a replay needs them to elect as the cluster did
        print(f"kcsim import: {note}", file=sys.stderr)
    if args.quiet and model.counts.unexplained:  # never dropped unsaid (else in the summary)
        print(
            f"kcsim import: {model.counts.unexplained} partition changes no event explains",
            file=sys.stderr,
        )
    for note in model.unexplained_notes:  # what they were (the first ones)
        print(f"kcsim import: no event explains {note}", file=sys.stderr)
    if not args.quiet:
        start = f"snapshot {files.snapshot.name}" if files.snapshot else "offset 0"
        print(
            f"kcsim import: {model.counts.records} records in {model.counts.batches} batches "
            f"from {start} ({report.files} files), {report.events} events, "
            f"{model.counts.unexplained} partition changes no event explains, "
            f"{model.counts.configs_dropped} topic config records not carried -> {args.out}",
            file=sys.stderr,
        )
    return 1 if decoded.problem is not None else 0
