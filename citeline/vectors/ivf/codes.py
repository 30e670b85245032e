"""4-bit PQ *fast-scan codes* beside a large ``ivf`` file's exact lists: a search scans the codes of more lists than
the float scan could afford and re-ranks the best :data:`RERANK` candidates exactly from the stored vectors.

Why: the float scan is memory-bound (it reads a tenth of the float32 lists). Codes of the same lists, 96 bytes
a vector where its float32 values take 1,536 (``IndexIVFPQFastScan``, 2 dimensions a sub-quantizer, 4 bits,
residuals to the list's centroid), scanned with FAISS's SIMD kernel and re-ranked from the exact vectors, let a
search probe :data:`NPROBE_FACTOR` times the calibrated nprobe and re-rank :data:`RERANK`: less CPU than the float
scan at higher recall (docs/scale.md#choices-measured-in-the-code). A filtered search keeps the float scan with its id
selector (exact scores inside the scan, and FAISS's fast-scan search takes no selector).

The codes are an ``IndexIVFPQFastScan`` in FAISS's own serialization, written after the lists and before the id
table, followed by a footer (:data:`_MAGIC`, offset, length), so a reader of the file without this module finds
the id table where it always was and searches the float lists. They are written whenever a file of at least
:data:`MIN_VECTORS` vectors is (a build, a compaction, a retraining): the lists are read back a span at a time and
each list encoded on its own against its centroid (a one-list scratch index whose packed blocks are copied in:
no quantizer search over all the vectors), the product quantizer trained once on :data:`TRAIN_VECTORS` vectors of
randomly chosen lists and kept through compactions that keep the centroids. A reader loads them (96 bytes a
vector: 92 MB at 960k) on its first unfiltered dense search, not at open.
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from citeline.errors import IndexCorruptError
from citeline.vectors.flat import faiss_threads
from citeline.vectors.ivf import files

#: Files of at least this many vectors carry codes. Below, the float scan costs about what the codes do (figures:
#: docs/scale.md#choices-measured-in-the-code).
MIN_VECTORS = 200_000
#: Dimensions per 4-bit sub-quantizer (384 dimensions in 192 sub-quantizers, 96 bytes a vector); see the module
#: docstring.
DIMS_PER_CODE = 2
#: A code search probes this many times the nprobe the float scan would (the calibrated nprobe), and re-ranks
#: this many candidates exactly (at least twice the k asked for): 5 and 2,500 keep recall@10 over 0.95 at 1M at the
#: least cost to hybrid search (docs/scale.md#choices-measured-in-the-code).
NPROBE_FACTOR = 5
RERANK = 2_500
#: Vectors the product quantizer is trained on.
TRAIN_VECTORS = 65_536
_MAGIC = b"CLIVFPQ1"
#: FAISS's stubs lack these.
_WRITER: Any = faiss.PyCallbackIOWriter  # type: ignore[attr-defined]
_READER: Any = faiss.PyCallbackIOReader  # type: ignore[attr-defined]
_FOOTER = struct.Struct("<8sQQ")


def wanted(count: int, dimension: int) -> bool:
    """Whether a file of ``count`` vectors of ``dimension`` carries codes."""
    return count >= MIN_VECTORS and dimension % DIMS_PER_CODE == 0 and dimension // DIMS_PER_CODE % 2 == 0


def _empty(quantizer: Any, dimension: int, nlist: int) -> Any:
    index: Any = faiss.IndexIVFPQFastScan(
        quantizer, dimension, nlist, dimension // DIMS_PER_CODE, 4, faiss.METRIC_INNER_PRODUCT
    )
    index.by_residual = True  # FAISS's default here is False: PQ of the vectors themselves fell far short in recall
    index.own_fields = True
    quantizer.this.disown()
    return index


def append(path: Path, pq: Any = None) -> None:
    """Append the codes of the IVF file just written at ``path`` (its lists, before the id table), with ``pq`` (a
    ``ProductQuantizer`` kept from the file this one replaces, same centroids) or one trained here."""
    whole = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    mapped: Any = faiss.extract_index_ivf(whole)  # a view: `whole` owns it
    dimension, nlist = int(mapped.d), int(mapped.nlist)
    centroids = mapped.quantizer.reconstruct_n(0, nlist)
    codes = _empty(faiss.clone_index(mapped.quantizer), dimension, nlist)
    if pq is None:
        with faiss_threads(0):  # OpenMP threads spin on busy cores (docs/scale.md#choices-measured-in-the-code)
            codes.train(_sample(mapped, path))  # the quantizer holds its nlist centroids: only the PQ is trained
    else:
        codes.pq = pq
        codes.is_trained = True
    # One list at a time through a one-list index whose centroid is that list's: its packed blocks are the codes
    # FAISS's add_with_ids would write (tests/unit/test_ivf_codes.py), without assigning every vector again.
    single: Any = faiss.IndexFlatIP(dimension)
    scratch = _empty(single, dimension, 1)
    scratch.pq = codes.pq
    scratch.is_trained = True
    scratch_lists: Any = faiss.downcast_InvertedLists(scratch.invlists)
    # One OpenMP thread: a list is a few hundred vectors, and FAISS's parallel regions per call cost more than they
    # save on two busy cores.
    with faiss_threads(0):
        for numbers, sizes in files.list_spans(mapped):
            ids, vectors = files.read_lists(mapped, path, numbers)
            for number, start, size in zip(numbers.tolist(), np.cumsum(sizes) - sizes, sizes.tolist(), strict=True):
                single.reset()
                single.add(centroids[number : number + 1])
                scratch.reset()
                scratch.add_with_ids(vectors[start : start + size], ids[start : start + size])
                codes.invlists.add_entries(number, size, scratch_lists.get_ids(0), scratch_lists.get_codes(0))
    codes.ntotal = int(mapped.ntotal)
    del mapped, whole  # unmaps the file
    with path.open("ab") as out:
        offset = out.tell()
        faiss.write_index(codes, _WRITER(out.write))
        out.write(_FOOTER.pack(_MAGIC, offset, out.tell() - offset))


def _sample(mapped: Any, path: Path) -> np.ndarray:
    """About :data:`TRAIN_VECTORS` vectors drawn uniformly from every list (one pass over the lists, a span at a
    time). Vectors of randomly chosen whole lists trained a PQ of lower re-ranked recall than a uniform sample's
    (docs/scale.md#choices-measured-in-the-code)."""
    share = min(1.0, TRAIN_VECTORS / max(1, int(mapped.ntotal)))
    rng = np.random.default_rng(1234)
    parts = [
        vectors[rng.random(len(vectors)) < share]
        for numbers, _ in files.list_spans(mapped)
        for _, vectors in [files.read_lists(mapped, path, numbers)]
    ]
    return np.concatenate(parts) if parts else np.zeros((0, int(mapped.d)), np.float32)


def locate(path: Path, table_at: int | None) -> tuple[int, int] | None:
    """The (offset, length) of the codes of the file at ``path`` whose id table starts at ``table_at``; None for a
    file without codes (or without the table)."""
    if table_at is None or table_at < _FOOTER.size:
        return None
    with path.open("rb") as handle:
        handle.seek(table_at - _FOOTER.size)
        magic, offset, length = _FOOTER.unpack(handle.read(_FOOTER.size))
    if magic != _MAGIC:
        return None
    if offset + length + _FOOTER.size != table_at:
        raise IndexCorruptError(f"{path}'s codes do not end where its id table starts; run `citeline rebuild`")
    return int(offset), int(length)


class Codes:
    """The codes of one file, read on first use (a reader that never searches unfiltered never loads them)."""

    def __init__(self, path: Path, where: tuple[int, int]):
        self._path, self._where = path, where
        self._lock = threading.Lock()
        self._index: Any = None

    def index(self) -> Any:
        """The ``IndexIVFPQFastScan`` (loaded once)."""
        with self._lock:
            if self._index is None:
                self._index = self._read()
            return self._index

    def _read(self) -> Any:
        offset, length = self._where
        try:
            with self._path.open("rb") as handle:
                handle.seek(offset)
                left = [length]

                def read(size: int) -> bytes:
                    data = handle.read(min(size, left[0]))
                    left[0] -= len(data)
                    return data

                index = faiss.read_index(_READER(read))
        except (OSError, RuntimeError) as exc:
            raise IndexCorruptError(f"{self._path}'s codes cannot be read ({str(exc).splitlines()[0]})") from exc
        if not isinstance(index, faiss.IndexIVFPQFastScan):  # read_index hands back the most derived class
            raise IndexCorruptError(f"{self._path}'s codes section is not a fast-scan index; run `citeline rebuild`")
        return index

    def candidates(self, vector: np.ndarray, k: int, nprobe: int) -> np.ndarray:
        """The ids of the best ``max(RERANK, 2 k)`` by the codes (``vector``: one row), ``nprobe`` lists deep."""
        index = self.index()
        params = faiss.SearchParametersIVF()
        params.nprobe = min(int(index.nlist), nprobe)
        _, found = index.search(vector, max(RERANK, 2 * k), params=params)
        return found[0][found[0] >= 0]
