"""The `state` a partition carries in an imported event (`observed`, and the `state` of a
creation that loads a snapshot): one shape for the shadow and both importers."""

from __future__ import annotations

from typing import Any, Protocol


class StoredState(Protocol):
    """A partition's state as a real cluster stored it (a state znode, a KRaft record)."""

    @property
    def leader(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def partition_epoch(self) -> int | None: ...
    @property
    def controller_epoch(self) -> int: ...
    @property
    def leader_recovery_state(self) -> str: ...


def state_field(state: StoredState) -> dict[str, Any]:
    """CONTRACT's partition state fields; `partition_epoch` only where the source has it
    (a state-change log line does not)."""
    row: dict[str, Any] = {
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.partition_epoch is not None:
        row["partition_epoch"] = state.partition_epoch
    row["controller_epoch"] = state.controller_epoch
    row["leader_recovery_state"] = state.leader_recovery_state
    return row
