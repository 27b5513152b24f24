"""`kcsim whatif EVENTS --set k=v --vs k=v [--vs ...]`: the same events under two or more
settings, side by side (CONTRACT §3).

Run 0 takes the command's settings (`--config`, `--set`); each `--vs KEY=VALUE[,KEY=VALUE...]`
is one more run, those settings over run 0's. `--vs` takes one argument, so EVENTS may come
before, between or after the options. Every run is a `kcsim replay` of the events (the
core alone, no Spark) into its own directory, one run per process, as many at once as
there are cores. Then: each run's totals from its `health` rows, the partitions whose
final leaders (`partition_state`) differ between runs, and with `--report` one HTML page
with the runs' timelines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from controller.config import ConfigError, Settings
from controller.replay.command import replay
from controller.replay.event_files import event_files, split_lines
from controller.replay.table_files import table_file
from streaming.insight.impact import IMPACT_TABLES, Impacts, impact_rows, impacts
from streaming.insight.report_data import (
    ReportInputError,
    cluster_report,
    clusters,
    read_jsonl,
    read_replay,
)

NONE_LEADER = "none"  # leader -1
ABSENT = "absent"  # the partition does not exist in that run


# the positional list the CLI extends with words that follow options (streaming/cli.py)
LOOSE_POSITIONAL = "events"
USAGE = "kcsim whatif EVENTS [--set KEY=VALUE] --vs KEY=VALUE[,KEY=VALUE...] [--vs ...]"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = f"{USAGE} [options]"
    # Zero or more here (and words after the options join them, LOOSE_POSITIONAL), so a
    # missing or stray word is named by `positional_events`, which wants exactly one.
    parser.add_argument(
        "events", nargs="*", metavar="EVENTS", help="JSON-lines file or a directory of them"
    )
    parser.add_argument(
        "--vs",
        action="append",
        type=vs_settings,
        required=True,
        metavar="KEY=VALUE[,KEY=VALUE...]",
        help="one more run: these settings over the --config/--set ones (repeatable); "
        "a run that changes several settings lists them comma-separated",
    )
    parser.add_argument("--report", type=Path, help="also write the runs' timelines here")
    parser.add_argument(
        "--keep", type=Path, help="keep each run's tables in DIR/run-N (default: discarded)"
    )


def vs_settings(text: str) -> list[str]:
    """One `--vs` argument: one run's settings, KEY=VALUE, comma-separated (no setting's
    value holds a comma: they are booleans and integers)."""
    items = [item.strip() for item in text.split(",")]
    if not all("=" in item and item.split("=", 1)[0].strip() for item in items):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE[,KEY=VALUE...], got {text!r}")
    return items


class UsageError(Exception):
    """The command line names no EVENTS, or more than one thing where EVENTS goes."""


def positional_events(words: Sequence[str]) -> Path:
    """The one EVENTS among the command's positional words."""
    settings = [w for w in words if "=" in w and not Path(w).exists()]
    if settings:
        raise UsageError(
            f"{settings[0]!r} is not EVENTS: each --vs takes one argument, one run; a run "
            "that changes several settings lists them comma-separated (--vs K1=V1,K2=V2)"
        )
    if not words:
        raise UsageError(f"missing EVENTS (a JSON-lines file or a directory of them): {USAGE}")
    if len(words) > 1:
        raise UsageError(f"one EVENTS, got {len(words)}: {' '.join(words)}")
    return Path(words[0])


@dataclass(frozen=True, slots=True)
class Run:
    label: str  # the settings that make it differ
    settings: Settings


@dataclass(frozen=True, slots=True)
class Totals:
    offline_partition_events: int  # sum of `offline` over events
    unclean_elections: int
    leader_changes: int
    requests: int
    rejected: int
    records: int = 0  # metadata records (KRaft's output; 0 under zk)
    elr_elections: int = 0
    last_known_leader_elections: int = 0


Key = tuple[str, str, int]  # cluster, topic, partition


def main(args: argparse.Namespace) -> int:
    try:
        events = positional_events(args.events)
    except UsageError as error:
        print(f"kcsim whatif: {error}", file=sys.stderr)
        return 2
    if not events.exists():
        print(f"kcsim whatif: no such file or directory: {events}", file=sys.stderr)
        return 2
    try:
        runs = build_runs(args.config, args.overrides, args.vs)
    except (ConfigError, OSError) as error:
        print(f"kcsim whatif: configuration error: {error}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kcsim-whatif-") as scratch:
        root = args.keep if args.keep is not None else Path(scratch)
        directories = run_all(runs, events, root)
        try:
            tables = [read_replay(d) | engine_tables(d) for d in directories]
        except ReportInputError as error:
            print(f"kcsim whatif: {error}", file=sys.stderr)
            return 1
    totals = [totals_of(t) for t in tables]
    leaders = [final_leaders(t["partition_state"]) for t in tables]
    print(totals_text(runs, totals))
    print()
    print(differences_text(runs, differing_leaders(leaders)))
    print()
    print(classes_text(runs, [final_states(t["final_state"]) for t in tables]))
    print()
    by_type = impact_text([impacts(t) for t in tables])
    print(by_type)
    if args.report is not None:
        from streaming.insight.whatif_report import render_whatif

        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(
            render_whatif(
                [r.label for r in runs],
                [[cluster_report(t, c) for c in clusters(t)] for t in tables],
                totals_text(runs, totals),
                differences_text(runs, differing_leaders(leaders)),
                by_type,
            ),
            encoding="utf-8",
        )
        print(f"\nreport: {args.report}")
    return 0


def build_runs(
    config: Path | None, overrides: Sequence[str], alternatives: Sequence[Sequence[str]]
) -> list[Run]:
    base = " ".join(overrides) or "defaults"
    runs = [Run(base, Settings.load(config, overrides))]
    for extra in alternatives:
        runs.append(Run(" ".join(extra), Settings.load(config, [*overrides, *extra])))
    return runs


# Numbers one controller counts in its own way: a ZooKeeper-mode broker epoch is the czxid
# of its registration znode, a KRaft one the offset of its RegisterBrokerRecord. An event
# log recorded under one engine carries that engine's numbers, which the other would
# compare with its own and refuse (a KRaft heartbeat with another epoch is
# STALE_BROKER_EPOCH: a migration preview's controlled shutdowns would all fail).
ENGINE_NUMBERED = {"controlled_shutdown": ("broker_epoch",), "isr_change": ("broker_epochs",)}


def run_all(runs: Sequence[Run], events: Path, root: Path) -> list[Path]:
    """Replay the events once per run, in parallel processes; each run's tables in
    root/run-N. A run under another engine than run 0's (the engine the events were
    recorded for) replays them without ENGINE_NUMBERED's fields (root/run-N-events)."""
    directories = [root / f"run-{n}" for n in range(len(runs))]
    sources = [
        events
        if run.settings.engine == runs[0].settings.engine
        else without_engine_numbers(events, root / f"run-{n}-events")
        for n, run in enumerate(runs)
    ]
    workers = max(1, min(len(runs), os.cpu_count() or 1))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        jobs = [
            pool.submit(replay, run.settings, source, out)
            for run, source, out in zip(runs, sources, directories, strict=True)
        ]
        for job in jobs:
            job.result()
    return directories


def without_engine_numbers(events: Path, directory: Path) -> Path:
    """A copy of the event files in `directory`, file by file (names and line order kept),
    each event without the fields ENGINE_NUMBERED names for its type; a line that is not a
    JSON object is copied as it is (the replay rejects it as it would have)."""
    directory.mkdir(parents=True, exist_ok=True)
    for file in event_files(events):
        lines = []
        for raw in split_lines(file.read_bytes(), file.name):
            lines.append(_without_numbers(raw.raw))
        target = directory / (file.relative_to(events) if events.is_dir() else Path(file.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(line + "\n" for line in lines), "utf-8", "surrogateescape")
    return directory


def _without_numbers(line: str) -> str:
    try:
        event = json.loads(line)
    except ValueError:
        return line
    if not isinstance(event, dict):
        return line
    dropped = ENGINE_NUMBERED.get(event.get("type"), ())  # type: ignore[arg-type]
    if not any(name in event for name in dropped):
        return line
    return json.dumps({k: v for k, v in event.items() if k not in dropped})


def totals_of(tables: Mapping[str, pa.Table]) -> Totals:
    health = tables["health"]

    def column(name: str) -> np.ndarray:
        return health.column(name).to_numpy(zero_copy_only=False)

    # the election counts are so far: a cluster's last row is its total
    def so_far(name: str, table: pa.Table = health) -> int:
        if name not in table.column_names:  # tables of a kcsim before the column
            return 0
        last: dict[str, tuple[int, int]] = {}
        counts = [c or 0 for c in table.column(name).to_pylist()]
        clusters = table.column("cluster").to_pylist()
        at = table.column("seq").to_pylist()
        for cluster, seq, count in zip(clusters, at, counts, strict=True):
            if cluster not in last or seq >= last[cluster][0]:
                last[cluster] = (seq, count)
        return sum(count for _, count in last.values())

    records = tables.get("metadata_records")
    return Totals(
        offline_partition_events=int(column("offline").sum()),
        unclean_elections=so_far("unclean_elections"),
        leader_changes=int(column("leader_changes").sum()),
        requests=int(column("requests").sum()),
        rejected=tables["rejected_events"].num_rows,
        records=0 if records is None else records.num_rows,
        elr_elections=so_far("elr_elections", tables.get("election_counts", health)),
        last_known_leader_elections=so_far(
            "last_known_leader_elections", tables.get("election_counts", health)
        ),
    )


def final_leaders(partition_state: pa.Table) -> dict[Key, int]:
    rows = partition_state.select(["cluster", "topic", "partition", "leader"]).to_pylist()
    return {(r["cluster"], r["topic"], r["partition"]): r["leader"] for r in rows}


def differing_leaders(leaders: Sequence[Mapping[Key, int]]) -> list[tuple[Key, list[str]]]:
    """The partitions whose final leader is not the same in every run, with each run's
    leader ("none": -1; "absent": no such partition in that run)."""
    keys = sorted(set().union(*leaders))
    out = []
    for key in keys:
        values = [_leader_text(run.get(key)) for run in leaders]
        if len(set(values)) > 1:
            out.append((key, values))
    return out


def _leader_text(leader: int | None) -> str:
    if leader is None:
        return ABSENT
    return NONE_LEADER if leader < 0 else str(leader)


_INTS = pa.list_(pa.int64())
# what whatif reads beyond the report's columns: the final partition states it classifies
# and the KRaft election counts (the metadata records are the report's: `read_replay`)
_ENGINE_COLUMNS = {
    "final_state": ("partition_state", (
        ("cluster", pa.string()), ("topic", pa.string()), ("partition", pa.int64()),
        ("leader", pa.int64()), ("leader_epoch", pa.int64()), ("partition_epoch", pa.int64()),
        ("isr", _INTS), ("elr", _INTS), ("last_known_elr", _INTS),
        ("leader_recovery_state", pa.string()), ("replicas", _INTS),
    )),
    "election_counts": ("health", (
        ("cluster", pa.string()), ("seq", pa.int64()), ("elr_elections", pa.int64()),
        ("last_known_leader_elections", pa.int64()),
    )),
}  # fmt: skip


def engine_tables(directory: Path) -> dict[str, pa.Table]:
    """A run's tables for the engine comparison (a file a run did not write: empty)."""
    out = {}
    for name, (table, columns) in {**_ENGINE_COLUMNS, **IMPACT_TABLES}.items():
        schema = pa.schema(columns)
        path = table_file(directory, table)
        out[name] = read_jsonl(path, schema) if path.exists() else schema.empty_table()
    return out


# the partition_state columns whose final values classify how two runs differ
COMPARED = ("leader", "leader_epoch", "partition_epoch", "isr", "elr", "last_known_elr",
            "leader_recovery_state", "replicas")  # fmt: skip


def final_states(partition_state: pa.Table) -> dict[Key, dict[str, object]]:
    present = [c for c in COMPARED if c in partition_state.column_names]
    rows = partition_state.select(["cluster", "topic", "partition", *present]).to_pylist()
    return {
        (r["cluster"], r["topic"], r["partition"]): {c: _canonical(c, r[c]) for c in present}
        for r in rows
    }


def _canonical(column: str, value: object) -> object:
    if value is None and column in ("elr", "last_known_elr"):
        return []  # a lake row written before the column
    if column in ("isr", "elr", "last_known_elr") and isinstance(value, list):
        return sorted(value)  # sets: their order decides nothing
    return value


def difference_classes(
    base: Mapping[Key, Mapping[str, object]], other: Mapping[Key, Mapping[str, object]]
) -> dict[str, int]:
    """How run `other`'s final partitions differ from `base`'s: partitions per class, a
    class being the columns that differ ("leader_epoch, partition_epoch"), or "only in
    run 0" / "only in this run" for a partition one run lacks."""
    classes: dict[str, int] = {}
    for key in set(base) | set(other):
        a, b = base.get(key), other.get(key)
        if a is None or b is None:
            name = "only in this run" if a is None else "only in run 0"
        else:
            differing = [c for c in COMPARED if c in a and c in b and a[c] != b[c]]
            if not differing:
                continue
            name = ", ".join(differing)
        classes[name] = classes.get(name, 0) + 1
    return dict(sorted(classes.items(), key=lambda item: (-item[1], item[0])))


def classes_text(runs: Sequence[Run], states: Sequence[Mapping[Key, Mapping[str, object]]]) -> str:
    """Per run after the first, the classes of difference from run 0's final state."""
    rows = [
        (n, run.label, name, count)
        for n, (run, state) in enumerate(zip(runs, states, strict=True))
        if n > 0
        for name, count in difference_classes(states[0], state).items()
    ]
    if not rows:
        return "final partition states: the same in every run"
    return "classes of difference from run 0 (partitions):\n" + text_table(
        ("run", "settings", "differing columns", "partitions"), rows
    )


# ---------------------------------------------------------------------------- text


def text_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [list(header), *[[str(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)


TOTALS_HEADER = (
    "run",
    "settings",
    "offline partition-events",
    "unclean elections",
    "leader changes",
    "requests",
    "rejected",
    "records",
    "ELR elections",
    "last-known-leader elections",
)


def totals_text(runs: Sequence[Run], totals: Sequence[Totals]) -> str:
    rows = [
        (
            n,
            run.label,
            t.offline_partition_events,
            t.unclean_elections,
            t.leader_changes,
            t.requests,
            t.rejected,
            t.records,
            t.elr_elections,
            t.last_known_leader_elections,
        )
        for n, (run, t) in enumerate(zip(runs, totals, strict=True))
    ]
    return text_table(TOTALS_HEADER, rows)


def impact_text(runs: Sequence[Impacts]) -> str:
    """The runs' charges per event type (streaming/insight/impact.py)."""
    header, rows = impact_rows(runs)
    if not rows:
        return "by event type: no events applied"
    order = " / ".join(f"run {n}" for n in range(len(runs)))
    title = f"by event type (what followed each event until the next; each cell {order}):"
    return title + "\n" + text_table(header, rows)


def differences_text(runs: Sequence[Run], differing: Sequence[tuple[Key, list[str]]]) -> str:
    if not differing:
        return "final leaders: the same in every run"
    header = ("cluster", "topic", "partition", *(f"leader run {n}" for n in range(len(runs))))
    rows = [(*key, *values) for key, values in differing]
    count = f"{len(differing)} partition{'s' if len(differing) > 1 else ''}"
    return f"final leaders that differ ({count}):\n" + text_table(header, rows)
