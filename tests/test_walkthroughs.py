"""The README's and the docs' shell blocks, as a newcomer meets them.

Two kinds of ```bash blocks live in README.md and the docs (docs/**/*.md):

* **walkthroughs**, marked by the comment line `<!-- walkthrough: NAME; markers: M ... -->`
  right above the block: a newcomer pastes them into a shell, so each is run here as
  written (`bash -euo pipefail`, in an empty directory, `kcsim` being this checkout), and
  what it leaves behind is checked. The markers put each in its test tier (`kafka`,
  `zk`, `kraft`, `spark`, `slow`: tests/README.md);
* **synopses**, every other block: `kcsim ...` lines with placeholders and [optional]
  parts. They cannot run, so each line's command is looked up in kcsim's own parser and
  every option it names must be one that command takes.

The README's first block holds the two commands for a fresh machine. Its first line
(install, then the job on the bundled events) runs here after `bash scripts/install.sh &&`,
which CI runs itself before this suite (`.ci/run`), into a temporary lake; its second line
is this test suite, which CI runs from that line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from streaming.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))
# every page a reader may follow a link from
LINKED_PAGES = (
    *PAGES,
    *(ROOT / p for p in ("CHANGELOG.md", "tests/README.md", "benchmarks/README.md")),
)
MARKER = re.compile(r"<!-- walkthrough: ([a-z0-9-]+); markers: ([a-z ]*)-->")
TIERS = {"kafka", "zk", "kraft", "spark", "slow"}


@dataclass(frozen=True, slots=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    text: str
    walkthrough: str | None
    markers: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def bash_blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```bash":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            above = lines[i - 1] if i else ""
            found = MARKER.fullmatch(above.strip())
            yield Block(
                page,
                i + 1,
                "\n".join(lines[i + 1 : end]) + "\n",
                found.group(1) if found else None,
                tuple(found.group(2).split()) if found else (),
            )
            i = end
        i += 1


BLOCKS = [block for page in PAGES for block in bash_blocks(page)]
WALKTHROUGHS = {b.walkthrough: b for b in BLOCKS if b.walkthrough is not None}


def kcsim_lines(text: str) -> Iterator[str]:
    """The block's `kcsim ...` commands, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        command = line.split("  #", 1)[0].split(" # ", 1)[0].strip()
        if command.startswith("kcsim "):
            yield command


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option of the parser and of its subcommands (`import zk-logs`, ...)."""
    found = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= option_strings(sub)
    return found


def command_parser(command: str) -> argparse.ArgumentParser:
    parser, _ = build_parser([command])
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices[command]


SYNOPSIS_LINES = [
    pytest.param(block, line, id=f"{block.where}:{line.split()[1]}")
    for block in BLOCKS
    for line in kcsim_lines(block.text)
]


@pytest.mark.parametrize(("block", "line"), SYNOPSIS_LINES)
def test_every_option_a_page_names_is_one_its_command_takes(block: Block, line: str) -> None:
    words = line.split()
    if words[1].startswith("--"):  # `kcsim --version`
        parser, _ = build_parser([])
        assert set(w for w in words[1:] if w.startswith("--")) <= option_strings(parser)
        return
    command = words[1]
    assert command in COMMANDS, f"{block.where}: `kcsim {command}` is no command"
    known = option_strings(command_parser(command))
    named = {
        option.split("=", 1)[0]
        for word in words[2:]
        for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*(?:=\S*)?", word)
    }
    unknown = sorted(named - known)
    assert not unknown, f"{block.where}: `kcsim {command}` takes no {', '.join(unknown)}"


def test_the_pages_mark_their_walkthroughs_with_known_tiers() -> None:
    # the README walks through a local broker and links the shadow's walkthrough
    assert {"local-broker", "zk-shadow"} <= set(WALKTHROUGHS)
    for block in WALKTHROUGHS.values():
        assert set(block.markers) <= TIERS, block.where
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("<!-- walkthrough:") == sum(
        1 for b in WALKTHROUGHS.values() if b.page.name == "README.md"
    )


def test_every_path_a_page_names_exists() -> None:
    """A page's `controller/...`, `streaming/...`, `tests/...` paths lead somewhere."""
    named = re.compile(
        r"`((?:controller|streaming|schemas|tests|benchmarks|scripts|examples|jars|docs|\.ci)"
        r"/[A-Za-z0-9_./-]*)`"
    )
    missing = []
    for page in (*PAGES, ROOT / "tests" / "README.md"):
        if page.name == "performance-log.md":  # a log: its entries name the files of then
            continue
        for number, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for path in named.findall(text):
                if not (ROOT / path.rstrip(".")).exists():
                    missing.append(f"{page.relative_to(ROOT)}:{number}: {path}")
    assert not missing, "\n".join(missing)


def anchors(page: Path) -> set[str]:
    """The page's headings as GitHub makes their anchors."""
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower().replace("`", "")
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_every_link_a_page_gives_leads_somewhere() -> None:
    """Relative links (and their #anchors) between the README, the docs and the code."""
    broken = []
    for page in LINKED_PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            goal = (page.parent / path).resolve() if path else page
            if not goal.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and goal.suffix == ".md" and anchor not in anchors(goal):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


# --- running the walkthroughs -------------------------------------------------------------


def kcsim_on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose `kcsim` is this checkout's (as `pip install -e .` makes it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "kcsim"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m streaming "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_bash(
    text: str, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """`text` run as a newcomer's shell would (`bash -euo pipefail`); it must succeed."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", text],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def run_block(text: str, cwd: Path, env: dict[str, str], timeout: float) -> str:
    """What `text` printed, stdout then stderr."""
    done = run_bash(text, cwd, env, timeout)
    return done.stdout + done.stderr


def lake_json(env: dict[str, str], cwd: Path, *args: str) -> list[dict]:
    out = run_block(shlex.join(["kcsim", "show", *args, "--json"]), cwd, env, timeout=120)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


@pytest.mark.spark
def test_the_readmes_first_lines(tmp_path: Path) -> None:
    first = BLOCKS[0]
    assert first.page.name == "README.md" and first.line == 1
    install, test_suite = first.text.splitlines()
    assert test_suite == "bash scripts/install.sh && python -m pytest -q"
    assert '"$PYTHON" -m pytest -q' in (ROOT / ".ci" / "run").read_text()  # CI runs it
    prefix = "bash scripts/install.sh && "
    assert install.startswith(prefix)
    assert "/tmp/kcsim-lake" in install
    env = kcsim_on_path(tmp_path)
    job = install.removeprefix(prefix).replace("/tmp/kcsim-lake", str(tmp_path / "lake"))
    done = run_bash(job, ROOT, env, timeout=600)
    # what a newcomer sees: a line per batch, then the run's summary, and no warning (the
    # JVM's own note on the module Spark adds comes before any configuration is read)
    lines = [line for line in done.stderr.splitlines() if "Using incubator modules" not in line]
    assert lines[-1].startswith("kcsim run: done: 1 batches, 4 files, 32 events applied"), lines
    assert lines[:-1] and all(line.startswith("batch ") for line in lines[:-1]), lines
    assert "WARN" not in done.stdout + "\n".join(lines)
    applied = lake_json(env, ROOT, "applied_events", "--lake", str(tmp_path / "lake"))
    assert len(applied) == 32 == len({(e["cluster"], e["event_id"]) for e in applied})


def check_local_broker(said: str, lake: list[dict], divergences: list[dict]) -> None:
    # every produced event reached the lake once: applied, or rejected with its reason
    assert "200 events applied, 0 rejected" in said, said
    assert len(lake) == 200 and len({e["event_id"] for e in lake}) == 200
    # the describe view lists under-replicated partitions in kafka-topics' layout
    assert re.search(r"\tTopic: \S+\tPartition: \d+\tLeader: \S+\tReplicas: ", said), said
    assert "Kafka in kafka stopped" in said


def check_zk_shadow(said: str, lake: list[dict], divergences: list[dict]) -> None:
    types = [e["type"] for e in lake]
    assert "controller_failover" in types, types  # the shadow's first event: the present
    # broker 2's failure, or (broker 2 was the controller) a second controller's failover
    assert "broker_failure" in types or types.count("controller_failover") >= 2, types
    assert types.count("broker_startup") >= 4  # broker 2 again after its kill
    # the simulation agreed with the real controller on every field it observed
    assert divergences == []
    assert re.search(r"\tTopic: orders\tPartition: 1\tLeader: \d", said), said
    assert "kcsim run: stopped: " in said  # SIGTERM stopped the job, with its summary


CHECKS = {"local-broker": check_local_broker, "zk-shadow": check_zk_shadow}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[getattr(pytest.mark, m) for m in block.markers], id=name)
        for name, block in WALKTHROUGHS.items()
    ],
)
def test_a_walkthrough_runs_as_written(name: str, tmp_path: Path) -> None:
    """Run in an empty directory; what it leaves in `lake` (every walkthrough writes
    there) is checked by the walkthrough's own check."""
    assert name in CHECKS, f"walkthrough {name!r} has no check in CHECKS"
    env = kcsim_on_path(tmp_path)
    said = run_block(WALKTHROUGHS[name].text, tmp_path, env, timeout=480)
    lake = lake_json(env, tmp_path, "applied_events", "--lake", "lake")
    CHECKS[name](said, lake, lake_json(env, tmp_path, "divergences", "--lake", "lake"))
