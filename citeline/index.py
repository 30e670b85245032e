"""``Index``: the one front class over sources, chunking, embedding, store and search."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from citeline import ingest as pipeline
from citeline import store
from citeline.chunking import Chunker
from citeline.collapse import DEFAULT_COLLAPSE_THRESHOLD, collapsed_search, validate_threshold
from citeline.embedding import DEFAULT_MODEL, SentenceTransformerEmbedder
from citeline.errors import (
    IndexCorruptError,
    IndexLockedError,
    IndexMismatchError,
    IndexNotFoundError,
    IndexRepairedWarning,
)
from citeline.filters import Filters, allowed_chunk_ids
from citeline.search import (
    DEFAULT_FUSION,
    DEFAULT_MODE,
    Fusion,
    SearchResult,
    chunk_vectors,
    dense_search,
    fetch_passages,
    hybrid_search,
    lexical_search,
    validate_mode,
    validate_query,
)
from citeline.sources import DEFAULT_MAX_FILE_BYTES

DEFAULT_INDEX_DIR = "index"
DEFAULT_OVERLAP_TOKENS = 32


class Embedder(Protocol):
    """What an index needs of an embedding model (see :class:`~citeline.embedding.SentenceTransformerEmbedder`)."""

    @property
    def model_name(self) -> str:
        """Name recorded in the index."""
        ...

    @property
    def backend(self) -> str:
        """Inference backend recorded in the index."""
        ...

    @property
    def fingerprint(self) -> str:
        """Changes whenever the vectors would."""
        ...

    @property
    def dimension(self) -> int:
        """Vector length."""
        ...

    @property
    def max_seq_length(self) -> int:
        """Tokens the model reads, special tokens included."""
        ...

    @property
    def tokenizer_file(self) -> str:
        """The model's tokenizer.json (chunk sizes are counted with it)."""
        ...

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


@dataclass(frozen=True)
class IndexStatus:
    """What ``citeline status`` shows."""

    path: str
    documents: int
    chunks: int
    model: str
    backend: str
    model_fingerprint: str
    dimension: int
    generation: int
    max_tokens: int
    overlap_tokens: int
    last_run: pipeline.RunSummary | None

    def to_dict(self) -> dict[str, Any]:
        """The status as JSON-ready data."""
        return asdict(self)


class Index:
    """A citeline index directory: build it with :meth:`ingest`, query it with :meth:`search`.

    >>> index = Index.create("index")          # or Index.open("index") for an existing one
    >>> index.ingest(["seeds"])
    >>> index.search("why did soldiers defect", k=5)
    """

    def __init__(self, path: Path, meta: dict[str, Any], embedder: Embedder | None = None):
        # Use Index.open or Index.create; this constructor trusts that meta was validated.
        self.path = path
        self.meta = meta
        self._embedder = embedder
        self._snapshot: store.ReadSnapshot | None = None

    # ---------------------------------------------------------------- opening

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
    ) -> Index:
        """Create an index at ``path``, or open it if it exists and was built with the same settings.

        Settings left as None take the existing index's values, or for a new index the defaults: the bundled
        all-MiniLM-L6-v2 on torch, chunks of the most tokens the model reads (256 - 2 special tokens), and
        32 tokens of overlap. ``embedder`` replaces the sentence-transformers model (tests use a fast one).
        """
        index_dir = Path(path)
        if store.db_path(index_dir).exists():
            index = cls.open(index_dir, model=model, backend=backend, embedder=embedder)
            wanted = {
                "max_tokens": max_tokens or index.meta["max_tokens"],
                "overlap_tokens": index.meta["overlap_tokens"] if overlap_tokens is None else overlap_tokens,
            }
            have = {"max_tokens": index.meta["max_tokens"], "overlap_tokens": index.meta["overlap_tokens"]}
            if wanted != have:
                raise IndexMismatchError(
                    f"{index_dir} was built with chunking {have}, not {wanted}; use those settings, "
                    "or a new --index directory"
                )
            return index
        new_embedder: Embedder = embedder or SentenceTransformerEmbedder(
            model or DEFAULT_MODEL, backend=backend or "torch"
        )
        overlap_tokens = DEFAULT_OVERLAP_TOKENS if overlap_tokens is None else overlap_tokens
        embedder = new_embedder
        max_tokens = max_tokens or new_embedder.max_seq_length - 2
        Chunker(
            embedder.tokenizer_file,
            max_tokens=max_tokens,
            overlap_tokens=overlap_tokens,
            model_max_tokens=embedder.max_seq_length,
        )  # validates the settings before anything is written
        meta = {
            "schema_version": store.SCHEMA_VERSION,
            "model": embedder.model_name,
            "backend": embedder.backend,
            "model_fingerprint": embedder.fingerprint,
            "dimension": embedder.dimension,
            "model_max_tokens": embedder.max_seq_length,
            "max_tokens": max_tokens,
            "overlap_tokens": overlap_tokens,
            "generation": 0,
            "vector_count": 0,
        }
        store.ensure_directory(index_dir)
        with store.writer_lock(index_dir):
            if store.db_path(index_dir).exists():  # another process created it meanwhile
                return cls.open(index_dir, model=model, backend=backend, embedder=embedder)
            tmp_db = index_dir / (store.DB_FILE + ".creating")
            tmp_db.unlink(missing_ok=True)
            connection = store.duckdb.connect(str(tmp_db))
            try:
                store.create_schema(connection, embedder.dimension)
                meta.update(store.publish_generation(index_dir, 0, connection, embedder.dimension))
                store.write_meta(connection, meta)
                connection.execute("CHECKPOINT")
            finally:
                connection.close()
            # The database appears under its real name only once complete, so a crash here leaves no index
            # rather than half of one.
            os.replace(tmp_db, store.db_path(index_dir))
        return cls(index_dir, meta, embedder)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] = DEFAULT_INDEX_DIR,
        *,
        model: str | None = None,
        backend: str | None = None,
        embedder: Embedder | None = None,
        repair: bool = True,
    ) -> Index:
        """Open an existing index. Refuses one built with another schema version, model or backend.

        A FAISS file or BM25 folder that does not match DuckDB (missing, or another size, checksum or BM25
        settings than recorded at commit) is rebuilt from the vectors and texts in DuckDB, with an
        :class:`IndexRepairedWarning`, and files of dead generations are removed; both only if no writer is
        running, and only when ``repair`` is true.
        """
        index_dir = Path(path)
        connection = store.connect(index_dir, read_only=True)
        try:
            try:
                meta = store.read_meta(connection)
            except store.duckdb.Error as exc:
                raise IndexCorruptError(
                    f"{store.db_path(index_dir)} is a DuckDB file but not a readable citeline index "
                    f"({str(exc).splitlines()[0]}); point --index at an index directory"
                ) from exc
            # Checked while the connection is open, so no writer can publish a generation in between.
            problems = store.quick_check(index_dir, meta) if "generation" in meta else []
            orphans = store.orphan_files(index_dir, int(meta.get("generation", 0)))
        finally:
            connection.close()
        if meta.get("schema_version") != store.SCHEMA_VERSION:
            raise IndexMismatchError(
                f"{index_dir} has schema version {meta.get('schema_version')}, this citeline reads version "
                f"{store.SCHEMA_VERSION}; rebuild it with `citeline ingest PATH --index NEW_DIR`"
            )
        asked = {"model": model, "backend": backend}
        if embedder is not None:
            asked = {"model": embedder.model_name, "backend": embedder.backend}
        for key, value in asked.items():
            if value is not None and value != meta[key]:
                raise IndexMismatchError(
                    f"{index_dir} was built with {key} {meta[key]!r}, not {value!r}; vectors of different "
                    f"models cannot be compared. Search it with {key} {meta[key]!r}, or build a new index "
                    "with `--index NEW_DIR`"
                )
        if embedder is not None and embedder.fingerprint != meta["model_fingerprint"]:
            raise IndexMismatchError(
                f"{index_dir} was built with model files of fingerprint {meta['model_fingerprint']}, but the "
                f"model {embedder.model_name!r} found here has fingerprint {embedder.fingerprint}; reinstall "
                "the model the index was built with, or rebuild the index"
            )
        if repair and (problems or orphans):
            _repair_on_open(index_dir, problems)
            if problems:
                connection = store.connect(index_dir, read_only=True)
                try:
                    meta = store.read_meta(connection)
                finally:
                    connection.close()
        return cls(index_dir, meta, embedder)

    # ---------------------------------------------------------------- parts

    @property
    def embedder(self) -> Embedder:
        """The index's embedding model, loaded on first use and checked against the index's fingerprint."""
        if self._embedder is None:
            embedder = SentenceTransformerEmbedder(self.meta["model"], backend=self.meta["backend"])
            if embedder.fingerprint != self.meta["model_fingerprint"]:
                raise IndexMismatchError(
                    f"{self.path} was built with model files of fingerprint {self.meta['model_fingerprint']}, "
                    f"but {embedder.model_path} has fingerprint {embedder.fingerprint}; reinstall the model "
                    "the index was built with, or rebuild the index"
                )
            self._embedder = embedder
        return self._embedder

    @cached_property
    def chunker(self) -> Chunker:
        """The chunker with this index's settings."""
        return Chunker(
            self.embedder.tokenizer_file,
            max_tokens=self.meta["max_tokens"],
            overlap_tokens=self.meta["overlap_tokens"],
            model_max_tokens=self.meta["model_max_tokens"],
        )

    @property
    def dimension(self) -> int:
        """Length of the index's vectors."""
        return int(self.meta["dimension"])

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed texts with the index's model."""
        return self.embedder.encode(texts)

    def encode_query(self, query: str) -> np.ndarray:
        """Embed one query with the fast-starting query encoder (see ``SentenceTransformerEmbedder.query_encoder``)."""
        encoder = getattr(self.embedder, "query_encoder", self.embedder)
        return encoder.encode([query])[0]

    # ---------------------------------------------------------------- writing

    def ingest(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        progress: bool = False,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        wait: float | None = None,
    ) -> pipeline.RunSummary:
        """Bring the index up to date with the files under ``paths`` and return the run's ledger row.

        New and changed documents are chunked and embedded, unchanged ones skipped, vanished ones removed
        (only under the given paths). Files that cannot be parsed are reported in the ledger and the rest is
        committed. ``wait`` bounds how long to wait for another writer (default: as long as it takes).
        """
        run_id, started_at = pipeline.new_run_id(), pipeline.utc_now()
        roots = pipeline.resolve_roots(paths)
        with store.writer_lock(self.path, wait=wait):
            try:
                files = pipeline.discover(paths)
                parsed = pipeline.parse_files(files, max_file_bytes=max_file_bytes)
                plan = self.plan(roots, files, parsed)
                rows = self.chunk(plan.to_index)
                run = pipeline.summarize(run_id, started_at, plan)
                run.chunks_embedded, run.chunks_reused = self.embed(rows, progress=progress)
                self.commit(plan, rows, run)
            except BaseException as exc:
                self.record_failure(run_id, started_at, roots, exc)
                raise
        self.prepare_queries()
        return run

    def prepare_queries(self) -> None:
        """Make later searches start fast: export the ONNX model the query path uses, once per model."""
        prepare = getattr(self.embedder, "prepare_query_encoder", None)
        if prepare is None:
            return
        try:
            prepare()
        except Exception as exc:  # searches still work, through the slower torch model
            warnings.warn(f"could not export the ONNX query model ({exc}); searches will start slowly",
                          stacklevel=2)

    # The steps of ingest(), public so that flows/pipeline.py can run each as a Prefect task. The caller holds
    # the writer lock (store.writer_lock) from plan to commit, so the index cannot change in between.

    def plan(
        self, roots: Sequence[str], files: Sequence[pipeline.SourceFile], parsed: pipeline.ParsedBatch
    ) -> pipeline.Plan:
        """Which parsed documents are new or changed, and which stored ones vanished from ``roots``."""
        with self._writer_connection() as connection:
            return pipeline.plan_changes(connection, roots, files, parsed)

    def chunk(self, documents: Sequence[pipeline.Document]) -> store.ChunkRows:
        """Chunk documents with this index's chunker (vectors not yet filled)."""
        return pipeline.chunk_documents(documents, self.chunker)

    def embed(self, rows: store.ChunkRows, *, progress: bool = False) -> tuple[int, int]:
        """Fill ``rows.vectors``, reusing vectors of identical chunk text already in the index.

        Returns ``(embedded, reused)``.
        """
        connection = store.connect(self.path, read_only=True)
        try:
            cache = pipeline.cached_vectors(connection, rows.text_hash, self.dimension)
        finally:
            connection.close()
        return pipeline.embed_chunks(rows, self.encode, self.dimension, cache=cache, progress=progress)

    def commit(self, plan: pipeline.Plan, rows: store.ChunkRows, run: pipeline.RunSummary) -> int:
        """Write the plan's changes as one new generation (see DESIGN.md's commit protocol)."""
        with self._writer_connection() as connection:
            self.meta["generation"] = pipeline.commit(self.path, connection, plan, rows, run, self.dimension)
        return int(self.meta["generation"])

    def record_failure(self, run_id: str, started_at: str, roots: list[str], error: BaseException) -> None:
        """Record a run that failed before committing; the index itself stays at its last generation."""
        run = pipeline.RunSummary(
            run_id=run_id,
            started_at=started_at,
            finished_at=pipeline.utc_now(),
            status="failed",
            roots=roots,
            generation=int(self.meta["generation"]),
            errors=[{"path": "", "reason": f"{type(error).__name__}: {error}"}],
        )
        try:
            with self._writer_connection() as connection:
                pipeline.record_run(connection, run)
        except Exception:  # the original error matters more than the ledger row
            pass

    def _writer_connection(self) -> store.contextlib.closing[Any]:
        return store.contextlib.closing(store.connect(self.path, read_only=False))

    # ---------------------------------------------------------------- checking

    def verify(self) -> store.VerifyReport:
        """Check that the current generation's FAISS file and BM25 folder match DuckDB (ids, vectors, counts,
        checksums)."""
        return store.verify(self.path)

    def rebuild(self, *, wait: float | None = None) -> store.VerifyReport:
        """Rewrite the current generation's FAISS file and BM25 folder from DuckDB, then verify.

        Nothing is re-embedded. ``wait`` bounds how long to wait for a running writer (default: as long as it
        takes). Files of dead generations are removed too.
        """
        with store.writer_lock(self.path, wait=wait):
            self.meta["generation"] = store.rebuild_derived(self.path)
        return self.verify()

    # ---------------------------------------------------------------- reading

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: str = DEFAULT_MODE,
        filters: Filters | Mapping[str, Any] | None = None,
        collapse: bool = True,
        collapse_threshold: float = DEFAULT_COLLAPSE_THRESHOLD,
    ) -> list[SearchResult]:
        """The ``k`` passages most relevant to ``query``, best first, each with its provenance.

        ``mode`` is ``"hybrid"`` (default: dense and lexical rankings fused; the score is the fused score, see
        :class:`citeline.search.Fusion`), ``"dense"`` (cosine similarity of the model's embeddings) or
        ``"lexical"`` (BM25 over stemmed words).

        ``filters`` (``{"source": ..., "path_glob": ..., "ingested_after": ..., "ingested_before": ...,
        "meta": {key: value}}``, see ``citeline.filters``) restricts the candidates before ranking, so k results
        come back whenever k matching passages exist. With ``collapse``, passages of different documents that
        are near-duplicates (cosine >= ``collapse_threshold``) or quote the same words come back as one result
        whose ``sources`` lists every document (see ``citeline.collapse``).
        """
        query, k = validate_query(query, k)
        mode = validate_mode(mode)
        criteria = Filters.from_value(filters)
        threshold = validate_threshold(collapse_threshold)
        # One snapshot for the whole search, so filters, ranking and provenance all see the same generation.
        snapshot = self.snapshot()
        allowed = allowed_chunk_ids(snapshot.connection, criteria)
        # Lexical search needs no model, unless collapsing compares vectors.
        vector = self.encode_query(query) if mode != "lexical" or collapse else None

        def rank(depth: int) -> list[SearchResult]:
            hits = self._rank(snapshot, query, vector, depth, mode, allowed, DEFAULT_FUSION)
            return fetch_passages(snapshot, hits, self.meta["model"])

        if not collapse:
            return rank(k)
        assert vector is not None
        return collapsed_search(
            k,
            rank,
            lambda ids: chunk_vectors(snapshot.faiss, ids),
            query_vector=vector,
            encode=lambda texts: np.stack([self.encode_query(text) for text in texts]),
            threshold=threshold,
        )

    def rank(
        self,
        query: str,
        k: int,
        *,
        mode: str = DEFAULT_MODE,
        allowed: np.ndarray | None = None,
        fusion: Fusion = DEFAULT_FUSION,
    ) -> list[tuple[int, float]]:
        """The ranking behind :meth:`search`: ``(chunk_id, score)`` pairs, best first, without provenance.

        ``allowed`` (chunk ids) restricts the candidates before ranking; ``fusion`` overrides the hybrid settings
        (evaluation and tuning use it).
        """
        if allowed is not None:  # sorted and unique, as the search functions expect
            allowed = np.unique(np.asarray(allowed, dtype=np.int64))
        vector = None if mode == "lexical" else self.encode_query(query)
        return self._rank(self.snapshot(), query, vector, k, validate_mode(mode), allowed, fusion)

    @staticmethod
    def _rank(
        snapshot: store.ReadSnapshot,
        query: str,
        vector: np.ndarray | None,
        k: int,
        mode: str,
        allowed: np.ndarray | None,
        fusion: Fusion,
    ) -> list[tuple[int, float]]:
        if mode == "lexical":
            return lexical_search(snapshot.lexical, query, k, allowed)
        assert vector is not None
        if mode == "dense":
            return dense_search(snapshot.faiss, vector, k, allowed)
        return hybrid_search(snapshot.faiss, snapshot.lexical, query, vector, k, allowed, fusion)

    def snapshot(self) -> store.ReadSnapshot:
        """The in-memory view searches run on, reloaded after every commit (see ``store.ReadSnapshot``)."""
        if self._snapshot is None or not self._snapshot.is_current():
            if self._snapshot is not None:
                self._snapshot.close()
            self._snapshot = store.ReadSnapshot(self.path)
        return self._snapshot

    def status(self) -> IndexStatus:
        """Counts, model, generation and the last run."""
        connection = store.connect(self.path, read_only=True)
        try:
            meta = store.read_meta(connection)
            documents = connection.execute("SELECT count(*) FROM documents").fetchall()[0][0]
            chunks = connection.execute("SELECT count(*) FROM chunks").fetchall()[0][0]
            runs = _read_runs(connection, 1)
        finally:
            connection.close()
        return IndexStatus(
            path=str(self.path),
            documents=documents,
            chunks=chunks,
            model=meta["model"],
            backend=meta["backend"],
            model_fingerprint=meta["model_fingerprint"],
            dimension=meta["dimension"],
            generation=meta["generation"],
            max_tokens=meta["max_tokens"],
            overlap_tokens=meta["overlap_tokens"],
            last_run=runs[0] if runs else None,
        )

    def runs(self, limit: int = 20) -> list[pipeline.RunSummary]:
        """The run ledger, newest first."""
        connection = store.connect(self.path, read_only=True)
        try:
            return _read_runs(connection, limit)
        finally:
            connection.close()

    def document_text(self, doc_id: str) -> str:
        """The stored text of a document (what passage offsets index into)."""
        connection = store.connect(self.path, read_only=True)
        try:
            row = connection.execute("SELECT text FROM documents WHERE doc_id = ?", [doc_id]).fetchone()
        finally:
            connection.close()
        if row is None:
            raise IndexNotFoundError(f"no document {doc_id!r} in {self.path}")
        return str(row[0])


def _repair_on_open(index_dir: Path, problems: list[str]) -> None:
    """Rebuild damaged derived files (FAISS, BM25) and remove orphan files if no writer is running; warn.

    Never waits: a reader must not stall behind a writer, and a running writer publishes a fresh generation
    (and removes orphans) itself when it commits.
    """
    try:
        with store.writer_lock(index_dir, wait=0):
            if problems:
                generation = store.rebuild_derived(index_dir)
                warnings.warn(
                    f"citeline: {'; '.join(problems)}; rebuilt {store.faiss_path(index_dir, generation).name} and "
                    f"{store.bm25_path(index_dir, generation).name}/ from {store.DB_FILE} (nothing was re-embedded)",
                    IndexRepairedWarning,
                    stacklevel=3,
                )
            else:
                connection = store.connect(index_dir, read_only=True)
                try:
                    generation = int(store.read_meta(connection)["generation"])
                finally:
                    connection.close()
                store.remove_other_generations(index_dir, generation)
    except (IndexLockedError, OSError) as exc:  # a running writer, or a read-only index directory
        if problems:
            warnings.warn(
                f"citeline: {'; '.join(problems)}; could not rebuild it now ({exc}); run "
                f"`citeline rebuild --index {index_dir}`",
                IndexRepairedWarning,
                stacklevel=3,
            )


def _read_runs(connection: Any, limit: int) -> list[pipeline.RunSummary]:
    rows = connection.execute(
        "SELECT run_id, started_at, finished_at, status, roots, generation, added, updated, unchanged, removed, "
        "failed, chunks_embedded, chunks_reused, errors FROM runs ORDER BY started_at DESC, run_id DESC LIMIT ?",
        [limit],
    ).fetchall()
    return [
        pipeline.RunSummary(
            run_id=r[0],
            started_at=r[1].isoformat(),
            finished_at=r[2].isoformat() if r[2] else None,
            status=r[3],
            roots=json.loads(r[4]),
            generation=r[5],
            added=r[6],
            updated=r[7],
            unchanged=r[8],
            removed=r[9],
            failed=r[10],
            chunks_embedded=r[11],
            chunks_reused=r[12],
            errors=json.loads(r[13]) if r[13] else [],
        )
        for r in rows
    ]
