"""Seeded random *legal* event sequences for the KRaft differential oracle.

Small clusters (3-6 brokers, a few topics, RF 1-3) driven through every CONTRACT §1/§5
event type, biased towards the paths most reimplementations get wrong (SPEC-KRAFT §25):
brokers lost one after another below min ISR (ELR), unclean restarts and returns (the last
known leader), controlled shutdowns of sole leaders, reassignments completed and
cancelled, AlterPartitions with stale epochs, ELR turned off and on, failovers.

"Legal" means the front door accepts every event (known topics and brokers, well-formed
fields); the controller may still refuse one with an error code, which both sides must
answer alike. The generator keeps what the events themselves decide (which brokers are
registered, up or down, which topics and partitions exist, their replica lists). For
AlterPartitions that Kafka would mostly accept it also looks at a shadow kcsim controller
fed the same events (the current leader, ISR and live brokers): that only steers which
legal inputs are drawn, every output is still compared with Kafka's.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import Any

from controller.kraft import KRaftRejection, KRaftSettings, QuorumController
from tests.support.kraft.kraft_oracle import OracleSequence

Event = dict[str, Any]


@dataclass
class _Model:
    brokers: list[int]
    registered: set[int] = field(default_factory=set)
    live: set[int] = field(default_factory=set)
    topics: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_counter: int = 0
    incarnations: dict[int, str] = field(default_factory=dict)
    shadow: QuorumController | None = None

    def feed(self, event: Event) -> Event:
        """The event, applied to the shadow controller too."""
        if self.shadow is not None:
            with contextlib.suppress(KRaftRejection):
                self.shadow.apply(event)
        return event


def random_settings(rng: random.Random) -> dict[str, str]:
    return {
        "min.insync.replicas": str(rng.choice([1, 2, 2, 2, 3])),
        "unclean.leader.election.enable": rng.choice(["false"] * 5 + ["true"]),
        "eligible.leader.replicas.version": rng.choice(["1"] * 5 + ["0"]),
        "auto.leader.rebalance.enable": rng.choice(["true"] * 4 + ["false"]),
    }


def random_sequence(seed: int, length: int | None = None) -> OracleSequence:
    rng = random.Random(seed)
    model = _Model(brokers=list(range(1, rng.randint(3, 6) + 1)))
    settings = random_settings(rng)
    model.shadow = QuorumController(KRaftSettings.from_properties(settings))
    events: list[Event] = []
    # Start most brokers, then create a topic or two: most sequences have something to lose.
    first = rng.sample(model.brokers, k=max(2, len(model.brokers) - rng.randint(0, 1)))
    events.append(model.feed({"type": "broker_startup", "brokers": sorted(first)}))
    model.registered |= set(first)
    model.live |= set(first)
    for _ in range(rng.randint(1, 2)):
        events.append(model.feed(_topic_creation(rng, model)))
    steps = length if length is not None else rng.randint(8, 30)
    for _ in range(steps):
        events.append(model.feed(_next_event(rng, model)))
    return OracleSequence(f"seed-{seed}", tuple(events), settings)


def _choice(rng: random.Random, items: Any) -> Any:
    items = sorted(items)
    return rng.choice(items) if items else None


def _topic_creation(rng: random.Random, model: _Model) -> Event:
    model.topic_counter += 1
    topic = f"t{model.topic_counter}"
    live = sorted(model.live)
    registered = sorted(model.registered)
    configs: dict[str, str] = {}
    if rng.random() < 0.25:
        configs["min.insync.replicas"] = str(rng.randint(1, 3))
    if rng.random() < 0.1:
        configs["unclean.leader.election.enable"] = rng.choice(["true", "false"])
    if len(configs) > 1 and rng.random() < 0.5:
        configs = dict(reversed(configs.items()))  # ConfigRecords follow HashMap order (§22.3)
    event: Event = {"type": "topic_creation", "topic": topic}
    rf = rng.choice([1, 2, 3, 3, 3])
    partitions = rng.randint(1, 3)
    if rng.random() < 0.35 and len(live) >= rf:
        event |= {"partitions": partitions, "replication_factor": rf}
        # The placer's choices are Kafka's to make: the model learns them from nobody, so it
        # remembers only that the partitions exist, with unknown replicas.
        model.topics[topic] = {p: [] for p in range(partitions)}
    else:
        rf = min(rf, len(registered))
        assignment: dict[str, list[int]] = {}
        for p in range(partitions):
            if not live:
                break
            head = rng.choice(live)
            rest = rng.sample([b for b in registered if b != head], k=rf - 1)
            assignment[str(p)] = [head, *rest]
        if not assignment:
            assignment["0"] = [rng.choice(model.brokers)]
        event["assignment"] = assignment
        model.topics[topic] = {int(p): list(r) for p, r in assignment.items()}
    if configs:
        event["configs"] = configs
    return event


def _replicas_guess(rng: random.Random, model: _Model, topic: str, partition: int) -> list[int]:
    known = model.topics[topic].get(partition) or []
    return known or rng.sample(model.brokers, k=min(3, len(model.brokers)))


def _next_event(rng: random.Random, model: _Model) -> Event:
    roll = rng.random()
    down = sorted(set(model.brokers) - model.live)
    if roll < 0.16 and model.live:
        # lose one broker, sometimes two in one event (a zone)
        count = 2 if rng.random() < 0.2 and len(model.live) > 1 else 1
        lost = rng.sample(sorted(model.live), k=count)
        model.live -= set(lost)
        if rng.random() < 0.1:
            lost.append(_choice(rng, model.registered))  # a redundant fence, sometimes
        return (
            {"type": "broker_failure", "brokers": lost}
            if len(lost) > 1
            else {
                "type": "broker_failure",
                "broker": lost[0],
            }
        )
    if roll < 0.30 and (down or model.live):
        use_down = down and (not model.live or rng.random() < 0.85)
        b = rng.choice(down) if use_down else rng.choice(sorted(model.live))
        model.registered.add(b)
        model.live.add(b)
        return {"type": "broker_startup", "broker": b}
    if roll < 0.36 and model.live:
        b = rng.choice(sorted(model.live))
        model.live.discard(b)
        event: Event = {"type": "controlled_shutdown", "broker": b}
        return event
    if roll < 0.40 and model.registered:
        # a registration alone (fenced), an amendment of the same incarnation, or an unfence
        b = rng.choice(sorted(model.registered | set(model.brokers)))
        kind = rng.random()
        if kind < 0.5 and b in model.registered and b not in model.live:
            return {"type": "broker_unfence", "broker": b}
        model.registered.add(b)
        model.live.discard(b)
        reg: Event = {"type": "broker_registration", "broker": b}
        if kind < 0.7 and b in model.incarnations:
            reg["incarnation"] = model.incarnations[b]
        elif kind < 0.8:
            model.incarnations[b] = f"inc-{b}-{rng.randint(0, 999)}"
            reg["incarnation"] = model.incarnations[b]
        return reg
    if roll < 0.42 and model.registered:
        b = rng.choice(sorted(model.registered))
        model.registered.discard(b)
        model.live.discard(b)
        return {"type": "broker_unregistration", "broker": b}
    if (roll < 0.48 or not model.topics) and len(model.topics) < 4 and model.registered:
        return _topic_creation(rng, model)
    topic = _choice(rng, model.topics)
    if topic is None:
        return {"type": "auto_rebalance_check"}
    parts = model.topics[topic]
    partition = _choice(rng, parts) if parts else 0
    if roll < 0.66 and parts:
        informed = _informed_isr_change(rng, model, topic, partition)
        if informed is not None:
            return informed
        replicas = _replicas_guess(rng, model, topic, partition)
        live_replicas = [b for b in replicas if b in model.live]
        isr = list(live_replicas)
        shape = rng.random()
        if shape < 0.35 and len(isr) > 1:
            isr.pop(rng.randrange(1, len(isr)))  # a shrink that keeps the (probable) leader
        elif shape < 0.45 and len(isr) > 1:
            isr.reverse()  # a reorder
        elif shape < 0.5:
            isr = isr + [b for b in model.brokers if b not in isr][:1]  # a non-replica
        if not isr:
            return {"type": "unclean_election_check"}
        event = {"type": "isr_change", "topic": topic, "partition": partition, "isr": isr}
        if rng.random() < 0.1:
            event["leader_epoch"] = 0
        if rng.random() < 0.07:
            event["partition_epoch"] = 0
        if rng.random() < 0.05:
            event["leader_recovery_state"] = "RECOVERED"
        return event
    if roll < 0.72 and parts:
        if rng.random() < 0.25:
            return {
                "type": "partition_reassignment",
                "topic": topic,
                "partition": partition,
                "replicas": None,
            }
        registered = sorted(model.registered) or model.brokers
        target = rng.sample(registered, k=min(len(registered), rng.randint(1, 3)))
        parts[partition] = target
        return {
            "type": "partition_reassignment",
            "topic": topic,
            "partition": partition,
            "replicas": target,
        }
    if roll < 0.79:
        event = {"type": "leader_election", "election": rng.choice(["preferred", "unclean"])}
        if rng.random() < 0.6 and parts:
            event["partitions"] = [{"topic": topic, "partition": partition}]
            if rng.random() < 0.4:  # several, across topics: answered topic by topic (§15.1)
                known = sorted((t, p) for t, ps in model.topics.items() for p in ps)
                extra = rng.sample(known, k=min(len(known), rng.randint(1, 3)))
                for t, p in extra:
                    if {"topic": t, "partition": p} not in event["partitions"]:
                        event["partitions"].append({"topic": t, "partition": p})
        return event
    if roll < 0.83:
        return {"type": rng.choice(["auto_rebalance_check", "unclean_election_check"])}
    if roll < 0.87:
        key = rng.choice(["min.insync.replicas", "min.insync.replicas", "unclean"])
        value = (
            str(rng.randint(1, 3))
            if key == "min.insync.replicas"
            else rng.choice(["true", "false"])
        )
        name = key if key == "min.insync.replicas" else "unclean.leader.election.enable"
        configs = {name: value}
        if rng.random() < 0.3:  # both keys, in either order: HashMap order decides (§22.3)
            configs = {
                "unclean.leader.election.enable": rng.choice(["true", "false"]),
                "min.insync.replicas": str(rng.randint(1, 3)),
            }
            if rng.random() < 0.5:
                configs = dict(reversed(configs.items()))
        if rng.random() < 0.5:
            return {"type": "topic_config_change", "topic": topic, "configs": configs}
        event = {"type": "cluster_config_change", "configs": configs}
        if rng.random() < 0.15:
            event["broker"] = rng.choice(model.brokers)
        return event
    if roll < 0.90:
        return {
            "type": "feature_update",
            "features": {"eligible.leader.replicas.version": rng.choice([0, 1, 1])},
        }
    if roll < 0.93:
        event = {"type": "controller_failover", "controller": rng.choice([3000, 3001, 3002])}
        if rng.random() < 0.3 and model.live:
            failed = rng.choice(sorted(model.live))
            model.live.discard(failed)
            event["failed_brokers"] = [failed]
        return event
    if roll < 0.95 and model.registered:
        # a new partition with the topic's replica count where the model knows it
        new_id = max(parts) + 1 if parts else 0
        rf = len(parts.get(0) or []) or 2
        live = sorted(model.live)
        registered = sorted(model.registered)
        if not live or len(registered) < rf:
            return {"type": "unclean_election_check"}
        head = rng.choice(live)
        replicas = [head, *rng.sample([b for b in registered if b != head], k=rf - 1)]
        parts[new_id] = replicas
        return {"type": "partition_creation", "topic": topic, "assignment": {str(new_id): replicas}}
    if roll < 0.97:
        del model.topics[topic]
        return {"type": "topic_deletion", "topic": topic}
    return {"type": "auto_rebalance_check"}


def _informed_isr_change(
    rng: random.Random, model: _Model, topic: str, partition: int
) -> Event | None:
    """Most of the time, an AlterPartition as the current leader would send it (SPEC-KRAFT
    §14): its ISR, expanded by a live replica, shrunk, reordered, or with a fenced replica
    (INELIGIBLE_REPLICA), or ending a recovery. None: draw a blind one instead."""
    if model.shadow is None or rng.random() < 0.25:
        return None
    view = model.shadow.partition(topic, partition)
    if view is None:
        return None
    if view.leader < 0:  # no leader to send it: elect one instead, mostly
        if rng.random() < 0.3:
            return None
        election = rng.choice(["unclean", "preferred"])
        where = [{"topic": topic, "partition": partition}]
        return {"type": "leader_election", "election": election, "partitions": where}
    statuses = {b.broker: b.status for b in model.shadow.brokers()}
    isr = list(view.isr)
    outside = [r for r in view.replicas if r not in isr]
    live_outside = [r for r in outside if statuses.get(r) == "live"]
    shape = rng.random()
    if shape < 0.4 and live_outside:
        isr.append(rng.choice(live_outside))
    elif shape < 0.6 and len(isr) > 1:
        isr.remove(rng.choice([r for r in isr if r != view.leader]))
    elif shape < 0.7 and len(isr) > 1:
        rng.shuffle(isr)
    elif shape < 0.9 and outside:
        isr.append(rng.choice(outside))
    event: Event = {"type": "isr_change", "topic": topic, "partition": partition, "isr": isr}
    if view.leader_recovery_state == "RECOVERING" and rng.random() < 0.7:
        event["leader_recovery_state"] = "RECOVERED"
    return event
