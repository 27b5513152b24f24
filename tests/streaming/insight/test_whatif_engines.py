"""`kcsim whatif EVENTS --vs kcsim.engine=kraft` (CONTRACT §5): the same events through
both controllers, side by side: totals, differing leaders and the classes of difference."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from streaming.cli import main
from streaming.insight.whatif import difference_classes

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "events"


def test_whatif_examples_zk_against_kraft(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", str(EXAMPLES), "--vs", "kcsim.engine=kraft"]) == 0
    out = capsys.readouterr().out
    totals, leaders, classes = out.split("\n\n")[:3]
    zk, kraft = totals.splitlines()[1:3]
    assert zk.split()[:2] == ["0", "defaults"] and kraft.split()[:2] == ["1", "kcsim.engine=kraft"]
    # a KRaft controller sends no requests and writes records; ZooKeeper mode the reverse
    assert int(zk.split()[5]) > 0 and int(zk.split()[7]) == 0
    assert int(kraft.split()[5]) == 0 and int(kraft.split()[7]) > 0
    # SPEC-KRAFT §24 D3: the deleted topic is gone at once under kraft, waiting under zk
    assert "final leaders that differ" in leaders and "absent" in leaders
    assert classes.startswith("classes of difference from run 0 (partitions):")
    assert "only in run 0" in classes


def test_whatif_report_draws_each_engine_s_output(tmp_path: Path) -> None:
    """The page's output panel is each run's whole output per event: the requests of the
    ZooKeeper-mode run, the metadata records of the KRaft run (whose requests are none)."""
    page = tmp_path / "whatif.html"
    args = ["whatif", str(EXAMPLES), "--vs", "kcsim.engine=kraft", "--report", str(page)]
    assert main(args) == 0
    text = page.read_text(encoding="utf-8")
    assert "controller output per event: requests (zk) or metadata records (kraft)" in text
    assert "run 1: kcsim.engine=kraft" in text and "requests per event" not in text


def test_difference_classes() -> None:
    base = {
        ("c", "t", 0): {"leader": 1, "leader_epoch": 1, "isr": [1, 2]},
        ("c", "t", 1): {"leader": 2, "leader_epoch": 0, "isr": [1, 2]},
        ("c", "t", 2): {"leader": 2, "leader_epoch": 0, "isr": [2]},
    }
    other = {
        ("c", "t", 0): {"leader": 1, "leader_epoch": 2, "isr": [1, 2]},
        ("c", "t", 1): {"leader": 2, "leader_epoch": 0, "isr": [1, 2]},
        ("c", "u", 0): {"leader": 2, "leader_epoch": 0, "isr": [2]},
    }
    assert difference_classes(base, other) == {
        "leader_epoch": 1,
        "only in run 0": 1,
        "only in this run": 1,
    }


def test_whatif_by_event_type_charges_what_followed_each_event(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The migration preview's table: each event type's leader changes, elections and
    offline partition-time in each run, the types that differ first. A deleted topic's
    partitions lose their leaders under zk (the deletion's OfflineReplica transitions
    write leader -1), while KRaft removes them in one record (SPEC-KRAFT §24 D3)."""
    assert main(["whatif", str(EXAMPLES), "--vs", "kcsim.engine=kraft"]) == 0
    section = capsys.readouterr().out.split("by event type")[1]
    header, *rows = section.splitlines()[1:]
    assert header.split()[:2] == ["event", "type"]
    # each cell is "run 0 / run 1": offline partition-s, leader changes, unclean, ELR/LKL
    table = {
        row.split()[0]: [cell.split(" / ") for cell in re.findall(r"\S+ / \S+", row)]
        for row in rows
        if row
    }
    assert table["topic_deletion"] == [["0", "0"], ["8", "0"], ["0", "0"], ["0", "0"]]
    # a created partition's first leader is a change under both engines
    assert table["topic_creation"][1] == ["12", "12"]
    differing = [name for name, cells in table.items() if any(a != b for a, b in cells)]
    assert list(table)[: len(differing)] == differing  # the differing types come first


def test_impacts_charge_offline_partition_seconds_until_the_next_event() -> None:
    from streaming.insight.impact import IMPACT_TABLES, impacts

    def table(name: str, rows: list[dict]) -> pa.Table:
        return pa.Table.from_pylist(rows, schema=pa.schema(IMPACT_TABLES[name][1]))

    health = [
        {"cluster": "c", "seq": 1, "offline": 0, "leader_changes": 3, "unclean_elections": 0,
         "elr_elections": 0, "last_known_leader_elections": 0},
        {"cluster": "c", "seq": 2, "offline": 2, "leader_changes": 1, "unclean_elections": 0,
         "elr_elections": 1, "last_known_leader_elections": 0},
        {"cluster": "c", "seq": 3, "offline": 0, "leader_changes": 2, "unclean_elections": 1,
         "elr_elections": 1, "last_known_leader_elections": 1},
    ]  # fmt: skip
    events = [
        {"cluster": "c", "seq": 1, "type": "topic_creation", "ts": 0},
        {"cluster": "c", "seq": 2, "type": "broker_failure", "ts": 1_000},
        {"cluster": "c", "seq": 3, "type": "broker_startup", "ts": 31_000},
    ]
    result = impacts({"impact_health": table("impact_health", health),
                      "impact_events": table("impact_events", events)})  # fmt: skip
    assert result.timed
    failure = result.by_type["broker_failure"]
    # two partitions offline for the 30 s until the startup; one ELR election
    assert (failure.offline, failure.leader_changes, failure.elr_elections) == (60.0, 1, 1)
    startup = result.by_type["broker_startup"]
    assert (startup.unclean_elections, startup.elr_elections, startup.leader_changes) == (1, 1, 2)
    # without times, one event is one unit
    untimed = [{**e, "ts": None} for e in events]
    result = impacts({"impact_health": table("impact_health", health),
                      "impact_events": table("impact_events", untimed)})  # fmt: skip
    assert not result.timed and result.by_type["broker_failure"].offline == 2


def test_a_zookeeper_recording_s_broker_epochs_are_not_kraft_s(tmp_path: Path) -> None:
    """A ZooKeeper-mode shadow writes each controlled shutdown with the broker's epoch,
    the czxid of its registration znode (58 here). Under kraft a heartbeat with another
    epoch than the registration's is STALE_BROKER_EPOCH (SPEC-KRAFT §9 step 1), so a
    migration preview would refuse every controlled shutdown of the day: the kraft run
    replays the events without those numbers, and the shutdown moves the leadership."""
    events = tmp_path / "events.jsonl"
    lines = [
        *({"type": "broker_startup", "broker": b} for b in (1, 2, 3)),
        {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2, 3]}},
        {"type": "controlled_shutdown", "broker": 1, "broker_epoch": 58},
    ]
    events.write_text("".join(json.dumps(line) + "\n" for line in lines))
    keep = tmp_path / "runs"
    args = ["whatif", str(events), "--vs", "kcsim.engine=kraft", "--keep", str(keep)]
    assert main(args) == 0
    results = [json.loads(x) for x in (keep / "run-1" / "event_results.jsonl").open()]
    assert [r["error"] for r in results] == [None]
    assert results[0]["message"] == "CONTROLLED_SHUTDOWN"
    (state,) = [json.loads(x) for x in (keep / "run-1" / "partition_state.jsonl").open()]
    assert (state["leader"], state["isr"]) == (2, [2, 3])
    # run 0, the engine the events were recorded for, reads them as they are
    assert not (keep / "run-0-events").exists()
    copied = [json.loads(x) for x in (keep / "run-1-events" / "events.jsonl").open()]
    assert copied[-1] == {"type": "controlled_shutdown", "broker": 1}
    assert copied[:-1] == lines[:-1]


def test_the_documented_migration_preview(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/guide/report-and-whatif.md's preview of the recorded ZooKeeper-mode chaos day
    (examples/migration): the totals and the classes it names, as the page shows them."""
    migration = EXAMPLES.parent / "migration"
    assert main(["whatif", str(migration), "--vs", "kcsim.engine=kraft"]) == 0
    out = capsys.readouterr().out
    totals = [line.split() for line in out.splitlines()[1:3]]
    assert [t[2:5] for t in totals] == [["48", "0", "201"], ["85", "4", "133"]]
    assert "final leaders: the same in every run" in out
    rows = {line.split()[0]: re.findall(r"\S+ / \S+", line) for line in out.splitlines() if line}
    # SPEC-KRAFT §9: a sole-ISR leader loses its leadership when its shutdown starts
    assert rows["controlled_shutdown"][:2] == ["0 / 12.9", "21 / 33"]
    # SPEC-KRAFT §7: returning brokers lead again from the ELR or as last known leaders
    assert rows["broker_startup"][2:] == ["0 / 4", "0 / 23"]
    # SPEC-KRAFT §24 D3: a deletion moves no leader under KRaft
    assert rows["topic_deletion"][1] == "61 / 0"
