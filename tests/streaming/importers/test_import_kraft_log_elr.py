"""Eligible leader replicas (KIP-966, on by default in Kafka 4.1.1) on a real KRaft
cluster, imported and replayed through kcsim (ZooKeeper mode, SPEC §5.1 offline election,
§9 controlled shutdown): a partition's ISR shrinks below `min.insync.replicas`, its last
ISR member shuts down, and the replica that left the ISR first comes back first. KRaft
elects it from the ELR; ZooKeeper mode has no ELR and, with unclean election off, leaves
the partition without a leader. The cluster: three nodes, node 1 the only quorum voter,
so nodes 2 and 3 (the partition's replicas) can both be down while the quorum stands.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.cli import main
from streaming.local_clusters import kraft_cluster as cluster
from tests.support.divergence_classes import divergence_classes
from tests.support.kraft_cluster import KraftCluster, wait_for

pytestmark = pytest.mark.kraft

UNCLEAN = "unclean.leader.election.enable"


@pytest.fixture(scope="module")
def elr_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftCluster]:
    data_dir = tmp_path_factory.mktemp("kafka-kraft-elr")
    bootstrap = cluster.start(data_dir, nodes=3, voters=1)
    try:
        yield KraftCluster(data_dir, bootstrap, cluster.load_layout(data_dir).node_ids)
    finally:
        cluster.stop(data_dir)


def run_scenario(kraft: KraftCluster) -> None:
    kraft.create_topic("elr", {0: [2, 3]}, {"min.insync.replicas": "2"})
    kraft.wait_isr_full("elr")
    # clean (controlled) shutdowns: a SIGKILLed broker's re-registration counts as an
    # unclean shutdown, which takes it out of the ELR (its log may have lost data)
    # node 3 leaves: the ISR [2] is below min.insync.replicas, so 3 goes to the ELR
    kraft.shutdown(3)
    kraft.wait_fenced(3)
    kraft.wait_partitions("elr", lambda ps: ps[0].isr == {2}, "ISR [2]")
    # the last ISR member leaves: no leader (KRaft empties the ISR, 2 joins the ELR)
    kraft.shutdown(2)
    kraft.wait_fenced(2)
    kraft.wait_partitions("elr", lambda ps: ps[0].leader == -1, "no leader")
    # node 3 comes back first: KRaft elects it from the ELR
    kraft.start(3)
    kraft.wait_partitions("elr", lambda ps: ps[0].leader == 3, "leader 3")
    kraft.start(2)
    kraft.wait_isr_full("elr")
    # a broker-level unclean.leader.election.enable set (to its default: no election
    # changes): kcsim takes it from its settings, so the import names it on stderr
    kraft.alter_broker_configs("1", {UNCLEAN: "false"})


def import_log(kraft: KraftCluster, tmp_path: Path) -> Path:
    out = tmp_path / "events.jsonl"
    copy = tmp_path / "metadata"

    def imported() -> bool:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(kraft.layout().metadata_log(1), copy)  # node 1: the only voter
        return main(["import", "kraft-log", str(copy), "--out", str(out), "--quiet"]) == 0

    wait_for(imported, "a whole copy of the metadata log")
    return out


# (event type, field) where a leader or ISR difference first appears or changes (README:
# "kcsim import kraft-log", the ZooKeeper-vs-KRaft table); the epochs differ along with
# them (a write one side makes and the other not), and ZooKeeper mode's epoch bump on an
# ISR shrink is the main day's class
EXPECTED_CLASSES = {
    # the controlled shutdown of the last ISR member: KRaft takes the leadership away and
    # empties the ISR (ELR on: 2 joins the ELR); ZooKeeper mode finds no other live ISR
    # member to move it to and leaves leader 2, ISR [2]
    ("controlled_shutdown", "leader"),
    ("controlled_shutdown", "isr"),
    # node 3 back: KRaft elects it from the ELR; ZooKeeper mode, with unclean election off,
    # has no leader to elect (3 is not in its ISR [2])
    ("broker_startup", "leader"),
    ("broker_startup", "isr"),
    # node 2 back: ZooKeeper mode elects 2 (its ISR), so the leaders differ from there on
    ("isr_change", "leader"),
}


def test_an_election_from_the_elr_is_no_election_in_zookeeper_mode(elr_cluster, tmp_path, capsys):
    try:
        run_scenario(elr_cluster)
    finally:
        elr_cluster.ensure_all_up()
    events_file = import_log(elr_cluster, tmp_path)
    # printed even with --quiet: a replay needs it to elect as the cluster did
    note = f"broker-level {UNCLEAN} (node 1) set to false"
    assert note in capsys.readouterr().err
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    out = tmp_path / "tables"
    assert main(["replay", str(events_file), "--out", str(out)]) == 0
    tables = {p.stem: [json.loads(x) for x in p.read_text().splitlines()] for p in out.iterdir()}
    assert tables["rejected_events"] == []
    rows = [r for r in tables["divergences"] if r["topic"] == "elr"]
    classes = divergence_classes(events, rows)
    assert {c for c in classes if c[1] in ("leader", "isr")} == EXPECTED_CLASSES
    by_seq = {e["seq"]: e for e in events}

    def values(kind: str, broker: int) -> dict[str, tuple[object, object]]:
        return {
            r["field"]: (json.loads(r["observed"]), json.loads(r["simulated"]))
            for r in rows
            if (by_seq[r["seq"]]["type"], by_seq[r["seq"]].get("broker")) == (kind, broker)
        }

    # (observed in KRaft, simulated by kcsim)
    shutdown = values("controlled_shutdown", 2)
    assert (shutdown["leader"], shutdown["isr"]) == ((-1, 2), ([], [2]))
    elected = values("broker_startup", 3)
    assert (elected["leader"], elected["isr"]) == ((3, -1), ([3], [2]))
