"""Metadata values as citeline stores them: JSON, with numbers kept as numbers and dates written as ISO 8601.

Front matter (YAML), PDF document info and HTML meta tags hand back dates as ``date``/``datetime`` objects or in
their own notations; each parser passes its values through :func:`json_value`, so a filter compares ``year`` as a
number and ``date`` as a date (``citeline.store.filters``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time
from typing import Any

from citeline.sources import MAX_METADATA_DEPTH


def json_value(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON can hold it: dates and times as ISO 8601 text, mappings with text keys, sequences as
    lists, numbers and booleans as they are (a non-finite float, which JSON cannot hold, as its text).

    Past :data:`~citeline.sources.MAX_METADATA_DEPTH` levels a value is returned as it is, unconverted: the door
    (``document.metadata_problem``) refuses the document for its depth, with one line naming the bound, and this
    recursion cannot reach the stack's end on front matter nested 500 deep first."""
    if depth > MAX_METADATA_DEPTH:
        return value
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(json_value(k, depth + 1)): json_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_value(item, depth + 1) for item in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def present(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` without the empty ones (None, empty text or list), each through :func:`json_value`."""
    return {k: json_value(v) for k, v in fields.items() if v is not None and v != "" and v != []}


_INTEGER = re.compile(r"[+-]?(0|[1-9]\d*)")
_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?|[+-]?\d+[eE][+-]?\d+")


def typed_text(value: str) -> Any:
    """A value that arrives as text (a CSV cell, a reStructuredText field) typed: ``"2021"`` the number 2021,
    ``"4.5"`` the number 4.5, anything else (``"007"``, a code with a leading zero, included) the text itself,
    stripped. Dates stay text: an ISO date is already what a date is stored as."""
    text = value.strip()
    if _INTEGER.fullmatch(text) and len(text) < 19:  # beyond 64 bits a number stops being exact in DuckDB's DOUBLE
        return int(text)
    if _DECIMAL.fullmatch(text):
        number = float(text)
        return number if math.isfinite(number) else text
    return text


#: A number written with a decimal comma (``1.234,56``, ``1 234,56``, ``-0,5``, ``1234,5``): thousands grouped by
#: ``.``, a space, a no-break space (U+00A0) or a narrow no-break space (U+202F), as spreadsheets in most of Europe
#: write them. No leading zero but ``0`` itself (``007`` is a code).
_COMMA_DECIMAL = re.compile(r"[+-]?(0|[1-9]\d{0,2}(?:([. \u00a0\u202f])\d{3})?(?:\2\d{3})*|[1-9]\d*)(,\d+)?")
#: A number written with a decimal point and comma-grouped thousands (``1,234.56``, ``12,000``).
_POINT_DECIMAL = re.compile(r"[+-]?(0|[1-9]\d{0,2}(?:,\d{3})*|[1-9]\d*)(\.\d+)?")
_GROUPING = str.maketrans("", "", ". \u00a0\u202f")


def _comma_decimal(text: str) -> int | float | None:
    if not _COMMA_DECIMAL.fullmatch(text):
        return None
    return _exact(text.translate(_GROUPING).replace(",", "."))


def _point_decimal(text: str) -> int | float | None:
    if not _POINT_DECIMAL.fullmatch(text):
        return None
    return _exact(text.replace(",", ""))


def _exact(text: str) -> int | float | None:
    """A whole number as an exact ``int`` (a float holds 803424719128592394, an 18-digit id, as ...400, the same
    float as the next row's id); past 64 bits, which no reader holds exactly, None: the column stays text."""
    if "." not in text:
        number = int(text)
        return number if -(2**63) <= number < 2**63 else None
    return float(text)


def column_numbers(values: Sequence[str], decimal: str | None = None) -> list[int | float] | None:
    """The numbers a table column's cells (``values``, stripped, none empty) are written as, when the whole column
    agrees on one way of writing numbers that :func:`typed_text` does not read: a decimal comma with ``.`` or
    space thousands (``1.234,56``, ``1 234,56``, ``980,5``), or comma thousands with a decimal point
    (``1,234.56``). Else None: the cells are typed one by one, as before.

    A cell such as ``1.234`` (or ``1,500``) reads both ways; the others decide: with ``980,5`` in the column it is
    1234, with ``12,000.5`` 1.234. When every cell reads both ways, ``decimal`` decides (``","`` for a table
    delimited by ``;``, which is how spreadsheets write tables where the comma is the decimal separator; ``"."``
    for one delimited by ``,``); without it the column is left as it is. A column that holds a cell neither way
    reads (text, a code ``007``, ``1.5`` beside ``1,5``) is not read as numbers, and a column of plain numbers
    (``39``, ``4.5``) needs no reading: None for both. A whole number is an ``int``, as :func:`typed_text` gives."""
    if not values:
        return None
    comma = [_comma_decimal(value) for value in values]
    point = [_point_decimal(value) for value in values]
    readings = [numbers for numbers in (comma, point) if all(number is not None for number in numbers)]
    if len(readings) == 2 and comma != point:
        if decimal not in (",", "."):
            return None  # every cell reads both ways, as different numbers: 1.234 and 2.500 alone say nothing
        readings = [comma if decimal == "," else point]
    if not readings:
        return None
    numbers = [_whole(number) for number in readings[0] if number is not None]
    plain = [typed_text(value) for value in values]
    if all(isinstance(t, int | float) and t == n for t, n in zip(plain, numbers, strict=True)):
        return None  # plain numbers, which typed_text reads as these already
    return numbers


def _whole(number: int | float) -> int | float:
    return int(number) if isinstance(number, float) and number.is_integer() and abs(number) < 2**53 else number
