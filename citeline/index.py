"""``Index``: the one front class. It holds an index directory's settings and its model, and delegates: writing
to :mod:`citeline.pipeline`, the directory to :mod:`citeline.store`, reading to :mod:`citeline.search`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from citeline import pipeline
from citeline import search as plan
from citeline.chunking import CHUNKER_VERSION, EMBED_TEXT, Chunker, check_requested, check_settings
from citeline.collapse import DEFAULT_COLLAPSE_THRESHOLD
from citeline.embedding import DEFAULT_MODEL, Embedder, SentenceTransformerEmbedder, check_embedder, prepare_queries
from citeline.errors import IndexMismatchError, IndexNotFoundError
from citeline.filters import Filters
from citeline.results import SearchResult
from citeline.sources import DEFAULT_MAX_FILE_BYTES
from citeline.store import catalog, generation, ledger
from citeline.store import documents as listing
from citeline.store.catalog import IndexStatus
from citeline.store.ledger import RunSummary
from citeline.store.locks import writer_lock
from citeline.store.snapshot import ReadSnapshot
from citeline.store.verify import VerifyReport, verify
from citeline.vectors import NEW_INDEX_KIND, kind_of

DEFAULT_INDEX_DIR = "index"
DEFAULT_OVERLAP_TOKENS = 32


class Index:
    """A citeline index directory: build it with :meth:`ingest`, query it with :meth:`search`.
    >>> index = Index.create("index")          # or Index.open("index") for an existing one
    >>> index.ingest(["seeds"])
    >>> index.search("why did soldiers defect", k=5)
    """

    def __init__(self, path: Path, meta: dict[str, Any], embedder: Embedder | None = None):
        self.path = path  # (use Index.open or Index.create: this constructor trusts that meta was validated)
        self.meta = meta
        self._embedder = embedder
        self._snapshot: ReadSnapshot | None = None

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
    ) -> Index:
        """Create an index at ``path``, or open it if it exists and was built with the same settings.

        Settings left as None take the existing index's values, or for a new index the defaults: the bundled
        all-MiniLM-L6-v2 on torch, chunks of the model's 254 tokens with 32 of overlap, and the ``auto`` vector
        index (see ``citeline.vectors``). ``embedder`` replaces the model (tests use a fast one)."""
        index_dir, kind = Path(path), kind_of(vector_index or NEW_INDEX_KIND).kind  # an unknown kind fails here
        check_requested(max_tokens, overlap_tokens)
        if not catalog.db_path(index_dir).exists():
            embedder = embedder or SentenceTransformerEmbedder(model or DEFAULT_MODEL, backend=backend or "torch")
            overlap_tokens = DEFAULT_OVERLAP_TOKENS if overlap_tokens is None else overlap_tokens
            max_tokens = embedder.max_seq_length - 2 if max_tokens is None else max_tokens
            check_settings(max_tokens, overlap_tokens, embedder.max_seq_length)  # before anything is written
            meta = catalog.new_meta(embedder, max_tokens, overlap_tokens, kind, CHUNKER_VERSION, EMBED_TEXT)
            if generation.create(index_dir, meta):
                return cls(index_dir, meta, embedder)
            # another process created it meanwhile (checked under the writer lock): open theirs, checked below
        index = cls.open(index_dir, model=model, backend=backend, embedder=embedder)
        if vector_index and kind != generation.vector_kind(index.meta).kind:
            have_kind = generation.vector_kind(index.meta).kind
            raise IndexMismatchError(
                f"{index_dir} has a {have_kind} vector index, not {kind}; leave out --vector-index"
            )
        have = {"max_tokens": index.meta["max_tokens"], "overlap_tokens": index.meta["overlap_tokens"]}
        wanted = {
            "max_tokens": have["max_tokens"] if max_tokens is None else max_tokens,
            "overlap_tokens": have["overlap_tokens"] if overlap_tokens is None else overlap_tokens,
        }
        if wanted != have:
            raise IndexMismatchError(
                f"{index_dir} was built with chunking {have}, not {wanted}; use those settings, "
                "or a new --index directory"
            )
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
    ) -> Index:
        """Open an existing index. Refuses one built with another schema version, model or backend.

        A vector file or BM25 folder that does not match DuckDB (missing, or another size, checksum or BM25
        settings than recorded at commit) is rebuilt from the vectors and texts in DuckDB, with an
        :class:`IndexRepairedWarning`, and files of dead generations are removed; both only if no writer is
        running, and only when ``repair`` is true.
        """
        index_dir = Path(path)
        meta, problems, orphans = generation.inspect(index_dir)
        if meta.get("schema_version") != catalog.SCHEMA_VERSION:
            raise IndexMismatchError(
                f"{index_dir} has schema version {meta.get('schema_version')}, this citeline reads version "
                f"{catalog.SCHEMA_VERSION}; rebuild it with `citeline ingest PATH --index NEW_DIR`"
            )
        check_embedder(index_dir, meta, model=model, backend=backend, embedder=embedder)
        if repair and (problems or orphans):
            generation.repair(index_dir, problems)
            if problems:
                meta = generation.read_meta(index_dir)
        return cls(index_dir, meta, embedder)

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
        allow_removals: bool = False,
        removal_threshold: float = pipeline.DEFAULT_REMOVAL_THRESHOLD,
        dry_run: bool = False,
    ) -> RunSummary:
        """Bring the index up to date with the files under ``paths`` and return the run's ledger row.

        New and changed documents are chunked and embedded, unchanged ones skipped, vanished ones removed
        (only under the given paths). Files that cannot be parsed are reported in the ledger and the rest is
        committed. ``wait`` bounds how long to wait for another writer (default: as long as it takes). A root
        that comes back empty, or would lose more than ``removal_threshold`` of its documents, raises
        :class:`RemovalRefusedError` unless ``allow_removals``; ``dry_run`` returns the plan and writes nothing.
        """
        options = pipeline.Options(
            max_file_bytes=max_file_bytes,
            wait=wait,
            progress=progress,
            allow_removals=allow_removals,
            removal_threshold=removal_threshold,
            dry_run=dry_run,
        )
        run = pipeline.run(self, paths, options)
        self.meta["generation"] = run.generation
        if not dry_run:
            self.prepare_queries()
        return run

    def prepare_queries(self) -> None:
        """Make later searches start fast: export the ONNX model the query path uses, once per model."""
        prepare_queries(self.embedder)

    def verify(self) -> VerifyReport:
        """Check the index's invariants (``citeline.store.verify``): artifacts present and matching their
        checksums, the catalog's ids, vectors and counts, chunks with documents, exact offsets."""
        return verify(self.path)

    def rebuild(self, *, wait: float | None = None) -> VerifyReport:
        """Rewrite the current generation's vector file and BM25 folder from DuckDB, then verify.

        Nothing is re-embedded. ``wait`` bounds how long to wait for a running writer (default: as long as it
        takes). Files of dead generations are removed too.
        """
        with writer_lock(self.path, wait=wait):
            self.meta["generation"] = generation.rebuild(self.path)
        return self.verify()

    # ---------------------------------------------------------------- reading

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: str = plan.DEFAULT_MODE,
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
        request = plan.Query.of(
            query, k, mode=mode, filters=filters, collapse=collapse, collapse_threshold=collapse_threshold
        )
        return plan.search(self.snapshot(), request, self.encode_query, self.meta["model"])

    def rank(
        self,
        query: str,
        k: int,
        *,
        mode: str = plan.DEFAULT_MODE,
        allowed: np.ndarray | None = None,
        fusion: plan.Fusion = plan.DEFAULT_FUSION,
    ) -> list[tuple[int, float]]:
        """The ranking behind :meth:`search`: ``(chunk_id, score)`` pairs, best first, without provenance;
        ``allowed`` chunk ids restrict the candidates, ``fusion`` overrides the hybrid settings (for tuning)."""
        if allowed is not None:  # sorted and unique, as the rankings expect
            allowed = np.unique(np.asarray(allowed, dtype=np.int64))
        mode = plan.validate_mode(mode)
        vector = None if mode == "lexical" else self.encode_query(query)
        return plan.rank(self.snapshot(), query, vector, k, mode, allowed, fusion)

    def snapshot(self) -> ReadSnapshot:
        """The view searches run on, reloaded after every commit (see ``citeline.store.snapshot``)."""
        if self._snapshot is None or not self._snapshot.is_current():
            if self._snapshot is not None:
                self._snapshot.close()
            self._snapshot = ReadSnapshot(self.path)
        return self._snapshot

    def status(self) -> IndexStatus:
        """Counts, model, generation and the last run."""
        return catalog.status(self.path)

    def runs(self, limit: int = 20) -> list[RunSummary]:
        """The run ledger, newest first."""
        with contextlib.closing(catalog.connect(self.path, read_only=True)) as connection:
            return ledger.read_runs(connection, limit)

    def documents(
        self, filters: Filters | Mapping[str, Any] | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The documents ``filters`` selects (the filters of :meth:`search`), by source and path, at most ``limit``:
        doc id, source path and id, title, format, chunks, pages, size, content hash, run, ingested_at, metadata."""
        with contextlib.closing(catalog.connect(self.path, read_only=True)) as connection:
            return listing.documents(connection, Filters.from_value(filters), limit)

    def document(self, doc_id: str) -> dict[str, Any]:
        """One document: its :meth:`documents` record, its ``text`` (what passage offsets index into) and its
        chunks' ``spans`` (chunk_id, ordinal, char_start, char_end, page)."""
        with contextlib.closing(catalog.connect(self.path, read_only=True)) as connection:
            record = listing.document(connection, doc_id)
        if record is None:
            raise IndexNotFoundError(
                f"no document {doc_id!r} in {self.path}; list the documents with `citeline documents`"
            )
        return record

    def document_text(self, doc_id: str) -> str:
        """The stored text of a document (what passage offsets index into)."""
        return str(self.document(doc_id)["text"])
