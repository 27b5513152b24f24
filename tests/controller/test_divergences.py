"""`observed` against kcsim's state (CONTRACT §1, §2 `divergences`, §4): the comparison of
`controller.divergence` through the simulator's front door, and `kcsim replay`'s file.

Expected states follow SPEC §4.3 (a new partition's first leader: the first live replica,
epochs 0, the first controller's epoch 1) and §6.3 (a failed follower leaves the ISR,
leader epoch + 1, znode version + 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from controller.config import Settings
from controller.replay.command import replay
from controller.simulator import BatchOutput, RawEvent, Simulator

Row = dict[str, Any]


class Shadow:
    """One cluster fed one event at a time, keeping each event's divergences."""

    def __init__(self) -> None:
        self.simulator = Simulator(Settings())
        self.lines = 0

    def send(self, event: dict[str, Any], observed: list[Row] | None = None) -> BatchOutput:
        self.lines += 1
        if observed is not None:
            event = {**event, "observed": {"partitions": observed}}
        return self.simulator.apply([RawEvent(json.dumps(event), f"shadow:{self.lines}")])

    def divergences(self, event: dict[str, Any], observed: list[Row] | None) -> list[Row]:
        return list(self.send(event, observed).appends["divergences"])


def state(topic: str, partition: int, leader: int, epoch: int, isr: list[int], **more: Any) -> Row:
    return {
        "topic": topic,
        "partition": partition,
        "leader": leader,
        "leader_epoch": epoch,
        "isr": isr,
        **more,
    }


def row(field: str, observed: str | None, simulated: str | None, **where: Any) -> Row:
    return {"field": field, "observed": observed, "simulated": simulated, **where}


def brief(rows: list[Row]) -> list[Row]:
    """The columns that differ from row to row of one event."""
    return [
        {k: r[k] for k in ("field", "observed", "simulated", "topic", "partition")} for r in rows
    ]


def started(*brokers: int) -> Shadow:
    shadow = Shadow()
    for broker in brokers:
        shadow.send({"type": "broker_startup", "broker": broker})
    return shadow


CREATE_T = {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2, 3], "1": [2, 3, 1]}}
# kcsim's state after CREATE_T (SPEC §4.3), as an observer of the real cluster writes it
AFTER_CREATE = [
    state("t", 0, 1, 0, [1, 2, 3], partition_epoch=0, controller_epoch=1, replicas=[1, 2, 3]),
    state("t", 1, 2, 0, [2, 3, 1], partition_epoch=0, controller_epoch=1, replicas=[2, 3, 1]),
]


def test_an_agreeing_observed_gives_no_rows_and_isr_order_does_not_matter() -> None:
    shadow = started(1, 2, 3)
    assert shadow.divergences(CREATE_T, AFTER_CREATE) == []
    # the same members in another order: elections read the ISR as a set (SPEC §5)
    reordered = [{**AFTER_CREATE[0], "isr": [3, 1, 2]}]
    assert shadow.divergences({"type": "auto_rebalance_check"}, reordered) == []


def test_every_field_that_differs_is_one_row_with_both_values_as_json() -> None:
    shadow = started(1, 2, 3)
    shadow.send(CREATE_T)
    # broker 3 fails: t-0 keeps leader 1, ISR [1, 2], leader epoch 1, version 1 (SPEC §6.3)
    observed = [
        state("t", 0, 2, 2, [2, 1, 3], partition_epoch=4, controller_epoch=2, replicas=[2, 1, 3])
    ]
    rows = shadow.divergences(
        {"type": "broker_failure", "broker": 3, "event_id": "f-3", "seq": 40, "ts": 7}, observed
    )
    where = {"topic": "t", "partition": 0}
    assert brief(rows) == [
        row("leader", "2", "1", **where),
        row("leader_epoch", "2", "1", **where),
        row("isr", "[2,1,3]", "[1,2]", **where),
        row("partition_epoch", "4", "1", **where),
        row("controller_epoch", "2", "1", **where),
        row("replicas", "[2,1,3]", "[1,2,3]", **where),  # order matters: the preferred leader
    ]
    assert {(r["cluster"], r["event_id"], r["seq"], r["ts"]) for r in rows} == {
        ("default", "f-3", 40, 7)
    }


def test_optional_fields_are_compared_only_when_given() -> None:
    shadow = started(1, 2, 3)
    shadow.send(CREATE_T)
    given = state("t", 0, 1, 0, [1, 2, 3], partition_epoch=None, replicas=[9])
    rows = shadow.divergences({"type": "auto_rebalance_check"}, [given])
    assert [r["field"] for r in rows] == ["replicas"]


def test_a_partition_kcsim_does_not_have() -> None:
    shadow = started(1, 2, 3)
    shadow.send(CREATE_T)
    extra = state("t", 5, 1, 0, [1], replicas=[1])
    ghost = state("ghost", 0, -1, 3, [])
    rows = shadow.divergences({"type": "auto_rebalance_check"}, [extra, ghost])
    assert brief(rows) == [
        row(
            "partition",
            '{"isr":[1],"leader":1,"leader_epoch":0,"partition":5,"replicas":[1],"topic":"t"}',
            None,
            topic="t",
            partition=5,
        ),
        row(
            "partition",
            '{"isr":[],"leader":-1,"leader_epoch":3,"partition":0,"topic":"ghost"}',
            None,
            topic="ghost",
            partition=0,
        ),
    ]


T1 = '{"controller_epoch":1,"isr":[2,3,1],"leader":2,"leader_epoch":0,"partition":1,'
T1_ROW = row(
    "partition",
    None,
    T1 + '"partition_epoch":0,"replicas":[2,3,1],"topic":"t"}',
    topic="t",
    partition=1,
)


def test_partitions_of_the_events_topic_that_observed_lacks() -> None:
    shadow = started(1, 2, 3)
    # observed covers t but lists only t-0: kcsim's t-1 is missing there
    assert brief(shadow.divergences(CREATE_T, AFTER_CREATE[:1])) == [T1_ROW]
    # an event without a topic: observed speaks of the partitions it lists, nothing more
    assert shadow.divergences({"type": "auto_rebalance_check"}, AFTER_CREATE[:1]) == []
    # a topic event whose observed does not cover its topic: nothing to say about it
    config = {"type": "topic_config_change", "topic": "t", "configs": {"retention.ms": "1"}}
    shadow.send({"type": "topic_creation", "topic": "u", "assignment": {"0": [1]}})
    assert shadow.divergences(config, [state("u", 0, 1, 0, [1])]) == []


def test_an_event_naming_a_partition_speaks_for_that_partition_only() -> None:
    shadow = started(1, 2, 3)
    shadow.send(CREATE_T)
    # an AlterPartition's observed state is the one znode it wrote: t-0 is not missing
    shrink = {"type": "isr_change", "topic": "t", "partition": 1, "isr": [2, 3]}
    after = state("t", 1, 2, 0, [2, 3], partition_epoch=1)  # leader epoch kept (SPEC §13)
    assert shadow.divergences(shrink, [after]) == []
    # nothing observed at all: of the topic's partitions, only the event's is missing
    grow = {"type": "isr_change", "topic": "t", "partition": 1, "isr": [2, 3, 1]}
    rows = shadow.divergences(grow, [])
    assert [(r["field"], r["topic"], r["partition"], r["observed"]) for r in rows] == [
        ("partition", "t", 1, None)
    ]


def test_an_empty_observed_on_a_topic_event_means_gone_there_still_here() -> None:
    shadow = started(1, 2, 3)
    shadow.send(CREATE_T)
    # replay mode: kcsim's deletion waits for the brokers' StopReplica answers (SPEC §15),
    # so its partitions, NonExistent, are still stored while the real topic is gone
    rows = shadow.divergences({"type": "topic_deletion", "topic": "t"}, [])
    assert [(r["field"], r["topic"], r["partition"], r["observed"]) for r in rows] == [
        ("partition", "t", 0, None),
        ("partition", "t", 1, None),
    ]
    assert json.loads(rows[1]["simulated"])["leader"] == -1  # its replicas went offline
    # an empty observed on an event without a topic compares nothing
    assert shadow.divergences({"type": "auto_rebalance_check"}, []) == []


def test_a_partition_being_deleted_is_compared_field_by_field() -> None:
    shadow = started(1, 2, 3)
    shadow.send(CREATE_T)
    deleted = shadow.send({"type": "topic_deletion", "topic": "t"})
    assert not deleted.appends["divergences"]  # no observed, no rows
    # during the deletion the state znode (and kcsim's row) keep the last leader and ISR
    record = shadow.simulator.context("default").topics["t"].partitions[0]
    assert record.state.value == "NonExistentPartition"
    leadership = record.leadership
    assert leadership is not None
    same = state("t", 0, leadership.leader, leadership.leader_epoch, list(leadership.isr))
    assert shadow.divergences({"type": "auto_rebalance_check"}, [same]) == []


def test_a_rejected_event_that_carries_observed_is_an_event_row() -> None:
    shadow = started(1, 2, 3)
    out = shadow.send(
        {"type": "topic_deletion", "topic": "ghost", "event_id": "d-1", "ts": 9},
        [state("ghost", 0, 1, 0, [1])],
    )
    (rejected,) = out.appends["rejected_events"]
    (event_row,) = out.appends["divergences"]
    assert event_row == {
        "cluster": "default",
        "event_id": "d-1",
        "seq": None,  # a rejected line gets no seq
        "ts": 9,
        "topic": None,
        "partition": None,
        "field": "event",
        "observed": '{"partitions":[{"isr":[1],"leader":1,"leader_epoch":0,'
        '"partition":0,"topic":"ghost"}]}',
        "simulated": json.dumps(rejected["reason"], ensure_ascii=False),
    }
    # a duplicate, and a line with a bad field but a well-formed observed, alike
    shadow.send({"type": "broker_failure", "broker": 3, "event_id": "x"})
    duplicate = shadow.send({"type": "broker_failure", "broker": 3, "event_id": "x"}, [])
    (event_row,) = duplicate.appends["divergences"]
    assert event_row["observed"] == '{"partitions":[]}'
    assert "duplicate event_id 'x'" in json.loads(event_row["simulated"])
    bad = shadow.send({"type": "broker_failure", "broker": "3", "cluster": "c2"}, [])
    (event_row,) = bad.appends["divergences"]
    assert (event_row["cluster"], event_row["field"]) == ("c2", "event")
    assert "field 'broker'" in json.loads(event_row["simulated"])


def test_a_malformed_observed_is_only_a_rejected_event() -> None:
    shadow = started(1, 2, 3)
    out = shadow.send({"type": "auto_rebalance_check"}, [{"topic": "t"}])
    (rejected,) = out.appends["rejected_events"]
    assert rejected["reason"] == "field 'observed.partitions[0]' is missing 'partition'"
    assert out.appends["divergences"] == []
    assert out.appends["applied_events"] == []  # the event itself is not applied


def test_observed_never_changes_what_kcsim_does() -> None:
    plain, shadowed = started(1, 2, 3), started(1, 2, 3)
    wrong = [state("t", 0, 3, 9, [3], replicas=[3])]
    for event in (CREATE_T, {"type": "broker_failure", "broker": 1}):
        a, b = plain.send(event), shadowed.send(event, wrong)
        for table in ("controller_requests", "state_changes", "event_results", "applied_events"):
            assert list(a.appends[table]) == list(b.appends[table]), table
        assert a.upserts == b.upserts


def test_replay_writes_divergences_jsonl(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    lines = [
        {"type": "broker_startup", "broker": b, "seq": b} for b in (1, 2, 3)
    ] + [
        {**CREATE_T, "seq": 4, "observed": {"partitions": AFTER_CREATE}},
        {"type": "broker_failure", "broker": 3, "seq": 5, "ts": 11,
         "observed": {"partitions": [state("t", 0, 1, 1, [2, 1], partition_epoch=1)]}},
    ]  # fmt: skip
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    summary = replay(Settings(), events, tmp_path / "out")
    assert summary.rejected == 0
    assert (tmp_path / "out" / "divergences.jsonl").read_text() == ""

    lines[-1]["observed"] = {"partitions": [state("t", 0, 2, 1, [2, 1])]}
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    replay(Settings(), events, tmp_path / "out")
    assert (tmp_path / "out" / "divergences.jsonl").read_text() == (
        '{"cluster":"default","event_id":"default:5","seq":5,"ts":11,"topic":"t",'
        '"partition":0,"field":"leader","observed":"2","simulated":"1"}\n'
    )
