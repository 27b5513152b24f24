"""`kcsim produce --scenario` without a broker: which records a scenario file becomes
(CONTRACT §3: produced in order, keyed by cluster, bad lines too)."""

from __future__ import annotations

from pathlib import Path

from streaming.chaos.produce import scenario_records


def test_every_line_becomes_a_record_bad_ones_included(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    lines = [
        '{"type":"broker_startup","broker":1,"cluster":"east"}',
        "not json",
        deep,
        '{"type":"broker_startup","broker":1,"cluster":"\\ud800"}',
        '{"type":"broker_startup","broker":2}',
    ]
    path = tmp_path / "scenario.jsonl"
    path.write_text("\n".join(lines) + "\n")
    records = list(scenario_records(path))
    assert [r.key for r in records] == [b"east", b"default", b"default", b"default", b"default"]
    assert [r.value for r in records] == [line.encode() for line in lines]
