"""Metadata values as citeline stores them: JSON, with numbers kept as numbers and dates written as ISO 8601.

Front matter (YAML), PDF document info and HTML meta tags hand back dates as ``date``/``datetime`` objects or in
their own notations; each parser passes its values through :func:`json_value`, so a filter compares ``year`` as a
number and ``date`` as a date (``citeline.store.filters``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
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
