"""Topics, partitions and every handler that builds partition changes (Kafka's
`ReplicationControlManager`, SPEC-KRAFT §2.2, §2.3, §5, §6-§15).

Handlers generate records from the current state (P) into an `Operation`; they never
change state. `replay` applies records and keeps the indexes Kafka keeps: B2I (broker ->
partitions whose ISR holds it, leaderless ones under -1), B2E (broker -> partitions whose
ELR holds it, with Kafka's stale entries, §2.3) and the imbalanced set.

B2E is kept per controller node (§2.3, §18): every controller replays every record into its
own index, and only a snapshot load, at a controller's restart, rebuilds one without its
stale entries. [kcsim] A controller deposed by a `controller_failover` is taken to have
restarted from a snapshot of that moment; a node never deposed holds the index of the
whole history kcsim has seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.kraft import records as rec
from controller.kraft import striped_replica_placer
from controller.kraft.cluster_control_manager import ClusterControlManager
from controller.kraft.configuration_control_manager import MIN_ISR, ConfigurationControlManager
from controller.kraft.errors import ApiError, UnexpectedError
from controller.kraft.feature_control_manager import FeatureControlManager
from controller.kraft.java_collections import JavaRandom
from controller.kraft.outcome import Record, Result
from controller.kraft.partition_change_builder import BuildResult, Election, PartitionChangeBuilder
from controller.kraft.partition_registration import (
    LRS_RECOVERED,
    LRS_RECOVERING,
    NO_LEADER,
    Ints,
    PartitionRegistration,
)

TP = tuple[str, int]
# broker -> topic -> partitions, a partition once per entry (BrokersToElrs.elrMembers)
B2E = dict[int, dict[str, list[int]]]
MAX_ELECTIONS_PER_RUN = 1000  # maxElectionsPerImbalance


@dataclass(slots=True)
class Operation:
    """The records of one controller operation, generated from P, plus the election notes
    of its builds (for state_changes.unclean and the health counters)."""

    records: list[Record] = field(default_factory=list)
    elections: list[tuple[str, int, BuildResult]] = field(default_factory=list)

    def add_build(self, result: BuildResult) -> bool:
        if result.fields is None:
            return False
        self.records.append(rec.partition_change(result.fields))
        if result.unclean or result.elr_election:
            f = result.fields
            self.elections.append((f["topic"], f["partitionId"], result))
        return True


class TaskRuns:
    """The runs of a capped periodic task within one event (SPEC-KRAFT §15.2, §15.3). Each
    run walks its set in sorted order from the start; a partition a run passed without a
    record would give none again (nothing it reads changed: the runs write only other
    partitions' PartitionChangeRecords), so the next run walks the partitions that got a
    record, then the ones the last run did not reach, in the same order. A run then costs
    the partitions it takes, not a sort of the whole set each time."""

    __slots__ = ("_head", "_index", "_order", "_position", "_wrote")

    def __init__(self) -> None:
        self._order: list[TP] | None = None
        self._position = 0
        self._head: list[TP] = []
        self._index = 0
        self._wrote: list[TP] = []

    def begin(self, members: Any) -> None:
        if self._order is None:
            self._order = sorted(members)
        self._head = self._wrote + self._head[self._index :]
        self._index = 0
        self._wrote = []

    def take(self, members: Any) -> TP | None:
        """The run's next partition still in `members`, or None."""
        head = self._head
        while self._index < len(head):
            key = head[self._index]
            self._index += 1
            if key in members:
                return key
        order = self._order or []
        while self._position < len(order):
            key = order[self._position]
            self._position += 1
            if key in members:
                return key
        return None

    def wrote(self, key: TP) -> None:
        self._wrote.append(key)


def _without(values: Ints, *removed: int) -> Ints:
    return tuple(x for x in values if x not in removed)


def _unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


class ReplicationControlManager:
    def __init__(
        self,
        cluster: ClusterControlManager,
        configs: ConfigurationControlManager,
        features: FeatureControlManager,
    ) -> None:
        self.cluster = cluster
        self.configs = configs
        self.features = features
        self.topics: dict[str, dict[int, PartitionRegistration]] = {}
        self.b2i: dict[int, dict[TP, bool]] = {}
        # B2E of a controller that has replayed every record kcsim has seen...
        self.b2e_history: B2E = {}
        # ...and of each controller node deposed since, rebuilt at its deposition
        self.b2e_nodes: dict[int, B2E] = {}
        self.b2e: B2E = self.b2e_history  # the active controller's: the walks read it
        self.imbalanced: set[TP] = set()
        # names holding '.' or '_' by their form with '.' read as '_' (Kafka's
        # topicsWithCollisionChars): a new name's collision check without a walk
        self.collision_names: dict[str, set[str]] = {}

    # -- lookups -----------------------------------------------------------------------
    def effective_min_isr(self, topic: str) -> int:
        """`RCM.getTopicEffectiveMinIsr`: min(config, the replica count of partition 0)
        ([kcsim] the lowest partition when there is no partition 0)."""
        parts = self.topics[topic]
        first = parts.get(0)
        if first is None:
            first = parts[min(parts)]
        return min(self.configs.min_isr(topic), len(first.replicas))

    def has_leaderships(self, broker: int) -> bool:
        return any(self.b2i.get(broker, {}).values())

    def partitions_with_broker_in_isr(self, broker: int) -> list[TP]:
        return sorted(self.b2i.get(broker, {}))

    def partitions_with_no_leader(self) -> list[TP]:
        return sorted(self.b2i.get(NO_LEADER, {}))

    def partitions_with_broker_in_elr(self, broker: int) -> list[TP]:
        topics = self.b2e.get(broker, {})
        return [(t, p) for t in sorted(topics) for p in sorted(topics[t])]

    def _builder(
        self,
        topic: str,
        pid: int,
        p: PartitionRegistration,
        acceptable: Any,
        min_isr: int | None = None,
    ) -> PartitionChangeBuilder:
        """`min_isr`: the topic's effective min ISR where the caller has it already."""
        return PartitionChangeBuilder(
            p,
            topic,
            pid,
            acceptable,
            self.features.metadata_level,
            self.effective_min_isr(topic) if min_isr is None else min_isr,
            self.features.elr_enabled,
        )

    # -- the broker handlers (SPEC-KRAFT §5) ---------------------------------------------
    def generate_leader_and_isr_updates(
        self,
        op: Operation,
        broker_to_remove: int,
        broker_to_add: int,
        broker_with_unclean_shutdown: int,
        partitions: Iterable[TP],
    ) -> None:
        is_active = self.cluster.is_active

        def acceptable(r: int) -> bool:
            return (r not in (broker_to_remove, broker_with_unclean_shutdown)) and (
                r == broker_to_add or is_active(r)
            )

        # per topic, its effective min ISR and whether unclean elections are on: a
        # generation changes no state, so they hold for all its partitions
        per_topic: dict[str, tuple[int, bool]] = {}
        for topic, pid in partitions:
            parts = self.topics.get(topic)
            if parts is None:
                raise UnexpectedError(
                    f"Topic {topic} existed in isrMembers, but not in the topics map."
                )
            p = parts.get(pid)
            if p is None:
                raise UnexpectedError(
                    f"Partition {topic}:{pid} existed in isrMembers, but not in the partitions map."
                )
            known = per_topic.get(topic)
            if known is None:
                known = per_topic[topic] = (
                    self.effective_min_isr(topic),
                    self.configs.unclean_allowed(topic),
                )
            builder = self._builder(topic, pid, p, acceptable, known[0])
            if known[1]:
                builder.election = Election.UNCLEAN
            if broker_with_unclean_shutdown != NO_LEADER:
                builder.unclean_shutdown_replicas = (broker_with_unclean_shutdown,)
            builder.target_isr = _without(p.isr, broker_to_remove, broker_with_unclean_shutdown)
            op.add_build(builder.build())

    def handle_broker_fenced(self, op: Operation, broker: int) -> None:
        registration = self.cluster.registrations[broker]
        self.generate_leader_and_isr_updates(
            op, broker, NO_LEADER, NO_LEADER, self.partitions_with_broker_in_isr(broker)
        )
        op.records.append(rec.broker_fenced_change(broker, registration.epoch, rec.FENCE))

    def handle_broker_unfenced(self, op: Operation, broker: int, epoch: int) -> None:
        op.records.append(rec.broker_fenced_change(broker, epoch, rec.UNFENCE))
        self.generate_leader_and_isr_updates(
            op, NO_LEADER, broker, NO_LEADER, self.partitions_with_no_leader()
        )

    def handle_broker_in_controlled_shutdown(self, op: Operation, broker: int, epoch: int) -> None:
        if not self.cluster.registrations[broker].in_controlled_shutdown:
            op.records.append(rec.broker_shutdown_change(broker, epoch))
        self.generate_leader_and_isr_updates(
            op, broker, NO_LEADER, NO_LEADER, self.partitions_with_broker_in_isr(broker)
        )

    def handle_broker_shutdown(self, op: Operation, broker: int, clean: bool) -> None:
        """The cleanup of a new incarnation's registration (SPEC-KRAFT §6.1)."""
        if self.features.elr_enabled and not clean:
            self.generate_leader_and_isr_updates(
                op, NO_LEADER, NO_LEADER, broker, self.partitions_with_broker_in_isr(broker)
            )
            self.generate_leader_and_isr_updates(
                op, NO_LEADER, NO_LEADER, broker, self.partitions_with_broker_in_elr(broker)
            )
        else:
            self.generate_leader_and_isr_updates(
                op, broker, NO_LEADER, NO_LEADER, self.partitions_with_broker_in_isr(broker)
            )

    def handle_broker_unregistered(self, op: Operation, broker: int, epoch: int) -> None:
        self.generate_leader_and_isr_updates(
            op, broker, NO_LEADER, NO_LEADER, self.partitions_with_broker_in_isr(broker)
        )
        self.generate_leader_and_isr_updates(
            op, broker, NO_LEADER, NO_LEADER, self.partitions_with_broker_in_elr(broker)
        )
        op.records.append(rec.unregister_broker(broker, epoch))

    # -- topic creation (SPEC-KRAFT §11) --------------------------------------------------
    def check_new_topic_name(self, topic: str) -> None:
        if topic in self.topics:
            raise ApiError("TOPIC_ALREADY_EXISTS", f"Topic '{topic}' already exists.")
        if "." in topic or "_" in topic:
            colliding = self.collision_names.get(_unify_collision_chars(topic))
            if colliding:
                existing = min(colliding)
                raise ApiError(
                    "INVALID_TOPIC_EXCEPTION",
                    f"Topic '{topic}' collides with existing topic: {existing}",
                )

    def _active_isr(self, replicas: Sequence[int]) -> Ints:
        return tuple(r for r in replicas if self.cluster.is_active(r))

    def manual_partitions(
        self, assignment: Mapping[int, Sequence[int]]
    ) -> dict[int, PartitionRegistration]:
        """Registrations of an explicit assignment, applied leniently (SPEC-KRAFT §11.1):
        ISR = active replicas, leader = ISR[0]; a partition without one is refused."""
        parts: dict[int, PartitionRegistration] = {}
        for pid in sorted(assignment):
            replicas = tuple(assignment[pid])
            isr = self._active_isr(replicas)
            if not isr:
                raise ApiError(
                    "INVALID_REPLICA_ASSIGNMENT",
                    f"All brokers specified in the manual partition assignment for partition "
                    f"{pid} are fenced or in controlled shutdown.",
                )
            parts[pid] = PartitionRegistration(replicas, isr, (), (), isr[0], LRS_RECOVERED, 0, 0)
        return parts

    def placed_partitions(
        self, rnd: JavaRandom, partitions: int, rf: int, start: int = 0
    ) -> dict[int, PartitionRegistration]:
        """Registrations placed by the striped placer (SPEC-KRAFT §11.2)."""
        try:
            placements = striped_replica_placer.place(
                rnd, self.cluster.usable_brokers(), partitions, rf
            )
        except ApiError as error:
            raise ApiError(
                "INVALID_REPLICATION_FACTOR",
                f"Unable to replicate the partition {rf} time(s): {error.message}",
            ) from None
        parts: dict[int, PartitionRegistration] = {}
        for i, replicas in enumerate(placements):
            isr = self._active_isr(replicas)
            if not isr:
                raise ApiError(
                    "INVALID_REPLICATION_FACTOR",
                    f"Unable to replicate the partition {rf} time(s): All brokers are "
                    "currently fenced or in controlled shutdown.",
                )
            parts[start + i] = PartitionRegistration(
                tuple(replicas), isr, (), (), isr[0], LRS_RECOVERED, 0, 0
            )
        return parts

    def create_topic(
        self,
        op: Operation,
        topic: str,
        parts: Mapping[int, PartitionRegistration],
        configs: Mapping[str, str],
    ) -> None:
        """TopicRecord, ConfigRecords, [ELR] ClearElrRecords, PartitionRecords ascending."""
        op.records.append(rec.topic(topic))
        config_records = self.configs.alter_topic(topic, configs)
        op.records.extend(config_records)
        if self.features.elr_enabled:
            for record in config_records:
                if record.fields["name"] == MIN_ISR:
                    op.records.append(rec.clear_elr(topic))
        elr = self.features.elr_enabled
        for pid in sorted(parts):
            op.records.append(rec.partition(topic, pid, parts[pid], elr))

    def check_new_partition_ids(self, topic: str, ids: Iterable[int]) -> None:
        """[kcsim] An assignment naming an existing partition adds nothing: Kafka refuses a
        CreatePartitions that is no increase before it looks at any assignment
        (RCM.createPartition :1840-1847, INVALID_PARTITIONS)."""
        existing = self.topics[topic]
        for pid in sorted(ids):
            if pid in existing:
                raise ApiError(
                    "INVALID_PARTITIONS",
                    f"Topic already has {len(existing)} partition(s); partition {pid} exists.",
                )

    def create_partitions(
        self, op: Operation, topic: str, parts: Mapping[int, PartitionRegistration]
    ) -> None:
        self.check_new_partition_ids(topic, parts)
        elr = self.features.elr_enabled
        for pid in sorted(parts):
            op.records.append(rec.partition(topic, pid, parts[pid], elr))

    # -- reassignment (SPEC-KRAFT §13) ----------------------------------------------------
    def alter_partition_reassignment(
        self, op: Operation, topic: str, pid: int, target: Sequence[int] | None
    ) -> None:
        p = self.topics[topic].get(pid)
        if p is None:
            raise ApiError("UNKNOWN_TOPIC_OR_PARTITION", f"Unable to find partition {topic}:{pid}.")
        if target is None:
            self._cancel_reassignment(op, topic, pid, p)
        else:
            self._change_reassignment(op, topic, pid, p, tuple(target))

    def validate_manual_assignment(self, replicas: Sequence[int]) -> None:
        if not replicas:
            raise ApiError(
                "INVALID_REPLICA_ASSIGNMENT",
                "The manual partition assignment includes an empty replica list.",
            )
        previous = None
        for broker in sorted(replicas):
            if broker not in self.cluster.registrations:
                raise ApiError(
                    "INVALID_REPLICA_ASSIGNMENT",
                    f"The manual partition assignment includes broker {broker}, but no such "
                    "broker is registered.",
                )
            if broker == previous:
                raise ApiError(
                    "INVALID_REPLICA_ASSIGNMENT",
                    f"The manual partition assignment includes the broker {previous} more "
                    "than once.",
                )
            previous = broker

    def _cancel_reassignment(
        self, op: Operation, topic: str, pid: int, p: PartitionRegistration
    ) -> None:
        if not p.reassigning:
            raise ApiError(
                "NO_REASSIGNMENT_IN_PROGRESS", "No partition reassignment is in progress."
            )
        replicas = _without(p.replicas, *p.adding)
        isr = _without(p.isr, *p.adding)
        unclean = False
        if not isr:
            if not replicas:
                raise ApiError(
                    "INVALID_REPLICA_ASSIGNMENT",
                    "Invalid replica assignment: addingReplicas contains all replicas.",
                )
            isr = (replicas[0],)
            unclean = True
        allowed = self.configs.unclean_allowed(topic)
        if unclean and not allowed:
            raise ApiError(
                "INVALID_REPLICA_ASSIGNMENT",
                f"Unable to revert partition assignment for {topic}:{pid} because it would "
                "require an unclean leader election.",
            )
        builder = self._builder(topic, pid, p, self.cluster.is_active)
        if allowed:
            builder.election = Election.UNCLEAN
        builder.target_isr = isr
        builder.target_replicas = replicas
        builder.target_removing = ()
        builder.target_adding = ()
        op.add_build(builder.build())

    def _change_reassignment(
        self, op: Operation, topic: str, pid: int, p: PartitionRegistration, target: Ints
    ) -> None:
        self.validate_manual_assignment(target)
        current = p.replicas
        removing = tuple(sorted(set(current) - set(target)))
        adding = tuple(sorted(set(target) - set(current)))
        replicas = target + removing
        builder = self._builder(topic, pid, p, self.cluster.is_active)
        if replicas != current:
            builder.target_replicas = replicas
        if removing:
            builder.target_removing = removing
        if adding:
            builder.target_adding = adding
        op.add_build(builder.build())

    # -- AlterPartition (SPEC-KRAFT §14) --------------------------------------------------
    def alter_partition(
        self,
        op: Operation,
        requester: int,
        requester_epoch: int,
        topic: str,
        pid: int,
        isr: Sequence[int],
        member_epochs: Mapping[int, int],
        leader_epoch: int | None,
        partition_epoch: int | None,
        lrs: int | None,
    ) -> Result:
        registration = self.cluster.registration(requester)
        if registration is None:
            return Result(
                topic,
                pid,
                "STALE_BROKER_EPOCH",
                f"No broker registration found for broker id {requester}",
            )
        if registration.epoch != requester_epoch:
            return Result(
                topic,
                pid,
                "STALE_BROKER_EPOCH",
                f"Expected broker epoch {registration.epoch}, but got broker epoch "
                f"{requester_epoch}",
            )
        p = self.topics[topic].get(pid)
        if p is None:
            return Result(
                topic, pid, "UNKNOWN_TOPIC_OR_PARTITION", f"Unknown partition {topic}-{pid}"
            )
        le = p.leader_epoch if leader_epoch is None else leader_epoch
        pe = p.partition_epoch if partition_epoch is None else partition_epoch
        new_lrs = p.leader_recovery_state if lrs is None else lrs
        new_isr = tuple(isr)
        error = self._validate_alter_partition(
            requester, p, le, pe, new_isr, member_epochs, new_lrs
        )
        if error is not None:
            return Result(topic, pid, error[0], error[1])
        builder = self._builder(topic, pid, p, self.cluster.is_active)
        if self.configs.unclean_allowed(topic):
            builder.election = Election.UNCLEAN
        builder.target_isr = new_isr
        builder.target_lrs = new_lrs
        result = builder.build()
        if op.add_build(result):
            assert result.fields is not None
            after = p.merge(result.fields)
            leader = result.fields.get("leader")
            if leader is not None and leader != requester:
                return Result(
                    topic,
                    pid,
                    "NEW_LEADER_ELECTED",
                    "The request completed a reassignment that moved the leadership",
                    after.leader,
                    after.leader_epoch,
                    after.isr,
                    after.partition_epoch,
                )
            p = after
        return Result(topic, pid, None, None, p.leader, p.leader_epoch, p.isr, p.partition_epoch)

    def _validate_alter_partition(
        self,
        requester: int,
        p: PartitionRegistration,
        le: int,
        pe: int,
        isr: Ints,
        member_epochs: Mapping[int, int],
        lrs: int,
    ) -> tuple[str, str] | None:
        if le > p.leader_epoch:
            return "NOT_CONTROLLER", (
                f"The request's leader epoch {le} is above the controller's {p.leader_epoch}"
            )
        if pe > p.partition_epoch:
            return "NOT_CONTROLLER", (
                f"The request's partition epoch {pe} is above the controller's {p.partition_epoch}"
            )
        if le < p.leader_epoch:
            return "FENCED_LEADER_EPOCH", (
                f"The current leader epoch is {p.leader_epoch}, not {le}"
            )
        if requester != p.leader:
            return "INVALID_REQUEST", f"The current leader is {p.leader}, not {requester}"
        if pe < p.partition_epoch:
            return "INVALID_UPDATE_VERSION", (
                f"The current partition epoch is {p.partition_epoch}, not {pe}"
            )
        # (no broker twice, none negative, every one a replica)
        if len(set(isr)) != len(isr) or (
            isr and (min(isr) < 0 or not set(p.replicas).issuperset(isr))
        ):
            return "INVALID_REQUEST", f"Invalid ISR {list(isr)}"
        if p.leader not in isr:
            return "INVALID_REQUEST", f"The ISR {list(isr)} does not include the leader"
        if lrs == LRS_RECOVERING and len(isr) > 1:
            return "INVALID_REQUEST", (
                f"The ISR {list(isr)} had more than one replica while the leader was still "
                "recovering from an unclean leader election"
            )
        if p.leader_recovery_state == LRS_RECOVERED and lrs == LRS_RECOVERING:
            return (
                "INVALID_REQUEST",
                "The leader recovery state cannot change from RECOVERED to RECOVERING",
            )
        ineligible = []
        for broker in isr:
            registration = self.cluster.registration(broker)
            if registration is None:
                ineligible.append(f"{broker} (not registered)")
            elif registration.in_controlled_shutdown:
                ineligible.append(f"{broker} (shutting down)")
            elif registration.fenced:
                ineligible.append(f"{broker} (fenced)")
            else:
                epoch = member_epochs.get(broker, -1)
                if epoch != -1 and epoch != registration.epoch:
                    ineligible.append(
                        f"{broker} (broker epoch mismatch: requested={epoch} VS "
                        f"expected={registration.epoch})"
                    )
        if ineligible:
            return "INELIGIBLE_REPLICA", "Ineligible replicas in the new ISR: " + ", ".join(
                ineligible
            )
        return None

    # -- elections (SPEC-KRAFT §15) -------------------------------------------------------
    def elect_leader(self, op: Operation, topic: str, pid: int, unclean: bool) -> Result:
        """`RCM.electLeader` (ElectLeaders and the periodic unclean task)."""
        parts = self.topics.get(topic)
        if parts is None:
            return Result(topic, pid, "UNKNOWN_TOPIC_OR_PARTITION", f"No such topic as {topic}")
        p = parts.get(pid)
        if p is None:
            return Result(
                topic, pid, "UNKNOWN_TOPIC_OR_PARTITION", f"No such partition as {topic}-{pid}"
            )
        if (not unclean and p.has_preferred_leader) or (unclean and p.has_leader):
            return Result(
                topic, pid, "ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."
            )
        builder = self._builder(topic, pid, p, self.cluster.is_active)
        builder.election = Election.UNCLEAN if unclean else Election.PREFERRED
        result = builder.build()
        if not op.add_build(result):
            if unclean:
                return Result(
                    topic,
                    pid,
                    "ELIGIBLE_LEADERS_NOT_AVAILABLE",
                    "Eligible topic partition leaders are not available.",
                )
            return Result(
                topic,
                pid,
                "PREFERRED_LEADER_NOT_AVAILABLE",
                "The preferred leader was not available.",
            )
        assert result.fields is not None
        after = p.merge(result.fields)
        return Result(
            topic,
            pid,
            None,
            None,
            after.leader,
            after.leader_epoch,
            after.isr,
            after.partition_epoch,
        )

    def election_candidates(self, unclean: bool) -> list[TP]:
        """The partitions a whole-cluster ElectLeaders can change, sorted: every other one
        answers ELECTION_NOT_NEEDED, which a whole-cluster request leaves out. Preferred:
        the imbalanced set (no leader, or not the first replica); unclean: no leader."""
        return sorted(self.b2i.get(NO_LEADER, {}) if unclean else self.imbalanced)

    def all_partitions(self) -> Iterator[TP]:
        for topic in sorted(self.topics):
            for pid in sorted(self.topics[topic]):
                yield topic, pid

    def balance_partition_leaders(self, op: Operation, task: TaskRuns | None = None) -> bool:
        """One run of the rebalance task; True when it hit the cap (SPEC-KRAFT §15.2).
        `task`: this event's runs so far, so that a run does not sort the set again."""
        task = task or TaskRuns()
        members = self.imbalanced
        task.begin(members)
        start = len(op.records)
        while len(op.records) - start < MAX_ELECTIONS_PER_RUN:
            key = task.take(members)
            if key is None:
                break
            topic, pid = key
            p = self.topics[topic][pid]
            builder = self._builder(topic, pid, p, self.cluster.is_active)
            builder.election = Election.PREFERRED
            if op.add_build(builder.build()):
                task.wrote(key)
        return len(op.records) - start >= MAX_ELECTIONS_PER_RUN

    def elect_unclean_leaders(self, op: Operation, task: TaskRuns | None = None) -> bool:
        """One run of the periodic unclean election; True when it hit the cap (§15.3)."""
        task = task or TaskRuns()
        members = self.b2i.get(NO_LEADER, {})
        task.begin(members)
        start = len(op.records)
        while len(op.records) - start < MAX_ELECTIONS_PER_RUN:
            key = task.take(members)
            if key is None:
                break
            topic, pid = key
            before = len(op.records)
            if self.configs.unclean_allowed(topic):
                self.elect_leader(op, topic, pid, unclean=True)
            if len(op.records) > before:
                task.wrote(key)
        return len(op.records) - start >= MAX_ELECTIONS_PER_RUN

    # -- replay ------------------------------------------------------------------------
    def replay_topic(self, record: Record) -> None:
        name = record.fields["name"]
        if name in self.topics:
            raise RuntimeError(f"Found duplicate TopicRecord for {name}")
        self.topics[name] = {}
        self._index_name(name)

    def _index_name(self, name: str) -> None:
        if "." in name or "_" in name:
            self.collision_names.setdefault(_unify_collision_chars(name), set()).add(name)

    def replay_partition(
        self, record: Record
    ) -> tuple[PartitionRegistration | None, PartitionRegistration]:
        f = record.fields
        topic, pid = f["topic"], f["partitionId"]
        parts = self.topics.get(topic)
        if parts is None:
            raise RuntimeError(f"Tried to create partition {topic}:{pid}, but no such topic")
        new = PartitionRegistration.from_record(f)
        prev = parts.get(pid)
        if prev != new:
            parts[pid] = new
            self._update_indexes(topic, pid, prev, new)
        self._update_imbalance(topic, pid, new)
        return prev, new

    def replay_partition_change(
        self, record: Record
    ) -> tuple[PartitionRegistration, PartitionRegistration]:
        f = record.fields
        topic, pid = f["topic"], f["partitionId"]
        parts = self.topics.get(topic)
        prev = parts.get(pid) if parts is not None else None
        if parts is None or prev is None:
            raise RuntimeError(f"PartitionChangeRecord for unknown partition {topic}:{pid}")
        new = prev.merge(f)
        parts[pid] = new
        self._update_indexes(topic, pid, prev, new)
        self._update_imbalance(topic, pid, new)
        return prev, new

    def replay_remove_topic(self, record: Record) -> dict[int, PartitionRegistration]:
        topic = record.fields["topic"]
        parts = self.topics.pop(topic, None)
        if parts is None:
            raise RuntimeError(f"Can't find topic {topic} to remove.")
        unified = _unify_collision_chars(topic)
        names = self.collision_names.get(unified)
        if names is not None:
            names.discard(topic)
            if not names:
                del self.collision_names[unified]
        self.configs.delete_topic_configs(topic)
        for pid, p in parts.items():
            # B2I is exact (no stale entries): removing each partition's own entries is
            # Kafka's removal of the topic's entries, at the cost of the topic alone
            key = (topic, pid)
            for broker in p.isr:
                self._b2i_remove(broker, key)
            if p.leader == NO_LEADER:
                self._b2i_remove(NO_LEADER, key)
            for broker in p.elr:
                for index in self.b2e_indexes():
                    _b2e_remove_topic(index, broker, topic)
            self.imbalanced.discard(key)
        return parts

    def replay_clear_elr(
        self, record: Record
    ) -> list[tuple[str, int, PartitionRegistration, PartitionRegistration]]:
        """ClearElrRecord: clears ELR and LKE where either is set, PE+1, **without** updating
        B2E (SPEC-KRAFT §2.3 flaw 1)."""
        name = record.fields["topicName"]
        if name:
            if name not in self.topics:
                raise RuntimeError(
                    f"Unable to find a topic named {name} in order to clear its ELRs."
                )
            names = [name]
        else:
            names = list(self.topics)
        changed = []
        clear: dict[str, Any] = {"eligibleLeaderReplicas": [], "lastKnownElr": []}
        for topic in names:
            parts = self.topics[topic]
            for pid, p in parts.items():
                if p.elr or p.lke:
                    new = p.merge(clear)
                    parts[pid] = new
                    changed.append((topic, pid, p, new))
        return changed

    # -- the active controller's B2E (SPEC-KRAFT §2.3, §18) ------------------------------
    def fail_over(self, previous: int | None, new: int | None) -> None:
        """A new active controller `new` (None: not named, nothing known changes). The
        deposed `previous` restarts and loads a snapshot: Kafka's `handleLoadSnapshot`
        resets every timeline structure and replays PartitionRecords, so its B2E holds each
        partition once per ELR member, no stale entry ([kcsim] the snapshot is taken as the
        state at the failover). The new one walks its own index: rebuilt at its last
        deposition, or the whole history's when kcsim never saw it deposed."""
        if new is None or new == previous:
            return
        if previous is not None:
            self.b2e_nodes[previous] = self.loaded_b2e()
        self.activate(new)

    def activate(self, controller: int | None) -> None:
        """The walks read `controller`'s index from now on."""
        own = self.b2e_nodes.get(controller) if controller is not None else None
        self.b2e = own if own is not None else self.b2e_history

    def loaded_b2e(self) -> B2E:
        """B2E as a snapshot load builds it from the partitions' ELRs. Every ELR member has
        an entry in the whole history's index, so only its entries are looked at."""
        loaded: B2E = {}
        for broker, topics in self.b2e_history.items():
            for topic, pids in topics.items():
                parts = self.topics.get(topic, {})
                for pid in sorted(set(pids)):
                    p = parts.get(pid)
                    if p is not None and broker in p.elr:
                        loaded.setdefault(broker, {}).setdefault(topic, []).append(pid)
        return loaded

    def b2e_indexes(self) -> list[B2E]:
        """Every index kept: the whole history's and each deposed node's."""
        return [self.b2e_history, *self.b2e_nodes.values()]

    # -- indexes -----------------------------------------------------------------------
    def _update_imbalance(self, topic: str, pid: int, p: PartitionRegistration) -> None:
        if p.leader != NO_LEADER and p.leader == p.replicas[0]:  # (has_preferred_leader)
            self.imbalanced.discard((topic, pid))
        else:
            self.imbalanced.add((topic, pid))

    def _update_indexes(
        self, topic: str, pid: int, prev: PartitionRegistration | None, new: PartitionRegistration
    ) -> None:
        key = (topic, pid)
        if prev is None:
            self._b2i_add(new, key)
        elif prev.isr != new.isr or prev.leader != new.leader:
            # only the entries that change: members that leave, members that join or whose
            # leadership flag turns (no walk reads B2I in insertion order: they sort it)
            isr, leader = new.isr, new.leader
            for broker in prev.isr:
                if broker not in isr:
                    self._b2i_remove(broker, key)
            b2i = self.b2i
            for broker in isr:
                entries = b2i.get(broker)
                if entries is None:
                    b2i[broker] = {key: broker == leader}
                else:
                    entries[key] = broker == leader
            if leader == NO_LEADER:
                b2i.setdefault(NO_LEADER, {})[key] = True
            elif prev.leader == NO_LEADER:
                self._b2i_remove(NO_LEADER, key)
        if prev is None or prev.elr != new.elr:
            self._b2e_update(topic, pid, prev.elr if prev is not None else (), new.elr)

    def _b2i_add(self, p: PartitionRegistration, key: TP) -> None:
        for broker in p.isr:
            self.b2i.setdefault(broker, {})[key] = broker == p.leader
        if p.leader == NO_LEADER:
            self.b2i.setdefault(NO_LEADER, {})[key] = True

    def _b2i_remove(self, broker: int, key: TP) -> None:
        entries = self.b2i.get(broker)
        if entries is not None:
            entries.pop(key, None)
            if not entries:
                del self.b2i[broker]

    def _b2e_update(self, topic: str, pid: int, prev: Ints, new: Ints) -> None:
        """`BrokersToElrs.update`: a sorted merge of the previous and next ELR, into every
        controller's index."""
        if prev == new:
            return
        a, b = sorted(prev), sorted(new)
        indexes = self.b2e_indexes()
        i = j = 0
        while True:
            if i == len(a):
                if j == len(b):
                    break
                for index in indexes:
                    _b2e_add(index, b[j], topic, pid)
                j += 1
            elif j == len(b) or a[i] < b[j]:
                for index in indexes:
                    _b2e_remove(index, a[i], topic, pid)
                i += 1
            elif a[i] > b[j]:
                for index in indexes:
                    _b2e_add(index, b[j], topic, pid)
                j += 1
            else:
                i += 1
                j += 1

    # -- persistence -------------------------------------------------------------------
    def dump(self) -> dict[str, Any]:
        return {
            "topics": {
                topic: [
                    [
                        pid,
                        list(p.replicas),
                        list(p.isr),
                        list(p.removing),
                        list(p.adding),
                        p.leader,
                        p.leader_recovery_state,
                        p.leader_epoch,
                        p.partition_epoch,
                        list(p.elr),
                        list(p.lke),
                    ]
                    for pid, p in sorted(parts.items())
                ]
                for topic, parts in sorted(self.topics.items())
            },
            "b2e": _dump_b2e(self.b2e_history),
            "b2e_nodes": [
                [node, _dump_b2e(index)] for node, index in sorted(self.b2e_nodes.items())
            ],
        }

    def restore(
        self,
        topics: Iterable[str],
        partitions: Iterable[tuple[str, int, PartitionRegistration]],
        b2e_extra: Mapping[tuple[int, str], Mapping[int, int]],
        node_extra: Mapping[int, Mapping[tuple[int, str], Mapping[int, int]]] | None = None,
        active: int | None = None,
    ) -> None:
        """The partitions as stored, their indexes derived, and B2E's entries the ELRs do
        not give (`b2e_extra`: per broker and topic, partition -> stored minus derived; of
        the whole history's index, and in `node_extra` of each deposed node's)."""
        for topic in topics:
            self.topics.setdefault(topic, {})
        for topic, pid, p in partitions:
            if topic not in self.topics:
                self.topics[topic] = {}
            self.topics[topic][pid] = p
            key = (topic, pid)
            self._b2i_add(p, key)
            self._update_imbalance(topic, pid, p)
            for broker in p.elr:
                _b2e_add(self.b2e_history, broker, topic, pid)
        for name in self.topics:
            self._index_name(name)
        for node in node_extra or {}:
            self.b2e_nodes[node] = self.loaded_b2e()
        _add_extra(self.b2e_history, b2e_extra)
        for node, extra in (node_extra or {}).items():
            _add_extra(self.b2e_nodes[node], extra)
        self.activate(active)

    def load(self, data: Mapping[str, Any], active: int | None = None) -> None:
        for topic, rows in data["topics"].items():
            parts = self.topics[topic] = {}
            self._index_name(topic)
            for pid, replicas, isr, removing, adding, leader, lrs, le, pe, elr, lke in rows:
                p = PartitionRegistration(
                    tuple(replicas),
                    tuple(isr),
                    tuple(removing),
                    tuple(adding),
                    leader,
                    lrs,
                    le,
                    pe,
                    tuple(elr),
                    tuple(lke),
                )
                parts[pid] = p
                self._b2i_add(p, (topic, pid))
                self._update_imbalance(topic, pid, p)
        # B2E as stored, stale entries included
        self.b2e_history = _load_b2e(data["b2e"])
        self.b2e_nodes = {int(node): _load_b2e(rows) for node, rows in data.get("b2e_nodes", [])}
        self.activate(active)


# -- B2E, Kafka's BrokersToElrs, one per controller node --------------------------------------
def _b2e_add(index: B2E, broker: int, topic: str, pid: int) -> None:
    # appends without checking: a stale entry plus a new one lists it twice (§2.3)
    index.setdefault(broker, {}).setdefault(topic, []).append(pid)


def _b2e_remove(index: B2E, broker: int, topic: str, pid: int) -> None:
    topics = index.get(broker)
    if topics is None or topic not in topics:
        raise RuntimeError(f"Broker {broker} has no elrMembers entry for {topic}")
    entries = topics[topic]
    if len(entries) == 1:
        if entries[0] != pid:
            raise RuntimeError(f"Broker {broker} has no elrMembers entry for {topic}:{pid}")
        del topics[topic]
        if not topics:
            del index[broker]
        return
    kept = [x for x in entries if x != pid]
    if len(kept) > len(entries) - 1:
        raise RuntimeError(f"Broker {broker} has no elrMembers entry for {topic}:{pid}")
    # Java fills a new array one shorter: slots left over stay 0 (a phantom partition 0)
    topics[topic] = kept + [0] * (len(entries) - 1 - len(kept))


def _b2e_remove_topic(index: B2E, broker: int, topic: str) -> None:
    topics = index.get(broker)
    if topics is not None:
        topics.pop(topic, None)
        # (Kafka leaves an empty per-broker map behind; an empty map walks as nothing)


def _add_extra(index: B2E, extra: Mapping[tuple[int, str], Mapping[int, int]]) -> None:
    """Entries the ELRs do not give (partition -> stored minus derived count) into `index`."""
    for (broker, topic), counts in extra.items():
        for pid, count in counts.items():
            if count > 0:
                index.setdefault(broker, {}).setdefault(topic, []).extend([pid] * count)
            else:
                entries = index[broker][topic]
                for _ in range(-count):
                    entries.remove(pid)
                if not entries:
                    del index[broker][topic]


def _dump_b2e(index: B2E) -> list[list[Any]]:
    return [
        [broker, {t: list(ps) for t, ps in sorted(topics.items())}]
        for broker, topics in sorted(index.items())
    ]


def _load_b2e(rows: Iterable[Any]) -> B2E:
    return {int(broker): {t: list(ps) for t, ps in topics.items()} for broker, topics in rows}
