"""`kafka:HOST:PORT/TOPIC`, or Kafka's own way of saying it: `--bootstrap-server HOST:PORT`
with `--topic T`. The commands that read or write a topic take either."""

from __future__ import annotations

__all__ = ["kafka_target"]


def kafka_target(
    given: str | None, bootstrap: str | None, topic: str | None, option: str, topic_option: str
) -> str | None:
    """`given` (the `option`'s value), or `kafka:BOOTSTRAP/TOPIC` built from
    `--bootstrap-server` and `topic_option`; None when neither is given. A ValueError
    when both are, or a topic without a bootstrap."""
    if topic is None:
        return given
    if given is not None:
        raise ValueError(f"give {option} or --bootstrap-server with {topic_option}, not both")
    if bootstrap is None:
        raise ValueError(f"{topic_option} needs --bootstrap-server HOST:PORT")
    if not topic or "/" in topic:
        raise ValueError(f"{topic_option}: {topic!r} is not a topic name")
    return f"kafka:{bootstrap}/{topic}"
