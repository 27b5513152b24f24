"""Eligible leader replicas (KIP-966, on by default in Kafka 4.1.1) and unclean elections on
a real KRaft cluster, imported (the KRaft controller's inputs, CONTRACT §5) and replayed
(SPEC-KRAFT §19, §20, §15.1, §9): a partition's ISR shrinks below `min.insync.replicas`,
its last ISR member shuts down, and the replica that left the ISR first comes back first:
KRaft elects it from the ELR. Then both replicas are killed (unclean shutdowns: their
re-registrations take them out of the ELR), one comes back, and an unclean ElectLeaders
elects it (RECOVERING, until its AlterPartition ends the recovery). The cluster: three
nodes, node 1 the only quorum voter, so nodes 2 and 3 (the partition's replicas) can both
be down while the quorum stands. Under `kcsim.engine=kraft` the replay leaves no
divergence; under `zk` (no ELR) the leaders and ISRs differ exactly where the docs say.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.cli import main
from tests.support.clusters.kraft_cluster import KraftCluster, own_kraft_cluster, wait_for
from tests.support.differential.divergence_classes import divergence_classes

pytestmark = pytest.mark.kraft

UNCLEAN = "unclean.leader.election.enable"


@pytest.fixture(scope="module")
def elr_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftCluster]:
    with own_kraft_cluster(tmp_path_factory, "kafka-kraft-elr", voters=1) as kraft:
        yield kraft


def run_scenario(kraft: KraftCluster) -> None:
    kraft.create_topic("elr", {0: [2, 3]}, {"min.insync.replicas": "2"})
    kraft.wait_isr_full("elr")
    # clean (controlled) shutdowns: node 3 leaves, the ISR [2] is below
    # min.insync.replicas, so 3 goes to the ELR
    kraft.shutdown(3)
    kraft.wait_fenced(3)
    kraft.wait_partitions("elr", lambda ps: ps[0].isr == {2}, "ISR [2]")
    # the last ISR member leaves: no leader (KRaft empties the ISR, 2 joins the ELR)
    kraft.shutdown(2)
    kraft.wait_fenced(2)
    kraft.wait_partitions("elr", lambda ps: ps[0].leader == -1, "no leader")
    # node 3 comes back first: KRaft elects it from the ELR at its unfence
    kraft.start(3)
    kraft.wait_partitions("elr", lambda ps: ps[0].leader == 3, "leader 3")
    kraft.start(2)
    kraft.wait_isr_full("elr")
    # a node-level unclean.leader.election.enable set (to its default: no election
    # changes): a cluster_config_change of node 1
    kraft.alter_broker_configs("1", {UNCLEAN: "false"})
    # unclean shutdowns (SIGKILL) of the leader 3, then of 2: no leader, ELR [3, 2]
    kraft.kill(3)
    kraft.wait_fenced(3)
    kraft.wait_partitions("elr", lambda ps: ps[0].leader == 2, "leader 2")
    kraft.kill(2)
    kraft.wait_fenced(2)
    kraft.wait_partitions("elr", lambda ps: ps[0].leader == -1, "no leader")
    # 3's re-registration is unclean (out of the ELR); its unfence elects nobody, so an
    # unclean ElectLeaders elects it (RECOVERING), and its AlterPartition recovers
    kraft.start(3)
    kraft.elect_unclean("elr", [0])
    kraft.wait_partitions("elr", lambda ps: ps[0].leader == 3, "leader 3, unclean")
    kraft.start(2)
    kraft.wait_isr_full("elr")


def import_log(kraft: KraftCluster, tmp_path: Path) -> Path:
    out = tmp_path / "events.jsonl"
    copy = tmp_path / "metadata"

    def imported() -> bool:
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(kraft.layout().metadata_log(1), copy)  # node 1: the only voter
        return main(["import", "kraft-log", str(copy), "--out", str(out), "--quiet"]) == 0

    wait_for(imported, "a whole copy of the metadata log")
    return out


# (event type, field) where a leader or ISR difference first appears or changes under the
# ZooKeeper-mode controller (docs/guide/importing-logs.md, SPEC-KRAFT §24); the epochs differ
# along with them (a write one side makes and the other not)
EXPECTED_CLASSES = {
    # D5: the controlled shutdown of the last ISR member: KRaft takes the leadership away
    # and empties the ISR (2 joins the ELR); ZooKeeper mode finds no other live ISR member
    # and leaves leader 2, ISR [2]
    ("controlled_shutdown", "leader"),
    ("controlled_shutdown", "isr"),
    # D4, D8: node 3's unfence: KRaft elects it from the ELR; ZooKeeper mode, unclean
    # election off, has no leader to elect (3 is not in its ISR [2])
    ("broker_unfence", "leader"),
    ("broker_unfence", "isr"),
    # node 2 back: ZooKeeper mode elects 2 (its ISR), so the leaders differ from there on
    ("isr_change", "leader"),
    # D4: the last ISR member fenced (SIGKILL): KRaft's ISR becomes [] (ELR [2, 3]),
    # ZooKeeper mode keeps it in the ISR with leader -1
    ("broker_failure", "isr"),
}


def test_elr_and_unclean_elections_replay_exactly_under_kraft(elr_cluster, tmp_path):
    try:
        run_scenario(elr_cluster)
    finally:
        elr_cluster.ensure_all_up()
    events_file = import_log(elr_cluster, tmp_path)
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    rows = [r for e in events for r in e.get("observed", {}).get("partitions", [])]
    mine = [r for r in rows if r["topic"] == "elr"]
    assert any(r["elr"] for r in mine) and any(r["last_known_elr"] for r in mine)
    assert any(r["leader_recovery_state"] == "RECOVERING" for r in mine)
    (unclean,) = [e for e in events if e["type"] == "leader_election"]
    assert unclean["election"] == "unclean"
    assert unclean["partitions"] == [{"topic": "elr", "partition": 0}]
    recovered = [e for e in events if e.get("leader_recovery_state") == "RECOVERED"]
    assert [e["type"] for e in recovered] == ["isr_change"]
    # 3's re-registration after its SIGKILL is unclean (it left the ELR): no previous
    # epoch; 2's, after the unclean election emptied the ELR, cleans nothing: either
    # path replays alike, and the import calls it clean
    registrations = [e for e in events if e["type"] == "broker_registration"]
    assert [e["broker"] for e in registrations[-2:]] == [3, 2]
    assert "previous_broker_epoch" not in registrations[-2]
    (node_config,) = [e for e in events if e["type"] == "cluster_config_change"]
    assert (node_config["broker"], node_config["configs"]) == (1, {UNCLEAN: "false"})

    kraft = tmp_path / "kraft"
    assert main(["replay", str(events_file), "--out", str(kraft), "--set",
                 "kcsim.engine=kraft"]) == 0  # fmt: skip
    assert (kraft / "rejected_events.jsonl").read_text() == ""
    assert (kraft / "divergences.jsonl").read_text() == ""

    out = tmp_path / "zk"
    assert main(["replay", str(events_file), "--out", str(out)]) == 0
    tables = {p.stem: [json.loads(x) for x in p.read_text().splitlines()] for p in out.iterdir()}
    assert tables["rejected_events"] == []
    zk_rows = [r for r in tables["divergences"] if r["topic"] == "elr"]
    classes = divergence_classes(events, zk_rows)
    assert {c for c in classes if c[1] in ("leader", "isr")} == EXPECTED_CLASSES
