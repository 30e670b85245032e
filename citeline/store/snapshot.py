"""A reader's consistent view of one generation: catalog rows, the vector index and the BM25 index."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from citeline.errors import IndexCorruptError, IndexMismatchError
from citeline.lexical.segments import SegmentedIndex, load_folder
from citeline.store import catalog, generation, meta_cache, passages
from citeline.store.generation import bm25_path, load_vectors
from citeline.store.locks import database_lock
from citeline.store.meta_cache import Stamp, db_stamp
from citeline.vectors.segments import SegmentedVectors

__all__ = ["MetaRead", "ReadSnapshot", "Stamp", "db_stamp", "open_meta"]


@dataclass(frozen=True)
class MetaRead:
    """The meta an open read and the database files' stamp taken just before: a snapshot taken while the stamp
    still holds uses this meta instead of connecting to DuckDB again (a connect and close that a cold search
    otherwise pays: docs/performance.md#choices-measured-in-the-code)."""

    stamp: Stamp
    meta: dict[str, Any]


def open_meta(index_dir: Path) -> tuple[MetaRead, list[str], list[Path]]:
    """``generation.inspect`` (meta, cheap checks' problems, orphans), with the stamp a first snapshot checks;
    refuses an index of another schema version. The meta comes from ``meta.json`` while its stamp holds
    (``store.meta_cache``), else from the catalog."""
    cached = _cached_inspect(index_dir)
    if cached is not None:
        stamp, (meta, problems, orphans) = cached
    else:
        stamp = db_stamp(index_dir)
        meta, problems, orphans = generation.inspect(index_dir)
    if meta.get("schema_version") != catalog.SCHEMA_VERSION:
        raise IndexMismatchError(
            f"{index_dir} has schema version {meta.get('schema_version')}, this citeline reads version "
            f"{catalog.SCHEMA_VERSION}; rebuild it with `citeline ingest PATH --index NEW_DIR`"
        )
    return MetaRead(stamp, dict(meta)), problems, orphans


def _cached_inspect(index_dir: Path) -> tuple[Stamp, tuple[dict[str, Any], list[str], list[Path]]] | None:
    # generation.inspect from meta.json, under the shared database lock as inspect's connection would be: no
    # writer can commit, refresh the file or remove files in between. None: no file, or not at this stamp.
    if not (index_dir / meta_cache.CACHE_FILE).exists():
        return None
    lock = database_lock(
        index_dir, exclusive=False, deadline=time.monotonic() + 30.0, what=str(catalog.db_path(index_dir))
    )
    if lock is None:
        return None
    try:
        stamp = db_stamp(index_dir)
        meta = meta_cache.read(index_dir, stamp)
        if meta is None or "generation" not in meta:
            return None
        problems = generation.quick_check(index_dir, meta)
        return stamp, (meta, problems, generation.orphan_files(index_dir, int(meta["generation"]), meta))
    finally:
        lock.close()


class ReadSnapshot:
    """A reader's consistent view of one generation: passage rows, the vector and the BM25 index.

    Opening DuckDB takes time and a process that keeps it open blocks writers, so a reader reads the meta
    under a short read-only connection, and while it is open (no writer can commit and remove this generation's
    files meanwhile) memory-maps what the generation's files hold: the vector index, the BM25 segments and their
    passage rows (``store.passages``). Files a writer unlinks later stay readable through the maps, so the view
    stays that of one generation; nothing is copied, and opening costs the same at 1M chunks as at 10k. (An index
    written before the rows files is read into memory instead, as every reader did before.) ``is_current``
    notices a commit by the database files' size and modification time, and the caller then loads a new snapshot.
    """

    def __init__(self, index_dir: Path, opened: MetaRead | None = None):
        self.index_dir = index_dir
        if opened is not None:
            # The database lock (shared) keeps writers out while the files are mapped, as a connection would; an
            # unchanged stamp says no commit came since ``opened`` was read. (An index without passage rows files
            # reads its rows from DuckDB: it connects below.)
            lock = database_lock(
                index_dir, exclusive=False, deadline=time.monotonic() + 30.0, what=str(catalog.db_path(index_dir))
            )
            try:
                if db_stamp(index_dir) == opened.stamp and self._load(opened.meta, None):
                    self.stamp = opened.stamp
                    return
            finally:
                if lock is not None:
                    lock.close()
        self.stamp = db_stamp(index_dir)
        with contextlib.closing(catalog.connect(index_dir, read_only=True)) as source:
            self._load(catalog.read_meta(source), source)

    def _load(self, meta: dict[str, Any], source: Any) -> bool:
        """Map the generation ``meta`` names; False (nothing kept) if its passage rows need ``source`` and it is
        None."""
        self.meta = meta
        self.generation = int(meta["generation"])
        self.vectors = self._load_vectors()
        folder = bm25_path(self.index_dir, self.generation)
        if not folder.is_dir():
            raise IndexCorruptError(f"{folder} is missing; run `citeline rebuild` to restore it from {catalog.DB_FILE}")
        self.lexical = load_folder(folder, mmap=True)
        if len(self.lexical) != len(self.vectors):
            raise IndexCorruptError(
                f"{folder} holds {len(self.lexical)} chunks, the vector index {len(self.vectors)}; run "
                "`citeline rebuild` to restore it"
            )
        if isinstance(self.lexical, SegmentedIndex) and passages.present(self.index_dir, self.lexical):
            self.passages = passages.Passages.open_segments(self.index_dir, self.lexical)
        elif source is None:
            return False
        else:
            self.passages = passages.Passages.of_table(catalog.damage_reported(catalog.passage_table, source))
        return True

    @classmethod
    def current(cls, previous: ReadSnapshot | MetaRead | None, index_dir: Path) -> ReadSnapshot:
        """``previous`` while it is still the committed generation, else a new snapshot (``previous`` closed); from
        a :class:`MetaRead` (what ``Index.open`` read), a snapshot of that meta while no commit came since."""
        if isinstance(previous, MetaRead):
            return cls(index_dir, previous)
        if previous is not None and previous.is_current():
            return previous
        if previous is not None:
            previous.close()
        return cls(index_dir)

    def _load_vectors(self) -> SegmentedVectors:
        try:
            vectors = load_vectors(self.index_dir, self.meta)
        except IndexCorruptError as exc:
            raise IndexCorruptError(f"{exc}; run `citeline rebuild` to restore it from {catalog.DB_FILE}") from exc
        if len(vectors) != self.meta.get("vector_count", len(vectors)):
            raise IndexCorruptError(
                f"the vector index holds {len(vectors)} vectors, {catalog.DB_FILE} records "
                f"{self.meta['vector_count']}; run `citeline rebuild` to restore it"
            )
        return vectors

    def passage_rows(self, chunk_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The chunk row of each chunk id joined with its document's row (``document_*`` names for clashes).

        Ids this generation does not hold are left out, and so are chunks whose document row is missing (a damaged
        catalog: ``verify``'s ``chunks_have_documents`` reports them, and searches go on without them).
        """
        return self.passages.rows(chunk_ids)

    def doc_ids(self, chunk_ids: Sequence[int]) -> list[str]:
        """The document id of each chunk id (all held by this generation), in order: cheaper than
        :meth:`passage_rows` when only the documents matter."""
        found = self.passages.doc_ids(chunk_ids)
        return [found[int(chunk_id)] for chunk_id in chunk_ids]

    def chunk_documents(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
        """``(doc_id, content_hash, ordinal)`` of each chunk id held (hybrid's document signals)."""
        return self.passages.chunk_documents(chunk_ids)

    def chunk_lengths(self, chunk_ids: Sequence[int]) -> dict[int, int]:
        """Each chunk id's length in characters (``char_end - char_start``; dense mode's document centroids)."""
        return self.passages.chunk_lengths(chunk_ids)

    def document_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Whole-document vectors stored on these chunk ids (documents' first chunks; ``document_vectors``)."""
        return self.passages.document_vectors(chunk_ids)

    def document_count(self) -> int | None:
        """Documents this generation holds (the document BM25 signal's mean length)."""
        return self.passages.document_count()

    def allowed_chunk_ids(self, filters: Any) -> np.ndarray | None:
        """The sorted chunk ids of this generation that ``filters`` (a ``citeline.store.filters.Filters``) lets through,
        or None when it restricts nothing."""
        return self.passages.allowed(filters)

    def facet_counts(self, filters: Any, doc_ids: Sequence[str] | None = None) -> dict[tuple[str, str | None], int]:
        """This generation's facet counts (``Passages.facet_counts``): documents per metadata value, over the
        documents ``filters`` selects (and ``doc_ids``, when given)."""
        return self.passages.facet_counts(filters, doc_ids)

    def root_chunks(self, root: str) -> list[tuple[int, str]]:
        """``(chunk_id, source_id)`` of every chunk of the documents ingested from ``root``, by chunk id."""
        return self.passages.root_chunks(root)

    def is_current(self) -> bool:
        """False once a writer has changed the index's database files since this snapshot was taken."""
        return db_stamp(self.index_dir) == self.stamp

    def close(self) -> None:
        """Close the connection filters ran on (the maps go with the object)."""
        self.passages.close()
