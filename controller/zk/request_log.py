"""The `controller_requests` and `request_payloads` rows of a batch, held as request
bodies and their recipients.

An UpdateMetadata goes to every registered broker with one body, so most requests of a
batch share their body: six per AlterPartition on a 6-broker cluster, hundreds on a large
one. The log keeps each body once (a `request_payloads` row: its partitions and live
brokers, with what every request carrying it shares) and, per request, only what differs:
the recipient, whether it was delivered, its request_seq. Adding a fan-out is then a few
list appends, and the writer turns the columns into Arrow without visiting a row
(`streaming.lake.spark_schemas`). Read as a sequence, the log gives the dict rows of
`schemas.tables.CONTROLLER_REQUESTS`; `payloads()` gives those of `REQUEST_PAYLOADS`, and
`joined` a request with its body, as the old single table held it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

Row = dict[str, Any]

# What one body's requests share (its `request_payloads` row and the columns of the
# `controller_requests` rows carrying it) and what each request has of its own (a test
# checks they are exactly the two tables' columns).
REQUEST_COLUMNS = (
    "cluster",
    "controller_epoch",
    "event_id",
    "seq",
    "type",
    "payload",
    "partitions",
    "live_brokers",
    "ts",
)
# (with their array typecodes: int32 as the table's INT columns, a bool as a byte)
RECIPIENT_COLUMNS = {"request_seq": "i", "broker": "i", "delivered": "b"}
PAYLOAD_KEY = ("cluster", "event_id", "payload")


class RequestLog(Sequence[Row]):
    __slots__ = ("_last_recipients", "_recipients", "_request_of_row", "_requests")

    def __init__(self) -> None:
        self._requests: list[tuple[Any, ...]] = []  # each body's REQUEST_COLUMNS values
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
        """One body (`shared`: its REQUEST_COLUMNS values) sent to `brokers` in order, the
        requests numbered on from `first_request_seq`."""
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

    def payloads(self) -> PayloadRows:
        """The `request_payloads` rows: a view, so bodies added later are in it."""
        return PayloadRows(self)

    def request_columns(self) -> dict[str, list[Any]]:
        """REQUEST_COLUMNS, one value per body."""
        columns = (
            zip(*self._requests, strict=True) if self._requests else ([] for _ in REQUEST_COLUMNS)
        )
        return dict(zip(REQUEST_COLUMNS, map(list, columns), strict=True))

    def request_of_row(self) -> array[int]:
        """Each request's body, as an index into `request_columns` (read-only)."""
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
        cluster, epoch, event_id, seq, request_type, payload, _, _, ts = self._requests[
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
            "payload": payload,
            "ts": ts,
        }


class PayloadRows(Sequence[Row]):
    """The `request_payloads` rows of a RequestLog, one per body, in the order sent."""

    __slots__ = ("_log",)

    def __init__(self, log: RequestLog) -> None:
        self._log = log

    @property
    def log(self) -> RequestLog:
        return self._log

    def __len__(self) -> int:
        return len(self._log._requests)

    @overload
    def __getitem__(self, position: int) -> Row: ...
    @overload
    def __getitem__(self, position: slice) -> list[Row]: ...
    def __getitem__(self, position: int | slice) -> Row | list[Row]:
        bodies = self._log._requests
        if isinstance(position, slice):
            return [_payload_row(body) for body in bodies[position]]
        return _payload_row(bodies[position])

    def __iter__(self) -> Iterator[Row]:
        return map(_payload_row, self._log._requests)

    def drain(self) -> Iterator[Row]:
        """The rows, each body dropped from the log as its row is taken: a body's entries
        are freed once written, while still in the cache, not all at once after the batch.
        The log's rows cannot be read after (its bodies are gone)."""
        bodies = self._log._requests
        for position, body in enumerate(bodies):
            bodies[position] = None  # type: ignore[call-overload]  # (never read again)
            yield _payload_row(body)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PayloadRows | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PayloadRows({list(self)!r})"


def _payload_row(body: tuple[Any, ...]) -> Row:
    cluster, _, event_id, seq, request_type, payload, partitions, live_brokers, ts = body
    return {
        "cluster": cluster,
        "event_id": event_id,
        "seq": seq,
        "payload": payload,
        "type": request_type,
        "partitions": partitions,
        "live_brokers": live_brokers,
        "ts": ts,
    }


def joined(requests: Iterable[Row], payloads: Iterable[Row]) -> list[Row]:
    """Each request with its body's `partitions` and `live_brokers` (controller_requests
    joined with request_payloads on cluster, event_id and payload), in request order."""
    bodies = {tuple(p[k] for k in PAYLOAD_KEY): p for p in payloads}
    out = []
    for request in requests:
        body = bodies[tuple(request[k] for k in PAYLOAD_KEY)]
        out.append(
            {**request, "partitions": body["partitions"], "live_brokers": body["live_brokers"]}
        )
    return out
