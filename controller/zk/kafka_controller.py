"""KafkaController's event handlers for one cluster (SPEC §7-§16).

`apply(event)` runs one validated event to completion, like Kafka's single event thread;
the follow-up events Kafka's brokers would send (StopReplica responses and ISR
expansions, in `kcsim.simulate.brokers` mode) are queued and run after it, in order.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from controller import events as ev
from controller.config import (
    MIN_ISR_KEY,
    UNCLEAN_KEY,
    Settings,
    parse_bool,
    scala_to_boolean,
)
from controller.model import (
    NO_EPOCH,
    NO_LEADER,
    BrokerStatus,
    LeaderAndIsr,
    PartitionState,
    RecoveryState,
    ReplicaAssignment,
    ReplicaState,
    TopicPartition,
)
from controller.topic_configs import topic_config_error
from controller.zk.alter_partition import AlterPartitionRequest, PartitionChange, alter_partition
from controller.zk.assignment import AssignmentError, assign_replicas
from controller.zk.context import ControllerContext, Partition
from controller.zk.election import CONTROLLED_SHUTDOWN, offline_strategy
from controller.zk.journal import Journal
from controller.zk.leader_elections import LeaderElections
from controller.zk.partition_state_machine import ElectionOutcome
from controller.zk.parts import ControllerParts
from controller.zk.reassignment import ReassignmentError, ReassignmentFailed, Reassignments

PS = PartitionState
RS = ReplicaState
# the replica states a simulated leader takes as caught up, to rejoin the ISR
_CAUGHT_UP = (RS.ONLINE, RS.NEW)


# A resource limit of the simulator, not Kafka's: a larger count would be built in memory
# (an int32 count of partitions is valid input, and Kafka's own check is only the heap).
MAX_PARTITIONS_PER_EVENT = 1_000_000


class EventRejected(Exception):
    """The event refers to something the cluster does not know, or cannot be applied:
    it goes to rejected_events and changes nothing."""


@dataclass(frozen=True, slots=True)
class _StopReplicaResponse:
    broker: int
    errors: tuple[tuple[TopicPartition, str | None], ...]


@dataclass(frozen=True, slots=True)
class _IsrExpansion:
    partitions: tuple[TopicPartition, ...]


class KafkaController:
    def __init__(self, context: ControllerContext, journal: Journal, settings: Settings) -> None:
        self.context = context
        self.journal = journal
        self.settings = settings
        self.parts = ControllerParts.wire(context, journal, settings)
        self.reassignments = Reassignments(self.parts)
        self.elections = LeaderElections(self.parts)
        self._follow_ups: deque[_StopReplicaResponse | _IsrExpansion] = deque()

    def check(self, body: ev.EventBody) -> None:
        """Raise EventRejected when the event names a broker or topic the cluster does not
        know where one is required (CONTRACT §1). Runs before anything changes."""
        for rule in _CHECKS.get(type(body), ()):
            rule(self, body)

    def _known_broker(
        self, body: ev.BrokerFailure | ev.ControlledShutdown | ev.StopReplicaResponse
    ) -> None:
        if body.broker not in self.context.brokers:
            raise EventRejected(f"unknown broker {body.broker}: the cluster has never seen it")

    def _known_brokers(self, body: ev.BrokerFailure) -> None:
        unknown = [b for b in body.ids if b not in self.context.brokers]
        if unknown:
            if len(unknown) == 1:
                raise EventRejected(f"unknown broker {unknown[0]}: the cluster has never seen it")
            raise EventRejected(f"unknown brokers {unknown}: the cluster has never seen them")

    def _known_topic(
        self,
        body: ev.PartitionCreation
        | ev.TopicDeletion
        | ev.StopReplicaResponse
        | ev.TopicConfigChange,
    ) -> None:
        if body.topic not in self.context.topics:
            raise EventRejected(f"unknown topic '{body.topic}'")

    def _check_topic_configs(self, body: ev.TopicConfigChange) -> None:
        # Kafka validates the topic's whole set of overrides after the change (one key's
        # range may depend on another's: the compaction lags). Overrides stored by a kcsim
        # that did not validate them yet are left out of it: the change itself has been
        # checked, and an old value must not block every new one.
        stored = self.context.topics[body.topic].configs
        problem = topic_config_error({**stored, **body.configs})
        if problem is not None and topic_config_error(stored) is None:
            raise EventRejected(f"field 'configs': {problem}")

    def _check_deletion_enabled(self, body: ev.TopicDeletion) -> None:
        if not self.settings.delete_topic_enable:
            raise EventRejected("topic deletion is disabled (delete.topic.enable=false)")

    def _check_failed_brokers(self, body: ev.ControllerFailover) -> None:
        unknown = [b for b in body.failed_brokers if b not in self.context.brokers]
        if unknown:
            raise EventRejected(f"unknown failed_brokers {unknown}")

    def _check_controller_epoch(self, body: ev.ControllerFailover) -> None:
        # elect() sets /controller_epoch to old + 1 conditioned on its version: a controller
        # that won has an epoch above every earlier one. Before any failover the log's
        # controller is kcsim's unnamed first one (epoch 1): a snapshot of a cluster whose
        # controller won epoch 1 names that same controller, so 1 is accepted then.
        epoch = body.controller_epoch
        context = self.context
        first = context.controller_id is None and context.epoch == 1
        if epoch is not None and (epoch < context.epoch or (epoch == context.epoch and not first)):
            raise EventRejected(
                f"controller_epoch {epoch} is not greater than the current controller "
                f"epoch {self.context.epoch}: a new controller's epoch always is"
            )

    def apply(self, body: ev.EventBody) -> None:
        _HANDLERS[type(body)](self, body)
        self._run_follow_ups()

    def _run_follow_ups(self) -> None:
        """Kafka's event queue after the handler: broker answers, in the order they come."""
        while True:
            self._queue_stop_replica_responses()
            if not self._follow_ups:
                return
            follow_up = self._follow_ups.popleft()
            if isinstance(follow_up, _StopReplicaResponse):
                self._on_stop_replica_response(follow_up.broker, follow_up.errors)
            else:
                self._expand_isr(follow_up.partitions)

    def _queue_stop_replica_responses(self) -> None:
        deliveries = self.parts.batch.deletion_deliveries
        if not deliveries:
            return
        if self.settings.simulate_brokers:
            # a live broker deletes at once and answers NONE
            for broker, tps in deliveries:
                self._follow_ups.append(
                    _StopReplicaResponse(broker, tuple((tp, None) for tp in tps))
                )
        deliveries.clear()

    # ---- brokers (§8, §9, §11) -----------------------------------------------------------

    def _broker_startup(self, body: ev.BrokerStartup) -> None:
        """BrokerChange (§8.1) for brokers registering: the new ones in one onBrokerStartup;
        then the bounced ones (still registered: a new registration replaced the old) in
        one onBrokerFailure and one onBrokerStartup. Broker epochs (registration czxids)
        follow the order the brokers are listed in."""
        context = self.context
        ids = body.ids
        bounced = sorted(b for b in ids if context.is_registered(b))
        bounced_set = set(bounced)
        new = sorted(b for b in ids if b not in bounced_set)
        first_epoch = context.next_broker_epoch()
        epochs = {broker: first_epoch + i for i, broker in enumerate(ids)}
        if new:
            for broker in new:
                context.register_broker(broker, body.rack, epochs[broker])
            self._on_broker_startup(new)
        if bounced:
            racks = {
                b: context.brokers[b].rack if body.rack is None else body.rack for b in bounced
            }
            for broker in bounced:
                context.set_broker_status(broker, BrokerStatus.DEAD)
            self._on_broker_failure(bounced)
            for broker in bounced:
                context.register_broker(broker, racks[broker], epochs[broker])
            self._on_broker_startup(bounced)

    def _broker_failure(self, body: ev.BrokerFailure) -> None:
        """BrokerChange (§8.1) for registrations that vanished: one onBrokerFailure of all
        of them. A broker already dead changes nothing (ZooKeeper shows no change)."""
        context = self.context
        dead = sorted(b for b in body.ids if context.is_registered(b))
        if not dead:
            return
        for broker in dead:
            context.set_broker_status(broker, BrokerStatus.DEAD)
        self._on_broker_failure(dead)

    def _on_broker_startup(self, new_brokers: list[int]) -> None:
        """onBrokerStartup (§8.2)."""
        parts = self.parts
        context = self.context
        new = set(new_brokers)
        existing = [b for b in context.registered_broker_ids() if b not in new]
        parts.send_update_metadata(existing)
        parts.send_full_update_metadata(new_brokers)
        replicas = context.replicas_on_brokers(new_brokers)
        parts.replicas.handle_state_changes(replicas, RS.ONLINE)
        self._trigger_online_partition_state_change()
        for tp in sorted(context.partitions_being_reassigned):
            if any(r in new for r in context.assignment(tp).target):
                self._resume_reassignment(tp)
        deleting = sorted(
            {tp.topic for tp, _ in replicas if context.is_queued_for_deletion(tp.topic)}
        )
        if deleting:
            parts.deletion.resume_deletion_for_topics(deleting)
        if self.settings.simulate_brokers:
            self._follow_ups.append(_IsrExpansion(tuple(dict.fromkeys(tp for tp, _ in replicas))))

    def _on_broker_failure(self, dead_brokers: list[int]) -> None:
        """onBrokerFailure (§8.3) -> onReplicasBecomeOffline (§9.1). The callers have
        marked the brokers dead, which also takes them out of the shutting-down set."""
        context = self.context
        parts = self.parts
        replicas = context.replicas_on_brokers(dead_brokers)
        queued = context.topics_to_be_deleted  # is_queued_for_deletion, without a call each
        for_deletion = [r for r in replicas if r[0][0] in queued] if queued else []
        not_for_deletion = [r for r in replicas if r[0][0] not in queued] if queued else replicas
        parts.partitions.handle_state_changes(context.partitions_with_offline_leader(), PS.OFFLINE)
        results = self._trigger_online_partition_state_change()
        parts.replicas.handle_state_changes(not_for_deletion, RS.OFFLINE)
        if for_deletion:
            parts.deletion.fail_replica_deletion(for_deletion)
        if not not_for_deletion and all(isinstance(r, Exception) for r in results.values()):
            parts.send_update_metadata(context.registered_broker_ids())

    def _trigger_online_partition_state_change(
        self, topic: str | None = None
    ) -> dict[TopicPartition, ElectionOutcome]:
        return self.parts.partitions.handle_state_changes(
            self.context.new_or_offline_partitions(topic), PS.ONLINE, offline_strategy(False)
        )

    def _controlled_shutdown(self, body: ev.ControlledShutdown) -> None:
        """processControlledShutdown (§11); the answer is event_results rows."""
        context = self.context
        journal = self.journal
        broker = body.broker
        if body.broker_epoch is not None and body.broker_epoch != -1:
            if not context.is_registered(broker):
                journal.result(
                    None,
                    None,
                    "UNKNOWN_SERVER_ERROR",
                    f"NoSuchElementException: key not found: {broker}",
                )
                return
            cached = context.brokers[broker].epoch
            if body.broker_epoch < cached:
                journal.result(
                    None,
                    None,
                    "STALE_BROKER_EPOCH",
                    f"Received controlled shutdown request from an old broker epoch "
                    f"{body.broker_epoch} for broker {broker}. Current broker epoch "
                    f"is {cached}.",
                )
                return
        if not context.is_registered(broker):
            journal.result(
                None, None, "BROKER_NOT_AVAILABLE", f"Broker id {broker} does not exist."
            )
            return
        context.set_broker_status(broker, BrokerStatus.SHUTTING_DOWN)
        # each record looked up once (not per test): at a million partitions every lookup
        # is a cache miss
        led: list[TopicPartition] = []
        followed: list[Partition] = []
        queued = context.topics_to_be_deleted
        for tp, record in context.records_of(context.partitions_on_broker(broker)):
            if (
                record is None
                or record.leadership is None
                or len(record.assignment.replicas) <= 1
                or tp.topic in queued  # is_queued_for_deletion
            ):
                continue
            if record.leadership.leader == broker:
                led.append(tp)
            else:
                followed.append(record)
        self.parts.partitions.handle_state_changes(led, PS.ONLINE, CONTROLLED_SHUTDOWN)
        batch = self.parts.batch
        batch.new_batch()
        batch.add_stop_replicas(broker, followed, delete=False)
        batch.send()
        self.parts.replicas.handle_state_changes(
            [(record.tp, broker) for record in followed], RS.OFFLINE
        )
        remaining = context.partition_leaders_on_broker(broker)
        for tp in remaining:
            journal.result(
                tp.topic,
                tp.partition,
                None,
                f"partition still led by broker {broker}",
                context.leadership(tp),
            )
        if not remaining:
            journal.result(None, None, None, "no partitions remaining")

    # ---- topics and partitions (§10, §15, §16) -------------------------------------------

    def _check_topic_creation(self, body: ev.TopicCreation) -> None:
        context = self.context
        if (body.partitions or 0) > MAX_PARTITIONS_PER_EVENT:
            raise EventRejected(
                f"topic_creation asks for {body.partitions:,} partitions; kcsim creates at "
                f"most {MAX_PARTITIONS_PER_EVENT:,} in one event (about 1 KB of state each)"
            )
        if body.topic in context.topics:
            if body.assignment is None:  # CreateTopics: TopicExistsException
                raise EventRejected(f"Topic '{body.topic}' already exists.")
            return  # the znode of a known topic: see _topic_creation
        collision = context.colliding_topic(body.topic)
        if collision is not None:
            raise EventRejected(f"Topic '{body.topic}' collides with existing topic: {collision}")
        # An explicit assignment is the topic znode (CONTRACT §1): its brokers are not
        # checked, as the controller does not check them (a replica on a dead or never
        # registered broker starts offline)

    def _check_partition_creation(self, body: ev.PartitionCreation) -> None:
        topic = self.context.topics[body.topic]
        # KafkaApis asks the controller first (the request goes to the controller broker):
        # additions to a topic being deleted never reach ZooKeeper (INVALID_TOPIC_EXCEPTION)
        if self.context.is_queued_for_deletion(body.topic):
            raise EventRejected("The topic is queued for deletion.")
        # checked first, as ZkAdminManager.createPartitions does while it reads the stored
        # assignment: adding partitions would race the controller's reassignment updates
        if self.context.has_reassignment_in_progress(body.topic):
            raise EventRejected(
                f"A partition reassignment is in progress for the topic '{body.topic}'"
            )
        existing = sorted(p for p in body.assignment if p in topic.partitions)
        if existing:
            raise EventRejected(f"partitions {existing} of topic '{body.topic}' already exist")
        # CreatePartitions asks for a new total count: the new partitions are numbered on
        # from the existing ones, so any other numbering cannot reach the controller
        count = len(topic.partitions)
        wanted, given = list(range(count, count + len(body.assignment))), sorted(body.assignment)
        if given != wanted:
            raise EventRejected(
                f"topic '{body.topic}' has {count} partitions, so new ones are numbered "
                f"{wanted}, got {given}"
            )
        # An explicit assignment is what reached the topic znode (CONTRACT §1): its brokers
        # and replica counts are not checked, as the controller does not check them

    def _topic_creation(self, body: ev.TopicCreation) -> None:
        """TopicChange (§10.1). A topic the controller already knows is not a new topic:
        its znode's partitions that the controller lacks are added as PartitionModifications
        adds them (§10.2), the rest (existing partitions, configs) changes nothing. A real
        log may start mid-life and name topics again (CONTRACT §4)."""
        context = self.context
        assignment = body.assignment
        if assignment is None:
            registered = {b: context.brokers[b].rack for b in context.registered_broker_ids()}
            try:
                assignment = assign_replicas(
                    registered, body.partitions or 0, body.replication_factor or 0
                )
            except AssignmentError as error:
                raise EventRejected(str(error)) from error
        known = context.topics.get(body.topic)
        if known is not None:
            added = {p: rs for p, rs in assignment.items() if p not in known.partitions}
            if added and not context.is_queued_for_deletion(body.topic):
                # the existing partitions' stored states change nothing either
                state = {p: s for p, s in (body.state or {}).items() if p in added}
                self._create_partitions(body.topic, added, state)
            return
        context.add_topic(body.topic, body.configs or {})
        if body.deletion is not None:
            self._load_queued_topic(body.topic, assignment, body.state or {})
            return
        self._create_partitions(body.topic, assignment, body.state)

    def _partition_creation(self, body: ev.PartitionCreation) -> None:
        if self.context.is_queued_for_deletion(body.topic):
            return  # §10.2: additions to a topic being deleted are discarded
        self._create_partitions(body.topic, body.assignment, body.state)

    def _create_partitions(
        self,
        topic: str,
        assignment: dict[int, tuple[int, ...]],
        stored: dict[int, ev.StoredPartitionState] | None = None,
    ) -> None:
        """onNewPartitionCreation (§10.3): four separate batches, for the partitions without
        a stored state. Those with one already exist (a snapshot of a running cluster):
        they are loaded instead, as a failover loads them (§7.2 step 4)."""
        context = self.context
        parts = self.parts
        if stored:
            self._load_existing_partitions(topic, assignment, stored)
        stored = stored or {}
        tps = [TopicPartition(topic, p) for p in sorted(assignment) if p not in stored]
        if not tps:
            return
        for tp in tps:
            context.add_partition(tp, ReplicaAssignment(tuple(assignment[tp.partition])))
        replicas = [(tp, r) for tp in tps for r in context.assignment(tp).replicas]
        parts.partitions.handle_state_changes(tps, PS.NEW)
        parts.replicas.handle_state_changes(replicas, RS.NEW)
        parts.partitions.handle_state_changes(tps, PS.ONLINE, offline_strategy(False))
        parts.replicas.handle_state_changes(replicas, RS.ONLINE)

    def _load_existing_partitions(
        self,
        topic: str,
        assignment: dict[int, tuple[int, ...]],
        stored: dict[int, ev.StoredPartitionState],
    ) -> None:
        """Partitions that exist with a stored state: the assignment and the
        LeaderIsrAndControllerEpoch are cached as initializeControllerContext caches them
        (§7.2 step 4c-g), and the states set where the state machines' startup leaves them
        with nothing to do: the partition Online if its leader is live, else Offline
        (§7.2 step 9: leader -1 counts as not live); a replica Online if its broker is live,
        else Offline (§6.4). No election, no ISR write, no request and no state_changes
        row: the cluster already went through them, and the stored state is their outcome.
        An Offline partition is elected by the next triggerOnlinePartitionStateChange (a
        broker startup or a failover), as in a controller that just loaded it."""
        context = self.context
        for partition in sorted(stored):
            state = stored[partition]
            tp = TopicPartition(topic, partition)
            record = context.add_partition(tp, ReplicaAssignment(tuple(assignment[partition])))
            leadership = LeaderAndIsr(
                state.leader,
                state.leader_epoch,
                state.isr,
                state.partition_epoch,
                RecoveryState(state.leader_recovery_state),
                state.controller_epoch,
            )
            context.set_leadership(record, leadership)
            online = context.is_live(state.leader)
            context.set_partition_state(record, PS.ONLINE if online else PS.OFFLINE)
            for broker in record.assignment.replicas:
                context.set_replica_state(
                    record, broker, RS.ONLINE if context.is_live(broker) else RS.OFFLINE
                )

    def _load_queued_topic(
        self,
        topic: str,
        assignment: dict[int, tuple[int, ...]],
        stored: dict[int, ev.StoredPartitionState],
    ) -> None:
        """A topic that exists queued for deletion (a snapshot of a cluster deleting it:
        its /admin/delete_topics entry is stored state, like its partitions' state znodes).
        It is loaded as a failover loads it, before anything runs (SPEC §7.2 steps 4-6):
        the partitions as `state` gives them (without one: NewPartition, never initialized,
        which no controller initializes while the topic is queued: §7.2 step 9, §8.2
        step 5), the topic queued, and ineligible while a replica's broker is not live or a
        partition is being reassigned. Nothing runs: no TopicDeletion, no election, no
        request. The real controller already did that work, and the stored state is its
        outcome. The next failover or broker startup resumes the deletion (§15.5) from
        here, and until then no election takes the topic's offline partitions."""
        context = self.context
        self._load_existing_partitions(topic, assignment, stored)
        for partition in sorted(p for p in assignment if p not in stored):
            record = context.add_partition(
                TopicPartition(topic, partition), ReplicaAssignment(tuple(assignment[partition]))
            )
            context.set_partition_state(record, PS.NEW)
            for broker in record.assignment.replicas:
                context.set_replica_state(
                    record, broker, RS.ONLINE if context.is_live(broker) else RS.OFFLINE
                )
        dead = any(not context.is_live(b) for _, b in context.replicas_of_topic(topic))
        reassigning = any(tp.topic == topic for tp in context.partitions_being_reassigned)
        self.parts.deletion.init([topic], [topic] if dead or reassigning else [])

    def _topic_deletion(self, body: ev.TopicDeletion) -> None:
        """A DeleteTopics request, then processTopicDeletion (§15.1).

        A topic already queued keeps its /admin/delete_topics entry until its deletion
        completes, so asking again changes nothing in ZooKeeper (Kafka answers NONE) and
        the controller sees no event. A new entry fires TopicDeletion, which reads every
        entry: each listed topic with a partition being reassigned is marked ineligible
        (a no-op for the new one, not queued yet: §19.13), then all are enqueued."""
        context = self.context
        if context.is_queued_for_deletion(body.topic):
            return
        listed = {*context.topics_to_be_deleted, body.topic}
        reassigning = {tp.topic for tp in context.partitions_being_reassigned}
        self.parts.deletion.mark_ineligible(sorted(listed & reassigning))
        self.parts.deletion.enqueue(sorted(listed))

    def _stop_replica_response(self, body: ev.StopReplicaResponse) -> None:
        tp = TopicPartition(body.topic, body.partition)
        self._on_stop_replica_response(body.broker, ((tp, body.error),))

    def _on_stop_replica_response(
        self, broker: int, errors: tuple[tuple[TopicPartition, str | None], ...]
    ) -> None:
        """processTopicDeletionStopReplicaResponseReceived (§15.4)."""
        deletion = self.parts.deletion
        failed = [(tp, broker) for tp, error in errors if error not in (None, "NONE")]
        succeeded = [(tp, broker) for tp, error in errors if error in (None, "NONE")]
        if failed:
            deletion.fail_replica_deletion(failed)
        if succeeded:
            deletion.complete_replica_deletion(succeeded)

    def _topic_config_change(self, body: ev.TopicConfigChange) -> None:
        """§16: a topic config change. Kafka's TopicConfigHandler enqueues
        TopicUncleanLeaderElectionEnable after every change that leaves the topic's own
        override reading true (not only when it flips; the broker default is not read).
        It reads the override with Scala's `toBoolean`, which keeps blanks: " true" is a
        valid config that elections later read as true, but it triggers nothing now."""
        context = self.context
        merged = {**context.topics[body.topic].configs, **body.configs}
        context.set_topic_configs(body.topic, merged)
        override = merged.get(UNCLEAN_KEY)
        if override is not None and scala_to_boolean(override):
            self._trigger_online_partition_state_change(body.topic)

    # ---- reassignment, ISR changes, elections (§12-§14) ----------------------------------

    def _partition_reassignment(self, body: ev.PartitionReassignment) -> None:
        tp = TopicPartition(body.topic, body.partition)
        try:
            self.reassignments.submit(tp, body.replicas)
        except ReassignmentError as refusal:
            self.journal.result(tp.topic, tp.partition, refusal.code, refusal.message)
            return
        self.journal.result(tp.topic, tp.partition, None, None, self.context.leadership(tp))
        if self.settings.simulate_brokers:
            self._follow_ups.append(_IsrExpansion((tp,)))

    def _resume_reassignment(self, tp: TopicPartition) -> None:
        with contextlib.suppress(ReassignmentFailed):  # Kafka logs it and carries on
            self.reassignments.resume(tp)

    def _isr_change(self, body: ev.IsrChange) -> None:
        """An AlterPartition from the partition's current leader (§13.1). A partition the
        controller has no leadership for has no leader to send it: any registered broker
        at its registered epoch passes the top-level checks alike, so the request is one
        of theirs (with none registered, none can: STALE_BROKER_EPOCH)."""
        context = self.context
        tp = TopicPartition(body.topic, body.partition)
        current = context.leadership(tp)
        if current is None:
            registered = context.registered_broker_ids()
            sender = registered[0] if registered else NO_LEADER
            leader_epoch = partition_epoch = NO_EPOCH  # unread: rule 1 answers first
        else:
            sender = current.leader
            leader_epoch, partition_epoch = current.leader_epoch, current.partition_epoch
        change = PartitionChange(
            tp=tp,
            leader_epoch=leader_epoch if body.leader_epoch is None else body.leader_epoch,
            isr=body.isr,
            partition_epoch=(
                partition_epoch if body.partition_epoch is None else body.partition_epoch
            ),
        )
        info = context.brokers.get(sender)
        broker_epoch = -1 if info is None else info.epoch
        self._alter_partition(AlterPartitionRequest(sender, broker_epoch, (change,)))

    def _alter_partition(self, request: AlterPartitionRequest) -> None:
        results = alter_partition(self.parts, request)
        for tp, result in results.items():
            self.journal.result(
                tp.topic, tp.partition, result.error, result.message, result.leadership
            )
        for tp, result in results.items():
            if result.error is None and tp in self.context.partitions_being_reassigned:
                with contextlib.suppress(ReassignmentFailed):  # Kafka logs it and carries on
                    self.reassignments.maybe_complete(tp)

    def _expand_isr(self, partitions: tuple[TopicPartition, ...]) -> None:
        """Simulated brokers: each live leader adds its caught-up live replicas to the ISR,
        in one AlterPartition for all the partitions it leads (as a broker batches them)."""
        context = self.context
        by_leader: dict[int, list[PartitionChange]] = {}
        live = context.live_broker_set()  # (is_live without a call per replica)
        queued = context.topics_to_be_deleted
        for tp, record in context.records_of(partitions):  # one lookup per run of a topic
            if record is None or record.leadership is None:
                continue
            current = record.leadership
            if current.leader not in live or tp.topic in queued:
                continue
            isr = current.isr
            states = record.replica_states
            joining: tuple[int, ...] = ()
            for r in record.assignment.replicas:  # (a loop, not a generator: per partition)
                if r not in isr and r in live and states.get(r) in _CAUGHT_UP:
                    joining += (r,)
            if joining:
                by_leader.setdefault(current.leader, []).append(
                    PartitionChange(
                        tp, current.leader_epoch, current.isr + joining, current.partition_epoch
                    )
                )
        for leader in sorted(by_leader):
            epoch = context.brokers[leader].epoch
            self._alter_partition(AlterPartitionRequest(leader, epoch, tuple(by_leader[leader])))

    def _leader_election(self, body: ev.LeaderElection) -> None:
        self.elections.admin_election(body.election, body.partitions)

    def _auto_rebalance_check(self, body: ev.AutoRebalanceCheck) -> None:
        self.elections.auto_rebalance()

    # ---- the KRaft controller's events (CONTRACT §5): the nearest ZooKeeper-mode thing ----

    def _broker_registration(self, body: ev.BrokerRegistration) -> None:
        """A ZooKeeper broker registers live in one step (its znode): as broker_startup.
        Its epoch is the znode's czxid, so a KRaft `broker_epoch` is not taken."""
        self._broker_startup(ev.BrokerStartup(broker=body.broker, rack=body.rack))
        self._engine_note(
            "ZooKeeper engine: applied as broker_startup (a ZooKeeper-mode broker registers "
            "live, with no fencing; its broker epoch is its znode's, not the event's)"
        )

    def _broker_unfence(self, body: ev.BrokerUnfence) -> None:
        self._engine_note(
            "ZooKeeper engine: nothing to do (a ZooKeeper-mode controller has no fencing: "
            "a registered broker is live from its registration)"
        )

    def _broker_unregistration(self, body: ev.BrokerUnregistration) -> None:
        """A live (or shutting-down) broker's registration going away is its znode's: a
        broker_failure. A broker that is not registered has nothing to lose."""
        if self.context.is_registered(body.broker):
            self._broker_failure(ev.BrokerFailure(broker=body.broker))
            self._engine_note(
                "ZooKeeper engine: applied as broker_failure (the broker was registered; "
                "its registration going away is its session's end)"
            )
        else:
            self._engine_note(
                f"ZooKeeper engine: nothing to do (broker {body.broker} is not registered)"
            )

    def _unclean_election_check(self, body: ev.UncleanElectionCheck) -> None:
        self._engine_note(
            "ZooKeeper engine: nothing to do (a ZooKeeper-mode controller has no periodic "
            "unclean election: it elects uncleanly when a partition goes offline)"
        )

    def _cluster_config_change(self, body: ev.ClusterConfigChange) -> None:
        """A dynamic broker config. The cluster default (/config/brokers/<default>) is
        kept: `min.insync.replicas` counts in health, and `unclean.leader.election.enable`
        going from false to true makes the controller's broker enqueue
        UncleanLeaderElectionEnable (DynamicLogConfig.reconfigure), an election of every
        offline partition. One broker's own config is read by that broker alone."""
        if body.broker is not None:
            self._engine_note(
                f"ZooKeeper engine: nothing to do (a config of broker {body.broker} alone; "
                "the ZooKeeper engine models the cluster default only)"
            )
            return
        context = self.context
        before = self._default_unclean()
        context.cluster_configs = {**context.cluster_configs, **body.configs}
        if MIN_ISR_KEY in body.configs:
            context.event_topics.update(context.topics)  # every topic's at_min_isr again
        keys = ", ".join(f"{k}={v}" for k, v in body.configs.items())
        if not before and self._default_unclean():
            self._trigger_online_partition_state_change()
            self._engine_note(
                f"ZooKeeper engine: cluster default set ({keys}); unclean leader election "
                "turned on: every offline partition elected again"
            )
        else:
            self._engine_note(f"ZooKeeper engine: cluster default set ({keys})")

    def _default_unclean(self) -> bool:
        value = self.context.cluster_configs.get(UNCLEAN_KEY)
        if value is None:
            return self.settings.unclean_leader_election_enable
        return parse_bool(UNCLEAN_KEY, value)

    def _feature_update(self, body: ev.FeatureUpdate) -> None:
        self._engine_note(
            "ZooKeeper engine: nothing to do (a ZooKeeper-mode cluster has no "
            "eligible.leader.replicas feature)"
        )

    def _engine_note(self, message: str) -> None:
        """An event_results row saying what this engine did with another engine's event."""
        self.journal.result(None, None, None, message)

    # ---- failover (§7.2) -----------------------------------------------------------------

    def _controller_failover(self, body: ev.ControllerFailover) -> None:
        """onControllerFailover on a context freshly loaded from the stored tables (the
        simulator rebuilds it before calling this); steps 4-11 of §7.2."""
        context = self.context
        parts = self.parts
        won = body.controller_epoch
        context.epoch = context.epoch + 1 if won is None else won
        context.controller_id = body.controller
        for broker in body.failed_brokers:
            if context.is_registered(broker):
                context.set_broker_status(broker, BrokerStatus.DEAD)
        for broker in sorted(context.shutting_down):  # in-flight shutdowns are forgotten
            context.set_broker_status(broker, BrokerStatus.LIVE)
        for record in context.all_partitions():
            if record.assignment.is_being_reassigned:
                context.partitions_being_reassigned.add(record.tp)
        queued = sorted(context.topics_to_be_deleted)
        context.topics_to_be_deleted.clear()
        ineligible = {
            tp.topic
            for tp, b in (r for t in queued for r in context.replicas_of_topic(t))
            if not context.is_live(b)
        } | {tp.topic for tp in context.partitions_being_reassigned}
        parts.deletion.init(queued, ineligible)
        parts.send_update_metadata(context.registered_broker_ids())
        self._replica_state_machine_startup()
        self._partition_state_machine_startup()
        for tp in sorted(context.partitions_being_reassigned):
            self._resume_reassignment(tp)
        parts.deletion.try_topic_deletion()

    def _replica_state_machine_startup(self) -> None:
        """§6.4: every replica Online if its broker is live, else DeletionIneligible; then
        both groups are driven through the state machine."""
        context = self.context
        online, offline = [], []
        for record in context.all_partitions():
            for broker in record.assignment.replicas:
                if context.is_live(broker):
                    context.set_replica_state(record, broker, RS.ONLINE)
                    online.append((record.tp, broker))
                else:
                    context.set_replica_state(record, broker, RS.DELETION_INELIGIBLE)
                    offline.append((record.tp, broker))
        self.parts.replicas.handle_state_changes(online, RS.ONLINE)
        self.parts.replicas.handle_state_changes(offline, RS.OFFLINE)

    def _partition_state_machine_startup(self) -> None:
        context = self.context
        for record in context.all_partitions():
            leadership = record.leadership
            if leadership is None:
                state = PS.NEW
            else:
                state = PS.ONLINE if context.is_live(leadership.leader) else PS.OFFLINE
            context.set_partition_state(record, state)
        self._trigger_online_partition_state_change()


# The checks of `check` and the handlers of `apply` per event type, as plain functions
# taking the controller: bound methods held by the controller would make it a reference
# cycle, which only a full cyclic collection frees (a failover replaces the controller).
_CHECKS: dict[type, tuple[Callable[..., None], ...]] = {
    ev.BrokerFailure: (KafkaController._known_brokers,),
    ev.ControlledShutdown: (KafkaController._known_broker,),
    ev.StopReplicaResponse: (KafkaController._known_broker, KafkaController._known_topic),
    ev.TopicCreation: (KafkaController._check_topic_creation,),
    ev.PartitionCreation: (KafkaController._known_topic, KafkaController._check_partition_creation),
    ev.TopicDeletion: (KafkaController._known_topic, KafkaController._check_deletion_enabled),
    ev.TopicConfigChange: (KafkaController._known_topic, KafkaController._check_topic_configs),
    ev.ControllerFailover: (
        KafkaController._check_failed_brokers,
        KafkaController._check_controller_epoch,
    ),
}
_HANDLERS: dict[type, Callable[..., None]] = {
    ev.BrokerStartup: KafkaController._broker_startup,
    ev.BrokerFailure: KafkaController._broker_failure,
    ev.ControlledShutdown: KafkaController._controlled_shutdown,
    ev.TopicCreation: KafkaController._topic_creation,
    ev.PartitionCreation: KafkaController._partition_creation,
    ev.TopicDeletion: KafkaController._topic_deletion,
    ev.PartitionReassignment: KafkaController._partition_reassignment,
    ev.IsrChange: KafkaController._isr_change,
    ev.LeaderElection: KafkaController._leader_election,
    ev.AutoRebalanceCheck: KafkaController._auto_rebalance_check,
    ev.StopReplicaResponse: KafkaController._stop_replica_response,
    ev.TopicConfigChange: KafkaController._topic_config_change,
    ev.ControllerFailover: KafkaController._controller_failover,
    ev.BrokerRegistration: KafkaController._broker_registration,
    ev.BrokerUnfence: KafkaController._broker_unfence,
    ev.BrokerUnregistration: KafkaController._broker_unregistration,
    ev.UncleanElectionCheck: KafkaController._unclean_election_check,
    ev.ClusterConfigChange: KafkaController._cluster_config_change,
    ev.FeatureUpdate: KafkaController._feature_update,
}
