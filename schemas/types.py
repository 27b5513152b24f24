"""A small, engine-neutral type language for columns and event fields."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Scalar:
    name: str  # "string" | "int" | "long" | "boolean" | "double"


@dataclass(frozen=True, slots=True)
class ArrayOf:
    element: DataType


@dataclass(frozen=True, slots=True)
class MapOf:
    key: DataType
    value: DataType


@dataclass(frozen=True, slots=True)
class StructOf:
    fields: tuple[tuple[str, DataType], ...]


DataType = Scalar | ArrayOf | MapOf | StructOf

STRING = Scalar("string")
INT = Scalar("int")
LONG = Scalar("long")
BOOLEAN = Scalar("boolean")
DOUBLE = Scalar("double")
INT_LIST = ArrayOf(INT)
