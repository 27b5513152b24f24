"""What the controller says while it applies events: the append-only table rows.

State-change log lines (Kafka's state-change.log), the requests a flush sends and the
answers to requests that events carry. Rows are plain dicts in `schemas.tables` order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress
from typing import Any

from controller import invariants
from controller.invariants import Violation
from controller.model import LeaderAndIsr, TopicPartition
from controller.zk.request_log import RequestLog

Row = dict[str, Any]


class Journal:
    def __init__(self, cluster: str, state_changes: bool = True) -> None:
        """`state_changes=False`: the state-change log is not kept (no `state_changes`
        rows; the unclean elections are still counted)."""
        self.cluster = cluster
        self.logs_state_changes = state_changes
        self.event_id: str | None = None
        self.seq: int | None = None
        self.ts: int | None = None
        self.request_seq = 0
        self.payload = 0  # the next request body's number within the event
        self.requests = RequestLog()
        self.state_changes: list[Row] = []
        # the unclean elections among the state changes written so far (never drained): the
        # health row's count grows by an event's share without a pass over its rows
        self.unclean_elections = 0
        self.results: list[Row] = []
        self.violations: list[Violation] = []  # the event's, until the runner takes them
        # (recipients, delivered flags, type) of each body sent since the last delivery check
        self._sent: list[tuple[Sequence[int], Sequence[bool], str]] = []
        self._entries = 0  # the partition entries of the request bodies held

    def begin(self, event_id: str, seq: int, ts: int | None) -> None:
        self.event_id = event_id
        self.seq = seq
        self.ts = ts
        self.request_seq = 0
        self.payload = 0

    def drain(self) -> tuple[RequestLog, list[Row], list[Row]]:
        drained = (self.requests, self.state_changes, self.results)
        self.requests, self.state_changes, self.results = RequestLog(), [], []
        self._entries = 0
        return drained

    def check_deliveries(self, registered: frozenset[int]) -> None:
        """The invariant "no request is delivered to a dead broker", on the requests sent
        since the last check: `registered` is the brokers with a registration at send
        time; a violation for each delivered request to another."""
        sent = self._sent
        for brokers, delivered, request_type in sent:
            if not registered.issuperset(compress(brokers, delivered)):  # (in C)
                for broker in compress(brokers, delivered):
                    if broker not in registered:
                        self.violations.append(invariants.delivered_to_dead(broker, request_type))
        sent.clear()

    def held(self) -> int:
        """The size of what is held until drained: rows plus the request bodies' partition
        entries (a new broker's UpdateMetadata is one row holding every partition)."""
        return len(self.state_changes) + len(self.results) + len(self.requests) + self._entries

    def request(
        self,
        controller_epoch: int,
        request_type: str,
        broker: int,
        delivered: bool,
        partitions: list[Row],
        live_brokers: list[int] | None,
    ) -> None:
        self._add(controller_epoch, request_type, (broker,), (delivered,), partitions, live_brokers)

    def fan_out(
        self,
        controller_epoch: int,
        request_type: str,
        brokers: Sequence[int],
        is_registered: Callable[[int], bool],
        partitions: list[Row],
        live_brokers: list[int] | None,
    ) -> None:
        """The same request body to many brokers (UpdateMetadata): one payload, whose
        requests share everything but the recipient."""
        delivered = list(map(is_registered, brokers))
        self._add(controller_epoch, request_type, brokers, delivered, partitions, live_brokers)

    def _add(
        self,
        controller_epoch: int,
        request_type: str,
        brokers: Sequence[int],
        delivered: Sequence[bool],
        partitions: list[Row],
        live_brokers: list[int] | None,
    ) -> None:
        shared = (
            self.cluster,
            controller_epoch,
            self.event_id,
            self.seq,
            request_type,
            self.payload,
            partitions,
            live_brokers,
            self.ts,
        )
        self.requests.add(shared, self.request_seq + 1, brokers, delivered)
        self._sent.append((brokers, delivered, request_type))
        self.request_seq += len(brokers)
        self.payload += 1
        self._entries += len(partitions)

    def state_change(
        self,
        entity: str,
        tp: TopicPartition,
        broker: int | None,
        from_state: str | None,
        to_state: str,
        leadership: LeaderAndIsr | None,
        error: str | None = None,
        unclean: bool = False,
    ) -> None:
        if unclean:
            self.unclean_elections += 1
        if not self.logs_state_changes:
            return
        self.state_changes.append(
            {
                "cluster": self.cluster,
                "event_id": self.event_id,
                "seq": self.seq,
                "entity": entity,
                "topic": tp.topic,
                "partition": tp.partition,
                "broker": broker,
                "from_state": from_state,
                "to_state": to_state,
                "ok": error is None,
                "error": error,
                "leader": None if leadership is None else leadership.leader,
                "leader_epoch": None if leadership is None else leadership.leader_epoch,
                "isr": None if leadership is None else list(leadership.isr),
                "unclean": unclean,
                "ts": self.ts,
            }
        )

    def result(
        self,
        topic: str | None,
        partition: int | None,
        error: str | None,
        message: str | None = None,
        leadership: LeaderAndIsr | None = None,
    ) -> None:
        self.results.append(
            {
                "cluster": self.cluster,
                "event_id": self.event_id,
                "seq": self.seq,
                "topic": topic,
                "partition": partition,
                "error": error,
                "message": message,
                "leader": None if leadership is None else leadership.leader,
                "leader_epoch": None if leadership is None else leadership.leader_epoch,
                "isr": None if leadership is None else list(leadership.isr),
                "partition_epoch": None if leadership is None else leadership.partition_epoch,
                "ts": self.ts,
            }
        )
