"""The `controller_requests` rows of a batch, held as requests and their recipients.

An UpdateMetadata goes to every registered broker with one payload, so a batch's rows are
mostly copies: six per AlterPartition on a 6-broker cluster, hundreds on a large one. The
log keeps each request once (its payload and everything else its rows share) and, per
row, only what differs: the recipient, whether it was delivered, the row's request_seq.
Adding a fan-out is then a few list appends, and the writer turns the columns into Arrow
without visiting a row (`streaming.spark_schemas`). Read as a sequence, the log gives
the same dict rows as `schemas.tables.CONTROLLER_REQUESTS`, the rows of one request
sharing their `partitions` and `live_brokers` lists.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any, overload

Row = dict[str, Any]

# The table's columns split in two (a test checks they are exactly the table's): what every
# row of one request shares, and what each row has of its own.
REQUEST_COLUMNS = (
    "cluster",
    "controller_epoch",
    "event_id",
    "seq",
    "type",
    "partitions",
    "live_brokers",
    "ts",
)
# (with their array typecodes: int32 as the table's INT columns, a bool as a byte)
RECIPIENT_COLUMNS = {"request_seq": "i", "broker": "i", "delivered": "b"}


class RequestLog(Sequence[Row]):
    __slots__ = ("_last_recipients", "_recipients", "_request_of_row", "_requests")

    def __init__(self) -> None:
        self._requests: list[tuple[Any, ...]] = []  # each request's REQUEST_COLUMNS values
        # per row, as C arrays: the writer hands them to Arrow without a copy
        self._recipients: dict[str, array[int]] = {
            name: array(code) for name, code in RECIPIENT_COLUMNS.items()
        }
        self._request_of_row = array("q")  # each row's request, an index into _requests
        # the recipient columns of the last add, as C arrays, with what they were built from
        self._last_recipients: tuple[tuple[Any, ...], dict[str, array[int]]] | None = None

    def add(
        self,
        shared: tuple[Any, ...],
        first_request_seq: int,
        brokers: Sequence[int],
        delivered: Sequence[bool],
    ) -> None:
        """One request (`shared`: its REQUEST_COLUMNS values) to `brokers` in order, rows
        numbered on from `first_request_seq`."""
        count = len(brokers)
        # (an array repeated and appended is copied in C; a list's items would each go
        # through the array's argument parser)
        self._request_of_row.extend(array("q", (len(self._requests),)) * count)
        self._requests.append(shared)
        recipients = self._recipients
        for name, column in self._recipient_arrays(first_request_seq, brokers, delivered).items():
            recipients[name].extend(column)

    def _recipient_arrays(
        self, first_request_seq: int, brokers: Sequence[int], delivered: Sequence[bool]
    ) -> dict[str, array[int]]:
        """The RECIPIENT_COLUMNS of one request as C arrays. A fan-out repeats the same
        recipients request after request (an UpdateMetadata to every registered broker
        per AlterPartition), so the last ones are reused: converting a list into an
        array costs more than the rest of the add."""
        key = (first_request_seq, tuple(brokers), tuple(delivered))
        last = self._last_recipients
        if last is not None and last[0] == key:
            return last[1]
        columns = {
            "request_seq": array("i", range(first_request_seq, first_request_seq + len(brokers))),
            "broker": array("i", brokers),
            "delivered": array("b", delivered),
        }
        self._last_recipients = (key, columns)
        return columns

    def extend(self, other: RequestLog) -> None:
        offset = len(self._requests)
        self._requests.extend(other._requests)
        for name, values in other._recipients.items():
            self._recipients[name].extend(values)
        rows = other._request_of_row
        self._request_of_row.extend(rows if offset == 0 else array("q", map(offset.__add__, rows)))

    # ---- columns, for the writer ----------------------------------------------------------

    def request_columns(self) -> dict[str, list[Any]]:
        """REQUEST_COLUMNS, one value per request."""
        columns = (
            zip(*self._requests, strict=True) if self._requests else ([] for _ in REQUEST_COLUMNS)
        )
        return dict(zip(REQUEST_COLUMNS, map(list, columns), strict=True))

    def request_of_row(self) -> array[int]:
        """Each row's request, as an index into `request_columns` (read-only)."""
        return self._request_of_row

    def recipient_columns(self) -> dict[str, array[int]]:
        """RECIPIENT_COLUMNS, one value per row (read-only)."""
        return self._recipients

    # ---- rows --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._request_of_row)

    @overload
    def __getitem__(self, position: int) -> Row: ...
    @overload
    def __getitem__(self, position: slice) -> list[Row]: ...
    def __getitem__(self, position: int | slice) -> Row | list[Row]:
        if isinstance(position, slice):
            return [self._row(i) for i in range(*position.indices(len(self)))]
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError("request row index out of range")
        return self._row(position)

    def __iter__(self) -> Iterator[Row]:
        return map(self._row, range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RequestLog | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"RequestLog({list(self)!r})"

    def _row(self, position: int) -> Row:
        cluster, epoch, event_id, seq, request_type, partitions, live_brokers, ts = self._requests[
            self._request_of_row[position]
        ]
        recipients = self._recipients
        return {
            "cluster": cluster,
            "controller_epoch": epoch,
            "event_id": event_id,
            "seq": seq,
            "request_seq": recipients["request_seq"][position],
            "type": request_type,
            "broker": recipients["broker"][position],
            "delivered": bool(recipients["delivered"][position]),
            "partitions": partitions,
            "live_brokers": live_brokers,
            "ts": ts,
        }
