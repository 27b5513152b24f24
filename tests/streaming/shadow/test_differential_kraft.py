"""Differential tests against a real Kafka 4.1.1 KRaft cluster in the layout production
uses: 3 brokers (ids 1..3) and 3 separate controllers (ids 4..6, the quorum's voters).
`kcsim shadow --metadata-log` follows a controller's `__cluster_metadata-0`, the kraft
engine replays what it wrote, and the verdict is zero divergences, zero rejected events
and no partition change the shadow could not name a cause for.

The cluster's metadata log is made small (16 KiB segments, a snapshot every 8 KiB of new
records or 10 s, retention 32 KiB or 30 s, files deleted 1 s after), so that during each
run the log really rolls segments, takes snapshots and deletes the old segments under the
shadow; each test checks that every segment there at its start was gone by its end.

1. Scenarios (SPEC-KRAFT §15.1 a preferred election; §15.3 an unclean one: a partition's
   whole ISR dies, `unclean.leader.election.enable` is turned on cluster-wide and the
   controller's periodic unclean-election task elects a replica from outside the ISR;
   §13 a `min.insync.replicas` change; §18 the active controller killed and restarted;
   §8 a broker killed and back; §9 a controlled shutdown; §12 a reassignment).
2. A seeded chaos run of 100 operations (`streaming/chaos/live_kraft.py`;
   `KCSIM_KRAFT_CHAOS_SEED=N` runs another seed).
3. A short soak (`streaming/chaos/soak.py`, as `tests/streaming/shadow/test_soak.py` for
   ZooKeeper mode): the same chaos for `KCSIM_SOAK_SECONDS` (30 s), the shadow writing
   to a topic of this cluster and `kcsim run` (1 s trigger, the kraft engine) applying
   it into a Delta lake; nothing lost or written twice, zero divergences, a kill's
   event in Delta, memory not running away.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streaming.chaos.live_kraft import KraftChaos
from streaming.chaos.soak import Soak
from streaming.cli import main
from streaming.local_clusters import kraft_cluster as cluster
from streaming.shadow.metadata_log_tail import segments, snapshots
from tests.support.clusters.kraft_cluster import KraftCluster, wait_for
from tests.support.differential.shadow_process import events, kraft_shadow

pytestmark = [pytest.mark.kraft, pytest.mark.slow]

FOLLOWED = 4  # the first controller: its log is the quorum's, read by the shadow
CHAOS_SEED = int(os.environ.get("KCSIM_KRAFT_CHAOS_SEED", "20261129"))
CHAOS_OPS = 100
METADATA_LOG = {
    **cluster.ROLLING_LOG,
    # the controller's periodic unclean-election task (Kafka's default: every 5 min); a
    # config turning unclean.leader.election.enable on elects nothing by itself
    "unclean.leader.election.interval.ms": "2000",
    # a killed broker is fenced 3 s after its last heartbeat
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}


@pytest.fixture(scope="module")
def separate_kraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftCluster]:
    """Started once for this module, stopped at its end; KCSIM_KRAFT_SEPARATE_DIR=DIR uses
    a cluster already started with these overrides (left running)."""
    external = os.environ.get("KCSIM_KRAFT_SEPARATE_DIR")
    data_dir = Path(external) if external else tmp_path_factory.mktemp("kafka-kraft-separate")
    began = time.monotonic()
    bootstrap = cluster.start(data_dir, nodes=3, controllers=3, overrides=METADATA_LOG)
    print(f"separate-layout cluster up in {time.monotonic() - began:.0f} s")
    try:
        yield KraftCluster(data_dir, bootstrap, cluster.load_layout(data_dir).node_ids)
    finally:
        if not external:
            # SIGTERM to all, SIGKILL after 10 s: the brokers' controlled shutdowns would
            # wait for the controllers stopping beside them
            cluster.stop(data_dir, timeout_s=10)


class Recording:
    """A shadow following node FOLLOWED's log into `out`, and the log's segments then."""

    def __init__(self, kraft: KraftCluster, out: Path) -> None:
        self.kraft, self.out = kraft, out
        self.log = kraft.layout().metadata_log(FOLLOWED)
        self.first_segments = {base for base, _ in segments(self.log)}
        self.process = kraft_shadow(self.log, kraft.bootstrap, out)

    def last_seq(self) -> int:
        return max((e["seq"] for e in events(self.out)), default=0)

    def wait_event(self, kind: str, broker: int, after: int) -> None:
        def seen() -> bool:
            assert self.process.poll() is None, self.process.stderr
            return any(
                e["type"] == kind and e.get("broker") == broker and e["seq"] > after
                for e in events(self.out)
            )

        wait_for(seen, f"a {kind} event of broker {broker}")

    def finish(self) -> str:
        """Stop the shadow, read what is committed by now with `--once`: its stderr."""
        self.process.send_signal(signal.SIGTERM)
        _, stderr = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, stderr
        once = kraft_shadow(self.log, self.kraft.bootstrap, self.out, "--once")
        _, more = once.communicate(timeout=120)
        assert once.returncode == 0, more
        return stderr + more

    def verdict(self, tables: Path, topics: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
        # the log rolls, snapshots and deletes under the running shadow: Kafka's cleaner
        # (every 60 s) deletes the segments wholly below the oldest snapshot it keeps
        def rolled_and_deleted() -> bool:
            now = {base for base, _ in segments(self.log)}
            return not now & self.first_segments and max(now) > max(self.first_segments)

        wait_for(rolled_and_deleted, "every segment of the start deleted", timeout_s=150)
        assert snapshots(self.log)
        stderr = self.finish()
        assert "no event explains" not in stderr, stderr
        written = events(self.out)
        assert [e["seq"] for e in written] == list(range(1, len(written) + 1))
        assert main(["replay", str(self.out), "--out", str(tables), "--quiet",
                     "--set", "kcsim.engine=kraft"]) == 0  # fmt: skip
        rows = {
            p.stem: [json.loads(x) for x in p.read_text().splitlines()] for p in tables.iterdir()
        }
        assert rows["rejected_events"] == []
        assert rows["divergences"] == [], json.dumps(rows["divergences"][:5], indent=1)
        for topic in topics:
            final = {r["partition"]: r for r in rows["partition_state"] if r["topic"] == topic}
            live = self.kraft.partitions(topic)
            assert {p: (s.leader, s.leader_epoch, s.isr, s.replicas) for p, s in live.items()} == {
                p: (r["leader"], r["leader_epoch"], frozenset(r["isr"]), tuple(r["replicas"]))
                for p, r in final.items()
            }
        return rows


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
        process.wait()


def test_scenarios_replay_with_zero_divergences(separate_kraft: KraftCluster, tmp_path):
    kraft = separate_kraft
    began = time.monotonic()
    kraft.create_topic("scenes", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    kraft.create_topic("lonely", {0: [2, 3]})  # its whole ISR dies below
    kraft.wait_isr_full("scenes")
    kraft.wait_isr_full("lonely")
    rec = Recording(kraft, tmp_path / "out")
    try:
        wait_for(lambda: any(e.get("topic") == "lonely" for e in events(rec.out)), "start")
        # §8: a broker killed (its session expires: fenced) and back; the latency from the
        # kill to the shadow's broker_failure event
        seen = rec.last_seq()
        killed_at = time.monotonic()
        kraft.kill(1)
        rec.wait_event("broker_failure", 1, seen)
        latency = time.monotonic() - killed_at
        kraft.start(1)
        kraft.wait_isr_full("scenes")
        # §9: a controlled shutdown (SIGTERM) and a restart
        seen = rec.last_seq()
        kraft.shutdown(2)
        kraft.wait_fenced(2)
        rec.wait_event("controlled_shutdown", 2, seen)
        kraft.start(2)
        kraft.wait_isr_full("scenes")
        # §15.1: a preferred election of the partitions the restarts moved
        kraft.elect_preferred("scenes", [0, 1, 2])
        kraft.wait_partitions(
            "scenes", lambda ps: all(p.leader == p.replicas[0] for p in ps.values()), "preferred"
        )
        # §13: a min.insync.replicas change of one topic
        kraft.alter_topic_configs("scenes", {"min.insync.replicas": "2"})
        # §12: a reassignment to completion
        kraft.reassign({("scenes", 0): [3, 2, 1]})
        kraft.wait_partitions(
            "scenes", lambda ps: ps[0].replicas == (3, 2, 1) and len(ps[0].isr) == 3, "moved"
        )
        # §18: the active controller killed (a quorum failover), then back
        leader = kraft.quorum_leader()
        assert leader is not None
        kraft.kill(leader)
        wait_for(lambda: kraft.quorum_leader() not in (None, leader), "a new quorum leader")
        kraft.start(leader)
        # §15.3: "lonely"'s whole ISR dies; one replica comes back, outside the ISR; the
        # cluster-wide unclean.leader.election.enable turned on lets the periodic task elect it
        kraft.kill(3)
        kraft.wait_fenced(3)
        kraft.wait_partitions("lonely", lambda ps: ps[0].isr == {2}, "ISR {2}")
        kraft.kill(2)
        kraft.wait_fenced(2)
        kraft.wait_partitions("lonely", lambda ps: ps[0].leader == -1, "no leader")
        kraft.start(3)
        kraft.alter_cluster_configs({"unclean.leader.election.enable": "true"})
        kraft.wait_partitions("lonely", lambda ps: ps[0].leader == 3, "unclean leader 3")
        kraft.start(2)
        kraft.alter_cluster_configs({"unclean.leader.election.enable": "false"})
        kraft.wait_isr_full("lonely")
        kraft.wait_isr_full("scenes")
        rows = rec.verdict(tmp_path / "tables", ("scenes", "lonely"))
    finally:
        _stop(rec.process)
        kraft.ensure_all_up()
    kinds = [e["type"] for e in events(rec.out)]
    assert {"broker_failure", "controlled_shutdown", "controller_failover"} <= set(kinds)
    elections = {e.get("election") for e in events(rec.out) if e["type"] == "leader_election"}
    assert "preferred" in elections
    assert any(r["topic"] == "lonely" and r["leader"] == 3 for r in rows["partition_state"])
    print(
        f"scenarios: {len(kinds)} events, 0 divergences, {time.monotonic() - began:.0f} s; "
        f"kill -9 of broker 1 to its broker_failure event: {latency:.1f} s"
    )


def test_seeded_chaos_replays_with_zero_divergences(separate_kraft: KraftCluster, tmp_path):
    kraft = separate_kraft
    began = time.monotonic()
    topics = ("chaos-a", "chaos-b")
    kraft.create_topic("chaos-a", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    kraft.create_topic("chaos-b", {0: [1, 2], 1: [3, 1]})
    for topic in topics:
        kraft.wait_isr_full(topic)
    rec = Recording(kraft, tmp_path / "out")
    chaos = KraftChaos(kraft, topics, CHAOS_SEED)
    try:
        wait_for(lambda: any(e.get("topic") == "chaos-b" for e in events(rec.out)), "start")
        done = chaos.run(CHAOS_OPS)
        chaos.settle()
        rows = rec.verdict(tmp_path / "tables", topics)
    finally:
        _stop(rec.process)
        chaos.settle()
    assert sum(done.values()) == CHAOS_OPS
    print(
        f"chaos seed {CHAOS_SEED}: {CHAOS_OPS} operations {dict(sorted(done.items()))}, "
        f"{len(events(rec.out))} events, {len(rows['divergences'])} divergences, "
        f"{time.monotonic() - began:.0f} s"
    )


SOAK_S = float(os.environ.get("KCSIM_SOAK_SECONDS", "30"))


@pytest.mark.spark
def test_soak_loses_nothing_and_diverges_nowhere(separate_kraft: KraftCluster, tmp_path):
    soak = Soak(tmp_path, CHAOS_SEED, SOAK_S, kraft=separate_kraft, followed=FOLLOWED)
    soak.rss_every_s, soak.warm_up_s, soak.open_with_kill = 2, 0, True
    try:
        result = soak.run()
    finally:
        separate_kraft.ensure_all_up()
        soak.delete_topics()
    report = "\n".join(result.lines())
    # the bounds of test_soak.py's: a runaway, not a slow leak
    assert result.faults(shadow_growth_mib=64, job_growth_mib=384) == [], report
    assert result.kill_latencies, report
    print(report)
