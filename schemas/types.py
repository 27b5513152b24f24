"""A small, engine-neutral type language for columns and event fields."""

from __future__ import annotations

from collections.abc import Callable
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


def contains(data_type: DataType, test: Callable[[DataType], bool]) -> bool:
    """Whether `test` holds for the type or for a type nested in it (an array's elements,
    a map's keys and values, a struct's fields)."""
    if test(data_type):
        return True
    if isinstance(data_type, ArrayOf):
        return contains(data_type.element, test)
    if isinstance(data_type, MapOf):
        return contains(data_type.key, test) or contains(data_type.value, test)
    if isinstance(data_type, StructOf):
        return any(contains(t, test) for _, t in data_type.fields)
    return False
