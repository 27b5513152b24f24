"""QuorumController: one simulated KRaft cluster; events in, records out (SPEC-KRAFT §3.5,
§18, §22). Interface first; the implementation follows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller.kraft.outcome import BrokerView, Outcome, PartitionView, Record, TopicView
from controller.kraft.settings import KRaftSettings


class QuorumController:
    def __init__(self, settings: KRaftSettings, cluster: str = "default") -> None:
        self.settings = settings
        self.cluster = cluster
        self.controller_epoch = 1
        self.active_controller: int | None = None

    def apply(self, event: Mapping[str, Any]) -> Outcome:
        raise NotImplementedError

    def replay(self, record: Record | Mapping[str, Any]) -> None:
        raise NotImplementedError

    def partitions(self) -> Iterable[PartitionView]:
        raise NotImplementedError

    def partition(self, topic: str, partition: int) -> PartitionView | None:
        raise NotImplementedError

    def brokers(self) -> Iterable[BrokerView]:
        raise NotImplementedError

    def broker(self, broker: int) -> BrokerView | None:
        raise NotImplementedError

    def topics(self) -> Iterable[TopicView]:
        raise NotImplementedError

    @property
    def elr_enabled(self) -> bool:
        raise NotImplementedError

    def dump(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def load(cls, settings: KRaftSettings, data: Mapping[str, Any]) -> QuorumController:
        raise NotImplementedError
