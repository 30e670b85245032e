"""``auto``: the flat kind below :data:`IVF_MIN_VECTORS` vectors, the ivf kind from there on — re-decided at every
build and update, so an index created small switches to IVF in the generation that crosses the threshold (each
generation's file is written anew, so a generation may change kind; the file keeps one name, ``vectors.<g>.faiss``,
and its FAISS header says which kind it holds).

Why flat, then IVF (``bench/ann.py``; the figures: docs/scale.md#choices-measured-in-the-code, the full table in
that module's docstring):

- Flat is exact and costs nothing to build, but a search scans every vector, so its latency grows with the index.
  Its file is the raw vectors (1.5 KB each).
- IVF costs a k-means at build time and about the same disk; a search scans ``nprobe`` of ``4 sqrt(n)`` lists,
  an order of magnitude fewer vectors at 100k, at a recall near exact.
- HNSW searches fastest, but its build is the slowest of the three (and grows faster than linearly), it cannot
  remove vectors (tombstones, then a rebuild) and its graph adds ``2 M`` ids per vector; so ``auto`` does not pick
  it. Choose it with ``--vector-index hnsw`` for read-heavy indexes that rarely change.

Below :data:`IVF_MIN_VECTORS` (50k) a flat search stays well inside the hybrid query's budget, and it is exact: the
approximation buys little there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np

from citeline.vectors.base import VectorIndex, vector_index
from citeline.vectors.flat import FlatIndex

# citeline.vectors.ivf is imported where used: a search of a small index does not load the ivf modules.

#: From this many vectors on, ``auto`` builds an IVF index (see the module docstring).
IVF_MIN_VECTORS = 50_000
#: FAISS's four-byte tag of an ``IndexIVFFlat`` file.
_IVF_TAG = b"IwFl"


def kind_for(n: int) -> type[VectorIndex]:
    """The kind ``auto`` uses for ``n`` vectors."""
    if n < IVF_MIN_VECTORS:
        return cast("type[VectorIndex]", FlatIndex)
    from citeline.vectors.ivf import IVFIndex

    return cast("type[VectorIndex]", IVFIndex)


@vector_index("auto")
class AutoIndex:
    """The flat or the ivf kind, chosen by size whenever a new index is built (delegates everything else)."""

    kind = "auto"
    suffix = "faiss"  # a small auto index's file is byte for byte the flat kind's

    def __init__(self, inner: VectorIndex):
        self.inner = inner

    @property
    def stored_kind(self) -> str:
        """The kind it holds now (flat or ivf)."""
        return self.inner.stored_kind

    @property
    def dimension(self) -> int:
        """Vector length."""
        return self.inner.dimension

    @classmethod
    def build(cls, ids: np.ndarray, vectors: np.ndarray, dimension: int) -> AutoIndex:
        """An index of the kind :func:`kind_for` picks for ``len(ids)`` vectors."""
        return cls(kind_for(len(ids)).build(ids, vectors, dimension))

    @classmethod
    def load(cls, path: Path) -> AutoIndex:
        """Read the file as the kind its FAISS header names."""
        try:
            with path.open("rb") as handle:
                tag = handle.read(4)
        except OSError:
            tag = b""
        if tag != _IVF_TAG:
            return cls(cast(VectorIndex, FlatIndex.load(path)))
        from citeline.vectors.ivf import IVFIndex

        return cls(cast(VectorIndex, IVFIndex.load(path)))

    def save(self, path: Path) -> None:
        """Write the inner kind's file."""
        self.inner.save(path)

    def __len__(self) -> int:
        return len(self.inner)

    def ids(self) -> np.ndarray:
        """Every id held, ascending."""
        return self.inner.ids()

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The inner kind's search."""
        return self.inner.search(query, k, allowed)

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The exact stored vectors of ``ids``."""
        return self.inner.vectors(ids)

    def updated(self, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> AutoIndex:
        """The inner kind's update, or a build of the other kind when the new size crosses the threshold."""
        size = len(self) - len(np.intersect1d(self.ids(), remove_ids)) + len(add_ids)
        wanted = kind_for(size)
        if isinstance(self.inner, wanted):
            return AutoIndex(self.inner.updated(add_ids, add_vectors, remove_ids))
        keep = np.setdiff1d(self.ids(), np.asarray(remove_ids, dtype=np.int64), assume_unique=True)
        add_ids = np.asarray(add_ids, dtype=np.int64)
        if len(np.intersect1d(keep, add_ids)) or len(np.unique(add_ids)) != len(add_ids):
            raise ValueError("an added id is already in the index; remove it in the same update")
        vectors = np.concatenate([self.vectors(keep), np.asarray(add_vectors, np.float32).reshape(-1, self.dimension)])
        return AutoIndex(wanted.build(np.concatenate([keep, add_ids]), vectors, self.dimension))

    def write_updated(self, path: Path, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> int:
        """The inner kind's streamed update while the size keeps its kind; else :meth:`updated` written."""
        size = len(self) - len(np.intersect1d(self.ids(), remove_ids)) + len(add_ids)
        if isinstance(self.inner, kind_for(size)):
            return self.inner.write_updated(path, add_ids, add_vectors, remove_ids)
        updated = self.updated(add_ids, add_vectors, remove_ids)
        updated.save(path)
        return len(updated)
