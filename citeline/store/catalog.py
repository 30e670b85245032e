"""The catalog: ``meta.duckdb``, the source of truth. Every SQL statement citeline runs lives here, except the
filter ``WHERE`` builder (``citeline.store.filters``), the runs table's (``citeline.store.ledger``), the files table's
(``citeline.store.file_stats``: each source file's stat as a run last read it, for freshness), the consistency
queries of ``verify`` and ``rebuild`` (``citeline.store.checks``) and the queries readers run on the passage rows
files, not on the catalog (``citeline.store.passages``). Row shapes (Arrow tables) are in
``citeline.store.rows``.

Tables: ``index_meta`` (key/JSON value), ``documents`` (text and provenance), ``chunks`` (offsets, text, hash,
vector), ``runs`` (the ledger). Derived files (vector index, BM25 folder) are rebuilt from these rows, never the
other way round.

Each table has a primary key (``key``, ``doc_id``, ``chunk_id``, ``run_id``), so no writer, however it got in,
can store a row twice. Indexes created before the keys (schema version 1 all the same) get them from
``citeline rebuild``, which first removes duplicate rows (``checks.remove_duplicate_rows``, ``add_primary_keys``).
The keys cost a little insert time and file size (figures: docs/scale.md#choices-measured-in-the-code).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa

from citeline.errors import IndexCorruptError
from citeline.store import ledger
from citeline.store.connection import DB_FILE, argument_error, connect, create_file, db_path  # noqa: F401  (re-exported)
from citeline.store.rows import arrow_to_vectors

if TYPE_CHECKING:  # imported where used: a search that reads meta.json never loads DuckDB (store/meta_cache.py)
    import duckdb

SCHEMA_VERSION = 1
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS index_meta (key VARCHAR NOT NULL PRIMARY KEY, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id VARCHAR NOT NULL PRIMARY KEY,
    source_root VARCHAR NOT NULL,
    source_id VARCHAR NOT NULL,
    source_file VARCHAR NOT NULL,
    path VARCHAR NOT NULL,
    title VARCHAR NOT NULL,
    format VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,
    text VARCHAR NOT NULL,
    metadata JSON,
    size_bytes BIGINT,
    mtime DOUBLE,
    run_id VARCHAR NOT NULL,
    ingested_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id BIGINT NOT NULL PRIMARY KEY,
    doc_id VARCHAR NOT NULL,
    ordinal INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    text VARCHAR NOT NULL,
    text_hash VARCHAR NOT NULL,
    page INTEGER,
    vector FLOAT[{dim}] NOT NULL,
    run_id VARCHAR NOT NULL
);
"""


def create_schema(connection: duckdb.DuckDBPyConnection, dimension: int, document_vectors: bool = False) -> None:
    """Create the tables of a new index (idempotent); the ledger's table comes from ``ledger.create_table``.
    ``document_vectors``: the chunks table also holds each document's whole-text vector on its first chunk."""
    connection.execute(_SCHEMA.format(dim=int(dimension)))
    if document_vectors:
        connection.execute(f"ALTER TABLE chunks ADD COLUMN IF NOT EXISTS {DOCUMENT_VECTOR} FLOAT[]")


#: The chunks column of whole-document vectors (``document_vectors`` indexes; NULL but on a document's first chunk).
DOCUMENT_VECTOR = "document_vector"


def keeps_document_vectors(connection: duckdb.DuckDBPyConnection) -> bool:
    """Whether this index's chunks table has the :data:`DOCUMENT_VECTOR` column."""
    found = connection.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_name = 'chunks' AND column_name = ?",
        [DOCUMENT_VECTOR],
    ).fetchall()
    return bool(found[0][0])


def new_meta(
    embedder: Any,
    max_tokens: int,
    overlap_tokens: int,
    vector_index: str,
    chunker_version: int,
    embed_text: str,
    document_vectors: bool = False,
) -> dict[str, Any]:
    """``index_meta`` of a new, empty index (generation 0) for an embedder (a ``citeline.model.embedding.Embedder``)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": embedder.model_name,
        "backend": embedder.backend,
        "model_fingerprint": embedder.fingerprint,
        "dimension": embedder.dimension,
        "model_max_tokens": embedder.max_seq_length,
        "max_tokens": max_tokens,
        "overlap_tokens": overlap_tokens,
        "chunker_version": chunker_version,
        "embed_text": embed_text,
        "document_vectors": document_vectors,
        "vector_index": vector_index,
        "generation": 0,
        "vector_count": 0,
    }


#: The ``index_meta`` keys every citeline index has, and their types (checked on every read: a hand-edited or
#: damaged value is reported here in one line, not as a KeyError or ValueError deep in a search).
REQUIRED_META: dict[str, type | tuple[type, ...]] = {
    "schema_version": int,
    "model": str,
    "backend": str,
    "model_fingerprint": str,
    "dimension": int,
    "generation": int,
    "max_tokens": int,
    "overlap_tokens": int,
}
_OPTIONAL_META: dict[str, type | tuple[type, ...]] = {
    "vector_count": int,
    "model_max_tokens": int,
    "vector_index": str,
    "faiss_bytes": int,
    "works": dict,  # doc id -> work id (store/works.py)
    "works_checked": dict,  # what the last commit's work recognition did (store/works.py)
}


def read_meta(connection: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """``index_meta`` as a dict with JSON-decoded values; raises :class:`IndexCorruptError` naming a value that
    does not decode, has the wrong type, or is missing (an empty ``index_meta`` reads as ``{}``: not an index)."""
    import duckdb  # loaded already: ``connection`` is DuckDB's

    try:
        rows = connection.execute("SELECT key, value FROM index_meta").fetchall()
    except duckdb.Error as exc:
        raise IndexCorruptError(
            f"the index's {DB_FILE} is a DuckDB file but not a readable citeline index "
            f"({str(exc).splitlines()[0]}); point --index at an index directory"
        ) from exc
    meta = {}
    for key, value in rows:
        try:
            meta[key] = json.loads(value)
        except (TypeError, ValueError):
            raise _damaged_meta(f"index_meta {key!r} is not JSON ({str(value)[:40]!r})") from None
    if not meta:
        return meta
    missing = [key for key in REQUIRED_META if key not in meta]
    if missing:
        raise _damaged_meta(f"index_meta has no {', '.join(missing)}")
    for key, wanted in {**REQUIRED_META, **_OPTIONAL_META}.items():
        if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], wanted)):
            raise _damaged_meta(f"index_meta {key!r} is {meta[key]!r}")
    if meta["generation"] < 0 or meta["dimension"] < 1:
        raise _damaged_meta(f"index_meta has generation {meta['generation']} and dimension {meta['dimension']}")
    return meta


def _damaged_meta(what: str) -> IndexCorruptError:
    return IndexCorruptError(
        f"{what}: the index's {DB_FILE} is damaged; restore it from a backup, or build a new index with "
        "`citeline ingest PATH --index NEW_DIR`"
    )


def damage_reported(read: Callable[..., T], connection: duckdb.DuckDBPyConnection, *args: Any) -> T:
    """``read(connection, *args)``, with a DuckDB error (a dropped table, a column of the wrong type, a damaged
    block) raised as one :class:`IndexCorruptError` line naming the index's database."""
    import duckdb  # loaded already: ``connection`` is DuckDB's

    try:
        return read(connection, *args)
    except duckdb.Error as exc:
        if (mistake := argument_error(exc)) is not None:
            raise mistake from exc
        raise IndexCorruptError(
            f"the index's {DB_FILE} is damaged ({str(exc).splitlines()[0]}); restore it from a backup, or build "
            "a new index with `citeline ingest PATH --index NEW_DIR`"
        ) from exc


def write_meta(connection: duckdb.DuckDBPyConnection, values: dict[str, Any]) -> None:
    """Set keys of ``index_meta`` (JSON-encoded values)."""
    for key, value in values.items():
        connection.execute("DELETE FROM index_meta WHERE key = ?", [key])
        connection.execute("INSERT INTO index_meta VALUES (?, ?)", [key, json.dumps(value)])


def begin(connection: duckdb.DuckDBPyConnection) -> None:
    """Start a transaction."""
    connection.execute("BEGIN TRANSACTION")


def finish(connection: duckdb.DuckDBPyConnection, *, commit: bool) -> None:
    """Commit or roll back the open transaction."""
    connection.execute("COMMIT" if commit else "ROLLBACK")


def checkpoint(connection: duckdb.DuckDBPyConnection) -> None:
    """Write everything to the database file itself (no WAL left behind)."""
    connection.execute("CHECKPOINT")


# ---------------------------------------------------------------- writing (inside a writer's transaction)


def _insert_arrow(connection: duckdb.DuckDBPyConnection, table_name: str, rows: pa.Table) -> None:
    connection.register("_citeline_rows", rows)
    try:
        # By name: chunk rows without the optional document_vector column leave it NULL.
        connection.execute(f"INSERT INTO {table_name} BY NAME SELECT * FROM _citeline_rows")
    finally:
        connection.unregister("_citeline_rows")


def apply_changes(
    connection: duckdb.DuckDBPyConnection, remove_doc_ids: Sequence[str], documents: pa.Table, chunks: pa.Table
) -> None:
    """Remove documents (and their chunks), then insert new document and chunk rows."""
    if remove_doc_ids:
        ids = list(remove_doc_ids)
        connection.execute("DELETE FROM chunks WHERE doc_id = ANY(?)", [ids])
        connection.execute("DELETE FROM documents WHERE doc_id = ANY(?)", [ids])
    if documents.num_rows:
        _insert_arrow(connection, "documents", documents)
    if chunks.num_rows:
        _insert_arrow(connection, "chunks", chunks)


# ---------------------------------------------------------------- reading


@contextlib.contextmanager
def vector_batches(
    connection: duckdb.DuckDBPyConnection, dimension: int, batch_rows: int = 32_768
) -> Iterator[Iterator[tuple[np.ndarray, np.ndarray]]]:
    """Every chunk id and vector, ``batch_rows`` at a time, in storage order (``verify`` compares them with the
    vector index, a full build spills them to a file: memory holds one batch of ``batch_rows`` vectors rather than
    every vector twice). A context manager, like :func:`passage_batches`: the stream closes with the block."""
    with contextlib.closing(connection.sql("SELECT chunk_id, vector FROM chunks").to_arrow_reader(batch_rows)) as rows:
        yield ((batch.column(0).to_numpy().astype(np.int64), _vectors_of(batch, dimension)) for batch in rows)


def _vectors_of(batch: pa.RecordBatch, dimension: int) -> np.ndarray:
    return arrow_to_vectors(pa.chunked_array([batch.column(1)]), dimension)


def chunk_ids(connection: duckdb.DuckDBPyConnection) -> np.ndarray:
    """All chunk ids, ascending."""
    table = connection.sql("SELECT chunk_id FROM chunks ORDER BY chunk_id").to_arrow_table()
    return table.column("chunk_id").to_numpy().astype(np.int64)


def chunk_ids_of_documents(connection: duckdb.DuckDBPyConnection, doc_ids: Sequence[str]) -> np.ndarray:
    """The chunk ids (sorted int64) of these documents: what removing them removes from the derived files."""
    rows = connection.execute("SELECT chunk_id FROM chunks WHERE doc_id = ANY(?)", [list(doc_ids)]).fetchnumpy()
    return np.sort(np.asarray(rows["chunk_id"], dtype=np.int64))


#: The text BM25 indexes for each chunk (see :func:`lexical_texts`).
_LEXICAL_SQL = (
    "SELECT c.chunk_id, CASE WHEN coalesce(d.title, '') = '' OR starts_with(c.text, d.title) THEN c.text "
    "ELSE d.title || chr(10) || chr(10) || c.text END AS text FROM chunks c LEFT JOIN documents d USING (doc_id) "
)


def lexical_texts(connection: duckdb.DuckDBPyConnection, ids: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
    """All chunk ids (or those of ``ids``) and the text BM25 indexes for each, ordered by chunk id.

    That text is the chunk's own, preceded by its document's title unless the chunk already starts with it:
    a passage deep in a document is still about what its title says (on SciFact this lifts BM25's nDCG@10:
    docs/quality.md#how-the-first-settings-were-chosen)."""
    table = connection.sql(
        f"{_LEXICAL_SQL}{'' if ids is None else 'WHERE c.chunk_id = ANY(?) '}ORDER BY c.chunk_id",
        params=None if ids is None else [np.asarray(ids).tolist()],
    ).to_arrow_table()
    return table.column("chunk_id").to_numpy().astype(np.int64), table.column("text").to_pylist()


@contextlib.contextmanager
def lexical_text_batches(
    connection: duckdb.DuckDBPyConnection, batch_rows: int
) -> Iterator[Iterator[tuple[np.ndarray, list[str]]]]:
    """Every chunk id and the text BM25 indexes for it (:func:`lexical_texts`), ``batch_rows`` at a time in no
    particular order (a rebuild builds a segment of each batch and merges them: no sort of every text). A context
    manager, like :func:`passage_batches`: the stream closes with the block."""
    with contextlib.closing(connection.sql(_LEXICAL_SQL).to_arrow_reader(batch_rows)) as rows:
        yield ((batch.column(0).to_numpy().astype(np.int64), batch.column(1).to_pylist()) for batch in rows)


#: For :func:`select_documents`: a source path or folder (params: resolved, as given, resolved + "/"), doc ids.
PATH_CONDITION = "(d.path = ? OR d.path = ? OR starts_with(d.path, ?))"
IDS_CONDITION = "d.doc_id = ANY(?)"


def select_documents(connection: duckdb.DuckDBPyConnection, condition: str, params: Sequence[Any]) -> list[tuple]:
    """``(doc_id, source_root, source_file, content_hash, path, title, source_id)`` of the documents ``condition``
    (over ``documents d``: :data:`PATH_CONDITION`, :data:`IDS_CONDITION` or ``Filters.to_sql``) selects, by path."""
    sql = "SELECT d.doc_id, d.source_root, d.source_file, d.content_hash, d.path, d.title, d.source_id "
    sql += "FROM documents d WHERE "
    return connection.execute(f"{sql}{condition} ORDER BY d.path, d.doc_id", list(params)).fetchall()


def cached_vectors(
    connection: duckdb.DuckDBPyConnection, hashes: Sequence[str], dimension: int
) -> dict[str, np.ndarray]:
    """Vectors already in the index for chunk texts with these hashes (the embedding cache).

    An index holds one model, so the chunks table keyed by text hash *is* a cache keyed by
    (model fingerprint, text hash).
    """
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    table = connection.sql(
        "SELECT text_hash, any_value(vector) AS vector FROM chunks WHERE text_hash = ANY(?) GROUP BY text_hash",
        params=[wanted],
    ).to_arrow_table()
    vectors = arrow_to_vectors(table.column("vector"), dimension)
    return dict(zip(table.column("text_hash").to_pylist(), vectors, strict=True))


def stored_document_vectors(
    connection: duckdb.DuckDBPyConnection, chunk_ids: Sequence[int]
) -> dict[int, tuple[str, str, np.ndarray]]:
    """``(title, text, whole-document vector)`` of the documents whose first chunk is one of ``chunk_ids`` and
    holds a vector (an index without the column: none), so a document stored again unchanged is not embedded again."""
    if not chunk_ids or not keeps_document_vectors(connection):
        return {}
    rows = connection.execute(
        f"SELECT c.chunk_id, d.title, d.text, c.{DOCUMENT_VECTOR} FROM chunks c JOIN documents d USING (doc_id) "
        f"WHERE c.chunk_id = ANY(?) AND c.{DOCUMENT_VECTOR} IS NOT NULL",
        [list(chunk_ids)],
    ).fetchall()
    return {int(c): (title, text, np.asarray(vector, dtype=np.float32)) for c, title, text, vector in rows}


def counts(connection: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """``(documents, chunks)`` rows."""
    documents = connection.execute("SELECT count(*) FROM documents").fetchall()[0][0]
    chunks = connection.execute("SELECT count(*) FROM chunks").fetchall()[0][0]
    return int(documents), int(chunks)


def document_text(connection: duckdb.DuckDBPyConnection, doc_id: str) -> str | None:
    """The stored text of a document, or None when there is no such document."""
    row = connection.execute("SELECT text FROM documents WHERE doc_id = ?", [doc_id]).fetchone()
    return None if row is None else str(row[0])


#: A passage row's metadata: the document's, but a PDF's ``page_starts`` property (where each of its pages begins)
#: holds only the pages that begin inside the chunk, after its first character: a search names the pages of a
#: passage and of its highlights from them and the chunk's first page (``query.results.with_pages``). The whole
#: list on every row of a PDF of n pages would grow its rows by n numbers a chunk: quadratic in its length.
_PASSAGE_METADATA = """CASE WHEN d.format = 'pdf' AND json_exists(d.metadata, '$._citeline.page_starts')
    THEN json_merge_patch(d.metadata, json_object('_citeline', json_object('page_starts', to_json(list_filter(
        CAST(json_extract(d.metadata, '$._citeline.page_starts') AS BIGINT[]),
        lambda x: x > c.char_start AND x < c.char_end)))))
    ELSE d.metadata END"""

#: A passage row (``citeline.store.passages``): the chunk's columns, then its document's (the document's ``doc_id``
#: and ``run_id`` renamed); NULL document columns mark a chunk without its document row (damage ``verify`` reports).
_PASSAGES_SQL = f"""
SELECT c.chunk_id, c.doc_id, c.ordinal, c.char_start, c.char_end, c.text, c.text_hash, c.page, c.run_id,
    d.doc_id AS document_doc_id, d.source_root, d.source_id, d.source_file, d.path, d.title, d.format,
    d.content_hash, {_PASSAGE_METADATA} AS metadata, d.size_bytes, d.mtime, d.run_id AS document_run_id,
    d.ingested_at{{extra}}
FROM chunks c LEFT JOIN documents d ON d.doc_id = c.doc_id
{{where}}ORDER BY c.chunk_id
"""


@contextlib.contextmanager
def passage_batches(
    connection: duckdb.DuckDBPyConnection, ids: np.ndarray | None = None, batch_rows: int = 65_536
) -> Iterator[pa.RecordBatchReader]:
    """The passage rows of all chunks (or of ``ids``), ascending chunk id, as a stream of Arrow batches (a
    segment's rows file is written from it without holding the rows in memory).

    A context manager: the stream is closed and the id list unregistered when the block ends, however it ends. A
    generator left suspended on an error path used to unregister after its connection closed, printing "Exception
    ignored in: <generator object passage_batches...>" and "Connection already closed!" below a full disk's one-line
    error (issue 32)."""
    extra = f", c.{DOCUMENT_VECTOR}" if keeps_document_vectors(connection) else ""
    if ids is None:
        with contextlib.closing(_passage_batches(connection, "", extra, batch_rows)) as rows:
            yield rows
        return
    connection.register("_citeline_wanted", pa.table({"chunk_id": np.asarray(ids, dtype=np.int64)}))
    try:
        where = "WHERE c.chunk_id IN (SELECT chunk_id FROM _citeline_wanted) "
        with contextlib.closing(_passage_batches(connection, where, extra, batch_rows)) as rows:
            yield rows
    finally:
        connection.unregister("_citeline_wanted")


def _passage_batches(
    connection: duckdb.DuckDBPyConnection, where: str, extra: str, batch_rows: int
) -> pa.RecordBatchReader:
    return connection.sql(_PASSAGES_SQL.format(where=where, extra=extra)).to_arrow_reader(batch_rows)


def passage_table(connection: duckdb.DuckDBPyConnection) -> pa.Table:
    """Every passage row, in memory (a reader of an index written before the rows files)."""
    with passage_batches(connection) as batches:
        return batches.read_all()


# ---------------------------------------------------------------- status


@dataclass(frozen=True)
class IndexStatus:
    """What ``citeline status`` shows."""

    path: str
    documents: int
    chunks: int
    model: str
    backend: str
    model_fingerprint: str
    dimension: int
    generation: int
    max_tokens: int
    overlap_tokens: int
    last_run: ledger.RunSummary | None

    def to_dict(self) -> dict[str, Any]:
        """The status as JSON-ready data."""
        return asdict(self)


def runs(index_dir: Path, limit: int) -> list[ledger.RunSummary]:
    """The newest ``limit`` runs of the index's ledger, newest first (``Index.runs``)."""
    with connect(index_dir, read_only=True) as connection:
        return ledger.read_runs(connection, limit)


def status(index_dir: Path) -> IndexStatus:
    """Counts, model, generation and the last run of an index."""
    connection = connect(index_dir, read_only=True)
    try:
        meta = read_meta(connection)
        documents, chunks = damage_reported(counts, connection)
        runs = ledger.read_runs(connection, 1)
    finally:
        connection.close()
    return IndexStatus(
        path=str(index_dir),
        documents=documents,
        chunks=chunks,
        model=meta["model"],
        backend=meta["backend"],
        model_fingerprint=meta["model_fingerprint"],
        dimension=meta["dimension"],
        generation=meta["generation"],
        max_tokens=meta["max_tokens"],
        overlap_tokens=meta["overlap_tokens"],
        last_run=runs[0] if runs else None,
    )
