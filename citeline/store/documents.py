"""The documents listing: the SQL behind ``Index.documents`` and ``Index.document`` (``citeline documents``,
``citeline show``, the HTTP API's ``/documents``). Split from ``catalog`` to keep each module small; it reads the
catalog's tables through a connection the caller opened with ``catalog.connect``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from citeline.errors import IndexNotFoundError, QueryError
from citeline.sources.document import record_id_of, record_name, record_of
from citeline.store import catalog
from citeline.store.connection import check_rows, check_text
from citeline.store.metadata import FINGERPRINT_SQL, PROPERTIES_KEY, split_metadata
from citeline.util import paths
from citeline.util.output import iso_utc

if TYPE_CHECKING:
    import duckdb

    from citeline.store.filters import Filters


@dataclass(frozen=True)
class DocumentInfo:
    """One indexed document as :meth:`Index.documents` lists it (no text): where it came from, what it holds."""

    doc_id: str
    source_path: str
    source_id: str
    source_root: str
    title: str
    format: str
    chunks: int
    pages: int | None  #: the page count of paged formats (PDF), else None
    encoding: str | None  #: the text encoding a file was read in (``utf-8``, ``cp1252``); None where there was none
    size_bytes: int | None
    content_hash: str
    run_id: str
    ingested_at: str | None
    metadata: dict[str, Any] = field(default_factory=dict)  #: the document's metadata
    #: the record's id in its file when the document is one record (``source_id`` is ``file#record_id``; its text,
    #: what offsets index into, is the record's, not the file's); None for a whole file
    record_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready data (the keys of :data:`DOCUMENT_FIELDS`)."""
        return asdict(self)


@dataclass(frozen=True)
class ChunkSpan:
    """Where one chunk of a document lies: ``text[char_start:char_end]`` of its :class:`DocumentDetail`."""

    chunk_id: int
    ordinal: int
    char_start: int
    char_end: int
    page: int | None = None


@dataclass(frozen=True)
class DocumentDetail(DocumentInfo):
    """One document as :meth:`Index.document` reads it: the listing's fields, its ``text`` (what passage offsets
    index into) and its chunks' ``spans``."""

    text: str = ""
    spans: tuple[ChunkSpan, ...] = ()

    # The excerpts every surface cuts (``citeline show --chunk/--around``, MCP's ``get_passage``), here so that
    # they cut and refuse alike.

    def chunk_span(self, ordinal: int) -> tuple[int, int]:
        """``(char_start, char_end)`` of chunk ``ordinal``; :class:`QueryError` naming the chunks it has."""
        for span in self.spans:
            if span.ordinal == ordinal:
                return span.char_start, span.char_end
        held = f"chunks 0 to {len(self.spans) - 1}" if self.spans else "no chunks"
        raise QueryError(f"document {self.doc_id} has {held}, not {ordinal}")

    def excerpt(self, char_start: int, char_end: int, context: int = 0, limit: int | None = None) -> tuple[int, int]:
        """``(start, end)`` of ``text[char_start:char_end]`` widened by ``context`` characters each side, cut to the
        text and to at most ``limit`` characters from ``start``; :class:`QueryError` for a span past the end of the
        text or ending before it starts."""
        if char_end < char_start:
            raise QueryError(f"char_end ({char_end}) is before char_start ({char_start})")
        if char_start > len(self.text):
            raise QueryError(
                f"character {char_start} is past the end of document {self.doc_id} ({len(self.text)} characters)"
            )
        start = max(0, char_start - context)
        end = min(len(self.text), char_end + context)
        return start, end if limit is None else min(end, start + limit)


#: The keys of each :func:`documents` record, in order (``document`` adds ``text`` and ``spans``).
DOCUMENT_FIELDS = (
    "doc_id",
    "source_path",
    "source_id",
    "source_root",
    "title",
    "format",
    "chunks",
    "pages",
    "encoding",
    "size_bytes",
    "content_hash",
    "run_id",
    "ingested_at",
    "metadata",
    "record_id",
)

_DOCUMENTS_SQL = """
SELECT d.doc_id, d.path, d.source_id, d.source_root, d.title, d.format,
       (SELECT count(*) FROM chunks c WHERE c.doc_id = d.doc_id) AS chunks,
       d.size_bytes, d.content_hash, d.run_id, d.ingested_at, d.metadata{extra_columns}
FROM documents d
WHERE {condition}
ORDER BY d.source_root, d.source_id, d.doc_id
"""


def documents(
    connection: duckdb.DuckDBPyConnection, filters: Filters, limit: int | None = None, offset: int = 0
) -> list[DocumentInfo]:
    """The documents ``filters`` selects (the same filters as search), ordered by source and path, at most
    ``limit`` after skipping the first ``offset``; each a :class:`DocumentInfo`.

    ``pages`` is the page count of paged formats (PDF), else None; ``encoding`` the text encoding a file was read
    in (``utf-8``, ``cp1252``; None where there was none to find, as in a PDF); ``metadata`` the document's
    metadata dict (front matter, document info, meta tags, record fields).
    """
    if limit is not None:
        check_rows("limit", limit, 1)
    check_rows("offset", offset, 0)
    condition, params = filters.to_sql()
    sql = _DOCUMENTS_SQL.format(condition=condition, extra_columns="")
    if limit is not None:
        sql += " LIMIT ?"
        params = [*params, limit]
    if offset:
        sql += " OFFSET ?"
        params = [*params, offset]
    return [_document_record(row) for row in connection.execute(sql, params).fetchall()]


def document(connection: duckdb.DuckDBPyConnection, doc_id: str) -> DocumentDetail | None:
    """One document with its text and chunk spans; None for an id the index does not hold."""
    row = connection.execute(
        _DOCUMENTS_SQL.format(condition="d.doc_id = ?", extra_columns=", d.text"), [doc_id]
    ).fetchone()
    if row is None:
        return None
    spans = connection.execute(
        "SELECT chunk_id, ordinal, char_start, char_end, page FROM chunks WHERE doc_id = ? ORDER BY ordinal",
        [doc_id],
    ).fetchall()
    record = _document_record(row[:-1])
    return DocumentDetail(**vars(record), text=row[-1], spans=tuple(ChunkSpan(*span) for span in spans))


def read_documents(index_dir: Path, filters: Filters, limit: int | None = None, offset: int = 0) -> list[DocumentInfo]:
    """:func:`documents` of the index at ``index_dir`` (``Index.documents``)."""
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        return documents(connection, filters, limit, offset)


def spellings(name: str) -> list[str]:
    """The spellings of a document's name :func:`named` looks for: as given, and as an absolute path (relative to
    the working directory; for ``path#record``, the path's part)."""
    out = [name]
    for at in [len(name)] + ([name.index("#")] if "#" in name else []):
        path, rest = name[:at], name[at:]
        if path.strip():
            try:
                out.append(str(paths.resolved(path)) + rest)
            except paths.UnresolvablePath:  # ~nosuchuser, a symlink loop: no path spelling then
                continue
    return list(dict.fromkeys(out))


def read_document(
    index_dir: Path, doc_id: str, names: Sequence[str] = (), within: Filters | None = None
) -> DocumentDetail:
    """:func:`document` of the index at ``index_dir`` (``Index.document``): ``doc_id``, else the one document
    ``names`` name (:func:`named`); an unknown one raises :class:`IndexNotFoundError` saying how to list them.
    ``within``: only the documents these filters select exist (a scoped caller's: a name is looked for among them
    alone, so a document outside neither answers nor makes a name ambiguous)."""
    for text in (doc_id, *names):  # no file whose name is not UTF-8 is indexed (ingest refuses it)
        check_text("document name", text, "; no file whose name is not UTF-8 is indexed (rename it to index it)")
    with contextlib.closing(catalog.connect(index_dir, read_only=True)) as connection:
        record = document(connection, doc_id)
        if record is not None and within and not _selects(connection, within, record.doc_id):
            record = None
        if record is None and names:
            found = named(connection, names, within)
            record = document(connection, found) if found is not None else None
    if record is None:
        raise not_found(index_dir, doc_id)
    return record


def _selects(connection: duckdb.DuckDBPyConnection, filters: Filters, doc_id: str) -> bool:
    # Whether ``filters`` select the document ``doc_id``.
    condition, params = filters.to_sql()
    sql = f"SELECT 1 FROM documents d WHERE d.doc_id = ? AND ({condition})"
    return connection.execute(sql, [doc_id, *params]).fetchone() is not None


def not_found(index_dir: Path, doc_id: str) -> IndexNotFoundError:
    """The error of a document name the index does not hold (and, to a scoped caller, of one it may not see:
    the same words, so the two cannot be told apart)."""
    return IndexNotFoundError(
        f"no document {doc_id!r} in {index_dir}; list the documents with `citeline documents` "
        "(give an id, a source file's path or a record's name, file#id)"
    )


_NAMED_SQL = """
SELECT d.doc_id, d.path, d.source_id, d.source_file FROM documents d
WHERE (d.source_id = ANY(?) OR d.path = ANY(?) OR d.path || substr(d.source_id, length(d.source_file) + 1) = ANY(?))
  AND ({condition})
ORDER BY d.path, d.source_id
"""
#: How many records an ambiguous name's error lists.
NAMED_SHOWN = 3


def named(connection: duckdb.DuckDBPyConnection, names: Sequence[str], within: Filters | None = None) -> str | None:
    """The id of the one document ``names`` (the spellings of one name: as given, and as an absolute path) name: a
    source id (``notes/a.md``, ``records.jsonl#rec1786``, relative to its root), a source file's path, or a
    record's (``/data/records.jsonl#rec1786``); None when none does. A name that fits several documents (a file of
    records, the same source id under two roots) raises :class:`QueryError` naming some of them."""
    condition, params = within.to_sql() if within else ("TRUE", [])  # within: only the documents these select
    listed = list(names)
    rows = connection.execute(_NAMED_SQL.format(condition=condition), [listed, listed, listed, *params]).fetchall()
    exact = [row for row in rows if row[2] in names or record_name(row[1], record_of(row[2], row[3])) in names]
    chosen = exact or rows  # a path alone names its records only when none is the whole file
    if len(chosen) == 1:
        return str(chosen[0][0])
    if not chosen:
        return None
    shown = ", ".join(record_name(path, record_of(source, file)) for _, path, source, file in chosen[:NAMED_SHOWN])
    more = f" and {len(chosen) - NAMED_SHOWN} more" if len(chosen) > NAMED_SHOWN else ""
    raise QueryError(f"{names[0]!r} names {len(chosen)} documents ({shown}{more}); give one's name or id")


def _document_record(row: tuple[Any, ...]) -> DocumentInfo:
    (doc_id, path, source_id, source_root, title, fmt, chunks, size_bytes, content_hash, run_id, ingested_at,
     metadata) = row  # fmt: skip
    meta, properties = split_metadata(metadata, fmt)
    pages = properties.get("pages")
    return DocumentInfo(
        doc_id=doc_id,
        source_path=path,
        source_id=source_id,
        source_root=source_root,
        title=title,
        format=fmt,
        chunks=int(chunks),
        pages=pages if isinstance(pages, int) else None,
        encoding=properties.get("encoding"),
        size_bytes=size_bytes,
        content_hash=content_hash,
        run_id=run_id,
        ingested_at=iso_utc(ingested_at),
        metadata=meta,
        record_id=record_id_of(source_id, properties),
    )


#: Values a facet lists unless told (the most frequent first): datasette's default.
FACET_VALUES = 10


@dataclass(frozen=True)
class FacetValue:
    """One value of a metadata field and the number of documents that hold it."""

    value: str  #: as ``--where FIELD=VALUE`` matches it (a number or date as its text; an item of a list value)
    count: int


@dataclass(frozen=True)
class Facet:
    """A metadata field's facet: how many documents hold the field, and the documents per value, most first."""

    field: str
    documents: int  #: documents (of those counted) that hold the field
    values: tuple[FacetValue, ...]  #: at most the ``limit`` asked, by count (most first), then value
    more: int = 0  #: distinct values beyond those listed
    #: the share of the documents counted that choosing a value leaves, expected over the document sought (0-1,
    #: lower narrows more; a document without the field is not reached through it, so it leaves them all): facets
    #: come by it, lowest first (:func:`remaining_share`)
    remaining_share: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        """The facet as JSON-ready data."""
        return asdict(self)


#: ``(field, value) -> documents`` counts and ``(field, None) -> documents`` holding the field, as
#: ``citeline.store.passages.Passages.facet_counts`` reads them (a sharded index adds its shards' up: a document
#: lies in one shard).
FacetCounts = dict[tuple[str, str | None], int]


def count_facets(documents: Iterable[tuple[str | None, str | None]]) -> FacetCounts:
    """:data:`FacetCounts` of ``(format, stored metadata JSON)`` pairs, one a document: each value of a top-level
    field that a ``meta`` filter can match counts once a document (a list value: each of its items; numbers and
    booleans as their JSON text, what ``--where`` compares with); objects, nested lists and nulls are not counted,
    nor citeline's own fields (``metadata.split_metadata`` leaves them out, as the listing does)."""
    counts: FacetCounts = {}
    total = 0
    for fmt, stored in documents:
        total += 1
        metadata, _ = split_metadata(stored, fmt)
        for key, value in metadata.items():
            items = value if isinstance(value, list) else [value]
            texts = {
                item if isinstance(item, str) else json.dumps(item)
                for item in items
                if item is not None and not isinstance(item, dict | list)
            }
            if isinstance(value, dict) or not texts:
                continue
            counts[key, None] = counts.get((key, None), 0) + 1
            for text in texts:
                counts[key, text] = counts.get((key, text), 0) + 1
    if total:
        counts[COUNTED] = total
    return counts


#: The entry of :data:`FacetCounts` that counts the documents counted: under citeline's own key, which no metadata
#: field has (``metadata.split_metadata`` takes it out; a filter refuses it), so adding shards' counts adds it up too.
COUNTED = (PROPERTIES_KEY, None)

#: A field is an identifier, not a facet, when at least this share of the values its documents hold are held by
#: one document alone (a title, an id, a timestamp): choosing one of them finds a document, it does not narrow.
IDENTIFIER_SHARE = 0.8
#: ... and at least this many documents hold it (two documents' two titles say nothing yet).
IDENTIFIER_MIN_DOCUMENTS = 3


def identifier_fields(counts: FacetCounts) -> set[str]:
    """The fields of ``counts`` whose values are nearly all distinct (:data:`IDENTIFIER_SHARE`): no facet."""
    held: dict[str, int] = {}
    single: dict[str, int] = {}
    for (key, value), n in counts.items():
        if value is not None:
            held[key] = held.get(key, 0) + n
            single[key] = single.get(key, 0) + (n == 1)
    return {
        key
        for key, n in held.items()
        if counts.get((key, None), 0) >= IDENTIFIER_MIN_DOCUMENTS and single[key] >= IDENTIFIER_SHARE * n
    }


def remaining_share(counts: Iterable[int], holding: int, documents: int) -> float:
    """The share of ``documents`` (N) left, expected, after choosing the value of the document sought in a facet
    whose values are held by ``counts`` documents each (c_v; T of them in all, ``holding`` documents H holding the
    field). The document sought is one of the H holding it with chance H/N, and a value of it is v with chance
    c_v/T (1/H for a field of one value a document, so T = H; each of a list's items alike); choosing v leaves c_v/N
    of the documents. A document without the field is not reached through the facet, which leaves them all. So
    ``H/N * sum(c_v/T * c_v/N) + (N - H)/N``, between 0 and 1: lower narrows more.

    *Why this and not the entropy of the values*: it is what a click does to the answer; entropy ranks a field that
    2 documents of 100 hold, with 2 values, as high as one that splits all 100 in two."""
    values = list(counts)
    total = sum(values)
    if documents <= 0 or total <= 0:
        return 1.0
    held = min(holding, documents)
    share = held / documents * sum(n * n for n in values) / (total * documents) + (documents - held) / documents
    return min(1.0, share)


def facets_of(
    counts: FacetCounts, limit: int | None = FACET_VALUES, reference: FacetCounts | None = None
) -> list[Facet]:
    """:class:`Facet`\\ s of ``counts``, those that narrow: none for a field whose values are nearly all distinct in
    ``reference`` (the whole index's counts, which a field's nature is judged on; by default ``counts``:
    :func:`identifier_fields`), then fields by :func:`remaining_share` (lowest first: the facet that narrows the
    documents counted most), then by the documents holding them (most first), then name; each with at most
    ``limit`` values (None: all; else a whole number from 0, or :class:`QueryError`)."""
    if limit is not None:
        check_rows("limit", limit, 0)  # a negative one sliced values off the end, counted as "more"
    identifiers = identifier_fields(counts if reference is None else reference)
    totals = {key: n for (key, value), n in counts.items() if value is None and (key, value) != COUNTED}
    documents = counts.get(COUNTED) or max(totals.values(), default=0)
    values: dict[str, list[FacetValue]] = {key: [] for key in totals if key not in identifiers}
    for (key, value), n in counts.items():
        if value is not None and key not in identifiers:
            values.setdefault(key, []).append(FacetValue(value, n))
    shares = {
        key: remaining_share((item.count for item in items), totals.get(key, 0), documents)
        for key, items in values.items()
    }
    facets = []
    for key in sorted(values, key=lambda key: (shares[key], -totals.get(key, 0), key)):
        ranked = sorted(values[key], key=lambda item: (-item.count, item.value))
        shown = ranked if limit is None else ranked[:limit]
        facets.append(Facet(key, totals.get(key, 0), tuple(shown), len(ranked) - len(shown), round(shares[key], 4)))
    return facets


#: What the plan compares of a stored document: ``doc_id, source_root, source_file, fingerprint`` (text, title and
#: metadata: :func:`citeline.store.metadata.metadata_fingerprint`), of the rows a condition on ``documents d`` selects.
_PLANNED_SQL = f"SELECT d.doc_id, d.source_root, d.source_file, {FINGERPRINT_SQL} FROM documents d "


def planned_documents(connection: duckdb.DuckDBPyConnection, doc_ids: Sequence[str]) -> dict[str, tuple[str, str, str]]:
    """``doc_id -> (source_root, source_file, fingerprint)`` of these documents, as :func:`documents_to_plan` gives
    them (``add_texts`` plans a batch of texts against their own stored versions only)."""
    if not doc_ids:
        return {}
    rows = connection.execute(f"{_PLANNED_SQL}WHERE d.doc_id = ANY(?)", [list(doc_ids)]).fetchall()
    return {doc_id: (root, source_file, fingerprint) for doc_id, root, source_file, fingerprint in rows}


def documents_to_plan(
    connection: duckdb.DuckDBPyConnection, roots: Sequence[str], fresh: Sequence[tuple[str, str]]
) -> tuple[dict[str, tuple[str, str, str]], dict[str, int]]:
    """What the plan needs of the catalog: ``doc_id -> (source_root, source_file, fingerprint)`` (text, title and
    metadata: :func:`citeline.store.metadata.metadata_fingerprint`) of the
    documents of ``roots`` outside the ``fresh`` files (``(root, source_file)`` pairs not read this run: the
    files that were read, and those that vanished), and every root's stored document count. A run that changed
    one file of 455 loads that file's documents, not the index's."""
    if not roots:
        return {}, {}
    counts = connection.execute(
        "SELECT source_root, count(*) FROM documents WHERE source_root = ANY(?) GROUP BY source_root", [list(roots)]
    ).fetchall()
    roots_of, files_of = [root for root, _ in fresh], [source_file for _, source_file in fresh]
    skipped = pa.table({"root": pa.array(roots_of, pa.string()), "file": pa.array(files_of, pa.string())})
    connection.register("citeline_fresh_files", skipped)
    try:
        rows = connection.execute(
            f"{_PLANNED_SQL}WHERE d.source_root = ANY(?) AND NOT EXISTS (SELECT 1 FROM citeline_fresh_files f "
            "WHERE f.root = d.source_root AND f.file = d.source_file)",
            [list(roots)],
        ).fetchall()
    finally:
        connection.unregister("citeline_fresh_files")
    stored = {doc_id: (root, source_file, fingerprint) for doc_id, root, source_file, fingerprint in rows}
    return stored, {root: int(count) for root, count in counts}
