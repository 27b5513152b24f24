"""`PartitionChangeBuilder.build`: every change to an existing partition (SPEC-KRAFT §4).

The steps run in Kafka's order and later steps read what earlier ones wrote into the
record R. The result is the PartitionChangeRecord's fields (or None when the build changes
nothing) and what kind of election produced its leader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from controller.kraft.errors import UnexpectedError
from controller.kraft.java_collections import hash_set_order
from controller.kraft.partition_registration import (
    LRS_NO_CHANGE,
    LRS_RECOVERING,
    NO_LEADER,
    NO_LEADER_CHANGE,
    Ints,
    PartitionRegistration,
)
from controller.kraft.settings import MV_3_6_IV0


class Election(Enum):
    PREFERRED = "PREFERRED"
    ONLINE = "ONLINE"
    UNCLEAN = "UNCLEAN"


@dataclass(frozen=True, slots=True)
class BuildResult:
    """fields: the PartitionChangeRecord's fields in schema order (partitionId, topic, then
    the set ones), or None for a no-op build. unclean: the leader came from an unclean pick
    or the last known leader; elr_election: the leader came from the target ELR;
    lke_election: the leader is the last known leader."""

    fields: dict[str, Any] | None
    unclean: bool = False
    elr_election: bool = False
    lke_election: bool = False


_NO_CHANGE = BuildResult(None)


def _contains_all(container: Ints, items: Ints) -> bool:
    return set(items).issubset(container)


class PartitionChangeBuilder:
    """One build of one partition. Set the targets (attributes `target_*`, `election`,
    `unclean_shutdown_replicas`) after construction, then call `build()` once."""

    __slots__ = (
        "_acceptable",
        "election",
        "elr_enabled",
        "metadata_level",
        "min_isr",
        "partition",
        "partition_id",
        "target_adding",
        "target_elr",
        "target_isr",
        "target_lrs",
        "target_removing",
        "target_replicas",
        "topic",
        "unclean_shutdown_replicas",
    )

    def __init__(
        self,
        partition: PartitionRegistration,
        topic: str,
        partition_id: int,
        acceptable: Callable[[int], bool],
        metadata_level: int,
        min_isr: int,
        elr_enabled: bool,
    ) -> None:
        self.partition = partition
        self.topic = topic
        self.partition_id = partition_id
        self._acceptable = acceptable
        self.metadata_level = metadata_level
        self.min_isr = min_isr
        self.elr_enabled = elr_enabled
        self.election = Election.ONLINE
        self.target_isr: Ints = partition.isr
        self.target_replicas: Ints = partition.replicas
        self.target_removing: Ints = partition.removing
        self.target_adding: Ints = partition.adding
        self.target_elr: Ints = partition.elr
        self.target_lrs: int = partition.leader_recovery_state
        self.unclean_shutdown_replicas: Ints = ()

    # -- RCM.LeaderAcceptor: the caller's predicate, then the replica's directory, which
    # Kafka looks up in the partition's replicas (a non-replica passing the predicate makes
    # PartitionRegistration.directory throw). Directories are always online in kcsim.
    def acceptable(self, replica: int) -> bool:
        if not self._acceptable(replica):
            return False
        if replica not in self.partition.replicas:
            raise UnexpectedError(
                f"Replica {replica} is not assigned to partition {self.topic}-{self.partition_id}."
            )
        return True

    def _valid(self, replica: int) -> bool:
        in_target = replica in self.target_isr or (
            not self.target_isr and replica in self.target_elr
        )
        return in_target and self.acceptable(replica)

    def _can_elect_last_known_leader(self) -> bool:
        if not self.elr_enabled:
            return False
        if self.target_elr or self.target_isr:
            return False
        lke = self.partition.lke
        if len(lke) != 1:
            return False
        return self.acceptable(lke[0])

    def _elect(self) -> tuple[int, bool, bool]:
        """(node, unclean, from the last known leader): PCB.electLeader (SPEC-KRAFT §4.3)."""
        p = self.partition
        replicas = self.target_replicas
        if self.election is Election.PREFERRED:
            if self._valid(replicas[0]):
                return replicas[0], False, False
            if self._valid(p.leader):
                return p.leader, False, False
            for replica in replicas[1:]:
                if self._valid(replica):
                    return replica, False, False
            if self._can_elect_last_known_leader():
                return p.lke[0], True, True
            return NO_LEADER, False, False
        if self._valid(p.leader):
            return p.leader, False, False
        for replica in replicas:
            if self._valid(replica):
                return replica, False, False
        if self._can_elect_last_known_leader():
            return p.lke[0], True, True
        if self.election is Election.UNCLEAN:
            for replica in replicas:
                if self.acceptable(replica):
                    return replica, True, False
        return NO_LEADER, False, False

    def build(self) -> BuildResult:
        p = self.partition
        elr_enabled = self.elr_enabled
        # R: None stands for "unset" (isr, lists), NO_LEADER_CHANGE / LRS_NO_CHANGE for
        # the leader and the recovery state.
        r_isr: Ints | None = None
        r_leader = NO_LEADER_CHANGE
        r_replicas: Ints | None = None
        r_removing: Ints | None = None
        r_adding: Ints | None = None
        r_lrs = LRS_NO_CHANGE
        r_elr: Ints | None = None
        r_lke: Ints | None = None

        # 1. completeReassignmentIfNeeded (PRR.maybeCompleteReassignment)
        removing, adding = self.target_removing, self.target_adding
        if removing or adding:
            isr2, replicas2 = self.target_isr, self.target_replicas
            if removing:
                isr2 = tuple(x for x in isr2 if x not in removing)
                replicas2 = tuple(x for x in replicas2 if x not in removing)
            if isr2 and replicas2 and _contains_all(isr2, replicas2):
                self.target_isr = isr2
                self.target_replicas = replicas2
                self.target_removing = ()
                self.target_adding = ()

        # 2. maybePopulateTargetElr
        if elr_enabled:
            if len(self.target_isr) >= self.min_isr:
                self.target_elr = ()
            else:
                target_isr = set(self.target_isr)
                unclean_replicas = self.unclean_shutdown_replicas
                self.target_elr = tuple(
                    x
                    for x in hash_set_order(self.target_elr, p.isr)
                    if x not in target_isr and x not in unclean_replicas
                )

        # 3. tryElection
        node, unclean, from_lke = self._elect()
        elr_election = False
        if node != p.leader:
            if node in self.target_elr:
                self.target_isr = (node,)
                self.target_elr = tuple(x for x in self.target_elr if x != node)
                elr_election = True
            r_leader = node
            if unclean:
                r_isr = (node,)
                if p.leader_recovery_state != LRS_RECOVERING:
                    r_lrs = LRS_RECOVERING
        else:
            unclean = from_lke = False

        # 4. triggerLeaderEpochBumpForReplicaReassignmentIfNeeded (the replicas untouched,
        # the same tuple: they hold themselves)
        target_replicas = self.target_replicas
        if (
            r_leader == NO_LEADER_CHANGE
            and target_replicas is not p.replicas
            and not _contains_all(target_replicas, p.replicas)
        ):
            r_leader = p.leader

        # 5. maybeUpdateRecordElr
        if r_isr is not None or not elr_enabled:
            self.target_elr = ()
        if self.target_elr != p.elr:
            r_elr = self.target_elr

        # 6. the ISR
        if r_isr is None and (self.target_isr or elr_enabled) and self.target_isr != p.isr:
            r_isr = self.target_isr

        # 7. triggerLeaderEpochBumpForIsrShrinkIfNeeded (before 3.6-IV0)
        if (
            self.metadata_level < MV_3_6_IV0
            and r_leader == NO_LEADER_CHANGE
            and r_isr is not None
            and not _contains_all(r_isr, p.isr)
        ):
            r_leader = p.leader

        # 8. maybeUpdateLastKnownLeader
        if elr_enabled:
            if r_leader == NO_LEADER and not p.lke:
                r_lke = (p.leader,)
            elif r_leader >= 0 and p.lke:
                r_lke = ()

        # 9. setAssignmentChanges (directories are not modelled)
        if self.target_replicas and self.target_replicas != p.replicas:
            r_replicas = self.target_replicas
        if self.target_removing != p.removing:
            r_removing = self.target_removing
        if self.target_adding != p.adding:
            r_adding = self.target_adding

        # 10. the leader recovery state asked for (AlterPartition)
        if self.target_lrs != p.leader_recovery_state:
            r_lrs = self.target_lrs

        # 11. no-op test
        fields: dict[str, Any] = {"partitionId": self.partition_id, "topic": self.topic}
        if r_isr is not None:
            fields["isr"] = list(r_isr)
        if r_leader != NO_LEADER_CHANGE:
            fields["leader"] = r_leader
        if r_replicas is not None:
            fields["replicas"] = list(r_replicas)
        if r_removing is not None:
            fields["removingReplicas"] = list(r_removing)
        if r_adding is not None:
            fields["addingReplicas"] = list(r_adding)
        if r_lrs != LRS_NO_CHANGE:
            fields["leaderRecoveryState"] = r_lrs
        if r_elr is not None:
            fields["eligibleLeaderReplicas"] = list(r_elr)
        if r_lke is not None:
            fields["lastKnownElr"] = list(r_lke)
        if len(fields) == 2:
            return _NO_CHANGE
        return BuildResult(fields, unclean, elr_election, from_lke)
