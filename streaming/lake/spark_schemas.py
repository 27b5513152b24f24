"""`schemas` types as Spark and Arrow types, and rows <-> Arrow for every table.

The Spark job never spells a column: it maps `schemas.TABLES[name]` here. Arrow is the
fast path both ways (rows -> `pa.Table` -> `spark.createDataFrame`, and
`DataFrame.toArrow()` -> rows), so the Arrow schema mirrors the Spark one exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from controller.columns import Columns
from controller.zk.request_log import PayloadRows, RequestLog
from schemas import TABLES, ArrayOf, DataType, MapOf, Scalar, StructOf, Table
from schemas.types import contains

if TYPE_CHECKING:
    from pyspark.sql import types as T

# Spark's types are imported where used: the Arrow half of this module serves the
# Spark-free reads of `kcsim state` and `kcsim history` (streaming.lake.local_reader) too.
_SPARK_SCALARS = {
    "string": "StringType",
    "int": "IntegerType",
    "long": "LongType",
    "boolean": "BooleanType",
    "double": "DoubleType",
}
_ARROW_SCALARS: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int": pa.int32(),
    "long": pa.int64(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
}


def spark_type(data_type: DataType) -> T.DataType:
    from pyspark.sql import types as T

    if isinstance(data_type, Scalar):
        return getattr(T, _SPARK_SCALARS[data_type.name])()
    if isinstance(data_type, ArrayOf):
        return T.ArrayType(spark_type(data_type.element), containsNull=True)
    if isinstance(data_type, MapOf):
        return T.MapType(spark_type(data_type.key), spark_type(data_type.value), True)
    if isinstance(data_type, StructOf):
        return T.StructType([T.StructField(n, spark_type(t), True) for n, t in data_type.fields])
    raise TypeError(f"unknown schema type {data_type!r}")


def arrow_type(data_type: DataType) -> pa.DataType:
    if isinstance(data_type, Scalar):
        return _ARROW_SCALARS[data_type.name]
    if isinstance(data_type, ArrayOf):
        return pa.list_(arrow_type(data_type.element))
    if isinstance(data_type, MapOf):
        return pa.map_(arrow_type(data_type.key), arrow_type(data_type.value))
    if isinstance(data_type, StructOf):
        return pa.struct([pa.field(n, arrow_type(t)) for n, t in data_type.fields])
    raise TypeError(f"unknown schema type {data_type!r}")


def table_schema(table: Table | str) -> T.StructType:
    from pyspark.sql import types as T

    table = TABLES[table] if isinstance(table, str) else table
    return T.StructType([T.StructField(c.name, spark_type(c.type), True) for c in table.columns])


def arrow_schema(table: Table | str) -> pa.Schema:
    table = TABLES[table] if isinstance(table, str) else table
    return pa.schema([pa.field(c.name, arrow_type(c.type)) for c in table.columns])


def key_schema(table: Table | str) -> T.StructType:
    """Only the key columns of a keyed table."""
    from pyspark.sql import types as T

    table = TABLES[table] if isinstance(table, str) else table
    return T.StructType([f for f in table_schema(table).fields if f.name in table.key])


def _maps_to_dicts(value: Any, data_type: DataType) -> Any:
    """Arrow gives a map as [(key, value), ...]; the core's rows hold dicts."""
    if value is None:
        return None
    if isinstance(data_type, MapOf):
        return {k: _maps_to_dicts(v, data_type.value) for k, v in value}
    if isinstance(data_type, ArrayOf):
        return [_maps_to_dicts(v, data_type.element) for v in value]
    if isinstance(data_type, StructOf):
        return {n: _maps_to_dicts(value[n], t) for n, t in data_type.fields}
    return value


def arrow_to_rows(
    data: pa.Table, table: Table | str, partial: bool = False
) -> list[dict[str, Any]]:
    """Rows of `table` (dicts keyed by column name, maps as dicts) from an Arrow table;
    `partial`: of the table's columns `data` holds (else all of them, or KeyError)."""
    table = TABLES[table] if isinstance(table, str) else table
    names = [c for c in table.column_names if not partial or c in data.column_names]
    rows: list[dict[str, Any]] = data.select(names).to_pylist()
    mapped = [
        c
        for c in table.columns
        if c.name in names and contains(c.type, lambda t: isinstance(t, MapOf))
    ]
    for row in rows:
        for column in mapped:
            row[column.name] = _maps_to_dicts(row[column.name], column.type)
    return rows


def arrow_to_columns(data: pa.Table) -> Columns:
    """An Arrow table's columns as Python lists (no map columns: those are lists of pairs
    in Arrow's Python form)."""
    return Columns(tuple(data.column_names), tuple(map(_column_list, data.columns)))


def _column_list(column: pa.ChunkedArray) -> list[Any]:
    """A column's values; a string or integer column's with one object per distinct value.
    Its values repeat (the cluster, a topic's name in each of its partitions' rows, a
    state, an event id in every row that event changed, a partition number or broker id
    past the 256 small ints Python keeps once): one object each made 3M replica_state rows
    ~0.7 GB at 1M partitions, and the context keeps what it loads (event ids, leaders). A
    list of integers comes as a tuple, one object per distinct list (see
    _int_list_column)."""
    data_type = column.type
    if _is_int_list(data_type):
        return _int_list_column(column)
    if not (pa.types.is_string(data_type) or pa.types.is_integer(data_type)):
        return column.to_pylist()
    encoded = column.combine_chunks().dictionary_encode()  # one dictionary for all chunks
    distinct = encoded.dictionary.to_pylist()
    values = np.empty(len(distinct) + 1, dtype=object)
    values[: len(distinct)] = distinct
    values[-1] = None  # a null's
    return _take(values, encoded.indices)


def _take(values: np.ndarray, indices: pa.Array) -> list[Any]:
    """values[i] for each of `indices`; the last of `values` for a null index."""
    return values[indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False)].tolist()


def _is_int_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) and pa.types.is_integer(data_type.value_type)


def _int_list_column(column: pa.ChunkedArray) -> list[tuple[int, ...] | None]:
    """A list-of-integers column as tuples (None for a null), one object per distinct
    list. partition_state has four such columns (replicas, ISR, adding and removing
    replicas): a Python list per row was ~4M objects, ~0.3 GB, at 1M partitions, with only
    ~45k distinct replica lists among them. Each list is made a text in Arrow (C++),
    dictionary-encoded, and only the distinct texts are parsed."""
    texts = pc.binary_join(column.cast(pa.list_(pa.string())), ",").combine_chunks()
    encoded = texts.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    values = np.empty(len(distinct) + 1, dtype=object)  # the last: a null list's None
    for position, text in enumerate(distinct):
        values[position] = tuple(map(int, text.split(","))) if text else ()
    return _take(values, encoded.indices)


def rows_to_arrow(
    rows: Iterable[Mapping[str, Any]], table: Table | str, columns: Iterable[str] | None = None
) -> pa.Table:
    """An Arrow table of `table`'s schema (or only `columns` of it) from core rows."""
    schema = arrow_schema(table)
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    column_array: Callable[[pa.Field, bool], pa.Array]
    if isinstance(rows, RequestLog):
        column_array = _request_log_columns(rows)
    elif isinstance(rows, PayloadRows):
        column_array = _payload_columns(rows.log)
    else:
        rows = rows if isinstance(rows, list) else list(rows)
        values = _columns(rows, schema.names)

        def column_array(field: pa.Field, escape: bool) -> pa.Array:
            column = values[field.name]
            return _column_array(_escaped(column) if escape else column, field.type)

    try:
        arrays = [column_array(f, False) for f in schema]
    except UnicodeEncodeError:
        # An undecodable input byte reaches the core as a lone surrogate escape; Delta
        # strings are UTF-8, so it is stored as the text "\\udcXX" (the byte stays known).
        arrays = [column_array(f, True) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _request_log_columns(log: RequestLog) -> Callable[[pa.Field, bool], pa.Array]:
    """Columns of a RequestLog (`controller_requests`): a body's shared values converted
    once and repeated for its recipients with `take` (in C), the recipients' own values as
    they are."""
    rows_request = pa.array(np.frombuffer(log.request_of_row(), np.int64).copy())
    shared, own = log.request_columns(), log.recipient_columns()

    def column_array(field: pa.Field, escape: bool) -> pa.Array:
        if field.name in own:  # C arrays of numbers and booleans (as bytes)
            column = own[field.name]
            # copied: an array whose buffer is exported refuses to grow, and the log may
            # still be added to after its rows are written
            values = np.frombuffer(column, _NUMPY_TYPES[column.typecode]).copy()
            return pa.array(values.astype(bool) if field.type == pa.bool_() else values)
        values_of_bodies = shared[field.name]
        return pa.array(
            _escaped(values_of_bodies) if escape else values_of_bodies, field.type
        ).take(rows_request)

    return column_array


def _payload_columns(log: RequestLog) -> Callable[[pa.Field, bool], pa.Array]:
    """Columns of a RequestLog's bodies (`request_payloads`): one value per body."""
    shared = log.request_columns()

    def column_array(field: pa.Field, escape: bool) -> pa.Array:
        column = shared[field.name]
        return pa.array(_escaped(column) if escape else column, field.type)

    return column_array


_NUMPY_TYPES = {"i": np.int32, "b": np.int8}  # RECIPIENT_COLUMNS' array typecodes


def _escaped(values: list[Any]) -> list[Any]:
    return [_escape_surrogates(v) for v in values]


def _columns(rows: list[Mapping[str, Any]], names: list[str]) -> dict[str, list[Any]]:
    """Rows to columns, at C speed when every row has every column (the core's rows do)."""
    if not rows:
        return {name: [] for name in names}
    try:
        values = list(map(itemgetter(*names), rows))
    except KeyError:
        return {name: [row.get(name) for row in rows] for name in names}
    if len(names) == 1:
        return {names[0]: values}
    return dict(zip(names, map(list, zip(*values, strict=True)), strict=True))


def _column_array(values: list[Any], arrow: pa.DataType) -> pa.Array:
    """One column. A nested value shared by many rows (an UpdateMetadata's partition list
    fanned out to every broker is one list object in all its rows) is converted once and
    repeated with `take`, which is most of the cost of a request batch."""
    if not pa.types.is_nested(arrow) or len(values) < 2:
        return pa.array(values, arrow)
    index_of: dict[int, int] = {}
    distinct: list[Any] = []
    indices: list[int] = []
    for value in values:
        key = id(value)
        position = index_of.get(key)
        if position is None:
            position = index_of[key] = len(distinct)
            distinct.append(value)
        indices.append(position)
    if len(distinct) == len(values):
        return pa.array(values, arrow)
    return pa.array(distinct, arrow).take(pa.array(indices, pa.int32()))


def _escape_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, list):
        return [_escape_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_escape_surrogates(k): _escape_surrogates(v) for k, v in value.items()}
    return value
