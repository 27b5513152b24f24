"""A lake written without Spark: the core's batches committed with delta-rs, each batch's
commits tagged as the job tags them, the state tables with their Change Data Feed. For
the readers' tests (`kcsim state`, `history`, `report`), in a second instead of a Spark
job's minutes; the job's own writes are tested against replay in
tests/streaming/job/test_spark_job.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from controller.config import Settings
from controller.simulator import RawEvent, Simulator
from schemas import TABLES
from streaming.lake.spark_schemas import arrow_schema, rows_to_arrow
from streaming.lake.tables import commit_tag

CDF = {"delta.enableChangeDataFeed": "true"}


def write_lake(
    root: Path, batches: Sequence[Sequence[RawEvent]], settings: Settings, run_id: str = "run"
) -> Simulator:
    """Every table at `root/<table>`, created empty (version 0), then one commit per table
    a batch changed; returns the simulator after the last batch."""
    for name, table in TABLES.items():
        write_deltalake(
            str(root / name),
            arrow_schema(name).empty_table(),
            configuration=None if table.append_only else CDF,
        )
    simulator = Simulator(settings)
    for batch_id, batch in enumerate(batches):
        output = simulator.apply(list(batch))
        tagged = CommitProperties(custom_metadata={"userMetadata": commit_tag(run_id, batch_id)})
        for name, rows in output.appends.items():
            if len(rows):
                data = rows_to_arrow(rows, name)
                write_deltalake(str(root / name), data, mode="append", commit_properties=tagged)
        for name, table in TABLES.items():
            upserts = output.upserts.get(name) or []
            deletes = output.deletes.get(name) or []
            if not upserts and not deletes:
                continue
            on = " AND ".join(f"s.`{k}` = t.`{k}`" for k in table.key)
            schema = arrow_schema(name)
            parts = []
            if upserts:
                parts.append(_flagged(rows_to_arrow(upserts, name), False))
            if deletes:  # the removed keys, their other columns null
                keys = {k: [row[k] for row in deletes] for k in table.key}
                parts.append(
                    _flagged(
                        pa.Table.from_arrays(
                            [
                                pa.array(keys[f.name], f.type)
                                if f.name in keys
                                else pa.nulls(len(deletes), f.type)
                                for f in schema
                            ],
                            schema=schema,
                        ),
                        True,
                    )
                )
            source = pa.concat_tables(parts)
            columns = {c: f"s.`{c}`" for c in table.column_names}
            (
                DeltaTable(str(root / name))
                .merge(
                    source,
                    on,
                    source_alias="s",
                    target_alias="t",
                    commit_properties=tagged,
                )
                .when_matched_delete("s._deleted")
                .when_matched_update(columns, "NOT s._deleted")
                .when_not_matched_insert(columns, "NOT s._deleted")
                .execute()
            )
    return simulator


def _flagged(data: pa.Table, deleted: bool) -> pa.Table:
    return data.append_column("_deleted", pa.array([deleted] * data.num_rows, pa.bool_()))
