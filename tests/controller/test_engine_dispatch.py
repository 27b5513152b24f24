"""The front door's engine dispatch (CONTRACT §5): `kcsim.engine=kraft` runs a cluster
through the KRaft engine and writes its tables (metadata_records, partition_state with
ELR columns, broker statuses); a restart from the stored tables continues exactly; stored
tables of one engine stop a run under the other."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.config import Settings
from controller.simulator import EngineMismatch, RawEvent, Simulator
from schemas import APPEND_TABLES, STATE_TABLES, TABLES
from streaming.cli import main

KRAFT = Settings(engine="kraft", min_insync_replicas=2)
# SPEC-KRAFT §8, §9, §6, §7, §19: RF 3 with min ISR 2; broker 1 fails (ISR shrink, no
# leader epoch bump, D1), broker 2 shuts down (leadership taken at once), fails, then
# re-registers fenced and is unfenced.
EVENTS = [
    {"type": "broker_startup", "broker": 1, "rack": "a"},
    {"type": "broker_startup", "broker": 2, "rack": "b"},
    {"type": "broker_startup", "broker": 3, "rack": "c"},
    {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2, 3], "1": [2, 3, 1]}},
    {"type": "broker_failure", "broker": 1},
    {"type": "controlled_shutdown", "broker": 2},
    {"type": "broker_failure", "broker": 2},
    {"type": "broker_failure", "broker": 3},
    {"type": "broker_registration", "broker": 2, "previous_broker_epoch": 2},
    {"type": "broker_unfence", "broker": 2},
    {"type": "unclean_election_check"},
    {"type": "cluster_config_change", "configs": {"min.insync.replicas": "1"}},
    {"type": "broker_unregistration", "broker": 1},
]


def lines(events: list[dict[str, Any]]) -> list[RawEvent]:
    return [RawEvent(json.dumps(e), f"events:{n}") for n, e in enumerate(events, 1)]


def read(out: Path, table: str) -> list[dict[str, Any]]:
    text = (out / f"{table}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def run(simulator: Simulator, events: list[RawEvent]) -> dict[str, list[dict[str, Any]]]:
    output = simulator.apply(events)
    return {name: list(rows) for name, rows in output.appends.items()}


def test_replay_under_kraft_writes_records_elr_and_broker_statuses(tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    source.write_text("".join(json.dumps(e) + "\n" for e in EVENTS), encoding="utf-8")
    out = tmp_path / "out"
    status = main(
        ["replay", str(source), "--out", str(out), "--quiet", "--engine", "kraft",
         "--set", "min.insync.replicas=2"]
    )  # fmt: skip
    assert status == 0
    for table in TABLES.values():
        for row in read(out, table.name):
            assert tuple(row) == table.column_names
    records = read(out, "metadata_records")
    assert records[:2] == [
        {"cluster": "default", "event_id": "default:1", "seq": 1, "record_seq": 0,
         "type": "RegisterBrokerRecord",
         "record": '{"brokerId":1,"brokerEpoch":0,"rack":"a","fenced":true,'
                   '"inControlledShutdown":false}', "ts": None},
        {"cluster": "default", "event_id": "default:1", "seq": 1, "record_seq": 1,
         "type": "BrokerRegistrationChangeRecord",
         "record": '{"brokerId":1,"brokerEpoch":0,"fenced":-1}', "ts": None},
    ]  # fmt: skip
    by_event: dict[str, list[int]] = {}
    for row in records:
        by_event.setdefault(row["event_id"], []).append(row["record_seq"])
    assert all(seqs == list(range(len(seqs))) for seqs in by_event.values())
    # the fence of broker 1 (an ISR shrink at MV 4.1: leader epoch kept, partition epoch +1)
    fence = [json.loads(r["record"]) for r in records if r["event_id"] == "default:5"]
    assert fence[0] == {"partitionId": 0, "topic": "t", "isr": [2, 3], "leader": 2}
    assert not read(out, "controller_requests") and not read(out, "replica_state")
    assert all(r["entity"] == "partition" for r in read(out, "state_changes"))
    partitions = {(r["topic"], r["partition"]): r for r in read(out, "partition_state")}
    assert set(partitions) == {("t", 0), ("t", 1)}
    assert all(isinstance(r["elr"], list) and isinstance(r["last_known_elr"], list)
               for r in partitions.values())  # fmt: skip
    brokers = {r["broker"]: r["status"] for r in read(out, "brokers")}
    assert brokers == {2: "live", 3: "fenced"}  # 1 unregistered: no row
    health = read(out, "health")
    assert [h["requests"] for h in health] == [0] * len(EVENTS)
    clusters = read(out, "clusters")
    assert [(c["cluster"], c["engine"]) for c in clusters] == [("default", "kraft")]
    assert json.loads(clusters[0]["kraft_state"])  # the engine's state, for a restart


def test_state_rows_follow_the_engine_views() -> None:
    simulator = Simulator(KRAFT)
    run(simulator, lines(EVENTS))
    engine = simulator.kraft("default").controller
    rows = {(r["topic"], r["partition"]): r for r in simulator.table_rows("partition_state")}
    for view in engine.partitions():
        row = rows[(view.topic, view.partition)]
        assert (row["leader"], row["leader_epoch"], row["partition_epoch"]) == (
            view.leader, view.leader_epoch, view.partition_epoch,
        )  # fmt: skip
        assert (row["isr"], row["elr"], row["last_known_elr"]) == (
            list(view.isr), list(view.elr), list(view.last_known_elr),
        )  # fmt: skip
        assert row["state"] == ("OnlinePartition" if view.leader >= 0 else "OfflinePartition")
    assert {r["broker"]: r["status"] for r in simulator.table_rows("brokers")} == {
        b.broker: b.status for b in engine.brokers()
    }


def _stored(simulator: Simulator, appends: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    tables: dict[str, Any] = {t.name: list(simulator.table_rows(t.name)) for t in STATE_TABLES}
    tables["applied_events"] = appends["applied_events"]
    tables["health"] = appends["health"]
    return tables


@pytest.mark.parametrize("split", [3, 7, 10])
def test_restart_from_tables_equals_an_uninterrupted_run(split: int) -> None:
    events = lines(EVENTS)
    whole = Simulator(KRAFT)
    expected = run(whole, events)
    first = Simulator(KRAFT)
    before = run(first, events[:split])
    restarted = Simulator.from_tables(KRAFT, _stored(first, before))
    after = run(restarted, events[split:])
    for table in APPEND_TABLES:
        assert before[table.name] + after[table.name] == expected[table.name], table.name
    for table in STATE_TABLES:
        assert list(restarted.table_rows(table.name)) == list(whole.table_rows(table.name))
    # a replayed event is still a duplicate after the restart
    replayed = lines([{**EVENTS[0], "event_id": "default:1"}])
    again = restarted.apply(replayed).appends["rejected_events"]
    assert "duplicate event_id 'default:1'" in again[0]["reason"]


@pytest.mark.parametrize(("written", "running"), [("zk", "kraft"), ("kraft", "zk")])
def test_tables_of_the_other_engine_stop_the_run(written: str, running: str) -> None:
    settings = Settings(engine=written)
    simulator = Simulator(settings)
    appends = run(simulator, lines(EVENTS[:4]))
    tables = _stored(simulator, appends)
    with pytest.raises(EngineMismatch, match=f"cluster 'default' \\({written}\\).*={running}"):
        Simulator.from_tables(Settings(engine=running), tables)
    # the same engine continues
    assert Simulator.from_tables(settings, tables).clusters() == ["default"]


def test_a_lake_before_engines_were_named_is_zk() -> None:
    simulator = Simulator(Settings())
    appends = run(simulator, lines(EVENTS[:4]))
    tables = _stored(simulator, appends)
    tables["clusters"] = [{**r, "engine": None} for r in tables["clusters"]]
    with pytest.raises(EngineMismatch, match="'default' \\(zk\\)"):
        Simulator.from_tables(KRAFT, tables)


def test_the_engine_rejects_and_order_rules_hold_under_kraft() -> None:
    simulator = Simulator(KRAFT)
    run(simulator, lines(EVENTS[:4]))
    out = run(
        simulator,
        lines([
            {"type": "topic_deletion", "topic": "nope"},
            {"type": "broker_startup", "broker": 4, "seq": 2, "event_id": "late"},
        ]),
    )  # fmt: skip
    reasons = [r["reason"] for r in out["rejected_events"]]
    assert "nope" in reasons[0]
    assert reasons[1] == "seq 2 does not increase: the cluster's last applied seq is 4"
    assert not out["metadata_records"] and not out["applied_events"]


# ------------------------------------------------------------- the KRaft corpus


def _corpus_events() -> list[RawEvent]:
    from controller.replay.event_files import read_events
    from tests.support.corpus import KRAFT_CORPUS

    return list(read_events(KRAFT_CORPUS))


def test_the_kraft_corpus_reaches_every_path_the_parity_tests_compare() -> None:
    """tests/data/corpus-kraft, the KRaft parity corpus: every event type, every record
    type, ELR and last-known-leader elections (SPEC-KRAFT §4.3, §9), unclean ones (§18),
    refusals, bad lines, divergences of the KRaft fields and an observed violation."""
    from schemas import EVENT_TYPES
    from tests.support.corpus import KRAFT, simulate

    events = _corpus_events()
    types = {json.loads(e.raw)["type"] for e in events if e.raw.startswith("{")}
    assert types == set(EVENT_TYPES)
    rows = simulate(events, settings=KRAFT)
    assert {r["type"] for r in rows["metadata_records"]} == {
        "RegisterBrokerRecord", "BrokerRegistrationChangeRecord", "UnregisterBrokerRecord",
        "TopicRecord", "PartitionRecord", "PartitionChangeRecord", "RemoveTopicRecord",
        "ConfigRecord", "ClearElrRecord", "FeatureLevelRecord",
    }  # fmt: skip
    last = {r["cluster"]: r for r in rows["health"]}["default"]
    assert last["elr_elections"] > 0 and last["last_known_leader_elections"] > 0
    assert last["unclean_elections"] > last["last_known_leader_elections"]
    assert len(rows["rejected_events"]) == 4
    assert {r["error"] for r in rows["event_results"]} >= {
        "INVALID_REPLICA_ASSIGNMENT", "INVALID_REQUEST", "PREFERRED_LEADER_NOT_AVAILABLE",
        "ELECTION_NOT_NEEDED", "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_CONFIG",
    }  # fmt: skip
    assert {r["field"] for r in rows["divergences"]} >= {
        "elr", "last_known_elr", "leader_recovery_state", "broker", "isr",
    }  # fmt: skip
    assert [(v["source"], v["invariant"]) for v in rows["violations"]] == [
        ("observed", "leader_in_isr")
    ]
    assert {r["status"] for r in rows["brokers"]} == {"live", "fenced", "shutting_down"}
    assert {r["cluster"] for r in rows["clusters"]} == {"default", "east"}
    assert not rows["controller_requests"] and not rows["replica_state"]


def test_a_restart_anywhere_in_the_kraft_corpus_equals_one_run() -> None:
    """What `kcsim run` does on a restart (Simulator.from_tables), at every event. (A
    batch's rows come cluster by cluster: each cluster's in order, the whole as a set.)"""
    from tests.support.corpus import KRAFT
    from tests.support.spark.lake_tables import canonical

    def by_cluster(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        grouped: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            grouped.setdefault(row["cluster"], []).append(row)
        return grouped

    events = _corpus_events()
    whole = Simulator(KRAFT)
    expected = run(whole, events)
    for split in range(1, len(events)):
        first = Simulator(KRAFT)
        before = run(first, events[:split])
        restarted = Simulator.from_tables(KRAFT, _stored(first, before))
        after = run(restarted, events[split:])
        for table in APPEND_TABLES:
            joined = before[table.name] + after[table.name]
            assert by_cluster(joined) == by_cluster(expected[table.name]), (split, table.name)
        for table in STATE_TABLES:
            got, want = restarted.table_rows(table.name), whole.table_rows(table.name)
            assert canonical(list(got)) == canonical(list(want)), (split, table.name)


def _b2e(simulator: Simulator) -> list[Any]:
    """The engine's B2E indexes (the active controller's, the whole history's, each deposed
    controller's) with each entry list as a sorted multiset (SPEC-KRAFT §2.3: their stale
    entries and phantom partition 0s decide later elections)."""
    rc = simulator.kraft("default").controller.replication_control

    def multiset(b2e: dict[int, dict[str, list[int]]]) -> dict[int, dict[str, list[int]]]:
        index = {b: {t: sorted(ps) for t, ps in ts.items() if ps} for b, ts in b2e.items()}
        return {b: ts for b, ts in index.items() if ts}  # (an emptied map walks as nothing)

    nodes = {node: multiset(index) for node, index in rc.b2e_nodes.items()}
    return [multiset(rc.b2e), multiset(rc.b2e_history), nodes]


def _split_restart_matches(settings: Settings, events: list[RawEvent], splits: list[int]) -> None:
    whole = Simulator(settings)
    expected = run(whole, events)
    for split in splits:
        first = Simulator(settings)
        before = run(first, events[:split])
        restarted = Simulator.from_tables(settings, _stored(first, before))
        assert _b2e(restarted) == _b2e(first), split
        after = run(restarted, events[split:])
        for table in APPEND_TABLES:
            assert before[table.name] + after[table.name] == expected[table.name], (
                split,
                table.name,
            )
        for table in STATE_TABLES:
            assert list(restarted.table_rows(table.name)) == list(whole.table_rows(table.name))
        assert _b2e(restarted) == _b2e(whole), split


@pytest.mark.parametrize("seed", range(60))
def test_restart_continues_random_sequences_exactly(seed: int) -> None:
    """SPEC-KRAFT §2.3, §19, §25: the oracle's random legal sequences (ELR, ClearElr's stale
    B2E entries, unclean returns, failovers), restarted from the tables at three points,
    give what one uninterrupted run gives."""
    from tests.support.kraft.kraft_sequences import random_sequence

    sequence = random_sequence(seed)
    settings = Settings.from_properties({"kcsim.engine": "kraft", **sequence.settings})
    events = lines(list(sequence.events))
    size = len(events)
    _split_restart_matches(settings, events, sorted({1, size // 3, 2 * size // 3, size - 1}))


def test_restart_of_a_larger_cluster_after_an_elr_storm_is_exact() -> None:
    """SPEC-KRAFT §19, §16.3 and §2.3 at a larger size: 12 brokers, 600 partitions, RF 3,
    min.insync.replicas 2; brokers lost two at a time (ISR into ELR, then leaderless), a
    min.insync.replicas change (ClearElr, B2E left stale), unclean returns and an unfence;
    a restart from the tables between any two steps continues exactly, each controller's
    ELR index included (§18: failovers back and forth). The stored `kraft_state` stays
    small: the partitions come from partition_state."""
    events: list[dict[str, Any]] = [{"type": "broker_startup", "brokers": list(range(12))}]
    for n in range(3):
        events.append(
            {"type": "topic_creation", "topic": f"t{n}", "partitions": 200, "replication_factor": 3}
        )
    for pair in ((0, 1), (2, 3), (4, 5)):
        events.append({"type": "broker_failure", "brokers": list(pair)})
    events.append(
        {"type": "topic_config_change", "topic": "t1", "configs": {"min.insync.replicas": "1"}}
    )
    events.append({"type": "controller_failover", "controller": 1000})
    events.append({"type": "broker_failure", "brokers": [6, 7]})
    events.append({"type": "controller_failover", "controller": 1001})
    events.append({"type": "broker_registration", "broker": 0})
    events.append({"type": "broker_unfence", "broker": 0})
    events.append({"type": "broker_startup", "brokers": [1, 2]})
    events.append({"type": "cluster_config_change", "configs": {"min.insync.replicas": "3"}})
    events.append({"type": "controller_failover", "controller": 1000})
    events.append({"type": "broker_startup", "brokers": [3, 4, 5, 6, 7]})
    events.append({"type": "leader_election", "election": "preferred"})
    raw = lines(events)
    _split_restart_matches(KRAFT, raw, list(range(2, len(raw))))
    simulator = Simulator(KRAFT)
    run(simulator, raw)
    (row,) = simulator.table_rows("clusters")
    assert len(row["kraft_state"]) < 8_000  # O(brokers), not the 600 partitions
