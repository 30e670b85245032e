"""Dense mode's document stage (:class:`DenseDocument`, a ``citeline.query.stages`` stage): each candidate chunk's
cosine blended with the cosine of its document's length-weighted mean chunk vector (the ``dense_length`` signal of
:mod:`citeline.query.doc_signals`). The query plan runs it for ``mode="dense"``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from citeline.query import doc_signals
from citeline.query.stages import Candidates, StageQuery, stage

#: Dense mode scores each candidate chunk ``(1 - w) * cosine + w * cosine(query, its document's centroid)``, the
#: centroid being the mean of the document's chunk vectors weighted by their lengths in characters, normalised
#: (``doc_signals`` ``dense_length``); 0 turns the stage off (the chunk's cosine alone). A short document split
#: into a lone title chunk and a body chunk is then scored nearer to how whole-document encoding scores it.
#: Chosen on SciFact train, where 0.3 scored best (docs/quality.md#dense-modes-document-stage).
DENSE_DOCUMENT_WEIGHT = 0.3
#: The dense ranking's top chunks (at least k) the document stage re-scores: its cost grows with them and deeper
#: candidates rarely reach a top 10 (how rarely: docs/quality.md#choices-measured-in-the-code).
#: ``citeline eval`` ranks deeper than this, so its figures do not depend on it.
DENSE_DOCUMENT_DEPTH = 50


@stage("dense_document")
class DenseDocument(NamedTuple):
    """Dense mode's document stage: each candidate's cosine blended with its document's length-weighted centroid's
    at ``weight`` (:data:`DENSE_DOCUMENT_WEIGHT`), ``(1 - weight) * cosine + weight * cosine(query, centroid)``.

    A chunk's score depends on the query and its document alone (the centroid is computed from the document's
    chunks, found as the hybrid document signals find them: every chunk of a document of up to
    ``doc_signals.WINDOW + 1`` chunks), never on which other chunks a filter lets through; filters are
    document-level, so a document's chunks are allowed or not together. Cosines are computed from the stored
    vectors, as hybrid's are.
    """

    weight: float = DENSE_DOCUMENT_WEIGHT

    def rerank(self, query: StageQuery, candidates: Candidates) -> Candidates:
        """The candidates (the dense ranking's top ``max(k, DENSE_DOCUMENT_DEPTH)``) re-scored."""
        reads, ids, query32 = query.reads, candidates.ids, candidates.query_vector
        if reads.rows_of is None:
            return candidates
        cosines = (reads.vectors.vectors(ids) @ query32).astype(np.float64)
        centroids = doc_signals.candidate_values(
            ["dense_length"],
            ids,
            reads.rows_of,
            reads.lexical.chunk_ids,
            "",
            query32,
            reads.vectors,
            reads.lexical,
            lengths_of=reads.lengths_of,
        )["dense_length"]
        return candidates._replace(values=(1 - self.weight) * cosines + self.weight * centroids)
