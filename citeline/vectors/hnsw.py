"""``hnsw``: a navigable small-world graph over the raw vectors (FAISS ``IndexIDMap2(IndexHNSWFlat)``, inner product).

The graph's storage is a flat float32 array, so scores are exact inner products and ``vectors()`` is exact; the
file is read memory-mapped. ``M`` = :data:`NEIGHBORS`, ``efConstruction`` = :data:`EF_CONSTRUCTION`, ``efSearch``
= :data:`EF_SEARCH` (recall@10 >= 0.95 at 100k and 1M clustered vectors in ``bench/ann.py``).

FAISS cannot remove a node from an HNSW graph. ``updated()`` therefore works on a copy: added vectors are inserted
into the graph; removed ones become *tombstones* (their label in the id map is set to -1, and every search runs
with a selector that skips -1, so the graph still routes through them but never returns them). When tombstones
exceed :data:`MAX_TOMBSTONE_FRACTION` of the nodes, the graph is rebuilt from the live vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from citeline.errors import IndexCorruptError
from citeline.util.arrays import positions_of, positions_of_all
from citeline.vectors.approximate import ApproximateIndex
from citeline.vectors.base import vector_index

NEIGHBORS = 32
EF_CONSTRUCTION = 64
EF_SEARCH = 64
MAX_TOMBSTONE_FRACTION = 0.1
#: The label of a removed node.
TOMBSTONE = -1
_LIVE = faiss.IDSelectorRange(0, np.iinfo(np.int64).max)  # chunk ids are 63-bit non-negative


@vector_index("hnsw")
class HNSWIndex(ApproximateIndex):
    """Approximate search over an HNSW graph of exact vectors, with tombstones for removed ids."""

    kind = "hnsw"
    suffix = "hnsw.faiss"

    #: Overrides :data:`EF_SEARCH` when set (bench/ann.py sweeps it).
    ef_search: int | None = None

    def __init__(self, index: Any):
        self._labels = faiss.vector_to_array(index.id_map).astype(np.int64)
        live = np.flatnonzero(self._labels != TOMBSTONE)
        order = np.argsort(self._labels[live], kind="stable")
        self._rows_by_id = live[order]  # storage row of each live id, in ascending id order
        self._tombstones = len(self._labels) - len(live)
        super().__init__(index)

    def _live_ids(self) -> np.ndarray:
        return self._labels[self._rows_by_id]

    @classmethod
    def build(cls, ids: np.ndarray, vectors: np.ndarray, dimension: int) -> HNSWIndex:
        """Insert every vector into a new graph (in ascending id order, so a build is deterministic)."""
        ids = np.asarray(ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        graph = faiss.IndexHNSWFlat(dimension, NEIGHBORS, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = EF_CONSTRUCTION
        graph.hnsw.efSearch = EF_SEARCH
        index = faiss.IndexIDMap2(graph)
        if len(ids):
            data = np.asarray(vectors, dtype=np.float32).reshape(-1, dimension)
            index.add_with_ids(np.ascontiguousarray(data[order]), np.ascontiguousarray(ids[order]))
        return cls(index)

    @classmethod
    def load(cls, path: Path) -> HNSWIndex:
        """Read the file memory-mapped."""
        index = cls.read(path)
        if not hasattr(index, "id_map") or not isinstance(faiss.downcast_index(index.index), faiss.IndexHNSWFlat):
            raise IndexCorruptError(f"{path} is not an HNSW FAISS index with chunk ids")
        return cls(index)

    def _storage(self) -> np.ndarray:
        graph: Any = faiss.downcast_index(self._index.index)
        storage: Any = faiss.downcast_index(graph.storage)
        total = int(self._index.ntotal)
        return faiss.rev_swig_ptr(storage.get_xb(), total * self.dimension).reshape(total, self.dimension)

    def _search(
        self, vector: np.ndarray, k: int, selector: Any, allowed: np.ndarray | None, effort: int
    ) -> tuple[np.ndarray, np.ndarray]:
        params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]
        params.efSearch = max(k, (self.ef_search or EF_SEARCH) * effort)
        if selector is not None:
            params.sel = selector
        elif self._tombstones:
            params.sel = _LIVE
        return self._index.search(vector, k, params=params)

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored vectors of ``ids``, one row per id, in the order given."""
        wanted = np.asarray(ids, dtype=np.int64)
        if len(wanted) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        found = positions_of_all(self._sorted_ids, wanted)
        return np.array(self._storage()[self._rows_by_id[found]], dtype=np.float32)

    def updated(self, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> HNSWIndex:
        """A new index: removed ids tombstoned and added vectors inserted on a copy, or a rebuild past
        :data:`MAX_TOMBSTONE_FRACTION` tombstones."""
        add_ids = np.asarray(add_ids, dtype=np.int64)
        added = np.asarray(add_vectors, dtype=np.float32).reshape(-1, self.dimension)
        remove = np.intersect1d(self._sorted_ids, np.asarray(remove_ids, dtype=np.int64))
        keep = np.setdiff1d(self._sorted_ids, remove, assume_unique=True)
        self._check_new_ids(keep, add_ids)
        total = int(self._index.ntotal) + len(add_ids)
        if self._tombstones + len(remove) > MAX_TOMBSTONE_FRACTION * total:
            return HNSWIndex.build(
                np.concatenate([keep, add_ids]), np.concatenate([self.vectors(keep), added]), self.dimension
            )
        index: Any = faiss.clone_index(self._index)
        if len(remove):
            labels = self._labels.copy()
            labels[self._rows_by_id[positions_of(self._sorted_ids, remove)]] = TOMBSTONE
            faiss.copy_array_to_vector(labels, index.id_map)
            index.construct_rev_map()
        if len(add_ids):
            order = np.argsort(add_ids, kind="stable")
            index.add_with_ids(np.ascontiguousarray(added[order]), np.ascontiguousarray(add_ids[order]))
        return HNSWIndex(index)
