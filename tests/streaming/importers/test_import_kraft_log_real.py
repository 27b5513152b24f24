"""`kcsim import kraft-log` on the metadata log of a scripted run on a real 3-node KRaft
cluster (Kafka 4.1.1, this module's own, `kraft_day`): a kill of the quorum leader, a
controlled shutdown of a leader, restarts, node-level `min.insync.replicas` changes,
reassignments, a preferred election and a deletion with a replica's node down
(SPEC-KRAFT §6-§13, §15-§18, §23). The import writes the KRaft controller's inputs
(CONTRACT §5): replayed with `kcsim.engine=kraft` they leave exactly the states the log
holds (no divergence); replayed with `zk` they show exactly the ZooKeeper-vs-KRaft classes
docs/guide/importing-logs.md lists (SPEC-KRAFT §24).
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from streaming.cli import main
from streaming.local_clusters import kraft_cluster as cluster
from tests.support.clusters.kraft_cluster import KraftCluster, own_kraft_cluster, wait_for
from tests.support.differential.divergence_classes import (
    ELR_CLASSES,
    EXPECTED_CLASSES,
    divergence_classes,
)

pytestmark = pytest.mark.kraft

ORDERS = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
AUDIT = {0: [2, 1], 1: [3, 2]}
FLAGS = {0: [1, 2]}
UNCLEAN = "unclean.leader.election.enable"
MIN_ISR = "min.insync.replicas"


def run_scenario(kraft: KraftCluster) -> None:
    kraft.create_topic("orders", ORDERS)
    kraft.create_topic("audit", AUDIT)
    # §16: a topic created with unclean leader election on, then altered: the override
    # set to false with retention.ms deleted in one request, then the override deleted
    kraft.create_topic("flags", FLAGS, {UNCLEAN: "true", "retention.ms": "60000"})
    kraft.alter_topic_configs("flags", {UNCLEAN: "false", "retention.ms": None})
    kraft.alter_topic_configs("flags", {UNCLEAN: None})
    # §16: the cluster-wide min.insync.replicas raised to 2 (ELR membership follows it;
    # a ClearElrRecord with it), and a node-level unclean.leader.election.enable
    kraft.alter_cluster_configs({MIN_ISR: "2"})
    kraft.alter_broker_configs("1", {UNCLEAN: "false"})
    changed = time.time()  # both committed: the admin calls answer once they are
    kraft.wait_isr_full("orders")
    # every node's newest snapshot holds the topics and the ClearElrRecord before a node
    # restarts (`SNAPSHOTS` in streaming/local_clusters/kraft_cluster.py says why)
    wait_for(lambda: all(snapshot_since(kraft, n, changed) for n in kraft.nodes), "snapshots")
    # §18, §8: the quorum leader (the active controller) crashes: a new one is elected,
    # then the crashed node is fenced once its session times out; it comes back (§6, §7)
    old_leader = kraft.quorum_leader()
    assert old_leader is not None
    kraft.kill(old_leader)
    wait_for(lambda: kraft.quorum_leader() not in (None, old_leader), "a new quorum leader")
    kraft.wait_fenced(old_leader)
    kraft.start(old_leader)
    kraft.wait_isr_full("orders")
    kraft.wait_isr_full("audit")
    # §15.1: a preferred election of every partition, so that each node leads one
    kraft.elect_preferred("orders", list(ORDERS))
    kraft.wait_partitions(
        "orders", lambda ps: all(p.leader == p.replicas[0] for p in ps.values()), "preferred"
    )
    # §9: a controlled shutdown (SIGTERM) of a leader, and a restart, through the CLI
    down = next(n for n in (3, 2, 1) if n != kraft.quorum_leader())
    where = ["--broker", str(down), "--dir", str(kraft.dir)]
    assert main(["kafka-local", "shutdown", *where]) == 0
    kraft.wait_fenced(down)
    assert main(["kafka-local", "start", *where]) == 0
    kraft.wait_isr_full("orders")
    kraft.wait_isr_full("audit")
    # §13: reassignments: one that completes at once (targets in the ISR), one that adds
    # a replica and completes by the new replica's AlterPartition
    kraft.reassign({("orders", 0): [2, 3], ("audit", 0): [1, 3]})
    kraft.wait_partitions("orders", lambda ps: ps[0].replicas == (2, 3), "reassigned")
    kraft.wait_partitions("audit", lambda ps: ps[0].replicas == (1, 3), "reassigned")
    kraft.wait_isr_full("orders")
    kraft.wait_isr_full("audit")
    kraft.elect_preferred("orders", list(ORDERS))
    kraft.wait_partitions(
        "orders", lambda ps: all(p.leader == p.replicas[0] for p in ps.values()), "preferred"
    )
    # §12: a deletion while a replica's node is down; the node comes back
    kraft.kill(3)
    kraft.wait_fenced(3)
    kraft.delete_topic("audit")
    kraft.start(3)
    kraft.wait_isr_full("orders")


def snapshot_since(kraft: KraftCluster, node: int, since: float) -> bool:
    """The node has written a metadata snapshot since the time `since`."""
    return any(
        path.stat().st_mtime > since
        for path in kraft.layout().metadata_log(node).glob("*.checkpoint")
    )


def import_log(kraft: KraftCluster, tmp_path: Path) -> Path:
    """The quorum leader's metadata log, copied while the cluster runs (a batch being
    written can be cut: then copy again), imported."""
    out = tmp_path / "events.jsonl"
    copy = tmp_path / "metadata"

    def imported() -> bool:
        leader = kraft.quorum_leader()
        if leader is None:
            return False
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(kraft.layout().metadata_log(leader), copy)
        return main(["import", "kraft-log", str(copy), "--out", str(out), "--quiet"]) == 0

    wait_for(imported, "a whole copy of the metadata log")
    return out


def replay(events_file: Path, out: Path, *settings: str) -> dict[str, list[dict]]:
    assert main(["replay", str(events_file), "--out", str(out), *settings]) == 0
    return {p.stem: [json.loads(x) for x in p.read_text().splitlines()] for p in out.iterdir()}


@pytest.fixture(scope="module")
def kraft_day(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftCluster]:
    """A 3-node cluster of its own: the scenario changes the cluster-level
    `min.insync.replicas` and then restarts nodes, which needs snapshots (`SNAPSHOTS` says
    why), and it counts every controlled shutdown in the log (another test's would count)."""
    with own_kraft_cluster(
        tmp_path_factory, "kafka-kraft-day", overrides=cluster.SNAPSHOTS
    ) as kraft:
        yield kraft


def test_a_kraft_day_replays_exactly_under_kraft(kraft_day: KraftCluster, tmp_path):
    try:
        run_scenario(kraft_day)
    finally:
        kraft_day.ensure_all_up()
    events_file = import_log(kraft_day, tmp_path)
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    mine = [e for e in events if e.get("topic") in ("orders", "audit") or "topic" not in e]
    kinds = Counter(e["type"] for e in mine)
    assert kinds["topic_creation"] == 2
    assert kinds["controller_failover"] >= 2  # the first quorum leader, then the new one
    assert kinds["controlled_shutdown"] == 1
    assert kinds["broker_failure"] >= 3  # the killed leader, the shut-down node, node 3
    assert kinds["broker_registration"] >= 6  # three at start, three restarts
    assert kinds["broker_unfence"] == kinds["broker_registration"]
    assert kinds["partition_reassignment"] == 2
    assert kinds["leader_election"] >= 1
    assert kinds["topic_deletion"] == 1
    assert kinds["isr_change"] >= 3  # the restarted nodes rejoining, a completion
    assert "broker_startup" not in kinds and "stop_replica_response" not in kinds
    # registrations carry the log's epochs and incarnations; the restart after the
    # controlled shutdown was clean: its previous epoch is the one the broker had
    registrations = [e for e in events if e["type"] == "broker_registration"]
    assert all(e["broker_epoch"] >= 0 and e["incarnation"] for e in registrations)
    (shutdown,) = [e for e in events if e["type"] == "controlled_shutdown"]
    before = [e for e in registrations if e["seq"] < shutdown["seq"]]
    after = [e for e in registrations if e["seq"] > shutdown["seq"]]
    earlier = [e for e in before if e["broker"] == shutdown["broker"]][-1]
    again = next(e for e in after if e["broker"] == shutdown["broker"])
    assert again["previous_broker_epoch"] == earlier["broker_epoch"]
    # the cluster-wide and the node-level config, one cluster_config_change each
    configs = [e for e in events if e["type"] == "cluster_config_change"]
    assert [(e.get("broker"), e["configs"]) for e in configs] == [
        (None, {MIN_ISR: "2"}),
        (1, {UNCLEAN: "false"}),
    ]
    # topic configs: at creation, then a change per request; kcsim cannot delete a
    # config, so the deleted override is the value it falls back to (false here)
    (flags,) = [e for e in events if e["type"] == "topic_creation" and e["topic"] == "flags"]
    assert flags["configs"] == {UNCLEAN: "true", "retention.ms": "60000"}
    changes = [e["configs"] for e in events if e["type"] == "topic_config_change"]
    assert changes == [{UNCLEAN: "false"}, {UNCLEAN: "false"}]
    failovers = [e for e in events if e["type"] == "controller_failover"]
    assert {e["controller"] for e in failovers} <= set(kraft_day.nodes)
    observing = [e for e in events if "observed" in e]
    assert len(observing) >= 30
    assert all("brokers" in e["observed"] for e in events if e["type"].startswith("broker_"))

    kraft = replay(events_file, tmp_path / "kraft", "--set", "kcsim.engine=kraft")
    assert kraft["rejected_events"] == []
    assert kraft["divergences"] == []
    # the engine wrote the log's records: one per record of the imported operations
    assert len(kraft["metadata_records"]) >= len(events)
    final = {(r["topic"], r["partition"]): r for r in kraft["partition_state"]}
    live = kraft_day.partitions("orders")
    for p, state in live.items():
        row = final["orders", p]
        assert (row["leader"], set(row["isr"]), tuple(row["replicas"])) == (
            state.leader,
            state.isr,
            state.replicas,
        )
        assert row["leader_epoch"] == state.leader_epoch
    assert not any(t == "audit" for t, _ in final)

    # the same inputs through the ZooKeeper-mode controller: exactly the listed classes
    zk = replay(events_file, tmp_path / "zk")
    assert zk["rejected_events"] == []
    # (min.insync.replicas 2: the SIGKILLed nodes' re-registrations leave ELRs)
    assert divergence_classes(events, zk["divergences"]) == EXPECTED_CLASSES | ELR_CLASSES
