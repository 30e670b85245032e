"""The query plan: validate ─► filters to allowed ids ─► rank (dense, lexical or hybrid) ─► passages ─► highlights
─► collapse, ranking deeper while collapsing leaves fewer than k results (:func:`search`).

Every ranking returns ``(chunk_id, score)`` pairs, best first, and takes ``allowed``: ``None`` for the whole index,
or a sorted int64 array of the chunk ids a search may return. Candidates are restricted *before* ranking, so k
results come back whenever k allowed chunks match. A mode's ranking is its candidates passed through its stages
(:func:`stages_for`; ``citeline.query.stages``). Everything a search reads comes from one
:class:`~citeline.query.readers.SnapshotReader`, so filters, ranking and provenance see the same generation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import MISSING, Field, asdict, dataclass, fields, replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from citeline.errors import QueryError
from citeline.query import relevance
from citeline.query.collapse import (
    DEFAULT_COLLAPSE_THRESHOLD,
    LOOKUP_MIN_SHARE,
    Lookup,
    WordCache,
    add_unranked_copies,
    collapse,
    reading_once,
    validate_threshold,
)
from citeline.query.dense_stage import (  # re-exported: callers and tests import them from here
    DENSE_DOCUMENT_DEPTH as DENSE_DOCUMENT_DEPTH,
)
from citeline.query.dense_stage import (
    DENSE_DOCUMENT_WEIGHT as DENSE_DOCUMENT_WEIGHT,
)
from citeline.query.dense_stage import DenseDocument
from citeline.query.feedback import FEEDBACK, FEEDBACK_WEIGHT, Feedback
from citeline.query.grouping import GROUP_FIRST_DEPTH, by_document, document_count, first_documents
from citeline.query.highlight import analysis_cache, highlight
from citeline.query.results import SearchResult, Source, evolve, with_pages
from citeline.query.stages import (
    Candidates,
    ConvexFusion,
    DocumentSignals,
    Legs,
    Reads,
    RrfFusion,
    Stage,
    StageQuery,
    run_stages,
)
from citeline.query.stages import document_rows as document_rows  # re-exported: tests import it from here
from citeline.query.works import (
    COPY_LOOKUP_DEPTH,
    add_published_copies,
    first_units,
    list_copies,
    merge_copies,
    named_by_listed_copies,
    unit_count,
    unit_of,
    work_map,
)
from citeline.sources.document import record_id_of
from citeline.store.access import scope_of
from citeline.store.connection import check_text
from citeline.store.filters import Filters
from citeline.store.metadata import split_metadata
from citeline.util.arrays import unique
from citeline.util.declared import option
from citeline.util.output import iso_utc

if TYPE_CHECKING:  # annotations only: a search does not import the Protocols
    from citeline.query.readers import SnapshotReader

#: Upper bound on k; larger requests are clamped (a result list longer than this is not a search result).
MAX_K = 10_000

#: The search modes, in the order the CLI lists them; hybrid is the default.
MODES = ("hybrid", "dense", "lexical")
DEFAULT_MODE = "hybrid"

EncodeQuery = Callable[[str], np.ndarray]
#: A query's vector, or a function that embeds the query when called (a hybrid search embeds it beside its lexical
#: leg: :func:`hybrid_candidates`).
QueryVector = np.ndarray | Callable[[], np.ndarray]
#: A collapsed search ranks this many times k hits at once (search's first deepening), then slices.
COLLAPSE_FIRST_DEPTH = 4


def validate_query(query: object, k: object) -> tuple[str, int]:
    """Check a query and k; returns the query and k clamped to :data:`MAX_K`."""
    if not isinstance(query, str):
        raise QueryError(f"query must be text, not {type(query).__name__}")
    if not query.strip():
        raise QueryError("query is empty; say what you are looking for")
    check_text("query", query, "; check the terminal's encoding")  # lone surrogates: an argument not UTF-8
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
    feedback_weight: float = FEEDBACK_WEIGHT

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
#: 0.5); its SciFact figures: docs/quality.md#todays-figures.
DEFAULT_FUSION = Fusion(weight=0.4, feedback=FEEDBACK)
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


#: Whether hybrid search may embed the query and run its dense ranking on a thread beside the lexical ranking
#: (FAISS, onnxruntime and numpy release the GIL), so the search waits for the longer leg, not their sum. It does
#: so from :data:`PARALLEL_HYBRID_MIN_VECTORS` vectors: at 1M chunks the overlap shortens a search, on SciFact's
#: 13k chunks the thread's hand-offs cost more than they save
#: (figures: docs/performance.md#choices-measured-in-the-code).
PARALLEL_HYBRID = True
#: Below this many vectors both legs run on the calling thread: the lexical leg, which grows slowly with the corpus,
#: is shorter than what handing the dense leg to a thread costs in GIL hand-offs. The measured break-even lies at
#: about 100k; between 100k and 1M it is not measured (figures: docs/performance.md#choices-measured-in-the-code).
PARALLEL_HYBRID_MIN_VECTORS = 100_000
_POOL: list[ThreadPoolExecutor] = []
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def _pool() -> ThreadPoolExecutor:
    if not _POOL:  # a race creates two pools at worst; one is used
        _POOL.append(ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="citeline-dense"))
    return _POOL[0]


def stages_for(mode: str, fusion: Fusion, dense_document_weight: float | None = None) -> list[Stage]:
    """The ranking stages of a mode (``citeline.query.stages``), in the order they run: hybrid's fusion (convex,
    then the feedback stage and the document signals when set; or rrf), dense mode's document stage (unless its
    weight is 0), none for lexical mode."""
    if mode == "lexical":
        return []
    if mode == "dense":
        weight = DENSE_DOCUMENT_WEIGHT if dense_document_weight is None else float(dense_document_weight)
        return [DenseDocument(weight)] if weight else []
    if fusion.method == "rrf":
        return [RrfFusion(fusion.rrf_k)]
    if fusion.method != "convex":
        raise QueryError(f"fusion method must be 'convex' or 'rrf', not {fusion.method!r}")
    stages: list[Stage] = [ConvexFusion(fusion.weight, fusion.depth, fusion.normalization)]
    if fusion.feedback:
        stages.append(Feedback(fusion.feedback, fusion.feedback_weight))
    if fusion.documents:
        stages.append(DocumentSignals(fusion.documents))
    return stages


def hybrid_candidates(
    reads: Reads, query: str, query_vector: QueryVector, depth: int, allowed: np.ndarray | None
) -> Candidates:
    """Hybrid's candidates: the union of the dense and the lexical ranking's top ``depth`` (:class:`Legs`).

    ``query_vector`` may be a function that embeds the query: with :data:`PARALLEL_HYBRID`, on an index of at least
    :data:`PARALLEL_HYBRID_MIN_VECTORS` vectors, the pool's thread then embeds it and runs the dense leg while this
    thread runs the lexical one, so a search waits for the longer of (embedding + dense leg) and the lexical leg
    rather than their sum (onnxruntime, FAISS and numpy release the GIL).
    """
    vectors, lexical = reads.vectors, reads.lexical

    def dense_leg() -> tuple[np.ndarray, list[tuple[int, float]]]:
        vector = query_vector() if callable(query_vector) else query_vector
        return vector, vectors.search(vector, depth, allowed)

    parallel = PARALLEL_HYBRID and len(vectors) >= PARALLEL_HYBRID_MIN_VECTORS
    pending = _pool().submit(dense_leg) if parallel else None
    # The lexical top `depth` and, below, the BM25 scores of the candidates it does not hold, read from the scores
    # the top was ranked from (a segmented index's ranked()): cheaper than scoring them by binary search in the
    # postings (figures: docs/performance.md#choices-measured-in-the-code).
    top_lexical, lexical_scores = lexical.ranked(query, depth, allowed)
    vector, dense = pending.result() if pending is not None else dense_leg()
    # map(itemgetter) rather than a generator: the faster of the two (docs/performance.md#choices-measured-in-the-code)
    dense_ids = np.fromiter(map(_FIRST, dense), dtype=np.int64, count=len(dense))
    lexical_ids = np.fromiter(map(_FIRST, top_lexical), dtype=np.int64, count=len(top_lexical))
    lexical_top = np.fromiter(map(_SECOND, top_lexical), dtype=np.float64, count=len(top_lexical))
    ids = unique(np.concatenate([dense_ids, lexical_ids]))
    legs = Legs(dense_ids, lexical_ids, lexical_top, lexical_scores)
    query32 = np.asarray(vector, dtype=np.float32).ravel()
    return Candidates(ids, np.zeros(len(ids)), query32, legs)


def embed_and_rank(
    snapshot: SnapshotReader,
    query: str,
    k: int,
    mode: str,
    allowed: np.ndarray | None,
    fusion: Fusion,
    encode_query: Callable[[str], np.ndarray],
    dense_document_weight: float | None = None,
) -> list[tuple[int, float]]:
    """:func:`rank_chunks` for a query text (``Index.rank``): the mode checked, ``allowed`` made sorted and unique (as
    the rankings expect), the query embedded unless the mode is lexical."""
    if allowed is not None:
        allowed = unique(np.asarray(allowed, dtype=np.int64))
    mode = validate_mode(mode)
    vector = None if mode == "lexical" else encode_query(query)
    return rank_chunks(snapshot, query, vector, k, mode, allowed, fusion, dense_document_weight)


def rank_chunks(
    snapshot: SnapshotReader,
    query: str,
    query_vector: QueryVector | None,
    k: int,
    mode: str = DEFAULT_MODE,
    allowed: np.ndarray | None = None,
    fusion: Fusion = DEFAULT_FUSION,
    dense_document_weight: float | None = None,
) -> list[tuple[int, float]]:
    """The ranking of one mode over a snapshot: ``(chunk_id, score)`` pairs, best first, without provenance.
    ``fusion``: hybrid's setting; ``dense_document_weight``: dense mode's (:class:`DenseDocument`).

    The mode's candidates (dense: the vector index's top ``max(k, DENSE_DOCUMENT_DEPTH)``; hybrid: both
    rankings' top ``max(k, fusion.depth)``) pass through the mode's stages (:func:`stages_for`); without a stage,
    the index's own top k is the ranking. ``query_vector`` may be a function that embeds the query
    (:data:`QueryVector`)."""
    if mode == "lexical":
        return snapshot.lexical.search(query, k, allowed)
    if query_vector is None:
        raise QueryError(f"{mode} search needs the query's vector")
    fusion = fusion_for(fusion, snapshot.meta)
    stages = stages_for(mode, fusion, dense_document_weight)  # hybrid always has a fusion stage
    if mode == "dense":
        vector = query_vector() if callable(query_vector) else query_vector
        if not stages:
            return snapshot.vectors.search(vector, k, allowed)
    reads = Reads.of(snapshot)
    if mode == "dense":
        hits = reads.vectors.search(vector, max(k, DENSE_DOCUMENT_DEPTH), allowed)
        ids = np.fromiter(map(_FIRST, hits), dtype=np.int64, count=len(hits))
        values = np.fromiter(map(_SECOND, hits), dtype=np.float64, count=len(hits))
        candidates = Candidates(ids, values, np.asarray(vector, dtype=np.float32).ravel())
    else:
        candidates = hybrid_candidates(reads, query, query_vector, max(k, fusion.depth), allowed)
    return run_stages(stages, StageQuery(query, k, reads), candidates, k)


def fetch_passages(snapshot: SnapshotReader, hits: list[tuple[int, float]], model: str) -> list[SearchResult]:
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
        metadata, properties = split_metadata(row["metadata"], row["format"])
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
            metadata=metadata,
            record_id=record_id_of(row["source_id"], properties),
        )
        result = with_pages(result, properties.get("page_starts"))
        results.append(evolve(result, sources=(result.as_source(),)))
    return results


def _scored(hit: SearchResult, score: float) -> SearchResult:
    """``hit`` with ``score`` (a deeper ranking may score a passage read before differently)."""
    if hit.score == score:
        return hit
    hit = evolve(hit, score=score)
    return evolve(hit, sources=(hit.as_source(),))


#: The number of passages a search returns unless told (every surface's default).
DEFAULT_K = 10
#: The filter that selects everything (a request's default; ``Filters`` is frozen, so one is shared).
NO_FILTERS = Filters()


#: The most results a request may skip (``offset``): paging deeper than this is not reading a search's answer.
MAX_OFFSET = MAX_K


def validate_offset(offset: object) -> int:
    """Check an ``offset`` (ranked results to skip: paging): a whole number from 0."""
    if isinstance(offset, bool) or not isinstance(offset, int | np.integer):
        raise QueryError(f"offset must be a whole number, not {offset!r}")
    if not 0 <= offset <= MAX_OFFSET:
        raise QueryError(f"offset must be between 0 and {MAX_OFFSET}, got {offset}")
    return int(offset)


@dataclass(frozen=True)
class SearchRequest:
    """One validated search request: what every surface (``Index.search``, the CLI's ``search``, the HTTP API and
    its page, the MCP ``search`` tool, the LangChain and LlamaIndex retrievers) builds and :func:`search` runs.

    Build one with :meth:`of` (or the constructor), which checks every part and raises
    :class:`~citeline.errors.QueryError` naming the bad one, and pass it to :meth:`citeline.Index.search`::

        from citeline import Index, SearchRequest

        request = SearchRequest.of("why did soldiers defect", 5, mode="lexical", filters={"source": "letters"})
        results = Index.open("index").search(request)

    The fields made with :func:`citeline.util.declared.option` are a caller's options: their help text, bounds,
    choices and check (``validate``) are declared here once, the request validates itself from them, and every
    surface generates its parameters from them (the CLI's flags, the HTTP API's and the page's query parameters, the
    MCP tool's arguments; a test calls every surface with every field). A new option is one field here plus the code
    that uses it (docs/architecture.md#adding-a-search-option). ``fusion`` is the library's tuning knob
    (``dataclasses.replace`` a validated request to change it).
    """

    text: str = option(MISSING, "What to look for.", form=False)  # the page's search line
    k: int = option(
        DEFAULT_K, "Number of results.", minimum=1, maximum=MAX_K, flags=("-k",), form={"label": "Results per page"}
    )
    mode: str = option(
        DEFAULT_MODE,
        "How to rank: hybrid (fuses the dense and the lexical ranking), dense (embeddings) or lexical (BM25).",
        choices=MODES,
        validate=validate_mode,
        form=False,  # the page's search line has it
    )
    filters: Filters = option(  # noqa: RUF009
        NO_FILTERS,
        "Only documents these filters select (applied before ranking).",
        validate=Filters.from_value,
        form=False,  # the filter options (FilterOptions)
    )
    collapse: bool = option(
        True,
        "Near-duplicate passages of different documents as one result listing each source.",
        validate=bool,
        form={"label": "Near-duplicates", "on": "one result, sources listed", "off": "each separately"},
    )
    #: off by default for programs (Index.search, GET /search, MCP, the retrievers: k passages, each its own unit),
    #: on where people read (the CLI, the page): docs/quickstart.md#one-result-per-document says why
    group: bool = option(
        False,
        "One result per document: its best passage, the document's other passages that answered listed under it; "
        "k counts documents [default: off for programs (the Python API, the HTTP API, MCP, the retrievers), on in "
        "the CLI and the search page].",
        people_default=True,
        validate=bool,
        flags=("--group/--flat",),
        form={"label": "Passages of one document", "on": "under its best passage", "off": "each a result"},
    )
    collapse_threshold: float = option(
        DEFAULT_COLLAPSE_THRESHOLD,
        "Cosine (above 0, at most 1) at or above which passages are near-duplicates.",
        minimum=0.0,
        maximum=1.0,
        validate=validate_threshold,
        form={"label": "Near-duplicate cosine", "step": "0.01"},
    )
    fusion: Fusion = DEFAULT_FUSION  #: hybrid's (``dataclasses.replace`` a validated request to change it)
    #: the relevance floor (``citeline.query.relevance``); None: calibrated
    min_score: float | None = option(
        None,
        "Drop passages whose relevance (0-1) is lower; 0 keeps all [default: each passage kept on its own merit "
        "against the best of the unfiltered answer; none when the query matches nothing].",
        minimum=0.0,
        maximum=1.0,
        validate=relevance.validate_min_score,
        form={"label": "Minimum relevance (0-1)", "step": "0.05", "placeholder": "calibrated"},
    )
    offset: int = option(
        0,
        "Skip this many ranked results (paging).",
        minimum=0,
        maximum=MAX_OFFSET,
        validate=validate_offset,
        form=False,  # the page's previous and next links
    )
    highlight: bool = option(
        True,
        "Mark each result's best sentences (highlights); off skips computing them.",
        validate=bool,
        form={"label": "Best sentences", "on": "marked", "off": "not marked"},
    )

    def __post_init__(self) -> None:
        text, k = validate_query(self.text, self.k)
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "k", k)
        for spec in _CHECKED:
            object.__setattr__(self, spec.name, spec.metadata["validate"](getattr(self, spec.name)))

    @classmethod
    def of(cls, query: object, k: object = DEFAULT_K, **options: Any) -> SearchRequest:
        """Validate every part of a request (``options``: its fields by name, ``filters`` a dict or
        :class:`Filters`); raises :class:`QueryError` naming the bad one, or an unknown option."""
        unknown = sorted(options.keys() - _NAMES)
        if unknown:
            raise QueryError(f"unknown search option(s): {', '.join(unknown)}; a search takes {', '.join(OPTIONS)}")
        if options.get("filters") is None:
            options.pop("filters", None)  # None: no filter
        return cls(query, k, **options)  # type: ignore[arg-type]

    def options(self) -> dict[str, Any]:
        """The request's options (every field but the text) as keyword arguments of :meth:`of`."""
        return {spec.name: getattr(self, spec.name) for spec in fields(self) if spec.name != "text"}


#: The fields a request checks with their declared ``validate`` (``text`` and ``k`` are checked together).
_CHECKED = tuple(spec for spec in fields(SearchRequest) if "validate" in spec.metadata)
_NAMES = {spec.name for spec in fields(SearchRequest)} - {"text"}
#: The options of a search (the keyword arguments of ``Index.search`` and ``SearchRequest.of``), in declared order.
OPTIONS = tuple(spec.name for spec in fields(SearchRequest) if spec.name != "text")


def request_field(name: str) -> Field[Any]:
    """The declared field ``name`` of :class:`SearchRequest` (its default, help and bounds, for a surface)."""
    return next(spec for spec in fields(SearchRequest) if spec.name == name)


class _Hits:
    """The ranking's best hits as passages, at the depth the plan asks: a deeper ranking runs only when the one
    held is full and shallower than asked, and each passage is read once (a deepening reads only the new ones)."""

    def __init__(
        self, snapshot: SnapshotReader, request: SearchRequest, vector: QueryVector | None, allowed: Any, model: str
    ):
        self.snapshot, self.request, self.vector, self.allowed, self.model = snapshot, request, vector, allowed, model
        self.ranking: tuple[int, list[tuple[int, float]]] | None = None  # the deepest ranking so far, its depth
        self.fetched: dict[int, SearchResult] = {}  # passages already read, by chunk id

    def __call__(self, depth: int) -> list[SearchResult]:
        # A collapsed search that merged hits ranks deeper (4k, then 16k, ...). An IVF search or a hybrid one (depth
        # 200 anyway) costs the same for 4k hits as for k, so the first ranking is already 4k deep and a deepening
        # only slices it (how often one ranks twice at 1M chunks: docs/performance.md#choices-measured-in-the-code).
        request, ranking = self.request, self.ranking
        if ranking is None or (len(ranking[1]) >= ranking[0] and depth > ranking[0]):
            deep = max(depth, COLLAPSE_FIRST_DEPTH * request.k) if request.collapse else depth
            found = rank_chunks(
                self.snapshot, request.text, self.vector, deep, request.mode, self.allowed, request.fusion
            )
            ranking = self.ranking = (deep, found)
        hits = ranking[1][:depth]
        fresh = [hit for hit in hits if hit[0] not in self.fetched]
        self.fetched.update((hit.chunk_id, hit) for hit in fetch_passages(self.snapshot, fresh, self.model))
        return [_scored(self.fetched[chunk_id], score) for chunk_id, score in hits if chunk_id in self.fetched]


def search(
    snapshot: SnapshotReader, request: SearchRequest, encode_query: EncodeQuery, model: str
) -> list[SearchResult]:
    """Run the whole plan for ``request`` on one snapshot (see :func:`_search`), then drop the hits below its
    relevance floor (``citeline.query.relevance``). A request's ``offset`` ranks ``k + offset`` results and skips
    the first ``offset``, so a page of results is the slice of the longer answer; ``highlight=False`` answers
    results without highlights and computes none a collapse does not need."""
    if request.offset:
        deeper = replace(request, k=min(request.k + request.offset, MAX_K), offset=0)
        return search(snapshot, deeper, encode_query, model)[request.offset :]
    vectors: dict[str, np.ndarray] = {}  # the query's vector, embedded once (a lexical search embeds nothing)

    def encode(text: str) -> np.ndarray:
        if text not in vectors:
            vectors[text] = encode_query(text)
        return vectors[text]

    # Each chunk's stored vector is read once: collapse reads the hits', the relevance floor the results' (a
    # vectors() call has a fixed cost whatever its size: docs/performance.md#choices-measured-in-the-code).
    read_vectors = reading_once(snapshot.vectors.vectors)
    top: list[int] = []  # the unfiltered ranking's first relevance.BEST_OF chunk ids (_search fills it)
    hits = _search(snapshot, request, encode, model, read_vectors, top)
    vector = vectors.get(request.text)
    best = None
    if request.min_score is None and hits:
        # Every hit is measured against the best hit of the unfiltered ranking, so a filter never changes whether a
        # hit is shown: only which hits there are.
        best = relevance.best_of(snapshot, request.text, vector, top, model, read_vectors)
    kept = relevance.apply_floor(snapshot, request.text, vector, hits, request.min_score, model, read_vectors, best)
    # The copies of one work (citeline.query.works) become one result, after the floor as grouping is.
    works = work_map(snapshot.meta) if request.collapse else {}

    def fetch(ids: Sequence[int]) -> list[SearchResult]:  # another copy's passages, highlighted, to be shown instead
        passages = fetch_passages(snapshot, [(i, 0.0) for i in ids], model)
        return highlight(passages, request.text, query_vector=vector) if request.highlight else passages

    def complete(sources: Sequence[Source]) -> list[SearchResult]:
        return fetch([source.chunk_id for source in sources])

    kept = merge_copies(kept, works, complete)
    # Grouped after the floor: a document's passages below it are not listed, and its best passage above it leads.
    if request.group:
        kept = by_document(kept, request.k, unit_of(works))
    # Only chunks the request may show: a published copy outside its filters (a token's scope among them) must never
    # be shown in place of, or listed beside, a copy inside them.
    allowed = snapshot.allowed_chunk_ids(request.filters) if works else None
    if works:

        def find(texts: Sequence[str]) -> list[list[int]]:
            return snapshot.lexical.sharing_rare_terms(
                texts, COPY_LOOKUP_DEPTH, min_share=LOOKUP_MIN_SHARE, allowed=allowed
            )

        kept = add_published_copies(kept, works, find, snapshot.doc_ids, fetch)
    kept = list_copies(kept) if request.group else kept
    if allowed is not None:  # filtered: a work's id names only the copies the answer may list
        kept = named_by_listed_copies(kept, works)
    return kept if request.highlight else [_unmarked(result) for result in kept]


def _unmarked(result: SearchResult) -> SearchResult:
    """``result`` without highlights (a request's ``highlight=False``), its grouped passages' too."""
    if not result.highlights and not result.more_passages:
        return result
    passages = tuple(evolve(passage, highlights=()) for passage in result.more_passages)
    return evolve(result, highlights=(), more_passages=passages)


def _search(
    snapshot: SnapshotReader,
    request: SearchRequest,
    encode_query: EncodeQuery,
    model: str,
    vectors: Callable[[Sequence[int]], np.ndarray],
    top: list[int],
) -> list[SearchResult]:
    """Run the whole plan for ``request`` on one snapshot (see the module docstring); ``top`` receives the chunk ids
    of the unfiltered ranking's first ``relevance.BEST_OF`` hits (the relevance rule's reference).

    Collapsed, the plan ranks k hits and deeper (four times, then again) only while collapsing leaves fewer than k
    results and more hits exist; copies of a result's quote ranked below the hits then join its sources too
    (``collapse.add_unranked_copies``). Only the k results are highlighted, as a search without collapse does (the
    highlights of other hits are computed only if a shared statement needs checking against them).
    """
    allowed = snapshot.allowed_chunk_ids(request.filters)
    # Lexical search needs no model, collapsing included: it compares stored chunk vectors, and checks shared words
    # against highlights rather than the query's vector. A hybrid ranking embeds the query beside its lexical leg
    # (hybrid_candidates); every later step reads the vector it embedded (encode_query remembers it).
    query_vector: QueryVector | None = None
    if request.mode == "hybrid":
        query_vector = lambda: encode_query(request.text)  # noqa: E731  (embedded on the pool's thread)
    elif request.mode == "dense":
        query_vector = encode_query(request.text)
    hits_at = _Hits(snapshot, request, query_vector, allowed, model)
    k = request.k
    # k counts works: the copies of one work are one result (citeline.query.works); none without collapse.
    works = work_map(snapshot.meta) if request.collapse else {}
    unit = unit_of(works)

    def enough(results: Sequence[SearchResult]) -> bool:  # k results, or k documents' (works') when grouped
        return (document_count(results, unit) if request.group else unit_count(results, works)) >= k

    def shown(results: Sequence[SearchResult]) -> list[SearchResult]:  # what the answer can show of them
        return first_documents(results, k, unit) if request.group else first_units(results, k, works)

    # Grouped, the first ranking is already GROUP_FIRST_DEPTH * k deep, so that a document's other passages are
    # listed even when its best one alone makes k documents.
    depth = GROUP_FIRST_DEPTH * k if request.group else k
    first = hits_at(depth)
    vector = query_vector() if callable(query_vector) else query_vector  # hybrid: the vector the ranking embedded
    if request.min_score is None and first and relevance.rule_for(vector, model) is not None:
        held = hits_at.ranking
        # A caller's scope (citeline.store.access) is the whole index to it: "unfiltered" is within the scope, so
        # what it cannot see never moves the floor (nor, through it, which hits it is shown).
        scope = scope_of(request.filters)
        whole = allowed is None or request.filters == scope
        if whole and held is not None and (len(held[1]) >= relevance.BEST_OF or len(held[1]) < held[0]):
            unfiltered = held[1]  # the ranking held is deep enough, or holds every chunk
        else:  # a filtered search, or one ranked shallower: the unfiltered ranking's first hits
            within = allowed if whole else snapshot.allowed_chunk_ids(scope)
            unfiltered = rank_chunks(
                snapshot, request.text, vector, relevance.BEST_OF, request.mode, within, request.fusion
            )
        top.extend(chunk_id for chunk_id, _ in unfiltered[: relevance.BEST_OF])

    def highlighted(hits: Sequence[SearchResult]) -> list[SearchResult]:
        return highlight(hits, request.text, query_vector=vector)

    if not request.collapse:
        while not enough(first) and len(first) >= depth:  # grouped: rank deeper until k documents are found
            depth *= 4
            first = hits_at(depth)
        return highlighted(shown(first)) if request.highlight else shown(first)

    encode = None if vector is None else lambda texts: np.stack([encode_query(text) for text in texts])
    # Each chunk's vector is read once (``vectors``, from search()): a deepening reads only the new hits', the lookup
    # only the copies'. A vectors() call has a fixed cost whatever its size.
    # Each chunk's words and sentences are analysed once per search too (WordCache, highlight.analysis_cache): a
    # deepening compares the first hits again, and the results are highlighted after the candidates were.
    words = WordCache()
    with analysis_cache():
        while True:
            hits = hits_at(depth)
            groups = collapse(
                hits,
                vectors([hit.chunk_id for hit in hits]),
                query_vector=vector,
                encode=encode,
                threshold=request.collapse_threshold,
                highlight=highlighted,
                words=words,
            )
            if enough(groups) or len(hits) < depth:
                break
            depth *= 4
        results = shown(groups)
        # Collapse compares highlights (shared statements), so they are computed for it; the rest only when shown.
        bare = [at for at, result in enumerate(results) if not result.highlights and request.highlight]
        for at, lit in zip(bare, highlighted([results[at] for at in bare]), strict=True):
            results[at] = lit
    if not hits:
        return results

    def find(texts: Sequence[str], n: int) -> list[list[int]]:
        return snapshot.lexical.sharing_rare_terms(texts, n, min_share=LOOKUP_MIN_SHARE, allowed=allowed)

    def passages(ids: Sequence[int]) -> list[SearchResult]:
        return fetch_passages(snapshot, [(chunk_id, 0.0) for chunk_id in ids], model)

    lookup = Lookup(find, passages, snapshot.doc_ids)
    return add_unranked_copies(results, hits, lookup, vectors, threshold=request.collapse_threshold, words=words)
