"""Where `kcsim shadow` writes its events, and the state it saves to resume from."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from streaming.clients.kafka_config import KafkaClientConfig
from streaming.shadow.kafka_output import KafkaOutput
from streaming.shadow.model import Event, ShadowModel


class EventOutput(Protocol):
    def last_seq(self, cluster: str) -> int: ...
    def write(self, events: list[Event]) -> None: ...
    def close(self) -> None: ...


@dataclass(slots=True)
class FileOutput:
    directory: Path

    def last_seq(self, cluster: str) -> int:
        files = sorted(p for p in self.directory.glob("shadow-*.jsonl"))
        for path in reversed(files):
            lines = path.read_text(encoding="utf-8").splitlines()
            seqs = [json.loads(line).get("seq") for line in lines if line.strip()]
            seqs = [s for s in seqs if isinstance(s, int)]
            if seqs:
                return max(seqs)
        return 0

    def write(self, events: list[Event]) -> None:
        first = next((e["seq"] for e in events if "seq" in e), 0)
        name = f"shadow-{first:020d}.jsonl"
        temp = self.directory / f".{name}.tmp"
        with temp.open("w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self.directory / name)

    def close(self) -> None:
        pass


def open_output(
    out: str, cluster: str, client: KafkaClientConfig | None = None
) -> tuple[EventOutput, Path]:
    """The sink and the default place of the saved state."""
    if out.startswith("file:"):
        directory = Path(out.removeprefix("file:"))
        directory.mkdir(parents=True, exist_ok=True)
        return FileOutput(directory), directory / f".shadow-state-{cluster}.json"
    if out.startswith("kafka:") and "/" in out:
        bootstrap, topic = out.removeprefix("kafka:").split("/", 1)
        sink = KafkaOutput(bootstrap, topic, cluster, client or KafkaClientConfig())
        return sink, kafka_state_path(bootstrap, topic, cluster)
    raise ValueError(f"--out must be file:DIR or kafka:BOOTSTRAP/TOPIC, got {out!r}")


def kafka_state_path(bootstrap: str, topic: str, cluster: str, cwd: Path | None = None) -> Path:
    """The default saved state of a shadow writing to a Kafka topic: a file per output
    (bootstrap, topic, cluster) under `$XDG_STATE_HOME/kcsim/` (`~/.local/state/kcsim/`),
    so that where the shadow is started from does not matter. A state saved at the former
    default, `./.kcsim-shadow-<cluster>.json`, is kept in use when it exists: a shadow
    restarted from there resumes rather than refusing an output that holds its events."""
    former = (cwd or Path.cwd()) / f".kcsim-shadow-{cluster}.json"
    if former.exists():
        return former
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"shadow-{bootstrap}-{topic}-{cluster}")
    directory = base / "kcsim"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{name}.json"


def save_state(path: Path, model: ShadowModel, unwritten: list[Event] | None = None) -> None:
    """The model's view, with the events that must be out before it holds (`unwritten`:
    the bootstrap's, saved before they are written)."""
    saved = model.to_json()
    if unwritten:
        saved["unwritten"] = unwritten
    write_state(path, saved)


def write_state(path: Path, saved: dict[str, Any]) -> None:
    """A saved state, replaced whole (a stop mid-write leaves the previous one)."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(saved, separators=(",", ":")), encoding="utf-8")
    os.replace(temp, path)
