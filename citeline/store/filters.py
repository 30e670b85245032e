"""Structured search filters, turned into parameterized SQL that selects the chunks a search may return.

A filter restricts the candidates *before* ranking (see :func:`citeline.query.plan.dense_search`'s ``allowed``), so a
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
    ``{key: value}`` over the document's metadata (JSONL record fields, HTML author and date, PDF pages, ...).
    Keys are top-level metadata keys; text values match the metadata value's text (so ``"2020"`` matches the
    number 2020, as ``--where year=2020`` needs), numbers match numerically, booleans match ``true``/``false``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

from citeline.errors import QueryError

__all__ = ["FILTER_KEYS", "Filters"]

FILTER_KEYS = ("source", "path_glob", "ingested_after", "ingested_before", "meta")

MetaValue = str | int | float | bool


@dataclass(frozen=True)
class Filters:
    """A validated filter. Build it with :meth:`from_value`; an empty ``Filters()`` selects everything."""

    source: tuple[str, ...] = ()
    path_glob: tuple[str, ...] = ()
    ingested_after: datetime | None = None
    ingested_before: datetime | None = None
    meta: tuple[tuple[str, tuple[MetaValue, ...]], ...] = field(default=())

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
        for key, values in self.meta:
            pointer = _json_pointer(key)
            any_of = []
            for meta_value in values:
                if isinstance(meta_value, bool):
                    any_of.append("json_extract_string(d.metadata, ?) = ?")
                    params += [pointer, "true" if meta_value else "false"]
                elif isinstance(meta_value, int | float):
                    any_of.append("TRY_CAST(json_extract_string(d.metadata, ?) AS DOUBLE) = ?")
                    params += [pointer, float(meta_value)]
                else:
                    any_of.append("json_extract_string(d.metadata, ?) = ?")
                    params += [pointer, meta_value]
            clauses.append("(" + " OR ".join(any_of) + ")")
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
        return str(Path(source).expanduser().resolve())
    except (RuntimeError, OSError) as exc:  # ~nosuchuser ("Could not determine home directory"), a symlink loop
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


def _meta(value: object) -> tuple[tuple[str, tuple[MetaValue, ...]], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise QueryError(f"filter 'meta' must be a dict of metadata key to value, not {type(value).__name__}")
    out = []
    for key, wanted in value.items():
        if not isinstance(key, str) or not key:
            raise QueryError(f"filter 'meta' keys must be non-empty text; got {key!r}")
        values = list(wanted) if isinstance(wanted, list | tuple) else [wanted]
        if not values:
            raise QueryError(f"filter 'meta' key {key!r} has an empty list of values")
        _text("meta", key)
        for item in values:
            if not isinstance(item, str | int | float) or (isinstance(item, float) and item != item):
                raise QueryError(f"filter 'meta' key {key!r}: values must be text, numbers or true/false, not {item!r}")
            if isinstance(item, int) and not isinstance(item, bool):
                try:
                    float(item)  # compared as a DOUBLE: 10**400 has no such value
                except OverflowError:
                    raise QueryError(
                        f"filter 'meta' key {key!r}: a number of {len(str(item))} digits is too large to compare"
                    ) from None
            if isinstance(item, str):
                _text("meta", item)
        out.append((key, tuple(values)))
    return tuple(out)


def _text(key: str, value: str) -> None:
    # Text that cannot be encoded as UTF-8 (a lone surrogate from an undecodable argument) cannot be compared.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise QueryError(f"filter {key!r}: {value!r} is not valid text (not UTF-8)") from None


def _json_pointer(key: str) -> str:
    # An RFC 6901 pointer to a top-level key: unlike a '$.key' path it needs no quoting, so any key name (dots,
    # quotes, brackets) is safe and is still passed as a bound parameter.
    return "/" + key.replace("~", "~0").replace("/", "~1")
