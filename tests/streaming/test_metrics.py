"""`streaming.metrics`: the Prometheus endpoint of `kcsim run` and `kcsim shadow`, scraped
over HTTP, and what a batch of the core's output puts in it (CONTRACT §2: `divergences`
by `field`, `violations` by `invariant`, `health`'s `offline` and `at_min_isr`)."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.config import Settings
from controller.simulator import RawEvent, Simulator
from streaming.job.query import Totals, measure
from streaming.metrics import Metrics


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_two_processes_objects_keep_their_own_registries_and_serve_them() -> None:
    run, shadow = Metrics("run"), Metrics("shadow")
    try:
        run_port, shadow_port = run.serve(0), shadow.serve(0)
        run.events("a", applied=5, rejected=1)
        shadow.events("a", applied=2)
        shadow.lag("a", seconds=1.5, position=3)
        got = scrape(run_port)
        assert got["kcsim_events_applied_total", (("cluster", "a"), ("role", "run"))] == 5
        assert got["kcsim_events_rejected_total", (("cluster", "a"), ("role", "run"))] == 1
        assert not any(name.startswith("kcsim_lag") for name, _ in got)
        seen = scrape(shadow_port)
        assert seen["kcsim_events_applied_total", (("cluster", "a"), ("role", "shadow"))] == 2
        assert seen["kcsim_lag_seconds", (("cluster", "a"), ("role", "shadow"))] == 1.5
        assert seen["kcsim_lag_position", (("cluster", "a"), ("role", "shadow"))] == 3
    finally:
        run.close()
        shadow.close()


def event(body: dict) -> RawEvent:
    return RawEvent(json.dumps(body), "test")


def test_a_batch_counts_divergences_by_field_and_the_partitions_levels() -> None:
    """SPEC §4.3: partition 0 of t gets leader 1, epoch 0, ISR [1, 2]; the observed state
    claims leader 2 (a `leader` divergence). SPEC §6.3: broker 2 failing leaves the ISR
    [1], at min.insync.replicas 1; a line that is not JSON is rejected."""
    simulator = Simulator(Settings())
    observed = {
        "partitions": [
            {"topic": "t", "partition": 0, "leader": 2, "leader_epoch": 0, "isr": [1, 2]}
        ]
    }
    output = simulator.apply(
        [
            event({"type": "broker_startup", "broker": 1}),
            event({"type": "broker_startup", "broker": 2}),
            event(
                {
                    "type": "topic_creation",
                    "topic": "t",
                    "assignment": {"0": [1, 2]},
                    "observed": observed,
                }
            ),
            event({"type": "broker_failure", "broker": 2}),
            RawEvent("not json", "test:5"),
        ]
    )
    metrics = Metrics("run")
    measure(metrics, output, 0.25)
    text = metrics.render()
    families = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    base = (("cluster", "default"), ("role", "run"))
    assert families["kcsim_events_applied_total", base] == 4
    assert families["kcsim_events_rejected_total", (("cluster", ""), ("role", "run"))] == 1
    divergence = (("cluster", "default"), ("field", "leader"), ("role", "run"))
    assert families["kcsim_divergences_total", divergence] == 1
    assert families["kcsim_offline_partitions", base] == 0
    assert families["kcsim_at_min_isr_partitions", base] == 1
    assert families["kcsim_batch_duration_seconds_count", (("role", "run"),)] == 1
    totals = Totals()
    totals.add(1, output)
    assert totals.summary(True, 1, 2.0) == (
        "kcsim run: done: 1 batches, 1 files, 4 events applied, 1 rejected, 1 divergences, "
        "0 violations in 2.0 s"
    )
    assert Totals().summary(True, 4, 1.0) == "kcsim run: nothing new (4 files already applied)"


def test_a_metrics_port_taken_stops_run_before_spark_starts(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    from streaming import cli

    events = tmp_path / "events"
    events.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = cli.main(
            ["run", "--source", f"file:{events}", "--lake", str(tmp_path / "lake"), "--once",
             "--metrics-port", str(port)]
        )  # fmt: skip
    assert code == 2
    said = capsys.readouterr().err
    assert said.startswith(f"kcsim run: --metrics-port {port}: ") and "in use" in said
    assert not (tmp_path / "lake").exists()
