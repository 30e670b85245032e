"""Ranking and provenance: dense retrieval over FAISS, then the rows that explain each hit."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import duckdb
import faiss
import numpy as np

from citeline.errors import QueryError

#: Upper bound on k; larger requests are clamped (a result list longer than this is not a search result).
MAX_K = 10_000


@dataclass(frozen=True)
class Source:
    """One place a passage occurs: ``document_text[char_start:char_end] == text`` in document ``doc_id``.

    ``shared_start:shared_end`` is the part of this source's chunk that the other sources of the result share:
    the whole chunk for near-duplicate chunks, the quoted passage when documents quote the same words.
    """

    doc_id: str
    source_path: str
    source_id: str
    title: str
    chunk_id: int
    ordinal: int
    char_start: int
    char_end: int
    text: str
    score: float
    content_hash: str
    run_id: str
    ingested_at: str
    page: int | None = None
    shared_start: int | None = None
    shared_end: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The source as JSON-ready data."""
        return asdict(self)


@dataclass(frozen=True)
class SearchResult:
    """One passage and where it comes from: ``document_text[char_start:char_end] == text``.

    ``sources`` lists every document the passage occurs in, this result's own first: one entry, or several when
    near-duplicate passages of different documents were collapsed into this result (see ``citeline.collapse``).
    """

    text: str
    score: float
    doc_id: str
    source_path: str
    source_id: str
    title: str
    ordinal: int
    char_start: int
    char_end: int
    content_hash: str
    run_id: str
    ingested_at: str
    model: str
    chunk_id: int
    page: int | None = None
    sources: tuple[Source, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return asdict(self)

    def as_source(self, *, shared_start: int | None = None, shared_end: int | None = None) -> Source:
        """This result's own passage as a :class:`Source`."""
        return Source(
            doc_id=self.doc_id,
            source_path=self.source_path,
            source_id=self.source_id,
            title=self.title,
            chunk_id=self.chunk_id,
            ordinal=self.ordinal,
            char_start=self.char_start,
            char_end=self.char_end,
            text=self.text,
            score=self.score,
            content_hash=self.content_hash,
            run_id=self.run_id,
            ingested_at=self.ingested_at,
            page=self.page,
            shared_start=self.char_start if shared_start is None else shared_start,
            shared_end=self.char_end if shared_end is None else shared_end,
        )


def validate_query(query: object, k: object) -> tuple[str, int]:
    """Check a query and k; returns the query and k clamped to :data:`MAX_K`."""
    if not isinstance(query, str):
        raise QueryError(f"query must be text, not {type(query).__name__}")
    if not query.strip():
        raise QueryError("query is empty; say what you are looking for")
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise QueryError(f"k must be a whole number, not {k!r}")
    if k <= 0:
        raise QueryError(f"k must be at least 1, got {k}")
    return query, min(int(k), MAX_K)


#: Below this fraction of the index, a filtered search scores the allowed rows with numpy instead of asking FAISS
#: to scan everything through an IDSelectorBatch. Both are exact. `python bench/filtered_search.py` on 100k x 384
#: unit vectors: the selector costs a full scan whatever the filter (9-16 ms for 100-1k allowed ids, 20 ms at 10 %,
#: 25 ms at 30 %), numpy costs in proportion to the allowed rows (0.4-1.2 ms for 100-1k, 16 ms at 10 %, 47 ms at
#: 30 %). They cross near 10 %.
NUMPY_FILTER_FRACTION = 0.1


def dense_search(
    index: faiss.Index, query_vector: np.ndarray, k: int, allowed: np.ndarray | None = None
) -> list[tuple[int, float]]:
    """The k chunks nearest the query vector, as ``(chunk_id, cosine)`` best first.

    ``allowed`` (sorted int64 chunk ids, None for all) restricts the candidates *before* ranking, so k results
    come back whenever k allowed chunks exist, however far down the unfiltered ranking they are.
    """
    if index.ntotal == 0 or (allowed is not None and len(allowed) == 0):
        return []
    query = np.ascontiguousarray(query_vector.reshape(1, -1), dtype=np.float32)
    if allowed is None:
        k = min(k, index.ntotal)
        scores, ids = index.search(query, k)
    else:
        k = min(k, len(allowed))
        storage = _flat_storage(index)
        if storage is not None and len(allowed) <= NUMPY_FILTER_FRACTION * index.ntotal:
            return _numpy_search(index, storage, query[0], k, allowed)
        selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
        params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]  # the stubs miss the kwargs
        scores, ids = index.search(query, k, params=params)
    return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i != -1]


def _flat_storage(index: Any) -> np.ndarray | None:
    """The ``(ntotal, d)`` vectors of an ID-mapped flat index as a zero-copy view (None for other index types)."""
    inner = faiss.downcast_index(index.index) if hasattr(index, "id_map") else None
    if not isinstance(inner, faiss.IndexFlat):
        return None
    return faiss.rev_swig_ptr(inner.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)


def _numpy_search(
    index: Any, storage: np.ndarray, query: np.ndarray, k: int, allowed: np.ndarray
) -> list[tuple[int, float]]:
    rows, ids = _rows_of(index, allowed)
    scores = storage[rows] @ query
    k = min(k, len(scores))
    if k == 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.lexsort((ids[top], -scores[top]))]  # best first; ties by chunk id, as FAISS orders them
    return [(int(ids[i]), float(scores[i])) for i in top]


def _rows_of(index: Any, chunk_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Storage rows of the chunk ids an ID-mapped index holds, and those ids (ids it lacks are dropped)."""
    id_map = faiss.vector_to_array(index.id_map)
    # Files written by store.publish_faiss hold ids in increasing order; sorting is only a fallback.
    order = np.arange(len(id_map)) if np.all(id_map[1:] > id_map[:-1]) else np.argsort(id_map, kind="stable")
    sorted_ids = id_map[order]
    wanted = np.asarray(chunk_ids, dtype=np.int64)
    where = np.clip(np.searchsorted(sorted_ids, wanted), 0, max(len(sorted_ids) - 1, 0))
    present = sorted_ids[where] == wanted if len(sorted_ids) else np.zeros(len(wanted), bool)
    return order[where[present]], wanted[present]


def chunk_vectors(index: Any, chunk_ids: Sequence[int]) -> np.ndarray:
    """The stored vectors of chunks, one row per id, from the (ID-mapped) FAISS index of a snapshot."""
    ids = np.asarray(chunk_ids, dtype=np.int64)
    if len(ids) == 0:
        return np.zeros((0, index.d), dtype=np.float32)
    return np.asarray(index.reconstruct_batch(ids), dtype=np.float32)


_PASSAGE_SQL = """
SELECT c.chunk_id, c.text, c.doc_id, d.path, d.source_id, d.title, c.ordinal, c.char_start, c.char_end,
       d.content_hash, c.run_id, d.ingested_at, c.page
FROM chunks c JOIN documents d USING (doc_id)
WHERE c.chunk_id = ANY(?)
"""


def fetch_passages(
    connection: duckdb.DuckDBPyConnection, hits: list[tuple[int, float]], model: str
) -> list[SearchResult]:
    """Join hits with their chunk and document rows, keeping the hits' order."""
    if not hits:
        return []
    rows = connection.execute(_PASSAGE_SQL, [[chunk_id for chunk_id, _ in hits]]).fetchall()
    by_id = {row[0]: row for row in rows}
    results = []
    for chunk_id, score in hits:
        row = by_id.get(chunk_id)
        if row is None:
            # Cannot happen within one generation; the caller checks the generation before fetching.
            continue
        (_, text, doc_id, path, source_id, title, ordinal, start, end, content_hash, run_id, at, page) = row
        result = SearchResult(
            text=text,
            score=score,
            doc_id=doc_id,
            source_path=path,
            source_id=source_id,
            title=title,
            ordinal=ordinal,
            char_start=start,
            char_end=end,
            content_hash=content_hash,
            run_id=run_id,
            ingested_at=at.isoformat(),
            model=model,
            chunk_id=chunk_id,
            page=page,
        )
        results.append(replace(result, sources=(result.as_source(),)))
    return results


def result_json(result: SearchResult) -> str:
    """One JSON object on one line (the CLI's ``--json`` format)."""
    return json.dumps(result.to_dict(), ensure_ascii=False)
