"""Hybrid search's feedback stage: the query vector moved toward the document the first fusion ranked best, then
the same candidates fused again (Rocchio pseudo-relevance feedback on the dense side, over the *fused* ranking).

The fused ranking's first document is right more often than either ranking's alone, and its centroid (the
length-weighted mean of its chunk vectors, the ``dense_length`` document signal's) says what the query is about
in the collection's own words. The moved query ``normalise(q + beta * centroid)`` re-scores every candidate's
cosine; BM25 is unchanged, so a document the lexical ranking found keeps its lexical evidence. No second search
runs: the candidates stay those of the first fusion, so the stage costs reading one document's chunk vectors
and lengths and a matrix-vector product over the candidates (docs/quality.md#hybrids-feedback-stage).
``citeline.query.plan.Fusion``'s ``feedback`` (beta; 0 turns the stage off) and ``feedback_weight`` (the second
fusion's dense weight) set it.

Chosen on SciFact train, kept because it gains on train on both backends; the figures and the variants that lost:
docs/quality.md#hybrids-feedback-stage.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from citeline.query import doc_signals
from citeline.query.stages import Candidates, StageQuery, scale, stage
from citeline.vectors import VectorReader

#: How far the query vector moves toward the first document's centroid (``Fusion.feedback``'s default).
FEEDBACK = 0.25
#: The second fusion's dense weight (``Fusion.feedback_weight``'s default): the moved query's cosines are better
#: evidence than the first ones, so they weigh more than the first fusion's 0.4.
FEEDBACK_WEIGHT = 0.5
#: Scores this close count as tied: fused scores for the first document, first cosines for the dense list's last
#: place. A float32 cosine's last bit (about 6e-8 near 0.5) differs between a plain and a sharded index: their
#: candidate matrices differ in shape, so BLAS blocks the product differently.
TIE = 1e-6


def moved_query(
    query_vector: np.ndarray,
    chunk_id: int,
    beta: float,
    rows_of: doc_signals.RowsOf,
    held: np.ndarray,
    vectors: VectorReader,
    lengths_of: doc_signals.LengthsOf | None = None,
) -> np.ndarray | None:
    """``normalise(query + beta * centroid)`` of the document holding ``chunk_id`` (float32, like query vectors);
    None when the chunk's row is missing (a damaged catalog: the first fusion stands). ``held``: the index's live
    chunk ids, ascending (where the document's chunks are looked for, as the document signals look for them)."""
    query = np.asarray(query_vector, dtype=np.float64).ravel()
    documents = doc_signals.Documents.of(
        np.array([chunk_id], dtype=np.int64), rows_of, held, vectors_of=None, lengths_of=lengths_of
    )
    if not documents.chunks or documents.of_candidate[0] < 0:
        return None
    moved = query + beta * doc_signals.centroids(documents, vectors)[0]
    norm = float(np.linalg.norm(moved))
    return (moved / norm).astype(np.float32) if norm > 0 else None


@stage("feedback")
class Feedback(NamedTuple):
    """The feedback stage after the convex fusion: the query moved toward the first fused document's centroid
    (``beta``), the candidates' cosines computed again with it and fused again at dense weight ``weight``."""

    beta: float
    weight: float = FEEDBACK_WEIGHT

    def rerank(self, query: StageQuery, candidates: Candidates) -> Candidates:
        """The candidates fused again with the moved query (unchanged when the first chunk's row is missing)."""
        reads, found = query.reads, candidates.evidence
        if reads.rows_of is None or found is None:
            return candidates
        ids, values = candidates.ids, candidates.values
        # The lowest id among the candidates within TIE of the best: float32 cosines differ in their last
        # bit between a plain and a sharded index (BLAS blocking), and a near-tie must not flip the document fed
        # back (ids ascend).
        first = int(ids[np.flatnonzero(values >= values.max() - TIE)[0]])
        moved = moved_query(
            candidates.query_vector, first, self.beta, reads.rows_of, reads.lexical.chunk_ids, reads.vectors,
            reads.lengths_of,
        )  # fmt: skip
        if moved is None:  # the first chunk's row is missing: the first fusion stands
            return candidates
        # Rescaled over the first dense top as before, less the chunks tied (within TIE) with its last one when it
        # is full: which of a tie across the depth-th place a search keeps is arbitrary (FAISS's heap; a sharded
        # index's merge), and tied first cosines are not tied moved ones. A shorter list holds every allowed
        # chunk, so no tie crosses its end. The top is the best candidate's (one the first list missed may lead).
        dense_at, dense_top = found.dense_at, found.dense_top
        full = len(dense_top) >= found.depth
        above = dense_at[dense_top > dense_top.min() + TIE] if full else dense_at
        dense_values = (found.vectors @ moved).astype(np.float64)
        dense_top = dense_values[above if len(above) else dense_at]
        if found.normalization == "minmax":
            dense_top = np.append(dense_top, dense_values.max())
        dense_part = scale(dense_values, dense_top, found.normalization, None)
        values = self.weight * dense_part + (1 - self.weight) * found.lexical_part
        return candidates._replace(values=values, query_vector=moved, evidence=found._replace(dense_top=dense_top))
