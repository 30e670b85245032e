"""Parse each file found under an ingested root (see ``citeline.sources.discovery``) into :class:`Document` objects,
through
the ``@parser`` registry of source formats (txt, md, html, pdf, jsonl: one function and one decorator line each).

A document is keyed by ``(source_root, source_id)``: the resolved root that was ingested and the file's path
relative to it. Parsing never guesses: text that is not valid UTF-8, binary files, empty files and files above
the size limit raise :class:`~citeline.errors.SourceError` naming the file and the problem, so an ingestion run
can report them and go on with the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citeline.errors import SourceError
from citeline.sources import DEFAULT_MAX_FILE_BYTES, DEFAULT_SOURCE  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class SourceFile:
    """A file found under an ingested root."""

    root: str  #: the resolved root directory (or file) the user asked to ingest
    path: str  #: absolute path of the file
    source_id: str  #: path relative to ``root``, with forward slashes


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
    #: the record's own id for a document that is one record of a file (JSONL); ``None`` for a whole file
    record_id: str | None = None

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


#: A file path containing this (any case) could equal ``another.jsonl#record``: such files get unambiguous ids.
_AMBIGUOUS = ".jsonl#"


def doc_id_of(source_root: str, source_file: str, record_id: str | None = None) -> str:
    """The document id of a whole file (``record_id`` None) or of one record of a file: 16 hex digits.

    The legacy key ``root NUL file#record`` is ambiguous only when a file path contains ``.jsonl#``: the file
    ``x.jsonl#1.txt`` and record ``1.txt`` of ``x.jsonl`` had the same key, and so had record ``b.jsonl#c`` of
    ``a.jsonl`` and record ``c`` of ``a.jsonl#b.jsonl``. Every other file and record keeps its legacy id, so
    existing indexes re-index nothing. A file whose path contains ``.jsonl#`` (and each record of such a file)
    instead hashes ``citeline-doc-v2 NUL root NUL file [NUL record]``: a path holds no NUL, so root and file
    are delimited exactly, and the leading tag never starts a legacy key (roots are absolute, starting ``/``).
    """
    if _AMBIGUOUS not in source_file.lower():
        return doc_id_for(source_root, source_file if record_id is None else f"{source_file}#{record_id}")
    parts = ["citeline-doc-v2", source_root, source_file] + ([] if record_id is None else [record_id])
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


Parser = Callable[[SourceFile, bytes], "list[Document] | Parsed"]
PARSERS: dict[str, Parser] = {}


def parser(*suffixes: str) -> Callable[[Parser], Parser]:
    """Register a parser for file suffixes (lower case, with the dot)."""

    def register(func: Parser) -> Parser:
        for suffix in suffixes:
            PARSERS[suffix] = func
        return func

    return register


def supported_suffixes() -> tuple[str, ...]:
    """The file suffixes citeline can parse."""
    return tuple(sorted(PARSERS))


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


@dataclass
class Parsed:
    """What parsing one file gave: its documents, and the problems that failed single records or the whole file.

    ``errors`` are :class:`SourceError` s naming the file (and the line, for a record). ``kept_doc_ids`` are the
    ids of records that failed but whose id is known: the stored version of each must be kept. ``complete`` is
    False when the file failed as a whole or a record failed before its id was known (invalid JSON, a bad id):
    then no stored document of this file may be removed this run, since a missing record may be that one.
    """

    documents: list[Document] = field(default_factory=list)
    errors: list[SourceError] = field(default_factory=list)
    kept_doc_ids: list[str] = field(default_factory=list)
    complete: bool = True

    def fail_record(self, error: SourceError, doc_id: str | None) -> None:
        """Record one failed record: its stored version is kept by id, or the file marked incomplete."""
        self.errors.append(error)
        if doc_id is None:
            self.complete = False
        else:
            self.kept_doc_ids.append(doc_id)


def parse_source(source: SourceFile, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> Parsed:
    """Read and parse one file; bad input never raises, it comes back in :attr:`Parsed.errors`.

    A problem with the file (unreadable, too large, not UTF-8, no text) fails the file: no documents,
    ``complete`` False. A problem with one record of a JSONL file fails that record alone. Every document is
    checked last for text that cannot be stored (a lone surrogate in its text, title, id or metadata), whatever
    its parser. Exceptions other than :class:`SourceError` (a parser library's own bug) still propagate, so the
    fuzz tests see them; the pipeline turns them into a file error.
    """
    path = Path(source.path)
    parse_file = PARSERS.get(path.suffix.lower())
    try:
        if parse_file is None:
            raise SourceError(source.path, f"unsupported file type {path.suffix or '(none)'}")
        try:
            stat = path.stat()
            if stat.st_size > max_file_bytes:
                raise SourceError(
                    source.path,
                    f"file is {stat.st_size:,} bytes, above the {max_file_bytes:,}-byte limit "
                    "(raise max_file_bytes / --max-file-bytes to index it)",
                )
            data = path.read_bytes()
        except OSError as exc:
            raise SourceError(source.path, f"cannot read file: {exc.strerror or exc}") from exc
        result = parse_file(source, data)
    except SourceError as exc:
        return Parsed(errors=[exc], complete=False)
    parsed = result if isinstance(result, Parsed) else Parsed(documents=result)
    documents, parsed.documents = parsed.documents, []
    for document in documents:
        document.source_file = source.source_id
        document.size_bytes = stat.st_size
        document.mtime = stat.st_mtime
        problem = unstorable_field(document)
        if problem is None:
            parsed.documents.append(document)
        elif document.record_id is None:
            return Parsed(errors=[SourceError(source.path, problem)], complete=False)
        else:
            error = SourceError(source.path, f"record {document.record_id!r}: {problem}")
            parsed.fail_record(error, document.doc_id if is_valid_text(document.record_id) else None)
    if not parsed.documents and not parsed.errors:
        return Parsed(errors=[SourceError(source.path, "no records with text")], complete=False)
    return parsed


def unstorable_field(document: Document) -> str | None:
    """The first field of ``document`` that DuckDB, JSON or Arrow cannot store (a lone surrogate), or None."""
    if not is_valid_text(document.text):
        return "text holds a lone surrogate (an invalid \\ud800-\\udfff escape or character)"
    if not is_valid_text(document.title):
        return "title holds a lone surrogate (an invalid \\ud800-\\udfff escape or character)"
    if not is_valid_text(document.source_id) or (document.record_id and not is_valid_text(document.record_id)):
        return "id holds a lone surrogate (an invalid \\ud800-\\udfff escape or character)"
    try:
        json.dumps(document.metadata, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "metadata holds a lone surrogate (an invalid \\ud800-\\udfff escape or character)"
    except (TypeError, ValueError) as exc:
        return f"metadata cannot be stored as JSON ({exc})"
    return None


def parse(source: SourceFile, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> list[Document]:
    """Read and parse one file into documents, all or nothing: the first problem raises :class:`SourceError`.

    The whole-file contract of earlier versions (a caller that treats a failed file as "keep everything stored
    from it" stays safe). :func:`parse_source` is the per-record form the pipeline uses.
    """
    parsed = parse_source(source, max_file_bytes=max_file_bytes)
    if parsed.errors:
        first = parsed.errors[0]
        more = len(parsed.errors) - 1
        raise SourceError(first.path, first.reason + (f" (and {more} more problem{'s' * (more > 1)})" if more else ""))
    return parsed.documents


def decode_text(source: SourceFile, data: bytes) -> str:
    """Decode UTF-8 strictly (a leading BOM is dropped); refuse binary and empty content."""
    if b"\0" in data[:8192]:
        raise SourceError(source.path, "looks like a binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(source.path, f"not valid UTF-8 at byte {exc.start} (re-save the file as UTF-8)") from exc
    if not text.strip():
        raise SourceError(source.path, "file is empty or only whitespace")
    return text


def _first_line_title(text: str, fallback: str) -> str:
    for line in text.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped[:200]
    return fallback


@parser(".txt")
def parse_text(source: SourceFile, data: bytes) -> list[Document]:
    """Plain text: the title is the first non-empty line."""
    text = decode_text(source, data)
    title = _first_line_title(text, Path(source.path).stem)
    return [Document(source.root, source.source_id, source.path, title, text, "text")]


@parser(".md", ".markdown")
def parse_markdown(source: SourceFile, data: bytes) -> list[Document]:
    """Markdown, kept verbatim so offsets match the file; the title is the first ``#`` heading."""
    text = decode_text(source, data)
    title = next(
        (line.lstrip("#").strip() for line in text.splitlines() if line.startswith("# ")),
        _first_line_title(text, Path(source.path).stem),
    )[:200]
    return [Document(source.root, source.source_id, source.path, title, text, "markdown")]


@parser(".html", ".htm")
def parse_html(source: SourceFile, data: bytes) -> list[Document]:
    """HTML: the main text as trafilatura extracts it (boilerplate, menus and scripts dropped).

    The stored text is the extracted text, so chunk offsets index into it, not into the markup. A page where
    trafilatura finds no main content falls back to all of its visible text.
    """
    import trafilatura

    markup = decode_text(source, data)
    text = trafilatura.extract(markup, include_comments=False, include_tables=True, favor_recall=True)
    if not text or not text.strip():
        text = trafilatura.html2txt(markup) or ""
    if not text.strip():
        raise SourceError(source.path, "HTML page has no text")
    metadata = trafilatura.extract_metadata(markup)
    title = (metadata.title if metadata and metadata.title else None) or _first_line_title(text, Path(source.path).stem)
    extra = {"author": metadata.author, "date": metadata.date} if metadata else {}
    return [
        Document(
            source.root, source.source_id, source.path, title[:200], text, "html", {k: v for k, v in extra.items() if v}
        )
    ]


#: The Latin ligatures of Unicode's alphabetic presentation forms (U+FB00-FB06), each to its letters (its NFKC).
#: A PDF's font often sets ff, fi, fl, ffi and ffl as one glyph (LaTeX does by default), and pypdf extracts the
#: glyph as that one code point (py-pdf/pypdf#2046): "signiﬁcant" is then another word than "significant" to BM25,
#: five word pieces to the model, and not what a reader types or copies. Ligated SciFact loses about 0.01 test
#: nDCG@10; expanded, it scores as SciFact does (docs/quality.md#normalisation-unicode-pdf-ligatures-word-forms).
_LIGATURES = str.maketrans({chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)})


def expand_ligatures(text: str) -> str:
    """``text`` with each Latin ligature character (U+FB00-FB06: ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ) written as its letters."""
    return text.translate(_LIGATURES)


@parser(".pdf")
def parse_pdf(source: SourceFile, data: bytes) -> list[Document]:
    """PDF text by pypdf, pages joined by blank lines, ligatures written as their letters (:func:`expand_ligatures`);
    ``metadata["page_starts"]`` maps offsets to pages."""
    import io

    import pypdf
    from pypdf.errors import PyPdfError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise SourceError(source.path, "PDF is encrypted; decrypt it first")
        pages = [expand_ligatures(page.extract_text() or "") for page in reader.pages]
        info_title = expand_ligatures(reader.metadata.title or "") if reader.metadata else None
    except SourceError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError, OSError) as exc:
        # PyPdfError covers pypdf's own refusals, LimitReachedError included (a declared size past its safety
        # limit, found by fuzzing); the others are what its parser raises on malformed structures.
        raise SourceError(source.path, f"corrupt or unreadable PDF ({type(exc).__name__}: {exc})") from exc
    page_starts, parts, offset = [], [], 0
    for page_text in pages:
        page_starts.append(offset)
        parts.append(page_text)
        offset += len(page_text) + 2
    text = "\n\n".join(parts)
    if not text.strip():
        raise SourceError(source.path, "PDF has no extractable text (scanned images need OCR first)")
    title = (info_title or "").strip() or _first_line_title(text, Path(source.path).stem)
    return [
        Document(
            source.root,
            source.source_id,
            source.path,
            title[:200],
            text,
            "pdf",
            {"page_starts": page_starts, "pages": len(pages)},
        )
    ]


@parser(".jsonl")
def parse_jsonl(source: SourceFile, data: bytes) -> Parsed:
    """JSON Lines, one document per record: ``_id``/``id``, ``title``, ``text``; other fields become metadata.

    A BEIR ``corpus.jsonl`` ingests as it is. Each record is its own document (``source_id`` ``file#id``), added,
    updated and removed on its own, and a bad record fails alone with an error naming the file and line: invalid
    JSON, no id, an id that is not a string or integer, no text, or a lone-surrogate escape (``"\\ud800"``) in
    any field. A record whose id is known keeps its stored version; a line whose id is not known marks the file
    incomplete (:class:`Parsed`), so a half-read file never makes its missing records look deleted.

    Ids compare as text (``1`` and ``"1"`` are the same id). A repeated id is an error on each later line and
    the first record is kept: the first occurrence is what a reader of the file finds first, and keeping it
    (rather than refusing all) leaves the id searchable while the file is fixed.
    """
    text = decode_text(source, data)
    parsed = Parsed()
    first_line: dict[str, int] = {}

    def fail(line_number: int, reason: str, record_id: str | None = None) -> None:
        known = record_id is not None and is_valid_text(record_id)
        doc_id = doc_id_of(source.root, source.source_id, record_id) if known and record_id is not None else None
        parsed.fail_record(SourceError(source.path, f"line {line_number}: {reason}"), doc_id)

    for line_number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            fail(line_number, f"invalid JSON ({exc.msg})")
            continue
        except (ValueError, RecursionError) as exc:  # an integer past 4,300 digits; nesting past the stack
            fail(line_number, f"invalid JSON ({type(exc).__name__}: {str(exc)[:100]})")
            continue
        if not isinstance(record, dict):
            fail(line_number, "expected a JSON object")
            continue
        raw_id = record.get("_id", record.get("id"))
        if raw_id is None or raw_id == "":
            fail(line_number, "record has no _id or id")
            continue
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
            fail(line_number, f"record id must be a string or an integer, not {type(raw_id).__name__}")
            continue
        record_id = str(raw_id)
        shown_id = display_path(record_id)
        if not is_valid_text(record_id):
            fail(line_number, f"record id '{shown_id}' holds a lone surrogate (an invalid \\ud800-\\udfff escape)")
            continue
        if record_id in first_line:
            # Not a lost record: its id is indexed from the first line, so the file stays complete.
            reason = f"duplicate id '{shown_id}' (first on line {first_line[record_id]}); this record is skipped"
            parsed.errors.append(SourceError(source.path, f"line {line_number}: {reason}"))
            continue
        first_line[record_id] = line_number
        body = record.get("text")
        if not isinstance(body, str):
            fail(line_number, f"record '{shown_id}' has no text field", record_id)
            continue
        title = str(record.get("title") or "").strip()
        metadata = {k: v for k, v in record.items() if k not in ("_id", "id", "title", "text")}
        metadata["record_id"] = record_id
        if title and body.strip():
            # The title is part of what is searched (as BEIR and MTEB encode "title + text"), so the stored
            # text starts with it; body_start says where the record's own text begins.
            metadata["body_start"] = len(title) + 2
            body = f"{title}\n\n{body}"
        if not body.strip():
            continue  # an empty record is not a document (and was never one: nothing stored to keep)
        document = Document(
            source.root,
            f"{source.source_id}#{record_id}",
            source.path,
            title[:200] if title else _first_line_title(body, record_id),
            body,
            "jsonl",
            metadata,
            source_file=source.source_id,
            record_id=record_id,
        )
        problem = unstorable_field(document)
        if problem is not None:
            fail(line_number, f"record '{shown_id}': {problem}", record_id)
            continue
        parsed.documents.append(document)
    if not parsed.documents and parsed.complete and not parsed.errors:
        raise SourceError(source.path, "no records with text")
    return parsed
