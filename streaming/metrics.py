"""Prometheus metrics of a long-running kcsim process (`kcsim run`, `kcsim shadow`), served
with `prometheus_client` when the command is given `--metrics-port PORT`.

One `Metrics` object per process: it owns its own `CollectorRegistry` (nothing goes to
the library's global registry), so two in one interpreter (tests, a KRaft and a ZooKeeper
shadow side by side) never clash. The interface, for any command that wants it:

    metrics = Metrics("shadow")             # role: "run" | "shadow" (a constant label)
    port = metrics.serve(9464)              # HTTP /metrics on 127.0.0.1 (0: any free port)
    metrics.events(cluster, applied=n)      # events applied (run) or written (shadow)
    metrics.events(cluster, rejected=n)     # events rejected
    metrics.divergences(cluster, {"leader": 2})           # by class (the row's `field`)
    metrics.violations(cluster, {"one_leader_per_epoch": 1})  # by invariant
    metrics.lag(cluster, seconds=0.8, position=3)  # behind the cluster: time, and zxids
                                            # (ZooKeeper) or metadata offsets (KRaft)
    metrics.batch(seconds)                  # one micro-batch (run) or flush (shadow)
    metrics.partitions(cluster, offline=0, at_min_isr=1)  # levels, as last seen
    metrics.render()                        # the exposition text (what a scrape returns)
    metrics.close()                         # stop serving

The names (all prefixed `kcsim_`, labels `cluster` and `role`):
`events_applied_total`, `events_rejected_total`, `divergences_total{field}`,
`violations_total{invariant}`, `lag_seconds`, `lag_position`,
`batch_duration_seconds` (a histogram), `offline_partitions`, `at_min_isr_partitions` (ISR
at or below `min.insync.replicas`, the `health` table's `at_min_isr`: one more replica out
and acks=all writes stop, or they already have).
`docs/guide/monitoring.md` has an alert rule and a Grafana dashboard over them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import start_http_server

PREFIX = "kcsim"
# micro-batches run from milliseconds (a shadow's flush) to minutes (a 100k-partition batch)
BATCH_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Metrics:
    """The metrics of one process, in a registry of its own."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.registry = CollectorRegistry(auto_describe=True)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        labels = ("role", "cluster")

        def counter(name: str, doc: str, *extra: str) -> Counter:
            return Counter(f"{PREFIX}_{name}", doc, (*labels, *extra), registry=self.registry)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"{PREFIX}_{name}", doc, labels, registry=self.registry)

        self._applied = counter("events_applied", "events applied (run) or written (shadow)")
        self._rejected = counter("events_rejected", "events rejected (rejected_events rows)")
        self._divergences = counter(
            "divergences", "divergences from the real controller, by field", "field"
        )
        self._violations = counter("violations", "invariant violations, by invariant", "invariant")
        self._lag_seconds = gauge(
            "lag_seconds", "behind the cluster: write time minus the cluster's time of the "
            "newest change written"
        )  # fmt: skip
        self._lag_position = gauge(
            "lag_position", "behind the cluster: zxids (ZooKeeper) or metadata offsets "
            "(KRaft) read but not yet written"
        )  # fmt: skip
        self._batch = Histogram(
            f"{PREFIX}_batch_duration_seconds",
            "one micro-batch (run) or flush (shadow), seconds",
            ("role",),
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self._offline = gauge("offline_partitions", "partitions with no leader")
        self._at_min_isr = gauge(
            "at_min_isr_partitions", "partitions whose ISR is at or below min.insync.replicas"
        )

    # ------------------------------------------------------------------ serving

    def serve(self, port: int, address: str = "127.0.0.1") -> int:
        """Serve `/metrics` over HTTP on a daemon thread; the port bound (0: a free one)."""
        self._server, self._thread = start_http_server(port, address, registry=self.registry)
        return int(self._server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def render(self) -> str:
        return generate_latest(self.registry).decode()

    # ------------------------------------------------------------------ recording

    def events(self, cluster: str, applied: int = 0, rejected: int = 0) -> None:
        self._applied.labels(self.role, cluster).inc(applied)
        self._rejected.labels(self.role, cluster).inc(rejected)

    def divergences(self, cluster: str, by_field: Mapping[str, int]) -> None:
        for name, count in by_field.items():
            self._divergences.labels(self.role, cluster, name).inc(count)

    def violations(self, cluster: str, by_invariant: Mapping[str, int]) -> None:
        for name, count in by_invariant.items():
            self._violations.labels(self.role, cluster, name).inc(count)

    def lag(self, cluster: str, seconds: float, position: int) -> None:
        self._lag_seconds.labels(self.role, cluster).set(seconds)
        self._lag_position.labels(self.role, cluster).set(position)

    def batch(self, seconds: float) -> None:
        self._batch.labels(self.role).observe(seconds)

    def partitions(self, cluster: str, offline: int, at_min_isr: int) -> None:
        self._offline.labels(self.role, cluster).set(offline)
        self._at_min_isr.labels(self.role, cluster).set(at_min_isr)
