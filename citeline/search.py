"""Ranking and provenance: dense retrieval over FAISS, lexical retrieval over BM25, their fusion, and the rows
that explain each hit.

Every ranking function returns ``(chunk_id, score)`` pairs, best first, and takes ``allowed``: ``None`` for the
whole index, or a sorted int64 array of the chunk ids a search may return. Candidates are restricted *before*
ranking, so k results come back whenever k allowed chunks match.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np

from citeline.errors import IndexCorruptError, QueryError
from citeline.highlight import Highlight

if TYPE_CHECKING:
    import bm25s

    from citeline.store import ReadSnapshot

#: Upper bound on k; larger requests are clamped (a result list longer than this is not a search result).
MAX_K = 10_000

#: The search modes, in the order the CLI lists them; hybrid is the default.
MODES = ("hybrid", "dense", "lexical")
DEFAULT_MODE = "hybrid"


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
    #: the sentence(s) of ``text`` that best answer the query, in document offsets (see ``citeline.highlight``)
    highlights: tuple[Highlight, ...] = field(default=())

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


def validate_mode(mode: object) -> str:
    """Check a search mode (``hybrid``, ``dense`` or ``lexical``)."""
    if mode not in MODES:
        raise QueryError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return str(mode)


#: Below this many vectors a query is scanned on one thread: splitting a single query's scan of a small flat
#: index over OpenMP threads costs more than it saves (24 ms instead of 0.7 ms for 13k vectors on 2 busy cores).
SINGLE_THREAD_MAX_VECTORS = 200_000


@contextlib.contextmanager
def _faiss_threads(index: faiss.Index) -> Iterator[None]:
    if index.ntotal > SINGLE_THREAD_MAX_VECTORS:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


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
        with _faiss_threads(index):
            scores, ids = index.search(query, k)
    else:
        k = min(k, len(allowed))
        storage = _flat_storage(index)
        if storage is not None and len(allowed) <= NUMPY_FILTER_FRACTION * index.ntotal:
            return _numpy_search(index, storage, query[0], k, allowed)
        # The selector must outlive the search: SearchParameters holds only a raw pointer to it.
        selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
        params = faiss.SearchParameters()
        params.sel = selector
        with _faiss_threads(index):
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


def positions_of(sorted_ids: np.ndarray, wanted: Sequence[int] | np.ndarray) -> np.ndarray:
    """Positions in ``sorted_ids`` (ascending) of the values of ``wanted`` present there, in ``wanted``'s order."""
    values = np.asarray(wanted, dtype=np.int64)
    where = np.searchsorted(sorted_ids, values)
    inside = where < len(sorted_ids)
    where, values = where[inside], values[inside]
    return where[sorted_ids[where] == values]


def _rows_of(index: Any, chunk_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Storage rows of the chunk ids an ID-mapped index holds, and those ids (ids it lacks are dropped)."""
    id_map = faiss.vector_to_array(index.id_map)
    # Files written by store.publish_faiss hold ids in increasing order; sorting is only a fallback.
    order = np.arange(len(id_map)) if np.all(id_map[1:] > id_map[:-1]) else np.argsort(id_map, kind="stable")
    sorted_ids = id_map[order]
    found = positions_of(sorted_ids, chunk_ids)
    return order[found], sorted_ids[found]


def chunk_vectors(index: Any, chunk_ids: Sequence[int]) -> np.ndarray:
    """The stored vectors of chunks, one row per id, from the (ID-mapped) FAISS index of a snapshot."""
    ids = np.asarray(chunk_ids, dtype=np.int64)
    if len(ids) == 0:
        return np.zeros((0, index.d), dtype=np.float32)
    return np.asarray(index.reconstruct_batch(ids), dtype=np.float32)


# ---------------------------------------------------------------- lexical retrieval (BM25)
#
# Documents and queries go through the same analyzer: bm25s's tokenizer (lower case, words of two or more
# characters), its English stopword list, and the Snowball English stemmer (PyStemmer). The scoring variant
# and its parameters were chosen on the tuning half of SciFact's test queries (see README, "Retrieval quality").

#: BM25 scoring variant and parameters (bm25s names).
BM25_METHOD = "lucene"
BM25_K1 = 1.2
BM25_B = 0.5
STEMMER_LANGUAGE = "english"
STOPWORDS = "en"
#: File next to bm25s's own files mapping each BM25 document position to its chunk id.
CHUNK_IDS_FILE = "chunk_ids.npy"
#: File recording the analyzer and scoring settings the files were built with.
SETTINGS_FILE = "citeline.json"


def bm25_settings() -> dict[str, Any]:
    """The analyzer and scoring settings a BM25 folder built now would have (recorded with it)."""
    return {
        "method": BM25_METHOD,
        "k1": BM25_K1,
        "b": BM25_B,
        "stemmer": STEMMER_LANGUAGE,
        "stopwords": STOPWORDS,
        "text": "title + chunk",  # see store.load_texts
    }


_local = threading.local()


def _bm25s() -> Any:
    """bm25s, imported without numba.

    bm25s imports numba at import time whenever it is installed (ranx, a dev dependency, brings it), for a
    backend citeline does not use: it scores with bm25s's numpy backend. That import costs about 0.25 s of a
    cold ``citeline search``, so it is kept out; numba itself stays importable for anything else.
    """
    if "bm25s" in sys.modules:
        return sys.modules["bm25s"]
    blocked = "numba" not in sys.modules
    if blocked:
        sys.modules["numba"] = None  # type: ignore[assignment]  # makes `import numba` fail fast
    try:
        import bm25s
    finally:
        if blocked:
            del sys.modules["numba"]
    return bm25s


def _stemmer() -> Any:
    # A PyStemmer object is not safe to share between threads (it caches results), so each thread has its own.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = _local.stemmer = Stemmer.Stemmer(STEMMER_LANGUAGE)
    return stemmer


def analyze(texts: Sequence[str]) -> list[list[str]]:
    """Terms of each text as BM25 sees them: lower-cased words, English stopwords removed, stemmed."""
    bm25s = _bm25s()

    tokens: list[list[str]] = bm25s.tokenize(
        list(texts), stopwords=STOPWORDS, stemmer=_stemmer(), return_ids=False, show_progress=False
    )
    return tokens


@dataclass
class LexicalIndex:
    """A bm25s index over chunk texts, and the chunk id of each of its document positions (ascending)."""

    retriever: bm25s.BM25 | None  #: None for an index without chunks (bm25s cannot index nothing)
    chunk_ids: np.ndarray

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @classmethod
    def build(
        cls, chunk_ids: np.ndarray, texts: Sequence[str], *, method: str = BM25_METHOD, k1: float = BM25_K1,
        b: float = BM25_B,
    ) -> LexicalIndex:
        """Index ``texts``; ``chunk_ids`` (same order, ascending) names them. Other scoring settings than the
        defaults are for tuning: an index's folder built with them is rebuilt when the index is opened."""
        bm25s = _bm25s()

        ids = np.ascontiguousarray(chunk_ids, dtype=np.int64)
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} chunk ids for {len(texts)} texts")
        if not len(ids):
            return cls(None, ids)
        retriever = bm25s.BM25(method=method, k1=k1, b=b)
        retriever.index(analyze(texts), show_progress=False)
        return cls(retriever, ids)

    def save(self, directory: Path) -> None:
        """Write bm25s's own files (numpy arrays and JSON, no pickles) plus the chunk ids and settings."""
        directory.mkdir(parents=True, exist_ok=True)
        if self.retriever is not None:
            self.retriever.save(str(directory), show_progress=False)
        np.save(directory / CHUNK_IDS_FILE, self.chunk_ids, allow_pickle=False)
        settings = bm25_settings()
        if self.retriever is not None:
            settings.update(method=self.retriever.method, k1=self.retriever.k1, b=self.retriever.b)
        (directory / SETTINGS_FILE).write_text(json.dumps({**settings, "chunks": len(self.chunk_ids)}))

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = False) -> LexicalIndex:
        """Read a folder written by :meth:`save`; raises :class:`IndexCorruptError` if it is unreadable."""
        bm25s = _bm25s()

        try:
            chunk_ids = np.load(directory / CHUNK_IDS_FILE, allow_pickle=False)
            settings = json.loads((directory / SETTINGS_FILE).read_text())
            retriever = None
            if len(chunk_ids):
                retriever = bm25s.BM25.load(str(directory), mmap=mmap, allow_pickle=False)
        except (OSError, ValueError, KeyError) as exc:
            raise IndexCorruptError(f"{directory} cannot be read ({exc}); run `citeline rebuild`") from exc
        if settings.get("chunks") != len(chunk_ids) or (
            retriever is not None and retriever.scores["num_docs"] != len(chunk_ids)
        ):
            raise IndexCorruptError(f"{directory} is inconsistent (chunk count); run `citeline rebuild`")
        return cls(retriever, chunk_ids.astype(np.int64, copy=False))

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every chunk (position order) for ``query``; zeros where no query term occurs."""
        if self.retriever is None:
            return np.zeros(0, dtype=np.float32)
        term_ids = self.retriever.get_tokens_ids(analyze([query])[0])
        if not term_ids:
            return np.zeros(len(self.chunk_ids), dtype=np.float32)
        scores: np.ndarray = self.retriever.get_scores_from_ids(term_ids)
        return scores


def _top(scores: np.ndarray, positions: np.ndarray | None, k: int) -> np.ndarray:
    """Positions of the k highest scores (among ``positions`` if given), best first, ties by position."""
    candidates = np.arange(len(scores)) if positions is None else positions
    values = scores[candidates]
    if k < len(candidates):
        keep = np.argpartition(-values, k - 1)[:k]
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))
    return candidates[order]


def lexical_search(
    index: LexicalIndex, query: str, k: int, allowed: np.ndarray | None = None
) -> list[tuple[int, float]]:
    """The k chunks with the highest BM25 score for ``query``, as ``(chunk_id, score)`` best first.

    Only chunks sharing at least one term with the query are returned (a BM25 score of 0 is no match). With
    ``allowed``, only those chunks are scored for the ranking, so the k best allowed matches come back.
    """
    scores = index.scores(query)
    positions = None if allowed is None else positions_of(index.chunk_ids, allowed)
    top = _top(scores, positions, k)
    return [(int(index.chunk_ids[p]), float(scores[p])) for p in top if scores[p] > 0]


# ---------------------------------------------------------------- hybrid fusion


@dataclass(frozen=True)
class Fusion:
    """How hybrid search merges the dense and the lexical ranking (defaults: the tuned settings, see README).

    ``method="convex"``: a chunk's fused score is ``weight * d + (1 - weight) * l``, where ``d`` and ``l`` are its
    cosine and its BM25 score, each rescaled by statistics of that ranking's top ``depth`` chunks for the query:
    ``normalization="minmax"`` maps the depth-th score to 0 and the best to 1 (for BM25 the floor is 0, the score
    of a chunk without any query term), ``"zscore"`` subtracts their mean and divides by their standard
    deviation. The statistics do not depend on k, so the first results are the same whatever k is asked for.
    Candidates are the union of both rankings' top ``max(k, depth)``; each gets both of its scores.

    ``method="rrf"``: reciprocal rank fusion, ``sum 1 / (rrf_k + rank)`` over the two rankings' top
    ``max(k, depth)`` (rank from 1; a ranking that misses a candidate adds nothing).
    """

    method: str = "convex"
    weight: float = 0.5
    depth: int = 200
    normalization: str = "minmax"
    rrf_k: float = 60.0


DEFAULT_FUSION = Fusion()


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


def hybrid_search(
    faiss_index: faiss.Index,
    lexical: LexicalIndex,
    query: str,
    query_vector: np.ndarray,
    k: int,
    allowed: np.ndarray | None = None,
    fusion: Fusion = DEFAULT_FUSION,
) -> list[tuple[int, float]]:
    """The k chunks ranked by the fusion of dense and lexical relevance, as ``(chunk_id, fused score)``.

    See :class:`Fusion` for the candidates and what the fused score means.
    """
    depth = max(k, fusion.depth)
    dense = dense_search(faiss_index, query_vector, depth, allowed)
    lexical_scores = lexical.scores(query)
    positions = None if allowed is None else positions_of(lexical.chunk_ids, allowed)
    top_positions = [p for p in _top(lexical_scores, positions, depth) if lexical_scores[p] > 0]
    top_lexical = [(int(lexical.chunk_ids[p]), float(lexical_scores[p])) for p in top_positions]
    if fusion.method == "rrf":
        fused: dict[int, float] = {}
        for ranking in (dense, top_lexical):
            for rank, (chunk_id, _) in enumerate(ranking, 1):
                fused[chunk_id] = fused.get(chunk_id, 0.0) + 1.0 / (fusion.rrf_k + rank)
        ids = np.fromiter(fused, dtype=np.int64, count=len(fused))
        values = np.fromiter(fused.values(), dtype=np.float64, count=len(fused))
    elif fusion.method == "convex":
        ids = np.unique(np.array([c for c, _ in dense] + [c for c, _ in top_lexical], dtype=np.int64))
        if not len(ids):
            return []
        # Both scores for every candidate: a chunk only one ranking found still has a score in the other.
        cosine = dict(dense)
        missing = np.array([c for c in ids if c not in cosine], dtype=np.int64)
        if len(missing):
            cosine.update(dense_search(faiss_index, query_vector, len(missing), missing))
        dense_values = np.array([cosine[c] for c in ids], dtype=np.float64)
        lexical_values = lexical_scores[positions_of(lexical.chunk_ids, ids)].astype(np.float64)
        dense_top = np.array([score for _, score in dense[: fusion.depth]], dtype=np.float64)
        lexical_top = np.array([score for _, score in top_lexical[: fusion.depth]], dtype=np.float64)
        values = fusion.weight * _scale(dense_values, dense_top, fusion.normalization, None) + (
            1 - fusion.weight
        ) * _scale(lexical_values, lexical_top, fusion.normalization, 0.0)
    else:
        raise QueryError(f"fusion method must be 'convex' or 'rrf', not {fusion.method!r}")
    order = np.lexsort((ids, -values))[:k]
    return [(int(ids[i]), float(values[i])) for i in order]


def fetch_passages(snapshot: ReadSnapshot, hits: list[tuple[int, float]], model: str) -> list[SearchResult]:
    """Join hits with their chunk and document rows in ``snapshot``, keeping the hits' order."""
    if not hits:
        return []
    rows = snapshot.passage_rows([chunk_id for chunk_id, _ in hits])
    results = []
    for chunk_id, score in hits:
        row = rows.get(chunk_id)
        if row is None:
            # Cannot happen within one generation: hits and rows come from the same snapshot.
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
            ingested_at=row["ingested_at"].isoformat(),
            model=model,
            chunk_id=chunk_id,
            page=row["page"],
        )
        results.append(replace(result, sources=(result.as_source(),)))
    return results


def result_json(result: SearchResult) -> str:
    """One JSON object on one line (the CLI's ``--json`` format)."""
    return json.dumps(result.to_dict(), ensure_ascii=False)
