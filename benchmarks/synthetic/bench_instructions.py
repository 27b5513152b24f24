"""Instruction counts of `kcsim replay`: a before/after that the machine's noise cannot move.

Run by hand (not a test; needs valgrind, `apt-get install valgrind`):

    python benchmarks/synthetic/bench_instructions.py                     # this tree
    python benchmarks/synthetic/bench_instructions.py --tree /tmp/before  # and another
    python benchmarks/synthetic/bench_instructions.py --without writing state_changes health

Wall and CPU time on a shared 2-core machine drift by a third between runs of the same
code, so a change worth a few percent cannot be seen in them. The number of instructions a
replay executes does not drift. The replay runs under `valgrind --tool=cachegrind
--cache-sim=no` with `PYTHONHASHSEED=0`, so the dicts and sets are the same on every run.
A whole replay is about 50x slower this way, so the workload is small: bench_requests'
rolling restart (`--brokers`, `--partitions`; `kcsim replay --compress` with
`kcsim.simulate.brokers=true`). Python's start-up and imports, measured as a replay of one
event, are subtracted from every count.

`--tree DIR` (repeatable) counts other source trees too (e.g. an older commit's
`git archive`). Each count is printed with its ratio to the first tree's.

`--without PART` (repeatable) sizes a part of the replay: the replay runs again with that
part switched off by a patch made in the child process, not in kcsim:
  writing        no row written (the writer's calls do nothing)
  state_changes  no `state_changes` row made, so none written
  health         no `health` counters (`HealthTracker._track` does nothing)
Each part's cost is the whole replay's count minus that run's. A run without a part is
not a valid replay; its output is thrown away.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from workloads import workload  # noqa: E402

PARTS = ("writing", "state_changes", "health")
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


@dataclass(frozen=True, slots=True)
class Run:
    tree: Path
    part: str | None  # the part switched off; None: the whole replay
    events: Path


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--partitions", type=int, default=15_000)
    parser.add_argument("--tree", type=Path, action="append", default=[], help="another tree")
    parser.add_argument("--without", choices=PARTS, nargs="+", default=[])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench_instructions: valgrind is not installed (apt-get install valgrind)")
    trees = [ROOT, *(tree.resolve() for tree in args.tree)]
    with tempfile.TemporaryDirectory(prefix="kcsim-instructions-") as scratch:
        events = Path(scratch) / "events.jsonl"
        one_event = Path(scratch) / "one.jsonl"
        lines = [json.dumps(e) + "\n" for e in workload(args.brokers, args.partitions)]
        events.write_text("".join(lines))
        one_event.write_text(lines[0])
        runs = [Run(tree, None, one_event) for tree in trees]
        runs += [Run(tree, part, events) for tree in trees for part in (None, *args.without)]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            counts = dict(
                zip(runs, pool.map(lambda run: count(run, Path(scratch)), runs), strict=True)
            )
    print(f"{args.brokers} brokers, {args.partitions:,} partitions: rolling restart, "
          "instructions minus the start-up's (a one-event replay)")  # fmt: skip
    first: float | None = None
    for tree in trees:
        start_up = counts[Run(tree, None, one_event)]
        whole = counts[Run(tree, None, events)] - start_up
        first = first or whole
        print(f"{tree}: start-up {start_up / 1e9:.3f} G")
        print(f"  whole replay      {whole / 1e9:8.3f} G  {whole / first:.4f} of the first tree's")
        for part in args.without:
            without = counts[Run(tree, part, events)] - start_up
            cost = whole - without
            print(f"  {part:17s} {cost / 1e9:8.3f} G  {100 * cost / whole:5.1f}% of the replay")


def count(run: Run, scratch: Path) -> int:
    """The instructions one replay executes, by cachegrind."""
    out = Path(tempfile.mkdtemp(dir=scratch))
    command = [
        "valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}/cg",
        sys.executable, str(Path(__file__).resolve()), "--child", run.part or "none",
        "replay", str(run.events), "--out", str(out / "tables"), "--compress", "--quiet",
        "--set", "kcsim.simulate.brokers=true",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(run.tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, cwd=run.tree, env=env, capture_output=True, text=True)
    refs = _REFS.search(done.stderr)
    if done.returncode not in (0, 1) or refs is None:
        sys.exit(f"bench_instructions: the replay failed ({done.returncode}):\n{done.stderr}")
    return int(refs[1].replace(",", ""))


def child(part: str, argv: list[str]) -> int:
    """`kcsim <argv>` in this process, with `part` switched off ("none": nothing)."""
    if part == "writing":
        from controller.replay import command, table_files

        table_files.AppendFiles.write = lambda self, table, rows: None  # type: ignore[method-assign]
        command.write_tables = lambda out, tables, compress=False, ordered=False: None
    elif part == "state_changes":
        from controller.zk.journal import Journal

        Journal.state_change = lambda self, *args, **kwargs: None  # type: ignore[method-assign]
    elif part == "health":
        from controller.health import HealthTracker

        HealthTracker._track = lambda self, context, touched: (0, [])  # type: ignore[method-assign]
    from streaming.cli import main as kcsim

    return kcsim(argv)


if __name__ == "__main__":
    main()
