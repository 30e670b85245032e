"""The contract every vector index kind passes (txtai's habit: one suite, every backend).

A new kind is one file in ``citeline/vectors/`` and one registry line; this module runs it through the same checks
as ``flat``: exact ids, exact stored vectors, search order, filtered search returning k results whenever k allowed
ids exist, copy-on-write updates, and a save/load round trip. On the small data of the shared checks the
approximate kinds are exact (an IVF of 10 lists probes them all; an HNSW graph of 400 nodes at efSearch 64 finds
every neighbour), so they pass the same exact-order checks; larger data checks their recall instead, their
selector path, HNSW's tombstones, IVF's copied lists, and ``auto``'s switch of kind.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from citeline.errors import CitelineError, IndexCorruptError, IndexMismatchError
from citeline.index import Index
from citeline.store import generation
from citeline.vectors import KINDS, auto, kind_of, segments
from citeline.vectors.flat import FlatIndex
from citeline.vectors.ivf import IVFIndex
from citeline.vectors.segments import Delta, SegmentedVectors

DIMENSION = 16


def _data(n: int = 400, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = rng.choice(10**12, size=n, replace=False).astype(np.int64)  # large, unordered ids
    return ids, vectors


def _exact(ids: np.ndarray, vectors: np.ndarray, query: np.ndarray, k: int, allowed: np.ndarray | None = None):
    mask = np.ones(len(ids), bool) if allowed is None else np.isin(ids, allowed)
    scores = vectors[mask] @ query
    order = np.lexsort((ids[mask], -scores))[:k]
    return ids[mask][order].tolist()


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> type:
    return KINDS[request.param]


#: How a generation may hold its vectors (``citeline.vectors.segments``): the kind's own index, or a base of the
#: kind with delta segments (memory-mapped from disk), with tombstones (of base rows and of delta rows, including
#: near copies of the data that would win every search if a tombstone leaked), past the overfetch limit, after a
#: merge of the deltas, after a compaction into a new base.
FORMS = ["plain", "deltas", "tombstones", "tombstones-allowed", "merged", "compacted"]


@pytest.fixture(params=FORMS)
def make(request: pytest.FixtureRequest, kind: type, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    form = request.param
    if form == "tombstones-allowed":  # more tombstones than the overfetch: the base is asked with its live ids
        monkeypatch.setattr(segments, "OVERFETCH_MAX", 5)

    def build(ids: np.ndarray, vectors: np.ndarray, dimension: int):
        if form == "plain":
            return kind.build(ids, vectors, dimension)
        return segmented(kind, ids, vectors, dimension, form, tmp_path / f"segments{len(list(tmp_path.iterdir()))}")

    return build


def segmented(kind: type, ids: np.ndarray, vectors: np.ndarray, dimension: int, form: str, directory: Path):
    """``ids``/``vectors`` held as a base and two deltas (written to ``directory`` and read back memory-mapped)."""
    first, second = int(len(ids) * 0.6), int(len(ids) * 0.8)
    tombstones = form != "deltas"
    decoys = 10**13 + np.arange(min(25, len(ids)), dtype=np.int64)  # near copies of the first rows: they would win
    copies = vectors[: len(decoys)] * np.float32(1.0001)
    base_ids, base_vectors = ids[:first], vectors[:first]
    if tombstones:
        base_ids, base_vectors = np.r_[base_ids, decoys[::2]], np.r_[base_vectors, copies[::2]]
    index = SegmentedVectors(kind.build(base_ids, base_vectors, dimension))
    added_ids, added_vectors = ids[first:second], vectors[first:second]
    if tombstones:
        added_ids, added_vectors = np.r_[added_ids, decoys[1::2]], np.r_[added_vectors, copies[1::2]]
    index = index.updated(added_ids, added_vectors, decoys[::2] if tombstones else decoys[:0])
    index = index.updated(ids[second:], vectors[second:], decoys[1::2] if tombstones else decoys[:0])
    directory.mkdir()
    for number, delta in enumerate(index.deltas):
        delta.save(directory / f"vdelta.{number}")
    loaded = [Delta.load(directory / f"vdelta.{number}", dimension) for number in range(len(index.deltas))]
    index = SegmentedVectors(index.base, loaded)
    if tombstones:
        assert len(index.tombstones) == len(decoys[::2]) and index.delta_rows == len(ids) - first
    if form == "merged":
        return SegmentedVectors(index.base, [index.merged_delta()])
    if form == "compacted":
        return SegmentedVectors(index.compacted())
    return index


def test_the_registry_names_each_kind_by_its_own_name(kind: type) -> None:
    assert kind_of(kind.kind) is kind
    with pytest.raises(CitelineError, match="unknown vector index kind 'nope'; this citeline has"):
        kind_of("nope")


def test_ids_vectors_and_len_are_exact(make) -> None:
    ids, vectors = _data()
    index = make(ids, vectors, DIMENSION)
    assert len(index) == len(ids) and index.dimension == DIMENSION
    assert np.array_equal(index.ids(), np.sort(ids))
    some = ids[[5, 0, 77]]
    assert np.array_equal(index.vectors(some), vectors[[5, 0, 77]])  # bit for bit, in the order asked
    with pytest.raises(KeyError):
        index.vectors([int(ids.max()) + 1])
    assert index.vectors([]).shape == (0, DIMENSION)


def test_search_finds_the_nearest_vectors_best_first(make) -> None:
    ids, vectors = _data()
    index = make(ids, vectors, DIMENSION)
    for row in (0, 10, 200):
        hits = index.search(vectors[row], 10)
        assert hits[0][0] == ids[row] and hits[0][1] == pytest.approx(1.0, abs=1e-5)
        assert [h for h, _ in hits] == _exact(ids, vectors, vectors[row], 10)
        assert all(a[1] >= b[1] for a, b in itertools.pairwise(hits))
    assert len(index.search(vectors[0], 10_000)) == len(ids)


@pytest.mark.parametrize("size", [1, 7, 60, 300])
def test_filtered_search_returns_k_allowed_results_whenever_k_exist(make, size: int) -> None:
    ids, vectors = _data()
    index = make(ids, vectors, DIMENSION)
    rng = np.random.default_rng(size)
    allowed = np.sort(rng.choice(ids, size, replace=False))
    query = vectors[int(np.flatnonzero(~np.isin(ids, allowed))[0])]  # a query whose best match is not allowed
    hits = index.search(query, 10, allowed)
    assert len(hits) == min(10, size)
    assert {h for h, _ in hits} <= set(allowed.tolist())
    assert [h for h, _ in hits] == _exact(ids, vectors, query, 10, allowed)
    assert index.search(query, 5, np.zeros(0, np.int64)) == []


def test_updated_is_copy_on_write(make) -> None:
    ids, vectors = _data()
    index = make(ids[:300], vectors[:300], DIMENSION)
    removed = ids[:50]
    newer = index.updated(ids[300:], vectors[300:], removed)
    assert np.array_equal(index.ids(), np.sort(ids[:300]))  # the original is unchanged
    assert np.array_equal(newer.ids(), np.sort(ids[50:]))
    assert np.array_equal(newer.vectors(ids[350:360]), vectors[350:360])
    assert newer.search(vectors[10], 1)[0][0] != ids[10]  # a removed id never comes back
    with pytest.raises(ValueError, match="already in the index"):
        index.updated(ids[:1], vectors[:1], np.zeros(0, np.int64))


def test_write_updated_writes_the_file_of_updated(kind: type, tmp_path: Path) -> None:
    ids, vectors = _data()
    kind.build(ids[:300], vectors[:300], DIMENSION).save(tmp_path / "old")
    old = kind.load(tmp_path / "old")  # memory-mapped where the kind allows: what a compaction starts from
    expected = old.updated(ids[300:], vectors[300:], ids[:50])
    assert old.write_updated(tmp_path / "new", ids[300:], vectors[300:], ids[:50]) == len(expected) == 350
    written = kind.load(tmp_path / "new")
    assert np.array_equal(written.ids(), expected.ids())
    assert np.array_equal(written.vectors(expected.ids()), expected.vectors(expected.ids()))
    assert written.search(vectors[320], 5) == expected.search(vectors[320], 5)
    with pytest.raises(ValueError, match="already in the index"):
        old.write_updated(tmp_path / "clash", ids[60:61], vectors[60:61], np.zeros(0, np.int64))


def test_ivf_files_are_written_as_faiss_writes_them(tmp_path: Path) -> None:
    ids, vectors = _clustered(4_000)
    IVFIndex.build(ids[:3_000], vectors[:3_000], 32).save(tmp_path / "old")
    old = IVFIndex.load(tmp_path / "old")
    old.save(tmp_path / "streamed")  # memory-mapped lists: written list by list
    import faiss

    from citeline.vectors.ivf.index import _NO_MAP, _append_table, _in_memory

    faiss.write_index(_in_memory(old._ivf(), direct_map=_NO_MAP), str(tmp_path / "faiss"))
    _append_table(tmp_path / "faiss")
    assert (tmp_path / "streamed").read_bytes() == (tmp_path / "faiss").read_bytes()
    # Grown fourfold: retrained, every vector re-assigned, nprobe measured on the written file.
    IVFIndex.build(ids[:1_000], vectors[:1_000], 32).save(tmp_path / "small")
    small = IVFIndex.load(tmp_path / "small")
    expected = small.updated(ids[1_000:], vectors[1_000:], ids[:10])
    small.write_updated(tmp_path / "grown", ids[1_000:], vectors[1_000:], ids[:10])
    grown = IVFIndex.load(tmp_path / "grown")
    assert grown.nlist == expected.nlist > 2 * small.nlist and grown._ivf().nprobe == expected._ivf().nprobe
    assert np.array_equal(grown.vectors(ids[10:]), vectors[10:])


def test_save_and_load_round_trip(kind: type, tmp_path: Path) -> None:
    ids, vectors = _data()
    path = tmp_path / f"vectors.1.{kind.suffix}"
    kind.build(ids, vectors, DIMENSION).save(path)
    loaded = kind.load(path)
    assert np.array_equal(loaded.ids(), np.sort(ids))
    assert np.array_equal(loaded.vectors(ids), vectors)
    assert loaded.search(vectors[3], 3) == kind.build(ids, vectors, DIMENSION).search(vectors[3], 3)
    empty = kind.build(np.zeros(0, np.int64), np.zeros((0, DIMENSION), np.float32), DIMENSION)
    empty.save(tmp_path / "empty")
    assert len(kind.load(tmp_path / "empty")) == 0 and kind.load(tmp_path / "empty").search(vectors[0], 3) == []


def test_a_damaged_file_is_a_clear_error(kind: type, tmp_path: Path) -> None:
    path = tmp_path / "damaged"
    path.write_bytes(b"not an index" * 10)
    with pytest.raises(IndexCorruptError, match="cannot be read"):
        kind.load(path)


# ---------------------------------------------------------------- approximate kinds at a size where they approximate

APPROXIMATE = ["ivf", "hnsw"]


def _clustered(n: int, dimension: int = 32, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    centres = np.random.default_rng(5).standard_normal((80, dimension)).astype(np.float32)  # shared with the queries
    rng = np.random.default_rng(seed)
    vectors = centres[rng.integers(0, len(centres), n)] + 0.5 * rng.standard_normal((n, dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return rng.choice(2**62, size=n, replace=False).astype(np.int64), vectors


def _recall(index, ids, vectors, queries, allowed=None) -> float:
    found = [
        len({h for h, _ in index.search(q, 10, allowed)} & set(_exact(ids, vectors, q, 10, allowed))) for q in queries
    ]
    return sum(found) / (10 * len(queries))


@pytest.mark.parametrize("name", APPROXIMATE)
def test_approximate_kinds_reach_the_recall_target_with_and_without_a_selector(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, vectors = _clustered(8_000)
    index = kind_of(name).build(ids, vectors, 32)
    queries = _clustered(40, seed=9)[1]
    assert _recall(index, ids, vectors, queries) >= 0.95
    monkeypatch.setattr(kind_of(name), "exact_filter_rows", 0)  # force the selector search
    allowed = np.sort(ids[np.random.default_rng(1).random(len(ids)) < 0.3])
    assert _recall(index, ids, vectors, queries, allowed) >= 0.95
    for size in (1, 5, 30):  # few allowed ids, mostly outside the probed lists / visited graph: retry, then exact
        few = np.sort(ids[-size:])
        hits = index.search(queries[0], 10, few)
        assert [h for h, _ in hits] == _exact(ids, vectors, queries[0], 10, few)


def test_hnsw_removes_by_tombstones_and_rebuilds_past_the_threshold(tmp_path: Path) -> None:
    ids, vectors = _clustered(2_000)
    index = kind_of("hnsw").build(ids[:1_900], vectors[:1_900], 32)
    newer = index.updated(ids[1_900:], vectors[1_900:], ids[:20])
    assert newer._tombstones == 20 and len(newer) == 1_980 and len(index) == 1_900
    assert np.array_equal(newer.ids(), np.sort(ids[20:]))
    assert np.array_equal(newer.vectors(ids[1_950:]), vectors[1_950:])
    for row in range(20):  # a removed id never comes back, even when the query is its own vector
        assert ids[row] not in {h for h, _ in newer.search(vectors[row], 10)}
    newer.save(tmp_path / "v")
    loaded = kind_of("hnsw").load(tmp_path / "v")
    assert loaded._tombstones == 20 and np.array_equal(loaded.ids(), newer.ids())
    assert loaded.search(vectors[500], 5) == newer.search(vectors[500], 5)
    rebuilt = loaded.updated(np.zeros(0, np.int64), np.zeros((0, 32), np.float32), ids[20:300])
    assert rebuilt._tombstones == 0 and len(rebuilt) == 1_700  # 300 > 10 % of 2,000: a fresh graph


def test_ivf_updates_a_memory_mapped_index_by_copying_its_lists(tmp_path: Path) -> None:
    ids, vectors = _clustered(4_000)
    IVFIndex.build(ids[:3_000], vectors[:3_000], 32).save(tmp_path / "v")
    loaded = IVFIndex.load(tmp_path / "v")
    newer = loaded.updated(ids[3_000:3_500], vectors[3_000:3_500], ids[:100])
    assert newer.nlist == loaded.nlist  # no retraining
    assert np.array_equal(newer.ids(), np.sort(ids[100:3_500])) and len(loaded) == 3_000
    newer.save(tmp_path / "w")
    again = IVFIndex.load(tmp_path / "w")
    assert np.array_equal(again.vectors(ids[3_400:3_500]), vectors[3_400:3_500])
    assert np.array_equal(again.vectors(ids[100:200]), vectors[100:200])
    grown = again.updated(ids[3_500:], vectors[3_500:], ids[100:3_400])  # 600 left: 4 sqrt(n) far below nlist
    assert grown.nlist < again.nlist and np.array_equal(grown.ids(), np.sort(np.r_[ids[3_400:]]))


def test_auto_is_flat_when_small_and_ivf_once_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "IVF_MIN_VECTORS", 1_000)
    ids, vectors = _clustered(1_500)
    small = kind_of("auto").build(ids[:900], vectors[:900], 32)
    assert isinstance(small.inner, FlatIndex)
    small.save(tmp_path / "small")
    assert isinstance(kind_of("auto").load(tmp_path / "small").inner, FlatIndex)
    large = small.updated(ids[900:], vectors[900:], ids[:10])  # crosses the threshold: the next file is IVF
    assert isinstance(large.inner, IVFIndex) and np.array_equal(large.ids(), np.sort(ids[10:]))
    large.save(tmp_path / "large")
    loaded = kind_of("auto").load(tmp_path / "large")
    assert isinstance(loaded.inner, IVFIndex) and np.array_equal(loaded.vectors(ids[10:20]), vectors[10:20])
    assert isinstance(loaded.updated(np.zeros(0, np.int64), np.zeros((0, 32)), ids[10:700]).inner, FlatIndex)


def test_index_create_records_the_kind_and_refuses_another(tmp_path: Path, fake_embedder) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, vector_index="hnsw")
    assert index.meta["vector_index"] == "hnsw" and generation.read_meta(index.path)["vector_index"] == "hnsw"
    assert Index.create(tmp_path / "ix", embedder=fake_embedder).meta["vector_index"] == "hnsw"
    with pytest.raises(IndexMismatchError, match="has a hnsw vector index, not ivf"):
        Index.create(tmp_path / "ix", embedder=fake_embedder, vector_index="ivf")
    assert Index.create(tmp_path / "new", embedder=fake_embedder).meta["vector_index"] == "auto"
    with pytest.raises(CitelineError, match="unknown vector index kind 'nope'"):
        Index.create(tmp_path / "other", embedder=fake_embedder, vector_index="nope")


@pytest.mark.parametrize("gather", [0.5, 0.0])
def test_tombstones_among_the_first_answer_are_asked_for_again(
    kind: type, gather: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search first asks the base for few more than k results and a delta for k plus its dead rows
    (``segments.OVERFETCH_MARGIN``, ``DELTA_GATHER_DEAD``): when the ids nearest the query are the removed ones, it
    asks again, and the result is still the exact top k of the live ids."""
    monkeypatch.setattr(segments, "OVERFETCH_MARGIN", 0)
    monkeypatch.setattr(segments, "DELTA_GATHER_DEAD", gather)  # 0.0: every delta with a dead row is gathered
    ids, vectors = _data()
    query = vectors[0]
    nearest = np.argsort(-(vectors @ query), kind="stable")
    base_rows, delta_rows = nearest[:300], nearest[300:]
    index = SegmentedVectors(kind.build(ids[base_rows], vectors[base_rows], DIMENSION))
    index = index.updated(ids[delta_rows], vectors[delta_rows], ids[nearest[:30]])  # the 30 nearest base rows
    index = index.updated(np.zeros(0, np.int64), np.zeros((0, DIMENSION), np.float32), ids[nearest[300:312]])
    index.deltas[0].save(tmp_path / "d0")
    index.deltas[1].save(tmp_path / "d1")
    index = SegmentedVectors(index.base, [Delta.load(tmp_path / f"d{n}", DIMENSION) for n in (0, 1)])
    live = np.ones(len(ids), bool)
    live[nearest[:30]] = live[nearest[300:312]] = False
    for k in (1, 10, 50):
        hits = index.search(query, k)
        assert [h for h, _ in hits] == _exact(ids[live], vectors[live], query, k)


def test_ivf_with_codes_keeps_the_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A large ivf file carries fast-scan codes (``ivf.codes``; the size threshold lowered here): exact ids and
    vectors, exact scores best first, filtered search with k allowed results, tombstones and deltas on top, and a
    compaction that writes codes again."""
    from citeline.vectors.ivf import codes

    monkeypatch.setattr(codes, "MIN_VECTORS", 1_000)
    monkeypatch.setattr(codes, "RERANK", 200)
    ids, vectors = _clustered(6_000)
    IVFIndex.build(ids[:5_000], vectors[:5_000], 32).save(tmp_path / "vectors.1.ivf.faiss")
    base = IVFIndex.load(tmp_path / "vectors.1.ivf.faiss")
    assert base._codes is not None
    assert np.array_equal(base.ids(), np.sort(ids[:5_000])) and np.array_equal(base.vectors(ids[:50]), vectors[:50])
    queries = _clustered(30, seed=9)[1]
    assert _recall(base, ids[:5_000], vectors[:5_000], queries) >= 0.95
    hits = base.search(queries[0], 10)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert np.allclose([s for _, s in hits], base.vectors([h for h, _ in hits]) @ queries[0], atol=1e-5)
    monkeypatch.setattr(IVFIndex, "exact_filter_rows", 0)  # the selector search (float lists)
    allowed = np.sort(ids[:5_000][::9])
    assert _recall(base, ids[:5_000], vectors[:5_000], queries, allowed) >= 0.95
    # Deltas and tombstones over the coded base: a removed id never comes back, added ones are found.
    index = SegmentedVectors(base).updated(ids[5_000:], vectors[5_000:], ids[:300])
    assert all(h not in set(ids[:300].tolist()) for q in vectors[:20] for h, _ in index.search(q, 10))
    assert index.search(vectors[5_500], 1)[0][0] == ids[5_500]
    merged = index.merged_delta()
    written = base.write_updated(
        tmp_path / "vectors.2.ivf.faiss", merged.ids, np.asarray(merged.vectors), merged.removed
    )
    compacted = IVFIndex.load(tmp_path / "vectors.2.ivf.faiss")
    assert written == len(compacted) == 5_700 and compacted._codes is not None
    assert _recall(compacted, ids[300:], vectors[300:], queries) >= 0.95
