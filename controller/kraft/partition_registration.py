"""A partition's registration and the merge of a PartitionChangeRecord into it
(Kafka's `PartitionRegistration`, SPEC-KRAFT §2.2, §3.2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

NO_LEADER = -1
NO_LEADER_CHANGE = -2
LRS_RECOVERED = 0
LRS_RECOVERING = 1
LRS_NO_CHANGE = -1

Ints = tuple[int, ...]


class PartitionRegistration(NamedTuple):
    """A partition's state as the controller holds it. (A named tuple: a new one replaces
    the old at every record that changes the partition, ~900,000 in a 100-broker roll of
    100k partitions, and a frozen dataclass is built a field at a time.)"""

    replicas: Ints
    isr: Ints
    removing: Ints
    adding: Ints
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    elr: Ints = ()
    lke: Ints = ()

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def has_preferred_leader(self) -> bool:
        """`PReg.hasPreferredLeader`: a leaderless partition is imbalanced."""
        return self.leader != NO_LEADER and self.leader == self.replicas[0]

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    def merge(self, change: Mapping[str, Any]) -> PartitionRegistration:
        """`PReg.merge`: the fields a PartitionChangeRecord sets replace ours; a set leader
        (the same one included) bumps the leader epoch; the partition epoch always grows.
        (Built with tuple.__new__, fields in order: one merge per record replayed.)"""
        get = change.get
        leader = get("leader", NO_LEADER_CHANGE)
        if leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader_epoch = self.leader_epoch + 1
        lrs = get("leaderRecoveryState", LRS_NO_CHANGE)
        replicas = get("replicas")
        isr = get("isr")
        removing = get("removingReplicas")
        adding = get("addingReplicas")
        elr = get("eligibleLeaderReplicas")
        lke = get("lastKnownElr")
        return _new_tuple(
            PartitionRegistration,
            (
                self.replicas if replicas is None else tuple(replicas),
                self.isr if isr is None else tuple(isr),
                self.removing if removing is None else tuple(removing),
                self.adding if adding is None else tuple(adding),
                leader,
                self.leader_recovery_state if lrs == LRS_NO_CHANGE else lrs,
                leader_epoch,
                self.partition_epoch + 1,
                self.elr if elr is None else tuple(elr),
                self.lke if lke is None else tuple(lke),
            ),
        )

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> PartitionRegistration:
        """A registration from a PartitionRecord's fields."""
        return cls(
            replicas=tuple(record["replicas"]),
            isr=tuple(record["isr"]),
            removing=tuple(record.get("removingReplicas") or ()),
            adding=tuple(record.get("addingReplicas") or ()),
            leader=record["leader"],
            leader_recovery_state=record.get("leaderRecoveryState", LRS_RECOVERED),
            leader_epoch=record.get("leaderEpoch", 0),
            partition_epoch=record.get("partitionEpoch", 0),
            elr=tuple(record.get("eligibleLeaderReplicas") or ()),
            lke=tuple(record.get("lastKnownElr") or ()),
        )


_new_tuple = tuple.__new__
