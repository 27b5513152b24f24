"""Where `kcsim run` reads its events: event files or a Kafka topic.

Files are read with kcsim's own streaming source (`streaming.job.file_source`: whole
files as bytes, taken in name order whatever their modification times, in every trigger
mode and across restarts; a file copied after one whose name sorts after it is rejected
line by line, never applied out of order), split into lines exactly as `kcsim replay`
splits them, so line numbers are exact for any file size; `source` is "<file name
relative to the source directory>:<line>". Kafka records go in (topic, partition, offset)
order with `source` "<topic>/<partition>/<offset>"; producers key events by cluster, so a
cluster's events share a partition. A record with a null value (a tombstone) is given to
the core as `raw = ""` and so lands in `rejected_events` ("not valid JSON") with its
coordinates; a value is one event, never split into lines.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from controller.replay.event_files import (
    EventFileNameError,
    check_file_name,
    is_event_file,
    skipped_files_warning,
    split_lines,
)
from controller.simulator import RawEvent, Row, refused_rows
from streaming.clients.kafka_config import KafkaClientConfig
from streaming.job.file_source import local_path


@dataclass(frozen=True, slots=True)
class FileSource:
    directory: str
    max_files_per_trigger: int | None = None

    def stream(self, spark: SparkSession, checkpoint: str) -> DataFrame:
        """Files in name order (`streaming.job.file_source`); the names it admitted are
        kept beside the checkpoint's offsets, in `<checkpoint>/files/`."""
        from streaming.job.file_source import FORMAT, KcsimFiles

        spark.dataSource.register(KcsimFiles)
        reader = (
            spark.readStream.format(FORMAT)
            .option("path", self.local_directory())
            .option("checkpoint", local_path(checkpoint))
        )
        if self.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", str(self.max_files_per_trigger))
        return reader.load()

    def events(self, batch: DataFrame) -> tuple[list[RawEvent], int, dict[str, list[Row]]]:
        """The batch's events in order, how many event files it held, and the rows of the
        late files' lines (rejected, never applied: `streaming.job.file_source`)."""
        data = batch.select("admitted", "name", "late_after", "content").toArrow()
        files = sorted(
            zip(
                data.column("admitted").to_pylist(),
                data.column("name").to_pylist(),
                data.column("late_after").to_pylist(),
                data.column("content").to_pylist(),
                strict=True,
            )
        )
        events: list[RawEvent] = []
        refused: dict[str, list[Row]] = {"rejected_events": [], "divergences": []}
        for _, name, late_after, content in files:
            lines = split_lines(content or b"", name)
            if late_after is None:
                events.extend(lines)
                continue
            for table, rows in refused_rows(lines, late_reason(name, late_after)).items():
                refused[table].extend(rows)
        return events, len(files), refused

    def local_directory(self) -> str:
        return local_path(self.directory)

    def known_files(self) -> int | None:
        """How many event files the directory holds now."""
        return len(self._local_names())

    def skipped_warning(self) -> str | None:
        """What replay would say of the files the directory holds now that the job skips."""
        return skipped_files_warning(Path(self.local_directory()))

    def check(self) -> str | None:
        """What is wrong with the directory, before Spark starts (None: nothing)."""
        local = self.local_directory()
        if not os.path.exists(local):
            return f"the source directory {local} does not exist"
        if not os.path.isdir(local):
            return f"the source {local} is not a directory"
        if not os.access(local, os.R_OK | os.X_OK):
            return f"the source directory {local} cannot be read"
        try:
            self.check_names()
        except EventFileNameError as error:
            return str(error)
        return None

    def check_names(self) -> None:
        """Refuse an event file whose name is not UTF-8, as replay does."""
        for name in self._local_names():
            check_file_name(name)

    def _local_names(self) -> list[str]:
        local = self.local_directory()
        return [e.name for e in os.scandir(local) if e.is_file() and is_event_file(e.name)]


def late_reason(name: str, late_after: str) -> str:
    return (
        f"event file {name} arrived after {late_after} had been applied: files apply in name "
        f"order, so it is not applied (give it a name that sorts after {late_after} to apply "
        "its events)"
    )


@dataclass(frozen=True, slots=True)
class KafkaSource:
    bootstrap: str
    topic: str
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    client: KafkaClientConfig = field(default_factory=KafkaClientConfig)

    def stream(self, spark: SparkSession, checkpoint: str) -> DataFrame:
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

    def events(self, batch: DataFrame) -> tuple[list[RawEvent], int, dict[str, list[Row]]]:
        data = batch.select("topic", "partition", "offset", "value").toArrow()
        return records_to_events(data), 0, {}

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
