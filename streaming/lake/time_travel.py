"""A consistent cut of the lake for `kcsim state --as-of`, from the tables' histories.

Shared by the Spark reads (`streaming.lake.tables.Lake.versions_as_of`) and the native ones
(`streaming.lake.local_reader`), so both pick the same versions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

# (version, commit time in epoch seconds as Delta reports it, userMetadata), oldest first
Commit = tuple[int, float, str | None]


def consistent_cut(
    as_of: str, reference: Sequence[Commit], histories: Mapping[str, Sequence[Commit]]
) -> dict[str, int]:
    """`as_of` is a version of the reference table (partition_state) or a timestamp; every
    table of `histories` is taken as of the end of the batch that wrote that version
    (commit tags tell which commits a batch made; the next batch commits only after
    them)."""
    if as_of.isdigit():
        chosen = [c for c in reference if c[0] == int(as_of)]
        if not chosen:
            raise ValueError(
                f"partition_state has no version {as_of} (latest is {reference[-1][0]})"
            )
    else:
        moment = timestamp(as_of)
        chosen = [c for c in reference if c[1] <= moment][-1:]
        if not chosen:
            raise ValueError(f"the lake did not exist yet at {as_of}")
    _, cut, tag = chosen[0]
    if tag is not None:
        cut = max([cut] + [ts for h in histories.values() for _, ts, meta in h if meta == tag])
    return {
        name: max((v for v, ts, _ in history if ts <= cut), default=history[0][0])
        for name, history in histories.items()
    }


def timestamp(text: str) -> float:
    """An ISO-8601 time as epoch seconds; without a zone it is UTC (the session's zone)."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected a version number or an ISO-8601 time, got {text!r}") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
