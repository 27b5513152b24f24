"""Where `kcsim run` reads its events: event files or a Kafka topic.

Files are read with the binaryFile source (whole files as bytes), split into lines
exactly as `kcsim replay` splits them, so line numbers are exact for any file size;
within a batch files go in name order, lines in order, and `source` is "<file name
relative to the source directory>:<line>". Across batches files go in the order Spark
picks them up (modification time), which is name order when files arrive in name order.
Kafka records go in (topic, partition, offset) order with `source`
"<topic>/<partition>/<offset>"; producers key events by cluster, so a cluster's events
share a partition. A record with a null value (a tombstone) is given to the core as `raw
= ""` and so lands in `rejected_events` ("not valid JSON") with its coordinates; a value
is one event, never split into lines.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from controller.replay.event_files import (
    check_file_name,
    is_event_file,
    skipped_files_warning,
    split_lines,
)
from controller.simulator import RawEvent
from streaming.clients.kafka_config import KafkaClientConfig

BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length long, content binary"


@dataclass(frozen=True, slots=True)
class FileSource:
    directory: str
    max_files_per_trigger: int | None = None

    def stream(self, spark: SparkSession) -> DataFrame:
        reader = spark.readStream.format("binaryFile").schema(BINARY_FILE_SCHEMA)
        if self.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", str(self.max_files_per_trigger))
        return reader.load(self.directory)

    def events(self, batch: DataFrame) -> tuple[list[RawEvent], int]:
        """The batch's events in order, and how many event files it held."""
        self.check_names()
        data = batch.select("path", "content").toArrow()
        files = sorted(
            (self.relative_name(path), content)
            for path, content in zip(
                data.column("path").to_pylist(), data.column("content").to_pylist(), strict=True
            )
            if is_event_file(os.path.basename(_uri_path(path)))
        )
        events: list[RawEvent] = []
        for name, content in files:
            events.extend(split_lines(content or b"", name))
        return events, len(files)

    def relative_name(self, path: str) -> str:
        """`path` (a URI as Spark lists it) relative to the source directory."""
        file_path = _uri_path(path)
        base = _uri_path(self.directory).rstrip("/") + "/"
        return file_path[len(base) :] if file_path.startswith(base) else os.path.basename(file_path)

    def known_files(self) -> int | None:
        """How many event files the directory holds now (local directories only)."""
        names = self._local_names()
        return None if names is None else len(names)

    def skipped_warning(self) -> str | None:
        """What replay would say of the files the directory holds now that Spark's listing
        skips (local directories only)."""
        local = self._local_directory()
        return None if local is None else skipped_files_warning(Path(local))

    def check_names(self) -> None:
        """Stop on an event file Spark's listing skips without a word (a name that is not
        UTF-8; local directories only), as replay refuses it."""
        for name in self._local_names() or ():
            check_file_name(name)

    def _local_names(self) -> list[str] | None:
        local = self._local_directory()
        if local is None:
            return None
        return [e.name for e in os.scandir(local) if e.is_file() and is_event_file(e.name)]

    def _local_directory(self) -> str | None:
        if urlparse(self.directory).scheme not in ("", "file"):
            return None
        local = _uri_path(self.directory)
        return local if os.path.isdir(local) else None


def _uri_path(path: str) -> str:
    parsed = urlparse(path)
    if parsed.scheme == "file":
        return os.path.normpath(unquote(parsed.path))
    if parsed.scheme == "":
        return os.path.abspath(path)
    return unquote(parsed.path)


@dataclass(frozen=True, slots=True)
class KafkaSource:
    bootstrap: str
    topic: str
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    client: KafkaClientConfig = field(default_factory=KafkaClientConfig)

    def stream(self, spark: SparkSession) -> DataFrame:
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .options(**self.client.spark_options())
            .option("subscribe", self.topic)
            .option("startingOffsets", self.starting_offsets)
        )
        if self.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(self.max_offsets_per_trigger))
        return reader.load()

    def events(self, batch: DataFrame) -> tuple[list[RawEvent], int]:
        return records_to_events(batch.select("topic", "partition", "offset", "value").toArrow()), 0

    def known_files(self) -> int | None:
        return None

    def skipped_warning(self) -> str | None:
        return None  # (a topic has no files to skip)


def records_to_events(data: pa.Table) -> list[RawEvent]:
    """Kafka records in (topic, partition, offset) order; a null value reads as ""."""
    records = sorted(
        zip(
            data.column("topic").to_pylist(),
            data.column("partition").to_pylist(),
            data.column("offset").to_pylist(),
            data.column("value").to_pylist(),
            strict=True,
        ),
        key=lambda r: (r[0], r[1], r[2]),
    )
    return [
        RawEvent(
            "" if value is None else bytes(value).decode("utf-8", "surrogateescape"),
            f"{topic}/{partition}/{offset}",
        )
        for topic, partition, offset, value in records
    ]
