"""Exceptions the control managers raise while generating an operation's records. A raised
operation writes nothing (its records are not appended), as in Kafka's QuorumController."""

from __future__ import annotations


class ApiError(Exception):
    """A request refused with a Kafka error code (`code`, e.g. "INVALID_REPLICA_ASSIGNMENT")
    and Kafka's message."""

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(message or code)
        self.code = code
        self.message = message


class UnexpectedError(Exception):
    """What Kafka's controller hits as a RuntimeException while generating records (a stale
    index entry of a deleted topic, SPEC-KRAFT §2.3): the operation writes nothing and is
    answered UNKNOWN_SERVER_ERROR."""
