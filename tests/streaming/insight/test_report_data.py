"""streaming.insight.report_data on hand-made rows: reading, downsampling that keeps spikes, marks
per bucket, requests per event, leaders per broker at the report's moments, the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from streaming.insight import report_data as rd


def health_row(seq: int, **values: Any) -> dict[str, Any]:
    row = {
        "cluster": "c",
        "event_id": f"c:{seq}",
        "seq": seq,
        "ts": 1_000 * seq,
        "partitions": 4,
        "offline": 0,
        "under_replicated": 0,
        "at_min_isr": 0,
        "not_preferred": 0,
        "max_broker_imbalance": 0.0,
        "live_brokers": 3,
        "unclean_elections": 0,
        "leader_changes": 0,
        "requests": 0,
    }
    return row | values


def change(seq: int, topic: str, partition: int, to_state: str, leader: int | None, **rest: Any):
    row = {
        "cluster": "c",
        "seq": seq,
        "entity": "partition",
        "topic": topic,
        "partition": partition,
        "from_state": "OnlinePartition",
        "to_state": to_state,
        "ok": True,
        "leader": leader,
        "unclean": False,
    }
    return row | rest


def table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=rd.schema(name))


# ------------------------------------------------------------------------ downsampling


def test_downsample_keeps_a_one_event_spike_and_dip_at_their_events() -> None:
    n = 1_000_000
    x = np.arange(1, n + 1, dtype=np.int64)
    y = np.full(n, 5, dtype=np.int64)
    y[123_457] = 900  # one event's spike
    y[777_001] = 0  # one event's dip
    series = rd.downsample(x, y, max_points=2000)
    assert len(series.x) <= 2000
    assert series.y.max() == 900 and series.x[series.y.argmax()] == 123_458
    assert series.y.min() == 0 and series.x[series.y.argmin()] == 777_002
    assert np.all(np.diff(series.x) > 0)  # still in event order


def test_downsample_keeps_each_buckets_min_and_max_in_order() -> None:
    x = np.arange(10, dtype=np.int64)
    y = np.array([3, 9, 1, 4, 4, 4, 7, 2, 8, 0])
    series = rd.downsample(x, y, max_points=4)  # buckets of 5: [3 9 1 4 4] [4 7 2 8 0]
    assert series.x.tolist() == [1, 2, 8, 9]
    assert series.y.tolist() == [9, 1, 8, 0]


def test_downsample_leaves_a_short_series_alone() -> None:
    x = np.arange(50)
    y = np.arange(50) % 7
    series = rd.downsample(x, y, max_points=2000)
    assert series.x.tolist() == x.tolist() and series.y.tolist() == y.tolist()
    assert rd.bucket_size(2000) == 1 and rd.bucket_size(2001) == 3


def test_marks_count_per_event_then_per_bucket() -> None:
    seqs = np.arange(1, 11, dtype=np.int64)
    rows = np.array([2, 2, 7, 10])
    exact = rd.marks(rows, seqs, size=1)
    assert exact.x.tolist() == [2, 7, 10] and exact.count.tolist() == [2, 1, 1]
    bucketed = rd.marks(rows, seqs, size=4)  # buckets start at seq 1, 5, 9
    assert bucketed.x.tolist() == [1, 5, 9] and bucketed.count.tolist() == [2, 1, 1]
    assert bucketed.total == 4


def test_requests_per_event_by_type_zero_filled() -> None:
    seqs = np.array([1, 2, 3, 5], dtype=np.int64)
    requests = table(
        "controller_requests",
        [
            {"cluster": "c", "seq": s, "type": t}
            for s, t in [(1, "U"), (1, "U"), (3, "L"), (5, "U")]
        ],
    )
    per_event = rd.requests_per_event(requests, seqs)
    assert per_event["U"].y.tolist() == [2, 0, 0, 1]
    assert per_event["L"].y.tolist() == [0, 0, 1, 0]
    assert per_event["U"].x.tolist() == [1, 2, 3, 5]


# ------------------------------------------------------------------ leaders per broker

CHANGES = [
    change(1, "t", 0, "OnlinePartition", 1, from_state="NewPartition"),
    change(1, "t", 1, "OnlinePartition", 2, from_state="NewPartition"),
    change(1, "t", 2, "OnlinePartition", 1, from_state="NewPartition"),
    change(2, "u", 0, "NewPartition", None, from_state="NonExistentPartition"),
    change(2, "u", 0, "OnlinePartition", 3, from_state="NewPartition"),
    # seq 3: broker 1 fails; t-0 is re-elected (2), t-2 goes offline, its ISR removal row
    # (a replica row) then carries leader -1
    change(3, "t", 0, "OfflinePartition", 1),
    change(3, "t", 2, "OfflinePartition", 1),
    change(3, "t", 0, "OnlinePartition", 2, from_state="OfflinePartition"),
    change(3, "t", 2, "OfflineReplica", -1, entity="replica", from_state="OnlineReplica"),
    change(3, "t", 1, "OnlinePartition", 9, ok=False),  # refused: changes nothing
    # seq 4: topic u deleted
    change(4, "u", 0, "OfflinePartition", 3),
    change(4, "u", 0, "NonExistentPartition", 3, from_state="OfflinePartition"),
    # seq 5: t-2 elected again (unclean)
    change(5, "t", 2, "OnlinePartition", 3, from_state="OfflinePartition", unclean=True),
]


def test_leaders_at_follow_transitions_in_order() -> None:
    changes = table("state_changes", CHANGES)
    assert rd.leaders_at(changes, 2) == ({1: 2, 2: 1, 3: 1}, 0)
    assert rd.leaders_at(changes, 3) == ({2: 2, 3: 1}, 1)  # t-2 offline, u-0 on 3
    assert rd.leaders_at(changes, 4) == ({2: 2}, 1)  # u-0 gone
    assert rd.leaders_at(changes, 5) == ({2: 2, 3: 1}, 0)


def test_cluster_report_summary_and_moments() -> None:
    health = [
        health_row(1, leader_changes=3, requests=6),
        health_row(2, partitions=4, leader_changes=1, requests=4),
        health_row(3, offline=1, under_replicated=3, live_brokers=2, leader_changes=1),
        health_row(4, offline=1, under_replicated=2, live_brokers=2, partitions=3),
        health_row(5, partitions=3, live_brokers=2, unclean_elections=1, leader_changes=1),
    ]
    tables = {
        "health": table("health", health),
        "state_changes": table("state_changes", CHANGES),
        "controller_requests": table("controller_requests", []),
        "divergences": table(
            "divergences",
            [{"cluster": "c", "seq": 3, "topic": "t", "partition": 0, "field": "leader"}],
        ),
        "violations": table("violations", []),
        "partition_state": table(
            "partition_state",
            [
                {"cluster": "c", "topic": "t", "partition": p, "state": s, "leader": leader}
                for p, s, leader in (
                    (0, "OnlinePartition", 2),
                    (1, "OnlinePartition", 2),
                    (2, "OnlinePartition", 3),
                )
            ],
        ),
        "rejected_events": table("rejected_events", [{"cluster": "c", "reason": "bad"}]),
    }
    report = rd.cluster_report(tables, "c")
    s = report.summary
    assert (s.events, s.first_seq, s.last_seq, s.first_ts, s.last_ts) == (5, 1, 5, 1000, 5000)
    assert (s.partitions, s.live_brokers) == (3, 2)
    assert (s.peak_offline, s.peak_offline_seq, s.peak_under_replicated) == (1, 3, 3)
    assert (s.offline_partition_events, s.unclean_elections, s.leader_changes) == (2, 1, 6)
    assert (s.requests, s.divergences, s.violations, s.rejected) == (10, 1, 0, 1)
    start, worst, end = report.moments
    # the first event changing an online partition is seq 3: start is after seq 2
    assert (start.seq, start.leaders, start.offline) == (2, {1: 2, 2: 1, 3: 1}, 0)
    assert (worst.seq, worst.leaders, worst.offline) == (3, {2: 2, 3: 1}, 1)
    assert (end.seq, end.leaders, end.offline) == (5, {2: 2, 3: 1}, 0)
    assert report.unclean.x.tolist() == [5] and report.divergences.x.tolist() == [3]
    assert report.bucket == 1 and report.timeline["offline"].y.tolist() == [0, 0, 1, 1, 0]


# -------------------------------------------------------------------------------- input


def test_read_replay_takes_only_the_needed_columns_and_optional_tables(tmp_path: Path) -> None:
    rows = [health_row(1) | {"extra": [1, 2]}, health_row(2, offline=2)]
    (tmp_path / "health.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "state_changes.jsonl").write_text("")
    (tmp_path / "partition_state.jsonl").write_text("")
    tables = rd.read_replay(tmp_path)
    assert tables["health"].column("offline").to_pylist() == [0, 2]
    assert "extra" not in tables["health"].column_names
    assert tables["violations"].num_rows == 0  # no file: an empty table
    (tmp_path / "partition_state.jsonl").unlink()
    with pytest.raises(rd.ReportInputError, match=r"partition_state\.jsonl is missing"):
        rd.read_replay(tmp_path)


# ------------------------------------------------ a log starting from a snapshot; brokers

# CONTRACT §1 `state` on topic_creation (a shadow's or an import's first events): the
# partitions are loaded as stored, with no partition row; the failover after them
# (SPEC §7.2) writes replica rows carrying each one's leader and ISR. Then broker 2 fails
# (SPEC §9.1): t-1, which it led, goes offline and is re-elected on 1; both ISRs lose 2.
SNAPSHOT_EVENTS = [
    {"type": "broker_startup", "broker": 1},
    {"type": "broker_startup", "broker": 2},
    {
        "type": "topic_creation",
        "topic": "t",
        "assignment": {"0": [1, 2], "1": [2, 1]},
        "state": {
            "0": {"leader": 1, "leader_epoch": 3, "isr": [1, 2], "controller_epoch": 1,
                  "partition_epoch": 4},
            "1": {"leader": 2, "leader_epoch": 2, "isr": [2, 1], "controller_epoch": 1,
                  "partition_epoch": 3},
        },
    },
    {"type": "controller_failover", "controller": 1},
    {"type": "broker_failure", "broker": 2},
]  # fmt: skip


def snapshot_report(
    tmp_path: Path, with_ts: bool, more: list[dict[str, Any]] | None = None
) -> rd.ClusterReport:
    from controller.config import Settings
    from controller.replay.command import replay

    events = tmp_path / "events"
    events.mkdir(parents=True)
    lines = [
        json.dumps(e | ({"ts": 1_700_000_000_000 + 1000 * i} if with_ts else {}))
        for i, e in enumerate(SNAPSHOT_EVENTS + (more or []))
    ]
    (events / "a.jsonl").write_text("\n".join(lines) + "\n")
    replay(Settings.load(None, ()), events, tmp_path / "out")
    return rd.cluster_report(rd.read_replay(tmp_path / "out"), "default")


def test_leaders_per_broker_count_the_partitions_a_snapshot_loaded(tmp_path: Path) -> None:
    report = snapshot_report(tmp_path, with_ts=False)
    start, worst, end = report.moments
    assert (start.seq, start.leaders, start.offline) == (4, {1: 1, 2: 1}, 0)
    assert (worst.seq, worst.leaders) == (5, {1: 2})
    assert end.leaders == {1: 2}


def test_per_broker_view_shows_a_broker_lost_and_its_leadership_moved(tmp_path: Path) -> None:
    view = snapshot_report(tmp_path, with_ts=False).brokers
    assert view is not None
    assert view.x.tolist() == [1, 2, 3, 4, 5] and view.brokers == (1, 2)
    # after the failover both brokers lead one and are in both ISRs; after the failure
    # broker 1 leads both and is the only ISR member
    assert view.leaders.tolist() == [[0, 0, 0, 1, 2], [0, 0, 0, 1, 0]]
    assert view.isr.tolist() == [[0, 0, 0, 2, 2], [0, 0, 0, 2, 0]]


def test_per_broker_view_takes_isr_changes_from_event_results(tmp_path: Path) -> None:
    """SPEC §13.1: an AlterPartition changes the ISR with no state transition; only its
    `event_results` row (no error) carries the new ISR. Broker 2 comes back, then t-0's
    and t-1's leader (1) adds it back to their ISRs."""
    extra = [
        {"type": "broker_startup", "broker": 2},
        {"type": "isr_change", "topic": "t", "partition": 0, "isr": [1, 2]},
        {"type": "isr_change", "topic": "t", "partition": 1, "isr": [1, 2]},
    ]
    view = snapshot_report(tmp_path, with_ts=False, more=extra).brokers
    assert view is not None
    assert view.isr.tolist() == [[0, 0, 0, 2, 2, 2, 2, 2], [0, 0, 0, 2, 0, 0, 1, 2]]
    assert view.leaders.tolist() == [[0, 0, 0, 1, 2, 2, 2, 2], [0, 0, 0, 1, 0, 0, 0, 0]]


def test_per_broker_view_keeps_at_most_its_columns() -> None:
    seqs = np.arange(1, 1001)
    rows = [change(s, "t", 0, "OnlinePartition", s % 3) for s in range(1, 1001)]
    view = rd.broker_view(table("state_changes", rows), seqs, columns=100)
    assert len(view.x) == 100 and view.x[-1] == 1000 and view.x[0] == 10
    # after seq 10 (10 % 3 = 1) broker 1 leads t-0, after seq 1000 (1000 % 3 = 1) too
    assert view.leaders[view.brokers.index(1), [0, -1]].tolist() == [1, 1]
    assert view.leaders.sum(axis=0).tolist() == [1] * 100


def test_x_is_the_events_time_when_every_event_has_one(tmp_path: Path) -> None:
    timed = snapshot_report(tmp_path / "a", with_ts=True)
    assert timed.x(np.array([1, 5])).tolist() == [
        np.datetime64(1_700_000_000_000, "ms"),
        np.datetime64(1_700_000_004_000, "ms"),
    ]
    untimed = snapshot_report(tmp_path / "b", with_ts=False)
    assert untimed.times is None and untimed.x(np.array([1, 5])).tolist() == [1, 5]


def test_the_first_divergences_violations_and_rejections_are_kept(tmp_path: Path) -> None:
    from controller.config import Settings
    from controller.replay.command import replay

    events = tmp_path / "events"
    events.mkdir()
    seen = {"topic": "t", "partition": 0, "leader": 2, "leader_epoch": 0, "isr": [1]}
    lines = [
        {"type": "broker_startup", "broker": 1, "seq": 3},
        {"type": "broker_startup", "broker": 2, "seq": 5},
        {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2]}, "seq": 9,
         "observed": {"partitions": [seen]}},
    ]  # fmt: skip
    text = "\n".join(json.dumps(e) for e in lines) + '\n{"type": "broker_startup"}\n'
    (events / "a.jsonl").write_text(text)
    replay(Settings.load(None, ()), events, tmp_path / "out")
    report = rd.cluster_report(rd.read_replay(tmp_path / "out"), "default")
    divergences = report.first_rows["divergences"].to_pylist()
    # SPEC §4.3: kcsim's leader is 1 with ISR [1, 2]; the observed state says 2 and [1]
    assert [(r["seq"], r["field"], r["observed"], r["simulated"]) for r in divergences] == [
        (9, "leader", "2", "1"),
        (9, "isr", "[1]", "[1,2]"),
    ]
    observed_violations = report.first_rows["violations"].to_pylist()
    assert [(r["source"], r["invariant"]) for r in observed_violations] == [
        ("observed", "leader_in_isr")
    ]
    [rejected] = report.first_rows["rejected_events"].to_pylist()
    assert rejected["source"].endswith("a.jsonl:4") and "broker" in rejected["reason"]
    assert rejected["raw"] == '{"type": "broker_startup"}'
