"""Broker registrations and their soft heartbeat state (Kafka's `ClusterControlManager` and
`BrokerHeartbeatManager`, SPEC-KRAFT §2.1, §2.6, §6-§10)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.kraft import records as rec
from controller.kraft.outcome import KRaftRejection, Record

# heartbeat states (BrokerControlState)
FENCED = "FENCED"
UNFENCED = "UNFENCED"
CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
SHUTDOWN_NOW = "SHUTDOWN_NOW"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker: int
    incarnation: str | None
    epoch: int
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool

    @property
    def status(self) -> str:
        if self.fenced:
            return "fenced"
        return "shutting_down" if self.in_controlled_shutdown else "live"


class ClusterControlManager:
    def __init__(self) -> None:
        self.registrations: dict[int, BrokerRegistration] = {}
        # the offset of each broker's last RegisterBrokerRecord (the unfence threshold)
        self.register_offsets: dict[int, int] = {}
        # soft state: brokers in the CONTROLLED_SHUTDOWN heartbeat state
        self.shutdown_pending: set[int] = set()
        # [kcsim] brokers that asked to shut down since they registered, and brokers whose
        # last fence ended a shutdown they asked for (SPEC-KRAFT §6.3)
        self.asked_shutdown: set[int] = set()
        self.clean_exit: set[int] = set()
        # every broker id a registration ever named (an id never seen is a rejection)
        self.seen: set[int] = set()

    # -- predicates --------------------------------------------------------------------
    def registration(self, broker: int) -> BrokerRegistration | None:
        return self.registrations.get(broker)

    def is_active(self, broker: int) -> bool:
        """`CCM.isActive`: registered, unfenced and not in controlled shutdown."""
        r = self.registrations.get(broker)
        return r is not None and not r.fenced and not r.in_controlled_shutdown

    def heartbeat_state(self, broker: int) -> str:
        """`BHM.currentBrokerState`."""
        if broker in self.shutdown_pending:
            return CONTROLLED_SHUTDOWN
        r = self.registrations[broker]
        return FENCED if r.fenced else UNFENCED

    def usable_brokers(self) -> Iterator[tuple[int, str | None, bool]]:
        """`BHM.usableBrokers`: (id, rack, fenced) of registered brokers not in the
        CONTROLLED_SHUTDOWN heartbeat state, in ascending id order."""
        for broker in sorted(self.registrations):
            if broker in self.shutdown_pending:
                continue
            r = self.registrations[broker]
            yield broker, r.rack, r.fenced

    def require_registered(self, broker: int, event_type: str) -> BrokerRegistration:
        r = self.registrations.get(broker)
        if r is None:
            if broker in self.seen:
                raise KRaftRejection(
                    f"{event_type}: broker {broker} is not registered (it was unregistered)"
                )
            raise KRaftRejection(f"{event_type}: unknown broker {broker}")
        return r

    # -- replay ------------------------------------------------------------------------
    def replay(self, record: Record, offset: int) -> bool:
        """Apply a broker record; returns whether the registration changed."""
        f = record.fields
        kind = record.type
        broker = f["brokerId"]
        if kind == rec.REGISTER_BROKER:
            self.registrations[broker] = BrokerRegistration(
                broker=broker,
                incarnation=f.get("incarnationId"),
                epoch=f["brokerEpoch"],
                rack=f.get("rack"),
                fenced=f.get("fenced", True),
                in_controlled_shutdown=f.get("inControlledShutdown", False),
            )
            self.register_offsets[broker] = offset
            self.shutdown_pending.discard(broker)
            self.seen.add(broker)
            return True
        current = self.registrations.get(broker)
        if current is None or current.epoch != f.get("brokerEpoch", current.epoch):
            raise RuntimeError(f"{kind} for broker {broker} with a stale or unknown epoch")
        if kind == rec.UNREGISTER_BROKER:
            del self.registrations[broker]
            self.register_offsets.pop(broker, None)
            self.shutdown_pending.discard(broker)
            self.asked_shutdown.discard(broker)
            self.clean_exit.discard(broker)
            return True
        if kind == rec.FENCE_BROKER:
            fenced: int = rec.FENCE
            shutdown = 0
        elif kind == rec.UNFENCE_BROKER:
            fenced, shutdown = rec.UNFENCE, 0
        else:
            fenced = f.get("fenced", 0)
            shutdown = f.get("inControlledShutdown", 0)
        updated = current
        if fenced == rec.FENCE:
            updated = replace(updated, fenced=True)
            self.shutdown_pending.discard(broker)
        elif fenced == rec.UNFENCE:
            updated = replace(updated, fenced=False)
        if shutdown == rec.IN_CONTROLLED_SHUTDOWN:
            updated = replace(updated, in_controlled_shutdown=True)
        if updated == current:
            return False  # a change that changes nothing is ignored
        self.registrations[broker] = updated
        return True

    # -- failover ----------------------------------------------------------------------
    def activate(self) -> None:
        """`CCM.activate`: heartbeat states rebuilt from the registrations, with no
        controlled-shutdown offset (SPEC-KRAFT §18)."""
        self.shutdown_pending.clear()

    # -- persistence -------------------------------------------------------------------
    def dump(self) -> dict[str, Any]:
        return {
            "registrations": [
                [r.broker, r.incarnation, r.epoch, r.rack, r.fenced, r.in_controlled_shutdown]
                for r in sorted(self.registrations.values(), key=lambda r: r.broker)
            ],
            "register_offsets": [[b, o] for b, o in sorted(self.register_offsets.items())],
            "shutdown_pending": sorted(self.shutdown_pending),
            "asked_shutdown": sorted(self.asked_shutdown),
            "clean_exit": sorted(self.clean_exit),
            "seen": sorted(self.seen),
        }

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> ClusterControlManager:
        self = cls()
        for broker, incarnation, epoch, rack, fenced, shutdown in data["registrations"]:
            self.registrations[broker] = BrokerRegistration(
                broker, incarnation, epoch, rack, fenced, shutdown
            )
        self.register_offsets = {b: o for b, o in data["register_offsets"]}
        self.shutdown_pending = set(data["shutdown_pending"])
        self.asked_shutdown = set(data["asked_shutdown"])
        self.clean_exit = set(data["clean_exit"])
        self.seen = set(data["seen"])
        return self
