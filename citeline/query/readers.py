"""The read interfaces a search runs on: :class:`SnapshotReader` (one generation's rows, vectors and BM25 index),
:class:`LexicalReader` (its BM25 index) and :class:`LexicalShard` (one shard's BM25 index, as a sharded index's
merge reads it); the vectors' is ``citeline.vectors.base.VectorReader``.

Implementations, structurally (no reader subclasses another's class):

- :class:`SnapshotReader`: one index's ``citeline.store.snapshot.ReadSnapshot``, a sharded index's
  ``citeline.sharding.search.ShardedSnapshot`` (its shards on threads, merged; ``DaskShardedSnapshot`` on Dask) and
  one shard read on a Dask worker, ``citeline.sharding.remote.RemoteShard``.
- :class:`LexicalReader`: ``citeline.lexical.segments.SegmentedIndex``, the 0.1.0 bm25s folder's adapter
  ``citeline.lexical.legacy.LegacyLexical``, ``citeline.sharding.search.MergedLexical`` and
  ``citeline.sharding.remote.RemoteLexical``.
- :class:`LexicalShard`: ``SegmentedIndex`` and ``RemoteLexical`` (what ``LexicalReader.as_shard`` returns).

A read that some reader cannot answer is still declared, with an explicit answer: ``statistics`` and
``term_frequencies`` return None, and ``as_shard`` None, for a 0.1.0 folder; callers handle None (mypy makes them),
and never probe a reader for a method (tests/unit/test_capability_probes.py). A new read is declared here once;
mypy then names every reader that must write it (``citeline.sharding.remote`` checks them against these
Protocols), and tests/index/test_protocol_conformance.py checks each implementation at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from citeline.lexical.scoring import Statistics
from citeline.vectors import VectorReader

__all__ = ["LexicalReader", "LexicalShard", "SnapshotReader", "Statistics"]


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

    def statistics(self, query: str) -> Statistics | None:
        """The corpus-wide numbers ``query`` is scored with (live documents, their length, each query term's
        document frequency); None when the index does not keep them (a 0.1.0 bm25s folder)."""
        ...

    def term_frequencies(self, query: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Each of ``ids``'s frequency of each analyzed query term (ids x terms, query order) and its length in
        terms, 0 for an id not held; None when the index does not keep them (a 0.1.0 bm25s folder)."""
        ...

    def as_shard(self) -> LexicalShard | None:
        """This index as one shard of a larger corpus, scored with corpus-wide statistics (what a sharded index
        merges); None when it cannot be one (a 0.1.0 bm25s folder, or a merge of shards itself)."""
        ...


@runtime_checkable
class LexicalShard(Protocol):
    """What a sharded index's merge (``citeline.sharding.search.MergedLexical``) reads of each shard's BM25 index:
    its share of the corpus-wide statistics, and scores under the sum of every shard's (``statistics`` None: the
    shard's own)."""

    @property
    def chunk_ids(self) -> np.ndarray:
        """The live chunk ids, ascending."""
        ...

    def __len__(self) -> int:
        """Live chunks."""
        ...

    def statistics(self, query: str) -> Statistics:
        """This shard's share of the corpus-wide statistics of ``query`` (shards add theirs up)."""
        ...

    def search(
        self, query: str, k: int, allowed: np.ndarray | None = None, statistics: Statistics | None = None
    ) -> list[tuple[int, float]]:
        """The shard's k best as ``(chunk_id, score)`` under ``statistics``, best first (ties by chunk id)."""
        ...

    def scores(self, query: str, statistics: Statistics | None = None) -> np.ndarray:
        """Every live chunk's score (``chunk_ids`` order) under ``statistics``."""
        ...

    def scores_of(self, query: str, ids: np.ndarray, statistics: Statistics | None = None) -> np.ndarray:
        """The scores of chunk ``ids`` under ``statistics`` (0 for an id not held)."""
        ...

    def term_frequencies(self, query: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`LexicalReader.term_frequencies`, which a shard always keeps."""
        ...

    def sharing_rare_terms(
        self, texts: Sequence[str], k: int, *, terms: int = 8, min_share: float = 0.5, allowed: np.ndarray | None = None
    ) -> list[list[int]]:
        """For each text, at most k chunk ids of this shard that repeat it."""
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
