"""A generation's vector index in segments, so that a commit costs what changed (chroma's segment layer).

A generation's vectors are an immutable *base* (a file of the index's kind: ``flat``, ``ivf``, ``hnsw``, ``auto``)
and a short list of immutable *delta* segments (:class:`Delta`: a folder of memory-mapped ``.npy`` arrays: the
added ids, their float32 vectors, and the ids the delta removes from the segments before it, its tombstones).
A commit writes one delta segment; the generation's list of segments and their checksums lives in the catalog
(``index_meta``), so the only files a commit writes are its own. A search asks the base (skipping its
tombstones), scans the deltas' live rows exactly (FAISS's brute-force kernel), and merges the two by score: for
the flat kind the result is the exact top k, bit for bit the stored vectors.

:func:`plan` decides when a commit does more than add a delta:

- **merge**: more than :data:`MAX_DELTAS` deltas are folded into one (a search pays a Python loop and a
  memory map per delta; merging them costs only the deltas' rows);
- **compaction**: once the deltas' live rows plus the base's tombstones pass :func:`delta_budget`, everything is
  folded into a new base with the kind's own ``updated`` (flat: a rewrite; ivf: the trained lists copied and
  added to, no retraining unless the size drifted past a factor of two; hnsw: graph insertions and its own
  tombstones). The budget is where scanning the deltas stops being cheap next to the base's own search: flat, a
  tenth of the base (a search scans at most a tenth more rows); hnsw, 2k rows; ivf, 32k rows, so that a one-percent
  update of a 1M-chunk index writes a delta rather than a new IVF base. An ivf base with tombstones overfetches
  (:data:`OVERFETCH_FACTOR`) rather than taking the live ids as an allowed set (many times the CPU at 1M). The
  measurements: docs/scale.md#choices-measured-in-the-code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import faiss
import numpy as np

from citeline.errors import IndexCorruptError
from citeline.util.arrays import load_npy, positions_of, top_k, unique
from citeline.vectors.base import VectorIndex
from citeline.vectors.flat import faiss_threads

#: The arrays of a delta segment's folder.
DELTA_ARRAYS = ("ids", "vectors", "removed")
#: More deltas than this are merged into one.
MAX_DELTAS = 8
#: Compaction budgets (see the module docstring): flat, a fraction of the base, at least FLAT_DELTA_MIN rows.
FLAT_DELTA_FRACTION = 0.1
FLAT_DELTA_MIN = 4_096
APPROXIMATE_DELTA_ROWS = {"ivf": 32_000, "hnsw": 2_000}
#: An unfiltered search asks the base for k + (its tombstones) results and drops the tombstoned ones while there
#: are at most this many; beyond, it passes the base's live ids as the allowed set (each kind's exact filtered path).
#: The allowed-set path is a cliff for IVF (docs/scale.md#choices-measured-in-the-code): asking the base for more
#: results probes the same lists, and only the heap is deeper.
OVERFETCH_MAX = 1_024
#: Kinds whose allowed-set path over nearly every id costs far more than overfetching (ivf, see the module
#: docstring) overfetch up to this multiple of OVERFETCH_MAX (ivf: 32,768, at least its budget).
OVERFETCH_FACTOR = {"ivf": 32}
#: An unfiltered search first asks the base for k + twice the tombstones expected among k results + this many.
OVERFETCH_MARGIN = 16
#: A delta whose rows later deltas removed more than this fraction of is scanned by its live rows (gathered).
DELTA_GATHER_DEAD = 0.5
#: Stage names of :func:`plan`.
MERGE, COMPACTION = "merge", "compaction"
_IP = faiss.METRIC_INNER_PRODUCT
_NO_IDS, _NO_SCORES = np.zeros(0, np.int64), np.zeros(0, np.float32)


def _within(ids: np.ndarray, sorted_ids: np.ndarray) -> np.ndarray:
    """Which of ``ids`` are in ``sorted_ids`` (ascending): a binary search each (np.isin hashes both sides)."""
    if not len(sorted_ids):
        return np.zeros(len(ids), bool)
    return sorted_ids[np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)] == ids


def _arrays(hits: list[tuple[int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Hits as an id array and a score array."""
    return np.array([h for h, _ in hits], np.int64), np.array([s for _, s in hits], np.float32)


@dataclass(frozen=True)
class Delta:
    """Vectors a commit added (ids ascending, rows in id order) and the ids it removed from earlier segments."""

    ids: np.ndarray
    vectors: np.ndarray
    removed: np.ndarray

    @classmethod
    def build(cls, ids: np.ndarray, vectors: np.ndarray, removed: np.ndarray, dimension: int) -> Delta:
        """A delta from unsorted ``ids``/``vectors`` and the ``removed`` ids."""
        ids = np.asarray(ids, dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        rows = np.asarray(vectors, dtype=np.float32).reshape(-1, dimension)[order]
        return cls(ids[order], np.ascontiguousarray(rows), np.unique(np.asarray(removed, dtype=np.int64)))

    def save(self, directory: Path) -> None:
        """Write the three arrays into ``directory`` (a temporary name: the store fsyncs and renames it)."""
        directory.mkdir()
        for name in DELTA_ARRAYS:
            np.save(directory / f"{name}.npy", getattr(self, name), allow_pickle=False)

    @classmethod
    def load(cls, directory: Path, dimension: int) -> Delta:
        """Read a delta folder memory-mapped; raises ``IndexCorruptError`` naming what is wrong."""
        try:
            arrays = {name: load_npy(directory / f"{name}.npy", mmap_mode="r") for name in DELTA_ARRAYS}
        except (OSError, ValueError) as exc:
            raise IndexCorruptError(f"{directory.name}/ cannot be read ({str(exc).splitlines()[0]})") from exc
        ids, vectors, removed = arrays["ids"], arrays["vectors"], arrays["removed"]
        if (
            ids.dtype != np.int64
            or removed.dtype != np.int64
            or vectors.dtype != np.float32
            or vectors.shape != (len(ids), dimension)
            or np.any(ids[1:] <= ids[:-1])
        ):
            raise IndexCorruptError(f"{directory.name}/ is not a delta segment of {dimension}-dimensional vectors")
        return cls(ids, vectors, removed)


class SegmentedVectors:
    """A base index and its deltas, read as one index (the ``VectorIndex`` reading methods and ``updated``)."""

    def __init__(self, base: VectorIndex, deltas: Sequence[Delta] = ()):
        self.base = base
        self.deltas = list(deltas)
        # An id is live in a segment unless a later segment removes it: walk from the newest segment back.
        removed_later = np.zeros(0, np.int64)
        self._live: list[np.ndarray] = [np.zeros(0, bool)] * len(self.deltas)
        self._delta_dead: list[int] = [0] * len(self.deltas)
        for number in range(len(self.deltas) - 1, -1, -1):
            delta = self.deltas[number]
            live = np.ones(len(delta.ids), bool)
            live[positions_of(delta.ids, removed_later)] = False
            self._live[number] = live
            self._delta_dead[number] = len(live) - int(np.count_nonzero(live))
            # (np.union1d calls np.unique, which imports numpy.ma on its first call: a cold search pays for it)
            removed_later = unique(np.concatenate([removed_later, delta.removed]))
        base_ids = base.ids()
        self._dead = positions_of(base_ids, removed_later)  # positions of the base's tombstones in base.ids()
        self.tombstones = np.sort(base_ids[self._dead])

    @property
    def kind(self) -> str:
        """The base's kind."""
        return self.base.kind

    @property
    def dimension(self) -> int:
        """Vector length."""
        return self.base.dimension

    @property
    def delta_rows(self) -> int:
        """Live rows in the deltas."""
        return int(sum(int(live.sum()) for live in self._live))

    def __len__(self) -> int:
        return len(self.base) - len(self.tombstones) + self.delta_rows

    @cached_property
    def _base_live(self) -> np.ndarray:
        return np.delete(self.base.ids(), self._dead)

    def ids(self) -> np.ndarray:
        """Every live id, ascending."""
        added = np.concatenate([d.ids[live] for d, live in zip(self.deltas, self._live, strict=True)] or [[]])
        if not len(added):
            return self._base_live
        added = np.sort(added.astype(np.int64))
        return np.insert(self._base_live, np.searchsorted(self._base_live, added), added)

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The base's results without its tombstones, merged by score with an exact scan of the deltas' live rows."""
        if k <= 0 or (allowed is not None and len(allowed) == 0):
            return []
        vector = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64)
            if len(allowed) > 1 and not bool(np.all(allowed[1:] > allowed[:-1])):
                # (already sorted and distinct, as a filter's ids are, it is passed on as is: the same array
                # each search of that filter, whose selector the base keeps)
                allowed = unique(allowed)
        parts = [self._search_base(vector, k, allowed)]
        # One query on one thread: on FAISS's two OpenMP threads the idle one spins, at several times the CPU
        # (docs/scale.md#choices-measured-in-the-code).
        with faiss_threads(0):
            parts += [self._search_delta(number, vector, k, allowed) for number in range(len(self.deltas))]
        return top_k(np.concatenate([s for _, s in parts]), np.concatenate([i for i, _ in parts]), k)

    def _search_delta(
        self, number: int, vector: np.ndarray, k: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """A delta's best k live rows (among ``allowed``), scored with FAISS's own kernel, not numpy: the flat
        kind's scores, bit for bit, so ties between a base row and a delta row break by id as in an index built
        from scratch (numpy's sums differ in the last bit)."""
        delta, live, dead = self.deltas[number], self._live[number], self._delta_dead[number]
        rows = None
        if allowed is not None:
            rows = np.intersect1d(np.flatnonzero(live), positions_of(delta.ids, allowed), assume_unique=True)
        elif dead > DELTA_GATHER_DEAD * len(delta.ids):
            rows = np.flatnonzero(live)
        if rows is not None:
            # A filter, or a delta mostly removed since: gather the rows and scan them alone.
            if not len(rows):
                return _NO_IDS, _NO_SCORES
            data = np.ascontiguousarray(delta.vectors[rows])
            found, where = faiss.knn(vector[None, :], data, min(k, len(rows)), metric=_IP)
            return delta.ids[rows[where[0]]], found[0]
        if not len(delta.ids):
            return _NO_IDS, _NO_SCORES
        # The whole memory-mapped delta, k plus its dead rows deep, the dead rows dropped: gathering the live rows
        # first copied them, at more than the scan's own cost (docs/scale.md#choices-measured-in-the-code).
        found, where = faiss.knn(vector[None, :], delta.vectors, min(k + dead, len(delta.ids)), metric=_IP)
        keep = live[where[0]] if dead else slice(None)
        return delta.ids[where[0][keep]], found[0][keep]

    def _search_base(self, vector: np.ndarray, k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        dead = self.tombstones
        if not len(dead):
            return _arrays(self.base.search(vector, k, allowed))
        if allowed is not None:
            return _arrays(self.base.search(vector, k, np.setdiff1d(allowed, dead, assume_unique=True)))
        if len(dead) > OVERFETCH_MAX * OVERFETCH_FACTOR.get(self.base.stored_kind, 1):
            return _arrays(self.base.search(vector, k, self._base_live))
        # First ask for the tombstones expected among the top k (twice that) plus a margin; only if fewer than k
        # live results remain (and the base had more to give) ask again with every tombstone. Either way the
        # result is the best k live ids of what the base's search ranks, since a live id below the first answer's
        # last one is below k live ones. Asking for every tombstone at once, or a FAISS
        # IDSelectorNot(IDSelectorBatch(tombstones)), cost more (docs/scale.md#choices-measured-in-the-code).
        expected = -(-2 * k * len(dead) // max(len(self.base), 1)) + OVERFETCH_MARGIN
        for depth in dict.fromkeys((k + min(len(dead), expected), k + len(dead))):
            found, scores = _arrays(self.base.search(vector, depth))
            keep = ~_within(found, dead)  # dead is sorted: no hash set of its 10k ids a query
            if np.count_nonzero(keep) >= k or len(found) < depth:
                break
        return found[keep][:k], scores[keep][:k]

    def vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The exact stored vectors of ``ids``, one row per id, in the order given (``KeyError`` for an absent id)."""
        wanted = np.asarray(ids, dtype=np.int64)
        out = np.empty((len(wanted), self.dimension), dtype=np.float32)
        pending = np.ones(len(wanted), bool)
        for delta, live in zip(self.deltas, self._live, strict=True):
            if not len(delta.ids):
                continue
            where = np.minimum(np.searchsorted(delta.ids, wanted), len(delta.ids) - 1)
            hit = pending & (delta.ids[where] == wanted) & live[where]
            out[hit] = delta.vectors[where[hit]]
            pending &= ~hit
        rest = wanted[pending]
        if len(rest):
            dead = rest[_within(rest, self.tombstones)]
            if len(dead):
                raise KeyError(f"ids not in the vector index: {sorted(dead.tolist())[:5]}")
            out[pending] = self.base.vectors(rest)
        return out

    def contains(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` are live (a boolean mask)."""
        ids = np.asarray(ids, dtype=np.int64)
        live = self.ids()
        where = np.minimum(np.searchsorted(live, ids), max(len(live) - 1, 0))
        return (live[where] == ids) if len(live) else np.zeros(len(ids), bool)

    def delta_for(self, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> Delta:
        """The delta segment of one update: ``remove_ids`` (those held) removed, the added vectors added."""
        add_ids = np.asarray(add_ids, dtype=np.int64)
        remove = np.asarray(remove_ids, dtype=np.int64)
        remove = remove[self.contains(remove)]
        clash = add_ids[self.contains(add_ids) & ~np.isin(add_ids, remove)]
        if len(clash) or len(np.unique(add_ids)) != len(add_ids):
            raise ValueError("an added id is already in the index; remove it in the same update")
        return Delta.build(add_ids, add_vectors, remove, self.dimension)

    def updated(self, add_ids: np.ndarray, add_vectors: np.ndarray, remove_ids: np.ndarray) -> SegmentedVectors:
        """A new segmented index: this one plus one delta (``self`` is unchanged)."""
        return SegmentedVectors(self.base, [*self.deltas, self.delta_for(add_ids, add_vectors, remove_ids)])

    def merged_delta(self) -> Delta:
        """Every delta as one: their live rows, and the base's tombstones."""
        ids = np.concatenate([d.ids[live] for d, live in zip(self.deltas, self._live, strict=True)] or [[]])
        rows = [np.asarray(d.vectors[live]) for d, live in zip(self.deltas, self._live, strict=True)]
        vectors = np.concatenate(rows) if rows else np.zeros((0, self.dimension), np.float32)
        return Delta.build(ids.astype(np.int64), vectors, self.tombstones, self.dimension)

    def compacted(self) -> VectorIndex:
        """A new base holding every live vector (the kind's own ``updated``: no re-embedding)."""
        merged = self.merged_delta()
        return self.base.updated(merged.ids, np.asarray(merged.vectors), merged.removed)


def delta_budget(base: VectorIndex) -> int:
    """Live delta rows plus base tombstones past which a commit compacts (see the module docstring)."""
    if base.stored_kind in APPROXIMATE_DELTA_ROWS:  # auto: the kind it holds now
        return APPROXIMATE_DELTA_ROWS[base.stored_kind]
    return max(FLAT_DELTA_MIN, int(FLAT_DELTA_FRACTION * len(base)))


def plan(index: SegmentedVectors) -> str | None:
    """What a commit that produced ``index`` (its last delta new) publishes beside the delta: ``compaction``,
    ``merge`` of the deltas, or None."""
    # An empty base (a new index's first ingest): the deltas are everything, so they become the base.
    if len(index.base) == 0 or index.delta_rows + len(index.tombstones) > delta_budget(index.base):
        return COMPACTION
    if len(index.deltas) > MAX_DELTAS:
        return MERGE
    return None
