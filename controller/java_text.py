"""Text as Java parses it, for values Kafka reads with ConfigDef (settings and topic
configs): String.trim, Integer/Long.parseInt, Double.parseDouble and Double.toString,
String.equalsIgnoreCase. Python's own parsers differ at the edges (int() takes "1_0",
strip() drops Unicode spaces), and kcsim must accept exactly what Kafka accepts."""

from __future__ import annotations

import math
import re
import unicodedata
from decimal import Decimal

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

_JAVA_TRIMMED = "".join(map(chr, range(0x21)))  # String.trim drops these at both ends
# one way only to split a digit run (an optional "." then digits could split it many
# ways, and a failed match on a long run would try them all)
_DEC = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_HEX = r"0[xX](?:[0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+"
_JAVA_DOUBLE = re.compile(rf"([+-]?)(?:(NaN)|(Infinity)|({_DEC})[fFdD]?|({_HEX})[fFdD]?)")


class NotANumber(ValueError):
    """Java's NumberFormatException."""


def java_trim(text: str) -> str:
    return text.strip(_JAVA_TRIMMED)


def _java_digit(char: str) -> int:
    # Character.digit(char, 10): a decimal digit of any script, one UTF-16 unit long.
    if ord(char) > 0xFFFF:
        return -1
    return unicodedata.decimal(char, -1)


def parse_java_integer(text: str, low: int, high: int) -> int:
    """Integer.parseInt / Long.parseLong on `text` (already trimmed), in [low, high]."""
    sign, digits = 1, text
    if text[:1] in ("+", "-"):
        sign, digits = (-1 if text[0] == "-" else 1), text[1:]
    if not digits:
        raise NotANumber(text)
    value = 0
    for char in digits:
        digit = _java_digit(char)
        if digit < 0:
            raise NotANumber(text)
        value = value * 10 + digit
        if sign * value < low or sign * value > high:  # also stops huge inputs early
            raise NotANumber(text)
    return sign * value


def parse_java_double(text: str) -> float:
    """Double.parseDouble on `text` (already trimmed)."""
    match = _JAVA_DOUBLE.fullmatch(text)
    if match is None:
        raise NotANumber(text)
    sign, nan, infinity, decimal, hexadecimal = match.groups()
    negative = sign == "-"
    if nan:
        return math.nan
    if infinity:
        return -math.inf if negative else math.inf
    try:
        value = float(decimal) if decimal else float.fromhex(hexadecimal)
    except OverflowError:  # fromhex past the double range; Java rounds to Infinity
        value = math.inf
    return -value if negative else value


def java_double_text(value: float) -> str:
    """Double.toString: shortest digits; plain from 10^-3 up to 10^7, else d.dddE<n>."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return f"{sign}0.0"
    shape = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, shape.digits)).rstrip("0") or "0"
    exponent = len(shape.digits) + int(shape.exponent) - 1  # power of ten of the first digit
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            return f"{sign}{whole}.{digits[exponent + 1 :] or '0'}"
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def java_equals_ignore_case(text: str, expected: str) -> bool:
    # String.equalsIgnoreCase compares char by char through upper, then lower case.
    def upper(char: str) -> str:
        mapped = char.upper()
        return mapped if len(mapped) == 1 else char

    def lower(char: str) -> str:
        mapped = char.lower()
        return mapped if len(mapped) == 1 else char

    return len(text) == len(expected) and all(
        a == b or upper(a) == upper(b) or lower(upper(a)) == lower(upper(b))
        for a, b in zip(text, expected, strict=True)
    )
