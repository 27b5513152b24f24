"""The fleet mode of `kcsim run --fleet`: each cluster of a batch applied on an executor.

The batch's events are grouped by cluster and cogrouped with those clusters' state rows
(read from Delta, only the clusters present in the batch), and `applyInPandas` rebuilds
each cluster's `Simulator` on an executor, applies its events and returns the output
rows; the driver writes them. Clusters are independent in the core, so this equals
per-cluster replays; it scales out over executors, and needs no state anywhere between
batches (a restart is the same as any batch). The price: a batch costs in proportion to
the size of the clusters it touches (their state is reloaded and shipped every batch),
so it suits fleets of many small or medium clusters; one huge cluster is served better
by the driver mode. Keeping per-cluster contexts alive on executors
(transformWithStateInPandas) would remove the reload but serialize each touched context
into the state store every batch and tie the checkpoint to the context's pickled form;
not done.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from controller.config import Settings
from controller.memory import frozen_heap_released
from controller.simulator import BatchOutput, RawEvent, Simulator
from schemas import APPEND_TABLES, STATE_TABLES
from streaming.lake.tables import RESTORE_TABLES, Lake

_FLEET_OUT = "table string, kind string, row string"
_GROUP = "_kcsim_cluster"


def apply_fleet(
    spark: SparkSession,
    lake: Lake,
    settings: Settings,
    events: Sequence[RawEvent],
    before: dict[str, int],
) -> BatchOutput:
    """Apply a batch per cluster on the executors; see the module docstring."""
    output = BatchOutput(
        appends={t.name: [] for t in APPEND_TABLES},
        upserts={t.name: [] for t in STATE_TABLES},
        deletes={t.name: [] for t in STATE_TABLES},
    )
    if not events:
        return output
    frame = spark.createDataFrame(
        pa.table(
            {
                "ord": pa.array(range(len(events)), pa.int64()),
                "raw": pa.array([e.raw.encode("utf-8", "surrogateescape") for e in events]),
                "source": pa.array([e.source for e in events], pa.string()),
            }
        )
    )
    # The group is the cluster as the core reads it for every valid event (the parser
    # refuses duplicate keys, so get_json_object cannot disagree); lines that are not JSON
    # objects group under null and are rejected whatever the state.
    text = F.col("raw").cast("string")
    frame = frame.withColumn(
        _GROUP,
        F.when(
            F.ltrim(text).startswith("{"),
            F.coalesce(F.get_json_object(text, "$.cluster"), F.lit("default")),
        ),
    )
    clusters = frame.select(_GROUP).distinct()
    state = None
    for name, columns in RESTORE_TABLES.items():
        version = before.get(name)
        table = lake.read(name, None if version is None else version - 1)
        if columns is not None:
            table = table.select(*columns)
        rows = table.join(
            clusters.withColumnRenamed(_GROUP, "cluster"), "cluster", "left_semi"
        ).select(
            F.col("cluster").alias(_GROUP),
            F.lit(name).alias("table"),
            F.to_json(F.struct(*table.columns), {"ignoreNullFields": "false"}).alias("row"),
        )
        state = rows if state is None else state.unionByName(rows)
    assert state is not None
    result = (
        frame.groupBy(_GROUP)
        .cogroup(state.groupBy(_GROUP))
        .applyInPandas(_cluster_function(settings), _FLEET_OUT)
        .toArrow()
    )
    for table, kind, row in zip(
        result.column("table").to_pylist(),
        result.column("kind").to_pylist(),
        result.column("row").to_pylist(),
        strict=True,
    ):
        getattr(output, kind)[table].append(json.loads(row))
    return output


def _cluster_function(settings: Settings) -> Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]:
    # Nested, not module-level: cloudpickle ships a nested function by value, while a
    # module-level one would be imported from `streaming`, which executors do not have
    # (only the core is shipped).
    def apply_cluster(events: pd.DataFrame, state: pd.DataFrame) -> pd.DataFrame:
        with frozen_heap_released():
            tables: dict[str, list[dict[str, Any]]] = {name: [] for name in RESTORE_TABLES}
            for name, row in zip(state["table"], state["row"], strict=True):
                tables[name].append(json.loads(row))
            simulator = Simulator.from_tables(settings, tables)
            events = events.sort_values("ord")
            batch = [
                RawEvent(bytes(raw).decode("utf-8", "surrogateescape"), source)
                for raw, source in zip(events["raw"], events["source"], strict=True)
            ]
            output = simulator.apply(batch)
            out: dict[str, list[str]] = {"table": [], "kind": [], "row": []}
            for kind in ("appends", "upserts", "deletes"):
                for name, rows in getattr(output, kind).items():
                    for row in rows:
                        out["table"].append(name)
                        out["kind"].append(kind)
                        out["row"].append(json.dumps(row, separators=(",", ":")))
            return pd.DataFrame(out)

    return apply_cluster
