"""What one `kcsim run` runs with: the source, the lake, the sink and the Spark settings,
as the command reads them from its arguments.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from controller.config import Settings
from streaming.clients.kafka_config import KafkaClientConfig
from streaming.job.file_source import is_remote, lake_path, local_path
from streaming.job.request_sink import RequestSink
from streaming.job.sources import FileSource, KafkaSource

DEFAULT_TRIGGER_SECONDS = 5


@dataclass(frozen=True, slots=True)
class Options:
    settings: Settings
    source: FileSource | KafkaSource
    lake: str
    checkpoint: str
    once: bool = False
    trigger_seconds: float = DEFAULT_TRIGGER_SECONDS
    sink: RequestSink | None = None
    fleet: bool = False
    master: str = "local[2]"
    spark_conf: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        client = KafkaClientConfig.load(getattr(args, "kafka_config", None))
        kind, _, where = args.source.partition(":")
        source: FileSource | KafkaSource
        if kind == "file" and where:
            if is_remote(where):
                raise ValueError(f"--source file: reads a local directory, got {where!r}")
            source = FileSource(local_path(where), args.max_files_per_trigger)
        elif kind == "kafka":
            bootstrap, topic = parse_endpoint(where)
            source = KafkaSource(
                bootstrap, topic, args.starting_offsets, args.max_offsets_per_trigger, client
            )
        else:
            raise ValueError(
                f"--source expects file:DIR or kafka:HOST:PORT/TOPIC, got {args.source!r}"
            )
        sink = None
        if args.sink:
            kind, _, where = args.sink.partition(":")
            if kind != "kafka":
                raise ValueError(f"--sink expects kafka:HOST:PORT/TOPIC, got {args.sink!r}")
            sink = RequestSink(*parse_endpoint(where), client)
        conf: dict[str, str] = {}
        for item in args.conf:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--conf expects key=value, got {item!r}")
            conf[key.strip()] = value.strip()
        lake = lake_path(args.lake)
        return cls(
            settings=args.settings,
            source=source,
            lake=lake,
            checkpoint=lake_path(args.checkpoint or f"{lake}/_checkpoints/run"),
            once=args.once,
            trigger_seconds=args.trigger_seconds,
            sink=sink,
            fleet=args.fleet,
            master=args.master,
            spark_conf=conf,
        )


def parse_endpoint(text: str) -> tuple[str, str]:
    """Parse "HOST:PORT[,HOST:PORT...]/TOPIC" into (bootstrap servers, topic)."""
    bootstrap, sep, topic = text.rpartition("/")
    if not sep or not bootstrap or not topic:
        raise ValueError(f"expected HOST:PORT/TOPIC, got {text!r}")
    return bootstrap, topic
