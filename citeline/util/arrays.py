"""Small array helpers shared by the vector, lexical and row layers (no citeline imports)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Literal

import numpy as np

# numpy reads a .npy header with ``ast.literal_eval``, and CPython 3.11 keeps the AST constructor's recursion depth
# in one per-interpreter counter: two threads building ASTs at once can fail one of them with
# ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905). A sharded run's shards load their
# segments in threads, and the default tier hit it once. Every .npy read goes through :func:`load_npy`, one at a
# time; a memory-mapped load only reads the header, and the others read arrays of ids.
_NPY_LOCK = threading.Lock()


def load_npy(path: str | os.PathLike[str], mmap_mode: Literal["r"] | None = None) -> np.ndarray:
    """``np.load(path, mmap_mode=..., allow_pickle=False)``, safe from several threads at once (see above)."""
    with _NPY_LOCK:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)


def positions_of(sorted_ids: np.ndarray, wanted: Sequence[int] | np.ndarray) -> np.ndarray:
    """Positions in ``sorted_ids`` (ascending) of the values of ``wanted`` present there, in ``wanted``'s order."""
    values = np.asarray(wanted, dtype=np.int64)
    where = np.searchsorted(sorted_ids, values)
    inside = where < len(sorted_ids)
    where, values = where[inside], values[inside]
    return where[sorted_ids[where] == values]


def unique(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-d array: ``np.unique`` without its masked-array check, which imports
    ``numpy.ma`` on first use, at a cold search's expense (docs/performance.md#choices-measured-in-the-code)."""
    ordered = np.sort(np.asarray(values).ravel())
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def top_k(scores: np.ndarray, ids: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best ``(id, score)`` pairs, best first; ties broken by id (as FAISS orders them)."""
    k = min(k, len(scores))
    if k <= 0:
        return []
    if k < len(scores):
        # every score tied with the k-th best stays a candidate, so the tie goes by id (argpartition alone keeps an
        # arbitrary one of them, and a merge of shards' top k could then keep another chunk than one index)
        top = np.flatnonzero(scores >= scores[np.argpartition(-scores, k - 1)[k - 1]])
    else:
        top = np.arange(len(scores))
    top = top[np.lexsort((ids[top], -scores[top]))][:k]
    return [(int(ids[i]), float(scores[i])) for i in top]


def positions_of_all(sorted_ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """:func:`positions_of`, for ids that must all be present: a vector index's ``vectors(ids)`` raises
    ``KeyError`` naming the first few absent ids."""
    found = positions_of(sorted_ids, wanted)
    if len(found) != len(wanted):
        missing = sorted(set(np.asarray(wanted).tolist()) - set(sorted_ids[found].tolist()))
        raise KeyError(f"ids not in the vector index: {missing[:5]}")
    return found
