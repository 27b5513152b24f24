"""One KRaft cluster behind the shared front door (`controller.simulator`): the KRaft engine
(`controller.kraft.QuorumController`) fed one parsed event at a time, and each `Outcome`
turned into the CONTRACT §2/§5 table rows.

What the tables hold under `kraft` (CONTRACT §5):

* `partition_state`, `brokers`, `topics`: the engine's views of what the event changed
  (an unregistered broker has no row). `controller_epoch` of a partition is kcsim's count
  of active controllers when the partition last changed. `replica_state`,
  `controller_requests` and `request_payloads`: no rows.
* `metadata_records`: one row per record, `record_seq` in the engine's append order,
  `record` the record's fields as compact JSON text.
* `state_changes`: partition rows only; `event_results`: the engine's answers.
* `health`: the ZooKeeper engine's vital signs counted from the KRaft state, kept per
  partition so that an event costs the partitions it touched; `requests` is 0.
* `violations`: SPEC-KRAFT §21's invariants on the partitions and brokers an event touched.
* `divergences`: leader, epochs, ISR, replicas, ELR, last known ELR, recovery state and
  broker status against `observed`; never `controller_epoch` (SPEC-KRAFT §23.7).
* `clusters`: `engine` "kraft" and, as JSON text in `kraft_state`, the engine's state
  that the other tables do not hold (`QuorumController.soft_state()`: registrations,
  broker configs, features, counters, B2E's stale entries): a restart rebuilds the
  partitions from `partition_state` and topic configs from `topics`, so the row costs
  O(brokers), not O(partitions), each time a batch rewrites it; `cluster_configs` the
  cluster-level dynamic configs the records set.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any, NamedTuple, cast

import orjson

from controller import divergence, invariants
from controller.config import MIN_ISR_KEY, Settings
from controller.divergence import Divergence, as_json
from controller.events import Event, ObservedBroker, ObservedPartition
from controller.health import HealthCounts
from controller.invariants import OBSERVED, SIMULATED, SeenEpochs, Violation
from controller.kraft import (
    KRaftRejection,
    KRaftSettings,
    Outcome,
    PartitionView,
    QuorumController,
)
from controller.kraft.cluster_control_manager import BrokerRegistration
from controller.kraft.partition_registration import (
    LRS_RECOVERED,
    LRS_RECOVERING,
    PartitionRegistration,
)
from controller.model import TopicPartition
from controller.topic_configs import TOPIC_CONFIGS, TopicConfigError, parse_value

Row = dict[str, Any]
Key = tuple[str, int]

ENGINE = "kraft"
ONLINE = "OnlinePartition"
OFFLINE = "OfflinePartition"
LIVE = "live"
FENCED = "fenced"
RECOVERED = "RECOVERED"
RECOVERING = "RECOVERING"
_BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER in a ConfigRecord
_MIN_ISR_CONFIG = TOPIC_CONFIGS[MIN_ISR_KEY]
# the tables a KRaft cluster appends to (the others get no rows from it)
APPENDS = (
    "metadata_records",
    "state_changes",
    "event_results",
    "applied_events",
    "divergences",
    "violations",
    "health",
)
# the state tables a KRaft cluster writes rows of (replica_state: none under kraft)
STATE_ROW_TABLES = frozenset({"partition_state", "brokers", "topics", "clusters"})

# SPEC-KRAFT §21's invariants kcsim checks beyond the shared ones (`invariants`)
ELR_DISJOINT_FROM_ISR = "elr_disjoint_from_isr"
NO_DUPLICATES = "replicas_isr_elr_without_duplicates"
LEADER_REGISTERED_UNFENCED = "leader_registered_and_unfenced"
EMPTY_ISR_NO_LEADER = "empty_isr_has_no_leader"
RECOVERING_ISR_AT_MOST_ONE = "recovering_isr_at_most_one"
REASSIGNMENT_SETS = "adding_removing_within_replicas"
BROKER_EPOCH_GROWS = "broker_epoch_grows"


def kraft_settings(settings: Settings) -> KRaftSettings:
    return KRaftSettings.from_properties(settings.as_properties())


def event_object(event: Event) -> dict[str, Any]:
    """The JSON object of a parsed event as the engine takes it: the type and every field
    the event gave (values as parsing normalized them: configs as strings)."""
    body = event.body
    obj: dict[str, Any] = {"type": event.header.type}
    for name, default in _field_defaults(type(body)):  # type: ignore[arg-type]
        value = getattr(body, name)
        if value is None or (default is not MISSING and value == default):
            continue
        obj[name] = value if type(value) in _SCALARS else _plain(value)
    return obj


_SCALARS = frozenset((int, str, bool, float))


@cache
def _field_defaults(kind: type) -> tuple[tuple[str, Any], ...]:
    """An event body class's fields and defaults (read once per class, not per event)."""
    return tuple((spec.name, spec.default) for spec in fields(kind))


def _plain(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    if isinstance(value, TopicPartition):
        return {"topic": value.topic, "partition": value.partition}
    if isinstance(value, tuple | list):  # (an ISR's members: scalars, taken as they are)
        return [v if type(v) in _SCALARS else _plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value


def record_text(record_fields: Mapping[str, Any]) -> str:
    """A record's fields as `metadata_records.record`: compact JSON, in the record's own
    field order (the schema's, as Kafka's decoder prints them).

    orjson writes what `json.dumps(..., ensure_ascii=False, separators=(",", ":"))` writes
    for the values records hold (strings, ints, booleans, null, lists, objects with string
    keys; no record the engine writes has a float) at a tenth of the cost: a kraft roll
    writes a record per partition per ISR change. What orjson refuses (a key that is not
    a string, an int beyond 64 bits, a lone surrogate) goes through `json`."""
    try:
        return orjson.dumps(record_fields).decode()
    except TypeError:
        return json.dumps(record_fields, ensure_ascii=False, separators=(",", ":"))


class Vitals(NamedTuple):
    """One partition's part of the health counters and what its next state is checked
    against."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    offline: int
    under_replicated: int
    at_min_isr: int
    not_preferred: int
    preferred: int  # -1: none
    preferred_not_leading: int


class Written(NamedTuple):
    """What partition_state says of the event that last changed a partition."""

    event_id: str | None
    controller_epoch: int


class KRaftClusterRunner:
    """Ordering and duplicate checks are the simulator's; this applies an event that
    passed them and keeps its rows until `drain`."""

    def __init__(
        self,
        cluster: str,
        settings: Settings,
        controller: QuorumController | None = None,
        stored: Mapping[str, list[Mapping[str, Any]]] | None = None,
        checks: bool = True,
        state_changes: bool = True,
    ) -> None:
        """`checks=False`: no health or violations rows, the vitals not counted;
        `state_changes=False`: no state_changes rows (`Simulator`'s)."""
        self.cluster = cluster
        self.checks = checks
        self.state_changes = state_changes
        self.settings = settings
        self.controller = controller or QuorumController(kraft_settings(settings), cluster)
        self.last_seq: int | None = None
        self.last_event_id: str | None = None
        self.seen_event_ids: set[str] = set()
        self._rows: dict[str, list[Row]] = {name: [] for name in APPENDS}
        self._held = 0
        self._dirty_partitions: set[Key] = set()
        self._dirty_brokers: set[int] = set()
        self._dirty_topics: set[str] = set()
        self._written: dict[Key, Written] = {}
        self._cluster_configs: dict[str, str] = {}
        self._cluster_row: Row | None = None
        # health
        self.unclean_elections = 0
        self.elr_elections = 0
        self.last_known_leader_elections = 0
        self._vitals: dict[Key, Vitals] = {}
        self._topic_partitions: dict[str, set[int]] = {}
        self._min_isr: dict[str, int] = {}
        self._counts = HealthCounts()
        self._live: set[int] = set()  # brokers whose status is `live`
        self._broker_epochs: dict[int, int] = {}
        self._controller_epoch = self.controller.controller_epoch
        self._observed: dict[Key, SeenEpochs] = {}
        if stored is not None:
            self._restore(stored)
        self._count_all()

    # ---- restart -------------------------------------------------------------------------

    @classmethod
    def from_rows(
        cls,
        cluster: str,
        settings: Settings,
        tables: Mapping[str, list[Mapping[str, Any]]],
        checks: bool = True,
        state_changes: bool = True,
    ) -> KRaftClusterRunner:
        """A cluster continued from its stored rows (`tables` holds this cluster's only):
        the engine's partitions from `partition_state`, topic configs from `topics`, the
        rest of its state from the clusters row's `kraft_state` (`soft_state`; a full
        `dump()` written by an older kcsim is read too)."""
        (row,) = tables["clusters"]
        state = row.get("kraft_state")
        controller = None
        if state is not None:
            data = json.loads(state)
            if "replication_control" in data:
                controller = QuorumController.load(kraft_settings(settings), data)
            else:
                controller = QuorumController.restore(
                    kraft_settings(settings),
                    data,
                    {t["topic"]: t.get("configs") or {} for t in tables.get("topics", ())},
                    (
                        (r["topic"], r["partition"], registration_of(r))
                        for r in tables.get("partition_state", ())
                    ),
                )
        runner = cls(cluster, settings, controller, tables, checks, state_changes)
        runner._cluster_row = runner.cluster_row()
        return runner

    def _restore(self, tables: Mapping[str, list[Mapping[str, Any]]]) -> None:
        for row in tables.get("clusters", ()):
            self._cluster_configs = dict(row.get("cluster_configs") or {})
        for row in tables.get("partition_state", ()):
            self._written[(row["topic"], row["partition"])] = Written(
                row["last_event_id"], row["controller_epoch"] or 1
            )
        for row in tables.get("brokers", ()):
            self._broker_epochs[row["broker"]] = row["broker_epoch"]
        last: Mapping[str, Any] | None = None
        for row in tables.get("health", ()):
            if last is None or row["seq"] > last["seq"]:
                last = row
        if last is not None:
            self.unclean_elections = last.get("unclean_elections") or 0
            self.elr_elections = last.get("elr_elections") or 0
            self.last_known_leader_elections = last.get("last_known_leader_elections") or 0
        applied = [(r["seq"], r["event_id"]) for r in tables.get("applied_events", ())]
        self.seen_event_ids.update(event_id for _, event_id in applied)
        if applied:
            self.last_seq, self.last_event_id = max(applied)

    # ---- one event -----------------------------------------------------------------------

    def apply(self, event: Event, event_id: str, seq: int) -> str | None:
        """Apply an event that passed the order checks; the reason when the engine rejects
        it (nothing changed then)."""
        header = event.header
        try:
            outcome = self.controller.apply(event_object(event))
        except KRaftRejection as rejection:
            return str(rejection)
        ts = header.ts
        cluster = self.cluster
        self._take_records(outcome, event_id, seq, ts)
        written = Written(event_id, self.controller.controller_epoch)  # (one for all of them)
        written_of = self._written
        topic_partitions = self._topic_partitions
        for key in outcome.changed_partitions:
            written_of[key] = written
            numbers = topic_partitions.get(key[0])
            if numbers is None:
                topic_partitions[key[0]] = {key[1]}
            else:
                numbers.add(key[1])
        for key in outcome.removed_partitions:
            self._written.pop(key, None)
            numbers = self._topic_partitions.get(key[0])
            if numbers is not None:
                numbers.discard(key[1])
                if not numbers:
                    del self._topic_partitions[key[0]]
        self._dirty_partitions.update(outcome.changed_partitions)
        if outcome.removed_partitions:  # (most events remove nothing, touch no broker or topic)
            self._dirty_partitions.update(outcome.removed_partitions)
        if outcome.changed_brokers or outcome.removed_brokers:
            self._dirty_brokers.update(outcome.changed_brokers)
            self._dirty_brokers.update(outcome.removed_brokers)
        if outcome.changed_topics or outcome.removed_topics:
            self._dirty_topics.update(outcome.changed_topics)
            self._dirty_topics.update(outcome.removed_topics)
        rows = self._rows
        for change in outcome.changes if self.state_changes else ():
            rows["state_changes"].append(
                {
                    "cluster": cluster,
                    "event_id": event_id,
                    "seq": seq,
                    "entity": "partition",
                    "topic": change.topic,
                    "partition": change.partition,
                    "broker": None,
                    "from_state": change.from_state,
                    "to_state": change.to_state,
                    "ok": True,
                    "error": None,
                    "leader": change.leader,
                    "leader_epoch": change.leader_epoch,
                    "isr": list(change.isr),
                    "unclean": change.unclean,
                    "ts": ts,
                }
            )
        for result in outcome.results:
            rows["event_results"].append(
                {
                    "cluster": cluster,
                    "event_id": event_id,
                    "seq": seq,
                    "topic": result.topic,
                    "partition": result.partition,
                    "error": result.error,
                    "message": result.message,
                    "leader": result.leader,
                    "leader_epoch": result.leader_epoch,
                    "isr": None if result.isr is None else list(result.isr),
                    "partition_epoch": result.partition_epoch,
                    "ts": ts,
                }
            )
        self.unclean_elections += outcome.unclean_elections
        self.elr_elections += outcome.elr_elections
        self.last_known_leader_elections += outcome.last_known_leader_elections
        if self.checks:
            found: list[Violation] = []
            leader_changes = self._track(outcome, found)
            self._check_brokers(outcome, found)
            if header.observed is not None:
                self._check_observed(header.observed, found)
            if found:
                rows["violations"].extend(invariants.rows(cluster, event_id, seq, ts, found))
            rows["health"].append(self._health_row(event_id, seq, ts, leader_changes))
        rows["applied_events"].append(
            {"cluster": cluster, "event_id": event_id, "seq": seq, "type": header.type, "ts": ts}
        )
        if header.observed is not None or header.observed_brokers is not None:
            body = event.body
            found_divergences = self.compare(
                header.observed or (),
                header.observed_brokers or (),
                getattr(body, "topic", None),
                getattr(body, "partition", None),
                header.observed is not None,
            )
            rows["divergences"].extend(
                divergence.rows(cluster, event_id, seq, ts, found_divergences)
            )
        self.last_seq = seq
        self.last_event_id = event_id
        self.seen_event_ids.add(event_id)
        self._held += len(outcome.records) + len(outcome.changes) + len(outcome.results) + 2
        return None

    def _take_records(self, outcome: Outcome, event_id: str, seq: int, ts: int | None) -> None:
        out = self._rows["metadata_records"]
        cluster = self.cluster
        configs_changed = False
        for index, record in enumerate(outcome.records):
            record_fields = record.fields
            out.append(
                {
                    "cluster": cluster,
                    "event_id": event_id,
                    "seq": seq,
                    "record_seq": index,
                    "type": record.type,
                    "record": record_text(record_fields),
                    "ts": ts,
                }
            )
            if (
                record.type == "ConfigRecord"
                and record_fields.get("resourceType") == _BROKER_RESOURCE
                and record_fields.get("resourceName") == ""
            ):
                name = record_fields["name"]
                value = record_fields.get("value")
                if value is None:
                    self._cluster_configs.pop(name, None)
                else:
                    self._cluster_configs[name] = value
                configs_changed |= name == MIN_ISR_KEY
        if configs_changed:  # every topic's at_min_isr again
            self._dirty_topics.update(self._topic_partitions)
            if self.checks:
                self._recount_topics(self._topic_partitions)

    def held(self) -> int:
        """Rows held since the last drain (the simulator's `max_output` measure)."""
        return self._held

    # ---- health and invariants -----------------------------------------------------------

    def _cluster_min_isr(self) -> int:
        return _min_isr(self._cluster_configs, self.settings.min_insync_replicas)

    def _count_all(self) -> None:
        """Every partition indexed by its topic (a change of the cluster's min ISR names
        them) and, with checks, its vital signs counted."""
        self._live = {b.broker for b in self.controller.brokers() if b.status == LIVE}
        default = self._cluster_min_isr()
        self._min_isr = {t.topic: _min_isr(t.configs, default) for t in self.controller.topics()}
        for view in self.controller.partitions():
            self._topic_partitions.setdefault(view.topic, set()).add(view.partition)
            if self.checks:
                self._set_vitals((view.topic, view.partition), self._vitals_of(view))

    def _recount_topics(self, topics: Iterable[str]) -> None:
        default = self._cluster_min_isr()
        views = {t.topic: t for t in self.controller.topics()}
        for topic in list(topics):
            view = views.get(topic)
            if view is None:
                self._min_isr.pop(topic, None)
                continue
            self._min_isr[topic] = _min_isr(view.configs, default)
            for number in self._topic_partitions.get(topic, ()):
                partition = self.controller.partition(topic, number)
                if partition is not None:
                    self._set_vitals((topic, number), self._vitals_of(partition))

    def _vitals_of(self, view: PartitionView) -> Vitals:
        leader = view.leader
        replicas = view.replicas
        size = len(view.isr)
        preferred = replicas[0] if replicas else -1
        min_isr = self._min_isr.get(view.topic)
        if min_isr is None:  # (the default only when needed: this runs per changed partition)
            min_isr = self._cluster_min_isr()
        return Vitals(
            leader,
            view.leader_epoch,
            view.partition_epoch,
            1 if leader < 0 else 0,
            1 if size < len(replicas) else 0,
            1 if size <= min_isr else 0,
            1 if leader >= 0 and replicas and leader != replicas[0] else 0,
            preferred,
            1 if preferred >= 0 and leader != preferred else 0,
        )

    def _set_vitals(self, key: Key, new: Vitals | None) -> Vitals | None:
        old = self._vitals.pop(key, None)
        if new is not None:
            self._vitals[key] = new
        if old is not None and new is not None and old[3:] == new[3:]:
            return old  # the same counts: nothing to move
        if old is not None:
            if new is not None:
                self._counts.move(old, new)
            else:
                self._counts.count(old, -1)
        elif new is not None:
            self._counts.count(new, 1)
        return old

    def _track(self, outcome: Outcome, found: list[Violation]) -> int:
        """Count the event's partitions anew and check them: the leader changes (a new
        partition with a leader is one, as under zk)."""
        fresh = {key for key in outcome.changed_partitions if key not in self._vitals}
        if outcome.changed_topics or outcome.removed_topics:
            self._recount_topics((*outcome.changed_topics, *outcome.removed_topics))
        leader_changes = 0
        for key in outcome.removed_partitions:
            self._set_vitals(key, None)
        brokers = self.controller.cluster_control.registrations
        for key in outcome.changed_partitions:
            view = self.controller.partition(*key)
            if view is None:
                continue
            new = self._vitals_of(view)
            old = self._set_vitals(key, new)
            if key in fresh:  # the topic's recount may have counted it already
                old = None
            if old is None:
                leader_changes += new.leader >= 0
            else:
                leader_changes += old.leader != new.leader
            self._check_partition(view, old, brokers, found)
        return leader_changes

    def _check_partition(
        self,
        view: PartitionView,
        old: Vitals | None,
        brokers: Mapping[int, BrokerRegistration],
        found: list[Violation],
    ) -> None:
        topic, number = view.topic, view.partition
        invariants.check_partition(
            SIMULATED,
            topic,
            number,
            _epochs(old),
            view.leader,
            view.leader_epoch,
            view.partition_epoch,
            None,
            view.isr,
            view.replicas,
            view.leader >= 0,
            found,
        )
        _check_kraft_fields(
            SIMULATED,
            topic,
            number,
            view.isr,
            view.elr,
            view.replicas,
            view.leader_recovery_state,
            found,
        )
        if view.leader >= 0:
            broker = brokers.get(view.leader)
            if broker is None or broker.fenced:
                state = "not registered" if broker is None else "fenced"
                found.append(
                    Violation(
                        SIMULATED,
                        LEADER_REGISTERED_UNFENCED,
                        topic,
                        number,
                        view.leader,
                        f"leader {view.leader} is {state}",
                    )
                )
        # SPEC-KRAFT's V8 also asks adding ∩ removing = ∅, which Kafka 4.1.1 itself breaks:
        # a new target that drops a replica an ongoing reassignment is adding writes only
        # `removingReplicas` (its `adding` is empty, so left out: the old one stays, as
        # `changePartitionReassignment` builds it; the oracle agrees). Not a violation.
        adding, removing, replicas = view.adding_replicas, view.removing_replicas, view.replicas
        if (
            not set(adding) <= set(replicas)
            or not set(removing) <= set(replicas)
            or list(adding) != sorted(adding)
            or list(removing) != sorted(removing)
        ):
            found.append(
                Violation(
                    SIMULATED,
                    REASSIGNMENT_SETS,
                    topic,
                    number,
                    None,
                    f"adding {list(adding)}, removing {list(removing)}, replicas {list(replicas)}",
                )
            )

    def _check_brokers(self, outcome: Outcome, found: list[Violation]) -> None:
        for broker in outcome.removed_brokers:
            self._live.discard(broker)
        for broker in outcome.changed_brokers:
            view = self.controller.broker(broker)
            if view is None:
                self._live.discard(broker)
                continue
            if view.status == LIVE:
                self._live.add(broker)
            else:
                self._live.discard(broker)
            before = self._broker_epochs.get(broker)
            if before is not None and view.broker_epoch < before:
                found.append(
                    Violation(
                        SIMULATED,
                        BROKER_EPOCH_GROWS,
                        None,
                        None,
                        broker,
                        f"broker epoch went from {before} to {view.broker_epoch}",
                    )
                )
            self._broker_epochs[broker] = view.broker_epoch
        epoch = self.controller.controller_epoch
        if epoch < self._controller_epoch:
            found.append(
                Violation(
                    SIMULATED,
                    invariants.CONTROLLER_EPOCH_NEVER_DECREASES,
                    None,
                    None,
                    None,
                    f"controller_epoch went from {self._controller_epoch} to {epoch}",
                )
            )
        self._controller_epoch = epoch

    def _check_observed(
        self, observed: Iterable[ObservedPartition], found: list[Violation]
    ) -> None:
        for entry in observed:
            key = (entry.topic, entry.partition)
            invariants.check_partition(
                OBSERVED,
                entry.topic,
                entry.partition,
                self._observed.get(key),
                entry.leader,
                entry.leader_epoch,
                entry.partition_epoch,
                None,
                entry.isr,
                entry.replicas,
                entry.leader >= 0,
                found,
            )
            _check_kraft_fields(
                OBSERVED,
                entry.topic,
                entry.partition,
                entry.isr,
                entry.elr or (),
                entry.replicas,
                entry.leader_recovery_state,
                found,
            )
            self._observed[key] = SeenEpochs(
                entry.leader, entry.leader_epoch, entry.partition_epoch, None
            )

    def _health_row(self, event_id: str, seq: int, ts: int | None, leader_changes: int) -> Row:
        counts = self._counts
        return {
            "cluster": self.cluster,
            "event_id": event_id,
            "seq": seq,
            "ts": ts,
            "partitions": len(self._vitals),
            "offline": counts.offline,
            "under_replicated": counts.under_replicated,
            "at_min_isr": counts.at_min_isr,
            "not_preferred": counts.not_preferred,
            "max_broker_imbalance": counts.max_broker_imbalance,
            "live_brokers": len(self._live),
            "unclean_elections": self.unclean_elections,
            "leader_changes": leader_changes,
            "requests": 0,  # a KRaft controller sends no requests: brokers read the log
            "elr_elections": self.elr_elections,
            "last_known_leader_elections": self.last_known_leader_elections,
        }

    # ---- divergences ---------------------------------------------------------------------

    def compare(
        self,
        observed: tuple[ObservedPartition, ...],
        brokers: tuple[ObservedBroker, ...],
        topic: str | None,
        partition: int | None,
        has_partitions: bool,
    ) -> list[Divergence]:
        """As `controller.divergence.compare` (the same scope rule), with KRaft's fields
        and broker statuses; `controller_epoch` is never compared."""
        found: list[Divergence] = []
        for entry in observed:
            found.extend(self._compare_partition(entry))
        numbers = None if topic is None else self._topic_partitions.get(topic)
        if has_partitions and numbers and (not observed or any(e.topic == topic for e in observed)):
            listed = {e.partition for e in observed if e.topic == topic}
            scope = set(numbers) if partition is None else {partition} & numbers
            for number in sorted(scope - listed):
                view = self.controller.partition(topic, number)  # type: ignore[arg-type]
                if view is not None:
                    found.append(
                        Divergence(topic, number, "partition", None, as_json(_values(view)))
                    )
        for seen in brokers:
            mine = self.controller.broker(seen.broker)
            status = None if mine is None else mine.status
            if status != seen.status:
                found.append(
                    Divergence(
                        None,
                        None,
                        "broker",
                        as_json({"broker": seen.broker, "status": seen.status}),
                        None
                        if mine is None
                        else as_json({"broker": seen.broker, "status": status}),
                    )
                )
        return found

    def _compare_partition(self, entry: ObservedPartition) -> Iterator[Divergence]:
        view = self.controller.partition(entry.topic, entry.partition)
        if view is None:
            seen = {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in entry._asdict().items()
                if v is not None
            }
            yield Divergence(entry.topic, entry.partition, "partition", as_json(seen), None)
            return
        pairs: list[tuple[str, Any, Any, bool]] = [
            ("leader", entry.leader, view.leader, False),
            ("leader_epoch", entry.leader_epoch, view.leader_epoch, False),
            ("isr", entry.isr, view.isr, True),
            ("partition_epoch", entry.partition_epoch, view.partition_epoch, False),
            ("replicas", entry.replicas, view.replicas, False),
            ("elr", entry.elr, view.elr, True),  # Java HashSet order: a set (§23.7)
            ("last_known_elr", entry.last_known_elr, view.last_known_elr, True),
            (
                "leader_recovery_state",
                entry.leader_recovery_state,
                view.leader_recovery_state,
                False,
            ),
        ]
        for name, seen, mine, as_set in pairs:
            if seen is None:
                continue
            differs = set(seen) != set(mine) if as_set else _plain(seen) != _plain(mine)
            if differs:
                yield Divergence(
                    entry.topic, entry.partition, name, as_json(_plain(seen)), as_json(_plain(mine))
                )

    # ---- output --------------------------------------------------------------------------

    def drain(self, output: Any, state_rows: Collection[str] = STATE_ROW_TABLES) -> None:
        """Move the held rows to `output` (a simulator BatchOutput) and the upserts and
        deletes, since the last drain, of the state tables named in `state_rows`."""
        for name, rows in self._rows.items():
            output.appends[name].extend(rows)
            self._rows[name] = []
        self._held = 0
        cluster = self.cluster
        if "partition_state" in state_rows:
            registration = self.controller.registration
            for key in sorted(self._dirty_partitions):
                p = registration(*key)
                if p is None:
                    output.deletes["partition_state"].append(
                        {"cluster": cluster, "topic": key[0], "partition": key[1]}
                    )
                else:
                    output.upserts["partition_state"].append(self.registration_row(key, p))
        if "brokers" in state_rows:
            for broker in sorted(self._dirty_brokers):
                broker_view = self.controller.broker(broker)
                if broker_view is None:
                    output.deletes["brokers"].append({"cluster": cluster, "broker": broker})
                else:
                    output.upserts["brokers"].append(self._broker_row(broker_view))
        if "topics" in state_rows and self._dirty_topics:
            topics = {t.topic: t for t in self.controller.topics()}
            for name in sorted(self._dirty_topics):
                topic_view = topics.get(name)
                if topic_view is None:
                    output.deletes["topics"].append({"cluster": cluster, "topic": name})
                else:
                    output.upserts["topics"].append(
                        self._topic_row(topic_view.topic, topic_view.configs)
                    )
        self._dirty_partitions.clear()
        self._dirty_brokers.clear()
        self._dirty_topics.clear()
        if "clusters" in state_rows:  # (the controller's whole state, dumped: only if asked)
            row = self.cluster_row()
            if row != self._cluster_row:
                output.upserts["clusters"].append(row)
                self._cluster_row = row

    def registration_row(self, key: Key, p: PartitionRegistration) -> Row:
        """A partition's partition_state row, from the engine's registration (no view
        between: a row per partition every batch changes)."""
        written = self._written.get(key)
        return {
            "cluster": self.cluster,
            "topic": key[0],
            "partition": key[1],
            "state": ONLINE if p.leader >= 0 else OFFLINE,
            "leader": p.leader,
            "leader_epoch": p.leader_epoch,
            "isr": list(p.isr),
            "partition_epoch": p.partition_epoch,
            "leader_recovery_state": RECOVERING
            if p.leader_recovery_state == LRS_RECOVERING
            else RECOVERED,
            "controller_epoch": 1 if written is None else written.controller_epoch,
            "replicas": list(p.replicas),
            "adding_replicas": list(p.adding),
            "removing_replicas": list(p.removing),
            "last_event_id": None if written is None else written.event_id,
            "elr": list(p.elr),
            "last_known_elr": list(p.lke),
        }

    def _broker_row(self, view: Any) -> Row:
        return {
            "cluster": self.cluster,
            "broker": view.broker,
            "rack": view.rack,
            "status": view.status,
            "broker_epoch": view.broker_epoch,
        }

    def _topic_row(self, topic: str, configs: Mapping[str, str]) -> Row:
        return {"cluster": self.cluster, "topic": topic, "configs": dict(configs), "deletion": None}

    def cluster_row(self) -> Row:
        controller = self.controller
        return {
            "cluster": self.cluster,
            "controller_epoch": controller.controller_epoch,
            "controller": controller.active_controller,
            "ineligible_deleted_topics": [],
            "stale_reassignments": [],
            "restamped_partitions": [],
            "cluster_configs": dict(self._cluster_configs),
            "engine": ENGINE,
            "kraft_state": json.dumps(
                controller.soft_state(), ensure_ascii=False, separators=(",", ":"), sort_keys=True
            ),
        }

    def table_rows(self, table: str) -> Iterator[Row]:
        """Every current row of a state table."""
        if table == "partition_state":
            topics = self.controller.replication_control.topics
            return (
                self.registration_row((topic, pid), parts[pid])
                for topic, parts in sorted(topics.items())
                for pid in sorted(parts)
            )
        if table == "brokers":
            return (self._broker_row(b) for b in sorted(self.controller.brokers(), key=_broker))
        if table == "topics":
            return (
                self._topic_row(t.topic, t.configs)
                for t in sorted(self.controller.topics(), key=lambda t: t.topic)
            )
        if table == "clusters":
            return iter([self.cluster_row()])
        return iter(())


def registration_of(row: Mapping[str, Any]) -> PartitionRegistration:
    """A partition_state row as the engine's registration (a restart's load)."""
    lrs = LRS_RECOVERING if row.get("leader_recovery_state") == RECOVERING else LRS_RECOVERED
    return PartitionRegistration(
        tuple(row["replicas"]),
        tuple(row["isr"]),
        tuple(row.get("removing_replicas") or ()),
        tuple(row.get("adding_replicas") or ()),
        row["leader"],
        lrs,
        row["leader_epoch"],
        row["partition_epoch"],
        tuple(row.get("elr") or ()),
        tuple(row.get("last_known_elr") or ()),
    )


def _broker(view: Any) -> int:
    return int(view.broker)


def _values(view: PartitionView) -> Row:
    """A partition's values as `observed` names them (no controller_epoch under kraft)."""
    return {
        "topic": view.topic,
        "partition": view.partition,
        "leader": view.leader,
        "leader_epoch": view.leader_epoch,
        "isr": list(view.isr),
        "partition_epoch": view.partition_epoch,
        "replicas": list(view.replicas),
        "elr": list(view.elr),
        "last_known_elr": list(view.last_known_elr),
        "leader_recovery_state": view.leader_recovery_state,
    }


def _epochs(vitals: Vitals | None) -> SeenEpochs | None:
    if vitals is None:
        return None
    return SeenEpochs(vitals.leader, vitals.leader_epoch, vitals.partition_epoch, None)


def _check_kraft_fields(
    source: str,
    topic: str,
    partition: int,
    isr: tuple[int, ...],
    elr: tuple[int, ...],
    replicas: tuple[int, ...] | None,
    recovery: str | None,
    found: list[Violation],
) -> None:
    """SPEC-KRAFT §21 V2 (no duplicates), V3 (ELR ∩ ISR = ∅), V6 (RECOVERING ⇒ |ISR| ≤ 1)."""
    for name, values in (("replicas", replicas or ()), ("isr", isr), ("elr", elr)):
        if len(set(values)) != len(values):
            found.append(
                Violation(
                    source,
                    NO_DUPLICATES,
                    topic,
                    partition,
                    None,
                    f"{name} {list(values)} repeats a broker",
                )
            )
    both = sorted(set(isr) & set(elr))
    if both:
        found.append(
            Violation(
                source,
                ELR_DISJOINT_FROM_ISR,
                topic,
                partition,
                both[0],
                f"ELR {list(elr)} and ISR {list(isr)} share {both}",
            )
        )
    if recovery == RECOVERING and len(isr) > 1:
        found.append(
            Violation(
                source,
                RECOVERING_ISR_AT_MOST_ONE,
                topic,
                partition,
                None,
                f"RECOVERING with ISR {list(isr)}",
            )
        )


def _min_isr(configs: Mapping[str, str], default: int) -> int:
    text = configs.get(MIN_ISR_KEY)
    if text is None:
        return default
    try:
        return cast(int, parse_value(_MIN_ISR_CONFIG, text))  # an INT config's value
    except TopicConfigError:
        return default
