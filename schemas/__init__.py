"""The one definition of kcsim's input events and output tables.

The core's validator (`controller.events`) and the Spark job (`streaming`) both read
these; nothing else spells out a column or a field.
"""

from schemas.events import COMMON_FIELDS, EVENT_FIELDS, EVENT_TYPES, FieldSpec, Kind
from schemas.tables import APPEND_TABLES, STATE_TABLES, TABLES, Column, Table
from schemas.types import ArrayOf, DataType, MapOf, Scalar, StructOf

__all__ = [
    "APPEND_TABLES",
    "COMMON_FIELDS",
    "EVENT_FIELDS",
    "EVENT_TYPES",
    "STATE_TABLES",
    "TABLES",
    "ArrayOf",
    "Column",
    "DataType",
    "FieldSpec",
    "Kind",
    "MapOf",
    "Scalar",
    "StructOf",
    "Table",
]
