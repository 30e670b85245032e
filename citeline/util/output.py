"""Output formats for lists of records, as sqlite-utils users know them: ``table``, ``json``, ``jsonl``, ``csv``,
``tsv``; and one ISO 8601 UTC form for every timestamp citeline prints.

Records are the JSON-ready dicts of ``SearchResult.to_dict()``, ``RunSummary.to_dict()``,
``IndexStatus.to_dict()`` and ``Index.documents()`` (``citeline.store.documents``). In ``csv``, ``tsv`` and
``table`` cells, nested values (lists, dicts: a result's ``sources``, a run's ``errors``, a document's
``metadata``) are JSON-encoded, so every cell stays one value a spreadsheet or ``csvkit`` can read back.

``table`` is for people: one line per record, every cell on one line (whitespace collapsed), control characters
escaped (:func:`printable`), columns shrunk and cut with ``…`` to fit the terminal's width (rich's table layout).
``tsv`` is for ``cut``/``awk``: one line per
record, with backslash, tab, newline and carriage return in a cell written as ``\\\\``, ``\\t``, ``\\n``, ``\\r`` (the
escapes PostgreSQL's and MySQL's text formats use); ``csv`` quotes such cells instead (RFC 4180).

Text for people (the table format, and every line the CLI prints that is not one of the exact formats) goes
through :func:`printable`, so that a file name, an S3 key or a title cannot move the cursor, clear the screen, set
the terminal's title or reverse the text around it; ``json``, ``jsonl``, ``csv`` and ``tsv`` stay exact (JSON escapes
the C0 controls itself; the others are for programs).

This module is imported by ``citeline search`` on every call, so it imports only the standard library at import
time; ``rich`` (the table format, slow to import) is imported when a table is printed.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import logging
import re
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time
from typing import IO, Any

__all__ = [
    "DEFAULT_FORMAT",
    "OUTPUT_FORMATS",
    "TIMESTAMP_KEYS",
    "PrintableFormatter",
    "flat",
    "format_record",
    "format_records",
    "iso_utc",
    "normalize",
    "printable",
    "search_records",
    "write_records",
]

#: Output formats, in the order ``--format`` lists them.
OUTPUT_FORMATS = ("table", "json", "jsonl", "csv", "tsv")
DEFAULT_FORMAT = "table"

#: Keys whose text values are timestamps, rewritten by :func:`normalize` into the :func:`iso_utc` form.
TIMESTAMP_KEYS = frozenset({"started_at", "finished_at", "ingested_at"})


#: What :func:`printable` escapes: the C0 controls, DEL, the C1 controls, and the bidirectional embeddings,
#: overrides and isolates (U+202A-U+202E, U+2066-U+2069), which reorder what a terminal shows around them.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_BUT_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with its control characters escaped as Python writes them (``\\x1b``, ``\\u202e``), for a terminal:
    the C0 controls (newline and tab too, unless ``lines``: text of several lines), DEL, the C1 controls and the
    bidirectional overrides and isolates. Every line the CLI prints for people goes through it; the exact formats
    (json, jsonl, csv, tsv) do not."""
    pattern = _CONTROLS_BUT_LINES if lines else _CONTROLS
    return pattern.sub(_escaped, text) if pattern.search(text) else text


def _shown(cell: str) -> str:
    """A table cell as it is shown: on one line (whitespace collapsed), :func:`printable`."""
    return printable(" ".join(cell.split()))


class PrintableFormatter(logging.Formatter):
    """A logging formatter whose lines are :func:`printable` (a traceback's newlines kept)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), lines=True)


def iso_utc(value: datetime | date | str | None) -> str | None:
    """One ISO 8601 form for every timestamp: UTC, milliseconds, ``+00:00`` (``2026-01-31T08:00:00.123+00:00``).

    Accepts a ``datetime`` (naive means UTC, as everywhere in citeline), a ``date`` (its midnight UTC), or any
    ISO 8601 text ``datetime.fromisoformat`` reads (``Z`` included). Milliseconds because that is what the
    catalog stores (``ingested_at`` is written as ``timestamp[ms]``) and what ``ingest --json`` printed already;
    ``runs`` read back from DuckDB's TIMESTAMPTZ printed microseconds (``.387000``) for the same instant.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"not an ISO 8601 date-time: {value!r}") from None
    elif isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime.combine(value, time(0))
    else:
        raise TypeError(f"a timestamp must be a datetime, date or ISO 8601 text, not {type(value).__name__}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).isoformat(timespec="milliseconds")


#: type -> its dataclass fields' names, or None for a type that is not a dataclass (:func:`normalize`'s)
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def normalize(value: Any, key: str | None = None) -> Any:
    """``value`` as JSON-ready data: datetimes, and text under :data:`TIMESTAMP_KEYS`, in the :func:`iso_utc`
    form; tuples as lists; dataclasses as dicts; dicts and lists recursively (a collapsed result's ``sources``
    carry timestamps too).

    The answer of every served search goes through here, once per value of its results, so the common cases come
    first and a dataclass is read field by field (what ``dataclasses.asdict`` and then this would give, without
    its copy of every value first, which cost more than the rest of building the answer)."""
    kind = type(value)
    if kind is str:
        return _iso_text(value) if key in TIMESTAMP_KEYS else value
    if kind in _AS_IS:
        return value
    try:
        names = _FIELD_NAMES[kind]
    except KeyError:
        names = _FIELD_NAMES[kind] = (
            tuple(spec.name for spec in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else None
        )
    if names is not None:
        fields = {}
        for name in names:  # a plain value as it is, without a call: most of a result's values are
            item = getattr(value, name)
            plain = type(item) in _AS_IS or (type(item) is str and name not in TIMESTAMP_KEYS)
            fields[name] = item if plain else normalize(item, name)
        return fields
    if isinstance(value, Mapping):
        return {str(k): normalize(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    if isinstance(value, datetime | date):
        return iso_utc(value)
    if isinstance(value, str) and key in TIMESTAMP_KEYS:
        return iso_utc(value)
    return value


#: The types :func:`normalize` answers as they are (exactly these: a subclass, an enum say, is checked further).
_AS_IS = frozenset({int, float, bool, type(None)})


@functools.lru_cache(maxsize=4096)
def _iso_text(text: str) -> str | None:
    # iso_utc of a timestamp's text: the same few (a document's ingest time) come back in every answer.
    return iso_utc(text)


def search_records(results: Iterable[Any]) -> list[dict[str, Any]]:
    """Search results (``SearchResult`` objects or their dicts) as records, each with its 1-based ``rank`` first,
    its ``highlights`` and ``metadata``, and the passage text once (not again in each source); a grouped result's
    ``more_passages`` each with its text, highlights and offsets.

    The rank is added here and not in ``SearchResult``: it is a property of one answer list, not of a passage.
    """
    records = []
    for rank, result in enumerate(results, 1):
        data = dict(result) if isinstance(result, Mapping) else result.to_dict()
        # The passage text once: each source's copy of it (the result's own first) is left out, since its offsets
        # say where it is.
        data = {**data, "sources": _without_text(data.get("sources", []))}
        if data.get("more_passages"):
            data["more_passages"] = [
                {**passage, "sources": _without_text(passage.get("sources", []))} for passage in data["more_passages"]
            ]
        records.append({"rank": rank, **normalize(data)})
    return records


def _without_text(sources: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in source.items() if key != "text"} for source in sources]


def format_records(
    records: Iterable[Mapping[str, Any]],
    fmt: str,
    *,
    columns: Sequence[str] | None = None,
    max_col_width: int | None = None,
    headers: bool = True,
    width: int | None = None,
) -> str:
    """Records as text in ``fmt`` (one of :data:`OUTPUT_FORMATS`), ending with a newline unless empty.

    ``json`` is one array (sqlite-utils' default), ``jsonl`` one object per line (what ``--json`` printed so
    far), ``csv``/``tsv`` a header row then one row per record, ``table`` an aligned plain-text table, one line a
    record, at most ``width`` characters wide (default: the terminal's). ``columns`` picks and orders the columns
    of csv, tsv and table (default: every key, in first-seen order); json and jsonl always carry whole records.
    ``max_col_width`` caps a table column's width; ``headers=False`` leaves the header row out.
    """
    if fmt not in OUTPUT_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(OUTPUT_FORMATS)}")
    rows = [normalize(record) for record in records]
    if fmt == "json":
        return json.dumps(rows, ensure_ascii=False, indent=2) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    header = list(columns) if columns is not None else _columns(rows)
    cells = [[_cell(row.get(column), exact=fmt != "table") for column in header] for row in rows]
    if fmt == "table":
        cells = [[_shown(cell) for cell in row] for row in cells]
    if fmt == "tsv":
        lines = ([header] if headers else []) + cells
        return "".join("\t".join(_tsv_escape(cell) for cell in line) + "\n" for line in lines if header)
    if fmt == "csv":
        if not header:
            return ""
        out = io.StringIO()
        # "\n" rather than csv's RFC 4180 "\r\n": shell tools (cut, awk, sort) expect it, and csv readers,
        # Python's, pandas', DuckDB's and sqlite-utils' included, accept both.
        writer = csv.writer(out, lineterminator="\n")
        if headers:
            writer.writerow(header)
        writer.writerows(cells)
        return out.getvalue()
    if not rows:
        return ""
    return _table(
        [_shown(name) for name in header] if headers else None, cells, max_col_width=max_col_width, width=width
    )


#: Table columns of paths: cut at their start, so the file name shows.
PATH_COLUMNS = frozenset({"source_path", "source_root", "path", "roots"})
#: A table column too wide for the terminal is cut to its header's width at the least, and this many characters.
MIN_COLUMN = 5


def _table(
    header: Sequence[str] | None,
    cells: Sequence[Sequence[str]],
    *,
    max_col_width: int | None = None,
    width: int | None = None,
    box: bool = True,
) -> str:
    """An aligned table, one line a row, fitted to ``width`` (default: the terminal's) by rich."""
    from rich import box as boxes
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    width = width or shutil.get_terminal_size((120, 24)).columns
    table = Table(
        box=boxes.SIMPLE_HEAD if box else None,
        show_header=header is not None,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
        header_style="bold",
    )
    rows = [[" ".join(cell.split()) for cell in row] for row in cells]
    names = list(header) if header is not None else [""] * (len(rows[0]) if rows else 0)
    natural = [max([len(name)] + [len(row[n]) for row in rows]) for n, name in enumerate(names)]
    if max_col_width:
        natural = [min(w, max_col_width) for w in natural]
    gaps = 2 * max(len(names) - 1, 0)  # one space of padding, one of the box's divider (or two of padding)
    floors = [min(w, max(len(name), MIN_COLUMN)) for w, name in zip(natural, names, strict=True)]
    widths = _fitted(natural, floors, width - gaps)
    for name, column_width in zip(names, widths, strict=True):
        table.add_column(name, no_wrap=True, overflow="ellipsis", width=column_width)
    for row in rows:
        # a path cut keeps its end (the file name), other cells their start (rich's ellipsis)
        table.add_row(
            *(
                Text("…" + cell[len(cell) - w + 1 :] if name in PATH_COLUMNS and len(cell) > w else cell)
                for name, cell, w in zip(names, row, widths, strict=True)
            )
        )
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, highlight=False, emoji=False, markup=False).print(table)
    return "".join(line.rstrip() + "\n" for line in out.getvalue().splitlines())


def _fitted(natural: Sequence[int], floors: Sequence[int], budget: int) -> list[int]:
    """Column widths that fit ``budget`` characters: the widest column is narrowed first, one character at a time,
    so texts and paths are cut before numbers, ids and timestamps; none below its floor (its header)."""
    widths = list(natural)
    excess = sum(widths) - budget
    while excess > 0:
        widest = max(range(len(widths)), key=lambda n: (widths[n] - floors[n] > 0, widths[n]))
        if widths[widest] <= floors[widest]:
            break  # everything at its floor: the terminal is too narrow, rich cuts the rest
        widths[widest] -= 1
        excess -= 1
    return widths


def _tsv_escape(cell: str) -> str:
    """A TSV cell on one line: backslash, tab, newline and carriage return as ``\\\\``, ``\\t``, ``\\n``, ``\\r``."""
    return cell.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def format_record(record: Mapping[str, Any], fmt: str, *, width: int | None = None) -> str:
    """One record (``status``) in ``fmt``: ``json`` is the object itself, ``table`` a key/value listing (nested
    records as dotted keys, such as ``last_run.status``), the others the record as a one-row list."""
    if fmt == "json":
        return json.dumps(normalize(record), ensure_ascii=False, indent=2) + "\n"
    if fmt == "table":
        flattened = flat(normalize(record), lists="text").items()
        pairs = [[_shown(key), _shown(_cell(value, exact=False))] for key, value in flattened]
        return _table(None, pairs, width=width, box=False)
    return format_records([record], fmt)


def flat(metadata: Mapping[str, Any], prefix: str = "", *, lists: str = "json") -> dict[str, str | int | float | bool]:
    """``metadata`` with scalar values only: nested mappings become dotted keys (``last_run.status``), None values
    are left out, lists become JSON text (``lists="json"``: ``json.loads`` gives them back, for vector stores that
    keep only scalar metadata) or, with ``lists="text"``, their items joined by ``, `` when all are scalars (for
    people)."""
    found: dict[str, str | int | float | bool] = {}
    for key, value in metadata.items():
        name = f"{prefix}{key}"
        if value is None:
            continue
        if isinstance(value, Mapping):
            found.update(flat(value, f"{name}.", lists=lists))
        elif isinstance(value, list | tuple):
            scalars = all(isinstance(item, str | int | float) for item in value)
            text = ", ".join(str(item) for item in value) if lists == "text" and scalars else None
            found[name] = text if text is not None else json.dumps(value, ensure_ascii=False)
        elif isinstance(value, str | int | float | bool):
            found[name] = value
        else:
            found[name] = str(value)
    return found


def write_records(
    records: Iterable[Mapping[str, Any]],
    fmt: str,
    stream: IO[str] | None = None,
    *,
    columns: Sequence[str] | None = None,
    max_col_width: int | None = None,
) -> None:
    """Write :func:`format_records` output to ``stream`` (default: standard output)."""
    (stream or sys.stdout).write(format_records(records, fmt, columns=columns, max_col_width=max_col_width))


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _cell(value: Any, *, exact: bool) -> str:
    """A csv/tsv/table cell: nested values and booleans as JSON, None as an empty cell, the rest as text.

    Floats are exact (``repr``, which round-trips) in csv and tsv, and 4 significant digits in tables for people.
    """
    if value is None:
        return ""
    if isinstance(value, bool | list | dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return repr(value) if exact else f"{value:.4g}"
    return str(value)
