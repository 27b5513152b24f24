"""`kcsim kafka-local start --zk`: a real ZooKeeper-mode Kafka 3.7.1 cluster, its brokers
killed, shut down and started again, read back from its znodes and logs.

The leadership checks follow SPEC §8.3 + §9.1 (a broker dies: offline election, §5.1) and
§11 (controlled shutdown, §5.4).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.local_clusters import kafka_local
from streaming.local_clusters import zk_cluster as cluster
from streaming.local_clusters.processes import LocalClusterError, is_running, port_free
from tests.support.clusters.zk_cluster import ZkCluster, create_topic, unique_topic, wait_for

ROOT = Path(__file__).resolve().parents[3]
# Kafka's log4j layout, "[%d] %p %m (%c)%n", which the log importer parses
LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] [A-Z]+ .* \([\w.$]+\)$")


def _victim_and_others(zk: ZkCluster) -> tuple[int, list[int]]:
    """A broker that is not the controller (its loss moves leaderships, not the
    controller), and the other two."""
    controller = zk.wait_controller()
    victim = next(b for b in zk.brokers if b != controller)
    return victim, [b for b in zk.brokers if b != victim]


@pytest.mark.zk
def test_start_registers_every_broker_and_elects_a_controller(zk_cluster: ZkCluster) -> None:
    assert zk_cluster.brokers == (1, 2, 3)
    assert zk_cluster.registered() == {1, 2, 3}
    assert zk_cluster.controller_id() in {1, 2, 3}
    epoch, _ = zk_cluster.client.get("/controller_epoch")
    assert int(epoch) >= 1
    assert re.fullmatch(r"127\.0\.0\.1:\d+", zk_cluster.zookeeper)
    ports = [zk_cluster.bootstrap_of(b) for b in zk_cluster.brokers]
    assert zk_cluster.bootstrap == ",".join(ports)
    assert len(set(ports)) == 3


@pytest.mark.zk
def test_explicit_assignment_gives_each_partition_its_preferred_leader(
    zk_cluster: ZkCluster,
) -> None:
    topic = unique_topic("assign")
    create_topic(zk_cluster, topic, {0: [2, 3, 1], 1: [3, 1, 2]})

    first = zk_cluster.partition_state(topic, 0)
    second = zk_cluster.partition_state(topic, 1)
    assert first is not None and second is not None
    assert (first.leader, first.leader_epoch, first.isr) == (2, 0, (2, 3, 1))
    assert (second.leader, second.leader_epoch, second.isr) == (3, 0, (3, 1, 2))
    assert first.partition_epoch == 0
    assert first.controller_epoch == int(zk_cluster.client.get("/controller_epoch")[0])


@pytest.mark.zk
def test_killed_broker_deregisters_then_loses_its_leadership(zk_cluster: ZkCluster) -> None:
    victim, (first, second) = _victim_and_others(zk_cluster)
    topic = unique_topic("kill")
    create_topic(zk_cluster, topic, {0: [victim, first, second]})
    before = zk_cluster.partition_state(topic, 0)
    assert before is not None and before.leader == victim
    try:
        zk_cluster.kill(victim)
        zk_cluster.wait_unregistered([victim], timeout_s=30)
        after = zk_cluster.wait_partition_state(
            topic, 0, lambda s: s.leader != victim, "a new leader"
        )
        # offline election (SPEC §5.1): the first live replica of the assignment in the ISR
        assert after.leader == first
        assert after.leader_epoch == before.leader_epoch + 1
        assert after.isr == (first, second)
        # the controller acted on the deregistration: the state was written after it
        assert after.mzxid > zk_cluster.broker_change_zxid()
    finally:
        zk_cluster.ensure_all_up()


@pytest.mark.zk
def test_shutdown_moves_leadership_before_deregistering_and_start_rejoins(
    zk_cluster: ZkCluster,
) -> None:
    victim, (first, second) = _victim_and_others(zk_cluster)
    topic = unique_topic("shutdown")
    create_topic(zk_cluster, topic, {0: [victim, first, second]})
    before = zk_cluster.partition_state(topic, 0)
    assert before is not None and before.leader == victim
    try:
        zk_cluster.shutdown(victim)
        assert victim not in zk_cluster.running()
        zk_cluster.wait_unregistered([victim], timeout_s=10)
        moved = zk_cluster.partition_state(topic, 0)
        assert moved is not None
        # controlled shutdown (SPEC §11, §5.4): a live ISR member not shutting down leads
        assert moved.leader == first
        assert moved.leader_epoch == before.leader_epoch + 1
        assert moved.isr == (first, second)
        # the leadership moved while the broker was still registered
        assert moved.mzxid < zk_cluster.broker_change_zxid()

        zk_cluster.start(victim)
        assert victim in zk_cluster.registered()
        # the follower catches up and the leader's AlterPartition (SPEC §13.1) puts it
        # back in the ISR: same leader and leader epoch, a new partition epoch
        rejoined = zk_cluster.wait_partition_state(
            topic, 0, lambda s: victim in s.isr, "the restarted broker back in the ISR"
        )
        assert (rejoined.leader, rejoined.leader_epoch) == (first, moved.leader_epoch)
        assert set(rejoined.isr) == {victim, first, second}
        assert rejoined.partition_epoch > moved.partition_epoch
    finally:
        zk_cluster.ensure_all_up()


@pytest.mark.zk
def test_controller_and_state_change_logs_use_kafkas_layout(zk_cluster: ZkCluster) -> None:
    controller = zk_cluster.wait_controller()
    topic = unique_topic("logs")
    create_topic(zk_cluster, topic, {0: [1, 2, 3]})
    logs = zk_cluster.dir / f"broker-{controller}" / "logs"
    changed = f"Changed partition {topic}-0 from NewPartition to OnlinePartition"
    wait_for(
        lambda: changed in (logs / "state-change.log").read_text(),
        "the controller's state-change.log to show the new partition",
    )
    for name, logger in (("controller.log", "kafka.controller."), ("state-change.log", "")):
        lines = [line for line in (logs / name).read_text().splitlines() if line.strip()]
        headed = [line for line in lines if line.startswith("[")]
        assert headed, name
        # every record has Kafka's layout (stack-trace lines of a record start with a tab)
        assert all(LOG_LINE.match(line) for line in headed), name
        assert any(f"({logger}" in line for line in headed), name
    state_change = (logs / "state-change.log").read_text()
    assert f"[Controller id={controller} epoch=" in state_change


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streaming.cli", "kafka-local", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=240,
    )


@pytest.mark.zk
def test_cli_start_prints_addresses_and_stop_leaves_no_process_or_port(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    started = _cli("start", "--zk", "--brokers", "1", "--dir", str(data_dir))
    try:
        assert started.returncode == 0, started.stderr
        zookeeper, bootstrap = started.stdout.strip().splitlines()[-2:]
        layout = cluster.load_layout(data_dir)
        assert zookeeper == f"127.0.0.1:{layout.zookeeper_port}"
        assert bootstrap == f"127.0.0.1:{layout.broker_ports[1]}"
        pids = [layout.zookeeper_pid(), layout.broker_pid(1)]
        assert None not in pids
        assert "registered: True" in _cli("status", "--dir", str(data_dir)).stdout
    finally:
        # no --zk: the directory says which kind of cluster it holds
        stopped = _cli("stop", "--dir", str(data_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert not any(is_running(pid, ()) for pid in pids if pid is not None)
    ports = [layout.zookeeper_port, layout.broker_ports[1]]
    assert all(port_free(port) for port in ports)


def test_cli_routes_zookeeper_mode_and_keeps_kraft_the_default(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    kafka_local.configure(parser)
    assert not kafka_local._zk_mode(parser.parse_args(["start"]))
    assert not kafka_local._zk_mode(parser.parse_args(["stop", "--dir", str(tmp_path)]))
    assert kafka_local._zk_mode(parser.parse_args(["start", "--zk"]))
    assert kafka_local._zk_mode(parser.parse_args(["start", "--broker", "2"]))
    assert kafka_local._zk_mode(parser.parse_args(["kill", "--broker", "2"]))
    layout = cluster.Layout(tmp_path, 1, {1: 2, 2: 3})
    layout.save()
    assert kafka_local._zk_mode(parser.parse_args(["stop", "--dir", str(tmp_path)]))
    assert cluster.load_layout(tmp_path) == layout


def test_kill_without_broker_id_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    kafka_local.configure(parser)
    assert kafka_local.main(parser.parse_args(["kill", "--dir", "/nonexistent"])) == 1
    assert "needs --broker ID" in capsys.readouterr().err


def test_broker_settings_take_overrides_and_reject_bad_ones(tmp_path: Path) -> None:
    layout = cluster.Layout(tmp_path, 2181, {1: 9001, 2: 9002})
    overrides = cluster.parse_overrides(["auto.leader.rebalance.enable=true"])
    config = cluster.broker_config(layout, 2, overrides)
    assert config["auto.leader.rebalance.enable"] == "true"
    assert config["broker.id"] == 2
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:9002"
    assert config["zookeeper.connect"] == "127.0.0.1:2181"
    with pytest.raises(LocalClusterError, match="KEY=VALUE"):
        cluster.parse_overrides(["no-equals-sign"])
    with pytest.raises(LocalClusterError, match="no broker 3"):
        layout.broker_dir(3)
