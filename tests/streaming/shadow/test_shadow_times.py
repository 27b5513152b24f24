"""The shadow's event times (CONTRACT §1 `ts`: ISO-8601) from the znodes' mtimes and
ctimes, and where its saved state goes by default."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.protocol.states import ZnodeStat

from streaming.shadow.outputs import kafka_state_path, open_output
from streaming.shadow.znode_reader import ZxidTimes


def stat(czxid: int, mzxid: int, ctime: int, mtime: int) -> ZnodeStat:
    return ZnodeStat(czxid, mzxid, ctime, mtime, 0, 0, 0, 0, 0, 0, mzxid)


def test_events_get_their_causes_commit_time() -> None:
    times = ZxidTimes()
    times.note(stat(0x100, 0x105, 1_700_000_000_000, 1_700_000_000_250))
    times.note(stat(0x120, 0x120, 1_700_000_003_007, 1_700_000_003_007))
    events = [
        {"type": "topic_creation", "event_id": "c:zx100:0", "seq": 1},  # a ctime
        {"type": "isr_change", "event_id": "c:zx105:0", "seq": 2},  # an mtime
        # a registration gone (its parent's pzxid, no time of its own): the next write's
        {"type": "broker_failure", "event_id": "a:b:zx110:0", "seq": 3},
        {"type": "broker_startup", "event_id": "c:zx130:0", "seq": 4},  # after all: the last
        {"type": "broker_startup", "event_id": "c:zx131:0", "ts": 5},  # kept
    ]
    times.stamp(events)
    assert [e.get("ts") for e in events] == [
        "2023-11-14T22:13:20.000Z",
        "2023-11-14T22:13:20.250Z",
        "2023-11-14T22:13:23.007Z",
        "2023-11-14T22:13:23.007Z",
        5,
    ]
    times.forget_before(0x120)
    assert times.known == {0x120: 1_700_000_003_007}


def test_a_kafka_outputs_state_sits_in_the_state_directory_not_the_working_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    path = kafka_state_path("broker:9092", "events", "prod")
    assert path == tmp_path / "state" / "kcsim" / "shadow-broker_9092-events-prod.json"
    assert path.parent.is_dir()
    # a state saved at the former default is kept in use (the shadow resumes from it)
    (tmp_path / ".kcsim-shadow-prod.json").write_text("{}")
    assert kafka_state_path("broker:9092", "events", "prod") == (
        tmp_path / ".kcsim-shadow-prod.json"
    )
    _, beside = open_output(f"file:{tmp_path / 'out'}", "prod")
    assert beside == tmp_path / "out" / ".shadow-state-prod.json"
