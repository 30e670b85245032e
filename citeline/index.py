"""``Index``: the one front class. It holds an index directory's settings and its model, and delegates: writing
to :mod:`citeline.ingest.pipeline`, the directory to :mod:`citeline.store`, reading to :mod:`citeline.query.plan`."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Self, cast

import numpy as np

from citeline.errors import PartialRunError, QueryError
from citeline.ingest.options import (
    DEFAULT_DEBOUNCE,
    DEFAULT_SOURCE,
    DEFAULTS,
    IndexSettings,
    IngestOptions,
    Placement,
)
from citeline.model.embedding import (
    DEFAULT_MODEL,
    Embedder,
    SentenceTransformerEmbedder,
    check_embedder,
    default_backend,
    prepare_queries,
    require_embedder,
)
from citeline.query import plan
from citeline.query.results import SearchResult, answer_documents
from citeline.store import catalog, generation, vector_files
from citeline.store.access import TokenFile, scope_of
from citeline.store.catalog import IndexStatus
from citeline.store.documents import (
    FACET_VALUES,
    DocumentDetail,
    DocumentInfo,
    Facet,
    FacetCounts,
    facets_of,
    read_document,
    read_documents,
    spellings,
)
from citeline.store.filters import Filters
from citeline.store.ledger import RunSummary
from citeline.store.locks import writer_lock
from citeline.store.snapshot import MetaRead, ReadSnapshot, open_meta
from citeline.vectors import NEW_INDEX_KIND, kind_of

# Writing, chunking and verify load where used: a search skips their import
# (docs/performance.md#choices-measured-in-the-code).
if TYPE_CHECKING:
    import threading

    from citeline.ingest.pipeline import Steps
    from citeline.ingest.removal import RemovalSummary
    from citeline.ingest.targets import IngestTarget
    from citeline.model.chunking import Chunker
    from citeline.query.readers import SnapshotReader
    from citeline.store.verify import VerifyReport

DEFAULT_INDEX_DIR = "index"


def given_settings(arguments: dict[str, Any], options: IngestOptions | None) -> dict[str, Any]:
    """The run settings among an ``ingest`` method's ``arguments``: all of them without ``options``, else those
    that differ from the defaults (they replace ``options``' fields)."""
    settings = IngestOptions.pick(arguments)
    if options is None:
        return settings
    return {name: value for name, value in settings.items() if value != getattr(DEFAULTS, name)}


SHARDS_MANIFEST = "shards.json"  #: in a sharded index's root (``citeline.sharding.index``)


class Layout(NamedTuple):
    """How to create and open an index root of a kind other than one index directory (``Index.create``'s and
    ``Index.open``'s arguments; each returns the kind's front class, ``front``, an :class:`Index`)."""

    create: Callable[..., Index]
    open: Callable[..., Index]
    front: type[Index]


#: The module of each index layout, by the file that marks its root (the registry line; importing the module
#: registers its :class:`Layout` with :func:`register_layout`). A layout's module is imported the first time a root
#: of its kind is created or opened, so a one-index search never imports the sharding modules.
LAYOUT_MODULES = {SHARDS_MANIFEST: "citeline.sharding.index"}
_LAYOUTS: dict[str, Layout] = {}


def register_layout(marker: str, layout: Layout) -> None:
    """Register how roots holding the file ``marker`` are created and opened (its module's import does this)."""
    _LAYOUTS[marker] = layout


def layout_of(marker: str) -> Layout:
    """The layout of roots marked by ``marker``, its module imported on first use."""
    if marker not in _LAYOUTS:
        importlib.import_module(LAYOUT_MODULES[marker])
    return _LAYOUTS[marker]


def marker_of(path: str | os.PathLike[str]) -> str | None:
    """The layout marker ``path`` holds (``shards.json``), or None: one index directory (or nothing yet)."""
    return next((marker for marker in LAYOUT_MODULES if (Path(path) / marker).exists()), None)


class Index:
    """A citeline index directory: build it with :meth:`ingest`, query it with :meth:`search`.
    >>> index = Index.create("index")          # or Index.open("index") for an existing one
    >>> index.ingest(["seeds"])
    >>> index.search("why did soldiers defect", k=5)
    """

    def __init__(
        self, path: Path, meta: dict[str, Any], embedder: Embedder | None = None, read: MetaRead | None = None
    ):
        self.path, self.meta = path, meta  # (Index.open/create validated meta)
        self._embedder = None if embedder is None else require_embedder(embedder)
        self._snapshot: ReadSnapshot | MetaRead | None = read  # Index.open's: the first snapshot maps it if current
        # One search at a time: a search reads the snapshot (one DuckDB connection, replaced after a commit, and
        # caches filled on first use), which two threads must not use at once. Re-entrant, so that a caller holding
        # :meth:`reading` can search.
        self._reads = threading.RLock()

    #: The layout a subclass's roots have (``ShardedIndex``: :data:`SHARDS_MANIFEST`); None: by what is on disk.
    layout: ClassVar[str | None] = None

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str] = DEFAULT_INDEX_DIR,
        *,
        model: str | None = None,
        backend: str | None = None,
        max_tokens: int | None = None,
        overlap_tokens: int | None = None,
        embedder: Embedder | None = None,
        vector_index: str | None = None,
        shards: int | None = None,
        document_vectors: bool | None = None,
    ) -> Self:
        """Create an index at ``path``, or open it if it exists and was built with the same settings.

        Settings left as None take the existing index's values, or for a new index the defaults: the bundled
        all-MiniLM-L6-v2 on :func:`~citeline.model.embedding.default_backend` (int8 ONNX where the CPU allows),
        chunks of the model's 254 tokens with 32 of overlap, and the ``auto`` vector index (see ``citeline.vectors``).
        ``embedder`` replaces the model (tests use a fast one). ``shards``: a root of that many shards
        (``citeline.sharding.index``: a :class:`~citeline.ShardedIndex` is returned; an existing root is opened with or
        without it, as is done for what ``path`` holds: :data:`LAYOUT_MODULES`). ``document_vectors``: also embed
        each document whole (``citeline.query.doc_signals``; default ``chunking.DOCUMENT_VECTORS``). The settings'
        help, bounds and choices are declared in :class:`citeline.ingest.options.IndexSettings` (a test ties this
        signature to it)."""
        kind = kind_of(vector_index or NEW_INDEX_KIND).kind  # an unknown kind fails here, naming the kinds there are
        declared = IndexSettings(  # checks each setting's bounds and choices, one line naming it
            model=model, backend=backend, max_tokens=max_tokens, overlap_tokens=overlap_tokens,
            vector_index=vector_index, document_vectors=document_vectors, shards=shards,
        )  # fmt: skip
        marker = cls._created_layout(path, shards)
        if marker is not None:  # a root of another layout: its module creates it (or opens it)
            return cast(Self, layout_of(marker).create(path, embedder=embedder, **declared.arguments()))
        index_dir = Path(path)
        embedder = None if embedder is None else require_embedder(embedder)  # one line naming what it lacks
        from citeline.model import chunking

        if not catalog.db_path(index_dir).exists():
            backend = backend or default_backend()
            embedder = embedder or SentenceTransformerEmbedder(model or DEFAULT_MODEL, backend=backend)
            settings = chunking.new_settings(max_tokens, overlap_tokens, embedder.max_seq_length, document_vectors)
            meta = catalog.new_meta(embedder, vector_index=kind, **settings)
            if generation.create(index_dir, meta):
                return cls(index_dir, meta, embedder)
            # another process created it meanwhile (checked under the writer lock): open theirs, checked below
        index = cls.open(index_dir, model=model, backend=backend, embedder=embedder)
        vector_files.check_same_kind(index_dir, index.meta, vector_index and kind)
        chunking.check_same_chunking(index_dir, index.meta, max_tokens, overlap_tokens)
        return index

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] = DEFAULT_INDEX_DIR,
        *,
        model: str | None = None,
        backend: str | None = None,
        embedder: Embedder | None = None,
        repair: bool = True,
        **sharded: Any,
    ) -> Self:
        """Open an existing index, or a root of another layout as its front class (a sharded root: a
        :class:`~citeline.ShardedIndex`, which takes ``sharded``'s ``dask_address`` and ``shard_workers``). Refuses
        another schema version, model or backend.

        A vector file or BM25 folder that does not match DuckDB (missing, or another size, checksum or BM25
        settings than recorded at commit) is rebuilt from the vectors and texts in DuckDB, with an
        :class:`IndexRepairedWarning`, and files of dead generations are removed; both only if no writer is
        running, and only when ``repair`` is true.
        """
        index_dir = Path(path)
        # dask_address or shard_workers name a sharded root: its open says so in one line if this is not one
        marker = cls.layout or marker_of(index_dir) or (SHARDS_MANIFEST if any(sharded.values()) else None)
        if marker is not None:
            opened = layout_of(marker).open(index_dir, model=model, backend=backend, embedder=embedder, repair=repair,
                                            **sharded)  # fmt: skip
            return cast(Self, opened)
        read, problems, orphans = open_meta(index_dir)
        check_embedder(index_dir, read.meta, model=model, backend=backend, embedder=embedder)
        if repair and (problems or orphans):
            generation.repair(index_dir, problems)
        meta = generation.read_meta(index_dir) if repair and problems else read.meta
        return cls(index_dir, meta, embedder, read)

    @classmethod
    def _created_layout(cls, path: str | os.PathLike[str], shards: int | None) -> str | None:
        # The marker of the layout create(path, shards=shards) gives (None: one index directory).
        return cls.layout or (SHARDS_MANIFEST if shards is not None else marker_of(path))

    @classmethod
    def front_class(cls, path: str | os.PathLike[str], *, shards: int | None = None) -> type[Index]:
        """The class :meth:`create` returns for ``path`` and ``shards`` (and :meth:`open` for what ``path`` holds),
        nothing opened or created: :class:`Index`, or a layout's front class (a sharded root's
        :class:`~citeline.ShardedIndex`). A caller asks it what that kind of index does (:meth:`unused_placement`),
        never which kind it is."""
        marker = cls._created_layout(path, shards)
        return cls if marker is None else layout_of(marker).front

    @classmethod
    def unused_placement(cls, placement: Placement) -> list[str]:
        """The settings of ``placement`` this kind of index has no use for: a plain index has no parts, so each
        one that places parts (``dask_address``, ``dask_workers``, ``shard_workers``) that is set; a sharded root
        uses them all. (``parallel`` is a default, never a caller's mistake.)"""
        return [name for name in ("dask_address", "dask_workers", "shard_workers") if getattr(placement, name)]

    # ---------------------------------------------------------------- parts

    @property
    def embedder(self) -> Embedder:
        """The index's embedding model, loaded on first use and checked against the index's fingerprint."""
        if self._embedder is None:
            embedder = SentenceTransformerEmbedder(self.meta["model"], backend=self.meta["backend"])
            check_embedder(self.path, self.meta, embedder=embedder)
            self._embedder = embedder
        return self._embedder

    @cached_property
    def chunker(self) -> Chunker:
        """The chunker with this index's settings."""
        from citeline.model.chunking import Chunker

        return Chunker.of_index(self.embedder.tokenizer_file, self.meta)

    @property
    def dimension(self) -> int:
        """Length of the index's vectors."""
        return int(self.meta["dimension"])

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed texts with the index's model."""
        return self.embedder.encode(texts)

    def encode_query(self, query: str) -> np.ndarray:
        """Embed one query with the fast-starting query encoder (see ``SentenceTransformerEmbedder.query_encoder``)."""
        return self.embedder.query_encoder.encode([query])[0]

    # ---------------------------------------------------------------- writing

    def ingest(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        progress: bool = False,
        max_file_bytes: int = DEFAULTS.max_file_bytes,
        wait: float | None = DEFAULTS.wait,
        allow_removals: bool = DEFAULTS.allow_removals,
        removal_threshold: float = DEFAULTS.removal_threshold,
        dry_run: bool = DEFAULTS.dry_run,
        commit_every: int = DEFAULTS.commit_every,
        include: Sequence[str] = DEFAULTS.include,
        exclude: Sequence[str] = DEFAULTS.exclude,
        strict: bool = DEFAULTS.strict,
        encoding: str | None = DEFAULTS.encoding,
        progress_every: float = DEFAULTS.progress_every,
        storage_options: Mapping[str, Any] | None = DEFAULTS.storage_options,
        options: IngestOptions | None = None,
        placement: Placement | None = None,
    ) -> RunSummary:
        """Bring the index up to date with the files under ``paths`` (folders, files, or remote URLs:
        ``s3://bucket/prefix``, ``gs://``, ``az://``, ``https://``, any fsspec URL) and return the run's ledger row.

        The keyword arguments are the fields of :class:`citeline.ingest.options.IngestOptions` (their meaning,
        default and bounds are declared there); ``options`` is a whole ``IngestOptions`` instead (keyword
        arguments beside it that differ from their defaults replace its fields). New and changed documents are
        chunked, embedded and committed ``commit_every`` chunks at a time, vanished ones (under ``paths``) removed,
        failed files reported in the ledger (``pipeline.run``). ``include``/``exclude``: globs selecting the files
        (``citeline.sources.selection``). A root that comes back empty or would lose over ``removal_threshold`` of
        its documents raises :class:`RemovalRefusedError` unless ``allow_removals``; ``dry_run`` writes nothing;
        ``strict`` raises :class:`citeline.errors.PartialRunError` after a partial run (its commits stand).
        ``storage_options``: fsspec options of the remote roots (credentials, ``endpoint_url``), held for this run
        only and never stored (``citeline.sources.remote``). ``placement``: where a sharded root's parts run
        (:class:`~citeline.ingest.options.Placement`); a plain index has none and ignores it, so a caller hands one
        to any index (:meth:`unused_placement` says what of it goes unused)."""
        settings = given_settings(locals(), options)
        return self.run(paths, IngestOptions.of(options, **settings))

    def run(
        self,
        paths: Sequence[str | os.PathLike[str]],
        options: IngestOptions,
        steps: Steps | None = None,
        *,
        committer: IngestTarget | None = None,
    ) -> RunSummary:
        """The one run skeleton of every write (``ingest``, ``add_texts``, ``remove``, the flow's): ``pipeline.run``
        plans under the writer lock (``steps``: how discovery and parsing run, or what they are given), then
        ``committer`` (default :meth:`committer`) commits the plan; returns the run's ledger row and keeps
        ``meta["generation"]`` current."""
        from citeline.ingest import pipeline

        steps = steps or pipeline.Steps()
        try:
            run = pipeline.run(self, paths, options, steps, committer=committer or self.committer(steps))
        except PartialRunError as partial:  # strict: its commits stand
            self.meta["generation"] = partial.run.generation
            raise
        self.meta["generation"] = run.generation
        return run

    def committer(self, steps: Steps, placement: Placement | None = None) -> IngestTarget:
        """What commits this index's runs (``citeline.ingest.targets``): a plain index's, ``LocalCommits``
        (``placement``, where a sharded root's parts run, is nothing to it); a sharded root returns its own, so no
        caller asks which kind of index it writes to."""
        from citeline.ingest import pipeline

        return pipeline.LocalCommits(self, steps)

    def watch(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        debounce: float = DEFAULT_DEBOUNCE,
        on_run: Callable[[RunSummary], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        on_ready: Callable[[], None] | None = None,
        stop: threading.Event | None = None,
        options: IngestOptions | None = None,
        **settings: Any,
    ) -> int:
        """Keep the index current with the files under ``paths``: :meth:`ingest` once, then once per group of
        changes (grouped until the folders are quiet for ``debounce`` seconds), until ``stop`` is set (returns the
        number of runs) or Ctrl-C/SIGTERM (raised after the run in progress committed what it embedded whole).

        ``settings`` are :meth:`ingest`'s keyword arguments (``include``, ``exclude``, ``encoding``,
        ``allow_removals``, ``wait``...), or ``options`` a whole :class:`IngestOptions`: every run is an
        :meth:`ingest` with them, so the same guards and ledger rows. ``on_run`` gets each run's ledger row,
        ``on_error`` one line for a run refused or failed as a whole (the watch goes on); see
        :mod:`citeline.ingest.watching`."""
        from citeline.ingest import watching
        from citeline.sources.discovery import resolve_roots
        from citeline.sources.selection import Selection

        run_options = IngestOptions.of(options, **settings)  # an unknown name or a bad value: one line, at once
        roots = resolve_roots(paths)
        return watching.watch(
            lambda: self.ingest(roots, options=run_options),
            roots,
            index_dir=self.path,
            selection=Selection.of(run_options),
            debounce=debounce,
            on_run=on_run,
            on_error=on_error,
            on_ready=on_ready,
            stop=stop,
        )

    def add_texts(
        self,
        texts: Sequence[str],
        ids: Sequence[str | int] | None = None,
        metadata: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
        source: str = DEFAULT_SOURCE,
        *,
        titles: Sequence[str | None] | None = None,
        wait: float | None = None,
        progress: bool = False,
        dry_run: bool = False,
    ) -> RunSummary:
        """Index texts that are not files as one run, incrementally by id (``citeline ingest -``,
        citeline.ingest.texts)."""
        from citeline.ingest.pipeline import GivenSteps
        from citeline.ingest.texts import documents_of, run_of

        documents = documents_of(texts, ids, metadata, source, titles)
        discovery, given, options = run_of(documents, source, wait=wait, progress=progress, dry_run=dry_run)
        return self.run([source], options, GivenSteps(discovery, given))

    def remove(
        self,
        paths: Sequence[str | os.PathLike[str]] | None = None,
        *,
        source: Sequence[str] | str | None = None,
        doc_ids: Sequence[str] | str | None = None,
        dry_run: bool = False,
        wait: float | None = None,
    ) -> RemovalSummary:
        """Remove documents by source path, source or id as one run (``citeline remove``;
        :mod:`citeline.ingest.removal`)."""
        from citeline.ingest import removal
        from citeline.ingest.pipeline import GivenSteps

        chosen = removal.selectors(paths, source, doc_ids)
        discovery, given, options = removal.run_of(chosen, dry_run=dry_run, wait=wait)
        return cast("RemovalSummary", self.run(discovery.roots, options, GivenSteps(discovery, given)))

    def prepare_queries(self) -> None:
        """Make later searches start fast: export the ONNX model the query path uses, once per model."""
        prepare_queries(self.embedder)

    def verify(self) -> VerifyReport:
        """Check the index's invariants (``citeline.store.verify``): checksums, ids, vectors, counts, exact offsets."""
        from citeline.store.verify import verify

        return verify(self.path)

    def rebuild(self, *, wait: float | None = None) -> VerifyReport:
        """Rewrite the generation's derived files from DuckDB (none re-embedded), then verify; ``wait``: for a lock."""
        with writer_lock(self.path, wait=wait):
            self.meta["generation"] = generation.rebuild(self.path)
        return self.verify()

    # ---------------------------------------------------------------- reading

    def search(self, query: str | plan.SearchRequest, k: int = plan.DEFAULT_K, **options: Any) -> list[SearchResult]:
        """The ``k`` results most relevant to ``query``, best first, each with its provenance.

        ``query`` is the text to look for and ``options`` the rest of the request, by the names of
        :class:`~citeline.SearchRequest`'s fields (which declare each one's default, bounds and help; an unknown
        name is a :class:`QueryError`); or a whole ``SearchRequest`` (``SearchRequest.of(...)``), given alone.
        ``mode``: ``"hybrid"`` (default; fused, :class:`citeline.query.plan.Fusion`), ``"dense"`` or ``"lexical"``
        (BM25). ``filters`` (``source``, ``path_glob``, ``ingested_after``/``_before``, ``meta``: see
        ``citeline.store.filters``) apply before ranking, so k results come back whenever k matching passages exist.
        ``collapse`` merges near-duplicates and shared quotes of documents into one result
        (``citeline.query.collapse``; ``collapse_threshold`` the cosine). ``min_score``: hits whose ``relevance``
        (absolute, in [0, 1]) is lower are dropped; None (default): each hit is kept or dropped on its own merit,
        against the best hit of the unfiltered ranking (none when the query matches nothing); 0 keeps every hit
        (``citeline.query.relevance``). ``relevance`` is the number to show people; ``score`` only orders one
        answer's hits (its scale depends on the mode, and it can be negative). ``group``: one result per document,
        its best passage with the document's other passages that answered in ``more_passages``, and ``k`` counts
        documents (``citeline.query.grouping``); off by default here (k passages, each its own result, as a program
        feeding passages to a model expects), on in the CLI and the search page. ``offset``: skip this many ranked
        results (the next page). ``highlight=False``: no highlights (cheaper when only the passages are wanted).
        """
        if isinstance(query, plan.SearchRequest):
            if k != plan.DEFAULT_K or options:
                raise QueryError("give a SearchRequest alone: its fields are the search's options")
            request = query
        else:
            request = plan.SearchRequest.of(query, k, **options)
        with self._reads:
            results = plan.search(self.snapshot(), request, self.encode_query, self.meta["model"])
        if not results:
            self._explain_nothing(request.filters)
        return results

    def _explain_nothing(self, filters: Filters) -> None:
        """Raise :class:`QueryError` when ``filters`` select nothing because an ordered comparison of numbers or
        dates is on a field that holds values but never one of that kind (``Filters.kind_problem``); called when a
        search or a listing found nothing. The unfiltered facet counts are each field's values, kept per generation,
        so asking costs nothing after the first time."""
        if filters.meta:
            problem = filters.kind_problem(self.facet_counts())
            if problem is not None:
                raise problem

    def rank(
        self,
        query: str,
        k: int,
        *,
        mode: str = plan.DEFAULT_MODE,
        allowed: np.ndarray | None = None,
        fusion: plan.Fusion = plan.DEFAULT_FUSION,
        dense_document_weight: float | None = None,
    ) -> list[tuple[int, float]]:
        """:meth:`search`'s ranking, ``(chunk_id, score)`` best first; ``dense_document_weight`` 0: cosines alone."""
        with self._reads:
            snapshot, weight = self.snapshot(), dense_document_weight
            return plan.embed_and_rank(snapshot, query, k, mode, allowed, fusion, self.encode_query, weight)

    @contextmanager
    def reading(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the index's search slot: :meth:`search` and :meth:`rank` take it for each call, so one ``Index``
        can be shared between threads; a caller takes it to read several things of one snapshot (``citeline
        serve`` reads the generation that answered a search). ``timeout``: seconds to wait for it (None: as long
        as it takes), then :class:`TimeoutError`."""
        if not self._reads.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            raise TimeoutError(f"{self.path}: no search slot within {timeout:g} s")
        try:
            yield
        finally:
            self._reads.release()

    def snapshot(self, *, refresh: bool = True) -> SnapshotReader:
        """The view searches run on, reloaded after every commit (see ``citeline.store.snapshot``).

        ``refresh=False`` returns the view the last search read, without looking for a commit since (so a caller
        that serialises its searches can tell which generation answered: ``citeline serve``'s generation header).
        """
        if refresh or not isinstance(self._snapshot, ReadSnapshot):
            self._snapshot = ReadSnapshot.current(self._snapshot, self.path)
        return self._snapshot

    def status(self) -> IndexStatus:
        """Counts, model, generation and the last run."""
        return catalog.status(self.path)

    def runs(self, limit: int = 20) -> list[RunSummary]:
        """The run ledger, newest first."""
        return catalog.runs(self.path, limit)

    def documents(
        self, filters: Filters | Mapping[str, Any] | None = None, limit: int | None = None, offset: int = 0
    ) -> list[DocumentInfo]:
        """The documents ``filters`` selects (the filters of :meth:`search`), by source and path, at most ``limit``
        after the first ``offset`` (paging): doc id, source path and id, title, format, chunks, pages, size, content
        hash, run, ingested_at, metadata."""
        checked = Filters.from_value(filters)
        found = read_documents(self.path, checked, limit, offset)
        if not found and not offset:
            self._explain_nothing(checked)
        return found

    def facets(
        self,
        filters: Filters | Mapping[str, Any] | None = None,
        *,
        within: Iterable[SearchResult | str] | None = None,
        limit: int | None = FACET_VALUES,
    ) -> list[Facet]:
        """Facet counts, as datasette shows them for a table: for every top-level metadata field that narrows, the
        number of documents per value (a list value counts for each item), among the documents ``filters`` selects
        (the filters of :meth:`search`) and, given ``within`` (a search's results, or doc ids), among those
        documents only (a collapsed result's every source included): the facets of an answer. Each comes with its
        ``limit`` most frequent values (None: all) and how many more there are. A value is what ``--where
        FIELD=VALUE`` / ``{"meta": {FIELD: VALUE}}`` matches.

        Only facets that narrow: none for a field whose values are nearly all distinct across the index (a token's
        scope: across the documents it may see; a title,
        an id); the fields come by the share of the documents counted that choosing a value leaves (lowest first),
        then by the documents holding them (``citeline.store.documents.facets_of``)."""
        counts = self.facet_counts(filters, within=within)
        # A field's nature is judged on what the caller may see at all: a token's scope (store.access), else the
        # whole index; never on documents outside the scope, whose values would show through the facets offered.
        scope = scope_of(Filters.from_value(filters))
        whole = counts if filters is None and within is None else self.facet_counts(scope or None)
        return facets_of(counts, limit, reference=whole)

    def facet_counts(
        self, filters: Filters | Mapping[str, Any] | None = None, *, within: Iterable[SearchResult | str] | None = None
    ) -> FacetCounts:
        """:meth:`facets`' counts, every value (``ShardedIndex`` adds its shards' up), read from the generation
        searches read (:meth:`snapshot`)."""
        doc_ids = None if within is None else answer_documents(within)
        with self._reads:  # the search's snapshot: one thread at a time
            snapshot = self.snapshot()
            assert isinstance(snapshot, ReadSnapshot)  # an Index's own view (a ShardedIndex has its own facet_counts)
            return snapshot.facet_counts(Filters.from_value(filters), doc_ids)

    def document(self, doc_id: str, within: Filters | Mapping[str, Any] | None = None) -> DocumentDetail:
        """A :meth:`documents` record with its ``text`` and its chunks' ``spans`` (chunk_id, ordinal, offsets, page).

        ``doc_id`` is a document id, or a document's name: its source id (``notes/a.md``, ``records.jsonl#rec1786``),
        its file's path (absolute, or relative to the working directory), or a record's ``path#record_id`` (what
        search results print); a name that fits several documents (a file of records) raises ``QueryError``
        naming some. ``within`` (filters, as :meth:`documents` takes): only the documents they select are looked
        for, by id or by name (a served scope: ``citeline.server.access``)."""
        scope = Filters.from_value(within) if within is not None else None
        return read_document(self.path, doc_id, spellings(doc_id), scope)

    def tokens(self, path: str | os.PathLike[str] | None = None) -> TokenFile:
        """The named access tokens a server over this index admits (``citeline tokens``): the file ``path``, else
        ``tokens.json`` in the index directory (``citeline.store.access``: ``add``, ``list``, ``revoke``,
        ``rotate``; each token's scope is a filter of :meth:`search`)."""
        return TokenFile.of_index(self.path, path)

    def document_text(self, doc_id: str) -> str:
        """The stored text of a document (what passage offsets index into)."""
        return self.document(doc_id).text


# ---------------------------------------------------------------- the index a run works on
# For every ingestion path (``citeline ingest``, ``ingest -``, ``watch``, the Prefect flow). A dry run writes nothing,
# and that includes the index itself: ``Index.create`` would create the directory and an empty index where none
# exists yet. So a dry run on a path that holds no index plans against an empty index of the same settings in a
# temporary folder, removed afterwards: every document is planned as new, and the path is left as it was (missing,
# or without an index).


def holds_index(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds an index (a plain index's catalog or a sharded root's manifest)."""
    return catalog.db_path(Path(path)).exists() or (Path(path) / SHARDS_MANIFEST).exists()


@contextmanager
def index_for_run(
    path: str | os.PathLike[str], *, dry_run: bool, create: Callable[..., Index] | None = None, **settings: Any
) -> Iterator[Index]:
    """``create(path, **settings)`` (default ``Index.create``); for a dry run where ``path`` holds no index, an
    empty index of those settings in a temporary folder (removed on exit), so that the dry run creates nothing at
    ``path``. ``create``: the caller's front class (the flow's, which its tests replace)."""
    create = create or Index.create
    if not dry_run or holds_index(path):
        yield create(path, **settings)
        return
    scratch = tempfile.mkdtemp(prefix="citeline-dry-run-")
    try:
        yield create(Path(scratch) / Path(path).name, **settings)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
