"""CSV and TSV (``.csv``, ``.tsv``): one document per row, like JSON Lines (:mod:`citeline.sources.records`).

The first row is the header; columns are matched by name, ignoring case and surrounding spaces:

- **id**: the ``_id`` or ``id`` column (BEIR's and most exports' names); a table with neither uses the row's
  number (``2`` is the first row below the header), which shifts when rows are inserted above it, so give tables
  that change an id column;
- **title**: the ``title`` column, if any;
- **text**: the ``text`` column, else the first of ``body``, ``content``, ``abstract``, ``description``; a table
  with none of them (a plain spreadsheet) makes each row's text its other cells as ``column: value`` lines, so
  every cell is searchable.

Every column but the id, title and text columns is metadata, typed (``2021`` a number, see
:func:`citeline.sources.metadata.typed_text`); empty cells are left out. A row with more cells than the header
fails alone, naming its line; a row with fewer has the missing cells empty. The delimiter is ``,`` for ``.csv``
and a tab for ``.tsv``; quoting is the csv module's (RFC 4180, a quoted cell may span lines).

**Large cells.** A cell may hold up to :data:`MAX_CELL_CHARS` characters (16 Mi; a spreadsheet stops at 32,767);
a row with a larger cell fails alone, naming its line, cell and size, and the rows after it are read. The csv
module's own limit (131,072 characters by default, one setting for the whole process) ended the file at the first
cell past it, losing every row after it; it is raised at import to :data:`CSV_MODULE_LIMIT`, above any cell a
file can hold, and never lowered (another library in the process that raised it keeps its setting). A table is
read whole, so ``--max-file-bytes`` bounds what one row can cost in memory.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from citeline.errors import SourceError
from citeline.sources.document import Parsed, SourceFile
from citeline.sources.encoding import decode
from citeline.sources.metadata import typed_text
from citeline.sources.records import Records
from citeline.sources.registry import parser

#: The most characters one cell may hold: a row with a larger one fails alone (see the module docstring).
MAX_CELL_CHARS = 16 * 1024 * 1024
#: The csv module's field limit, raised to this at import: the largest a C long holds on every platform, so the
#: csv module never stops a file for a cell's size (:data:`MAX_CELL_CHARS` is the limit citeline applies, per row).
CSV_MODULE_LIMIT = 2**31 - 1
csv.field_size_limit(max(csv.field_size_limit(), CSV_MODULE_LIMIT))

_ID_COLUMNS = ("_id", "id")
_TEXT_COLUMNS = ("text", "body", "content", "abstract", "description")


@parser(".csv", ".tsv")
def parse_delimited(source: SourceFile, data: bytes) -> Parsed:
    """A CSV or TSV table, one document per row (see the module docstring for the columns)."""
    decoded = decode(source, data)
    kind = Path(source.path).suffix.lower().lstrip(".")
    # Lines end at \n, \r\n and \r only (newline="", as the csv module asks): str.splitlines also broke a row at
    # U+2028, U+2029 or NEL inside an unquoted cell, and the cell's rest became a row of its own.
    lines = io.StringIO(decoded.text, newline="")
    reader = csv.reader(lines, delimiter="\t" if kind == "tsv" else ",", strict=True)
    records = Records(source, kind, decoded.encoding)
    try:
        header = [name.strip() for name in next(reader)]
    except csv.Error as exc:
        raise SourceError(source.path, f"line 1: the header row is not valid CSV ({exc})") from exc
    folded = [name.casefold() for name in header]
    if not any(header):
        raise SourceError(source.path, "line 1: the header row is empty; the first row must name the columns")
    id_at = next((folded.index(name) for name in _ID_COLUMNS if name in folded), None)
    title_at = folded.index("title") if "title" in folded else None
    text_at = next((folded.index(name) for name in _TEXT_COLUMNS if name in folded), None)
    named = {id_at, title_at, text_at} - {None}
    while True:
        line_number = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # an unclosed quote, a NUL
            records.fail(line_number, f"not valid CSV ({exc}); the rest of the file is not read")
            break
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            record_id = row[id_at].strip() if id_at is not None else str(line_number)
            records.fail(line_number, f"row has {len(row)} cells, the header {len(header)}", record_id or None)
            continue
        cells = row + [""] * (len(header) - len(row))
        record_id = cells[id_at].strip() if id_at is not None else str(line_number)
        large = next((i for i, cell in enumerate(cells) if len(cell) > MAX_CELL_CHARS), None)
        if large is not None:
            records.fail(
                line_number,
                f"cell '{(header[large] or f'column {large + 1}')[:100]}' holds {len(cells[large]):,} characters, "
                f"above the {MAX_CELL_CHARS:,}-character limit of a cell; the row is skipped",
                record_id if record_id and large != id_at else None,  # a known id keeps its stored version
            )
            continue
        if not record_id:
            records.fail(line_number, f"row has no {header[id_at] if id_at is not None else 'id'}")
            continue
        others = [(header[i] or f"column {i + 1}", cells[i]) for i in range(len(header)) if i not in named]
        others = [(name, value) for name, value in others if value.strip()]
        if text_at is not None:
            body = cells[text_at]
        else:
            body = "\n".join(f"{name}: {value.strip()}" for name, value in others)
        title = cells[title_at].strip() if title_at is not None else ""
        metadata = {name: typed_text(value) for name, value in others}
        records.add(line_number, record_id, title, body, metadata, "no text")
    return records.result()
