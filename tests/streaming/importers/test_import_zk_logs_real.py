"""`kcsim import zk-logs` on the logs of a scripted run on the real ZooKeeper-mode cluster
(the `zk_cluster` fixture), with `kcsim shadow` watching the same run: SPEC §8-§16, §7.2."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from streaming.chaos.live_zk import shadow_lag
from streaming.cli import main
from tests.support.differential.shadow_process import events as shadow_events
from tests.support.differential.shadow_process import shadow, wait_for
from tests.support.differential.zk_log_scenario import copy_logs, run_scenario

pytestmark = pytest.mark.zk


def epoch_seen(alter_partition: dict) -> int:
    """The partition epoch an AlterPartition the shadow saw was sent at. Those it inferred
    from a reassignment's writes carry none (kcsim takes the current one): the last of
    them carries the state observed after them, whose epoch is taken; the ones before it
    carry neither (-1)."""
    if "partition_epoch" in alter_partition:
        return alter_partition["partition_epoch"]
    observed = alter_partition.get("observed", {}).get("partitions", [])
    return observed[0]["partition_epoch"] if observed else -1


def test_imported_run_matches_the_znodes_and_the_shadow(zk_cluster, tmp_path):
    shadow_out = tmp_path / "shadow"
    watcher = shadow(zk_cluster.zookeeper, shadow_out)
    try:
        wait_for("the shadow's start", lambda: shadow_events(shadow_out))
        try:
            run = run_scenario(zk_cluster)
        finally:
            zk_cluster.ensure_all_up()
        # the last AlterPartition reaches the shadow through a ZooKeeper watch and its
        # settle window: stopped before that, the shadow never writes it
        state = shadow_out / ".shadow-state-real.json"
        wait_for(
            "the shadow to write ZooKeeper's state",
            lambda: not shadow_lag(zk_cluster.client, state),
        )
    finally:
        watcher.send_signal(signal.SIGINT)
        # its stderr read while it stops: a line per flush must never fill the pipe
        watcher.communicate(timeout=120)
    logs = copy_logs(zk_cluster.dir, tmp_path / "logs")
    out = tmp_path / "events.jsonl"
    assert main(["import", "zk-logs", str(logs), "--out", str(out), "--cluster", "real"]) == 0
    events = [json.loads(x) for x in out.read_text().splitlines()]
    kept, gone = run.topics
    mine = [e for e in events if e.get("topic") in (kept, gone) or "topic" not in e]
    # every kind the run caused appears, in the run's order; but the last: the ISR expansion
    # after the old controller's restart is an AlterPartition no controller line follows
    kinds = [e["type"] for e in mine]
    assert run.steps[-1] == "isr_change"
    position = 0
    for kind in run.steps[:-1]:
        position = kinds.index(kind, position) + 1
    # each partition's last observed state: the znode's, unless the leader's AlterPartition
    # (logged at DEBUG only) came after the controller's last write; then the shadow saw it
    last: dict[tuple[str, int], dict] = {}
    for event in events:
        for row in event.get("observed", {}).get("partitions", []):
            last[row["topic"], row["partition"]] = row
    watched = shadow_events(shadow_out)
    for p in range(4):
        znode = zk_cluster.partition_state(kept, p)
        row = last[kept, p]
        assert (row["leader"], row["leader_epoch"]) == (znode.leader, znode.leader_epoch)
        if row["partition_epoch"] == znode.partition_epoch:
            assert row["isr"] == list(znode.isr)
        else:
            later = [
                e
                for e in watched
                if e["type"] == "isr_change"
                and (e["topic"], e["partition"]) == (kept, p)
                and epoch_seen(e) >= row["partition_epoch"]
            ]
            assert later, f"{kept}-{p}: {row} vs {znode}: no AlterPartition explains it"
            assert later[-1]["observed"]["partitions"][0]["isr"] == list(znode.isr)
    assert (gone, 0) not in {k for k, v in last.items() if k[0] == gone and v["leader"] >= 0}
    # the shadow's events of the same run: the same kinds for the same topics, and the same
    # states wherever both observed the same partition epoch
    theirs = {
        (r["topic"], r["partition"], r["partition_epoch"]): (
            r["leader"],
            r["leader_epoch"],
            r["isr"],
        )
        for e in watched
        for r in e.get("observed", {}).get("partitions", [])
        if r["topic"] == kept
    }
    ours = {
        (r["topic"], r["partition"], r["partition_epoch"]): (
            r["leader"],
            r["leader_epoch"],
            r["isr"],
        )
        for e in events
        for r in e.get("observed", {}).get("partitions", [])
        if r["topic"] == kept
    }
    common = set(ours) & set(theirs)
    assert len(common) >= 4
    assert {k: ours[k] for k in common} == {k: theirs[k] for k in common}
    shadow_kinds = {e["type"] for e in watched if e.get("topic") == kept}
    assert {"topic_creation", "partition_reassignment", "partition_creation"} <= shadow_kinds
    assert Path(out).stat().st_size > 0
