"""Discover files under the roots a user ingests, and parse each one into a :class:`Document`.

A document is keyed by ``(source_root, source_id)``: the resolved root that was ingested and the file's path
relative to it. Parsing never guesses: text that is not valid UTF-8, binary files, empty files and files above
the size limit raise :class:`~citeline.errors.SourceError` naming the file and the problem, so an ingestion run
can report them and go on with the rest.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citeline.errors import SourceError

#: Files larger than this are refused rather than read into memory (override per call).
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024


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

    @property
    def content_hash(self) -> str:
        """SHA-256 of the document text, hex encoded."""
        return text_hash(self.text)

    @property
    def doc_id(self) -> str:
        """Stable id derived from where the document comes from, not from its content."""
        return doc_id_for(self.source_root, self.source_id)


def text_hash(text: str) -> str:
    """SHA-256 of ``text`` (UTF-8), hex encoded: the key for content and embedding-cache comparisons."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def doc_id_for(source_root: str, source_id: str) -> str:
    """The document id for a source: 16 hex digits of a hash of root and relative id."""
    return hashlib.sha256(f"{source_root}\0{source_id}".encode()).hexdigest()[:16]


Parser = Callable[[SourceFile, bytes], list[Document]]
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


def resolve_roots(roots: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Roots as absolute, resolved paths: the scope a run's removals are limited to."""
    return [str(Path(root).expanduser().resolve()) for root in roots]


def discover(roots: Iterable[str | os.PathLike[str]]) -> list[SourceFile]:
    """List the supported files under each root, sorted, skipping hidden files and folders.

    A root may be a directory (searched recursively) or a single file. A root that does not exist, or a file
    root with an unsupported suffix, raises :class:`SourceError`: the user named it, so silence would hide a typo.
    """
    found: list[SourceFile] = []
    for root in roots:
        root_path = Path(root).expanduser().resolve()
        if not root_path.exists():
            raise SourceError(str(root), "no such file or directory")
        if root_path.is_file():
            if root_path.suffix.lower() not in PARSERS:
                raise SourceError(
                    str(root_path),
                    f"unsupported file type {root_path.suffix or '(none)'}; "
                    f"citeline reads {', '.join(supported_suffixes())}",
                )
            found.append(SourceFile(str(root_path), str(root_path), root_path.name))
            continue
        for path in _walk(root_path):
            found.append(SourceFile(str(root_path), str(path), path.relative_to(root_path).as_posix()))
    return found


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        # Sorting in place makes the walk deterministic; hidden folders (.git, .venv) are never documents.
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            path = Path(dirpath) / name
            if path.suffix.lower() in PARSERS and path.is_file():
                yield path


def parse(source: SourceFile, *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> list[Document]:
    """Read and parse one file into documents (one for most formats; one per record for JSONL)."""
    path = Path(source.path)
    parse_file = PARSERS.get(path.suffix.lower())
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
    except SourceError:
        raise
    except OSError as exc:
        raise SourceError(source.path, f"cannot read file: {exc.strerror or exc}") from exc
    documents = parse_file(source, data)
    for document in documents:
        document.source_file = source.source_id
        document.size_bytes = stat.st_size
        document.mtime = stat.st_mtime
    return documents


def decode_text(source: SourceFile, data: bytes) -> str:
    """Decode UTF-8 strictly (a leading BOM is dropped); refuse binary and empty content."""
    if b"\0" in data[:8192]:
        raise SourceError(source.path, "looks like a binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(
            source.path, f"not valid UTF-8 at byte {exc.start} (re-save the file as UTF-8)"
        ) from exc
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
        Document(source.root, source.source_id, source.path, title[:200], text, "html",
                 {k: v for k, v in extra.items() if v})
    ]


@parser(".pdf")
def parse_pdf(source: SourceFile, data: bytes) -> list[Document]:
    """PDF text by pypdf, pages joined by blank lines; ``metadata["page_starts"]`` maps offsets to pages."""
    import io

    import pypdf
    from pypdf.errors import PyPdfError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise SourceError(source.path, "PDF is encrypted; decrypt it first")
        pages = [page.extract_text() or "" for page in reader.pages]
        info_title = reader.metadata.title if reader.metadata else None
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
        Document(source.root, source.source_id, source.path, title[:200], text, "pdf",
                 {"page_starts": page_starts, "pages": len(pages)})
    ]


@parser(".jsonl")
def parse_jsonl(source: SourceFile, data: bytes) -> list[Document]:
    """JSON Lines, one document per record: ``_id``/``id``, ``title``, ``text``; other fields become metadata.

    A BEIR ``corpus.jsonl`` ingests as it is. Records are keyed ``file#id`` so each one is added, updated and
    removed on its own. A malformed line stops the file with an error naming the line, so that a half-read file
    never makes its missing records look deleted.
    """
    import json

    text = decode_text(source, data)
    documents: list[Document] = []
    for line_number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SourceError(source.path, f"line {line_number}: invalid JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise SourceError(source.path, f"line {line_number}: expected a JSON object")
        record_id = record.get("_id", record.get("id"))
        if record_id is None or str(record_id) == "":
            raise SourceError(source.path, f"line {line_number}: record has no _id or id")
        body = record.get("text")
        if not isinstance(body, str):
            raise SourceError(source.path, f"line {line_number}: record {record_id!r} has no text field")
        title = str(record.get("title") or "").strip()
        metadata = {k: v for k, v in record.items() if k not in ("_id", "id", "title", "text")}
        metadata["record_id"] = str(record_id)
        if title and body.strip():
            # The title is part of what is searched (as BEIR and MTEB encode "title + text"), so the stored
            # text starts with it; body_start says where the record's own text begins.
            metadata["body_start"] = len(title) + 2
            body = f"{title}\n\n{body}"
        documents.append(
            Document(
                source.root,
                f"{source.source_id}#{record_id}",
                source.path,
                title[:200] if title else _first_line_title(body, str(record_id)),
                body,
                "jsonl",
                metadata,
            )
        )
    documents = [d for d in documents if d.text.strip()]
    if not documents:
        raise SourceError(source.path, "no records with text")
    return documents
