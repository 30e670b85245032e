"""Small array helpers shared by the vector, lexical and row layers (no citeline imports)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def positions_of(sorted_ids: np.ndarray, wanted: Sequence[int] | np.ndarray) -> np.ndarray:
    """Positions in ``sorted_ids`` (ascending) of the values of ``wanted`` present there, in ``wanted``'s order."""
    values = np.asarray(wanted, dtype=np.int64)
    where = np.searchsorted(sorted_ids, values)
    inside = where < len(sorted_ids)
    where, values = where[inside], values[inside]
    return where[sorted_ids[where] == values]


def top_k(scores: np.ndarray, ids: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best ``(id, score)`` pairs, best first; ties broken by id (as FAISS orders them)."""
    k = min(k, len(scores))
    if k <= 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    top = top[np.lexsort((ids[top], -scores[top]))]
    return [(int(ids[i]), float(scores[i])) for i in top]
