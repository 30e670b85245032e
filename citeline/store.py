"""The on-disk index: DuckDB as the source of truth, FAISS files as derived accelerators.

Layout of an index directory::

    meta.duckdb              index_meta, documents, chunks (text, offsets, hashes, vectors), runs
    vectors.<gen>.faiss      flat inner-product index over the chunk vectors, ids = chunk_id
    bm25.<gen>/              bm25s's files over the chunk texts, plus chunk_ids.npy (position -> chunk_id)
    write.lock               held by the one process that writes (for a whole run)
    db.lock                  shared by readers, exclusive for a writer, while each has meta.duckdb open

Commit protocol (see DESIGN.md): a writer builds the FAISS file and the BM25 folder of generation g+1 from the
rows it is about to commit, inside the same DuckDB transaction that writes those rows and sets
``generation = g+1``; both are fsynced and renamed into place before the transaction commits, and files of other
generations are removed only afterwards. A crash at any point leaves DuckDB at g or g+1 with its derived files
present; files of generations DuckDB never committed are orphans and are removed by the next writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

import duckdb
import faiss
import numpy as np
import pyarrow as pa

from citeline.errors import CitelineError, IndexCorruptError, IndexLockedError, IndexNotFoundError
from citeline.search import CHUNK_IDS_FILE, SETTINGS_FILE, LexicalIndex, bm25_settings, positions_of

SCHEMA_VERSION = 1
DB_FILE = "meta.duckdb"
LOCK_FILE = "write.lock"
DB_LOCK_FILE = "db.lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS index_meta (key VARCHAR NOT NULL, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id VARCHAR NOT NULL,
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
    chunk_id BIGINT NOT NULL,
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
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ,
    status VARCHAR NOT NULL,
    roots JSON NOT NULL,
    generation BIGINT,
    added INTEGER DEFAULT 0,
    updated INTEGER DEFAULT 0,
    unchanged INTEGER DEFAULT 0,
    removed INTEGER DEFAULT 0,
    failed INTEGER DEFAULT 0,
    chunks_embedded INTEGER DEFAULT 0,
    chunks_reused INTEGER DEFAULT 0,
    errors JSON
);
"""


def db_path(index_dir: Path) -> Path:
    """The DuckDB file of an index directory."""
    return index_dir / DB_FILE


def faiss_path(index_dir: Path, generation: int) -> Path:
    """The FAISS file of one generation."""
    return index_dir / f"vectors.{generation}.faiss"


class _LockedConnection:
    """A DuckDB connection that also holds the index's database lock (see :func:`connect`) until closed."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, lock: Any):
        self._connection = connection
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    def __enter__(self) -> _LockedConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (DuckDB checkpoints here), then release the lock."""
        try:
            self._connection.close()
        finally:
            if self._lock is not None:
                self._lock.close()  # closing the descriptor releases the flock
                self._lock = None


def _lock_database(index_dir: Path, *, exclusive: bool, deadline: float) -> Any:
    """Take the index's database lock, shared for readers and exclusive for a writer; None if it cannot exist.

    DuckDB's own file lock is an fcntl lock, which POSIX drops for the whole process as soon as *any* descriptor
    of the file is closed in that process (checked: a plain open() and close() of meta.duckdb beside a writing
    connection lets another process's reader in). The concurrency trials caught a reader reading a writer's
    half-written file that way ("Could not read enough bytes"), about once in 500 queries. An flock belongs to
    one open file description and is immune to that, so every DuckDB connection is bracketed by one. A writer
    holds it only while its connection is open (while it plans and commits), so readers wait at most for one
    commit.
    """
    path = index_dir / DB_LOCK_FILE
    handle: BinaryIO
    try:
        handle = path.open("a+b")
    except FileNotFoundError:
        return None  # no index directory yet: connect() reports that
    except PermissionError:
        try:
            handle = path.open("rb")  # a read-only index directory still takes a shared lock
        except FileNotFoundError:
            return None  # nobody can be writing to a read-only directory without the lock file
    delay = 0.002
    while True:
        try:
            fcntl.flock(handle.fileno(), (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise IndexLockedError(
                    f"{index_dir / DB_FILE} stayed locked by another process's commit; try again, or look for a "
                    "stuck citeline process"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
def bm25_path(index_dir: Path, generation: int) -> Path:
    """The BM25 folder of one generation."""
    return index_dir / f"bm25.{generation}"


def connect(index_dir: Path, *, read_only: bool, timeout: float = 30.0) -> duckdb.DuckDBPyConnection:
    """Open the index's DuckDB file, waiting while another process holds a conflicting lock.

    DuckDB lets one process write or several processes read a file; a writer holds it only while it plans and
    commits, so a reader (or writer) that finds it locked waits briefly instead of failing. Close the returned
    connection to release the lock.
    """
    path = db_path(index_dir)
    if read_only and not path.exists():
        raise IndexNotFoundError(
            f"no citeline index at {index_dir} (no {DB_FILE}); build one with "
            f"`citeline ingest PATH --index {index_dir}`"
        )
    deadline = time.monotonic() + timeout
    lock = _lock_database(index_dir, exclusive=not read_only, deadline=deadline)
    delay = 0.005
    try:
        while True:
            try:
                return _LockedConnection(duckdb.connect(str(path), read_only=read_only), lock)  # type: ignore[return-value]
            except duckdb.Error as exc:
                if "lock" not in str(exc).lower():
                    raise IndexCorruptError(
                        f"cannot open {path}: {str(exc).splitlines()[0]}; the file is damaged or not a citeline "
                        "index. Restore it from a backup, or build a new index with "
                        "`citeline ingest PATH --index NEW_DIR`"
                    ) from exc
                if time.monotonic() > deadline:
                    raise IndexLockedError(
                        f"{path} is locked by another process and stayed locked for {timeout:.0f} s: {exc}"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
    except BaseException:
        if lock is not None:
            lock.close()
        raise


def create_schema(connection: duckdb.DuckDBPyConnection, dimension: int) -> None:
    """Create the tables of a new index (idempotent)."""
    connection.execute(_SCHEMA.format(dim=int(dimension)))


def read_meta(connection: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """``index_meta`` as a dict with JSON-decoded values."""
    rows = connection.execute("SELECT key, value FROM index_meta").fetchall()
    return {key: json.loads(value) for key, value in rows}


def write_meta(connection: duckdb.DuckDBPyConnection, values: dict[str, Any]) -> None:
    """Set keys of ``index_meta`` (JSON-encoded values)."""
    for key, value in values.items():
        connection.execute("DELETE FROM index_meta WHERE key = ?", [key])
        connection.execute("INSERT INTO index_meta VALUES (?, ?)", [key, json.dumps(value)])


@contextlib.contextmanager
def writer_lock(index_dir: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold the index's single-writer lock for the duration of the block.

    ``wait=None`` waits as long as it takes; a number waits that many seconds and then raises
    :class:`IndexLockedError`. The lock is an OS file lock, so a killed writer releases it.
    """
    index_dir.mkdir(parents=True, exist_ok=True)
    handle = (index_dir / LOCK_FILE).open("a+")
    try:
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    raise IndexLockedError(
                        f"another process is writing to {index_dir}; wait for it to finish "
                        "(or pass a longer --wait)"
                    ) from None
                time.sleep(0.1)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()


def vectors_to_arrow(vectors: np.ndarray) -> pa.FixedSizeListArray:
    """A ``(n, dim)`` float32 array as an Arrow fixed-size-list column (DuckDB ``FLOAT[dim]``)."""
    dim = vectors.shape[1]
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel(), type=pa.float32())
    return pa.FixedSizeListArray.from_arrays(flat, dim)


def arrow_to_vectors(column: pa.ChunkedArray | pa.Array, dimension: int) -> np.ndarray:
    """The inverse of :func:`vectors_to_arrow`."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(array) == 0:
        return np.zeros((0, dimension), dtype=np.float32)
    values = array.flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(values.reshape(-1, dimension), dtype=np.float32)


def load_vectors(connection: duckdb.DuckDBPyConnection, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """All chunk ids and vectors, ordered by chunk id (what a FAISS file of this state holds)."""
    table = connection.sql("SELECT chunk_id, vector FROM chunks ORDER BY chunk_id").to_arrow_table()
    ids = table.column("chunk_id").to_numpy().astype(np.int64)
    return ids, arrow_to_vectors(table.column("vector"), dimension)


def build_faiss(ids: np.ndarray, vectors: np.ndarray, dimension: int) -> faiss.Index:
    """An exact inner-product index (vectors are unit length, so scores are cosines) keyed by chunk id."""
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(dimension))
    if len(ids):
        index.add_with_ids(vectors, ids)
    return index


def write_faiss(index: faiss.Index, path: Path) -> None:
    """Write a FAISS file atomically: to a temporary name, fsync, rename, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    faiss.write_index(index, str(tmp))
    with tmp.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_faiss(path: Path) -> faiss.Index:
    """Read a FAISS file written by :func:`write_faiss`."""
    return faiss.read_index(str(path))


def remove_other_generations(index_dir: Path, keep: int) -> list[Path]:
    """Delete FAISS files and BM25 folders (and temporaries) of every generation but ``keep``; returns them."""
    removed = []
    for entry in orphan_files(index_dir, keep):
        with contextlib.suppress(FileNotFoundError):
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed.append(entry)
    return removed


def load_texts(connection: duckdb.DuckDBPyConnection) -> tuple[np.ndarray, list[str]]:
    """All chunk ids and the text BM25 indexes for each, ordered by chunk id.

    That text is the chunk's own, preceded by its document's title unless the chunk already starts with it:
    a passage deep in a document is still about what its title says (on SciFact this lifts BM25's nDCG@10 by
    about 0.012; see README).
    """
    table = connection.sql(
        "SELECT c.chunk_id, CASE WHEN coalesce(d.title, '') = '' OR starts_with(c.text, d.title) THEN c.text "
        "ELSE d.title || chr(10) || chr(10) || c.text END AS text "
        "FROM chunks c LEFT JOIN documents d USING (doc_id) ORDER BY c.chunk_id"
    ).to_arrow_table()
    return table.column("chunk_id").to_numpy().astype(np.int64), table.column("text").to_pylist()


def _fsync_directory(path: Path) -> None:
    directory = os.open(path, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_bm25(lexical: LexicalIndex, path: Path) -> None:
    """Write a BM25 folder atomically: into a temporary folder, fsync every file, rename it into place.

    A folder of the same name (a rebuild of the current generation) is first moved aside and deleted after the
    rename. Readers in other processes never see the moment in between: the caller holds DuckDB's write
    connection throughout, and readers open DuckDB before they read derived files.
    """
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    lexical.save(tmp)
    for entry in tmp.iterdir():
        with entry.open("rb") as handle:
            os.fsync(handle.fileno())
    _fsync_directory(tmp)
    old = path.with_name(path.name + ".tmp-old")
    if path.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
    os.replace(tmp, path)
    _fsync_directory(path.parent)
    shutil.rmtree(old, ignore_errors=True)


def read_bm25(path: Path) -> LexicalIndex:
    """Read a BM25 folder written by :func:`write_bm25` (arrays memory-mapped)."""
    if not path.is_dir():
        raise IndexCorruptError(f"{path} is missing; run `citeline rebuild` to restore it from {DB_FILE}")
    return LexicalIndex.load(path, mmap=True)


@dataclass
class ChunkRows:
    """Chunks to insert, column by column (the shape DuckDB ingests fastest, through Arrow)."""

    chunk_id: list[int]
    doc_id: list[str]
    ordinal: list[int]
    char_start: list[int]
    char_end: list[int]
    text: list[str]
    text_hash: list[str]
    page: list[int | None]
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.chunk_id)

    @classmethod
    def empty(cls, dimension: int = 0) -> ChunkRows:
        """No rows."""
        return cls([], [], [], [], [], [], [], [], np.zeros((0, dimension), dtype=np.float32))

    @classmethod
    def concat(cls, parts: Sequence[ChunkRows], dimension: int) -> ChunkRows:
        """The rows of ``parts`` in order (vectors included)."""
        merged = cls.empty(dimension)
        for part in parts:
            for name in ("chunk_id", "doc_id", "ordinal", "char_start", "char_end", "text", "text_hash", "page"):
                getattr(merged, name).extend(getattr(part, name))
        vectors = [part.vectors for part in parts if len(part)]
        if vectors:
            merged.vectors = np.concatenate(vectors).astype(np.float32)
        return merged

    def to_arrow(self, run_id: str) -> pa.Table:
        """The rows as an Arrow table in the ``chunks`` column order."""
        return pa.table(
            {
                "chunk_id": pa.array(self.chunk_id, type=pa.int64()),
                "doc_id": pa.array(self.doc_id, type=pa.string()),
                "ordinal": pa.array(self.ordinal, type=pa.int32()),
                "char_start": pa.array(self.char_start, type=pa.int32()),
                "char_end": pa.array(self.char_end, type=pa.int32()),
                "text": pa.array(self.text, type=pa.string()),
                "text_hash": pa.array(self.text_hash, type=pa.string()),
                "page": pa.array(self.page, type=pa.int32()),
                "vector": vectors_to_arrow(self.vectors),
                "run_id": pa.array([run_id] * len(self.chunk_id), type=pa.string()),
            }
        )


def insert_arrow(connection: duckdb.DuckDBPyConnection, table_name: str, rows: pa.Table) -> None:
    """Append an Arrow table to ``table_name`` (column order must match)."""
    connection.register("_citeline_rows", rows)
    try:
        connection.execute(f"INSERT INTO {table_name} SELECT * FROM _citeline_rows")
    finally:
        connection.unregister("_citeline_rows")


def delete_documents(connection: duckdb.DuckDBPyConnection, doc_ids: Sequence[str]) -> None:
    """Remove documents and their chunks."""
    if not doc_ids:
        return
    ids = list(doc_ids)
    connection.execute("DELETE FROM chunks WHERE doc_id = ANY(?)", [ids])
    connection.execute("DELETE FROM documents WHERE doc_id = ANY(?)", [ids])


def ensure_directory(index_dir: Path) -> None:
    """Create the index directory, refusing a path that is a file."""
    if index_dir.exists() and not index_dir.is_dir():
        raise CitelineError(f"{index_dir} is a file, not an index directory; choose another --index")
    index_dir.mkdir(parents=True, exist_ok=True)


class ReadSnapshot:
    """A reader's consistent, in-memory view of one generation: metadata rows, the FAISS and the BM25 index.

    Opening DuckDB costs about 12 ms and a process that keeps it open blocks writers, so a reader copies the
    rows it needs to answer queries (everything but vectors and document texts) into an in-memory DuckDB
    database, loads that generation's FAISS file, and lets go of the index file. Per-query SQL (passage rows,
    filters) runs against the copy, under the same table names. ``is_current`` notices a commit by the
    database files' size and modification time, and the caller then loads a new snapshot.
    """

    def __init__(self, index_dir: Path):
        self.index_dir = index_dir
        self.stamp = self._stamp()
        self.connection = duckdb.connect(":memory:")
        source = connect(index_dir, read_only=True)
        try:
            # Everything is read while the read-only connection is open: no writer can commit (and delete the
            # FAISS file of this generation) in the meantime.
            self.meta = read_meta(source)
            self.generation = int(self.meta["generation"])
            documents = source.sql(
                "SELECT doc_id, source_root, source_id, source_file, path, title, format, content_hash, metadata, "
                "size_bytes, mtime, run_id, ingested_at FROM documents"
            ).to_arrow_table()
            chunks = source.sql(
                "SELECT chunk_id, doc_id, ordinal, char_start, char_end, text, text_hash, page, run_id FROM chunks"
            ).to_arrow_table()
            path = faiss_path(index_dir, self.generation)
            if not path.exists():
                raise IndexCorruptError(
                    f"{path} is missing though {DB_FILE} records generation {self.generation}; "
                    "run `citeline rebuild` (or `citeline ingest` on the same paths) to restore it"
                )
            try:
                self.faiss = read_faiss(path)
            except RuntimeError as exc:
                raise IndexCorruptError(
                    f"{path} cannot be read ({str(exc).splitlines()[0]}); run `citeline rebuild` to restore it "
                    f"from the vectors in {DB_FILE}"
                ) from exc
            if self.faiss.ntotal != self.meta.get("vector_count", self.faiss.ntotal):
                raise IndexCorruptError(
                    f"{path} holds {self.faiss.ntotal} vectors, {DB_FILE} records {self.meta['vector_count']}; "
                    "run `citeline rebuild` to restore it"
                )
            self.lexical = read_bm25(bm25_path(index_dir, self.generation))
            if len(self.lexical) != self.faiss.ntotal:
                raise IndexCorruptError(
                    f"{bm25_path(index_dir, self.generation)} holds {len(self.lexical)} chunks, "
                    f"{path.name} {self.faiss.ntotal}; run `citeline rebuild` to restore it"
                )
        finally:
            source.close()
        for name, rows in (("documents", documents), ("chunks", chunks)):
            self.connection.register(f"_{name}_rows", rows)
            self.connection.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}_rows")
            self.connection.unregister(f"_{name}_rows")
        # The Arrow tables stay too: looking a result's rows up in them takes 0.4 ms, where the same join as SQL
        # on the in-memory copy took 4 ms a query (a third of a hybrid search).
        self._documents = documents
        self._chunks = chunks

    @cached_property
    def _chunk_order(self) -> tuple[np.ndarray, np.ndarray]:
        ids = self._chunks.column("chunk_id").to_numpy()
        order = np.argsort(ids, kind="stable")
        return ids[order], order

    @cached_property
    def _document_row(self) -> dict[str, int]:
        return {doc_id: row for row, doc_id in enumerate(self._documents.column("doc_id").to_pylist())}

    def passage_rows(self, chunk_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The chunk row of each chunk id joined with its document's row (``document_*`` names for clashes).

        Ids this generation does not hold are left out.
        """
        sorted_ids, order = self._chunk_order
        chunk_rows = self._chunks.take(order[positions_of(sorted_ids, chunk_ids)]).to_pylist()
        document_rows = self._documents.take(
            [self._document_row[row["doc_id"]] for row in chunk_rows]
        ).to_pylist()
        joined = {}
        for chunk, document in zip(chunk_rows, document_rows, strict=True):
            row = {f"document_{key}" if key in chunk else key: value for key, value in document.items()}
            row.update(chunk)
            joined[chunk["chunk_id"]] = row
        return joined

    def _stamp(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for path in (db_path(self.index_dir), db_path(self.index_dir).with_name(DB_FILE + ".wal")):
            try:
                stat = path.stat()
                stamps.append((stat.st_mtime_ns, stat.st_size))
            except FileNotFoundError:
                stamps.append((0, 0))
        return tuple(stamps)

    def is_current(self) -> bool:
        """False once a writer has changed the index's database files since this snapshot was taken."""
        return self._stamp() == self.stamp

    def close(self) -> None:
        """Free the in-memory copy."""
        self.connection.close()


# ---------------------------------------------------------------- verification and repair
#
# DuckDB holds every chunk's vector and text, so a FAISS file or BM25 folder that is missing, truncated or stale
# can always be rebuilt from it without re-embedding. index_meta records the size and SHA-256 of the current
# generation's FAISS file and the SHA-256 of its BM25 folder at commit; opening an index compares the FAISS
# size (cheap, and it pins the vector count, since a flat index's file size is a function of it) and, for files
# small enough to hash quickly, the checksums.

#: Files of generations (FAISS files, BM25 folders) and their temporaries, as the commit protocol names them.
_GENERATION_FILE = re.compile(r"^(vectors|bm25)\.(\d+)(\.faiss)?(\.tmp.*)?$")
#: Index.open hashes FAISS files up to this size; larger ones get the size check only (verify() hashes all).
QUICK_CHECKSUM_BYTES = 64 * 1024 * 1024


def file_checksum(path: Path) -> str:
    """SHA-256 of a file, hex encoded, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def publish_faiss(
    index_dir: Path, generation: int, ids: np.ndarray, vectors: np.ndarray, dimension: int
) -> dict[str, Any]:
    """Build and atomically write a generation's FAISS file; returns the ``index_meta`` entries that describe it.

    The caller writes those entries in the transaction that publishes the generation, so the size and checksum
    recorded in DuckDB are always those of the file DuckDB points at.
    """
    path = faiss_path(index_dir, generation)
    write_faiss(build_faiss(ids, vectors, dimension), path)
    return {"vector_count": len(ids), "faiss_bytes": path.stat().st_size, "faiss_sha256": file_checksum(path)}


def folder_checksum(path: Path) -> str:
    """SHA-256 over the names and SHA-256s of a folder's files, in name order."""
    digest = hashlib.sha256()
    for entry in sorted(path.iterdir()):
        digest.update(f"{entry.name}\0{file_checksum(entry)}\n".encode())
    return digest.hexdigest()


def _folder_bytes(path: Path) -> int:
    return sum(entry.stat().st_size for entry in path.iterdir())


def publish_bm25(index_dir: Path, generation: int, ids: np.ndarray, texts: Sequence[str]) -> dict[str, Any]:
    """Build and atomically write a generation's BM25 folder; returns the ``index_meta`` entries describing it."""
    path = bm25_path(index_dir, generation)
    write_bm25(LexicalIndex.build(ids, texts), path)
    return {"bm25_sha256": folder_checksum(path)}


def publish_generation(
    index_dir: Path, generation: int, connection: duckdb.DuckDBPyConnection, dimension: int
) -> dict[str, Any]:
    """Write every derived file of ``generation`` from the chunks ``connection`` sees (its transaction's view).

    Returns the ``index_meta`` entries to write in the transaction that publishes the generation.
    """
    ids, vectors = load_vectors(connection, dimension)
    meta = publish_faiss(index_dir, generation, ids, vectors, dimension)
    del vectors
    text_ids, texts = load_texts(connection)
    meta.update(publish_bm25(index_dir, generation, text_ids, texts))
    return meta


def bm25_problems(index_dir: Path, meta: dict[str, Any], *, full: bool) -> list[str]:
    """Problems with the current generation's BM25 folder: missing, other settings, other checksum.

    ``full`` hashes the folder whatever its size; otherwise only folders up to :data:`QUICK_CHECKSUM_BYTES`.
    """
    path = bm25_path(index_dir, int(meta.get("generation", 0)))
    if not (path / CHUNK_IDS_FILE).is_file() or not (path / SETTINGS_FILE).is_file():
        return [f"{path.name}/ is missing"]
    try:
        settings = json.loads((path / SETTINGS_FILE).read_text())
    except ValueError:
        return [f"{path.name}/{SETTINGS_FILE} cannot be read"]
    wanted = bm25_settings()
    if {key: settings.get(key) for key in wanted} != wanted:
        return [f"{path.name}/ was built with other BM25 settings than this citeline's"]
    hash_it = "bm25_sha256" in meta and (full or _folder_bytes(path) <= QUICK_CHECKSUM_BYTES)
    if hash_it and folder_checksum(path) != meta["bm25_sha256"]:
        return [f"{path.name}/ does not match the checksum recorded in {DB_FILE}"]
    return []


def orphan_files(index_dir: Path, generation: int) -> list[Path]:
    """Files of generations other than ``generation`` (and temporaries): leftovers of runs that died.

    Only meaningful while holding the writer lock or a DuckDB connection: a live writer's next-generation file
    looks the same as an orphan.
    """
    found = []
    for entry in sorted(index_dir.iterdir()):
        match = _GENERATION_FILE.match(entry.name)
        if match and (int(match.group(2)) != generation or match.group(4)):
            found.append(entry)
    return found


def quick_check(index_dir: Path, meta: dict[str, Any]) -> list[str]:
    """Problems with the current generation's derived files that cheap checks find (empty list: none found).

    Checks that the FAISS file exists, has the size recorded at commit and, if small, the recorded checksum,
    and that the BM25 folder exists, was built with this citeline's settings and, if small, matches its
    checksum. Call it with a DuckDB connection open, so that no writer can publish a new generation in between.
    """
    return _faiss_quick_problems(index_dir, meta) + bm25_problems(index_dir, meta, full=False)


def _faiss_quick_problems(index_dir: Path, meta: dict[str, Any]) -> list[str]:
    path = faiss_path(index_dir, int(meta.get("generation", 0)))
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return [f"{path.name} is missing"]
    if "faiss_bytes" in meta and size != meta["faiss_bytes"]:
        return [f"{path.name} is {size:,} bytes, but {DB_FILE} recorded {meta['faiss_bytes']:,}"]
    if "faiss_sha256" in meta and size <= QUICK_CHECKSUM_BYTES and file_checksum(path) != meta["faiss_sha256"]:
        return [f"{path.name} does not match the checksum recorded in {DB_FILE}"]
    return []


@dataclass
class VerifyReport:
    """What :func:`verify` found. ``ok`` is false when DuckDB and a derived file (FAISS, BM25) disagree."""

    path: str
    generation: int
    chunks: int  #: chunk rows in DuckDB
    vector_count: int  #: vectors index_meta says the FAISS file holds
    faiss_file: str
    faiss_present: bool
    faiss_ntotal: int | None
    ids_equal: bool
    vectors_equal: bool
    checksum_ok: bool | None  #: None when the index predates recorded checksums
    dangling_chunks: int  #: chunk rows whose document row is missing
    bm25_dir: str
    bm25_present: bool
    bm25_ids_equal: bool  #: the BM25 folder indexes exactly DuckDB's chunk ids
    orphans: list[str]
    problems: list[str]

    @property
    def ok(self) -> bool:
        """True when the index is consistent (orphan files are leftovers, not inconsistencies)."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {**asdict(self), "ok": self.ok}


def verify(index_dir: Path) -> VerifyReport:
    """Compare the current generation's FAISS file and BM25 folder with DuckDB: presence, checksums, ids,
    vectors, counts, BM25 settings.

    Everything is read under one read-only connection, so a writer cannot publish a generation midway.
    """
    connection = connect(index_dir, read_only=True)
    try:
        meta = read_meta(connection)
        generation, dimension = int(meta["generation"]), int(meta["dimension"])
        ids, vectors = load_vectors(connection, dimension)
        dangling = connection.execute(
            "SELECT count(*) FROM chunks WHERE doc_id NOT IN (SELECT doc_id FROM documents)"
        ).fetchall()[0][0]
        path = faiss_path(index_dir, generation)
        orphans = [entry.name for entry in orphan_files(index_dir, generation)]
        problems: list[str] = []
        present, ntotal, ids_equal, vectors_equal, checksum_ok = path.exists(), None, False, False, None
        if present:
            if "faiss_sha256" in meta:
                checksum_ok = file_checksum(path) == meta["faiss_sha256"]
                if not checksum_ok:
                    problems.append(f"{path.name} does not match the checksum recorded in {DB_FILE}")
            try:
                faiss_index: Any = read_faiss(path)
            except RuntimeError as exc:
                problems.append(f"{path.name} cannot be read: {str(exc).splitlines()[0]}")
            else:
                ntotal = int(faiss_index.ntotal)
                faiss_ids = faiss.vector_to_array(faiss_index.id_map).astype(np.int64)
                ids_equal = faiss_index.d == dimension and np.array_equal(np.sort(faiss_ids), ids)
                if ids_equal and ntotal:
                    order = np.argsort(faiss_ids)
                    stored = faiss.downcast_index(faiss_index.index).reconstruct_n(0, ntotal)[order]
                    vectors_equal = bool(np.allclose(stored, vectors, atol=1e-6))
                else:
                    vectors_equal = ids_equal
                if not ids_equal:
                    problems.append(f"{path.name} holds other chunk ids than {DB_FILE} ({ntotal} vs {len(ids)})")
                elif not vectors_equal:
                    problems.append(f"{path.name} holds other vectors than {DB_FILE}")
        else:
            problems.append(f"{path.name} is missing though {DB_FILE} records generation {generation}")
        bm25_dir = bm25_path(index_dir, generation)
        bm25_issues = bm25_problems(index_dir, meta, full=True)
        bm25_present = not bm25_issues or "is missing" not in bm25_issues[0]
        bm25_ids_equal = False
        if bm25_present:
            try:
                bm25_ids_equal = np.array_equal(read_bm25(bm25_dir).chunk_ids, ids)
            except IndexCorruptError as exc:
                bm25_issues.append(str(exc).split("; run")[0])
            else:
                if not bm25_ids_equal:
                    bm25_issues.append(f"{bm25_dir.name}/ indexes other chunk ids than {DB_FILE}")
        problems.extend(bm25_issues)
        if int(meta.get("vector_count", len(ids))) != len(ids):
            problems.append(f"index_meta says {meta['vector_count']} vectors, {DB_FILE} holds {len(ids)} chunks")
        if dangling:
            problems.append(f"{dangling} chunk rows belong to no document")
    finally:
        connection.close()
    return VerifyReport(
        path=str(index_dir),
        generation=generation,
        chunks=len(ids),
        vector_count=int(meta.get("vector_count", -1)),
        faiss_file=path.name,
        faiss_present=present,
        faiss_ntotal=ntotal,
        ids_equal=ids_equal,
        vectors_equal=vectors_equal,
        checksum_ok=checksum_ok,
        dangling_chunks=int(dangling),
        bm25_dir=bm25_dir.name,
        bm25_present=bm25_present,
        bm25_ids_equal=bm25_ids_equal,
        orphans=orphans,
        problems=problems,
    )


def rebuild_derived(index_dir: Path) -> int:
    """Rewrite the current generation's FAISS file and BM25 folder from DuckDB (vectors and texts; no
    re-embedding).

    The caller holds :func:`writer_lock`. Both are replaced atomically and their new sizes and checksums are
    recorded in the same transaction; files of other generations are removed afterwards. Returns the generation.
    """
    connection = connect(index_dir, read_only=False)
    try:
        connection.execute("BEGIN TRANSACTION")
        try:
            meta = read_meta(connection)
            generation, dimension = int(meta["generation"]), int(meta["dimension"])
            write_meta(connection, publish_generation(index_dir, generation, connection, dimension))
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        remove_other_generations(index_dir, generation)
    finally:
        connection.close()
    return generation
