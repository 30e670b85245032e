"""Structured search filters, turned into parameterized SQL that selects the chunks a search may return.

A filter restricts the candidates *before* ranking (see :func:`citeline.query.plan.rank_chunks`'s ``allowed``), so a
search returns k passages whenever k matching passages exist, however low the matching ones would rank overall.
Every user value is a bound SQL parameter — metadata key names included — so quotes and SQL fragments in a
filter are plain values that match nothing unusual.

Keys (several keys AND together; a list of values for one key means any of them):

``source``
    A source as the user knows it: a folder or file that was ingested, or any folder or file below one (resolved
    like ``citeline ingest`` resolves its paths, so ``seeds`` and ``/abs/path/seeds`` are the same source), or a
    document's ``source_id`` as search results show it (the path relative to its ingested root), or the source
    name of texts added with ``Index.add_texts`` (``texts`` by default).
``path_glob``
    A glob (``*``, ``?``, ``[abc]``; ``*`` also matches ``/``) over the document's ``source_id`` or its absolute
    path: ``*.md``, ``reports/2024/*``, ``/data/**.pdf``.
``ingested_after`` / ``ingested_before``
    An ISO 8601 date or date-time (a ``date``/``datetime`` in Python). The document version was ingested at or
    after ``ingested_after`` and strictly before ``ingested_before`` (a half-open range, so ``2026-01-01`` to
    ``2026-02-01`` is January). Times without a zone are UTC.
``meta``
    ``{key: condition}`` over the document's metadata (front matter, JSONL and CSV record fields, HTML meta tags,
    PDF document info). Keys are top-level metadata keys. A plain value means equality: text matches the metadata
    value's text (so ``"2020"`` matches the number 2020, as ``--where year=2020`` needs) or an item of a list value
    (``tags: [a, b]`` matches ``"a"``), numbers match numerically, booleans match ``true``/``false`` in any case
    (a CSV cell ``TRUE``), a ``date`` matches a date (a date-time on that day). A list of values means any of
    them. A dict of operators to values means all of them (``{"year": {">=": 2020, "<": 2023}}``):

    - ``=`` / ``in``: equal to the value (``in``: to any of a list of values), as a plain value; text that reads
      as a number is also equal to every value that reads as the same number (``"39"`` matches ``39.00``; a code
      ``"007"``, ``NaN`` and ``1_000`` read as no number; whole numbers past 2**53 compare exactly);
    - ``!=``: equal to none of the values; a document without the key matches;
    - ``~``: the value's text contains this text, ignoring case (``{"author": {"~": "mara"}}`` matches
      "Mara Ilves"; a list means any of them);
    - ``>``, ``>=``, ``<``, ``<=``: ordered as numbers when the value is a number (or text that reads as one),
      as dates when it is a ``date`` or an ISO date (``2021-03-04``), as date-times when it is a ``datetime`` or an
      ISO date-time (without a zone: UTC), else as text. Metadata values that are not of that kind (a year
      written ``"about 2020"``) never match.

    The CLI's and the HTTP API's ``where`` (``year>=2021``, ``author~mara``, ``tag in a,b``) parse into this shape
    with :func:`where_meta`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from citeline.errors import QueryError
from citeline.store.connection import check_text
from citeline.util import paths
from citeline.util.declared import option

__all__ = ["FILTER_KEYS", "META_OPERATORS", "FilterOptions", "Filters", "filters_from", "where_meta"]

FILTER_KEYS = ("source", "path_glob", "ingested_after", "ingested_before", "meta")

MetaValue = str | int | float | bool | date | datetime

#: The operators of a ``meta`` condition (and of ``--where``), each with the SQL comparison it becomes.
META_OPERATORS = ("=", "!=", "~", ">", ">=", "<", "<=", "in")
_ORDERING = (">", ">=", "<", "<=")
#: Operators that take a list of values: ``=``/``in``/``~`` match any of them, ``!=`` none of them.
_MANY = ("=", "in", "~", "!=")
#: The metadata key under which citeline stores its own fields (``citeline.store.metadata``): not user metadata.
_RESERVED_KEY = "_citeline"


@dataclass(frozen=True)
class Filters:
    """A validated filter. Build it with :meth:`from_value`; an empty ``Filters()`` selects everything."""

    source: tuple[str, ...] = ()
    path_glob: tuple[str, ...] = ()
    ingested_after: datetime | None = None
    ingested_before: datetime | None = None
    #: ``(key, operator, values)`` conditions, all of which hold (``=`` is stored as ``in``)
    meta: tuple[tuple[str, str, tuple[MetaValue, ...]], ...] = field(default=())

    @classmethod
    def from_value(cls, value: Filters | Mapping[str, Any] | None) -> Filters:
        """Validate a filter dict (or pass a ``Filters`` through); raises :class:`QueryError` naming the bad key."""
        if value is None:
            return cls()
        if isinstance(value, Filters):
            return value
        if not isinstance(value, Mapping):
            raise QueryError(
                f"filters must be a dict such as {{'source': 'seeds', 'meta': {{'author': 'x'}}}}, "
                f"not {type(value).__name__}"
            )
        unknown = [key for key in value if key not in FILTER_KEYS]
        if unknown:
            raise QueryError(f"unknown filter key {unknown[0]!r}; filters take {', '.join(FILTER_KEYS)}")
        after = _datetime("ingested_after", value.get("ingested_after"))
        before = _datetime("ingested_before", value.get("ingested_before"))
        if after is not None and before is not None and after >= before:
            raise QueryError(
                f"ingested_after ({after.isoformat()}) must be earlier than ingested_before ({before.isoformat()})"
            )
        return cls(
            source=_strings("source", value.get("source")),
            path_glob=_strings("path_glob", value.get("path_glob")),
            ingested_after=after,
            ingested_before=before,
            meta=_meta(value.get("meta")),
        )

    def __bool__(self) -> bool:
        return bool(self.source or self.path_glob or self.ingested_after or self.ingested_before or self.meta)

    def kind_problem(self, counts: Mapping[tuple[str, str | None], int]) -> QueryError | None:
        """Why this filter selects nothing when an ordered comparison of numbers or dates (``Revenue>5000``,
        ``date<2020-01-01``) is on a field that holds values but never one of that kind (``"1.234,56 EUR"``, ``"n/a"``),
        else None. ``counts``: every document's values per field (``documents.FacetCounts``, the unfiltered facet
        counts each reader keeps), so asking costs nothing once they are counted; a search asks only when its
        filter selected nothing."""
        for key, operator, values in self.meta:
            if operator not in _ORDERING:
                continue
            cast, _ = _ordered(values[0])
            kind = _KINDS.get(cast)
            if kind is None:
                continue  # a comparison of text: any value compares
            held = [text for (field_key, text), _ in counts.items() if field_key == key and text is not None]
            if not held or any(_reads_as(cast, text) for text in held):
                continue
            examples = ", ".join(repr(text if len(text) <= 30 else text[:29] + "…") for text in sorted(held)[:3])
            return QueryError(
                f"filter {key}{operator}{values[0]} compares {kind}, but no document's {key!r} is "
                f"{_ONE[kind]} (it holds values such as {examples}); write {kind} in the source ({_HOW[kind]}), or "
                f"match the text with {key}=VALUE or {key}~TEXT"
            )
        return None

    def to_sql(self) -> tuple[str, list[Any]]:
        """A ``WHERE`` condition over ``documents d`` and its parameters (``TRUE`` when nothing is filtered).

        Only constant SQL text is joined here; every value, metadata keys included, travels as a parameter.
        """
        clauses: list[str] = []
        params: list[Any] = []
        if self.source:
            any_of = []
            for source in self.source:
                # A root as ingested, a folder or file below it, or a source_id as results show it. starts_with
                # (not LIKE) so that % and _ in paths are plain characters.
                # The source as given matches the source of texts (``Index.add_texts``: never an absolute path).
                resolved = _resolved(source)
                any_of.append(
                    "(d.source_root = ? OR d.source_root = ? OR d.path = ? OR starts_with(d.path, ?) "
                    "OR d.source_id = ?)"
                )
                params += [resolved, source, resolved, resolved.rstrip(os.sep) + os.sep, source]
            clauses.append("(" + " OR ".join(any_of) + ")")
        if self.path_glob:
            clauses.append("(" + " OR ".join("(d.source_id GLOB ? OR d.path GLOB ?)" for _ in self.path_glob) + ")")
            for pattern in self.path_glob:
                params += [pattern, pattern]
        if self.ingested_after is not None:
            clauses.append("d.ingested_at >= ?")
            params.append(self.ingested_after)
        if self.ingested_before is not None:
            clauses.append("d.ingested_at < ?")
            params.append(self.ingested_before)
        for key, operator, values in self.meta:
            clause, clause_params = _meta_sql(_json_pointer(key), operator, values)
            clauses.append(clause)
            params += clause_params
        return (" AND ".join(clauses) or "TRUE"), params


def _strings(key: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    values = [value] if isinstance(value, str | os.PathLike) else value
    if not isinstance(values, Sequence) or isinstance(values, bytes):
        raise QueryError(f"filter {key!r} must be text or a list of text, not {type(value).__name__}")
    out = []
    for item in values:
        if isinstance(item, os.PathLike):
            item = os.fspath(item)
        if not isinstance(item, str):
            raise QueryError(f"filter {key!r} must be text or a list of text; got {item!r}")
        if not item.strip():
            raise QueryError(f"filter {key!r} is empty; give a value or leave the key out")
        if "\0" in item:
            raise QueryError(f"filter {key!r} contains a NUL character: {item!r}")
        _text(key, item)
        if key == "source":
            _resolved(item)
        out.append(item)
    return tuple(out)


def _resolved(source: str) -> str:
    # The source as `citeline ingest` resolves a path; a path that cannot be resolved is a QueryError.
    try:
        return str(paths.resolved(source))
    except paths.UnresolvablePath as exc:  # ~nosuchuser ("Could not determine home directory"), a symlink loop
        raise QueryError(f"filter 'source' {source!r} cannot be resolved as a path: {exc}") from None


def _datetime(key: str, value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())  # a bare date is its midnight
        except ValueError:
            raise QueryError(
                f"filter {key!r} is not an ISO 8601 date or date-time: {value!r} "
                "(write it like 2026-01-31 or 2026-01-31T08:00:00+00:00)"
            ) from None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime.combine(value, time(0), tzinfo=UTC)
    raise QueryError(f"filter {key!r} must be an ISO 8601 date, a date or a datetime, not {type(value).__name__}")


def _meta(value: object) -> tuple[tuple[str, str, tuple[MetaValue, ...]], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise QueryError(f"filter 'meta' must be a dict of metadata key to value, not {type(value).__name__}")
    out = []
    for key, wanted in value.items():
        if not isinstance(key, str) or not key:
            raise QueryError(f"filter 'meta' keys must be non-empty text; got {key!r}")
        _text("meta", key)
        if key == _RESERVED_KEY:
            raise QueryError(f"filter 'meta' key {key!r} is citeline's own (not metadata); filter on another key")
        conditions = wanted.items() if isinstance(wanted, Mapping) else [("in", wanted)]
        for operator, operand in conditions:
            if operator not in META_OPERATORS:
                raise QueryError(
                    f"filter 'meta' key {key!r}: unknown operator {operator!r}; use one of {', '.join(META_OPERATORS)}"
                )
            out.append((key, "in" if operator == "=" else operator, _meta_values(key, operator, operand)))
    return tuple(out)


def _meta_values(key: str, operator: str, operand: object) -> tuple[MetaValue, ...]:
    values = list(operand) if isinstance(operand, list | tuple) else [operand]
    if not values:
        raise QueryError(f"filter 'meta' key {key!r} has an empty list of values")
    if len(values) > 1 and operator not in _MANY:
        raise QueryError(f"filter 'meta' key {key!r}: {operator!r} takes one value, not a list")
    checked: list[MetaValue] = []
    for item in values:
        if not isinstance(item, str | int | float | date) or (isinstance(item, float) and item != item):
            raise QueryError(
                f"filter 'meta' key {key!r}: values must be text, numbers, dates or true/false, not {item!r}"
            )
        if isinstance(item, int) and not isinstance(item, bool):
            try:
                float(item)  # compared as a DOUBLE: 10**400 has no such value
            except OverflowError:
                # Not str(item): past 4,300 digits Python refuses to write an int in decimal (a bare ValueError).
                digits = int(item.bit_length() * math.log10(2)) + 1
                raise QueryError(
                    f"filter 'meta' key {key!r}: a number of about {digits} digits is too large to compare "
                    "(the largest is about 1.8e308)"
                ) from None
        if isinstance(item, str):
            _text("meta", item)
            if operator == "~" and not item:
                raise QueryError(f"filter 'meta' key {key!r}: '~' needs some text to look for")
        checked.append(item)
    return tuple(checked)


def _meta_sql(pointer: str, operator: str, values: tuple[MetaValue, ...]) -> tuple[str, list[Any]]:
    """One ``meta`` condition as SQL over ``documents d`` and its parameters (the pointer is a parameter too).

    The values of ``=``/``in``/``!=`` travel as one list parameter per kind (text, numbers, dates, ...), matched
    with ``IN (SELECT unnest(?))`` (a hash join): one ``OR`` and four parameters a value made a statement of
    thousands of values take tens of seconds and gigabytes to bind, while a set costs the same for one value as
    ``= ?`` did (figures: docs/scale.md#choices-measured-in-the-code).
    """
    text = "json_extract_string(d.metadata, ?)"
    if operator in _ORDERING:
        (value,) = values
        cast, typed = _ordered(value)
        whole = _whole(value)
        if whole is not None and _EXACT_INTEGER <= abs(whole) < _EXACT_DECIMAL:
            # Past 2**53 the DOUBLEs of neighbouring whole numbers are equal: where they are, the exact
            # decimals decide (``id>1234567890123456789`` holds for ...790, whose DOUBLE is the same).
            (number, reads), (exact, reads_exact) = _read(cast, pointer), _read(_AS_DECIMAL, pointer)
            return (
                f"({number} {operator[0]} ? OR ({number} = ? AND {exact} {operator} ?))",
                [*reads, typed, *reads, typed, *reads_exact, Decimal(whole)],
            )
        sql, reads = _read(cast, pointer)
        return f"{sql} {operator} ?", [*reads, typed]
    any_of: list[str] = []
    params: list[Any] = []
    if operator == "~":
        for value in values:
            any_of.append(f"contains(lower({text}), ?)")
            params += [pointer, str(value).lower()]
    else:
        # cast of the metadata text -> (SQL type of the list, the typed values); bools match their text only.
        groups: dict[str, tuple[str, list[Any]]] = {}
        strings: list[str] = []
        for value in values:
            if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in _BOOLEANS):
                # A boolean is its word in any case: JSON's true, and a spreadsheet's TRUE or pandas' True cell
                # (a CSV cell is text), which active=true missed.
                word = str(value).strip().lower()
                groups.setdefault(_AS_BOOLEAN, ("VARCHAR", []))[1].append(word)
                if not isinstance(value, bool):
                    strings.append(value)
            elif isinstance(value, date):
                cast, typed = _ordered(value)
                groups.setdefault(cast, (_LIST_TYPES[cast], []))[1].append(typed)
            elif isinstance(value, int | float):
                _add_number(groups, value)
            else:
                strings.append(str(value))
                reading = _number(str(value))
                if reading is not None:
                    # Text that reads as a number (``price=39`` from --where) also equals the numbers it reads
                    # as, as an ordered comparison reads it: a cell 39.00 (stored as the number 39.0, text
                    # "39.0") is then matched by 39, 39.0, 39.00, +39 and 3.9e1 alike; its text still matches too.
                    _add_number(groups, _whole(value) or reading)
        for cast, (sql_type, typed_values) in groups.items():
            sql, reads = _read(cast, pointer)
            any_of.append(f"{sql} IN (SELECT unnest(?::{sql_type}[]))")
            params += [*reads, typed_values]
        if strings:
            # The value's text, or an item of a list value (TRY_CAST gives NULL for anything but a list).
            any_of.append(
                f"({text} IN (SELECT unnest(?::VARCHAR[])) OR EXISTS (SELECT 1 FROM "
                "unnest(TRY_CAST(json_extract(d.metadata, ?) AS VARCHAR[])) AS item(v) "
                "WHERE item.v IN (SELECT unnest(?::VARCHAR[]))))"
            )
            params += [pointer, strings, pointer, strings]
    condition = "(" + " OR ".join(any_of) + ")"
    if operator == "!=":
        # No value equal: a document without the key (NULL) has none of them, so it matches.
        return f"NOT coalesce({condition}, FALSE)", params
    return condition, params


def _whole(value: MetaValue) -> int | None:
    """``value`` as a whole number when it is one exactly: an ``int``, a whole ``float``, or text that writes one
    (``1234567890123456789``, ``1234567890123456789.0``, ``1.2345e4``; not ``007``, a code); else None."""
    if isinstance(value, bool | date):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    text = value.strip()
    if not _NUMBER.fullmatch(text):
        return None
    number = Decimal(text)
    if number.adjusted() > 40 or number != number.to_integral_value():  # 1e999999: no need to write its digits
        return None
    return int(number)


def _read(cast: str, pointer: str) -> tuple[str, list[str]]:
    """``cast`` (a template: ``{}`` or ``{0}`` the metadata value's text, ``{1}`` the JSON pointer) over the value at
    ``pointer``: its SQL, and the pointer once for each place the SQL reads it (every ``?`` of a cast is one)."""
    sql = cast.format("json_extract_string(d.metadata, ?)", "?")
    return sql, [pointer] * (cast.count("{}") + cast.count("{0}") + cast.count("{1}"))


def _add_number(groups: dict[str, tuple[str, list[Any]]], number: int | float) -> None:
    """Add an equality with ``number`` to ``groups``: as a DOUBLE, or, a whole number past 2**53, as its digits."""
    whole = _whole(number)
    if whole is not None and _EXACT_INTEGER <= abs(whole) < _EXACT_DECIMAL:
        groups.setdefault(_AS_DECIMAL, ("DECIMAL(38, 10)", []))[1].append(Decimal(whole))
    else:
        groups.setdefault(_AS_NUMBER, ("DOUBLE", []))[1].append(float(number))


#: The words of a boolean, and the stored value's text as one of them (``True``, ``TRUE`` and ``true`` alike).
_BOOLEANS = ("true", "false")
_AS_BOOLEAN = "lower(trim({}))"


#: The SQL list type of the values each cast of :func:`_ordered` compares with.
_LIST_TYPES = {
    "TRY_CAST({} AS TIMESTAMPTZ)": "TIMESTAMPTZ",
    "TRY_CAST({} AS DATE)": "DATE",
}


#: Text that reads as a number, the same at search as at ingest (``citeline.sources.metadata.typed_text``): ``39``,
#: ``39.00``, ``+39``, ``3.9e1``, ``.5``, ``-0``. Not a code with a leading zero (``007``, ``02134``: text, as ingest
#: keeps it), nor what DuckDB's cast alone would also read (``nan``, ``inf``, ``1_000``, `` 0x10``), which would make
#: ``price>100`` match a NaN cell.
_NUMBER_PATTERN = r"[+-]?((0|[1-9][0-9]*)(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?"
_NUMBER = re.compile(_NUMBER_PATTERN)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: The cast of a metadata value's text that compares it as a number: only text :data:`_NUMBER` reads (anything
#: else is NULL, which matches nothing), so a stored code ``007`` or ``NaN`` is never a number.
_AS_NUMBER = (
    "CASE json_type(d.metadata, {1}) WHEN 'VARCHAR' THEN CASE WHEN regexp_full_match(trim({0}), '"
    + _NUMBER_PATTERN
    + "') THEN TRY_CAST({0} AS DOUBLE) END ELSE TRY_CAST({0} AS DOUBLE) END"
)
# (A JSON number is written as one already, and is cast at once: the pattern is matched against text values only,
# which keeps a filter over a million documents' numbers about as fast as a bare cast.)
#: Whole numbers from 2**53 to 10**27 are compared as exact decimals, since a DOUBLE holds them only to the nearest
#: representable one (1234567890123456789 and ...790 are the same DOUBLE: one tweet id would match its neighbours).
#: DECIMAL(38, 10) holds 28 whole digits; a stored integer is at most 64 bits (docs/sources.md), and past 10**27
#: numbers compare as DOUBLEs again (a float 1e30 is no exact number either).
_EXACT_INTEGER, _EXACT_DECIMAL = 2**53, 10**27
_AS_DECIMAL = _AS_NUMBER.replace("AS DOUBLE", "AS DECIMAL(38, 10)")


def _number(text: str) -> float | None:
    """The number ``text`` reads as (``39``, ``39.00``, ``+39``, ``3.9e1``; spaces around it aside), else None."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    number = float(text)
    return number if math.isfinite(number) else None


def _ordered(value: MetaValue) -> tuple[str, Any]:
    """How to compare with ``value``: a SQL cast of the metadata value's text (``{}``) and the typed parameter."""
    if isinstance(value, datetime):
        return "TRY_CAST({} AS TIMESTAMPTZ)", value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return "TRY_CAST({} AS DATE)", value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _AS_NUMBER, float(value)
    text = str(value).strip()
    if _NUMBER.fullmatch(text):
        return _AS_NUMBER, float(text)
    if _ISO_DATE.match(text):
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:  # "2021-13-45", "2021-03-04 or so": compared as text
            pass
        else:
            return _ordered(moment.date() if _ISO_DATE.fullmatch(text) else moment)
    return "{}", str(value)


#: What an ordered comparison's cast compares, as its error names it.
_KINDS = {_AS_NUMBER: "numbers", "TRY_CAST({} AS DATE)": "dates", "TRY_CAST({} AS TIMESTAMPTZ)": "dates"}
_ONE = {"numbers": "a number", "dates": "a date"}
#: How a value of each kind is written so that citeline reads it as one.
_HOW = {
    "numbers": "39.5, or a table column of 1.234,56 or 1,234.56 throughout: docs/sources.md#metadata",
    "dates": "ISO 8601: 2021-03-04 or 2021-03-04T10:15:00+01:00",
}


def _reads_as(cast: str, text: str) -> bool:
    """Whether a stored value's text (``counts``' form: JSON text for numbers) compares as ``cast`` compares."""
    if cast == _AS_NUMBER:
        return _number(text) is not None
    try:
        datetime.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


#: ``--where`` clauses: ``KEY in A,B`` (the key holds no operator character or space), else ``KEY OP VALUE`` with
#: the first operator in the text (two-character ones first).
_WHERE_IN = re.compile(r"\s*([^=!<>~\s]+)\s+in\s+(.*)", re.DOTALL)
_WHERE_OP = re.compile(r"\s*([^=!<>~]*?)\s*(!=|>=|<=|=|>|<|~)\s*(.*)", re.DOTALL)


def where_meta(clauses: Sequence[str]) -> dict[str, Any]:
    """``where`` clauses of the CLI and the HTTP API as the ``meta`` filter dict.

    ``KEY=VALUE``, ``KEY!=VALUE``, ``KEY~TEXT``, ``KEY>VALUE`` (``>=``, ``<``, ``<=``) and ``KEY in A,B``; spaces
    around the operator are dropped. Clauses on different keys AND together; on one key, repeated ``=`` (and
    ``in``, ``~``) match any of their values and ``!=`` none of them, and the ordering operators AND (a range:
    ``year>=2020`` and ``year<2023``). Raises :class:`QueryError` for a clause that is none of these.
    """
    meta: dict[str, dict[str, Any]] = {}
    for clause in clauses:
        found = _WHERE_IN.fullmatch(clause) or _WHERE_OP.fullmatch(clause)
        if found is None or not found.group(1):
            raise QueryError(f"{clause!r} is not key=value (nor key!=value, key~text, key>=value or 'key in a,b')")
        if found.re is _WHERE_IN:
            key, operator, values = found.group(1), "=", [v.strip() for v in found.group(2).split(",")]
        else:
            key, operator, values = found.group(1), found.group(2), [found.group(3)]
        conditions = meta.setdefault(key, {})
        if operator in _MANY:
            conditions[operator] = [*conditions.get(operator, []), *values]
        elif operator in conditions:
            raise QueryError(f"{key}{operator} is given twice; give each of >, >=, <, <= once per key")
        else:
            conditions[operator] = values[0]
    return meta


#: The longest ``ingested_after``/``ingested_before`` a surface takes (an ISO 8601 date-time is far shorter).
MAX_DATE_CHARS = 64


@dataclass(frozen=True)
class FilterOptions:
    """The filter options of a search and a listing, declared once (``citeline.util.declared``: help, bounds and the
    CLI's flags): every surface generates its filter parameters from these fields (the CLI's ``--source``,
    ``--path``, ``--where``, ``--ingested-after``, ``--ingested-before``; the HTTP API's and the MCP tools' of the
    same names) and :func:`filters_from` makes them a request's ``filters``. A list option is repeatable (several
    values of one key OR; several keys AND); ``maximum`` of a text is its length; ``form``: how the search page's
    form shows it (``label``, ``placeholder``, an input ``type``)."""

    source: tuple[str, ...] = option(
        (), "Only this ingested folder or file (or a source id).", metavar="PATH",
        form={"label": "Source (ingested folder or file)"},
    )  # fmt: skip
    path: tuple[str, ...] = option(
        (), "Only documents whose source id or path matches this glob, e.g. '*.md'.", metavar="GLOB",
        flags=("--path", "path_glob"),  # the CLI's commands name it path_glob
        form={"label": "Path glob", "placeholder": "*.md"},
    )  # fmt: skip
    where: tuple[str, ...] = option(
        (),
        "KEY=VALUE: only documents whose metadata KEY is VALUE (numbers as numbers: price=39 matches 39.00); also "
        "KEY!=VALUE, KEY~TEXT (contains, any case), KEY>VALUE, >=, <, <= (numbers as numbers, dates as dates) and "
        "'KEY in A,B' (keys AND; a repeated KEY=VALUE ORs, a range ANDs).",
        metavar="KEY=VALUE",
        form={"label": "Metadata KEY=VALUE", "placeholder": "author=Mara"},
    )
    ingested_after: str | None = option(
        None, "Only documents ingested at or after this date (ISO 8601).", metavar="DATE", maximum=MAX_DATE_CHARS,
        form={"label": "Ingested after", "type": "date"},
    )  # fmt: skip
    ingested_before: str | None = option(
        None, "Only documents ingested before this date (ISO 8601).", metavar="DATE", maximum=MAX_DATE_CHARS,
        form={"label": "Ingested before", "type": "date"},
    )  # fmt: skip


def filters_from(
    source: Sequence[str] | None = None,
    path: Sequence[str] | None = None,
    where: Sequence[str] | None = None,
    ingested_after: str | None = None,
    ingested_before: str | None = None,
    *,
    where_name: str = "where",
) -> dict[str, Any]:
    """The filter dict of a :class:`~citeline.query.plan.SearchRequest` (and ``Index.documents``) from the filter
    options every surface takes under the same names: the CLI's ``--source``, ``--path``, ``--where``,
    ``--ingested-after`` and ``--ingested-before``, the HTTP API's and the page's query parameters, the MCP tools'
    ``filters``. Keys not given are left out; ``where`` clauses are read by :func:`where_meta`. A malformed clause
    raises :class:`QueryError` ``Invalid value for <where_name>: ...`` (the CLI names its flag ``'--where'``)."""
    try:
        meta = where_meta(where or [])
    except QueryError as exc:
        raise QueryError(f"Invalid value for {where_name}: {exc}") from None
    values = {
        "source": list(source or []),
        "path_glob": list(path or []),
        "meta": meta,
        "ingested_after": ingested_after,
        "ingested_before": ingested_before,
    }
    return {key: value for key, value in values.items() if value}


def _text(key: str, value: str) -> None:
    # Text that cannot be encoded as UTF-8 (a lone surrogate from an undecodable argument) cannot be compared.
    check_text(f"filter {key!r}:", value)


def _json_pointer(key: str) -> str:
    # An RFC 6901 pointer to a top-level key: unlike a '$.key' path it needs no quoting, so any key name (dots,
    # quotes, brackets) is safe and is still passed as a bound parameter.
    return "/" + key.replace("~", "~0").replace("/", "~1")
