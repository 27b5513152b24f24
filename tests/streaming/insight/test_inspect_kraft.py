"""`kcsim state` and `kcsim history` on a KRaft cluster's lake (CONTRACT §5): the engine,
the broker statuses (live, fenced, shutting_down), and each partition's ELR, last known
ELR and leader recovery state (SPEC-KRAFT §4), now, as of every batch, and change by
change. The lake is the KRaft corpus written batch by batch with delta-rs
(tests/support/spark/native_lake.py), read without Spark; the expected text comes from the core
driven over the same batches."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from controller.replay.event_files import read_events
from controller.simulator import Simulator
from schemas import TABLES
from streaming.insight.history import native_history, show_history
from streaming.insight.state import native_state, write_state
from streaming.lake.local_reader import LakeReader
from streaming.lake.tables import parse_tag
from tests.support.corpus import CORPUS, KRAFT, KRAFT_CORPUS
from tests.support.spark.native_lake import write_lake

BATCH = 9  # events a batch


def batches(corpus: Path) -> list[list[Any]]:
    events = list(read_events(corpus))
    return [events[i : i + BATCH] for i in range(0, len(events), BATCH)]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kraft-lake")
    write_lake(root, batches(KRAFT_CORPUS), KRAFT)
    return root


def after(batch: int, corpus: Path = KRAFT_CORPUS) -> Simulator:
    simulator = Simulator(KRAFT)
    for events in batches(corpus)[: batch + 1]:
        simulator.apply(events)
    return simulator


def core_state(simulator: Simulator) -> str:
    def read(table: str, version: int | None, cluster: str | None, columns: Any) -> Any:
        names = [c for c in TABLES[table].column_names if columns is None or c in columns]
        return [{c: r[c] for c in names} for r in simulator.table_rows(table)], names

    out = io.StringIO()
    write_state(read, {}, None, None, out)
    return out.getvalue()


def state_text(lake: Path, as_of: str | None = None) -> str:
    """The state as `kcsim state` prints it, less the "as of" line and the result counts
    (tests/streaming/insight/test_show.py checks those)."""
    out = io.StringIO()
    assert native_state(str(lake), as_of, None, out)
    text, counts = out.getvalue().rsplit("\nresults: ", 1)
    assert counts.startswith("divergences ")
    return text.split("\n", 1)[1] if as_of else text


def test_state_shows_the_engine_broker_statuses_and_the_elr_beside_the_isr(lake: Path) -> None:
    text = state_text(lake)
    assert text == core_state(after(len(batches(KRAFT_CORPUS)) - 1))
    clusters, brokers, _, partitions = text.strip("\n").split("\n\n")
    assert clusters.splitlines()[1].split()[:2] == ["cluster", "engine"]
    assert {line.split()[1] for line in clusters.splitlines()[2:]} == {"kraft"}
    statuses = {line.split()[3] for line in brokers.splitlines()[2:]}
    assert statuses == {"live", "fenced", "shutting_down"}
    header = partitions.splitlines()[1].split()
    at = header.index("isr")
    assert header[at : at + 4] == ["isr", "elr", "last_known_elr", "leader_recovery_state"]
    assert "RECOVERING" in partitions


def test_state_as_of_every_batch_is_the_core_s_state_after_it(lake: Path) -> None:
    """Time travel over a KRaft lake: each partition_state version is the state after the
    batch its commit is tagged with, ELR and statuses included; some hold an ELR."""
    commits = LakeReader(str(lake)).history("partition_state")
    with_elr = 0
    for version, _, tag in commits[1:]:
        parsed = parse_tag(tag)
        assert parsed is not None
        expected = core_state(after(parsed[1]))
        assert state_text(lake, str(version)) == expected, version
        with_elr += any(r["elr"] for r in after(parsed[1]).table_rows("partition_state"))
    assert len(commits) > 4 and with_elr > 0


def test_history_shows_elr_recovery_and_the_replicas_not_live(lake: Path) -> None:
    """SPEC-KRAFT §8-§9: orders-1 (RF 3, min ISR 2) loses its leader and ISR to fencing
    (ELR [2,3], last known ELR [2]), then broker 3, which shut down cleanly, is elected
    from the ELR; clicks-0 is restored to its last known leader, RECOVERING."""
    commits = {v: parse_tag(tag) for v, _, tag in LakeReader(str(lake)).history("partition_state")}
    seen_not_live = seen_recovering = 0
    for topic, partition in (("orders", 1), ("clicks", 0), ("orders", 3)):
        changes = native_history(str(lake), "default", topic, partition)
        assert changes
        for change in changes:
            if change["change"] == "delete":
                continue
            batch = commits[change["version"]]
            assert batch is not None
            simulator = after(batch[1])
            row = next(
                r
                for r in simulator.table_rows("partition_state")
                if (r["cluster"], r["topic"], r["partition"]) == ("default", topic, partition)
            )
            assert (change["elr"], change["last_known_elr"], change["recovery"]) == (
                row["elr"],
                row["last_known_elr"],
                row["leader_recovery_state"],
            )
            status = {
                b["broker"]: b["status"]
                for b in simulator.table_rows("brokers")
                if b["cluster"] == "default"
            }
            not_live = [r for r in row["replicas"] if status.get(r) != "live"]
            assert change["replicas_not_live"] == " ".join(
                f"{r}:{status.get(r, 'unregistered')}" for r in not_live
            )
            seen_not_live += bool(not_live)
            seen_recovering += row["leader_recovery_state"] == "RECOVERING"
    assert seen_not_live and seen_recovering
    orders = native_history(str(lake), "default", "orders", 1)
    assert [(c["leader"], c["elr"], c["last_known_elr"]) for c in orders][1:3] == [
        (-1, [2, 3], [2]),
        (3, [], []),
    ]
    out = io.StringIO()
    show_history(orders, out)
    header = out.getvalue().splitlines()[0].split()
    assert header[header.index("isr") + 1 : header.index("isr") + 5] == [
        "elr", "last_known_elr", "recovery", "replicas_not_live",
    ]  # fmt: skip


def test_a_zk_lake_shows_no_elr_columns(tmp_path: Path) -> None:
    from controller.config import Settings

    write_lake(tmp_path, batches(CORPUS), Settings())
    text = state_text(tmp_path)
    clusters, _, _, partitions = text.strip("\n").split("\n\n")
    header = partitions.splitlines()[1].split()
    assert "elr" not in header and "leader_recovery_state" in header
    assert {line.split()[1] for line in clusters.splitlines()[2:]} == {"zk"}
    changes = native_history(str(tmp_path), "default", "orders", 0)
    assert changes and "elr" not in changes[0] and "replicas_not_live" not in changes[0]
