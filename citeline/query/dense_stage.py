"""Dense mode's document stage: each candidate chunk's cosine blended with the cosine of its document's
length-weighted mean chunk vector (the ``dense_length`` signal of :mod:`citeline.query.doc_signals`), and the grouping
of
chunk ids into documents that the document signals of hybrid search share (:func:`document_rows`). Split from
``citeline.query.plan``, which calls it for ``mode="dense"``.
"""

from __future__ import annotations

import numpy as np

from citeline.query import doc_signals
from citeline.store.snapshot import ReadSnapshot

#: Dense mode scores each candidate chunk ``(1 - w) * cosine + w * cosine(query, its document's centroid)``, the
#: centroid being the mean of the document's chunk vectors weighted by their lengths in characters, normalised
#: (``doc_signals`` ``dense_length``); 0 turns the stage off (the chunk's cosine alone). A short document split
#: into a lone title chunk and a body chunk is then scored nearer to how whole-document encoding scores it.
#: Chosen on SciFact train: 0.8319 -> 0.8441 nDCG@10 on torch at 0.3 (docs/quality.md#dense-modes-document-stage).
DENSE_DOCUMENT_WEIGHT = 0.3
#: The dense ranking's top chunks (at least k) the document stage re-scores: its cost grows with them and deeper
#: candidates rarely reach a top 10 (50 gave 200's top 10 for 399 of 400 claims;
#: docs/quality.md#choices-measured-in-the-code).
#: ``citeline eval`` ranks deeper than this, so its figures do not depend on it.
DENSE_DOCUMENT_DEPTH = 50


def dense_ranking(
    snapshot: ReadSnapshot,
    query_vector: np.ndarray,
    k: int,
    allowed: np.ndarray | None = None,
    weight: float | None = None,
) -> list[tuple[int, float]]:
    """Dense mode's ranking, ``(chunk_id, score)`` best first: the top ``max(k, DENSE_DOCUMENT_DEPTH)`` chunks by
    cosine, each re-scored with its document's length-weighted centroid at ``weight`` (None:
    :data:`DENSE_DOCUMENT_WEIGHT`; 0: the cosines alone).

    A chunk's score depends on the query and its document alone (the centroid is computed from the document's
    chunks, found as the hybrid document signals find them: every chunk of a document of up to
    ``doc_signals.WINDOW + 1`` chunks), never on which other chunks a filter lets through; filters are
    document-level, so a document's chunks are allowed or not together. Cosines are computed from the stored
    vectors, as hybrid's are.
    """
    weight = DENSE_DOCUMENT_WEIGHT if weight is None else float(weight)
    vectors = snapshot.vectors
    if not weight:
        return vectors.search(query_vector, k, allowed)
    hits = vectors.search(query_vector, max(k, DENSE_DOCUMENT_DEPTH), allowed)
    if not hits:
        return []
    ids = np.fromiter((chunk_id for chunk_id, _ in hits), dtype=np.int64, count=len(hits))
    query32 = np.asarray(query_vector, dtype=np.float32).ravel()
    cosines = (vectors.vectors(ids) @ query32).astype(np.float64)
    centroids = doc_signals.candidate_values(
        ["dense_length"],
        ids,
        document_rows(snapshot),
        snapshot.lexical.chunk_ids,
        "",
        query32,
        vectors,
        snapshot.lexical,
        lengths_of=snapshot.chunk_lengths,
    )["dense_length"]
    values = (1 - weight) * cosines + weight * centroids
    order = np.lexsort((ids, -values))[:k]
    return [(int(ids[i]), float(values[i])) for i in order]


def document_rows(snapshot: ReadSnapshot) -> doc_signals.RowsOf:
    """``(doc_id, content_hash, ordinal)`` of chunk ids in ``snapshot`` (the document signals' grouping)."""

    def rows_of(ids: np.ndarray) -> list[tuple[str, str, int] | None]:
        found = snapshot.chunk_documents(ids.tolist())
        return [found.get(int(chunk_id)) for chunk_id in ids]

    return rows_of
