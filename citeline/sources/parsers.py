"""Read one file found under an ingested root (see :mod:`citeline.sources.discovery`) and parse it into
:class:`~citeline.sources.document.Document` objects through the ``@parser`` registry of source formats
(:mod:`citeline.sources.registry`; one module per format in :mod:`citeline.sources.formats`).

Parsing never guesses: binary files, empty files, text whose encoding cannot be told and files above the size limit
raise :class:`~citeline.errors.SourceError` naming the file and the problem, so an ingestion run can report them and
go on with the rest.

The names callers have imported from here since sources were one module (``Document``, ``SourceFile``,
``PARSERS``, ...) are re-exported from the modules that own them now.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO, NamedTuple

from citeline.errors import SourceError
from citeline.sources import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_SOURCE,
    MAX_SOURCE_CHARS,
    formats,  # noqa: F401  (importing the formats fills the registry)
    remote,
)
from citeline.sources.document import (
    Document,
    EmptySource,
    Parsed,
    SourceFile,
    display_path,
    doc_id_for,
    doc_id_of,
    is_valid_text,
    text_hash,
    unstorable_field,
)
from citeline.sources.encoding import guesses, is_blank
from citeline.sources.formats.pdf import expand_ligatures
from citeline.sources.registry import (
    PARSERS,
    READER_VERSIONS,
    RECORD_PARSERS,
    Parser,
    RecordParser,
    first_line_title,
    parser,
    supported_suffixes,
)

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_SOURCE",
    "PARSERS",
    "RECORD_PARSERS",
    "Document",
    "EmptySource",
    "Parsed",
    "Parser",
    "RecordParser",
    "SourceFile",
    "display_path",
    "doc_id_for",
    "doc_id_of",
    "expand_ligatures",
    "first_line_title",
    "is_valid_text",
    "parse",
    "parse_source",
    "parser",
    "reader_version",
    "reading_ahead",
    "supported_suffixes",
    "text_hash",
    "unstorable_field",
]


#: How many times a file found changed after it was read is read again before it fails (:func:`parse_source`).
READ_ATTEMPTS = 3


def parse_source(
    source: SourceFile,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    on_document: Callable[[Document], None] | None = None,
    span: tuple[int, int] | None = None,
    restart: Callable[[], None] | None = None,
) -> Parsed:
    """Read and parse one file; bad input never raises, it comes back in :attr:`Parsed.errors`.

    A problem with the file (unreadable, too large, binary, in no text encoding, no text) fails the file: no
    documents, ``complete`` False. An empty file (no bytes, or only whitespace, however encoded) is no failure:
    :attr:`Parsed.skipped` says so, and it has no documents (what was stored from it before is gone from it, so it
    is removed like a file's deleted text). A problem with one record of a JSONL file fails that record alone.
    Every document is checked last for text that cannot be stored (a lone surrogate in its text, title, id or
    metadata), whatever its parser. Exceptions other than :class:`SourceError` (a parser library's own bug) still
    propagate, so the fuzz tests see them; the pipeline turns them into a file error.

    A record format (``@parser(..., records=True)``: JSONL) is streamed, one line at a time, whatever the file's
    size: ``max_file_bytes`` bounds only the formats read whole. With ``on_document``, each document is handed to
    it as it is read instead of being kept in :attr:`Parsed.documents` (so a caller holds what it chooses); if the
    file then fails as a whole (a byte that is not UTF-8 halfway through), ``failed`` says to drop what it was
    handed. ``span=(first, last)`` reads only the records whose lines start at byte offsets ``first`` to ``last``
    (:attr:`Document.offset`: a run reading again the records it planned); line numbers then count from ``first``.

    **A file rewritten while it is read** is never parsed as a mix of two versions: its size and modification
    time (of the open file) are checked again once it has been read, and if they moved it is read again, up to
    :data:`READ_ATTEMPTS` times, then fails alone ("changed while it was read"). A streamed file's documents
    were handed to ``on_document`` already: ``restart()`` is called before it is read again, to drop them;
    without ``restart`` such a file fails at once (``failed``: the caller drops what it was handed).
    """
    read_records = RECORD_PARSERS.get(_suffix(source))
    for attempt in range(1, READ_ATTEMPTS + 1):
        if read_records is not None:
            parsed = _stream(source, read_records, on_document, span)
        else:
            parsed = _parse_whole(source, max_file_bytes, on_document)
        if not parsed.changed:
            return parsed
        if attempt == READ_ATTEMPTS or (read_records is not None and on_document is not None and restart is None):
            break
        if read_records is not None and restart is not None:
            restart()
    times = f"{attempt} time{'s' * (attempt > 1)}"
    reason = f"changed while it was read ({times}); nothing of it is stored this run, the next run reads it again"
    return Parsed(errors=[SourceError(source.path, reason)], complete=False, failed=True)


def reading_ahead(
    files: Iterable[SourceFile], max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
) -> AbstractContextManager[None]:
    """Inside, the remote objects of ``files`` that :func:`parse_source` will read are fetched ahead, several at a
    time, concurrently (``remote.fetch_ahead``: bounded in count and bytes); an object it refuses before reading
    (a type no parser reads, past ``max_file_bytes``) is not fetched. Local files are read as before."""
    return remote.fetch_ahead((source for source in files if _read_at_all(source, max_file_bytes)), max_file_bytes)


def _read_at_all(source: SourceFile, max_file_bytes: int) -> bool:
    suffix = _suffix(source)
    return suffix in RECORD_PARSERS or (suffix in PARSERS and (source.size or 0) <= max_file_bytes)


class _Changed(Exception):
    """The file's size or modification time moved while it was read (:func:`parse_source` reads it again)."""


def _unreadable(exc: OSError) -> str:
    # A web URL's failure is the server's own words ("the server did not answer in time", "503 Service
    # Unavailable"), as its HEAD's is; a file's (or a store object's) is what the OS or the store said.
    if isinstance(exc, remote.WebError):
        return exc.strerror or str(exc)
    return f"cannot read file: {exc.strerror or exc}"


def _read_all(handle: BinaryIO) -> bytes:
    # The read step of a file read whole (a function of its own: the tests rewrite the file in the middle of it).
    return handle.read()


def _check_unchanged(handle: BinaryIO, before: os.stat_result) -> None:
    # Raise _Changed when the open file's size or modification time is no longer ``before``'s: a writer rewrote
    # it in place while it was read, and what was read may be a mix of two versions. (A file replaced by a rename
    # is not: the open file is the old one, read whole, and its stamp says so.)
    after = os.fstat(handle.fileno())
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise _Changed


def reader_version(source: SourceFile) -> int:
    """The reader version of the format ``source`` is read with (``registry.READER_VERSIONS``; 1 for an unknown
    suffix)."""
    return READER_VERSIONS.get(_suffix(source), 1)


def _suffix(source: SourceFile) -> str:
    # A remote object's from its key (a URL's query string is no suffix), a local file's from its path; a web URL
    # whose name has no suffix a parser reads, from its Content-Type.
    if not remote.is_remote(source.path):
        return Path(source.path).suffix.lower()
    return source_suffix(source.source_id, source.media_type)


def source_suffix(name: str, media_type: str | None) -> str:
    """The suffix of the format a remote object is read in: its name's, or where no parser reads that (a web URL
    without an extension, ``https://host/docs/``), the one its Content-Type names (``remote.MEDIA_TYPES``); the
    name's (perhaps none) when neither is read."""
    suffix = Path(name.split("?", 1)[0]).suffix.lower()
    if suffix in PARSERS or media_type is None:
        return suffix
    return remote.suffix_for(media_type) or suffix


class _Stat(NamedTuple):
    """A remote object's size and time, as its listing gave them (a local file's are ``os.fstat``'s)."""

    st_size: int
    st_mtime: float


@contextlib.contextmanager
def _opened(
    source: SourceFile, limit: int | None = None
) -> Iterator[tuple[BinaryIO, _Stat | os.stat_result, Callable[[], None]]]:
    # The file open for reading, its stat, and the check that it did not change while it was read. A remote object
    # (citeline.sources.remote) is fetched as one version (one GET, or block reads s3fs ties to its ETag), never
    # read past ``limit`` bytes (what is read counts, not what a header said): its listed size and time are its
    # stat, and there is nothing to check after.
    if remote.is_remote(source.path):
        with remote.open_object(source, limit) as handle:
            yield handle, _Stat(source.size or 0, source.mtime or 0.0), lambda: None
        return
    with open(source.path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        yield handle, stat, lambda: _check_unchanged(handle, stat)


def unsupported(source: SourceFile) -> str:
    """Why no parser reads ``source``, in one line: its suffix, or a web URL's Content-Type."""
    suffix = Path(source.source_id.split("?", 1)[0]).suffix.lower()
    if remote.is_remote(source.path) and source.media_type and suffix not in PARSERS:
        return (
            f"unsupported Content-Type {source.media_type} (the URL names no file type); citeline reads "
            f"{', '.join(sorted(remote.MEDIA_TYPES))}"
        )
    return f"unsupported file type {suffix or '(none)'}; citeline reads {', '.join(supported_suffixes())}"


def _too_large(size: int, limit: int) -> str:
    return (
        f"file is {size:,} bytes, above the {limit:,}-byte limit (raise max_file_bytes / --max-file-bytes to index it)"
    )


def _parse_whole(source: SourceFile, max_file_bytes: int, on_document: Callable[[Document], None] | None) -> Parsed:
    # A file of a format read whole (parse_source's other half): read, checked unchanged, parsed.
    parse_file = PARSERS.get(_suffix(source))
    try:
        if parse_file is None:
            raise SourceError(source.path, unsupported(source))
        try:
            if source.size is not None and source.size > max_file_bytes:  # a remote object: not fetched at all
                raise SourceError(source.path, _too_large(source.size, max_file_bytes))
            with _opened(source, max_file_bytes) as (handle, stat, check_unchanged):
                if stat.st_size > max_file_bytes:
                    raise SourceError(source.path, _too_large(stat.st_size, max_file_bytes))
                data = _read_all(handle)
                check_unchanged()
        except OSError as exc:
            raise SourceError(source.path, _unreadable(exc)) from exc
        if is_blank(data):
            raise EmptySource(source.path, "file is empty or only whitespace")
        with guesses() as notes:  # a text format read in an encoding that was a close call
            result = parse_file(source, data)
    except _Changed:
        return Parsed(complete=False, failed=True, changed=True)
    except EmptySource:
        return Parsed(skipped="empty file")
    except SourceError as exc:
        return Parsed(errors=[exc], complete=False, failed=True)
    parsed = result if isinstance(result, Parsed) else Parsed(documents=result)
    parsed.notes.extend(notes)
    documents, parsed.documents = parsed.documents, []
    try:
        parsed.documents = [document for document in documents if _finished(document, source, stat, parsed)]
    except SourceError as exc:
        return Parsed(errors=[exc], complete=False, failed=True)
    if not parsed.documents and not parsed.errors:
        return Parsed(errors=[SourceError(source.path, "no records with text")], complete=False, failed=True)
    if on_document is not None:
        documents, parsed.documents = parsed.documents, []
        for document in documents:
            on_document(document)
    return parsed


def _stream(
    source: SourceFile,
    read_records: RecordParser,
    on_document: Callable[[Document], None] | None,
    span: tuple[int, int] | None,
) -> Parsed:
    # A record file read line by line (parse_source's streamed half).
    parsed = Parsed()
    found = 0
    try:
        try:
            with _opened(source) as (stream, stat, check_unchanged):
                if span is not None:
                    stream.seek(span[0])
                with contextlib.closing(read_records(source, stream, parsed)) as records:
                    for document in records:
                        if span is not None and (document.offset or 0) > span[1]:
                            break  # past the last record asked for
                        if not _finished(document, source, stat, parsed):
                            continue  # a failed record, in parsed.errors
                        found += 1
                        if on_document is None:
                            parsed.documents.append(document)
                        else:
                            on_document(document)
                check_unchanged()  # the records read hold one version of the file
        except OSError as exc:
            raise SourceError(source.path, _unreadable(exc)) from exc
    except _Changed:
        return Parsed(complete=False, failed=True, changed=True)
    except EmptySource:
        return Parsed(skipped="empty file")
    except SourceError as exc:
        return Parsed(errors=[exc], complete=False, failed=True)
    if not found and not parsed.errors and span is None:
        return Parsed(errors=[SourceError(source.path, "no records with text")], complete=False, failed=True)
    return parsed


def _finished(document: Document, source: SourceFile, stat: _Stat | os.stat_result, parsed: Parsed) -> bool:
    # Stamp a parsed document with its file and the stat it was read at, and check it can be stored: True if it
    # can; a record that cannot fails alone (recorded in ``parsed``), a whole file's document raises SourceError.
    document.source_file = source.source_id
    document.size_bytes = stat.st_size
    document.mtime = stat.st_mtime
    problem = too_much_text(document) or unstorable_field(document)
    if problem is None:
        return True
    if document.record_id is None:
        raise SourceError(source.path, problem)
    error = SourceError(source.path, f"record {document.record_id!r}: {problem}")
    parsed.fail_record(error, document.doc_id if is_valid_text(document.record_id) else None)
    return False


def too_much_text(document: Document) -> str | None:
    """The one-line refusal of a document whose text is past :data:`~citeline.sources.MAX_SOURCE_CHARS` (None if
    it is not): chunking it would cost the run more memory than one source may."""
    if len(document.text) <= MAX_SOURCE_CHARS:
        return None
    return (
        f"{len(document.text):,} characters of text, past the {MAX_SOURCE_CHARS:,}-character limit for one source "
        "(refused; split it into smaller files)"
    )


def parse(source: SourceFile, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> list[Document]:
    """Read and parse one file into documents, all or nothing: the first problem raises :class:`SourceError`.

    The whole-file contract of earlier versions (a caller that treats a failed file as "keep everything stored
    from it" stays safe). :func:`parse_source` is the per-record form the pipeline uses. An empty file gives no
    documents.
    """
    parsed = parse_source(source, max_file_bytes=max_file_bytes)
    if parsed.errors:
        first = parsed.errors[0]
        more = len(parsed.errors) - 1
        raise SourceError(first.path, first.reason + (f" (and {more} more problem{'s' * (more > 1)})" if more else ""))
    return parsed.documents
