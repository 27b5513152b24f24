"""`kcsim import kraft-log` on the metadata log of a scripted run on a real 3-node KRaft
cluster (Kafka 4.1.1, the `kraft_cluster` fixture): a kill of the quorum leader, a
controlled shutdown, restarts, reassignments, a preferred election and a deletion with a
replica's node down (SPEC §8-§15, §7.2). The import replayed through kcsim shows what the
ZooKeeper-mode controller would have done with that day: the `divergences` it reports are
exactly the ZooKeeper-vs-KRaft classes the README lists (section "kcsim import
kraft-log"), each arising at the event the README names.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from streaming.cli import main
from tests.support.divergence_classes import EXPECTED_CLASSES, divergence_classes
from tests.support.kraft_cluster import KraftCluster, wait_for

pytestmark = pytest.mark.kraft

ORDERS = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
AUDIT = {0: [2, 1], 1: [3, 2]}
FLAGS = {0: [1, 2]}
UNCLEAN = "unclean.leader.election.enable"


def run_scenario(kraft: KraftCluster) -> None:
    kraft.create_topic("orders", ORDERS)
    kraft.create_topic("audit", AUDIT)
    # §16: a topic created with unclean leader election on, then altered: the override
    # set to false with retention.ms deleted in one request, then the override deleted
    kraft.create_topic("flags", FLAGS, {UNCLEAN: "true", "retention.ms": "60000"})
    kraft.alter_topic_configs("flags", {UNCLEAN: "false", "retention.ms": None})
    kraft.alter_topic_configs("flags", {UNCLEAN: None})
    kraft.wait_isr_full("orders")
    # the quorum leader (the active controller) crashes: a new one is elected, then the
    # crashed node is fenced once its session times out; it comes back
    old_leader = kraft.quorum_leader()
    assert old_leader is not None
    kraft.kill(old_leader)
    wait_for(lambda: kraft.quorum_leader() not in (None, old_leader), "a new quorum leader")
    kraft.wait_fenced(old_leader)
    kraft.start(old_leader)
    kraft.wait_isr_full("orders")
    kraft.wait_isr_full("audit")
    # a controlled shutdown (SIGTERM) and a restart, through the command line
    down = next(n for n in (3, 2, 1) if n != kraft.quorum_leader())
    where = ["--broker", str(down), "--dir", str(kraft.dir)]
    assert main(["kafka-local", "shutdown", *where]) == 0
    kraft.wait_fenced(down)
    assert main(["kafka-local", "start", *where]) == 0
    kraft.wait_isr_full("orders")
    kraft.wait_isr_full("audit")
    # reassignments: one that completes at once (targets in the ISR), one that adds a replica
    kraft.reassign({("orders", 0): [2, 3], ("audit", 0): [1, 3]})
    kraft.wait_partitions("orders", lambda ps: ps[0].replicas == (2, 3), "reassigned")
    kraft.wait_partitions("audit", lambda ps: ps[0].replicas == (1, 3), "reassigned")
    kraft.wait_isr_full("orders")
    # a preferred election of every partition not led by its first replica
    kraft.elect_preferred("orders", list(ORDERS))
    kraft.wait_partitions(
        "orders", lambda ps: all(p.leader == p.replicas[0] for p in ps.values()), "preferred"
    )
    # a deletion while a replica's node is down; the node comes back
    kraft.kill(3)
    kraft.wait_fenced(3)
    kraft.delete_topic("audit")
    kraft.start(3)
    kraft.wait_isr_full("orders")


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


def test_a_kraft_day_through_the_zookeeper_controller(kraft_cluster: KraftCluster, tmp_path):
    try:
        run_scenario(kraft_cluster)
    finally:
        kraft_cluster.ensure_all_up()
    events_file = import_log(kraft_cluster, tmp_path)
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    mine = [e for e in events if e.get("topic") in ("orders", "audit") or "topic" not in e]
    kinds = Counter(e["type"] for e in mine)
    assert kinds["topic_creation"] == 2
    assert kinds["controller_failover"] >= 2  # the first quorum leader, then the new one
    assert kinds["controlled_shutdown"] == 1
    assert kinds["broker_failure"] >= 3  # the killed leader, the shut-down node, node 3
    assert kinds["broker_startup"] >= 6  # three at start, three restarts
    assert kinds["partition_reassignment"] == 2
    assert kinds["leader_election"] >= 1
    assert kinds["topic_deletion"] == 1
    assert kinds["isr_change"] >= 3  # the restarted nodes rejoining, a completion
    # the failover names the new quorum leader and its epoch (the controller epoch)
    # the topic configs: at creation, then a change per request; kcsim cannot delete a
    # config, so the deleted override is the value it falls back to (false here)
    (flags,) = [e for e in events if e["type"] == "topic_creation" and e["topic"] == "flags"]
    assert flags["configs"] == {UNCLEAN: "true", "retention.ms": "60000"}
    changes = [e["configs"] for e in events if e["type"] == "topic_config_change"]
    assert changes == [{UNCLEAN: "false"}, {UNCLEAN: "false"}]
    failovers = [e for e in events if e["type"] == "controller_failover"]
    epochs = [e["controller_epoch"] for e in failovers]
    assert epochs == sorted(set(epochs)) and epochs[0] >= 1

    out = tmp_path / "tables"
    assert main(["replay", str(events_file), "--out", str(out)]) == 0
    tables = {p.stem: [json.loads(x) for x in p.read_text().splitlines()] for p in out.iterdir()}
    assert tables["rejected_events"] == []
    assert divergence_classes(events, tables["divergences"]) == EXPECTED_CLASSES
    # where the day ends, the ZooKeeper-mode controller leads and replicates every
    # partition as KRaft's did: only the epochs' counting differs
    final = {
        (r["topic"], r["partition"]): r for r in tables["partition_state"] if r["topic"] == "orders"
    }
    live = kraft_cluster.partitions("orders")
    assert sorted(live) == sorted(p for _, p in final)
    for p, state in live.items():
        row = final["orders", p]
        assert (row["leader"], set(row["isr"]), tuple(row["replicas"])) == (
            state.leader,
            state.isr,
            state.replicas,
        )
    assert not any(r["topic"] == "audit" for r in tables["partition_state"])
    topics = {r["topic"]: r for r in tables["topics"]}
    assert topics["flags"]["configs"] == {UNCLEAN: "false", "retention.ms": "60000"}
