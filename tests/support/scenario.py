"""A small test driver for hand-written scenarios: one kcsim cluster, fed one event at a time.

    c = Cluster(brokers=[1, 2, 3])
    c.create("t", {0: [2, 3]})
    out = c.send({"type": "broker_failure", "broker": 2})
    assert c.partition("t", 0)["leader"] == 3
    assert out.sent() == [("LeaderAndIsr", 3, True), ...]

Everything goes through the public entry point (`Simulator.apply`), exactly as the
engines drive it; nothing is mocked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from controller.config import Settings
from controller.simulator import RawEvent, Simulator
from controller.zk.context import ControllerContext
from controller.zk.request_log import joined
from schemas.tables import STATE_TABLES

Row = dict[str, Any]
CLUSTER = "default"


@dataclass(frozen=True, slots=True)
class Output:
    """What one event appended to the output tables."""

    requests: list[Row]  # each joined with its payload's partitions and live_brokers
    state_changes: list[Row]
    results: list[Row]
    rejected: list[Row]
    violations: list[Row]
    health: tuple[Row, ...] = ()

    def of(self, type: str | None = None, broker: int | None = None) -> list[Row]:
        """The requests of one type and/or to one broker, in send order."""
        return [
            r
            for r in self.requests
            if (type is None or r["type"] == type) and (broker is None or r["broker"] == broker)
        ]

    def sent(self, type: str | None = None) -> list[tuple[str, int, bool]]:
        """(type, broker, delivered) of every request, in send order."""
        return [(r["type"], r["broker"], r["delivered"]) for r in self.of(type)]

    def recipients(self, type: str) -> list[int]:
        return [r["broker"] for r in self.of(type)]

    def changes(self, entity: str | None = None, ok: bool | None = None) -> list[Row]:
        return [
            s
            for s in self.state_changes
            if (entity is None or s["entity"] == entity) and (ok is None or s["ok"] is ok)
        ]

    def result(self, topic: str | None = None, partition: int | None = None) -> Row:
        """The one event_results row for a partition (or the only row)."""
        rows = [
            r
            for r in self.results
            if (topic is None or r["topic"] == topic)
            and (partition is None or r["partition"] == partition)
        ]
        assert len(rows) == 1, rows
        return rows[0]


def lai(entry: Row) -> tuple[int, int, list[int], int]:
    """(leader, leader_epoch, isr, partition_epoch) of a request's partition entry."""
    return (entry["leader"], entry["leader_epoch"], entry["isr"], entry["partition_epoch"])


def entries(request: Row) -> dict[tuple[str, int], Row]:
    return {(p["topic"], p["partition"]): p for p in request["partitions"]}


class Cluster:
    def __init__(self, settings: Settings | None = None, brokers: Iterable[int] = ()) -> None:
        self.settings = settings or Settings()
        self.simulator = Simulator(self.settings)
        self._lines = 0
        self._applied: list[Row] = []  # applied_events rows so far, for restart()
        self.last: Output | None = None
        self._health: Row | None = None
        for broker in brokers:
            self.start(broker)

    # ---- feeding events -------------------------------------------------------------------

    def send(self, event: dict[str, Any]) -> Output:
        self._lines += 1
        batch = self.simulator.apply([RawEvent(json.dumps(event), f"scenario:{self._lines}")])
        self._applied.extend(batch.appends["applied_events"])
        self.last = Output(
            requests=joined(
                batch.appends["controller_requests"], batch.appends["request_payloads"]
            ),
            state_changes=batch.appends["state_changes"],
            results=batch.appends["event_results"],
            rejected=batch.appends["rejected_events"],
            violations=list(batch.appends["violations"]),
            health=tuple(batch.appends["health"]),
        )
        if self.last.health:
            self._health = self.last.health[-1]
        return self.last

    def start(self, broker: int) -> Output:
        return self.send({"type": "broker_startup", "broker": broker})

    def fail(self, broker: int) -> Output:
        return self.send({"type": "broker_failure", "broker": broker})

    def shutdown(self, broker: int, broker_epoch: int | None = None) -> Output:
        event: dict[str, Any] = {"type": "controlled_shutdown", "broker": broker}
        if broker_epoch is not None:
            event["broker_epoch"] = broker_epoch
        return self.send(event)

    def create(
        self, topic: str, assignment: dict[int, list[int]], configs: dict[str, Any] | None = None
    ) -> Output:
        event: dict[str, Any] = {
            "type": "topic_creation",
            "topic": topic,
            "assignment": {str(p): rs for p, rs in assignment.items()},
        }
        if configs is not None:
            event["configs"] = configs
        return self.send(event)

    def reassign(self, topic: str, partition: int, replicas: list[int] | None) -> Output:
        return self.send(
            {
                "type": "partition_reassignment",
                "topic": topic,
                "partition": partition,
                "replicas": replicas,
            }
        )

    def isr(self, topic: str, partition: int, isr: list[int], **epochs: int) -> Output:
        return self.send(
            {"type": "isr_change", "topic": topic, "partition": partition, "isr": isr, **epochs}
        )

    def elect(self, election: str, partitions: list[tuple[str, int]] | None = None) -> Output:
        event: dict[str, Any] = {"type": "leader_election", "election": election}
        if partitions is not None:
            event["partitions"] = [{"topic": t, "partition": p} for t, p in partitions]
        return self.send(event)

    def delete(self, topic: str) -> Output:
        return self.send({"type": "topic_deletion", "topic": topic})

    def stop_replica_response(
        self, topic: str, partition: int, broker: int, error: str | None = None
    ) -> Output:
        return self.send(
            {
                "type": "stop_replica_response",
                "topic": topic,
                "partition": partition,
                "broker": broker,
                "error": error,
            }
        )

    def failover(self, controller: int | None = None, failed: list[int] | None = None) -> Output:
        event: dict[str, Any] = {"type": "controller_failover"}
        if controller is not None:
            event["controller"] = controller
        if failed is not None:
            event["failed_brokers"] = failed
        return self.send(event)

    def restart(self) -> None:
        """Stop and carry on from the stored state tables alone, as an engine does after a
        restart: the same controller goes on (no failover). Like the engines, it reads
        applied_events too: the last applied seq and the event ids already seen."""
        tables = {t.name: list(self.simulator.table_rows(t.name)) for t in STATE_TABLES}
        tables["applied_events"] = list(self._applied)
        self.simulator = Simulator.from_tables(self.settings, tables)

    # ---- reading state --------------------------------------------------------------------

    def health(self) -> Row:
        """The last applied event's `health` row."""
        assert self._health is not None
        return self._health

    @property
    def context(self) -> ControllerContext:
        return self.simulator.context(CLUSTER)

    def _rows(self, table: str) -> list[Row]:
        return list(self.simulator.table_rows(table))

    def partition(self, topic: str, partition: int) -> Row | None:
        rows = [
            r
            for r in self._rows("partition_state")
            if r["topic"] == topic and r["partition"] == partition
        ]
        return rows[0] if rows else None

    def state(self, topic: str, partition: int) -> tuple[str, int, list[int], int, int]:
        """(state, leader, isr, leader_epoch, partition_epoch): the usual assertion target."""
        row = self.partition(topic, partition)
        assert row is not None, f"no partition {topic}-{partition}"
        return (
            row["state"],
            row["leader"],
            row["isr"],
            row["leader_epoch"],
            row["partition_epoch"],
        )

    def replica(self, topic: str, partition: int, broker: int) -> str | None:
        for r in self._rows("replica_state"):
            if (r["topic"], r["partition"], r["broker"]) == (topic, partition, broker):
                return r["state"]
        return None

    def replicas(self, topic: str, partition: int) -> dict[int, str]:
        return {
            r["broker"]: r["state"]
            for r in self._rows("replica_state")
            if (r["topic"], r["partition"]) == (topic, partition)
        }

    def broker(self, broker: int) -> Row:
        return next(r for r in self._rows("brokers") if r["broker"] == broker)

    def cluster_row(self) -> Row:
        (row,) = self._rows("clusters")
        return row

    def topic(self, topic: str) -> Row | None:
        return next((r for r in self._rows("topics") if r["topic"] == topic), None)

    def requests(self, type: str | None = None, broker: int | None = None) -> list[Row]:
        """Requests of the last event."""
        assert self.last is not None
        return self.last.of(type, broker)
