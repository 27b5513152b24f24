"""The core's front door: raw event lines in, table rows out, for any number of clusters.

Both engines drive this one class: `kcsim replay` (controller.replay) and the Spark job's
foreachBatch (streaming). A batch's output is plain rows whose columns are exactly
`schemas.TABLES[name].column_names`, with JSON-compatible values.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.config import Settings

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RawEvent:
    raw: str  # the line (or Kafka record value) as received
    source: str  # "<file>:<line>" or "<topic>/<partition>/<offset>"


@dataclass(slots=True)
class BatchOutput:
    # append-only tables: controller_requests, state_changes, event_results,
    # rejected_events, applied_events
    appends: dict[str, list[Row]] = field(default_factory=dict)
    # keyed state tables: the current full row of every key the batch changed...
    upserts: dict[str, list[Row]] = field(default_factory=dict)
    # ...and the key columns of every row the batch removed
    deletes: dict[str, list[Row]] = field(default_factory=dict)


class Simulator:
    def __init__(self, settings: Settings) -> None:
        raise NotImplementedError

    @classmethod
    def from_tables(
        cls, settings: Settings, tables: Mapping[str, Iterable[Mapping[str, Any]]]
    ) -> Simulator:
        """Rebuild every cluster from stored state-table rows (partition_state, replica_state,
        brokers, topics, clusters). Continuing from here gives what one uninterrupted run
        gives."""
        raise NotImplementedError

    def apply(self, events: Iterable[RawEvent]) -> BatchOutput:
        """Apply events in the given order (a cluster's events must arrive in order)."""
        raise NotImplementedError

    def table_rows(self, table: str) -> Iterator[Row]:
        """Every current row of a state table."""
        raise NotImplementedError
