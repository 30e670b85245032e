"""Ranking and provenance: dense retrieval over FAISS, then the rows that explain each hit."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import duckdb
import faiss
import numpy as np

from citeline.errors import QueryError

#: Upper bound on k; larger requests are clamped (a result list longer than this is not a search result).
MAX_K = 10_000


@dataclass(frozen=True)
class SearchResult:
    """One passage and where it comes from: ``document_text[char_start:char_end] == text``."""

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

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return asdict(self)


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


def dense_search(index: faiss.Index, query_vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k chunks nearest the query vector, as ``(chunk_id, cosine)`` best first."""
    if index.ntotal == 0:
        return []
    k = min(k, index.ntotal)
    scores, ids = index.search(np.ascontiguousarray(query_vector.reshape(1, -1), dtype=np.float32), k)
    return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i != -1]


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
        results.append(
            SearchResult(
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
        )
    return results


def result_json(result: SearchResult) -> str:
    """One JSON object on one line (the CLI's ``--json`` format)."""
    return json.dumps(result.to_dict(), ensure_ascii=False)
