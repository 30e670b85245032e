"""The ``@parser`` registry of source formats: a suffix (``.md``) to the function that parses such a file.

A format is one module of :mod:`citeline.sources.formats` holding one function decorated with ``@parser(".ext")``;
:mod:`citeline.sources.parsers` imports them all and reads a file through the registry. The helpers here are what
several formats share (a title from the first line, the lines of a record file); decoding text is
:mod:`citeline.sources.encoding`.

Two kinds of format: one read whole (``@parser(".md")``: the file's bytes in, its documents out; such files are
refused above ``max_file_bytes``), and a record format (``@parser(".jsonl", records=True)``: a binary stream in,
documents yielded one record at a time, per-record problems written to the :class:`Parsed` it is handed), which
reads a file of any size with bounded memory. A record format is also registered in :data:`PARSERS` in the bytes
form (:func:`whole`), so every format can be called the same way (the contract and fuzz tests do).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Generator, Iterator
from typing import BinaryIO, TypeVar

from citeline.errors import SourceError
from citeline.sources import MAX_SOURCE_CHARS
from citeline.sources.document import Document, EmptySource, Parsed, SourceFile

Parser = Callable[[SourceFile, bytes], "list[Document] | Parsed"]
#: A record format: reads ``stream`` from where it stands, yields each record's document (its ``offset`` set to
#: the byte offset of the record's line), and records failed records in the :class:`Parsed` (``errors``,
#: ``kept_doc_ids``, ``complete``); a problem with the file as a whole raises :class:`SourceError`.
RecordParser = Callable[[SourceFile, BinaryIO, Parsed], Generator[Document, None, None]]
PARSERS: dict[str, Parser] = {}
RECORD_PARSERS: dict[str, RecordParser] = {}
#: Each suffix's reader version (``@parser(..., reader=N)``, 1 unless said). A format whose reading changes so
#: that a file already indexed would give other text or other records bumps it: the index records the version each
#: file was read with (``citeline.store.file_stats``), and the next run reads again the unchanged files read with
#: an older one, so an upgrade reaches what is already indexed instead of only the files that change.
READER_VERSIONS: dict[str, int] = {}

_Format = TypeVar("_Format", Parser, RecordParser)


def parser(*suffixes: str, records: bool = False, reader: int = 1) -> Callable[[_Format], _Format]:
    """Register a parser for file suffixes (lower case, with the dot); ``records=True`` for a record format (a
    :data:`RecordParser`, streamed); ``reader``: its reader version (:data:`READER_VERSIONS`), bumped when a change of
    the parser changes what files already indexed give."""

    def register(func: _Format) -> _Format:
        for suffix in suffixes:
            READER_VERSIONS[suffix] = reader
            if records:
                RECORD_PARSERS[suffix] = func  # type: ignore[assignment]
                PARSERS[suffix] = whole(func)  # type: ignore[arg-type]
            else:
                PARSERS[suffix] = func  # type: ignore[assignment]
        return func

    return register


def supported_suffixes() -> tuple[str, ...]:
    """The file suffixes citeline can parse."""
    return tuple(sorted(PARSERS))


def whole(read_records: RecordParser) -> Parser:
    """A record format in the bytes form: every record of ``data`` parsed into one :class:`Parsed`."""

    def parse_whole(source: SourceFile, data: bytes) -> Parsed:
        parsed = Parsed()
        parsed.documents.extend(read_records(source, io.BytesIO(data), parsed))
        return parsed

    parse_whole.__doc__ = read_records.__doc__
    parse_whole.__name__ = getattr(read_records, "__name__", "parse_whole")
    return parse_whole


#: Bytes looked at for a NUL (a binary file).
_SNIFF_BYTES = 8192


#: The longest line a record file may have, in bytes: six times the text one source may give (a JSON escape writes
#: a character in at most six bytes), so no record under the text limit is lost. A longer line is not read into
#: memory (a line read whole cost many times its size: docs/reliability.md#hostile-files): :func:`record_lines`
#: skips it and reports it as a bad line.
MAX_RECORD_LINE_BYTES = 6 * MAX_SOURCE_CHARS

#: Where a record file's lines end (:func:`record_lines`).
_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e]")


def record_lines(
    source: SourceFile, stream: BinaryIO, bad_line: Callable[[int, str], None] | None = None
) -> Iterator[tuple[int, int, str]]:
    """The lines of a record file read from where ``stream`` stands, one at a time: ``(line number, byte offset of
    the line, text)``, line numbers counted from there (1 at the start of the file).

    Lines end at ``\\n`` and ``\\r\\n``, and at the other breaks ``str.splitlines`` knows that valid JSON cannot
    hold unescaped (the control characters ``\\r``, ``\\v``, ``\\f`` and ``\\x1c``-``\\x1e``), never at ``\\x85``,
    ``\\u2028`` or ``\\u2029``, which a JSON string may hold as they are (``json.dumps(ensure_ascii=False)`` writes
    them so). JSON Lines is UTF-8: from the start of the file a NUL in the first 8 KiB is a binary file and a
    leading BOM is dropped. A line holding a byte that is not UTF-8, or longer than :data:`MAX_RECORD_LINE_BYTES`
    (skipped unread), is handed to ``bad_line(line number, reason)`` (the reason names the byte's offset in the
    file, or the limit) and skipped, so it fails alone, as any bad record does; without ``bad_line`` it raises
    :class:`SourceError`. Nothing is held but the current line.
    """
    offset = start = stream.tell()
    bom = 0  # decode_text's "utf-8-sig" counts byte offsets after a BOM
    if start == 0:
        head = stream.read(_SNIFF_BYTES)
        stream.seek(0)
        if b"\0" in head:
            raise SourceError(source.path, "looks like a binary file (contains NUL bytes)")
        if head.startswith(b"\xef\xbb\xbf"):
            offset = bom = 3
            stream.seek(bom)
    number, blank = 0, True
    for raw in iter(lambda: stream.readline(MAX_RECORD_LINE_BYTES + 1), b""):
        if len(raw) > MAX_RECORD_LINE_BYTES and not raw.endswith(b"\n"):
            skipped = len(raw)
            while (rest := stream.readline(1024 * 1024)) and not rest.endswith(b"\n"):
                skipped += len(rest)
            number, blank = number + 1, False
            reason = f"longer than {MAX_RECORD_LINE_BYTES:,} bytes, the limit for one record (refused)"
            if bad_line is None:
                raise SourceError(source.path, f"line {number}: {reason}")
            bad_line(number, reason)
            offset += skipped + len(rest)
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"not valid UTF-8 at byte {offset - bom + exc.start} (re-save the file as UTF-8)"
            if bad_line is None:
                raise SourceError(source.path, reason) from exc
            number, blank = number + 1, False
            bad_line(number, reason)
            offset += len(raw)
            continue
        blank = blank and not text.strip()
        # A piece after a \r, \v, \f or \x1c-\x1e counts as a line of its own, with its physical line's offset.
        pieces = _LINE_BREAK.split(text)
        if len(pieces) > 1 and not pieces[-1]:
            pieces.pop()  # the break that ends the line
        for line in pieces:
            number += 1
            yield number, offset, line
        offset += len(raw)
    if start == 0 and blank:
        raise EmptySource(source.path, "file is empty or only whitespace")


def first_line_title(text: str, fallback: str) -> str:
    """The first non-empty line of ``text`` (a leading ``#`` dropped), at most 200 characters; else ``fallback``."""
    for line in text.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped[:200]
    return fallback
