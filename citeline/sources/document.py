"""What a source file becomes: :class:`SourceFile` (a file found under a root), :class:`Document` (one parsed
document, its text exactly as stored) and :class:`Parsed` (what parsing one file gave, problems included), with the
ids and checks every format shares.

A document is keyed by ``(source_root, source_id)``: the resolved root that was ingested and the file's path
relative to it (``file#record`` for one record of a JSONL or CSV file).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from citeline.errors import SourceError
from citeline.sources import MAX_METADATA_CHARS, MAX_METADATA_DEPTH, MAX_METADATA_FIELDS


@dataclass(frozen=True)
class SourceFile:
    """A file found under an ingested root."""

    root: str  #: the resolved root directory (or file) the user asked to ingest
    path: str  #: absolute path of the file
    source_id: str  #: path relative to ``root``, with forward slashes
    #: the text encoding the run was told to read it in (``--encoding``: a Python codec name), or None to detect it
    encoding: str | None = None
    #: an object of a remote root (``citeline.sources.remote``): its size, modification time and stamp (ETag,
    #: version or generation) as the listing gave them, compared with the catalog's without fetching the object;
    #: None for a local file (its stat is read when needed)
    size: int | None = None
    mtime: float | None = None
    stamp: str | None = None
    #: a web URL's Content-Type as its server gave it (``text/html``): the format of a URL whose name has no suffix
    #: a parser reads (``citeline.sources.remote.suffix_for``); None for anything else
    media_type: str | None = None


@dataclass
class Document:
    """One parsed document: its text exactly as stored (chunk offsets index into it) and its provenance."""

    source_root: str
    source_id: str
    path: str
    title: str
    text: str
    format: str
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the file this document came from, relative to the root (differs from ``source_id`` for JSONL records)
    source_file: str = ""
    size_bytes: int = 0
    mtime: float = 0.0
    #: the record's own id for a document that is one record of a file (JSONL, CSV); ``None`` for a whole file
    record_id: str | None = None
    #: what citeline records about the file for itself (``encoding``, ``pages``, a record's ``record_id`` and
    #: ``body_start``): stored with the document (``encoding`` and ``pages`` shown
    #: by ``citeline show`` and ``citeline documents``), but never part of ``metadata``, so no ``meta`` filter and no
    #: search result's metadata sees it
    properties: dict[str, Any] = field(default_factory=dict)
    #: where the indexed text begins: ``text[:chunks_from]`` (a Markdown file's YAML front matter) is kept in the
    #: stored text, so offsets stay those of the file, but no chunk covers it
    chunks_from: int = 0
    #: the character offset where each page begins (PDF), giving each chunk its page; used while chunking, not stored
    page_starts: list[int] = field(default_factory=list)
    #: byte offset in its file of the line a streamed record was read from (a run reads a record file again from
    #: there); ``None`` for a whole file. Not stored.
    offset: int | None = None

    @property
    def content_hash(self) -> str:
        """SHA-256 of the document text, hex encoded."""
        return text_hash(self.text)

    @property
    def doc_id(self) -> str:
        """Stable id derived from where the document comes from, not from its content (see :func:`doc_id_of`)."""
        file = self.source_id if self.record_id is None else self.source_file
        return doc_id_of(self.source_root, file, self.record_id)


def text_hash(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8), hex encoded: the key for content and embedding-cache comparisons."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def doc_id_for(source_root: str, source_id: str) -> str:
    """The legacy document id: 16 hex digits of a hash of root and ``source_id`` (``file`` or ``file#record``).

    Used as is wherever it cannot be ambiguous (see :func:`doc_id_of`); new code calls :func:`doc_id_of`.
    """
    return hashlib.sha256(f"{source_root}\0{source_id}".encode("utf-8", "surrogatepass")).hexdigest()[:16]


#: A file path containing one of these (any case) could equal ``another.jsonl#record`` (or a CSV or TSV file's
#: record): such files get unambiguous ids.
_AMBIGUOUS = (".jsonl#", ".csv#", ".tsv#")


def record_name(path: str, record_id: str | None) -> str:
    """A document's name for people: its file's ``path``, or ``path#record_id`` for one record of a file (a JSONL
    line, a CSV row: ``records.jsonl#rec1786``); ``citeline show`` and ``Index.document`` accept it."""
    return path if record_id is None else f"{path}#{record_id}"


def record_of(source_id: str, source_file: str) -> str | None:
    """The record id of a document that is one record of its file (its source id is ``source_file#id``), else None."""
    prefix = f"{source_file}#"
    return source_id[len(prefix) :] if source_id != source_file and source_id.startswith(prefix) else None


def record_id_of(source_id: str, properties: Mapping[str, Any]) -> str | None:
    """The record id of a stored document that is one record of a file (its ``source_id`` is ``file#id``, its
    properties hold ``record_id``), else None (a whole file; a text added with ``Index.add_texts``, whose source id
    is its id alone)."""
    record_id = properties.get("record_id")
    return str(record_id) if record_id is not None and source_id.endswith(f"#{record_id}") else None


def doc_id_of(source_root: str, source_file: str, record_id: str | None = None) -> str:
    """The document id of a whole file (``record_id`` None) or of one record of a file: 16 hex digits.

    The legacy key ``root NUL file#record`` is ambiguous only when a file path contains ``.jsonl#``: the file
    ``x.jsonl#1.txt`` and record ``1.txt`` of ``x.jsonl`` had the same key, and so had record ``b.jsonl#c`` of
    ``a.jsonl`` and record ``c`` of ``a.jsonl#b.jsonl``. Every other file and record keeps its legacy id, so
    existing indexes re-index nothing. A file whose path contains ``.jsonl#`` (or ``.csv#``, ``.tsv#``: the record
    formats added later; files with those in their path were indexed with the legacy key before and are re-indexed
    once under the new one), and each record of such a file,
    instead hashes ``citeline-doc-v2 NUL root NUL file [NUL record]``: a path holds no NUL, so root and file
    are delimited exactly, and the leading tag never starts a legacy key (roots are absolute, starting ``/``).
    """
    if not any(marker in source_file.lower() for marker in _AMBIGUOUS):
        return doc_id_for(source_root, source_file if record_id is None else f"{source_file}#{record_id}")
    parts = ["citeline-doc-v2", source_root, source_file] + ([] if record_id is None else [record_id])
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def display_path(path: str | os.PathLike[str] | bytes) -> str:
    """``path`` made safe for a one-line message, JSON and DuckDB: bytes that are not UTF-8 show as ``\\xNN``.

    ``os.scandir`` hands back a name that is not valid UTF-8 with lone surrogates in it (``\\udcff`` for byte
    0xff); such a str cannot be encoded, so every message and ledger row goes through this. Control characters
    (a newline in a file name) are escaped too, so the message stays on one line.
    """
    try:
        text = os.fsencode(path).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name can hold (from a JSON "\ud800" escape): show it as such
        text = os.fsdecode(path).encode("utf-8", "backslashreplace").decode("utf-8")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def is_valid_text(value: str) -> bool:
    """True when ``value`` encodes as UTF-8: no lone surrogate (from a bad file name or a ``"\\ud800"`` escape)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: How many line numbers of a file's records without text :class:`Parsed` keeps (the run's log names them).
EMPTY_LINES_KEPT = 10


@dataclass
class Parsed:
    """What parsing one file gave: its documents, and the problems that failed single records or the whole file
    (or why it was skipped: an empty file is no document and no failure).

    ``errors`` are :class:`SourceError` s naming the file (and the line, for a record). ``kept_doc_ids`` are the
    ids of records that failed but whose id is known: the stored version of each must be kept. ``complete`` is
    False when the file failed as a whole or a record failed before its id was known (invalid JSON, a bad id):
    then no stored document of this file may be removed this run, since a missing record may be that one.
    """

    documents: list[Document] = field(default_factory=list)
    errors: list[SourceError] = field(default_factory=list)
    kept_doc_ids: list[str] = field(default_factory=list)
    complete: bool = True
    #: why the file was skipped rather than parsed (``"empty file"``): not an error, and no document of it remains
    skipped: str | None = None
    #: the file failed as a whole (unreadable, too large, not UTF-8, ...): it gave no documents, and a caller that
    #: was handed documents of it as they were read (a streamed record file) must drop them
    failed: bool = False
    #: the file's size or modification time moved while it was read (``parsed.parse_source`` reads it again)
    changed: bool = False
    #: records left out for holding no text (an empty or blank text field): no document, and not an error, but
    #: counted in the run's log so that a record file's missing records are accounted for
    empty_records: int = 0
    #: the line numbers of the first :data:`EMPTY_LINES_KEPT` of them (a count, not a list, for a large export)
    empty_lines: list[int] = field(default_factory=list)
    #: what the run's log should say of the file although it parsed (its encoding was a close call), one line each
    notes: list[SourceError] = field(default_factory=list)

    def add_empty(self, line_number: int) -> None:
        """Count one record left out for holding no text."""
        self.empty_records += 1
        if len(self.empty_lines) < EMPTY_LINES_KEPT:
            self.empty_lines.append(line_number)

    def fail_record(self, error: SourceError, doc_id: str | None) -> None:
        """Record one failed record: its stored version is kept by id, or the file marked incomplete."""
        self.errors.append(error)
        if doc_id is None:
            self.complete = False
        else:
            self.kept_doc_ids.append(doc_id)


def unstorable_field(document: Document) -> str | None:
    """The first field of ``document`` that DuckDB, JSON or Arrow cannot store (a lone surrogate), or None."""
    if not is_valid_text(document.text):
        return "text holds a lone surrogate (an invalid \\ud800-\\udfff escape or character)"
    if not is_valid_text(document.title):
        return "title holds a lone surrogate (an invalid \\ud800-\\udfff escape or character)"
    if not is_valid_text(document.source_id) or (document.record_id and not is_valid_text(document.record_id)):
        return "id holds a lone surrogate (an invalid \\ud800-\\udfff escape or character)"
    problem = metadata_problem(document.metadata)
    if problem is not None:
        return problem
    try:
        text = json.dumps(document.metadata, ensure_ascii=False, allow_nan=False)
        json.dumps([text, document.properties], ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return "metadata holds a lone surrogate (an invalid \\ud800-\\udfff escape or character)"
    except ValueError as exc:
        if "Out of range float" in str(exc):  # JSON has no NaN or infinity: --json and the HTTP API would break
            return "metadata holds a number JSON cannot hold (NaN or infinity); give it as text"
        return f"metadata cannot be stored as JSON ({exc})"
    except TypeError as exc:
        return f"metadata cannot be stored as JSON ({exc})"
    if len(text) > MAX_METADATA_CHARS:
        return (
            f"metadata takes {len(text):,} characters as JSON, past the {MAX_METADATA_CHARS:,} one document may hold "
            "(put long text in the text field)"
        )
    return None


#: The integers the catalog and every reader hold exactly (DuckDB's BIGINT; JSON readers in other languages).
_INT_RANGE = (-(2**63), 2**63 - 1)


def metadata_problem(metadata: Mapping[str, Any]) -> str | None:
    """Why ``metadata`` may not be stored (None: it may): more than :data:`~citeline.sources.MAX_METADATA_FIELDS`
    fields, nested deeper than :data:`~citeline.sources.MAX_METADATA_DEPTH` levels, a key that is not text, or an
    integer past 64 bits. Walked without recursion, so no input can make the check itself fail; every reader of
    the index can then read back what was stored (``docs/sources.md#metadata-bounds``)."""
    if len(metadata) > MAX_METADATA_FIELDS:
        return (
            f"metadata has {len(metadata):,} fields, more than the {MAX_METADATA_FIELDS:,} one document may hold "
            "(a table this wide: name its text column, or split its columns)"
        )
    stack: list[tuple[Any, int]] = [(metadata, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            if any(not isinstance(key, str) for key in value):
                return "metadata has a key that is not text"
            items: Any = value.values()
        elif isinstance(value, list | tuple):
            items = value
        else:
            if isinstance(value, int) and not isinstance(value, bool) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
                return "metadata holds an integer past 64 bits, which no reader holds exactly; give it as text"
            continue
        if depth >= MAX_METADATA_DEPTH:
            return f"metadata nested deeper than {MAX_METADATA_DEPTH} levels"
        stack.extend((item, depth + 1) for item in items)
    return None


class EmptySource(SourceError):
    """The file holds nothing but whitespace (or nothing): skipped and counted, not a failure."""
