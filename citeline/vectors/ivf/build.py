"""Building an ``ivf`` file from vectors that are read a span at a time (``citeline rebuild`` at any size).

``IVFIndex.build`` takes every vector in memory and FAISS adds them to in-memory lists before ``save`` streams them
out: at 1M x 384 that is the 1.5 GB array, its float32 copy and 1.5 GB of lists. :func:`write_built` writes the
same file (byte for byte: ``tests/index/test_rebuild_streaming.py``) from a function of rows in ascending id order: it
trains on the same sample (the rows ``IVFIndex.build`` would pick, in the same order), assigns each span of rows to
its list, writes the lists with ``files.write`` (each span read again when written), and measures nprobe on
the written lists as ``calibrated_nprobe`` does, the exact neighbours found span by span. Memory holds the training
sample (``nlist * TRAIN_PER_LIST`` rows: 240 MB at 1M vectors of 384 dimensions), the ids and lists (16 bytes a
vector) and one span.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from citeline.vectors.ivf import files
from citeline.vectors.ivf.calibration import calibrated, calibration_sample, exact_neighbours, nprobe_for
from citeline.vectors.ivf.index import _NO_MAP, TRAIN_PER_LIST, IVFIndex, _trained, nlist_for

#: Rows assigned and written per block (64k rows of 384 floats: 100 MB, read twice).
SPAN_ROWS = 65_536
#: Neighbours the nprobe calibration looks for (its top 10 and the query itself).
_NEIGHBOURS = 11


def write_built(
    path: Path, ids: np.ndarray, rows: Callable[[np.ndarray], np.ndarray], dimension: int, span_rows: int = SPAN_ROWS
) -> int:
    """Write at ``path`` the file ``IVFIndex.build(ids, vectors, dimension).save(path)`` writes, where ``ids`` are
    ascending and ``rows(positions)`` returns the float32 vectors of those positions of ``ids`` (ascending
    positions). Returns the number of vectors written."""
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    count = len(ids)
    if np.any(ids[1:] <= ids[:-1]):
        raise ValueError("write_built takes unique ids in ascending order")
    nlist = nlist_for(count)
    sample = np.sort(np.random.default_rng(1234).choice(count, min(count, nlist * TRAIN_PER_LIST), replace=False))
    empty = _trained(rows(sample) if len(sample) else np.zeros((0, dimension), np.float32), nlist, dimension)
    empty.set_direct_map_type(_NO_MAP)  # the file holds the id table instead (no vectors yet: nothing to map)
    blocks = []
    for start in range(0, count, span_rows):
        positions = np.arange(start, min(count, start + span_rows))
        lists = files.assigned(empty.quantizer, rows(positions))
        blocks.append(files.Block(ids[positions], lists, _span_of(rows, positions)))
    written = IVFIndex._written(path, empty, blocks)
    if count:
        files.set_nprobe(path, nlist, _nprobe(empty, ids, rows, blocks, nlist))
    return written


def _span_of(rows: Callable[[np.ndarray], np.ndarray], positions: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: rows(positions)


def _nprobe(empty: object, ids: np.ndarray, rows: Callable[[np.ndarray], np.ndarray], blocks: list, nlist: int) -> int:
    """``calibrated_nprobe`` of the written lists: the same queries, their exact neighbours found block by block."""
    if nlist <= nprobe_for(nlist) or len(ids) <= _NEIGHBOURS:
        return nprobe_for(nlist)
    sample = calibration_sample(len(ids))
    queries = np.ascontiguousarray(rows(sample))
    neighbours = exact_neighbours(queries, ((block.ids, block.read()) for block in blocks), _NEIGHBOURS)
    lists = np.concatenate([block.lists for block in blocks])  # blocks cover ids in order: lists[i] is ids[i]'s
    where = lists[np.searchsorted(ids, np.maximum(neighbours, 0))]
    return calibrated(empty.quantizer, nlist, queries, ids[sample], neighbours, where)  # type: ignore[attr-defined]
