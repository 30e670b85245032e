"""The query plan: validate ─► filters to allowed ids ─► rank (dense, lexical or hybrid) ─► passages ─► highlights
─► collapse.

Every ranking returns ``(chunk_id, score)`` pairs, best first, and takes ``allowed``: ``None`` for the whole index,
or a sorted int64 array of the chunk ids a search may return. Candidates are restricted *before* ranking, so k
results come back whenever k allowed chunks match. Everything a search reads comes from one
:class:`~citeline.store.snapshot.ReadSnapshot`, so filters, ranking and provenance see the same generation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from citeline.errors import QueryError
from citeline.lexical.analyzer import LexicalIndex
from citeline.query import doc_signals, relevance
from citeline.query import feedback as feedback_stage
from citeline.query.collapse import (
    DEFAULT_COLLAPSE_THRESHOLD,
    LOOKUP_MIN_SHARE,
    Lookup,
    collapsed_search,
    validate_threshold,
)
from citeline.query.dense_stage import (  # re-exported: callers and tests import them from here
    DENSE_DOCUMENT_DEPTH as DENSE_DOCUMENT_DEPTH,
)
from citeline.query.dense_stage import (
    DENSE_DOCUMENT_WEIGHT as DENSE_DOCUMENT_WEIGHT,
)
from citeline.query.dense_stage import dense_ranking, document_rows
from citeline.query.highlight import highlight
from citeline.query.results import SearchResult
from citeline.store import metadata as stored_metadata
from citeline.store.filters import Filters
from citeline.store.snapshot import ReadSnapshot
from citeline.util.arrays import positions_of, unique
from citeline.util.formats import iso_utc
from citeline.vectors import VectorReader

#: Upper bound on k; larger requests are clamped (a result list longer than this is not a search result).
MAX_K = 10_000

#: The search modes, in the order the CLI lists them; hybrid is the default.
MODES = ("hybrid", "dense", "lexical")
DEFAULT_MODE = "hybrid"

EncodeQuery = Callable[[str], np.ndarray]
#: A collapsed search ranks this many times k hits at once (collapsed_search's first deepening), then slices.
COLLAPSE_FIRST_DEPTH = 4


def validate_query(query: object, k: object) -> tuple[str, int]:
    """Check a query and k; returns the query and k clamped to :data:`MAX_K`."""
    if not isinstance(query, str):
        raise QueryError(f"query must be text, not {type(query).__name__}")
    if not query.strip():
        raise QueryError("query is empty; say what you are looking for")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: a command-line argument that was not valid UTF-8
        raise QueryError(f"query is not valid text (not UTF-8): {query!r}; check the terminal's encoding") from None
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise QueryError(f"k must be a whole number, not {k!r}")
    if k <= 0:
        raise QueryError(f"k must be at least 1, got {k}")
    return query, min(int(k), MAX_K)


def validate_mode(mode: object) -> str:
    """Check a search mode (``hybrid``, ``dense`` or ``lexical``)."""
    if mode not in MODES:
        raise QueryError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return str(mode)


# ---------------------------------------------------------------- hybrid fusion


@dataclass(frozen=True)
class Fusion:
    """How hybrid search merges the dense and the lexical ranking.

    ``method="convex"``: a chunk's fused score is ``weight * d + (1 - weight) * l``, where ``d`` and ``l`` are its
    cosine and its BM25 score, each rescaled by statistics of that ranking's top ``depth`` chunks for the query:
    ``normalization="minmax"`` maps the depth-th score to 0 and the best to 1 (for BM25 the floor is 0, the score
    of a chunk without any query term), ``"zscore"`` subtracts their mean and divides by their standard
    deviation. The statistics do not depend on k, so the first results are the same whatever k is asked for.
    Candidates are the union of both rankings' top ``max(k, depth)``; each gets both of its scores.

    ``documents``: document-level signals (``citeline.query.doc_signals``) and their weights: with weights summing to
    ``s``, the fused score is ``(1 - s) * (weight * d + (1 - weight) * l) + sum(w_i * doc_i)`` for the best
    candidates by the chunk part (``doc_signals.depth_of``: the best 100, or all for the ``whole`` vector; the
    others: the chunk part alone), each ``doc_i`` the candidate's document's signal on the chunk scores' scale by
    quantities of the query alone (a cosine as ``d`` is; the document BM25 over the query's idf bound), so a
    filter never changes a chunk's fused score.

    ``feedback`` (beta) and ``feedback_weight``: the feedback stage (``citeline.query.feedback``): the query vector
    moved toward the first fused document's centroid, the candidates' cosines computed again with it and fused again
    at dense weight ``feedback_weight`` (``feedback=0``: off).

    Every weight is chosen on SciFact train and kept only if it beats the train noise on both backends; the
    figures: docs/quality.md#document-level-signals and docs/quality.md#hybrids-feedback-stage.

    ``method="rrf"``: reciprocal rank fusion, ``sum 1 / (rrf_k + rank)`` over the two rankings' top
    ``max(k, depth)`` (rank from 1; a ranking that misses a candidate adds nothing).
    """

    method: str = "convex"
    weight: float = 0.5
    depth: int = 200
    normalization: str = "minmax"
    rrf_k: float = 60.0
    documents: tuple[tuple[str, float], ...] = ()
    feedback: float = 0.0
    feedback_weight: float = feedback_stage.FEEDBACK_WEIGHT

    def __post_init__(self) -> None:
        if not 0 <= self.feedback <= 10 or not 0 <= self.feedback_weight <= 1:
            raise QueryError(
                f"fusion feedback must be in [0, 10] and feedback_weight in [0, 1]; got {self.feedback}, "
                f"{self.feedback_weight}"
            )

    def describe(self) -> dict[str, Any]:
        """The setting as JSON-ready data (``citeline eval`` reports it)."""
        return {**asdict(self), "documents": dict(self.documents)}


#: The shipped hybrid setting: the chunk scores, dense weight 0.4, then the feedback stage (beta 0.25, dense weight
#: 0.5); SciFact test nDCG@10 0.7323 on torch (docs/quality.md#todays-figures).
DEFAULT_FUSION = Fusion(weight=0.4, feedback=feedback_stage.FEEDBACK)
#: The chunk scores at weight 0.5, the default before (docs/quality.md#the-chunk-fusion-shipped-first).
CHUNK_FUSION = Fusion()
#: The default plus the document BM25 (opt-in: ``Index.rank(..., fusion=DOCUMENT_BM25_FUSION)``; see :class:`Fusion`).
DOCUMENT_BM25_FUSION = Fusion(weight=0.4, documents=(("lexical", 0.3),))
#: The document BM25 plus the whole-document vector, for an index created with ``document_vectors``.
DOCUMENT_FUSION = Fusion(weight=0.4, documents=(("lexical", 0.3), ("whole", 0.1)))


def fusion_for(fusion: Fusion, meta: Mapping[str, Any]) -> Fusion:
    """The fusion a search runs: the default becomes :data:`DOCUMENT_FUSION` on an index that stores whole-document
    vectors (``document_vectors`` in its meta), so the vectors its ingest paid for are used."""
    return DOCUMENT_FUSION if fusion is DEFAULT_FUSION and meta.get("document_vectors") is True else fusion


def _scale(values: np.ndarray, reference: np.ndarray, how: str, floor: float | None) -> np.ndarray:
    """``values`` rescaled by statistics of ``reference`` (a ranking's top scores), see :class:`Fusion`."""
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


#: Whether hybrid search runs its dense ranking on a thread beside the lexical one (FAISS and numpy release the
#: GIL), so a hybrid search waits for the longer ranking, not their sum: at 1M chunks wall p50 43.3 ms on, 49.9 off
#: (docs/performance.md#choices-measured-in-the-code).
PARALLEL_HYBRID = True
_POOL: list[ThreadPoolExecutor] = []


def _pool() -> ThreadPoolExecutor:
    if not _POOL:  # a race creates two pools at worst; one is used
        _POOL.append(ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="citeline-dense"))
    return _POOL[0]


def hybrid_ranking(
    vectors: VectorReader,
    lexical: LexicalIndex,
    query: str,
    query_vector: np.ndarray,
    k: int,
    allowed: np.ndarray | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    rows_of: doc_signals.RowsOf | None = None,
    corpus_documents: int | None = None,
    vectors_of: doc_signals.VectorsOf | None = None,
    lengths_of: doc_signals.LengthsOf | None = None,
) -> list[tuple[int, float]]:
    """The k chunks ranked by the fusion of dense and lexical relevance, as ``(chunk_id, fused score)``.

    ``rows_of`` gives the candidates' documents for ``fusion.documents`` (without it they are left out);
    ``corpus_documents``: the documents the index holds (the document BM25's mean length); ``vectors_of``: where
    the documents' whole-text vectors are read (the ``whole`` signal); ``lengths_of``: the chunks' lengths (the
    ``dense_length`` signal).

    See :class:`Fusion` for the candidates and what the fused score means. Every candidate's cosine is computed
    from its exact stored vector (``vectors.vectors(ids)``), not taken from the dense ranking: an approximate
    index's scores are estimates, and a chunk only the lexical ranking found has no dense score at all.
    """
    depth = max(k, fusion.depth)
    pending = _pool().submit(vectors.search, query_vector, depth, allowed) if PARALLEL_HYBRID else None
    # The lexical top `depth` and, below, the BM25 scores of the candidates it does not hold, read from the scores
    # the top was ranked from (a segmented index's ranked(): at 1M chunks 0.6 CPU-ms a query, against 2.0 for
    # scoring them by binary search in the postings and 2.9 for scoring all ~370 candidates that way).
    top_lexical, lexical_scores = lexical.ranked(query, depth, allowed)
    dense = pending.result() if pending is not None else vectors.search(query_vector, depth, allowed)
    if fusion.method == "rrf":
        fused: dict[int, float] = {}
        for ranking in (dense, top_lexical):
            for rank, (chunk_id, _) in enumerate(ranking, 1):
                fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (fusion.rrf_k + rank)
        ids = np.fromiter(fused, dtype=np.int64, count=len(fused))
        values = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
    elif fusion.method == "convex":
        dense_ids = np.fromiter((c for c, _ in dense), dtype=np.int64, count=len(dense))
        lexical_ids = np.fromiter((c for c, _ in top_lexical), dtype=np.int64, count=len(top_lexical))
        lexical_top = np.fromiter((s for _, s in top_lexical), dtype=np.float64, count=len(top_lexical))
        ids = unique(np.concatenate([dense_ids, lexical_ids]))
        if not len(ids):
            return []
        query32 = np.asarray(query_vector, dtype=np.float32).ravel()
        candidate_vectors = vectors.vectors(ids)
        dense_values = (candidate_vectors @ query32).astype(np.float64)
        lexical_values = _lexical_values(ids, lexical_ids, lexical_top, lexical_scores)
        dense_at = positions_of(ids, dense_ids[: fusion.depth])
        dense_top = dense_values[dense_at]
        lexical_part = _scale(lexical_values, lexical_top[: fusion.depth], fusion.normalization, 0.0)
        values = fusion.weight * _scale(dense_values, dense_top, fusion.normalization, None)
        values += (1 - fusion.weight) * lexical_part
        moved = None
        if fusion.feedback and rows_of is not None:
            # The lowest id among the candidates within TIE of the best: float32 cosines differ in their last
            # bit between a plain and a sharded index (BLAS blocking), and a near-tie must not flip the document fed
            # back (ids ascend).
            first = int(ids[np.flatnonzero(values >= values.max() - feedback_stage.TIE)[0]])
            moved = feedback_stage.moved_query(
                query32, first, fusion.feedback, rows_of, lexical.chunk_ids, vectors, lengths_of
            )
        if moved is not None:  # None: no feedback, or the first chunk's row is missing (the first fusion stands)
            query32 = moved
            # Rescaled over the first dense top as before, less the chunks tied (within TIE) with its last one when it
            # is full: which of a tie across the depth-th place a search keeps is arbitrary (FAISS's heap; a sharded
            # index's merge), and tied first cosines are not tied moved ones. A shorter list holds every allowed
            # chunk, so no tie crosses its end. The top is the best candidate's (one the first list missed may lead).
            full = len(dense_top) >= fusion.depth
            above = dense_at[dense_top > dense_top.min() + feedback_stage.TIE] if full else dense_at
            dense_values = (candidate_vectors @ query32).astype(np.float64)
            dense_top = dense_values[above if len(above) else dense_at]
            if fusion.normalization == "minmax":
                dense_top = np.append(dense_top, dense_values.max())
            dense_part = _scale(dense_values, dense_top, fusion.normalization, None)
            values = fusion.feedback_weight * dense_part + (1 - fusion.feedback_weight) * lexical_part
        signals = [(name, weight) for name, weight in fusion.documents if weight] if rows_of is not None else []
        if signals and rows_of is not None:
            # Only the best candidates by the chunk scores get a signal (doc_signals.DEPTHS: the best DEPTH, or
            # all); the others keep the chunk part alone, as if their documents scored the lowest.
            order = np.lexsort((ids, -values))
            scaled_chunks = (1 - sum(weight for _, weight in signals)) * values
            for reach in dict.fromkeys(doc_signals.depth_of(name) for name, _ in signals):
                group = [(n, w) for n, w in signals if doc_signals.depth_of(n) == reach]
                best = order[:reach]
                found = doc_signals.candidate_values(
                    [name for name, _ in group],
                    ids[best],
                    rows_of,
                    lexical.chunk_ids,
                    query,
                    query32,
                    vectors,
                    lexical,
                    corpus_documents,
                    vectors_of,
                    lengths_of,
                )
                for name, weight in group:
                    # Each signal is put on the chunk scores' scale by quantities of the query alone (a cosine as
                    # the chunks' cosines are, by the dense top `depth`; a "unit" one is already in [0, 1]), so a
                    # chunk's fused score does not depend on which other candidates a filter let through.
                    scaled = found[name]
                    if doc_signals.SCALES[name] == "cosine":
                        scaled = _scale(scaled, dense_top, fusion.normalization, None)
                    scaled_chunks[best] += weight * scaled
            values = scaled_chunks
    else:
        raise QueryError(f"fusion method must be 'convex' or 'rrf', not {fusion.method!r}")
    order = np.lexsort((ids, -values))[:k]
    return [(int(ids[i]), float(values[i])) for i in order]


def _lexical_values(
    ids: np.ndarray, top_ids: np.ndarray, top_scores: np.ndarray, score: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """The BM25 score of each of ``ids`` (sorted, distinct; float64): read from the lexical top (``top_ids``,
    ``top_scores``) where it holds the id, the others' from ``score`` (every lexical kind's top k scores are its
    ``scores_of``'s, bit for bit: tests/test_lexical_query.py)."""
    values = np.zeros(len(ids), dtype=np.float64)
    known = np.zeros(len(ids), dtype=bool)
    at = np.searchsorted(ids, top_ids)  # every top id is among ids
    values[at], known[at] = top_scores, True
    rest = np.flatnonzero(~known)
    if len(rest):
        values[rest] = score(ids[rest])
    return values


def rank_query(
    snapshot: ReadSnapshot,
    query: str,
    k: int,
    mode: str,
    allowed: np.ndarray | None,
    fusion: Fusion,
    encode_query: Callable[[str], np.ndarray],
    dense_document_weight: float | None = None,
) -> list[tuple[int, float]]:
    """:func:`rank` for a query text (``Index.rank``): the mode checked, ``allowed`` made sorted and unique (as
    the rankings expect), the query embedded unless the mode is lexical."""
    if allowed is not None:
        allowed = unique(np.asarray(allowed, dtype=np.int64))
    mode = validate_mode(mode)
    vector = None if mode == "lexical" else encode_query(query)
    return rank(snapshot, query, vector, k, mode, allowed, fusion, dense_document_weight)


def rank(
    snapshot: ReadSnapshot,
    query: str,
    query_vector: np.ndarray | None,
    k: int,
    mode: str = DEFAULT_MODE,
    allowed: np.ndarray | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    dense_document_weight: float | None = None,
) -> list[tuple[int, float]]:
    """The ranking of one mode over a snapshot: ``(chunk_id, score)`` pairs, best first, without provenance.
    ``fusion``: hybrid's setting; ``dense_document_weight``: dense mode's (:func:`dense_ranking`)."""
    if mode == "lexical":
        return snapshot.lexical.search(query, k, allowed)
    if query_vector is None:
        raise QueryError(f"{mode} search needs the query's vector")
    if mode == "dense":
        return dense_ranking(snapshot, query_vector, k, allowed, dense_document_weight)
    fusion = fusion_for(fusion, getattr(snapshot, "meta", {}))
    counted = getattr(snapshot, "document_count", None) if fusion.documents else None
    return hybrid_ranking(
        snapshot.vectors,
        snapshot.lexical,
        query,
        query_vector,
        k,
        allowed,
        fusion,
        document_rows(snapshot),
        counted() if counted is not None else None,
        getattr(snapshot, "document_vectors", None),
        getattr(snapshot, "chunk_lengths", None),
    )


def fetch_passages(snapshot: ReadSnapshot, hits: list[tuple[int, float]], model: str) -> list[SearchResult]:
    """Join hits with their chunk and document rows in ``snapshot``, keeping the hits' order."""
    if not hits:
        return []
    rows = snapshot.passage_rows([chunk_id for chunk_id, _ in hits])
    results = []
    for chunk_id, score in hits:
        row = rows.get(chunk_id)
        if row is None:
            # Hits and rows come from the same snapshot, so only a chunk row without its document row (a damaged
            # catalog, which `citeline verify` reports) gets here: skip it rather than fail every search.
            continue
        result = SearchResult(
            text=row["text"],
            score=score,
            doc_id=row["doc_id"],
            source_path=row["path"],
            source_id=row["source_id"],
            title=row["title"],
            ordinal=row["ordinal"],
            char_start=row["char_start"],
            char_end=row["char_end"],
            content_hash=row["content_hash"],
            run_id=row["run_id"],
            ingested_at=str(iso_utc(row["ingested_at"])),
            model=model,
            chunk_id=chunk_id,
            page=row["page"],
            metadata=stored_metadata.split(row["metadata"], row["format"])[0],
        )
        results.append(replace(result, sources=(result.as_source(),)))
    return results


def _scored(hit: SearchResult, score: float) -> SearchResult:
    """``hit`` with ``score`` (a deeper ranking may score a passage read before differently)."""
    if hit.score == score:
        return hit
    hit = replace(hit, score=score)
    return replace(hit, sources=(hit.as_source(),))


@dataclass(frozen=True)
class Query:
    """One validated search request."""

    text: str
    k: int
    mode: str = DEFAULT_MODE
    filters: Filters = field(default_factory=Filters)
    collapse: bool = True
    collapse_threshold: float = DEFAULT_COLLAPSE_THRESHOLD
    fusion: Fusion = DEFAULT_FUSION  #: hybrid's (``dataclasses.replace`` a validated request to change it)
    min_score: float | None = None  #: the relevance floor (``citeline.query.relevance``); None: calibrated

    @classmethod
    def of(
        cls,
        query: object,
        k: object,
        *,
        mode: object = DEFAULT_MODE,
        filters: Filters | Mapping[str, Any] | None = None,
        collapse: bool = True,
        collapse_threshold: object = DEFAULT_COLLAPSE_THRESHOLD,
        min_score: object = None,
    ) -> Query:
        """Validate every part of a request; raises :class:`QueryError` naming the bad one."""
        text, k = validate_query(query, k)
        return cls(
            text,
            k,
            validate_mode(mode),
            Filters.from_value(filters),
            bool(collapse),
            validate_threshold(collapse_threshold),
            min_score=relevance.validate_min_score(min_score),
        )


def search(snapshot: ReadSnapshot, request: Query, encode_query: EncodeQuery, model: str) -> list[SearchResult]:
    """Run the whole plan for ``request`` on one snapshot (see the module docstring), then drop the hits below
    its relevance floor (``citeline.query.relevance``)."""
    vectors: dict[str, np.ndarray] = {}  # the query's vector, embedded once (a lexical search embeds nothing)

    def encode(text: str) -> np.ndarray:
        if text not in vectors:
            vectors[text] = encode_query(text)
        return vectors[text]

    hits = _search(snapshot, request, encode, model)
    return relevance.apply_floor(snapshot, request.text, vectors.get(request.text), hits, request.min_score, model)


def _search(snapshot: ReadSnapshot, request: Query, encode_query: EncodeQuery, model: str) -> list[SearchResult]:
    allowed = snapshot.allowed_chunk_ids(request.filters)
    # Lexical search needs no model, collapsing included: it compares stored chunk vectors, and checks shared words
    # against highlights rather than the query's vector.
    vector = encode_query(request.text) if request.mode != "lexical" else None

    ranking: tuple[int, list[tuple[int, float]]] | None = None  # the deepest ranking so far, and the depth asked
    fetched: dict[int, SearchResult] = {}  # passages already read, by chunk id: a deepening reads only the new ones

    def ranked(depth: int) -> list[SearchResult]:
        # A collapsed search that merged hits ranks deeper (collapsed_search: 4k, then 16k, ...); the first ranking is
        # already 4k deep, which costs an IVF or hybrid search what k does
        # (docs/performance.md#choices-measured-in-the-code).
        nonlocal ranking
        if ranking is None or (len(ranking[1]) >= ranking[0] and depth > ranking[0]):
            deep = max(depth, COLLAPSE_FIRST_DEPTH * request.k) if request.collapse else depth
            ranking = (deep, rank(snapshot, request.text, vector, deep, request.mode, allowed, request.fusion))
        hits = ranking[1][:depth]
        fetched.update(
            (hit.chunk_id, hit) for hit in fetch_passages(snapshot, [h for h in hits if h[0] not in fetched], model)
        )
        return [_scored(fetched[chunk_id], score) for chunk_id, score in hits if chunk_id in fetched]

    def highlighted(hits: Sequence[SearchResult]) -> list[SearchResult]:
        return highlight(hits, request.text, query_vector=vector)

    if not request.collapse:
        return highlighted(ranked(request.k))

    def find(texts: Sequence[str], n: int) -> list[list[int]]:
        return snapshot.lexical.sharing_rare_terms(texts, n, min_share=LOOKUP_MIN_SHARE, allowed=allowed)

    return collapsed_search(
        request.k,
        ranked,
        snapshot.vectors.vectors,
        highlight=highlighted,
        query_vector=vector,
        encode=None if vector is None else lambda texts: np.stack([encode_query(text) for text in texts]),
        threshold=request.collapse_threshold,
        lookup=Lookup(
            find, lambda ids: fetch_passages(snapshot, [(chunk_id, 0.0) for chunk_id in ids], model), snapshot.doc_ids
        ),
    )
