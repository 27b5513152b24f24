"""kcsim's state against a real controller's (`observed`, CONTRACT §1 and §4): the
`divergences` rows of one event.

Pure: reads the context after the event was applied, changes nothing. Values are JSON
text (compact, keys sorted) so that both engines write the same bytes.

The ISR is compared as a set. Kafka's controller never reads the ISR's order: elections
take the first replica in assignment order that is in the ISR (SPEC §5), the ISR removal
and the controlled-shutdown rule filter it, and AlterPartition accepts whatever order the
leader sends. The order in the state znode is the order of a broker's in-memory ISR set,
which kcsim cannot know, so comparing lists would report differences no decision rests
on. Both values are still written as given. Replicas are compared as ordered lists: the
first one is the preferred leader.

A partition kcsim has is one with a row in its state, whatever its state: during a topic
deletion the row outlives NonExistentPartition exactly as the partition's state znode
does (deleted when the deletion completes), so a partition being deleted is compared
field by field like any other.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from controller import snapshot
from controller.events import ObservedPartition, Rejection
from controller.zk.context import ControllerContext, Partition

_FIELDS = ("leader", "leader_epoch", "isr", "partition_epoch", "controller_epoch", "replicas")
# fields compared only when the observed state gives them
_OPTIONAL = frozenset({"partition_epoch", "controller_epoch", "replicas"})


class Divergence(NamedTuple):
    topic: str | None
    partition: int | None
    field: str  # one of _FIELDS, "partition" or "event"
    observed: str | None  # JSON text; None: the observed side has no such partition
    simulated: str | None  # JSON text; None: kcsim has no such partition


def as_json(value: Any) -> str:
    """The one JSON text of a value both engines write: compact, keys sorted."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def observed_entry(entry: ObservedPartition) -> dict[str, Any]:
    """An observed partition as the event gave it (fields it left out stay out)."""
    values = entry._asdict()
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in values.items()
        if value is not None
    }


# the partition_state columns an observed partition names, in observed's order
_OBSERVED_COLUMNS = (
    "topic",
    "partition",
    "leader",
    "leader_epoch",
    "isr",
    "partition_epoch",
    "controller_epoch",
    "replicas",
)


def simulated_values(record: Partition) -> dict[str, Any]:
    """kcsim's values of a partition, named as observed names them: its partition_state
    row's (`controller_epoch` is the stored one, not the cache's, SPEC §6.3)."""
    row = snapshot.partition_row("", record)
    return {column: row[column] for column in _OBSERVED_COLUMNS}


def compare(
    context: ControllerContext,
    observed: tuple[ObservedPartition, ...],
    topic: str | None,
    partition: int | None = None,
) -> list[Divergence]:
    """Every difference between `observed` and kcsim's state after an event.

    `topic` and `partition` are the event's own (None when it has none): its scope, the
    partitions `observed` is taken to describe whole. When `observed` lists the event's
    topic, or lists nothing at all (the topic is gone there), each partition kcsim has in
    that scope and `observed` lacks is a `partition` row. The scope of an event naming a
    partition (isr_change, partition_reassignment, stop_replica_response) is that
    partition, not its topic: the observed state of an AlterPartition is the one znode it
    wrote, and its topic's other partitions say nothing of it. Costs the observed
    partitions, plus the partitions of the scope when `observed` speaks of it."""
    rows = [row for entry in observed for row in _compare_partition(context, entry)]
    info = None if topic is None else context.topics.get(topic)
    if info is not None and (not observed or any(e.topic == topic for e in observed)):
        listed = {e.partition for e in observed if e.topic == topic}
        scope = info.partitions.keys() if partition is None else {partition}
        for number in sorted(scope - listed):
            record = info.partitions.get(number)
            if record is not None:
                simulated = as_json(simulated_values(record))
                rows.append(Divergence(topic, number, "partition", None, simulated))
    return rows


def _compare_partition(
    context: ControllerContext, entry: ObservedPartition
) -> Iterator[Divergence]:
    info = context.topics.get(entry.topic)
    record = None if info is None else info.partitions.get(entry.partition)
    if record is None:
        yield Divergence(
            entry.topic, entry.partition, "partition", as_json(observed_entry(entry)), None
        )
        return
    simulated = simulated_values(record)
    for name in _FIELDS:
        seen = getattr(entry, name)
        if seen is None and name in _OPTIONAL:
            continue
        mine = simulated[name]
        if name == "isr":
            differs = mine is None or set(seen) != set(mine)
        else:
            differs = list(seen) != mine if name == "replicas" else seen != mine
        if differs:
            observed_value = list(seen) if isinstance(seen, tuple) else seen
            yield Divergence(
                entry.topic, entry.partition, name, as_json(observed_value), as_json(mine)
            )


def rejected_event(observed: tuple[ObservedPartition, ...], reason: str) -> Divergence:
    """An event the real controller handled and kcsim rejected."""
    value = {"partitions": [observed_entry(e) for e in observed]}
    return Divergence(None, None, "event", as_json(value), as_json(reason))


def rows(
    cluster: str | None,
    event_id: str | None,
    seq: int | None,
    ts: int | None,
    divergences: list[Divergence],
) -> list[dict[str, Any]]:
    """`divergences` table rows of one event."""
    return [
        {
            "cluster": cluster,
            "event_id": event_id,
            "seq": seq,
            "ts": ts,
            "topic": d.topic,
            "partition": d.partition,
            "field": d.field,
            "observed": d.observed,
            "simulated": d.simulated,
        }
        for d in divergences
    ]


def rejection_rows(rejection: Rejection) -> list[dict[str, Any]]:
    """The `event` row of a rejected event that carried a well-formed `observed` (none
    for one that did not)."""
    seen = rejection.observed
    if seen is None:
        return []
    divergence = rejected_event(seen.partitions, rejection.reason)
    return rows(rejection.cluster, seen.event_id, seen.seq, seen.ts, [divergence])
