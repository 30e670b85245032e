"""A reader's consistent view of one generation: catalog rows, the vector index and the BM25 index."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from citeline import lexical_segments
from citeline.arrays import positions_of
from citeline.errors import IndexCorruptError
from citeline.store import catalog
from citeline.store.generation import bm25_path, vector_kind, vectors_path
from citeline.vectors import VectorIndex


class ReadSnapshot:
    """A reader's consistent, in-memory view of one generation: metadata rows, the vector and the BM25 index.

    Opening DuckDB costs about 12 ms and a process that keeps it open blocks writers, so a reader copies the
    rows it needs to answer queries (everything but vectors and document texts) into an in-memory DuckDB
    database, loads that generation's vector index, and lets go of the index file. Per-query SQL (filters) runs
    against the copy, under the same table names. ``is_current`` notices a commit by the database files' size and
    modification time, and the caller then loads a new snapshot.
    """

    def __init__(self, index_dir: Path):
        self.index_dir = index_dir
        self.stamp = self._stamp()
        self.connection = duckdb.connect(":memory:")
        # Everything is read while the read-only connection is open: no writer can commit (and delete the
        # artifacts of this generation) in the meantime.
        with contextlib.closing(catalog.connect(index_dir, read_only=True)) as source:
            self.meta = catalog.read_meta(source)
            self.generation = int(self.meta["generation"])
            documents, chunks = catalog.damage_reported(catalog.reader_tables, source)
            self.vectors = self._load_vectors()
            folder = bm25_path(index_dir, self.generation)
            if not folder.is_dir():
                raise IndexCorruptError(
                    f"{folder} is missing; run `citeline rebuild` to restore it from {catalog.DB_FILE}"
                )
            self.lexical = lexical_segments.load(folder, mmap=True)
            if len(self.lexical) != len(self.vectors):
                raise IndexCorruptError(
                    f"{folder} holds {len(self.lexical)} chunks, the vector index {len(self.vectors)}; run "
                    "`citeline rebuild` to restore it"
                )
        catalog.load_tables(self.connection, {"documents": documents, "chunks": chunks})
        # The Arrow tables stay too: looking a result's rows up in them takes 0.4 ms, where the same join as SQL
        # on the in-memory copy took 4 ms a query (a third of a hybrid search).
        self._documents = documents
        self._chunks = chunks

    def _load_vectors(self) -> VectorIndex:
        path = vectors_path(self.index_dir, self.generation, vector_kind(self.meta))
        if not path.exists():
            raise IndexCorruptError(
                f"{path} is missing though {catalog.DB_FILE} records generation {self.generation}; "
                "run `citeline rebuild` (or `citeline ingest` on the same paths) to restore it"
            )
        try:
            vectors = vector_kind(self.meta).load(path)
        except IndexCorruptError as exc:
            raise IndexCorruptError(f"{exc}; run `citeline rebuild` to restore it from {catalog.DB_FILE}") from exc
        if len(vectors) != self.meta.get("vector_count", len(vectors)):
            raise IndexCorruptError(
                f"{path} holds {len(vectors)} vectors, {catalog.DB_FILE} records {self.meta['vector_count']}; "
                "run `citeline rebuild` to restore it"
            )
        return vectors

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

        Ids this generation does not hold are left out, and so are chunks whose document row is missing (a damaged
        catalog: ``verify``'s ``chunks_have_documents`` reports them, and searches go on without them).
        """
        sorted_ids, order = self._chunk_order
        chunk_rows = self._chunks.take(order[positions_of(sorted_ids, chunk_ids)]).to_pylist()
        chunk_rows = [row for row in chunk_rows if row["doc_id"] in self._document_row]
        document_rows = self._documents.take([self._document_row[row["doc_id"]] for row in chunk_rows]).to_pylist()
        joined = {}
        for chunk, document in zip(chunk_rows, document_rows, strict=True):
            row = {f"document_{key}" if key in chunk else key: value for key, value in document.items()}
            row.update(chunk)
            joined[chunk["chunk_id"]] = row
        return joined

    def doc_ids(self, chunk_ids: Sequence[int]) -> list[str]:
        """The document id of each chunk id (all held by this generation), in order: cheaper than
        :meth:`passage_rows` when only the documents matter."""
        sorted_ids, order = self._chunk_order
        return [
            str(d) for d in self._chunks.column("doc_id").take(order[positions_of(sorted_ids, chunk_ids)]).to_pylist()
        ]

    def allowed_chunk_ids(self, filters: Any) -> np.ndarray | None:
        """The sorted chunk ids of this generation that ``filters`` (a ``citeline.filters.Filters``) lets through,
        or None when it restricts nothing."""
        return catalog.allowed_chunk_ids(self.connection, filters)

    def root_chunks(self, root: str) -> list[tuple[int, str]]:
        """``(chunk_id, source_id)`` of every chunk of the documents ingested from ``root``, by chunk id."""
        return catalog.root_chunks(self.connection, root)

    def _stamp(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        path = catalog.db_path(self.index_dir)
        for candidate in (path, path.with_name(catalog.DB_FILE + ".wal")):
            try:
                stat = candidate.stat()
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
