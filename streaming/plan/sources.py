"""Where `kcsim plan --state` reads a cluster's present state from (CONTRACT §6).

* `events:PATH`: a JSON-lines file or a directory of them, replayed through the core;
* `lake:DIR`: a local Delta lake's state tables at their latest version, read without
  Spark (`streaming.lake.local_reader`);
* `zookeeper:HOST:PORT[/chroot]`: a live ZooKeeper-mode cluster read once, as `kcsim
  shadow --once` reads it (its events, then replayed);
* `metadata-log:DIR`: a KRaft node's `__cluster_metadata-0` directory, from its newest
  snapshot on, as `kcsim import kraft-log --from-snapshot` decodes it (its events, then
  replayed).

Each gives the rows of the state tables of every cluster it holds. Nothing is written to
the source: the lake is read, the cluster and the log only read.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from controller.config import Settings
from controller.plan.state import STATE_TABLE_NAMES, Replayed, replayed_state
from controller.plan.steps import PlanInputError
from controller.replay.event_files import read_events

KINDS = ("events:", "lake:", "zookeeper:", "metadata-log:")
Tables = dict[str, list[dict[str, Any]]]


class StateSource:
    """A read state and what to say about it."""

    __slots__ = ("description", "notes", "rejected", "tables")

    def __init__(
        self,
        tables: Tables,
        description: str,
        notes: list[str] | None = None,
        rejected: int = 0,
    ) -> None:
        self.tables = tables
        self.description = description
        self.notes = notes or []
        self.rejected = rejected  # events of the state the core refused


def read_state(spec: str, settings: Settings, cluster: str | None) -> StateSource:
    kind, _, where = spec.partition(":")
    if not where or f"{kind}:" not in KINDS:
        raise PlanInputError(
            f"--state {spec!r}: expected events:PATH, lake:DIR, zookeeper:HOST:PORT[/chroot] "
            "or metadata-log:DIR"
        )
    if kind == "events":
        return _events(Path(where), settings)
    if kind == "lake":
        return _lake(where)
    if kind == "zookeeper":
        return _zookeeper(where, settings, cluster)
    return _metadata_log(Path(where), settings, cluster)


def _events(path: Path, settings: Settings, what: str | None = None) -> StateSource:
    if not path.exists():
        raise PlanInputError(f"--state events:{path}: no such file or directory")
    try:
        replayed = replayed_state(settings, read_events(path))
    except (OSError, ValueError) as error:
        raise PlanInputError(f"--state events:{path}: cannot read it: {error}") from None
    notes = _replay_notes(replayed)
    return StateSource(replayed.tables, what or f"events:{path}", notes, len(replayed.rejected))


def _replay_notes(replayed: Replayed) -> list[str]:
    notes = [f"{replayed.events:,} events replayed"]
    if replayed.rejected:
        first = replayed.rejected[0]
        notes.append(
            f"{len(replayed.rejected):,} of them rejected (first: {first['source']}: "
            f"{first['reason']})"
        )
    return notes


def _lake(where: str) -> StateSource:
    from streaming.lake.local_reader import LakeReader, NotNative, local_root
    from streaming.lake.spark_schemas import arrow_to_rows

    root = local_root(where)
    if root is None:
        raise PlanInputError(f"--state lake:{where}: only a local lake is read (a path)")
    if not os.path.isdir(root):
        raise PlanInputError(f"--state lake:{where}: no such directory")
    reader = LakeReader(root)
    tables: Tables = {}
    for name in STATE_TABLE_NAMES:
        try:
            tables[name] = arrow_to_rows(reader.read(name), name)
        except NotNative as error:
            raise PlanInputError(
                f"--state lake:{where}: {error}: this lake's tables need Spark to read"
            ) from None
        except ValueError as error:  # no Delta table there
            raise PlanInputError(f"--state lake:{where}: {error}") from None
    return StateSource(tables, f"lake:{where}")


def _zookeeper(where: str, settings: Settings, cluster: str | None) -> StateSource:
    with tempfile.TemporaryDirectory(prefix="kcsim-plan-zk-") as scratch:
        out = Path(scratch) / "events"
        command = ["shadow", "--zookeeper", where, "--out", f"file:{out}", "--once", "--quiet"]
        _kcsim(command + (["--cluster", cluster] if cluster else []), f"zookeeper:{where}")
        return _events(out, settings, f"zookeeper:{where}")


def _metadata_log(path: Path, settings: Settings, cluster: str | None) -> StateSource:
    if not path.is_dir():
        raise PlanInputError(f"--state metadata-log:{path}: no such directory")
    with tempfile.TemporaryDirectory(prefix="kcsim-plan-kraft-") as scratch:
        out = Path(scratch) / "events.jsonl"
        command = ["import", "kraft-log", str(path), "--out", str(out), "--quiet"]
        command += ["--from-snapshot"] if any(path.glob("*.checkpoint")) else []
        _kcsim(command + (["--cluster", cluster] if cluster else []), f"metadata-log:{path}")
        return _events(out, settings, f"metadata-log:{path}")


def _kcsim(arguments: list[str], what: str) -> None:
    """Another kcsim command, run as its own process (the shadow's ZooKeeper client, the
    log decoder's JVM), failing as an unreadable state."""
    done = subprocess.run(
        [sys.executable, "-m", "streaming.cli", *arguments],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message"
        why = re.sub(r"^kcsim [a-z-]+( [a-z-]+)?: ", "", why)  # (the prefix is plan's)
        raise PlanInputError(f"--state {what}: cannot read it: {why}")
