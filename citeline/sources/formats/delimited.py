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
:func:`citeline.sources.metadata.typed_text`); empty cells are left out. A column whose cells all write numbers
one locale's way (``1.234,56``, ``1 234,56``, ``1,234.56``) is numbers, each cell as written kept beside it
(:func:`read_locale_numbers`). A row with more cells than the header
fails alone, naming its line; a row with fewer has the missing cells empty. Quoting is the csv module's (RFC 4180,
a quoted cell may span lines). A ``.tsv`` usually has no quoting at all (IANA's text/tab-separated-values allows
no tab or line break in a cell): when a quote in it would swallow a tab or a line break (``5" screen`` at a cell's
start, unclosed, took every row after it into one cell, silently) and its lines, read as written, fit the header,
the file is read with no quoting, every line a row and every quote kept as written.

**Delimiter.** A tab for ``.tsv``. A ``.csv`` is delimited by ``,``, ``;``, a tab or ``|``, whichever splits the
header into the most columns that the first rows below it agree with (:func:`delimiter_of`); ``,`` when none
splits it. Spreadsheets in locales whose decimal separator is the comma (most of Europe) save "CSV" with ``;``:
read with ``,``, such a table was one column named ``name;city;year``, every row's cells one metadata value, and
no filter on a column ever matched.

**Large rows.** A row may hold up to :data:`MAX_ROW_CHARS` characters (the text one source may give,
:data:`citeline.sources.MAX_SOURCE_CHARS`; a spreadsheet cell stops at 32,767); a larger row fails alone, naming
its line and the limit, and the rows after it are read. The csv module keeps a cell in a buffer of 4 bytes a
character and has one field limit for the whole process (131,072 characters by default, which ended the file at
the first cell past it, losing every later row), so citeline raises that limit at import to
:data:`CSV_MODULE_LIMIT` (never lowering another library's setting) and bounds rows itself: the lines are fed to
``csv.reader`` one at a time (no copy of the table in the 4-byte form ``io.StringIO`` keeps), and a row that would
grow past the limit is skipped before ``csv.reader`` buffers it, its end found on a skeleton of the rest (each run of
ordinary characters one ``x``: the quotes, delimiters and line breaks that decide where a row ends, kept). A cell
read whole cost many times its size: see docs/reliability.md#hostile-files for the figures before and now.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from citeline.errors import SourceError
from citeline.sources import MAX_SOURCE_CHARS, remote
from citeline.sources.document import Parsed, SourceFile
from citeline.sources.encoding import Decoded, decode
from citeline.sources.metadata import column_numbers, typed_text
from citeline.sources.records import Records
from citeline.sources.registry import parser

#: The most characters one row may hold: a row with more fails alone (see the module docstring).
MAX_ROW_CHARS = MAX_SOURCE_CHARS
#: The csv module's field limit, raised to this at import: the largest a C long holds on every platform, so the
#: csv module never stops a file for a cell's size (:data:`MAX_ROW_CHARS` is the limit citeline applies, per row).
CSV_MODULE_LIMIT = 2**31 - 1
csv.field_size_limit(max(csv.field_size_limit(), CSV_MODULE_LIMIT))

#: The csv module's quoting modes (QUOTE_MINIMAL, QUOTE_NONE are the two used).
_Quoting = Literal[0, 1, 2, 3]

#: Where the csv module ends a physical line (``newline=""``: ``\n``, ``\r\n`` or ``\r``).
_LINE_END = re.compile(r"\r\n|\r|\n")


class _RowTooLarge(Exception):
    """The row being read would pass :data:`MAX_ROW_CHARS`: it was skipped whole (see :class:`_Lines`)."""


class _Lines:
    """The physical lines of a table's text for ``csv.reader``, one at a time, counting the current row's
    characters: a line that would take the row past :data:`MAX_ROW_CHARS` is not handed over; the row's remaining
    lines are skipped and :class:`_RowTooLarge` raised from ``csv.reader`` (which starts afresh at its next row)."""

    def __init__(self, text: str, delimiter: str, quoting: _Quoting = csv.QUOTE_MINIMAL) -> None:
        self.text, self.delimiter, self.quoting = text, delimiter, quoting
        self.at = self.row_start = 0  # offsets into text: the next line, the current row's first line
        self.line = 0  # physical lines handed over or skipped (the csv module's line_num)
        self.row_line = 1  # the current row's first line, counted from 1

    def __iter__(self) -> Iterator[str]:
        return self

    def row_done(self) -> None:
        """``csv.reader`` returned a row: the next line starts the next one."""
        self.row_start, self.row_line = self.at, self.line + 1

    def __next__(self) -> str:
        if self.at >= len(self.text):
            raise StopIteration
        found = _LINE_END.search(self.text, self.at)
        end = found.end() if found else len(self.text)
        if end - self.row_start > MAX_ROW_CHARS:
            self._skip_row()
            raise _RowTooLarge
        line, self.at, self.line = self.text[self.at : end], end, self.line + 1
        return line

    def _skip_row(self) -> None:
        # Where the row ends, read by the csv module itself on a skeleton of the rest of the text: each run of
        # characters other than quotes, the delimiter and line breaks becomes one "x", so the skeleton's rows end
        # on the same lines as the table's (a quote inside an unquoted cell stays inside one) at a fraction of
        # the memory.
        ordinary = re.compile(f'[^"\r\n{re.escape(self.delimiter)}]+')
        skeleton = csv.reader(
            io.StringIO(ordinary.sub("x", self.text[self.row_start :]), newline=""),
            delimiter=self.delimiter,
            strict=True,
            quoting=self.quoting,
        )
        try:
            next(skeleton)
            lines = skeleton.line_num
        except (csv.Error, StopIteration):  # an unclosed quote: the row runs to the end of the file
            lines = -1
        at = self.row_start
        while lines != 0 and at < len(self.text):  # the row's lines; those before self.at were counted already
            found = _LINE_END.search(self.text, at)
            self.line += at >= self.at
            at, lines = (found.end() if found else len(self.text)), lines - 1
        self.at = at
        self.row_done()


#: The delimiters a ``.csv`` file may use, in order of preference when two split its header alike.
CSV_DELIMITERS = (",", ";", "\t", "|")
#: How much of a table :func:`delimiter_of` reads: the header and the rows below it that fit.
_SNIFF_CHARS = 64 * 1024
_SNIFF_ROWS = 20


def delimiter_of(text: str, kind: str) -> str:
    """The delimiter of a table's ``text``: a tab for ``tsv``; for ``csv`` the one of :data:`CSV_DELIMITERS` that
    splits the header into at least 2 columns and gives the most of the next rows (up to 20, blank ones aside)
    that many cells, then the most columns, then the earlier in the list; ``,`` when none splits the header.

    The csv module's ``Sniffer`` was not used: it guesses from character frequencies over the whole sample and
    picks a letter or a space for short tables (``csv.Sniffer().sniff("a b\\n1 2\\n")`` answers ``" "``)."""
    if kind == "tsv":
        return "\t"
    sample = text[:_SNIFF_CHARS]
    if len(text) > _SNIFF_CHARS:  # the rows that fit whole (a row cut short would count against its delimiter)
        sample = sample[: max(sample.rfind("\n"), 0)]
    best, best_key = ",", (0, 0, 0)
    for rank, candidate in enumerate(CSV_DELIMITERS):
        rows: list[list[str]] = []
        try:
            for row in csv.reader(io.StringIO(sample, newline=""), delimiter=candidate):
                if any(cell.strip() for cell in row):
                    rows.append(row)
                if len(rows) > _SNIFF_ROWS:
                    break
        except csv.Error:  # a NUL, or a quote the sample cut: judge on the rows read before it
            pass
        if not rows or len(rows[0]) < 2:
            continue
        width = len(rows[0])
        key = (sum(len(row) == width for row in rows[1:]), width, -rank)
        if key > best_key:
            best, best_key = candidate, key
    return best


_ID_COLUMNS = ("_id", "id")
_TEXT_COLUMNS = ("text", "body", "content", "abstract", "description")


class _QuotesUnpaired(Exception):
    """A TSV's quotes do not pair as quoting (a quoted cell would swallow tabs or rows), while its lines, read as
    written, are a table: it is read again with no quoting (:func:`parse_delimited`)."""


def _lines_fit(text: str, columns: int) -> bool:
    # Whether every line of a tab-separated ``text``, read as written (no quoting), has at most ``columns`` cells.
    return all(line.count("\t") < columns for line in _LINE_END.split(text))


#: Reader version 4: a ``.tsv`` whose quotes do not pair is read as written (version 3 let one unbalanced quote
#: swallow every row after it); version 3: a column of locale numbers (``1.234,56``) is read as numbers
#: (:func:`read_locale_numbers`); version 2 detected the delimiter (:func:`delimiter_of`), version 1 read ``.csv``
#: with ``,``.
@parser(".csv", ".tsv", reader=5)
def parse_delimited(source: SourceFile, data: bytes) -> Parsed:
    """A CSV or TSV table, one document per row (see the module docstring for the columns)."""
    decoded = decode(source, data)
    kind = Path(source.path.split("?", 1)[0]).suffix.lower().lstrip(".")
    if kind not in ("csv", "tsv"):  # a web URL read by its Content-Type (text/tab-separated-values, text/csv)
        kind = "tsv" if remote.suffix_for(source.media_type) == ".tsv" else "csv"
    # Lines end at \n, \r\n and \r only (as with newline=""): str.splitlines also broke a row at U+2028, U+2029 or
    # NEL inside an unquoted cell, and the cell's rest became a row of its own.
    delimiter = delimiter_of(decoded.text, kind)
    try:
        return _parse_table(source, decoded, kind, delimiter, csv.QUOTE_MINIMAL)
    except _QuotesUnpaired:
        return _parse_table(source, decoded, kind, delimiter, csv.QUOTE_NONE)


def _parse_table(source: SourceFile, decoded: Decoded, kind: str, delimiter: str, quoting: _Quoting) -> Parsed:
    # One reading of the table with ``quoting``; a TSV read with quoting raises _QuotesUnpaired where a quote
    # would swallow a tab or a line break and the lines as written fit the header (see the module docstring).
    lines = _Lines(decoded.text, delimiter, quoting)
    csv_rows = csv.reader(lines, delimiter=delimiter, strict=True, quoting=quoting)
    unpaired = kind == "tsv" and quoting != csv.QUOTE_NONE
    records = Records(source, kind, decoded.encoding)
    try:
        header = [name.strip() for name in next(csv_rows)]
    except (csv.Error, _RowTooLarge) as exc:
        raise SourceError(source.path, f"line 1: the header row is not valid CSV ({exc or 'too large'})") from exc
    lines.row_done()
    folded = [name.casefold() for name in header]
    if not any(header):
        raise SourceError(source.path, "line 1: the header row is empty; the first row must name the columns")
    id_at = next((folded.index(name) for name in _ID_COLUMNS if name in folded), None)
    title_at = folded.index("title") if "title" in folded else None
    text_at = next((folded.index(name) for name in _TEXT_COLUMNS if name in folded), None)
    named = {id_at, title_at, text_at} - {None}
    cells_of: dict[str, list[tuple[dict[str, Any], str]]] = {}  # per metadata column, each row's cell
    while True:
        line_number = lines.row_line
        try:
            row = next(csv_rows)
        except StopIteration:
            break
        except _RowTooLarge:
            records.fail(
                line_number,
                f"row holds more than {MAX_ROW_CHARS:,} characters, the limit for one record; the row is skipped",
            )
            continue
        except csv.Error as exc:  # an unclosed quote, a NUL
            if unpaired and _lines_fit(decoded.text, len(header)):
                raise _QuotesUnpaired from exc
            records.fail(line_number, f"not valid CSV ({exc}); the rest of the file is not read")
            break
        lines.row_done()
        swallowed = unpaired and any("\t" in cell or "\n" in cell or "\r" in cell for cell in row)
        if swallowed and _lines_fit(decoded.text, len(header)):  # a quote took a tab or a row: read as written
            raise _QuotesUnpaired
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            record_id = row[id_at].strip() if id_at is not None else str(line_number)
            records.fail(line_number, f"row has {len(row)} cells, the header {len(header)}", record_id or None)
            continue
        cells = row + [""] * (len(header) - len(row))
        record_id = cells[id_at].strip() if id_at is not None else str(line_number)
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
        for name, value in others:
            cells_of.setdefault(name, []).append((metadata, value.strip()))
        records.add(line_number, record_id, title, body, metadata, "no text")
    read_locale_numbers(cells_of, _DECIMAL_OF.get(delimiter))
    return records.result()


#: The decimal separator a table's delimiter implies when a column's numbers read both ways (``1.234``): a table
#: delimited by ``;`` is what a spreadsheet saves where the comma is the decimal separator; one delimited by ``,``
#: cannot hold an unquoted decimal comma, and is what one saves where the point is.
_DECIMAL_OF = {";": ",", ",": "."}
#: The metadata key that keeps a cell as written when its column was read as locale numbers.
AS_WRITTEN = "{} (as written)"


def read_locale_numbers(cells_of: dict[str, list[tuple[dict[str, Any], str]]], decimal: str | None) -> None:
    """Each column whose cells all agree on a way of writing numbers (``1.234,56``, ``1 234,56``, ``1,234.56``:
    :func:`~citeline.sources.metadata.column_numbers`) as numbers in its rows' metadata, each cell as written kept
    under ``COLUMN (as written)`` (unless the table has a column of that name). ``cells_of``: per column, each
    row's metadata and the cell's stripped text."""
    for name, cells in cells_of.items():
        numbers = column_numbers([value for _, value in cells], decimal)
        if numbers is None:
            continue
        written = AS_WRITTEN.format(name)
        keep = written not in cells_of
        for (metadata, value), number in zip(cells, numbers, strict=True):
            metadata[name] = number
            if keep:
                metadata[written] = value
