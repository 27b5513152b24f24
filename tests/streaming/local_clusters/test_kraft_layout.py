"""The KRaft cluster's layouts (`kcsim kafka-local start --nodes N [--controllers C]`):
which node plays which role, who votes, and that a layout survives its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.local_clusters import kraft_cluster as cluster
from streaming.local_clusters.processes import LocalClusterError


def test_combined_nodes_are_brokers_and_voters(tmp_path: Path) -> None:
    layout = cluster._new_layout(tmp_path, 3)
    assert layout.node_ids == layout.all_nodes == (1, 2, 3)
    assert layout.controller_ids == ()
    config = cluster.node_config(layout, 2)
    assert config["process.roles"] == "broker,controller"
    assert config["controller.quorum.voters"] == ",".join(
        f"{n}@127.0.0.1:{layout.controller_ports[n]}" for n in (1, 2, 3)
    )
    assert config["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{layout.broker_ports[2]}"


def test_separate_controllers_are_the_only_voters(tmp_path: Path) -> None:
    layout = cluster._new_layout(tmp_path, 3, controllers=3)
    assert layout.node_ids == (1, 2, 3)
    assert layout.controller_ids == (4, 5, 6)
    assert layout.all_nodes == (1, 2, 3, 4, 5, 6)
    ports = [*layout.broker_ports.values(), *layout.controller_ports.values()]
    assert len(set(ports)) == 9  # three broker listeners, six controller ports, none shared
    voters = ",".join(f"{n}@127.0.0.1:{layout.controller_ports[n]}" for n in (4, 5, 6))
    broker = cluster.node_config(layout, 1)
    assert broker["process.roles"] == "broker"
    assert broker["listeners"] == f"PLAINTEXT://127.0.0.1:{layout.broker_ports[1]}"
    assert broker["controller.quorum.voters"] == voters
    assert broker["inter.broker.listener.name"] == "PLAINTEXT"
    controller = cluster.node_config(layout, 5)
    assert controller["process.roles"] == "controller"
    assert controller["listeners"] == f"CONTROLLER://127.0.0.1:{layout.controller_ports[5]}"
    assert controller["controller.quorum.voters"] == voters
    # a controller-only node has no broker listener to advertise or to replicate over
    assert "advertised.listeners" not in controller
    assert "inter.broker.listener.name" not in controller


def test_a_layout_reads_back_as_written(tmp_path: Path) -> None:
    layout = cluster._new_layout(tmp_path, 3, controllers=3)
    layout.save()
    assert cluster.load_layout(tmp_path) == layout
    # the same directory asked for another shape is refused, naming what it holds
    with pytest.raises(LocalClusterError, match="3 brokers and 3 separate controllers"):
        cluster._new_layout(tmp_path, 5, controllers=3)
    assert cluster._new_layout(tmp_path, 3, controllers=3) == layout


def test_a_controller_only_node_has_a_directory_but_no_broker_port(tmp_path: Path) -> None:
    layout = cluster._new_layout(tmp_path, 2, controllers=1)
    assert layout.node_dir(3) == tmp_path / "node-3"
    assert 3 not in layout.broker_ports
    with pytest.raises(LocalClusterError, match="no node 4"):
        layout.node_dir(4)
