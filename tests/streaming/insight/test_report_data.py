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
