"""``ivf``: inverted lists over the raw vectors (FAISS ``IndexIVFFlat``, inner product), probed ``nprobe`` lists deep.

The lists hold the float32 vectors themselves, so scores are exact inner products of the candidates, ``vectors()``
is exact (a hash-table direct map from chunk id to list and offset), and one FAISS file is the whole index, read
memory-mapped (``IO_FLAG_MMAP`` maps the lists: opening a 1M-vector file costs milliseconds and no resident
memory). At 1M x 384 the raw lists are 1.5 GB on disk, and each search reads a tenth of them, memory-bound; so a
file of at least ``codes.MIN_VECTORS`` also carries 4-bit fast-scan PQ codes of its lists
(``citeline.vectors.ivf.codes``: 96 bytes a vector), which an unfiltered search scans deeper and re-ranks exactly
from the raw vectors, for less CPU at the same recall (figures: docs/scale.md#choices-measured-in-the-code).

The file ends with an *id table* after FAISS's own bytes (FAISS reads what it wrote and ignores the rest): every
id ascending, the row of its vector in the mapped file and its list, written when the file is written (a build or
a compaction), so that a reader maps it instead of computing it. A reader without it walked every list, sorted
every id and read FAISS's hash-table direct map (which the file no longer holds: ``updated`` rebuilds it in memory),
seconds at 1M vectors (docs/scale.md#choices-measured-in-the-code); with it, opening reads 32 bytes. Files written
before the table are read as before.

Sizes (measured with ``bench/ann.py``, see its docstring for the table):

- ``nlist = 4 * sqrt(n)`` lists (at least one list per 39 training vectors, FAISS's minimum), k-means trained on
  at most :data:`TRAIN_PER_LIST` vectors a list for :data:`TRAIN_ITERATIONS` iterations.
- ``nprobe``: :func:`nprobe_for` (recall@10 against exact >= 0.95 at 100k and 1M clustered vectors), raised
  where the index's own vectors need more (:func:`calibrated_nprobe`, measured at training time).

``updated()`` copies the inverted lists (a memory copy, no k-means, no re-assignment of kept vectors), removes and
adds on the copy; it retrains from scratch only when the size has drifted so far that ``4 * sqrt(n)`` is more
than twice or less than half the trained ``nlist``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from citeline.errors import IndexCorruptError
from citeline.util.arrays import positions_of, positions_of_all
from citeline.vectors.approximate import ApproximateIndex
from citeline.vectors.base import vector_index
from citeline.vectors.ivf import codes, files
from citeline.vectors.ivf.calibration import (  # the nprobe rule and calibration, re-exported here
    CALIBRATION_QUERIES as CALIBRATION_QUERIES,
)
from citeline.vectors.ivf.calibration import (
    CALIBRATION_RECALL as CALIBRATION_RECALL,
)
from citeline.vectors.ivf.calibration import (
    NPROBE_FRACTION as NPROBE_FRACTION,
)
from citeline.vectors.ivf.calibration import (
    NPROBE_MIN as NPROBE_MIN,
)
from citeline.vectors.ivf.calibration import (
    QUERY_NPROBE_FACTOR,
    calibrated,
    calibrated_nprobe,
    calibration_sample,
    exact_neighbours,
    nprobe_for,
)
from citeline.vectors.ivf.table import (  # the id table (moved out; the tests and callers use these names here)
    _FOOTER as _FOOTER,
)
from citeline.vectors.ivf.table import (
    _append_table as _append_table,
)
from citeline.vectors.ivf.table import (
    _float_rows,
    _list_positions,
    _mapped_region,
    _read_table,
    _vector_bytes,
    _write_table,
    table_offset,
)

#: FAISS's stubs lack these.
_HASHTABLE: Any = faiss.DirectMap.Hashtable  # type: ignore[attr-defined]
_NO_MAP: Any = faiss.DirectMap.NoMap  # type: ignore[attr-defined]
#: Lists per square root of the size.
LISTS_PER_SQRT = 4
#: k-means sees this many vectors per list (FAISS's default is up to 256; 40 keeps training of 1M vectors under a
#: minute on 2 cores, just above FAISS's minimum of 39 a list below which it warns).
TRAIN_PER_LIST = 40
TRAIN_ITERATIONS = 10
#: FAISS warns below 39 training vectors per list.
MIN_PER_LIST = TRAIN_PER_LIST
#: A filtered search probes lists until it has scored this many times as many allowed vectors as an unfiltered
#: search scores vectors: 1x fell short of the recall target on bench/ann.py's topics-10% filter (figures:
#: docs/scale.md#choices-measured-in-the-code, and the docstring of bench/ann.py for 2x).
FILTERED_BUDGET = 2


def nlist_for(n: int) -> int:
    """Number of inverted lists for ``n`` vectors."""
    return max(1, min(round(LISTS_PER_SQRT * math.sqrt(n)), n // MIN_PER_LIST))


@vector_index("ivf")
class IVFIndex(ApproximateIndex):
    """Approximate search over inverted lists of exact vectors; ids are the chunk ids themselves."""

    kind = "ivf"
    suffix = "ivf.faiss"

    #: Overrides :func:`nprobe_for` when set (bench/ann.py sweeps it).
    nprobe: int | None = None
    #: The file the lists are memory-mapped from (None for an index built in memory).
    _path: Path | None = None
    #: The file's fast-scan codes (``codes``; None for a small file, an older one, or lists in memory), and
    #: whether unfiltered searches use them (bench/ann.py compares both on one file).
    _codes: codes.Codes | None = None
    use_codes = True

    def __init__(self, index: Any, table: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None = None):
        #: Where each id's vector is, in ascending id order (vectors(), filtered nprobe): its (list, offset in the
        #: list), and for memory-mapped lists a float32 view of the file with each id's row in it.
        self._where: tuple[np.ndarray, np.ndarray | None] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self._rows: tuple[np.ndarray, np.ndarray] | None = None
        if table is None:
            super().__init__(index)
            return
        ids, starts, numbers, residue = table
        self._where = (numbers, None)
        region = _mapped_region(faiss.extract_index_ivf(index).invlists)
        if region is None:
            raise IndexCorruptError("an IVF file's id table needs its lists memory-mapped")
        self._rows = (_float_rows(region, residue, int(index.d)), starts)
        super().__init__(index, ids)

    def _ivf(self) -> Any:
        return faiss.extract_index_ivf(self._index)

    def _live_ids(self) -> np.ndarray:
        # Walks every list (a file without the id table, or lists in memory): ids in ascending order.
        lists = self._ivf().invlists
        held, numbers, offsets = _list_positions(lists)
        self._where = (numbers, offsets)
        located = _vector_bytes(lists, numbers, offsets, int(self._ivf().d))
        if located is not None:
            region, starts, residue = located
            self._rows = (_float_rows(region, residue, int(self._ivf().d)), (starts - residue) // 4)
        return held

    @property
    def nlist(self) -> int:
        """Number of inverted lists."""
        return int(self._ivf().nlist)

    @classmethod
    def build(cls, ids: np.ndarray, vectors: np.ndarray, dimension: int) -> IVFIndex:
        """Train ``nlist_for(len(ids))`` lists on a sample of the vectors and add them all."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        data = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32).reshape(-1, dimension))
        index = _trained(data, nlist_for(len(ids)), dimension)
        if len(ids):
            index.add_with_ids(data, ids)
            index.nprobe = calibrated_nprobe(index, ids, data)
        return cls(index)

    @classmethod
    def load(cls, path: Path) -> IVFIndex:
        """Read the file memory-mapped, and its id table (a file written before the table: its lists walked)."""
        index = cls.read(path)
        if not isinstance(faiss.downcast_index(index), faiss.IndexIVFFlat):
            raise IndexCorruptError(f"{path} is not an IVF FAISS index")
        _no_prefetch(faiss.extract_index_ivf(index).invlists)
        loaded = cls(index, _read_table(path, int(index.ntotal)))
        loaded._path = path
        if where := codes.locate(path, table_offset(path)):
            loaded._codes = codes.Codes(path, where)
        return loaded

    def save(self, path: Path) -> None:
        """Write the FAISS file without its direct map, then the id table (see the module docstring): list by
        list (``files``), so neither in-memory nor memory-mapped lists are copied whole."""
        self._write(path, np.zeros(0, np.int64), np.zeros((0, self.dimension), np.float32), np.zeros(0, np.int64))

    def _search(
        self, vector: np.ndarray, k: int, selector: Any, allowed: np.ndarray | None, effort: int
    ) -> tuple[np.ndarray, np.ndarray]:
        # The nprobe measured when the lists were trained (stored in the file), never below the fixed rule.
        measured = max(nprobe_for(self.nlist), int(self._ivf().nprobe))
        if selector is None and self._codes is not None and self.use_codes:
            return self._reranked(vector, k, codes.NPROBE_FACTOR * (self.nprobe or measured) * effort)
        nprobe = min(self.nlist, (self.nprobe or measured * QUERY_NPROBE_FACTOR) * effort)
        if allowed is not None:
            nprobe = self._filtered_nprobe(vector, allowed, nprobe)
        params = faiss.SearchParametersIVF()
        params.nprobe = nprobe
        if selector is not None:
            params.sel = selector
        return self._index.search(vector, k, params=params)

    def _reranked(self, vector: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` of the codes' candidates by their exact scores (FAISS's kernel over the stored vectors,
        gathered from the mapped file)."""
        assert self._codes is not None
        found = self._codes.candidates(vector, k, nprobe)
        if not len(found):
            return np.zeros((1, 0), np.float32), np.zeros((1, 0), np.int64)
        scores, rows = faiss.knn(vector, self.vectors(found), min(k, len(found)), metric=faiss.METRIC_INNER_PRODUCT)
        return scores, found[rows]

    def _filtered_nprobe(self, vector: np.ndarray, allowed: np.ndarray, nprobe: int) -> int:
        """Lists to probe so that a filtered search scores :data:`FILTERED_BUDGET` times as many *allowed*
        vectors as an unfiltered one scores vectors (nearest lists first). A filter correlated with the geometry
        (one source, one folder) leaves the lists nearest the query nearly empty of allowed vectors: at the
        unfiltered nprobe, recall fell far below the target (docs/scale.md#choices-measured-in-the-code)."""
        budget = FILTERED_BUDGET * nprobe * len(self) / self.nlist
        per_list = np.bincount(self._where[0][positions_of(self._sorted_ids, allowed)], minlength=self.nlist)
        _, nearest = self._ivf().quantizer.search(vector, self.nlist)
        seen = np.cumsum(per_list[nearest[0]])
        return max(nprobe, min(self.nlist, int(np.searchsorted(seen, budget)) + 1))

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored vectors of ``ids``, one row per id, in the order given."""
        wanted = np.ascontiguousarray(ids, dtype=np.int64)
        if len(wanted) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        found = positions_of_all(self._sorted_ids, wanted)
        # Gathered list by list from the (memory-mapped) lists: FAISS's reconstruct_batch through the hash-table
        # direct map cost several times this (docs/scale.md#choices-measured-in-the-code).
        if self._rows is not None:
            rows, starts = self._rows
            return np.array(rows[starts[found]], dtype=np.float32)
        in_lists = self._where[1]
        if in_lists is None:  # an id table comes with its rows; this is only a guard
            raise IndexCorruptError("the IVF id table lost its rows")
        numbers, offsets = self._where[0][found], in_lists[found]
        out = np.empty((len(wanted), self.dimension), dtype=np.float32)
        lists, width = self._ivf().invlists, self.dimension * 4
        by_list = np.argsort(numbers, kind="stable")
        starts = np.flatnonzero(np.r_[True, numbers[by_list][1:] != numbers[by_list][:-1]])
        for start, end in zip(starts, np.r_[starts[1:], len(by_list)], strict=True):
            rows = by_list[start:end]
            number = int(numbers[rows[0]])
            size = lists.list_size(number)
            codes = faiss.rev_swig_ptr(lists.get_codes(number), size * width).view(np.float32)
            out[rows] = codes.reshape(size, self.dimension)[offsets[rows]]
        return out

    def updated(self, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> IVFIndex:
        """A new index: a copy of the lists without ``remove_ids``, plus the added vectors (see the module doc)."""
        add_ids = np.ascontiguousarray(add_ids, dtype=np.int64)
        added = np.ascontiguousarray(np.asarray(add_vectors, dtype=np.float32).reshape(-1, self.dimension))
        remove = np.intersect1d(self._sorted_ids, np.asarray(remove_ids, dtype=np.int64))
        keep = np.setdiff1d(self._sorted_ids, remove, assume_unique=True)
        self._check_new_ids(keep, add_ids)
        size = len(keep) + len(add_ids)
        if not 0.5 <= nlist_for(size) / self.nlist <= 2:  # drifted too far from the trained size: retrain
            return IVFIndex.build(
                np.concatenate([keep, add_ids]), np.concatenate([self.vectors(keep), added]), self.dimension
            )
        index = _in_memory(self._ivf())
        if len(remove):
            index.remove_ids(faiss.IDSelectorArray(remove))  # the hash-table direct map takes only arrays
        if len(add_ids):
            index.add_with_ids(added, add_ids)
        return IVFIndex(index)

    def write_updated(self, path: Path, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> int:
        """Write what :meth:`updated` returns straight to ``path``, list by list (``files``): memory holds a
        span of lists and the added vectors, not the index. Returns the number of vectors written."""
        add_ids = np.ascontiguousarray(add_ids, dtype=np.int64)
        added = np.ascontiguousarray(np.asarray(add_vectors, dtype=np.float32).reshape(-1, self.dimension))
        remove = np.intersect1d(self._sorted_ids, np.asarray(remove_ids, dtype=np.int64))
        self._check_new_ids(np.setdiff1d(self._sorted_ids, remove, assume_unique=True), add_ids)
        size = len(self) - len(remove) + len(add_ids)
        if not 0.5 <= nlist_for(size) / self.nlist <= 2:  # drifted too far from the trained size: retrain
            return self._write_retrained(path, add_ids, added, remove, size)
        return self._write(path, add_ids, added, remove)

    def _write(self, path: Path, add_ids: np.ndarray, added: np.ndarray, remove: np.ndarray) -> int:
        """The kept lists, then the added vectors in their lists (the trained centroids and nprobe kept)."""
        empty = _empty_like(self._ivf())
        blocks = [
            *self._kept_blocks(remove, None),
            files.Block(add_ids, files.assigned(empty.quantizer, added), lambda: added),
        ]
        kept = self._codes.index().pq if self._codes is not None else None  # the same centroids: the same PQ
        return self._written(path, empty, blocks, kept)

    @staticmethod
    def _written(path: Path, empty: Any, blocks: list[files.Block], pq: Any = None) -> int:
        """Write the lists (``files``), their codes if the file is large (``codes``, with ``pq`` if given),
        then the id table from where the lists were written."""
        ids, starts, numbers = files.write(path, empty, blocks)
        if codes.wanted(len(ids), int(empty.d)):
            codes.append(path, pq)
        _write_table(path, ids, starts, numbers, int(starts[0] % 4) if len(starts) else 0)
        return len(ids)

    def _in_list_order(self) -> np.ndarray:
        numbers, offsets = self._where
        if offsets is None or self._rows is not None:  # rows ascend through the file, list by list
            assert self._rows is not None
            return self._sorted_ids[np.argsort(self._rows[1], kind="stable")]
        return self._sorted_ids[np.lexsort((offsets, numbers))]

    def _kept_blocks(self, remove: np.ndarray, quantizer: Any) -> Iterator[files.Block]:
        """A block per span of lists without the ``remove`` ids: each vector in its list (or re-assigned by
        ``quantizer``, which reads the span once to assign it and once more when it is written)."""
        ivf, done = self._ivf(), 0
        ordered = self._in_list_order()
        for numbers, sizes in files.list_spans(ivf):
            ids = ordered[done : done + int(sizes.sum())]
            done += len(ids)
            kept = ~np.isin(ids, remove) if len(remove) else np.ones(len(ids), bool)
            read = self._span_read(numbers, ids, kept)
            lists = np.repeat(numbers, sizes)[kept] if quantizer is None else files.assigned(quantizer, read())
            yield files.Block(ids[kept], lists, read)

    def _span_read(self, numbers: np.ndarray, ids: np.ndarray, kept: np.ndarray) -> Callable[[], np.ndarray]:
        def read() -> np.ndarray:
            found, vectors = files.read_lists(self._ivf(), self._path, numbers)
            if not np.array_equal(found, ids):
                raise IndexCorruptError(f"{self._path} changed while it was read; run `citeline rebuild`")
            return vectors[kept]

        return read

    def _write_retrained(
        self, path: Path, add_ids: np.ndarray, added: np.ndarray, remove: np.ndarray, size: int
    ) -> int:
        """Train new lists on a sample of the kept and added vectors, assign every vector, write, and store the
        nprobe measured on the written file (:func:`calibrated_nprobe`, its exact neighbours read span by span)."""
        nlist = nlist_for(size)
        wanted = np.random.default_rng(1234).choice(size, min(size, nlist * TRAIN_PER_LIST), replace=False)
        picked = np.zeros(size, bool)
        picked[wanted] = True
        sample, own, done = [], [], 0
        for block in [*self._kept_blocks(remove, None), files.Block(add_ids, add_ids, lambda: added)]:
            chosen = picked[done : done + len(block.ids)]
            done += len(block.ids)
            if chosen.any():
                sample.append(block.read()[chosen])
                own.append(block.ids[chosen])
        data = np.concatenate(sample) if sample else np.zeros((0, self.dimension), np.float32)
        sample_ids = np.concatenate(own) if own else np.zeros(0, np.int64)
        empty = _trained(data, nlist, self.dimension)
        queries_at = calibration_sample(len(sample_ids))
        queries, query_ids = np.ascontiguousarray(data[queries_at]), sample_ids[queries_at]
        del data, sample
        blocks = [*self._kept_blocks(remove, empty.quantizer)]
        blocks.append(files.Block(add_ids, files.assigned(empty.quantizer, added), lambda: added))
        empty.set_direct_map_type(_NO_MAP)  # files hold the id table instead (its lists are empty: nothing to map)
        written = self._written(path, empty, blocks)
        if nlist > nprobe_for(nlist) and size > 11:
            neighbours = exact_neighbours(queries, ((block.ids, block.read()) for block in blocks), 11)
            ids = np.concatenate([block.ids for block in blocks])
            by_id = np.argsort(ids)
            lists = np.concatenate([block.lists for block in blocks])[by_id]
            where = lists[np.searchsorted(ids, np.maximum(neighbours, 0), sorter=by_id)]
            nprobe = calibrated(empty.quantizer, nlist, queries, query_ids, neighbours, where)
            files.set_nprobe(path, nlist, nprobe)
        return written


def _trained(data: np.ndarray, nlist: int, dimension: int) -> Any:
    """An empty IVF index with ``nlist`` centroids (k-means on a sample of ``data``; one zero centroid if tiny)."""
    quantizer: Any = faiss.IndexFlatIP(dimension)
    index = faiss.IndexIVFFlat(quantizer, dimension, nlist, faiss.METRIC_INNER_PRODUCT)
    index.own_fields = True
    quantizer.this.disown()  # the IVF index owns (and frees) its quantizer
    if nlist == 1:  # one list is an exact scan; any centroid will do, and an empty index has nothing to train on
        quantizer.add(np.zeros((1, dimension), dtype=np.float32))
        index.is_trained = True
    else:
        index.cp.niter = TRAIN_ITERATIONS
        index.cp.max_points_per_centroid = TRAIN_PER_LIST
        index.cp.seed = 1234
        sample = np.random.default_rng(1234).choice(len(data), min(len(data), nlist * TRAIN_PER_LIST), replace=False)
        index.train(data[np.sort(sample)])
    index.set_direct_map_type(_HASHTABLE)
    return index


def _no_prefetch(lists: Any) -> None:
    """Turn off FAISS's prefetch threads on memory-mapped lists. ``OnDiskInvertedLists`` starts 32 threads per search
    that read every probed list ahead of the scan: the lists are read twice, and a search cost twice the CPU with
    them for the same results (docs/scale.md#choices-measured-in-the-code)."""
    mapped: Any = faiss.downcast_InvertedLists(lists)
    if isinstance(mapped, faiss.OnDiskInvertedLists):
        mapped.prefetch_nthread = 0


def _empty_like(source: Any) -> Any:
    """An IVF index with ``source``'s centroids and nprobe, empty lists and no direct map."""
    quantizer: Any = faiss.clone_index(source.quantizer)
    index: Any = faiss.IndexIVFFlat(quantizer, int(source.d), int(source.nlist), faiss.METRIC_INNER_PRODUCT)
    index.own_fields = True
    quantizer.this.disown()
    index.is_trained = True
    index.nprobe = source.nprobe
    index.set_direct_map_type(_NO_MAP)  # files hold the id table instead
    return index


def _in_memory(source: Any, direct_map: Any = _HASHTABLE) -> Any:
    """A writable in-memory copy of an IVF index (its lists may be memory-mapped): the lists are copied, not
    re-assigned, and the quantizer is cloned; with a hash-table id map for ``remove_ids`` unless told otherwise
    (a file is written without it)."""
    dimension, nlist = int(source.d), int(source.nlist)
    quantizer: Any = faiss.clone_index(source.quantizer)
    index: Any = faiss.IndexIVFFlat(quantizer, dimension, nlist, faiss.METRIC_INNER_PRODUCT)
    index.own_fields = True
    quantizer.this.disown()
    index.is_trained = True
    lists = source.invlists
    for number in range(nlist):
        if size := lists.list_size(number):
            index.invlists.add_entries(number, size, lists.get_ids(number), lists.get_codes(number))
    index.ntotal = source.ntotal
    index.nprobe = source.nprobe  # as measured when the lists were trained
    index.set_direct_map_type(direct_map)  # rebuilds the id -> (list, offset) map
    return index
