"""Hypothesis generators of controller events (CONTRACT §1), driven by the cluster's state.

A `ClusterView` is what the stored tables say about one cluster (brokers, topics,
partitions, replica states); each `*_event(view)` returns a strategy of event dicts that
mostly refer to things the cluster knows, and now and then to things it does not (an
unknown partition, a dead broker, a stale epoch), so that refusals are exercised too.
`EVENT_KINDS` maps every event type to its generator.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from controller.columns import Columns
from controller.snapshot import COLUMNAR_TABLES
from schemas import TABLES

Row = dict[str, Any]
Event = dict[str, Any]

MAX_BROKERS = 6  # broker ids 0..5
TOPIC_NAMES = ("t0", "t1", "t2", "t3")
UNCLEAN_KEY = "unclean.leader.election.enable"
STOP_REPLICA_ERRORS = ("KAFKA_STORAGE_ERROR", "UNKNOWN_SERVER_ERROR")


# ---- the cluster as the tables show it ---------------------------------------------------


# kinds that can only be drawn once the cluster has a topic
NEEDS_A_TOPIC = frozenset(
    {"partition_creation", "topic_deletion", "topic_config_change", "stop_replica_response"}
)


def key_of(table: str, row: Mapping[str, Any]) -> tuple:
    return tuple(row[c] for c in TABLES[table].key)


@dataclass
class Tables:
    """Keyed state tables kept from a stream of upserts and deletes, plus the append-only
    rows seen so far."""

    state: dict[str, dict[tuple, Row]] = field(default_factory=dict)
    appended: dict[str, list[Row]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, table in TABLES.items():
            if table.append_only:
                self.appended.setdefault(name, [])
            else:
                self.state.setdefault(name, {})

    def absorb(self, output: Any) -> None:
        """Apply one BatchOutput: deletes, then upserts (a batch never does both to a key)."""
        for name, rows in output.deletes.items():
            for row in rows:
                self.state[name].pop(key_of(name, row), None)
        for name, rows in output.upserts.items():
            for row in rows:
                self.state[name][key_of(name, row)] = json.loads(json.dumps(row))
        for name, rows in output.appends.items():
            self.appended[name].extend(json.loads(json.dumps(row)) for row in rows)

    def rows(self, table: str) -> list[Row]:
        return list(self.state[table].values())

    def for_restart(self) -> dict[str, list[Row] | Columns]:
        """What Simulator.from_tables reads: every state table, applied_events and health
        (the unclean elections count goes on from the last row). The tables a job's
        restore reads as columns (COLUMNAR_TABLES) come as Columns, as there."""
        tables: dict[str, list[Row] | Columns] = {
            name: [dict(r) for r in rows.values()] for name, rows in self.state.items()
        }
        tables["applied_events"] = [dict(r) for r in self.appended["applied_events"]]
        tables["health"] = [dict(r) for r in self.appended["health"]]
        for name in COLUMNAR_TABLES:
            tables[name] = Columns.of_rows(tables.get(name, ()), TABLES[name].column_names)
        return tables


@dataclass
class PartitionView:
    topic: str
    partition: int
    state: str
    leader: int
    leader_epoch: int | None
    isr: list[int]
    partition_epoch: int | None
    replicas: list[int]
    adding: list[int]
    removing: list[int]
    replica_states: dict[int, str]
    recovery: str | None = None


@dataclass
class ClusterView:
    brokers: dict[int, str]  # broker -> status
    broker_epochs: dict[int, int]
    racks: dict[int, str | None]
    topics: dict[str, str | None]  # topic -> deletion status
    partitions: dict[tuple[str, int], PartitionView]
    controller_epoch: int

    @classmethod
    def of(cls, tables: Tables, cluster: str = "default") -> ClusterView:
        def rows(name: str) -> list[Row]:
            return [r for r in tables.rows(name) if r["cluster"] == cluster]

        partitions: dict[tuple[str, int], PartitionView] = {}
        for r in rows("partition_state"):
            partitions[(r["topic"], r["partition"])] = PartitionView(
                r["topic"],
                r["partition"],
                r["state"],
                r["leader"],
                r["leader_epoch"],
                list(r["isr"] or []),
                r["partition_epoch"],
                list(r["replicas"]),
                list(r["adding_replicas"]),
                list(r["removing_replicas"]),
                {},
                r["leader_recovery_state"],
            )
        for r in rows("replica_state"):
            view = partitions.get((r["topic"], r["partition"]))
            if view is not None:
                view.replica_states[r["broker"]] = r["state"]
        epoch = max((r["controller_epoch"] for r in rows("clusters")), default=1)
        return cls(
            brokers={r["broker"]: r["status"] for r in rows("brokers")},
            broker_epochs={r["broker"]: r["broker_epoch"] for r in rows("brokers")},
            racks={r["broker"]: r["rack"] for r in rows("brokers")},
            topics={r["topic"]: r["deletion"] for r in rows("topics")},
            partitions=partitions,
            controller_epoch=epoch,
        )

    def known_brokers(self) -> list[int]:
        return sorted(self.brokers)

    def registered(self) -> list[int]:
        return sorted(b for b, s in self.brokers.items() if s != "dead")

    def live(self) -> list[int]:
        return sorted(b for b, s in self.brokers.items() if s == "live")

    def partition_keys(self) -> list[tuple[str, int]]:
        return sorted(self.partitions)


# ---- small building blocks ---------------------------------------------------------------


def distinct_brokers(
    pool: Iterable[int], min_size: int = 1, max_size: int = 3
) -> st.SearchStrategy:
    pool = sorted(set(pool))
    if len(pool) < min_size:
        return st.nothing()
    return st.lists(
        st.sampled_from(pool), min_size=min_size, max_size=min(max_size, len(pool)), unique=True
    )


def maybe(strategy: st.SearchStrategy, none_weight: int = 1) -> st.SearchStrategy:
    return st.one_of(*([st.none()] * none_weight), strategy)


def with_optional(event: Event, **optional: Any) -> Event:
    event.update({k: v for k, v in optional.items() if v is not None})
    return event


def partition_ref(view: ClusterView, unknown: bool = True) -> st.SearchStrategy:
    """(topic, partition) of an existing partition, or now and then an unknown one."""
    anything = st.tuples(st.sampled_from(TOPIC_NAMES), st.integers(0, 4))
    if not view.partitions:
        return anything
    known = st.sampled_from(view.partition_keys())
    return st.one_of(known, known, known, known, known, anything) if unknown else known


def config_value() -> st.SearchStrategy:
    return st.sampled_from([True, False, "true", "false", "TRUE", " false "])


# ---- one generator per event type --------------------------------------------------------


def broker_startup_event(view: ClusterView) -> st.SearchStrategy:
    # restart a known broker (a bounce if it is registered) or start a new id
    ids = st.integers(0, MAX_BROKERS - 1)
    any_rack = [r for r in view.racks.values() if r is not None]
    rack = st.sampled_from(["r1", "r2"]) if any_rack else st.none()
    one = st.builds(
        lambda b, r: with_optional({"type": "broker_startup", "broker": b}, rack=r), ids, rack
    )
    # several in one BrokerChange (§8.1): new and bounced ones mixed
    several = st.builds(
        lambda bs, r: with_optional({"type": "broker_startup", "brokers": bs}, rack=r),
        st.lists(ids, min_size=1, max_size=3, unique=True),
        rack,
    )
    return st.one_of(one, several)


def broker_failure_event(view: ClusterView) -> st.SearchStrategy:
    pool = view.registered() or view.known_brokers() or [0]
    one = st.sampled_from(pool).map(lambda b: {"type": "broker_failure", "broker": b})
    # lost together in one BrokerChange (a zone outage): one onBrokerFailure (§8.3)
    several = st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True).map(
        lambda bs: {"type": "broker_failure", "brokers": bs}
    )
    return st.one_of(one, several)


def controlled_shutdown_event(view: ClusterView) -> st.SearchStrategy:
    pool = view.registered() or view.known_brokers() or [0]

    def build(broker: int, epoch_kind: str) -> Event:
        event: Event = {"type": "controlled_shutdown", "broker": broker}
        current = view.broker_epochs.get(broker)
        if epoch_kind == "current" and current is not None:
            event["broker_epoch"] = current
        elif epoch_kind == "stale" and current is not None:
            event["broker_epoch"] = current - 1
        elif epoch_kind == "none":
            event["broker_epoch"] = -1
        return event

    return st.tuples(
        st.sampled_from(pool), st.sampled_from(["absent", "absent", "current", "stale", "none"])
    ).map(lambda args: build(*args))


def _assignment(
    view: ClusterView, first: int, count: int, rf: int, pool: list[int] | None = None
) -> st.SearchStrategy:
    pool = view.known_brokers() if pool is None else pool
    rf = min(rf, len(pool))
    if rf < 1:
        return st.nothing()
    # replica counts may differ between partitions: an explicit assignment is the topic
    # znode (CONTRACT §1), as real topics have after reassignments
    lists = st.lists(st.sampled_from(pool), min_size=1, max_size=rf, unique=True)
    return st.lists(lists, min_size=count, max_size=count).map(
        lambda rs: {str(first + i): r for i, r in enumerate(rs)}
    )


def topic_creation_event(view: ClusterView) -> st.SearchStrategy:
    fresh = [t for t in TOPIC_NAMES if t not in view.topics] or list(TOPIC_NAMES)
    configs = maybe(st.fixed_dictionaries({UNCLEAN_KEY: config_value()}), none_weight=3)

    @st.composite
    def build(draw: Callable) -> Event:
        topic = draw(st.sampled_from(fresh))
        event: Event = {"type": "topic_creation", "topic": topic}
        if view.known_brokers() and draw(st.booleans()):
            count = draw(st.integers(1, 3))
            rf = draw(st.integers(1, 3))
            event["assignment"] = draw(_assignment(view, 0, count, rf))
        else:
            event["partitions"] = draw(st.integers(1, 3))
            event["replication_factor"] = draw(st.integers(1, 3))
        return with_optional(event, configs=draw(configs))

    return build()


def partition_creation_event(view: ClusterView) -> st.SearchStrategy:
    if not view.topics or not view.known_brokers():
        return st.nothing()

    @st.composite
    def build(draw: Callable) -> Event:
        topic = draw(st.sampled_from(sorted(view.topics)))
        existing = [p for t, p in view.partitions if t == topic]
        first = max(existing, default=-1) + 1
        rf = len(view.partitions[(topic, existing[0])].replicas) if existing else 1
        # mostly registered brokers; a dead one starts its replica offline
        registered = view.registered()
        pool = registered if registered and draw(st.integers(0, 4)) else None
        assignment = draw(_assignment(view, first, draw(st.integers(1, 2)), rf, pool))
        return {"type": "partition_creation", "topic": topic, "assignment": assignment}

    return build()


def topic_deletion_event(view: ClusterView) -> st.SearchStrategy:
    if not view.topics:
        return st.nothing()
    return st.sampled_from(sorted(view.topics)).map(
        lambda t: {"type": "topic_deletion", "topic": t}
    )


def partition_reassignment_event(view: ClusterView) -> st.SearchStrategy:
    pool = list(range(MAX_BROKERS))

    @st.composite
    def build(draw: Callable) -> Event:
        topic, partition = draw(partition_ref(view))
        current = view.partitions.get((topic, partition))
        if current is not None and current.adding and draw(st.booleans()):
            replicas = None  # cancel the in-flight reassignment
        elif draw(st.integers(0, 9)) == 0:
            replicas = None  # cancel, whether or not one is in flight
        elif draw(st.integers(0, 19)) == 0:
            # the controller refuses these itself (INVALID_REPLICA_ASSIGNMENT, §14.1)
            replicas = draw(st.sampled_from([[], [0, 0], [-1]]))
        else:
            live = view.live()
            # mostly live brokers, so the reassignment is accepted
            source = live if live and draw(st.integers(0, 4)) else pool
            replicas = draw(distinct_brokers(source, 1, 3))
        return {
            "type": "partition_reassignment",
            "topic": topic,
            "partition": partition,
            "replicas": replicas,
        }

    return build()


def isr_change_event(view: ClusterView) -> st.SearchStrategy:
    @st.composite
    def build(draw: Callable) -> Event:
        led = [k for k, p in view.partitions.items() if p.leader >= 0]
        if led and draw(st.integers(0, 5)):
            topic, partition = draw(st.sampled_from(sorted(led)))
        else:
            topic, partition = draw(partition_ref(view))
        current = view.partitions.get((topic, partition))
        event: Event = {"type": "isr_change", "topic": topic, "partition": partition}
        if current is None or current.leader < 0:
            pool = current.replicas if current is not None else [0, 1, 2]
            event["isr"] = draw(distinct_brokers(pool, 1, 3))
            return event
        # the leader asks: itself plus some of the replicas, in some order
        others = [r for r in current.replicas if r != current.leader]
        followers = draw(st.lists(st.sampled_from(others), unique=True) if others else st.just([]))
        isr = [current.leader, *followers]
        event["isr"] = draw(st.permutations(isr)) if draw(st.integers(0, 4)) == 0 else isr
        staleness = draw(
            st.sampled_from(["none"] * 6 + ["leader_epoch", "partition_epoch", "explicit"])
        )
        if staleness == "leader_epoch" and current.leader_epoch is not None:
            event["leader_epoch"] = current.leader_epoch + draw(st.sampled_from([-1, 1]))
        elif staleness == "partition_epoch" and current.partition_epoch is not None:
            event["partition_epoch"] = current.partition_epoch + draw(st.sampled_from([-1, 1]))
        elif staleness == "explicit":
            event["leader_epoch"] = current.leader_epoch
            event["partition_epoch"] = current.partition_epoch
        return event

    return build()


def leader_election_event(view: ClusterView) -> st.SearchStrategy:
    @st.composite
    def build(draw: Callable) -> Event:
        event: Event = {
            "type": "leader_election",
            "election": draw(st.sampled_from(["preferred", "unclean"])),
        }
        if draw(st.booleans()):
            refs = draw(st.lists(partition_ref(view), min_size=0, max_size=3))
            event["partitions"] = [{"topic": t, "partition": p} for t, p in refs]
        return event

    return build()


def auto_rebalance_check_event(view: ClusterView) -> st.SearchStrategy:
    return st.just({"type": "auto_rebalance_check"})


def stop_replica_response_event(view: ClusterView) -> st.SearchStrategy:
    if not view.topics or not view.known_brokers():
        return st.nothing()
    started = sorted(
        (p.topic, p.partition, b)
        for p in view.partitions.values()
        for b, s in p.replica_states.items()
        if s == "ReplicaDeletionStarted"
    )
    anywhere = st.tuples(
        st.sampled_from(sorted(view.topics)),
        st.integers(0, 3),
        st.sampled_from(view.known_brokers()),
    )
    target = (
        st.one_of(st.sampled_from(started), st.sampled_from(started), anywhere)
        if (started)
        else anywhere
    )
    error = st.one_of(
        st.none(), st.none(), st.none(), st.just("NONE"), st.sampled_from(STOP_REPLICA_ERRORS)
    )
    return st.builds(
        lambda tpb, e: {
            "type": "stop_replica_response",
            "topic": tpb[0],
            "partition": tpb[1],
            "broker": tpb[2],
            "error": e,
        },
        target,
        error,
    )


def topic_config_change_event(view: ClusterView) -> st.SearchStrategy:
    if not view.topics:
        return st.nothing()
    return st.builds(
        lambda t, v: {"type": "topic_config_change", "topic": t, "configs": {UNCLEAN_KEY: v}},
        st.sampled_from(sorted(view.topics)),
        config_value(),
    )


def controller_failover_event(view: ClusterView) -> st.SearchStrategy:
    registered = view.registered()

    @st.composite
    def build(draw: Callable) -> Event:
        event: Event = {"type": "controller_failover"}
        if registered and draw(st.booleans()):
            event["controller"] = draw(st.sampled_from(registered))
        if registered and draw(st.integers(0, 2)) == 0:
            event["failed_brokers"] = draw(distinct_brokers(registered, 0, 2))
        return event

    return build()


EVENT_KINDS: dict[str, Callable[[ClusterView], st.SearchStrategy]] = {
    "broker_startup": broker_startup_event,
    "broker_failure": broker_failure_event,
    "controlled_shutdown": controlled_shutdown_event,
    "topic_creation": topic_creation_event,
    "partition_creation": partition_creation_event,
    "topic_deletion": topic_deletion_event,
    "partition_reassignment": partition_reassignment_event,
    "isr_change": isr_change_event,
    "leader_election": leader_election_event,
    "auto_rebalance_check": auto_rebalance_check_event,
    "stop_replica_response": stop_replica_response_event,
    "topic_config_change": topic_config_change_event,
    "controller_failover": controller_failover_event,
}

# how often each kind is picked when a test draws "any event"
EVENT_WEIGHTS: dict[str, int] = {
    "broker_startup": 3,
    "broker_failure": 2,
    "controlled_shutdown": 2,
    "topic_creation": 2,
    "partition_creation": 1,
    "topic_deletion": 1,
    "partition_reassignment": 3,
    "isr_change": 4,
    "leader_election": 2,
    "auto_rebalance_check": 1,
    "stop_replica_response": 2,
    "topic_config_change": 1,
    "controller_failover": 1,
}


def any_event(view: ClusterView) -> st.SearchStrategy:
    """An event of any type, weighted; types with nothing to refer to are skipped."""
    kinds = [k for k, w in EVENT_WEIGHTS.items() for _ in range(w)]

    @st.composite
    def build(draw: Callable) -> Event:
        for _ in range(5):
            kind = draw(st.sampled_from(kinds))
            if kind in NEEDS_A_TOPIC and not view.topics:
                continue
            if kind == "partition_creation" and not view.known_brokers():
                continue
            return draw(EVENT_KINDS[kind](view))
        return {"type": "auto_rebalance_check"}

    return build()


def as_line(event: Event) -> str:
    return json.dumps(event, separators=(",", ":"))
