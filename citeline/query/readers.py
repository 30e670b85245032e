"""The read interfaces a search runs on: :class:`SnapshotReader` (one generation's rows, vectors and BM25 index) and
:class:`LexicalReader` (its BM25 index).

Three readers implement them, structurally: one index's ``citeline.store.snapshot.ReadSnapshot``, a sharded index's
``citeline.sharding.search.ShardedSnapshot`` (its shards on threads, merged) and one shard read on a Dask worker,
``citeline.sharding.remote.RemoteShard``. A new read is declared here once; mypy then names every reader that
must write it (``citeline.sharding.remote`` checks the three against these Protocols), and the query plan reads
only what is declared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from citeline.vectors import VectorReader

__all__ = ["LexicalReader", "SnapshotReader"]


@runtime_checkable
class LexicalReader(Protocol):
    """What a search reads of a BM25 index (chunk ids are int64; ``allowed``: None for every chunk, or the sorted
    ids a search may return)."""

    @property
    def chunk_ids(self) -> np.ndarray:
        """The live chunk ids, ascending."""
        ...

    def __len__(self) -> int:
        """Live chunks."""
        ...

    def search(self, query: str, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best chunks by BM25 as ``(chunk_id, score)``, best first (ties by chunk id); only matches."""
        ...

    def ranked(
        self, query: str, k: int, allowed: np.ndarray | None = None
    ) -> tuple[list[tuple[int, float]], Callable[[np.ndarray], np.ndarray]]:
        """:meth:`search`'s k best and a function scoring any chunk ids (hybrid fusion's candidates)."""
        ...

    def scores_of(self, query: str, ids: np.ndarray) -> np.ndarray:
        """The BM25 scores of chunk ``ids`` (0 for an id not held)."""
        ...

    def sharing_rare_terms(
        self, texts: Sequence[str], k: int, *, terms: int = 8, min_share: float = 0.5, allowed: np.ndarray | None = None
    ) -> list[list[int]]:
        """For each text, at most k chunk ids that repeat it (collapse's lookup of copies)."""
        ...


@runtime_checkable
class SnapshotReader(Protocol):
    """A consistent view of one committed generation: everything a search reads (filters, rankings, document
    signals, passages) comes from one reader, so they all see the same chunks."""

    meta: dict[str, Any]  #: the generation's index meta (settings, model, ``document_vectors``...)
    generation: int  #: which generation it reads

    @property
    def vectors(self) -> VectorReader:
        """The generation's vector index."""
        ...

    @property
    def lexical(self) -> LexicalReader:
        """The generation's BM25 index."""
        ...

    def passage_rows(self, chunk_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Each held chunk's row joined with its document's (chunks without a document row are left out)."""
        ...

    def doc_ids(self, chunk_ids: Sequence[int]) -> list[str]:
        """The document id of each chunk id (all held), in order."""
        ...

    def chunk_documents(self, chunk_ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
        """``(doc_id, content_hash, ordinal)`` of each chunk id held (the document signals' grouping)."""
        ...

    def chunk_lengths(self, chunk_ids: Sequence[int]) -> dict[int, int]:
        """Each held chunk id's length in characters (the length-weighted document centroids)."""
        ...

    def document_vectors(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """Whole-document vectors stored on these chunk ids (an index created with ``document_vectors``)."""
        ...

    def document_count(self) -> int | None:
        """Documents the generation holds (None: unknown)."""
        ...

    def allowed_chunk_ids(self, filters: Any) -> np.ndarray | None:
        """The sorted chunk ids ``filters`` (a ``citeline.store.filters.Filters``) lets through; None: all."""
        ...

    def root_chunks(self, root: str) -> list[tuple[int, str]]:
        """``(chunk_id, source_id)`` of every chunk ingested from ``root``, by chunk id."""
        ...

    def is_current(self) -> bool:
        """False once a writer has committed since this view was taken."""
        ...

    def close(self) -> None:
        """Let go of what the view holds."""
        ...
