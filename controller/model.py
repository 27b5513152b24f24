"""Values the controller reasons about: states, partitions, assignments, leadership.

Everything here is immutable; the mutable state lives in `context.ControllerContext`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NamedTuple

NO_LEADER = -1
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


class PartitionState(StrEnum):
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"


class ReplicaState(StrEnum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


class RecoveryState(StrEnum):
    RECOVERED = "RECOVERED"
    RECOVERING = "RECOVERING"


class BrokerStatus(StrEnum):
    LIVE = "live"
    SHUTTING_DOWN = "shutting_down"
    DEAD = "dead"


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """RS (full list, in order), AR (adding) and RR (removing), as Kafka's ReplicaAssignment."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        """ORS = RS minus AR, in RS order."""
        if not self.adding:
            return self.replicas
        adding = set(self.adding)
        return tuple(r for r in self.replicas if r not in adding)

    @property
    def target(self) -> tuple[int, ...]:
        """TRS = RS minus RR, in RS order."""
        if not self.removing:
            return self.replicas
        removing = set(self.removing)
        return tuple(r for r in self.replicas if r not in removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: tuple[int, ...]) -> ReplicaAssignment:
        # ORS always comes from the current assignment, so replacing an in-flight
        # reassignment keeps the original origin (SPEC §0).
        origin = self.origin
        replicas = tuple(dict.fromkeys(target + origin))
        target_set = set(target)
        origin_set = set(origin)
        return ReplicaAssignment(
            replicas,
            tuple(r for r in replicas if r not in origin_set),
            tuple(r for r in replicas if r not in target_set),
        )

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != replica),
            tuple(r for r in self.adding if r != replica),
            tuple(r for r in self.removing if r != replica),
        )


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leadership as the controller caches it: Kafka's LeaderIsrAndControllerEpoch.

    `controller_epoch` is the cached one (what requests carry). It differs from the one
    ZooKeeper stores with the leader and ISR only after an ISR removal that found nothing to
    remove (SPEC §6.3): the controller re-caches the state under its own epoch without a
    write. `zk_controller_epoch` then keeps the stored one (None: the same as cached)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    recovery: RecoveryState = RecoveryState.RECOVERED
    controller_epoch: int = 0
    zk_controller_epoch: int | None = None

    def __init__(
        self,
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        partition_epoch: int,
        recovery: RecoveryState = RecoveryState.RECOVERED,
        controller_epoch: int = 0,
        zk_controller_epoch: int | None = None,
    ) -> None:
        # the dataclass's own __init__, through the slots' descriptors: the generated one
        # of a frozen class looks object.__setattr__ up again for every field, which made
        # a construction twice as slow (2% of a rolling restart: one per leadership change)
        _SET_LEADER(self, leader)
        _SET_LEADER_EPOCH(self, leader_epoch)
        _SET_ISR(self, isr)
        _SET_PARTITION_EPOCH(self, partition_epoch)
        _SET_RECOVERY(self, recovery)
        _SET_CONTROLLER_EPOCH(self, controller_epoch)
        _SET_ZK_CONTROLLER_EPOCH(self, zk_controller_epoch)

    @property
    def stored_controller_epoch(self) -> int:
        """The controller epoch in the partition's state znode: what a new controller loads."""
        return (
            self.controller_epoch if self.zk_controller_epoch is None else self.zk_controller_epoch
        )

    @property
    def is_restamped(self) -> bool:
        return self.zk_controller_epoch is not None

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        # the constructor, not dataclasses.replace (its introspection cost more than the
        # rest of an ISR shrink): this runs for every partition a broker failure touches
        return LeaderAndIsr(
            leader,
            self.leader_epoch + 1,
            isr,
            self.partition_epoch,
            self.recovery,
            self.controller_epoch,
            self.zk_controller_epoch,
        )

    def new_recovering_leader_and_isr(self, leader: int, isr: tuple[int, ...]) -> LeaderAndIsr:
        return replace(self.new_leader_and_isr(leader, isr), recovery=RecoveryState.RECOVERING)

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return self.new_leader_and_isr(leader, self.isr)

    def new_epoch(self) -> LeaderAndIsr:
        return self.new_leader_and_isr(self.leader, self.isr)

    def written(self, controller_epoch: int) -> LeaderAndIsr:
        """The state after a successful conditional write: znode version + 1, stored and
        cached under the writer's epoch."""
        return LeaderAndIsr.after_write(
            self.leader,
            self.leader_epoch,
            self.isr,
            self.recovery,
            self.partition_epoch,
            controller_epoch,
        )

    @staticmethod
    def after_write(
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        recovery: RecoveryState,
        version: int,
        controller_epoch: int,
    ) -> LeaderAndIsr:
        """`written` of a proposed state whose znode is at `version`, built in one step (no
        proposal object first: AlterPartition does this for every accepted change)."""
        # the constructor, not dataclasses.replace: this runs for every accepted write
        # (a third of an AlterPartition's cost went to replace's introspection)
        return LeaderAndIsr(leader, leader_epoch, isr, version + 1, recovery, controller_epoch)

    def stamped(self, controller_epoch: int) -> LeaderAndIsr:
        """The same stored state, cached under this controller's epoch (no write): the znode
        keeps the epoch of the controller that last wrote it."""
        if controller_epoch == self.controller_epoch:
            return self
        stored = self.stored_controller_epoch
        return replace(
            self,
            controller_epoch=controller_epoch,
            zk_controller_epoch=None if stored == controller_epoch else stored,
        )

    def as_stored(self) -> LeaderAndIsr:
        """The state as a controller loading the znode caches it (SPEC §7.2 step 4g)."""
        if self.zk_controller_epoch is None:
            return self
        return replace(self, controller_epoch=self.zk_controller_epoch, zk_controller_epoch=None)


# LeaderAndIsr's slots, set as the generated __init__ would (frozen: no plain assignment).
# (mypy takes a slot read on the class for an instance attribute: each line's `misc`.)
_SET_LEADER = LeaderAndIsr.leader.__set__  # type: ignore[attr-defined, misc]
_SET_LEADER_EPOCH = LeaderAndIsr.leader_epoch.__set__  # type: ignore[attr-defined, misc]
_SET_ISR = LeaderAndIsr.isr.__set__  # type: ignore[attr-defined, misc]
_SET_PARTITION_EPOCH = LeaderAndIsr.partition_epoch.__set__  # type: ignore[attr-defined, misc]
_SET_RECOVERY = LeaderAndIsr.recovery.__set__  # type: ignore[attr-defined, misc]
_SET_CONTROLLER_EPOCH = LeaderAndIsr.controller_epoch.__set__  # type: ignore[attr-defined, misc]
_SET_ZK_CONTROLLER_EPOCH = LeaderAndIsr.zk_controller_epoch.__set__  # type: ignore[misc, union-attr]
