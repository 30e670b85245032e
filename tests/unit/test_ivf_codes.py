"""The fast-scan codes of large ``ivf`` files (``citeline.vectors.ivf.codes``): written as FAISS would encode them,
invisible to a reader that does not know them, searched with an exact re-rank, kept through compactions."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
import pytest

from citeline.errors import IndexCorruptError
from citeline.vectors.ivf import IVFIndex, codes, table

DIMENSION = 32


def _clustered(n: int, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    centres = np.random.default_rng(5).standard_normal((60, DIMENSION)).astype(np.float32)
    rng = np.random.default_rng(seed)
    vectors = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return rng.choice(2**62, size=n, replace=False).astype(np.int64), vectors


@pytest.fixture
def small_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codes, "MIN_VECTORS", 1_000)
    monkeypatch.setattr(codes, "RERANK", 200)


def _exact(ids: np.ndarray, vectors: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    scores = vectors @ query
    return ids[np.lexsort((ids, -scores))[:k]].tolist()


def test_codes_are_what_faiss_add_writes(tmp_path: Path, small_codes: None) -> None:
    ids, vectors = _clustered(5_000)
    path = tmp_path / "vectors.1.ivf.faiss"
    IVFIndex.build(ids, vectors, DIMENSION).save(path)
    loaded = IVFIndex.load(path)
    assert loaded._codes is not None
    written = loaded._codes.index()
    # The same quantizer and PQ, every vector added by FAISS itself (which assigns each to its list again), in the
    # file's list order: the packed blocks must be the same bytes.
    assert written.by_residual  # codes of the residuals to each list's centroid
    reference = codes._empty(faiss.clone_index(loaded._ivf().quantizer), DIMENSION, loaded.nlist)
    reference.pq = written.pq
    reference.is_trained = True
    in_lists = loaded._in_list_order()
    reference.add_with_ids(loaded.vectors(in_lists), in_lists)
    mine, theirs = faiss.downcast_InvertedLists(written.invlists), faiss.downcast_InvertedLists(reference.invlists)
    for number in range(loaded.nlist):
        size = theirs.list_size(number)
        assert mine.list_size(number) == size
        assert np.array_equal(
            faiss.rev_swig_ptr(mine.get_ids(number), size), faiss.rev_swig_ptr(theirs.get_ids(number), size)
        )
        packed = -(-size // theirs.n_per_block) * theirs.block_size
        assert np.array_equal(
            faiss.rev_swig_ptr(mine.get_codes(number), packed), faiss.rev_swig_ptr(theirs.get_codes(number), packed)
        )
    query = vectors[:20]
    params = faiss.SearchParametersIVF()
    params.nprobe = 8
    assert np.array_equal(written.search(query, 10, params=params)[1], reference.search(query, 10, params=params)[1])


def test_a_file_with_codes_is_the_old_file_plus_a_section_old_readers_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, vectors = _clustered(3_000)
    built = IVFIndex.build(ids, vectors, DIMENSION)
    built.save(tmp_path / "plain")  # below MIN_VECTORS: the file main's code wrote
    monkeypatch.setattr(codes, "MIN_VECTORS", 1_000)
    built.save(tmp_path / "coded")
    plain, coded = (tmp_path / "plain").read_bytes(), (tmp_path / "coded").read_bytes()
    table_at = table.table_offset(tmp_path / "coded")
    where = codes.locate(tmp_path / "coded", table_at)
    assert where is not None and codes.locate(tmp_path / "plain", table.table_offset(tmp_path / "plain")) is None
    offset, _ = where
    stripped = coded[:offset] + coded[table_at:]
    footer = table._FOOTER.unpack(stripped[-table._FOOTER.size :])
    stripped = stripped[: -table._FOOTER.size] + table._FOOTER.pack(footer[0], footer[1], offset, footer[3])
    assert stripped == plain
    # FAISS itself reads the file with codes as the plain IVF file it starts with.
    assert faiss.read_index(str(tmp_path / "coded")).ntotal == len(ids)
    old = IVFIndex.load(tmp_path / "plain")  # a file written before codes: searched through its float lists
    assert old._codes is None
    query = vectors[7]
    assert [h for h, _ in old.search(query, 10)] == _exact(ids, vectors, query, 10)


def test_searches_with_codes_rerank_exactly_and_filters_keep_the_float_scan(tmp_path: Path, small_codes: None) -> None:
    ids, vectors = _clustered(20_000)
    path = tmp_path / "vectors.1.ivf.faiss"
    IVFIndex.build(ids, vectors, DIMENSION).save(path)
    loaded = IVFIndex.load(path)
    assert loaded._codes is not None and loaded._codes._index is None  # not read at open
    queries = _clustered(40, seed=9)[1]
    found = 0
    for query in queries:
        hits = loaded.search(query, 10)
        assert len(hits) == 10
        rows = loaded.vectors([h for h, _ in hits])
        assert np.allclose([s for _, s in hits], rows @ query, atol=1e-5)  # exact scores, best first
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        found += len({h for h, _ in hits} & set(_exact(ids, vectors, query, 10)))
    assert found / (10 * len(queries)) >= 0.95
    allowed = np.sort(ids[::7])
    hits = loaded.search(queries[0], 10, allowed)
    assert len(hits) == 10 and np.isin([h for h, _ in hits], allowed).all()


def test_compaction_keeps_the_codes_and_their_quantizer(tmp_path: Path, small_codes: None) -> None:
    ids, vectors = _clustered(6_000)
    IVFIndex.build(ids[:5_000], vectors[:5_000], DIMENSION).save(tmp_path / "old")
    old = IVFIndex.load(tmp_path / "old")
    assert old.write_updated(tmp_path / "new", ids[5_000:5_500], vectors[5_000:5_500], ids[:100]) == 5_400
    new = IVFIndex.load(tmp_path / "new")
    assert new._codes is not None and new._codes.index().ntotal == 5_400
    assert np.array_equal(
        faiss.vector_to_array(new._codes.index().pq.centroids), faiss.vector_to_array(old._codes.index().pq.centroids)
    )
    query = vectors[5_100]
    assert new.search(query, 1)[0][0] == ids[5_100]
    assert ids[0] not in {h for h, _ in new.search(vectors[0], 10)}
    # Grown past twice the trained size: retrained lists, and codes trained for them.
    IVFIndex.build(ids[:1_200], vectors[:1_200], DIMENSION).save(tmp_path / "small")
    small = IVFIndex.load(tmp_path / "small")
    small.write_updated(tmp_path / "grown", ids[1_200:], vectors[1_200:], ids[:0])
    grown = IVFIndex.load(tmp_path / "grown")
    assert grown.nlist > 2 * small.nlist and grown._codes is not None and grown._codes.index().nlist == grown.nlist


def test_damaged_codes_are_one_clear_error(tmp_path: Path, small_codes: None) -> None:
    ids, vectors = _clustered(2_000)
    path = tmp_path / "vectors.3.ivf.faiss"
    IVFIndex.build(ids, vectors, DIMENSION).save(path)
    offset, _ = codes.locate(path, table.table_offset(path)) or (0, 0)
    data = bytearray(path.read_bytes())
    data[offset : offset + 4] = b"junk"
    path.write_bytes(bytes(data))
    loaded = IVFIndex.load(path)  # the codes are read on the first unfiltered search
    with pytest.raises(IndexCorruptError, match="codes cannot be read"):
        loaded.search(vectors[0], 5)
