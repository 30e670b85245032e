"""Opening costs what a query touches: what a reader would compute at open is written with the files.

The IVF kind appends an id table to its file (ids ascending, each one's vector row and list), so a reader maps it
instead of walking every list and sorting every id; files written before the table are still read (walked).
"""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from citeline.errors import IndexCorruptError
from citeline.vectors.ivf import IVFIndex, index

DIMENSION = 16


def _data(n: int = 3000, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return rng.choice(10**12, size=n, replace=False).astype(np.int64), vectors


def _walked(path: Path) -> IVFIndex:
    """The file read as one written before the id table (its lists walked)."""
    return IVFIndex(IVFIndex.read(path))


def test_ivf_file_carries_its_id_table_and_reads_the_same(tmp_path: Path) -> None:
    ids, vectors = _data()
    built = IVFIndex.build(ids, vectors, DIMENSION)
    path = tmp_path / "vectors.1.ivf.faiss"
    built.save(path)
    loaded = IVFIndex.load(path)
    assert loaded._where[1] is None  # the table was mapped, the lists not walked
    assert faiss.extract_index_ivf(loaded._index).direct_map.type == 0  # written without the hash table
    assert np.array_equal(loaded.ids(), np.sort(ids))
    walked = _walked(path)
    assert np.array_equal(walked.ids(), loaded.ids())
    some = ids[::7]
    assert np.array_equal(loaded.vectors(some), vectors[::7])
    rng = np.random.default_rng(0)
    allowed = np.sort(rng.choice(ids, 900, replace=False))  # above the exact-scan size: the selector path
    for query in vectors[:5]:
        assert loaded.search(query, 10) == walked.search(query, 10) == built.search(query, 10)
        assert loaded.search(query, 10, allowed) == walked.search(query, 10, allowed)
        assert loaded._filtered_nprobe(query[None, :], allowed, 4) == walked._filtered_nprobe(
            query[None, :], allowed, 4
        )
    with pytest.raises(KeyError):
        loaded.vectors([int(ids.max()) + 1])
    # an update from the mapped file (hash-table id map rebuilt in memory) removes and adds as before
    updated = loaded.updated(ids[:3] + 1, vectors[:3], ids[3:6])
    assert len(updated) == len(ids)
    assert not np.isin(ids[3:6], updated.ids()).any()


def test_ivf_file_without_the_table_is_read_by_walking_its_lists(tmp_path: Path) -> None:
    ids, vectors = _data(800)
    built = IVFIndex.build(ids, vectors, DIMENSION)
    path = tmp_path / "old.ivf.faiss"
    faiss.write_index(index._in_memory(built._ivf()), str(path))  # as written before the table (hash-table map)
    loaded = IVFIndex.load(path)
    assert loaded._where[1] is not None
    assert np.array_equal(loaded.ids(), np.sort(ids))
    assert np.array_equal(loaded.vectors(ids[:50]), vectors[:50])
    assert loaded.search(vectors[0], 5) == built.search(vectors[0], 5)


def test_empty_ivf_file_round_trips(tmp_path: Path) -> None:
    empty = IVFIndex.build(np.zeros(0, np.int64), np.zeros((0, DIMENSION), np.float32), DIMENSION)
    path = tmp_path / "empty.ivf.faiss"
    empty.save(path)
    loaded = IVFIndex.load(path)
    assert len(loaded) == 0 and loaded.search(np.ones(DIMENSION, np.float32), 3) == []


def test_a_damaged_id_table_is_one_clear_error(tmp_path: Path) -> None:
    ids, vectors = _data(500)
    path = tmp_path / "vectors.2.ivf.faiss"
    IVFIndex.build(ids, vectors, DIMENSION).save(path)
    data = bytearray(path.read_bytes())
    footer = index._FOOTER.unpack(bytes(data[-index._FOOTER.size :]))
    data[-index._FOOTER.size :] = index._FOOTER.pack(footer[0], footer[1] + 1, footer[2], footer[3])
    path.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match="id table"):
        IVFIndex.load(path)
