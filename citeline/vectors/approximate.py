"""What the approximate kinds (``ivf``, ``hnsw``) share: sorted ids, exact filtered scans, the k-results guarantee.

An approximate kind answers an unfiltered query from its FAISS structure (inverted lists, a graph) and reranks
nothing: both kinds keep the raw float32 vectors (``IndexIVFFlat`` lists, ``IndexHNSWFlat`` storage), so the
scores they return are exact inner products and :meth:`vectors` returns the stored vectors bit for bit.

A filtered query scores the allowed rows exactly when there are few of them (:data:`EXACT_FILTER_ROWS`), and
otherwise asks FAISS with an id selector (the filter applies *inside* the scan, before ranking). When the selector
search finds fewer than ``min(k, |allowed|)`` results (a filter that misses the probed lists or the visited part
of the graph), it is retried with :data:`RETRY_EFFORT` times the effort, then answered by an exact scan: k results
come back whenever k allowed ids exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import faiss
import numpy as np

from citeline.errors import IndexCorruptError
from citeline.util.arrays import positions_of, top_k
from citeline.vectors.flat import faiss_threads

#: A filtered search whose allowed set has at most this many rows scores them exactly with numpy. bench/ann.py at
#: 1M x 384 (one thread): gathering and scoring 20k allowed rows takes about as long as one IVF probe at the
#: default nprobe or one HNSW search, and is exact.
EXACT_FILTER_ROWS = 2_000
#: A filtered search that came back short is retried once with this many times the effort (nprobe, efSearch).
RETRY_EFFORT = 8


class ApproximateIndex:
    """Base of the approximate kinds; a subclass supplies ``_live_ids``, ``_search``, ``vectors``, ``updated``."""

    kind: ClassVar[str]
    suffix: ClassVar[str]
    #: Allowed sets up to this size are scored exactly (a kind lowers it when its ``vectors()`` is slower).
    exact_filter_rows: ClassVar[int] = EXACT_FILTER_ROWS

    @property
    def stored_kind(self) -> str:
        """The kind itself: its vectors are stored in it."""
        return self.kind

    def __init__(self, index: Any, sorted_ids: np.ndarray | None = None):
        self._index = index
        # A kind that stored its ids sorted with the file (ivf) passes them memory-mapped: nothing read at open.
        if sorted_ids is None:
            sorted_ids = np.sort(np.asarray(self._live_ids(), dtype=np.int64))
        self._sorted_ids = sorted_ids

    # ---------------------------------------------------------------- to provide

    def _live_ids(self) -> np.ndarray:
        raise NotImplementedError

    def _search(
        self, vector: np.ndarray, k: int, selector: Any, allowed: np.ndarray | None, effort: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """FAISS search of one query (``selector``, over the ``allowed`` ids, may be None) at ``effort`` times the
        default effort."""
        raise NotImplementedError

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # ---------------------------------------------------------------- shared

    @property
    def dimension(self) -> int:
        """Vector length."""
        return int(self._index.d)

    def __len__(self) -> int:
        return len(self._sorted_ids)

    def ids(self) -> np.ndarray:
        """Every id held, ascending."""
        return self._sorted_ids

    def save(self, path: Path) -> None:
        """Write the FAISS file."""
        faiss.write_index(self._index, str(path))

    def write_updated(self, path: Path, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> int:
        """Write what ``updated`` returns to ``path`` (built in memory; ``ivf`` streams it instead)."""
        updated = self.updated(add_ids, add_vectors, remove_ids)  # type: ignore[attr-defined]
        updated.save(path)
        return len(updated)

    @staticmethod
    def read(path: Path) -> Any:
        """Read a FAISS file memory-mapped (inverted lists and flat storage are paged in as searches touch them)."""
        try:
            return faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError as exc:
            raise IndexCorruptError(f"{path} cannot be read ({str(exc).splitlines()[0]})") from exc

    def _check_new_ids(self, keep: np.ndarray, add_ids: np.ndarray) -> None:
        if len(np.intersect1d(keep, add_ids)) or len(np.unique(add_ids)) != len(add_ids):
            raise ValueError("an added id is already in the index; remove it in the same update")

    def _exact(self, vector: np.ndarray, ids: np.ndarray, k: int) -> list[tuple[int, float]]:
        # einsum, not `@`: OpenBLAS's threaded sgemv spins on busy cores, many times einsum's cost
        # (docs/performance.md#choices-measured-in-the-code).
        return top_k(np.einsum("ij,j->i", self.vectors(ids), vector), ids, k)

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k nearest by inner product, approximately (exact scores; see the module docstring for filters)."""
        if len(self) == 0 or k <= 0 or (allowed is not None and len(allowed) == 0):
            return []
        vector = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        selector = None
        if allowed is not None:
            allowed = self._sorted_ids[positions_of(self._sorted_ids, allowed)]
            if len(allowed) <= self.exact_filter_rows:
                return self._exact(vector[0], allowed, k)
            # The selector must outlive the search: SearchParameters holds only a raw pointer to it.
            selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
        want = min(k, len(self) if allowed is None else len(allowed))
        for effort in (1, RETRY_EFFORT):
            with faiss_threads(0):  # one query: one thread (see flat.SINGLE_THREAD_MAX_VECTORS)
                scores, ids = self._search(vector, want, selector, allowed, effort)
            found = ids[0] >= 0
            if found.sum() >= want:
                return top_k(scores[0][found], ids[0][found], want)  # orders ties by id, like the flat kind
        return self._exact(vector[0], self._sorted_ids if allowed is None else allowed, want)
