"""Where `kcsim import` writes its events, and what it reports: shared by both importers.

The events go to a hidden temporary file renamed once complete (nothing at the final
name before then), to a new `import-<first seq>.jsonl` in an existing directory (a
`kcsim run --source file:DIR`), or to stdout (`--out -`, for `kcsim replay -`). Problems
are counted and the first ones printed with their file and line; a tqdm bar of bytes
shows progress on a terminal.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

_REPORTED = 20  # problems printed one by one; the rest are counted


class Problem(NamedTuple):
    path: Path
    line: int
    what: str
    text: str

    def __str__(self) -> str:
        shown = self.text if len(self.text) <= 160 else self.text[:157] + "..."
        return f"{self.path}:{self.line}: {self.what}: {shown}"


@dataclass(slots=True)
class Report:
    files: int = 0
    lines: int = 0
    events: int = 0
    continuation: int = 0
    problems: list[Problem] = field(default_factory=list)
    problem_count: int = 0
    understood: dict[Path, int] = field(default_factory=dict)
    benign: dict[str, int] = field(default_factory=dict)  # skipped lines by kind (zk-logs)
    first_line: dict[Path, tuple[int, str]] = field(default_factory=dict)

    def add(self, problem: Problem) -> None:
        self.problem_count += 1
        if len(self.problems) < _REPORTED:
            self.problems.append(problem)


class FileOutput:
    """The events' destination: written to a hidden temporary file, renamed when complete
    (nothing at the final name before then); stdout for "-"."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.handle: IO[str] | None = None
        self.temp: Path | None = None
        self.final: Path | None = None

    def __enter__(self) -> IO[str]:
        if self.target == "-":
            return sys.stdout
        final = Path(self.target)
        if final.is_dir():
            final = final / "import-{seq}.jsonl"
        final.parent.mkdir(parents=True, exist_ok=True)
        self.final = final
        self.temp = final.parent / f".{final.name}.{os.getpid()}.tmp"
        self.handle = self.temp.open("w", encoding="utf-8")
        return self.handle

    def __exit__(self, kind, value, traceback) -> None:
        if self.handle is None or self.temp is None or self.final is None:
            sys.stdout.flush()
            return
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        if kind is not None:
            self.temp.unlink(missing_ok=True)
            return
        final = self.final
        if "{seq}" in final.name:
            final = final.with_name(final.name.format(seq=f"{_first_seq(self.temp):020d}"))
        os.replace(self.temp, final)


def _first_seq(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        first = handle.readline()
    return int(json.loads(first)["seq"]) if first else 0


def write_events(out: IO[str], events: list[dict], report: Report) -> None:
    for event in events:
        out.write(json.dumps(event, separators=(",", ":")) + "\n")
    report.events += len(events)


class ProgressBar:
    """A tqdm bar of bytes read, on a terminal only (stderr a TTY)."""

    def __init__(self, total: int) -> None:
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="B", unit_scale=True, desc="kcsim import")

    def __enter__(self):
        bar = self.bar
        return (lambda n: bar.update(n)) if bar is not None else (lambda n: None)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
