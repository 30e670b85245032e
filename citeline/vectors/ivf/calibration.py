"""How many inverted lists an ``ivf`` search probes: the fixed rule (:func:`nprobe_for`) and the calibration that
raises it where an index's own vectors need more (:func:`calibrated_nprobe`, measured when lists are trained).
(``citeline.vectors.ivf`` re-exports these names.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import faiss
import numpy as np

from citeline.vectors.ivf import files

__all__ = [
    "CALIBRATION_QUERIES",
    "CALIBRATION_RECALL",
    "NPROBE_FRACTION",
    "NPROBE_MIN",
    "QUERY_NPROBE_FACTOR",
    "calibrated",
    "calibrated_nprobe",
    "calibration_sample",
    "exact_neighbours",
    "nprobe_for",
]

#: Fraction of the lists probed, and the floor (see :func:`nprobe_for`).
NPROBE_FRACTION = 1 / 40
NPROBE_MIN = 32


def nprobe_for(nlist: int) -> int:
    """Lists probed per query: a fixed fraction of the lists, at least :data:`NPROBE_MIN` (all of a small index)."""
    return min(nlist, max(NPROBE_MIN, math.ceil(nlist * NPROBE_FRACTION)))


#: Stored vectors used as queries when an index is trained, and the recall@10 against exact search they must reach
#: (each query's own vector left out). How well inverted lists work depends on how clustered the vectors are, so
#: the nprobe is measured when the lists are trained, doubling from :func:`nprobe_for` until these queries reach the
#: target, and stored in the FAISS file (it keeps ``nprobe``). The margin above 0.95 is for real queries, which are
#: further from the stored vectors than stored vectors are from each other (docs/scale.md#choices-measured-in-the-code).
CALIBRATION_QUERIES = 64
CALIBRATION_RECALL = 0.97
#: The float scan probes this many times the measured nprobe, since stored vectors as queries overstate what real
#: queries find: 2 lifts recall@10 at 100k past the target (docs/scale.md#choices-measured-in-the-code). Large
#: files search their codes instead (``codes.NPROBE_FACTOR``); a filtered search starts from this nprobe too.
QUERY_NPROBE_FACTOR = 2


def calibrated_nprobe(index: Any, ids: np.ndarray, data: np.ndarray, k: int = 10) -> int:
    """The smallest nprobe (``nprobe_for`` doubled) at which :data:`CALIBRATION_QUERIES` stored vectors find
    :data:`CALIBRATION_RECALL` of their exact top ``k`` neighbours (themselves excluded)."""
    if int(index.nlist) <= nprobe_for(int(index.nlist)) or len(ids) <= k + 1:
        return nprobe_for(int(index.nlist))
    sample = calibration_sample(len(ids))
    queries = np.ascontiguousarray(data[sample])
    neighbours = exact_neighbours(queries, [(ids, data)], k + 1)
    order = np.argsort(ids)
    rows = order[np.searchsorted(ids, neighbours, sorter=order)]
    lists = files.assigned(index.quantizer, data[rows.reshape(-1)]).reshape(rows.shape)
    return calibrated(index.quantizer, int(index.nlist), queries, ids[sample], neighbours, lists)


def calibration_sample(n: int) -> np.ndarray:
    """Positions (ascending) of the stored vectors that calibrate nprobe among ``n``."""
    rng = np.random.default_rng(1234)
    return np.sort(rng.choice(n, min(CALIBRATION_QUERIES, n), replace=False))


def calibrated(
    quantizer: Any, nlist: int, queries: np.ndarray, own: np.ndarray, neighbours: np.ndarray, lists: np.ndarray
) -> int:
    """The nprobe :func:`calibrated_nprobe` measures, from where the exact ``neighbours`` (ids, one row per query)
    are: their ``lists``. An IVF search scores its probed lists exactly, so it finds a neighbour of the exact top
    k + 1 exactly when the neighbour's list is among the nprobe nearest the query: recall is counted from the
    quantizer's ranking of the lists, without reading them (a search through a memory-mapped 1M-vector file at
    nprobe 500 pages in most of its 1.5 GB)."""
    start = nprobe_for(nlist)
    _, ranking = quantizer.search(np.ascontiguousarray(queries), nlist)
    rank = np.empty_like(ranking)
    np.put_along_axis(rank, ranking, np.arange(nlist)[None, :].repeat(len(queries), 0), axis=1)
    wanted = (neighbours >= 0) & (neighbours != own[:, None])
    needed = np.take_along_axis(rank, np.where(wanted, lists, 0), axis=1)[wanted]  # probes to reach each neighbour
    nprobe = start
    while nprobe < nlist:
        if np.count_nonzero(needed < nprobe) >= CALIBRATION_RECALL * len(needed):
            return nprobe
        nprobe = min(nlist, nprobe * 2)
    return nlist


def exact_neighbours(queries: np.ndarray, parts: Iterable[tuple[np.ndarray, np.ndarray]], k: int) -> np.ndarray:
    """The ids of each query's exact top ``k`` by inner product over ``(ids, vectors)`` parts read one at a time."""
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), 0), dtype=np.int64)
    for ids, data in parts:
        if not len(ids):
            continue
        scores, rows = faiss.knn(
            queries, np.ascontiguousarray(data), min(k, len(ids)), metric=faiss.METRIC_INNER_PRODUCT
        )
        best_scores = np.concatenate([best_scores, scores], axis=1)
        best_ids = np.concatenate([best_ids, np.where(rows >= 0, ids[np.maximum(rows, 0)], -1)], axis=1)
        top = np.argsort(-best_scores, axis=1, kind="stable")[:, :k]
        best_scores, best_ids = np.take_along_axis(best_scores, top, 1), np.take_along_axis(best_ids, top, 1)
    return best_ids
