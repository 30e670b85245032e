"""Ranking stages: each fusion or re-scoring step of a ranking is a small class behind one interface, :class:`Stage`
(``rerank(query, candidates) -> candidates``, after lancedb's ``Reranker`` classes), registered by name in
:data:`STAGES` with ``@stage(name)``.

The query plan (``citeline.query.plan``) retrieves a mode's candidates (dense mode: the vector index's top chunks;
hybrid: the dense and the lexical ranking's tops, :class:`Legs`), passes them through the mode's stages in order and
keeps the k best (:func:`ranked`). Hybrid's convex fusion runs :class:`ConvexFusion`, then the feedback stage
(``citeline.query.feedback.Feedback``) and :class:`DocumentSignals`; its reciprocal rank fusion :class:`RrfFusion`;
dense mode ``citeline.query.dense_stage.DenseDocument``. A stage reads the index through :class:`Reads` only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

import numpy as np

from citeline.errors import QueryError
from citeline.query import doc_signals
from citeline.util.arrays import positions_of
from citeline.util.registry import registering

if TYPE_CHECKING:  # annotations only: a search does not import the Protocols
    from citeline.query.readers import LexicalReader, SnapshotReader
    from citeline.vectors import VectorReader

__all__ = [
    "STAGES",
    "Candidates",
    "ConvexFusion",
    "DocumentSignals",
    "Evidence",
    "Legs",
    "Reads",
    "RrfFusion",
    "Stage",
    "StageQuery",
    "document_rows",
    "run_stages",
    "stage",
]


def document_rows(snapshot: SnapshotReader) -> doc_signals.RowsOf:
    """``(doc_id, content_hash, ordinal)`` of chunk ids in ``snapshot`` (the document signals' grouping)."""

    def rows_of(ids: np.ndarray) -> list[tuple[str, str, int] | None]:
        found = snapshot.chunk_documents(ids.tolist())
        return [found.get(int(chunk_id)) for chunk_id in ids]

    return rows_of


def _unknown_documents() -> int | None:
    return None


class Reads(NamedTuple):
    """Where the stages read: the vector and BM25 indexes, and the documents' rows, counts, vectors and lengths
    (each optional: a stage that needs one it lacks leaves the candidates as they are)."""

    vectors: VectorReader
    lexical: LexicalReader
    rows_of: doc_signals.RowsOf | None = None
    #: documents the index holds (the document BM25's mean length), asked only by a stage that uses it
    corpus_documents: Callable[[], int | None] = _unknown_documents
    vectors_of: doc_signals.VectorsOf | None = None
    lengths_of: doc_signals.LengthsOf | None = None

    @classmethod
    def of(cls, snapshot: SnapshotReader) -> Reads:
        """Everything from one snapshot (``citeline.query.readers``), so the stages see one generation."""
        return cls(
            snapshot.vectors,
            snapshot.lexical,
            document_rows(snapshot),
            snapshot.document_count,
            snapshot.document_vectors,
            snapshot.chunk_lengths,
        )


class StageQuery(NamedTuple):
    """The query a stage re-ranks for: its text, the number of results asked and where to read."""

    text: str
    k: int
    reads: Reads


class Legs(NamedTuple):
    """Hybrid's two rankings, each its top ``max(k, depth)``, best first."""

    dense_ids: np.ndarray  #: the dense ranking's chunk ids (int64)
    lexical_ids: np.ndarray  #: the lexical ranking's chunk ids (int64)
    lexical_top: np.ndarray  #: their BM25 scores (float64)
    lexical_scores: Callable[[np.ndarray], np.ndarray]  #: the BM25 score of any chunk ids (``LexicalReader.ranked``)


class Evidence(NamedTuple):
    """What the convex fusion measured of its candidates, which the stages after it re-use."""

    vectors: np.ndarray  #: the candidates' stored vectors, row by row
    dense_at: np.ndarray  #: positions of the dense ranking's top ``depth`` among the candidates
    dense_top: np.ndarray  #: the cosines the dense scores are rescaled by (see ``Fusion``)
    lexical_part: np.ndarray  #: each candidate's rescaled BM25 score
    depth: int
    normalization: str


class Candidates(NamedTuple):
    """The chunks a ranking scores: their ids, their scores so far (float64, one per id) and the query vector
    (float32; the feedback stage moves it)."""

    ids: np.ndarray
    values: np.ndarray
    query_vector: np.ndarray
    legs: Legs | None = None
    evidence: Evidence | None = None


class Stage(Protocol):
    """One ranking step: the candidates re-scored (or, for a fusion, scored from the :class:`Legs`)."""

    def rerank(self, query: StageQuery, candidates: Candidates) -> Candidates:
        """The candidates with new scores (a fusion may also set their ids)."""
        ...


#: Every stage class by name (``@stage(name)``; a contract test runs each).
STAGES: dict[str, type[Stage]] = {}

T = TypeVar("T")


def stage(name: str) -> Callable[[T], T]:
    """Register a :class:`Stage` class under ``name`` (like ``@vector_index`` for vector kinds)."""
    return registering(STAGES, name)


def run_stages(stages: Sequence[Stage], query: StageQuery, candidates: Candidates, k: int) -> list[tuple[int, float]]:
    """The k best ``(chunk_id, score)`` after every stage in order, by score then chunk id."""
    if not len(candidates.ids):
        return []
    for step in stages:
        candidates = step.rerank(query, candidates)
    ids, values = candidates.ids, candidates.values
    order = np.lexsort((ids, -values))[:k]
    return [(int(ids[i]), float(values[i])) for i in order]


def scale(values: np.ndarray, reference: np.ndarray, how: str, floor: float | None) -> np.ndarray:
    """``values`` rescaled by statistics of ``reference`` (a ranking's top scores), see ``Fusion``."""
    if not len(reference):
        return np.zeros_like(values)
    if how == "zscore":
        spread = float(reference.std())
        return (values - float(reference.mean())) / spread if spread > 0 else values - float(reference.mean())
    if how != "minmax":
        raise QueryError(f"fusion normalization must be 'minmax' or 'zscore', not {how!r}")
    low = float(reference.min()) if floor is None else floor
    high = float(reference.max())
    return (values - low) / (high - low) if high > low else values - low


def lexical_values(
    ids: np.ndarray, top_ids: np.ndarray, top_scores: np.ndarray, score: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """The BM25 score of each of ``ids`` (sorted, distinct; float64): read from the lexical top (``top_ids``,
    ``top_scores``) where it holds the id, the others' from ``score`` (every lexical kind's top k scores are its
    ``scores_of``'s, bit for bit: tests/unit/test_lexical_scoring.py)."""
    values = np.zeros(len(ids), dtype=np.float64)
    known = np.zeros(len(ids), dtype=bool)
    at = np.searchsorted(ids, top_ids)  # every top id is among ids
    values[at], known[at] = top_scores, True
    rest = np.flatnonzero(~known)
    if len(rest):
        values[rest] = score(ids[rest])
    return values


def _legs(candidates: Candidates) -> Legs:
    if candidates.legs is None:
        raise QueryError("a fusion stage needs hybrid's two rankings")
    return candidates.legs


@stage("convex")
class ConvexFusion(NamedTuple):
    """``weight * d + (1 - weight) * l`` over the legs' union (``Fusion``'s ``convex`` method). Every candidate's
    cosine is computed from its exact stored vector, not taken from the dense ranking: an approximate index's
    scores are estimates, and a chunk only the lexical ranking found has no dense score at all."""

    weight: float
    depth: int
    normalization: str

    def rerank(self, query: StageQuery, candidates: Candidates) -> Candidates:
        """The candidates (the legs' union, sorted) scored by the fusion; keeps the :class:`Evidence`."""
        legs, ids = _legs(candidates), candidates.ids
        candidate_vectors = query.reads.vectors.vectors(ids)
        dense_values = (candidate_vectors @ candidates.query_vector).astype(np.float64)
        lexical = lexical_values(ids, legs.lexical_ids, legs.lexical_top, legs.lexical_scores)
        dense_at = positions_of(ids, legs.dense_ids[: self.depth])
        dense_top = dense_values[dense_at]
        lexical_part = scale(lexical, legs.lexical_top[: self.depth], self.normalization, 0.0)
        values = self.weight * scale(dense_values, dense_top, self.normalization, None)
        values += (1 - self.weight) * lexical_part
        found = Evidence(candidate_vectors, dense_at, dense_top, lexical_part, self.depth, self.normalization)
        return candidates._replace(values=values, evidence=found)


@stage("rrf")
class RrfFusion(NamedTuple):
    """Reciprocal rank fusion, ``sum 1 / (rrf_k + rank)`` over the legs (``Fusion``'s ``rrf`` method)."""

    rrf_k: float

    def rerank(self, query: StageQuery, candidates: Candidates) -> Candidates:
        """The legs' chunks scored by their ranks (a ranking that misses a chunk adds nothing)."""
        legs = _legs(candidates)
        fused: dict[int, float] = {}
        for ranking in (legs.dense_ids, legs.lexical_ids):
            for rank, chunk_id in enumerate(ranking.tolist(), 1):
                fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (self.rrf_k + rank)
        ids = np.fromiter(fused, dtype=np.int64, count=len(fused))
        values = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
        return candidates._replace(ids=ids, values=values)


@stage("documents")
class DocumentSignals(NamedTuple):
    """Document-level signals (``citeline.query.doc_signals``) added to the convex fusion's scores at their
    weights (``Fusion.documents``; see ``Fusion`` for the formula)."""

    signals: tuple[tuple[str, float], ...]

    def rerank(self, query: StageQuery, candidates: Candidates) -> Candidates:
        """The candidates with their documents' signals added (the best by the chunk scores only)."""
        reads, found = query.reads, candidates.evidence
        signals = [(name, weight) for name, weight in self.signals if weight]
        if not signals or reads.rows_of is None or found is None:
            return candidates
        ids, values = candidates.ids, candidates.values
        # Only the best candidates by the chunk scores get a signal (doc_signals.DEPTHS: the best DEPTH, or
        # all); the others keep the chunk part alone, as if their documents scored the lowest.
        order = np.lexsort((ids, -values))
        scaled_chunks = (1 - sum(weight for _, weight in signals)) * values
        corpus_documents = reads.corpus_documents()
        for reach in dict.fromkeys(doc_signals.depth_of(name) for name, _ in signals):
            group = [(n, w) for n, w in signals if doc_signals.depth_of(n) == reach]
            best = order[:reach]
            measured = doc_signals.candidate_values(
                [name for name, _ in group],
                ids[best],
                reads.rows_of,
                reads.lexical.chunk_ids,
                query.text,
                candidates.query_vector,
                reads.vectors,
                reads.lexical,
                corpus_documents,
                reads.vectors_of,
                reads.lengths_of,
            )
            for name, weight in group:
                # Each signal is put on the chunk scores' scale by quantities of the query alone (a cosine as
                # the chunks' cosines are, by the dense top `depth`; a "unit" one is already in [0, 1]), so a
                # chunk's fused score does not depend on which other candidates a filter let through.
                scaled = measured[name]
                if doc_signals.SCALES[name] == "cosine":
                    scaled = scale(scaled, found.dense_top, found.normalization, None)
                scaled_chunks[best] += weight * scaled
        return candidates._replace(values=scaled_chunks)
