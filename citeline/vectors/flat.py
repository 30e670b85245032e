"""``flat``: exact inner-product search over every vector (FAISS ``IndexIDMap2(IndexFlatIP)``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from citeline.errors import IndexCorruptError
from citeline.util.arrays import positions_of, positions_of_all, top_k
from citeline.vectors.base import vector_index

#: Below this many vectors a query is scanned on one thread: splitting a single query's scan of a small flat
#: index over OpenMP threads costs more than it saves (docs/performance.md#choices-measured-in-the-code).
SINGLE_THREAD_MAX_VECTORS = 200_000

#: Below this fraction of the index, a filtered search scores the allowed rows with numpy instead of asking FAISS
#: to scan everything through an IDSelectorBatch. Both are exact. The selector costs a full scan whatever the
#: filter, numpy costs in proportion to the allowed rows; they cross near a tenth
#: (docs/decisions/settings-from-experiments.md; figures: docs/performance.md#choices-measured-in-the-code).
NUMPY_FILTER_FRACTION = 0.1
#: From this fraction of the index up, a filtered search first asks FAISS for the unfiltered best k / fraction
#: (twice over) and keeps the allowed ones: when k of them are there they are the exact filtered top k (every
#: allowed vector scoring higher would be among them), at an unfiltered scan's cost; else the selector's scan runs.
#: A token's scope usually allows most of an index, and the selector's per-vector check is what a scope cost.
OVERFETCH_FILTER_FRACTION = 0.5


@contextlib.contextmanager
def faiss_threads(ntotal: int) -> Iterator[None]:
    """Scan on one OpenMP thread when the index is small (see :data:`SINGLE_THREAD_MAX_VECTORS`)."""
    if ntotal > SINGLE_THREAD_MAX_VECTORS:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _within(ids: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Whether each of ``ids`` is in ``allowed`` (sorted ascending, as filters' ids are; else sorted here)."""
    ordered = allowed if len(allowed) < 2 or bool(np.all(allowed[1:] > allowed[:-1])) else np.sort(allowed)
    at = np.minimum(np.searchsorted(ordered, ids), len(ordered) - 1)
    return ordered[at] == ids


@vector_index("flat")
class FlatIndex:
    """Exact search; the stored vectors are the ones given, bit for bit. Ids are kept in ascending order."""

    kind = "flat"
    suffix = "faiss"  # vectors.<generation>.faiss, the name citeline 0.1.0 wrote

    @property
    def stored_kind(self) -> str:
        """``flat``: the vectors are stored in this kind."""
        return self.kind

    def __init__(self, index: Any):
        self._index = index
        self._id_map = faiss.vector_to_array(index.id_map).astype(np.int64)
        # Files this class writes hold ids in increasing order; sorting is only a fallback for other writers.
        if np.all(self._id_map[1:] > self._id_map[:-1]):
            self._order = np.arange(len(self._id_map))
        else:
            self._order = np.argsort(self._id_map, kind="stable")
        self._sorted_ids = self._id_map[self._order]
        #: the last read-only ``allowed`` array and its FAISS selector: a filter's ids, kept by the rows
        #: (``store.passages``), come back as the same array on each search of that filter (a token's scope), and
        #: building the selector's hash set costs about as much as the search
        self._selector: tuple[np.ndarray, Any] | None = None

    @property
    def dimension(self) -> int:
        """Vector length."""
        return int(self._index.d)

    @classmethod
    def build(cls, ids: np.ndarray, vectors: np.ndarray, dimension: int) -> FlatIndex:
        """An exact index over ``vectors``, stored in ascending id order."""
        ids = np.asarray(ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        index = faiss.IndexIDMap2(faiss.IndexFlatIP(dimension))
        if len(ids):
            index.add_with_ids(np.ascontiguousarray(np.asarray(vectors, dtype=np.float32)[order]), ids[order])
        return cls(index)

    @classmethod
    def load(cls, path: Path) -> FlatIndex:
        """Read a FAISS file (memory-mapped: the OS pages it in as searches touch it)."""
        try:
            index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError as exc:
            raise IndexCorruptError(f"{path} cannot be read ({str(exc).splitlines()[0]})") from exc
        if not hasattr(index, "id_map") or not isinstance(faiss.downcast_index(index.index), faiss.IndexFlat):  # type: ignore[attr-defined]
            raise IndexCorruptError(f"{path} is not a flat FAISS index with chunk ids")
        return cls(index)

    def save(self, path: Path) -> None:
        """Write the FAISS file."""
        faiss.write_index(self._index, str(path))

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def ids(self) -> np.ndarray:
        """Every id held, ascending."""
        return self._sorted_ids

    def _storage(self) -> np.ndarray:
        inner: Any = faiss.downcast_index(self._index.index)
        return faiss.rev_swig_ptr(inner.get_xb(), len(self) * self.dimension).reshape(len(self), self.dimension)

    def _rows(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        found = positions_of(self._sorted_ids, ids)
        return self._order[found], self._sorted_ids[found]

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Exact top k by inner product (see the module constants for how a filtered search is run)."""
        if len(self) == 0 or k <= 0 or (allowed is not None and len(allowed) == 0):
            return []
        vector = np.ascontiguousarray(np.asarray(query, dtype=np.float32).reshape(1, -1))
        if allowed is not None and len(allowed) <= NUMPY_FILTER_FRACTION * len(self):
            rows, ids = self._rows(allowed)
            return top_k(self._storage()[rows] @ vector[0], ids, k)
        if allowed is None:
            k = min(k, len(self))
            with faiss_threads(len(self)):
                scores, ids = self._index.search(vector, k)
        else:
            k = min(k, len(allowed))
            if len(allowed) >= OVERFETCH_FILTER_FRACTION * len(self):
                deep = min(len(self), 2 * -(-k * len(self) // len(allowed)))
                with faiss_threads(len(self)):
                    scores, ids = self._index.search(vector, deep)
                kept = ids[0] != -1
                kept[kept] = _within(ids[0][kept], allowed)
                if int(kept.sum()) >= k or deep >= len(self):
                    return [(int(i), float(s)) for i, s in zip(ids[0][kept][:k], scores[0][kept][:k], strict=True)]
            # The selector must outlive the search: SearchParameters holds only a raw pointer to it.
            selector = self._selector_of(allowed)
            params = faiss.SearchParameters()
            params.sel = selector
            with faiss_threads(len(self)):
                scores, ids = self._index.search(vector, k, params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i != -1]

    def _selector_of(self, allowed: np.ndarray) -> Any:
        # A read-only array cannot change under the selector built from it: the last one's is reused.
        held = self._selector
        if held is not None and held[0] is allowed:
            return held[1]
        selector = faiss.IDSelectorBatch(np.ascontiguousarray(allowed, dtype=np.int64))
        if isinstance(allowed, np.ndarray) and not allowed.flags.writeable:
            self._selector = (allowed, selector)
        return selector

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored vectors of ``ids``, one row per id, in the order given."""
        wanted = np.asarray(ids, dtype=np.int64)
        if len(wanted) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        rows = self._order[positions_of_all(self._sorted_ids, wanted)]
        return np.array(self._storage()[rows], dtype=np.float32)

    def updated(self, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> FlatIndex:
        """A new flat index without ``remove_ids`` and with the added vectors (this one is left unchanged)."""
        keep = np.setdiff1d(self._sorted_ids, np.asarray(remove_ids, dtype=np.int64), assume_unique=True)
        ids = np.concatenate([keep, np.asarray(add_ids, dtype=np.int64)])
        if len(np.unique(ids)) != len(ids):
            raise ValueError("an added id is already in the index; remove it in the same update")
        added = np.asarray(add_vectors, dtype=np.float32).reshape(-1, self.dimension)
        vectors = np.concatenate([self.vectors(keep), added])
        return FlatIndex.build(ids, vectors, self.dimension)

    def write_updated(self, path: Path, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> int:
        """Write what :meth:`updated` returns to ``path`` (built in memory: flat files are a tenth of a large
        index's budget apart, see ``vectors.segments``); returns the number of vectors written."""
        updated = self.updated(add_ids, add_vectors, remove_ids)
        updated.save(path)
        return len(updated)
