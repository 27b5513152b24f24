"""QuorumController: one simulated KRaft cluster; events in, records out (SPEC-KRAFT §3.5,
§6-§18, §22).

Each event runs one or more *operations*. An operation generates its records from the
current state (raising ApiError or UnexpectedError writes nothing), then every record is
given the next offset and replayed, as Kafka's `ControllerWriteEvent` appends and replays.
Records are the only way state changes, so replaying an event stream's records from an
empty controller rebuilds the same registrations, partitions, configs and features.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.kraft import records as rec
from controller.kraft.cluster_control_manager import (
    CONTROLLED_SHUTDOWN,
    FENCED,
    SHUTDOWN_NOW,
    ClusterControlManager,
)
from controller.kraft.configuration_control_manager import (
    MIN_ISR,
    ConfigurationControlManager,
    validate_value,
)
from controller.kraft.errors import ApiError, UnexpectedError
from controller.kraft.feature_control_manager import FeatureControlManager
from controller.kraft.java_collections import JavaRandom
from controller.kraft.outcome import (
    RECOVERED,
    RECOVERING,
    BrokerView,
    KRaftRejection,
    Outcome,
    PartitionChange,
    PartitionView,
    Record,
    Result,
    TopicView,
)
from controller.kraft.partition_registration import (
    LRS_RECOVERED,
    LRS_RECOVERING,
    NO_LEADER,
    PartitionRegistration,
)
from controller.kraft.replication_control_manager import (
    Operation,
    ReplicationControlManager,
    TaskRuns,
)
from controller.kraft.settings import ELR_VERSION_KEY, KRaftSettings

TP = tuple[str, int]
_LRS_NAMES = {LRS_RECOVERED: RECOVERED, LRS_RECOVERING: RECOVERING}
_LRS_CODES = {RECOVERED: LRS_RECOVERED, RECOVERING: LRS_RECOVERING}


def _state(p: PartitionRegistration | None) -> str:
    if p is None:
        return "NonExistentPartition"
    return "OfflinePartition" if p.leader == NO_LEADER else "OnlinePartition"


def _config_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _sorted_where(flags: Mapping[Any, bool], flag: bool) -> tuple[Any, ...]:
    """The keys whose value is `flag`, ascending (most events touch no broker or topic)."""
    if not flags:
        return ()
    return tuple(sorted(key for key, value in flags.items() if value is flag))


def _brokers_of(event: Mapping[str, Any]) -> list[int]:
    if event.get("brokers") is not None:
        return [int(b) for b in event["brokers"]]
    return [int(event["broker"])]


@dataclass(slots=True)
class _EventLog:
    """What the event being applied has done so far."""

    records: list[Record] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    before: dict[TP, PartitionRegistration | None] = field(default_factory=dict)
    unclean: set[TP] = field(default_factory=set)
    brokers: dict[int, bool] = field(default_factory=dict)  # id -> still registered
    topics: dict[str, bool] = field(default_factory=dict)  # name -> still exists
    elr_elections: int = 0
    lke_elections: int = 0
    unclean_elections: int = 0


class QuorumController:
    def __init__(self, settings: KRaftSettings, cluster: str = "default") -> None:
        self.settings = settings
        self.cluster = cluster
        self.cluster_control = ClusterControlManager()
        self.configuration_control = ConfigurationControlManager(settings)
        self.feature_control = FeatureControlManager(settings)
        self.replication_control = ReplicationControlManager(
            self.cluster_control, self.configuration_control, self.feature_control
        )
        self.controller_epoch = 1
        self.next_offset = 0
        self._random = JavaRandom(self.controller_epoch)
        self._log: _EventLog | None = None
        # B2E's entries that its partitions' ELRs do not give (SPEC-KRAFT §2.3's stale
        # entries and phantom partition 0s), per (broker, topic): partition -> stored count
        # minus derived count. Kept as events touch them, so that `soft_state` need not
        # hold the index: a restart derives B2E from the partitions and adds these. Of the
        # whole history's index, and in `b2e_node_extra` of each deposed controller's.
        self.b2e_extra: dict[tuple[int, str], dict[int, int]] = {}
        self.b2e_node_extra: dict[int, dict[tuple[int, str], dict[int, int]]] = {}
        # SPEC-KRAFT §2.7: [ELR] the cluster-level min.insync.replicas a format writes
        if self.feature_control.elr_enabled:
            self.configuration_control.configs[(rec.RESOURCE_BROKER, "")] = {
                MIN_ISR: str(settings.min_insync_replicas)
            }
        # whether ELR has been off at some point (SPEC-KRAFT §21 V7 holds only if never)
        self.elr_ever_disabled = not self.feature_control.elr_enabled

    # -- views -------------------------------------------------------------------------
    @property
    def active_controller(self) -> int | None:
        return self.configuration_control.active_controller

    @property
    def elr_enabled(self) -> bool:
        return self.feature_control.elr_enabled

    def _view(self, topic: str, pid: int, p: PartitionRegistration) -> PartitionView:
        # (tuple.__new__, in PartitionView's field order: the named tuple's own constructor
        # is a Python function, a frame per view)
        return _new_tuple(
            PartitionView,
            (
                topic,
                pid,
                p.leader,
                p.leader_epoch,
                p.isr,
                p.elr,
                p.lke,
                p.partition_epoch,
                p.replicas,
                p.adding,
                p.removing,
                _LRS_NAMES.get(p.leader_recovery_state, RECOVERED),
            ),
        )

    def partitions(self) -> Iterator[PartitionView]:
        topics = self.replication_control.topics
        for topic in sorted(topics):
            parts = topics[topic]
            for pid in sorted(parts):
                yield self._view(topic, pid, parts[pid])

    def partition(self, topic: str, partition: int) -> PartitionView | None:
        p = self.replication_control.topics.get(topic, {}).get(partition)
        return None if p is None else self._view(topic, partition, p)

    def registration(self, topic: str, partition: int) -> PartitionRegistration | None:
        return self.replication_control.topics.get(topic, {}).get(partition)

    def _broker_view(self, broker: int) -> BrokerView | None:
        r = self.cluster_control.registrations.get(broker)
        if r is None:
            return None
        return BrokerView(r.broker, r.rack, r.status, r.epoch, r.incarnation)

    def brokers(self) -> Iterator[BrokerView]:
        for broker in sorted(self.cluster_control.registrations):
            view = self._broker_view(broker)
            assert view is not None
            yield view

    def broker(self, broker: int) -> BrokerView | None:
        return self._broker_view(broker)

    def topics(self) -> Iterator[TopicView]:
        for topic in sorted(self.replication_control.topics):
            yield TopicView(topic, self.configuration_control.topic_configs(topic))

    # -- replay ------------------------------------------------------------------------
    def replay(self, record: Record | Mapping[str, Any]) -> None:
        """Apply one record (a Record, or {"type", "record"} / {"type", "fields"} JSON)."""
        if not isinstance(record, Record):
            fields = record.get("fields", record.get("record"))
            if isinstance(fields, str):
                import json

                fields = json.loads(fields)
            record = Record(str(record["type"]), dict(fields or {}))
        offset = self.next_offset
        self.next_offset += 1
        log = self._log
        kind = record.type
        f = record.fields
        rc = self.replication_control
        if kind == rec.PARTITION_CHANGE:
            key = (f["topic"], f["partitionId"])
            if log is not None and key not in log.before:
                parts = rc.topics.get(key[0])
                log.before[key] = parts.get(key[1]) if parts is not None else None
            rc.replay_partition_change(record)
        elif kind == rec.PARTITION:
            key = (f["topic"], f["partitionId"])
            if log is not None and key not in log.before:
                log.before[key] = rc.topics.get(key[0], {}).get(key[1])
            rc.replay_partition(record)
        elif kind in (
            rec.REGISTER_BROKER,
            rec.UNREGISTER_BROKER,
            rec.BROKER_REGISTRATION_CHANGE,
            rec.FENCE_BROKER,
            rec.UNFENCE_BROKER,
        ):
            changed = self.cluster_control.replay(record, offset)
            if log is not None and changed:
                log.brokers[f["brokerId"]] = kind != rec.UNREGISTER_BROKER
        elif kind == rec.TOPIC:
            rc.replay_topic(record)
            if log is not None:
                log.topics[f["name"]] = True
        elif kind == rec.REMOVE_TOPIC:
            topic = f["topic"]
            parts = rc.topics.get(topic, {})
            if log is not None:
                for pid, p in parts.items():
                    log.before.setdefault((topic, pid), p)
                log.topics[topic] = False
            rc.replay_remove_topic(record)
        elif kind == rec.CONFIG:
            self.configuration_control.replay(record)
            if log is not None and f["resourceType"] == rec.RESOURCE_TOPIC:
                log.topics.setdefault(f["resourceName"], True)
        elif kind == rec.CLEAR_ELR:
            if log is not None:
                name = f["topicName"]
                names = [name] if name else list(rc.topics)
                for topic in names:
                    for pid, p in rc.topics.get(topic, {}).items():
                        if p.elr or p.lke:
                            log.before.setdefault((topic, pid), p)
            rc.replay_clear_elr(record)
        elif kind == rec.FEATURE_LEVEL:
            self.feature_control.replay(record)
            if not self.feature_control.elr_enabled:
                self.elr_ever_disabled = True
        # every other record type (NoOp, controller registrations, ACLs, ...) is skipped

    # -- operations --------------------------------------------------------------------
    def _run(self, generate: Callable[[Operation], None], topic: str | None = None) -> bool:
        """One operation: generate, then append and replay; False when it was refused.

        topic: the topic a refusal names. CreateTopics and CreatePartitions answer per topic
        (a CreatableTopicResult / CreatePartitionsTopicResult carries its name); every other
        refusal here is the whole request's."""
        log = self._log
        assert log is not None
        op = Operation()
        try:
            generate(op)
        except ApiError as error:
            log.results.append(Result(topic=topic, error=error.code, message=error.message))
            return False
        except UnexpectedError as error:
            log.results.append(Result(error="UNKNOWN_SERVER_ERROR", message=str(error)))
            return False
        for topic, pid, build in op.elections:
            if build.unclean:
                log.unclean.add((topic, pid))
                log.unclean_elections += 1
            if build.lke_election:
                log.lke_elections += 1
            if build.elr_election:
                log.elr_elections += 1
        for record in op.records:
            log.records.append(record)
            self.replay(record)
        return True

    def apply(self, event: Mapping[str, Any]) -> Outcome:
        kind = event.get("type")
        handler = _HANDLERS.get(str(kind))
        if handler is None:
            raise KRaftRejection(f"unknown event type {kind!r}")
        self._log = _EventLog()
        try:
            handler(self, event)
            self._track_b2e_extra(self._log)
            return self._outcome(self._log)
        finally:
            self._log = None

    def _track_b2e_extra(self, log: _EventLog) -> None:
        """Refresh `b2e_extra` for the (broker, topic) pairs whose B2E entries the event
        may have changed: the brokers in a touched partition's ELR before or after it."""
        topics = self.replication_control.topics
        pairs: dict[tuple[int, str], set[int]] = {}
        for (topic, pid), before in log.before.items():
            parts = topics.get(topic)
            after = parts.get(pid) if parts is not None else None
            for p in (before, after):
                if p is not None and p.elr:  # (most partitions have no ELR)
                    for broker in p.elr:
                        pairs.setdefault((broker, topic), set()).add(pid)
        for pair, touched in pairs.items():
            self._refresh_b2e_extra(pair, touched)

    def _refresh_b2e_extra(self, pair: tuple[int, str], touched: Iterable[int]) -> None:
        rc = self.replication_control
        _refresh_extra(rc, rc.b2e_history, self.b2e_extra, pair, touched)
        for node, index in rc.b2e_nodes.items():
            _refresh_extra(rc, index, self.b2e_node_extra.setdefault(node, {}), pair, touched)

    def _outcome(self, log: _EventLog) -> Outcome:
        topics = self.replication_control.topics
        changes: list[PartitionChange] = []
        changed: list[TP] = []
        removed: list[TP] = []
        befores = log.before
        for key in sorted(befores) if len(befores) > 1 else befores:
            before = befores[key]
            parts = topics.get(key[0])
            after = parts.get(key[1]) if parts is not None else None
            if after is None:
                if before is not None:
                    removed.append(key)
                    changes.append(
                        PartitionChange(
                            key[0],
                            key[1],
                            _state(before),
                            _state(None),
                            NO_LEADER,
                            before.leader_epoch,
                            (),
                        )
                    )
                continue
            if after == before:
                continue
            changed.append(key)
            if (
                before is None
                or before.leader != after.leader
                or before.isr != after.isr
                or before.elr != after.elr
                or before.replicas != after.replicas
            ):
                changes.append(
                    _new_tuple(  # (PartitionChange's fields in order: one per partition)
                        PartitionChange,
                        (
                            key[0],
                            key[1],
                            _state(before),
                            _state(after),
                            after.leader,
                            after.leader_epoch,
                            after.isr,
                            key in log.unclean,
                        ),
                    )
                )
        brokers, topic_flags = log.brokers, log.topics  # (most events touch neither)
        return _new_tuple(  # (Outcome's fields in order: one per event)
            Outcome,
            (
                tuple(log.records),
                tuple(log.results),
                tuple(changes),
                tuple(changed),
                tuple(removed),
                _sorted_where(brokers, True) if brokers else (),
                _sorted_where(brokers, False) if brokers else (),
                _sorted_where(topic_flags, True) if topic_flags else (),
                _sorted_where(topic_flags, False) if topic_flags else (),
                log.elr_elections,
                log.lke_elections,
                log.unclean_elections,
            ),
        )

    def _note(self, message: str, error: str | None = None) -> None:
        assert self._log is not None
        self._log.results.append(Result(error=error, message=message))

    def _result(self, result: Result) -> None:
        assert self._log is not None
        self._log.results.append(result)

    # -- brokers (SPEC-KRAFT §6-§10) ------------------------------------------------------
    def _fence(self, broker: int) -> None:
        """One fencing operation (§8), and [kcsim] whether it ended a shutdown (§6.3)."""
        cc = self.cluster_control
        registration = cc.registrations[broker]
        if not registration.fenced:
            if registration.in_controlled_shutdown or broker in cc.asked_shutdown:
                cc.clean_exit.add(broker)
            else:
                cc.clean_exit.discard(broker)
        self._run(lambda op: self.replication_control.handle_broker_fenced(op, broker))
        cc.shutdown_pending.discard(broker)

    def _shutdown_now(self, broker: int) -> None:
        """SHUTDOWN_NOW: the fence of §8 (a redundant one for a fenced broker)."""
        self._fence(broker)

    def _register(
        self,
        broker: int,
        rack: str | None,
        broker_epoch: int | None,
        previous_epoch: int | None,
        incarnation: str | None,
        startup: bool = False,
    ) -> bool:
        """A registration (§6.2); False when the controller refused it. `startup`:
        broker_startup's, whose previous epoch is the stored one when the broker's last fence
        *before this event* ended a shutdown it asked for (§6.3: a SHUTDOWN_NOW, or a
        broker_failure while shutting down; the expiry fence this registration writes for a
        live broker is neither)."""
        cc = self.cluster_control
        current = cc.registrations.get(broker)
        if startup:
            previous_epoch = (
                current.epoch if current is not None and broker in cc.clean_exit else None
            )
        if incarnation is not None and current is not None and current.incarnation == incarnation:
            same = current
            self._run(
                lambda op: op.records.append(
                    rec.register_broker(
                        broker,
                        incarnation,
                        same.epoch,
                        rack,
                        same.fenced,
                        same.in_controlled_shutdown,
                    )
                )
            )
            return True
        if current is not None and not current.fenced:
            self._fence(broker)  # [kcsim] the expiry of the old session (§6.2)
        current = cc.registrations.get(broker)
        stored = current.epoch if current is not None else -2
        clean = previous_epoch is not None and previous_epoch == stored
        epoch = self.next_offset if broker_epoch is None else broker_epoch

        def generate(op: Operation) -> None:
            self.replication_control.handle_broker_shutdown(op, broker, clean)
            op.records.append(rec.register_broker(broker, incarnation, epoch, rack, True, False))

        if not self._run(generate):
            return False
        cc.asked_shutdown.discard(broker)
        cc.clean_exit.discard(broker)
        return True

    def _unfence(self, broker: int) -> None:
        cc = self.cluster_control
        state = cc.heartbeat_state(broker)
        if state == CONTROLLED_SHUTDOWN:
            self._shutdown_now(broker)
            self._note(SHUTDOWN_NOW)
            return
        if state != FENCED:
            self._note(f"broker {broker} is already unfenced: no change")
            return
        epoch = cc.registrations[broker].epoch
        self._run(lambda op: self.replication_control.handle_broker_unfenced(op, broker, epoch))

    def _on_broker_registration(self, event: Mapping[str, Any]) -> None:
        broker = int(event["broker"])
        self._register(
            broker,
            event.get("rack"),
            event.get("broker_epoch"),
            event.get("previous_broker_epoch"),
            event.get("incarnation"),
        )

    def _on_broker_startup(self, event: Mapping[str, Any]) -> None:
        cc = self.cluster_control
        for broker in _brokers_of(event):
            # A broker whose registration is refused (UNKNOWN_SERVER_ERROR from a stale ELR
            # index entry, §6.1) retries the registration and sends no heartbeat until one
            # succeeds: BrokerLifecycleManager heartbeats only with an epoch it was granted.
            registered = self._register(broker, event.get("rack"), None, None, None, startup=True)
            if registered and broker in cc.registrations:
                self._unfence(broker)

    def _on_broker_unfence(self, event: Mapping[str, Any]) -> None:
        broker = int(event["broker"])
        self.cluster_control.require_registered(broker, "broker_unfence")
        self._unfence(broker)

    def _on_broker_failure(self, event: Mapping[str, Any]) -> None:
        brokers = _brokers_of(event)
        for broker in brokers:
            self.cluster_control.require_registered(broker, "broker_failure")
        for broker in brokers:
            self._fence(broker)

    def _on_controlled_shutdown(self, event: Mapping[str, Any]) -> None:
        broker = int(event["broker"])
        cc = self.cluster_control
        registration = cc.require_registered(broker, "controlled_shutdown")
        given = event.get("broker_epoch")
        if given is not None and given != registration.epoch:
            self._note(
                f"Expected broker epoch {registration.epoch}, but got broker epoch {given}",
                "STALE_BROKER_EPOCH",
            )
            return
        cc.asked_shutdown.add(broker)
        state = cc.heartbeat_state(broker)
        if state in (FENCED, CONTROLLED_SHUTDOWN):
            self._shutdown_now(broker)
            self._note(SHUTDOWN_NOW)
            return
        if not self.replication_control.has_leaderships(broker):
            self._shutdown_now(broker)
            self._note(SHUTDOWN_NOW)
            return
        epoch = registration.epoch
        if self._run(
            lambda op: self.replication_control.handle_broker_in_controlled_shutdown(
                op, broker, epoch
            )
        ):
            cc.shutdown_pending.add(broker)
        self._note(CONTROLLED_SHUTDOWN)

    def _on_broker_unregistration(self, event: Mapping[str, Any]) -> None:
        broker = int(event["broker"])
        cc = self.cluster_control
        registration = cc.registrations.get(broker)
        if registration is None:
            if broker not in cc.seen:
                raise KRaftRejection(f"broker_unregistration: unknown broker {broker}")
            self._note(
                f"Broker ID {broker} is not currently registered", "BROKER_ID_NOT_REGISTERED"
            )
            return
        epoch = registration.epoch
        self._run(lambda op: self.replication_control.handle_broker_unregistered(op, broker, epoch))

    # -- topics (SPEC-KRAFT §11, §12) -------------------------------------------------------
    def _configs_of(self, event: Mapping[str, Any]) -> dict[str, str]:
        configs = {str(k): _config_text(v) for k, v in (event.get("configs") or {}).items()}
        for name, value in configs.items():
            problem = validate_value(name, value)
            if problem is not None:
                raise KRaftRejection(f"{event.get('type')}: {problem}")
        return configs

    def _stored_partitions(
        self, assignment: Mapping[int, Sequence[int]], state: Mapping[Any, Any]
    ) -> dict[int, PartitionRegistration]:
        parts = {}
        for key, stored in state.items():
            pid = int(key)
            s = stored if isinstance(stored, Mapping) else _as_mapping(stored)
            lrs = s.get("leader_recovery_state") or RECOVERED
            parts[pid] = PartitionRegistration(
                replicas=tuple(assignment[pid]),
                isr=tuple(s["isr"]),
                removing=tuple(s.get("removing_replicas") or ()),
                adding=tuple(s.get("adding_replicas") or ()),
                leader=int(s["leader"]),
                leader_recovery_state=_LRS_CODES.get(str(lrs), LRS_RECOVERED),
                leader_epoch=int(s["leader_epoch"]),
                partition_epoch=int(s["partition_epoch"]),
                elr=tuple(s.get("elr") or ()),
                lke=tuple(s.get("last_known_elr") or ()),
            )
        for pid in assignment:
            if pid not in parts:
                replicas = tuple(assignment[pid])
                isr = tuple(r for r in replicas if self.cluster_control.is_active(r))
                parts[pid] = PartitionRegistration(
                    replicas, isr, (), (), isr[0] if isr else NO_LEADER, LRS_RECOVERED, 0, 0
                )
        return parts

    def _on_topic_creation(self, event: Mapping[str, Any]) -> None:
        topic = str(event["topic"])
        configs = self._configs_of(event)
        rc = self.replication_control
        assignment = _assignment(event.get("assignment"))
        state = event.get("state")

        def generate(op: Operation) -> None:
            rc.check_new_topic_name(topic)
            if assignment is not None and state:
                parts = self._stored_partitions(assignment, state)
            elif assignment is not None:
                parts = rc.manual_partitions(assignment)
            else:
                rf = int(event.get("replication_factor", 0))
                count = int(event.get("partitions", 0))
                if rf <= 0:
                    raise ApiError(
                        "INVALID_REPLICATION_FACTOR",
                        "Replication factor must be larger than 0, or -1 to use the default value.",
                    )
                if count <= 0:
                    raise ApiError(
                        "INVALID_PARTITIONS",
                        "Number of partitions was set to an invalid non-positive value.",
                    )
                parts = rc.placed_partitions(self._random, count, rf)
            rc.create_topic(op, topic, parts, configs)

        self._run(generate, topic)
        if event.get("deletion"):
            self._note("KRaft has no topic deletion queue: the topic is created as it is")

    def _require_topic(self, event: Mapping[str, Any]) -> str:
        topic = str(event["topic"])
        if topic not in self.replication_control.topics:
            raise KRaftRejection(f"{event.get('type')}: unknown topic {topic!r}")
        return topic

    def _on_partition_creation(self, event: Mapping[str, Any]) -> None:
        topic = self._require_topic(event)
        rc = self.replication_control
        assignment = _assignment(event.get("assignment")) or {}
        state = event.get("state")

        def generate(op: Operation) -> None:
            rc.check_new_partition_ids(topic, assignment)
            if state:
                parts = self._stored_partitions(assignment, state)
            else:
                parts = rc.manual_partitions(assignment)
            rc.create_partitions(op, topic, parts)

        self._run(generate, topic)

    def _on_topic_deletion(self, event: Mapping[str, Any]) -> None:
        topic = self._require_topic(event)
        if not self.settings.delete_topic_enable:
            raise KRaftRejection(
                "topic_deletion: topic deletion is disabled (delete.topic.enable=false)"
            )
        self._run(lambda op: op.records.append(rec.remove_topic(topic)))

    def _on_stop_replica_response(self, event: Mapping[str, Any]) -> None:
        self._result(
            Result(
                topic=event.get("topic"),
                partition=event.get("partition"),
                message="a KRaft controller sends no StopReplica: nothing to do",
            )
        )

    # -- reassignment, AlterPartition, elections (SPEC-KRAFT §13-§15) ------------------------
    def _on_partition_reassignment(self, event: Mapping[str, Any]) -> None:
        topic = self._require_topic(event)
        pid = int(event["partition"])
        target = event.get("replicas")
        rc = self.replication_control
        if self._run(
            lambda op: rc.alter_partition_reassignment(
                op, topic, pid, None if target is None else [int(b) for b in target]
            )
        ):
            p = rc.topics[topic][pid]
            self._result(
                Result(topic, pid, None, None, p.leader, p.leader_epoch, p.isr, p.partition_epoch)
            )
        else:
            log = self._log
            assert log is not None
            last = log.results.pop()
            log.results.append(Result(topic, pid, last.error, last.message))

    def _on_isr_change(self, event: Mapping[str, Any]) -> None:
        topic = self._require_topic(event)
        pid = int(event["partition"])
        rc = self.replication_control
        p = rc.topics[topic].get(pid)
        requester = event.get("leader")
        if p is None and requester is None:
            self._result(
                Result(topic, pid, "UNKNOWN_TOPIC_OR_PARTITION", f"Unknown partition {topic}-{pid}")
            )
            return
        if requester is None:
            requester = p.leader if p is not None else NO_LEADER
        requester = int(requester)
        epochs = event.get("broker_epochs")
        member_epochs = {int(k): int(v) for k, v in epochs.items()} if epochs else {}
        registration = self.cluster_control.registration(requester)
        requester_epoch = member_epochs.get(
            requester, registration.epoch if registration is not None else -1
        )
        lrs_name = event.get("leader_recovery_state")
        lrs = None if lrs_name is None else _LRS_CODES[str(lrs_name)]
        answer: list[Result] = []
        self._run(
            lambda op: answer.append(
                rc.alter_partition(
                    op,
                    requester,
                    requester_epoch,
                    topic,
                    pid,
                    list(map(int, event["isr"])),
                    member_epochs,
                    event.get("leader_epoch"),
                    event.get("partition_epoch"),
                    lrs,
                )
            )
        )
        for result in answer:
            self._result(result)

    def _on_leader_election(self, event: Mapping[str, Any]) -> None:
        unclean = event.get("election") == "unclean"
        rc = self.replication_control
        requested = event.get("partitions")
        answers: list[Result] = []

        def generate(op: Operation) -> None:
            if requested is None:
                for topic, pid in rc.election_candidates(unclean):
                    result = rc.elect_leader(op, topic, pid, unclean)
                    if result.error != "ELECTION_NOT_NEEDED":
                        answers.append(result)
            else:
                # One ElectLeaders request holds its partitions per topic (a
                # TopicPartitionsCollection keyed by name, topics in first-mention order), and
                # RCM.electLeaders :1530-1540 walks it topic by topic.
                by_topic: dict[str, list[int]] = {}
                for item in requested:
                    by_topic.setdefault(str(item["topic"]), []).append(int(item["partition"]))
                for topic, pids in by_topic.items():
                    for pid in pids:
                        answers.append(rc.elect_leader(op, topic, pid, unclean))

        self._run(generate)
        for result in answers:
            self._result(result)

    def _on_auto_rebalance_check(self, event: Mapping[str, Any]) -> None:
        if not self.settings.auto_leader_rebalance_enable:
            self._note(
                "auto.leader.rebalance.enable is false: the rebalance task is not registered"
            )
            return
        capped = [True]
        task = TaskRuns()
        while capped[0]:
            self._run(
                lambda op: capped.__setitem__(
                    0, self.replication_control.balance_partition_leaders(op, task)
                )
            )

    def _on_unclean_election_check(self, event: Mapping[str, Any]) -> None:
        capped = [True]
        task = TaskRuns()
        while capped[0]:
            self._run(
                lambda op: capped.__setitem__(
                    0, self.replication_control.elect_unclean_leaders(op, task)
                )
            )

    # -- configs and features (SPEC-KRAFT §16, §17) -----------------------------------------
    def _on_topic_config_change(self, event: Mapping[str, Any]) -> None:
        topic = self._require_topic(event)
        configs = self._configs_of(event)

        def generate(op: Operation) -> None:
            records = self.configuration_control.alter_topic(topic, configs)
            op.records.extend(records)
            if self.feature_control.elr_enabled and any(
                r.fields["name"] == MIN_ISR for r in records
            ):
                op.records.append(rec.clear_elr(topic))

        self._run(generate)

    def _on_cluster_config_change(self, event: Mapping[str, Any]) -> None:
        configs = self._configs_of(event)
        broker = event.get("broker")
        resource = "" if broker is None else str(int(broker))

        def generate(op: Operation) -> None:
            records = self.configuration_control.alter_broker(
                resource, configs, self.feature_control.elr_enabled
            )
            op.records.extend(records)
            if self.feature_control.elr_enabled:
                for r in records:
                    if r.fields["name"] == MIN_ISR:
                        op.records.append(rec.clear_elr(""))

        self._run(generate)

    def _on_feature_update(self, event: Mapping[str, Any]) -> None:
        features = event.get("features") or {}
        for name in features:
            if name != ELR_VERSION_KEY:
                raise KRaftRejection(f"feature_update: unknown feature {name!r}")
        if ELR_VERSION_KEY not in features:
            return
        level = int(features[ELR_VERSION_KEY])
        fc = self.feature_control
        cfg = self.configuration_control

        def generate(op: Operation) -> None:
            fc.validate_elr_level(level)
            if level >= 1:
                if not cfg.has_cluster_value(MIN_ISR):
                    op.records.append(
                        rec.config(
                            rec.RESOURCE_BROKER, "", MIN_ISR, str(self.settings.min_insync_replicas)
                        )
                    )
                for node in _timeline_hash_set_order(cfg.broker_resources_with(MIN_ISR)):
                    op.records.append(rec.config(rec.RESOURCE_BROKER, node, MIN_ISR, None))
            op.records.append(fc.level_record(level))

        self._run(generate)

    # -- failover (SPEC-KRAFT §18) -----------------------------------------------------
    def _on_controller_failover(self, event: Mapping[str, Any]) -> None:
        failed = [int(b) for b in (event.get("failed_brokers") or [])]
        for broker in failed:
            self.cluster_control.require_registered(broker, "controller_failover")
        self.controller_epoch += 1
        self._random = JavaRandom(self.controller_epoch)
        self.cluster_control.activate()
        controller = event.get("controller")
        if controller is not None:
            previous = self.configuration_control.active_controller
            self.configuration_control.active_controller = int(controller)
            self.replication_control.fail_over(previous, int(controller))
            if previous is not None and previous != int(controller):
                self.b2e_node_extra[previous] = {}  # rebuilt from the ELRs: nothing extra
        self._note(f"controller {controller} is active (controller count {self.controller_epoch})")
        for broker in failed:
            self._fence(broker)

    # -- persistence -------------------------------------------------------------------
    def dump(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "controller_epoch": self.controller_epoch,
            "next_offset": self.next_offset,
            "random_seed": self._random.seed,
            "elr_ever_disabled": self.elr_ever_disabled,
            "cluster_control": self.cluster_control.dump(),
            "configuration_control": self.configuration_control.dump(),
            "feature_control": self.feature_control.dump(),
            "replication_control": self.replication_control.dump(),
        }

    def soft_state(self) -> dict[str, Any]:
        """What a restart needs beyond the partitions and topic configs the state tables
        hold (`restore`): O(brokers + stale B2E entries), not O(partitions)."""
        configs = self.configuration_control.dump()
        configs["configs"] = [c for c in configs["configs"] if c[0] != rec.RESOURCE_TOPIC]
        return {
            "cluster": self.cluster,
            "controller_epoch": self.controller_epoch,
            "next_offset": self.next_offset,
            "random_seed": self._random.seed,
            "elr_ever_disabled": self.elr_ever_disabled,
            "cluster_control": self.cluster_control.dump(),
            "configuration_control": configs,
            "feature_control": self.feature_control.dump(),
            "b2e_extra": _dump_extra(self.b2e_extra),
            "b2e_node_extra": [
                [node, _dump_extra(self.b2e_node_extra.get(node, {}))]
                for node in sorted(self.replication_control.b2e_nodes)
            ],
        }

    @classmethod
    def restore(
        cls,
        settings: KRaftSettings,
        soft: Mapping[str, Any],
        topic_configs: Mapping[str, Mapping[str, str]],
        partitions: Iterable[tuple[str, int, PartitionRegistration]],
    ) -> QuorumController:
        """Continue from `soft_state()`, every topic's configs (topics without partitions
        included) and every partition's registration, as `load(dump())` would."""
        self = cls._load_soft(settings, soft)
        for topic, configs in topic_configs.items():
            if configs:
                self.configuration_control.configs[(rec.RESOURCE_TOPIC, topic)] = dict(configs)
        extra = _load_extra(soft["b2e_extra"])
        node_extra = {int(node): _load_extra(rows) for node, rows in soft.get("b2e_node_extra", [])}
        self.replication_control.restore(
            topic_configs, partitions, extra, node_extra, self.active_controller
        )
        self.b2e_extra = extra
        self.b2e_node_extra = node_extra
        return self

    @classmethod
    def _load_soft(cls, settings: KRaftSettings, data: Mapping[str, Any]) -> QuorumController:
        self = cls(settings, data.get("cluster", "default"))
        self.controller_epoch = data["controller_epoch"]
        self.next_offset = data["next_offset"]
        self._random = JavaRandom(0)
        self._random.seed = data["random_seed"]
        self.elr_ever_disabled = data["elr_ever_disabled"]
        self.cluster_control = ClusterControlManager.load(data["cluster_control"])
        self.configuration_control.load(data["configuration_control"])
        self.feature_control.load(data["feature_control"])
        self.replication_control = ReplicationControlManager(
            self.cluster_control, self.configuration_control, self.feature_control
        )
        return self

    @classmethod
    def load(cls, settings: KRaftSettings, data: Mapping[str, Any]) -> QuorumController:
        self = cls._load_soft(settings, data)
        self.replication_control.load(data["replication_control"], self.active_controller)
        rc = self.replication_control
        for index in rc.b2e_indexes():
            for broker, topics in index.items():
                for topic, pids in topics.items():
                    self._refresh_b2e_extra((broker, topic), pids)
        return self


def _refresh_extra(
    rc: ReplicationControlManager,
    index: Mapping[int, Mapping[str, list[int]]],
    extras: dict[tuple[int, str], dict[int, int]],
    pair: tuple[int, str],
    touched: Iterable[int],
) -> None:
    """`extras[pair]` := the entries of `index` for (broker, topic) its partitions' ELRs
    do not give, over the partitions listed there before or now, or `touched`."""
    broker, topic = pair
    counts: dict[int, int] = {}
    for pid in index.get(broker, {}).get(topic, ()):
        counts[pid] = counts.get(pid, 0) + 1
    old = extras.get(pair, {})
    parts = rc.topics.get(topic, {})
    extra = {}
    for pid in sorted(counts.keys() | old.keys() | set(touched)):
        p = parts.get(pid)
        difference = counts.get(pid, 0) - (1 if p is not None and broker in p.elr else 0)
        if difference:
            extra[pid] = difference
    if extra:
        extras[pair] = extra
    else:
        extras.pop(pair, None)


def _dump_extra(extras: Mapping[tuple[int, str], Mapping[int, int]]) -> list[list[Any]]:
    return [
        [broker, topic, [[pid, n] for pid, n in sorted(extra.items())]]
        for (broker, topic), extra in sorted(extras.items())
    ]


def _load_extra(rows: Iterable[Any]) -> dict[tuple[int, str], dict[int, int]]:
    return {
        (int(broker), str(topic)): {int(pid): int(n) for pid, n in pairs}
        for broker, topic, pairs in rows
    }


def _as_mapping(value: Any) -> Mapping[str, Any]:
    """A stored partition state given as a dataclass (the parsed event) rather than JSON."""
    return {name: getattr(value, name) for name in getattr(value, "__slots__", ())} or dict(value)


def _assignment(value: Any) -> dict[int, list[int]] | None:
    if value is None:
        return None
    return {int(k): [int(b) for b in v] for k, v in value.items()}


def _timeline_hash_set_order(nodes: Iterable[str]) -> list[str]:
    """[kcsim] The order of Kafka's TimelineHashSet of broker ids is not reproduced (§22.3:
    compare as a set); ascending node id."""
    return sorted(nodes, key=lambda n: int(n) if n.lstrip("-").isdigit() else 0)


_HANDLERS: dict[str, Callable[[QuorumController, Mapping[str, Any]], None]] = {
    "broker_registration": QuorumController._on_broker_registration,
    "broker_startup": QuorumController._on_broker_startup,
    "broker_unfence": QuorumController._on_broker_unfence,
    "broker_failure": QuorumController._on_broker_failure,
    "controlled_shutdown": QuorumController._on_controlled_shutdown,
    "broker_unregistration": QuorumController._on_broker_unregistration,
    "topic_creation": QuorumController._on_topic_creation,
    "partition_creation": QuorumController._on_partition_creation,
    "topic_deletion": QuorumController._on_topic_deletion,
    "stop_replica_response": QuorumController._on_stop_replica_response,
    "partition_reassignment": QuorumController._on_partition_reassignment,
    "isr_change": QuorumController._on_isr_change,
    "leader_election": QuorumController._on_leader_election,
    "auto_rebalance_check": QuorumController._on_auto_rebalance_check,
    "unclean_election_check": QuorumController._on_unclean_election_check,
    "topic_config_change": QuorumController._on_topic_config_change,
    "cluster_config_change": QuorumController._on_cluster_config_change,
    "feature_update": QuorumController._on_feature_update,
    "controller_failover": QuorumController._on_controller_failover,
}


_new_tuple = tuple.__new__
