"""Writing a ``flat`` FAISS file from vectors read a span at a time (``citeline rebuild`` at any size).

``FlatIndex.build`` holds every vector three times at its peak (the caller's array, the copy in id order, FAISS's
own): 4.5 GB at 1M x 384. The file is simple enough to write directly, byte for byte what ``faiss.write_index``
writes of the ``IndexIDMap2(IndexFlatIP)`` that ``FlatIndex.build`` makes (``tests/index/test_rebuild_streaming.py``
compares them; faiss/impl/index_write.cpp)::

    "IxM2" header, "IxFI" header    FAISS's own serialization of the empty index with ``ntotal`` set
    u64 n * d, n * d float32        the vectors, in ascending id order (WRITEXBVECTOR)
    u64 n, n int64                  the ids (WRITEVECTOR of ``id_map``)

Memory holds one span of rows.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import faiss
import numpy as np

#: Rows written per read (64k rows of 384 floats: 100 MB).
SPAN_ROWS = 65_536
#: The tail of the serialization of an empty ``IndexIDMap2(IndexFlatIP)``: the empty vector and id map sizes.
_EMPTY_TAIL = struct.pack("<QQ", 0, 0)


def write_built(
    path: Path, ids: np.ndarray, rows: Callable[[np.ndarray], np.ndarray], dimension: int, span_rows: int = SPAN_ROWS
) -> int:
    """Write at ``path`` the file ``FlatIndex.build(ids, vectors, dimension).save(path)`` writes, where ``ids`` are
    ascending and ``rows(positions)`` returns the float32 vectors of those positions of ``ids``. Returns the number
    of vectors written."""
    ids = np.ascontiguousarray(ids, dtype="<i8")
    count = len(ids)
    if np.any(ids[1:] <= ids[:-1]):
        raise ValueError("write_built takes unique ids in ascending order")
    with path.open("wb") as out:
        out.write(_header(dimension, count))
        out.write(struct.pack("<Q", count * dimension))
        for start in range(0, count, span_rows):
            span = rows(np.arange(start, min(count, start + span_rows)))
            out.write(np.ascontiguousarray(span, dtype="<f4").reshape(-1, dimension).tobytes())
        out.write(struct.pack("<Q", count))
        out.write(ids.tobytes())
    return count


def _header(dimension: int, count: int) -> bytes:
    """FAISS's serialization of an empty ``IndexIDMap2(IndexFlatIP(dimension))`` claiming ``count`` vectors, up to
    its vectors."""
    inner = faiss.IndexFlatIP(dimension)
    index = faiss.IndexIDMap2(inner)
    index.ntotal = inner.ntotal = count
    data = faiss.serialize_index(index).tobytes()
    if not data.endswith(_EMPTY_TAIL) or data[:4] != b"IxM2":
        raise ValueError("FAISS wrote a flat header this module does not know; write the index with faiss instead")
    return data[: -len(_EMPTY_TAIL)]
