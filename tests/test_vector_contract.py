"""The contract every vector index kind passes (txtai's habit: one suite, every backend).

A new kind is one file in ``citeline/vectors/`` and one registry line; this module runs it through the same checks
as ``flat``: exact ids, exact stored vectors, search order, filtered search returning k results whenever k allowed
ids exist, copy-on-write updates, and a save/load round trip.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from citeline.errors import CitelineError, IndexCorruptError
from citeline.vectors import KINDS, kind_of

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


def test_the_registry_names_each_kind_by_its_own_name(kind: type) -> None:
    assert kind_of(kind.kind) is kind
    with pytest.raises(CitelineError, match="unknown vector index kind 'nope'; this citeline has"):
        kind_of("nope")


def test_ids_vectors_and_len_are_exact(kind: type) -> None:
    ids, vectors = _data()
    index = kind.build(ids, vectors, DIMENSION)
    assert len(index) == len(ids) and index.dimension == DIMENSION
    assert np.array_equal(index.ids(), np.sort(ids))
    some = ids[[5, 0, 77]]
    assert np.array_equal(index.vectors(some), vectors[[5, 0, 77]])  # bit for bit, in the order asked
    with pytest.raises(KeyError):
        index.vectors([int(ids.max()) + 1])
    assert index.vectors([]).shape == (0, DIMENSION)


def test_search_finds_the_nearest_vectors_best_first(kind: type) -> None:
    ids, vectors = _data()
    index = kind.build(ids, vectors, DIMENSION)
    for row in (0, 10, 200):
        hits = index.search(vectors[row], 10)
        assert hits[0][0] == ids[row] and hits[0][1] == pytest.approx(1.0, abs=1e-5)
        assert [h for h, _ in hits] == _exact(ids, vectors, vectors[row], 10)
        assert all(a[1] >= b[1] for a, b in itertools.pairwise(hits))
    assert len(index.search(vectors[0], 10_000)) == len(ids)


@pytest.mark.parametrize("size", [1, 7, 60, 300])
def test_filtered_search_returns_k_allowed_results_whenever_k_exist(kind: type, size: int) -> None:
    ids, vectors = _data()
    index = kind.build(ids, vectors, DIMENSION)
    rng = np.random.default_rng(size)
    allowed = np.sort(rng.choice(ids, size, replace=False))
    query = vectors[int(np.flatnonzero(~np.isin(ids, allowed))[0])]  # a query whose best match is not allowed
    hits = index.search(query, 10, allowed)
    assert len(hits) == min(10, size)
    assert {h for h, _ in hits} <= set(allowed.tolist())
    assert [h for h, _ in hits] == _exact(ids, vectors, query, 10, allowed)
    assert index.search(query, 5, np.zeros(0, np.int64)) == []


def test_updated_is_copy_on_write(kind: type) -> None:
    ids, vectors = _data()
    index = kind.build(ids[:300], vectors[:300], DIMENSION)
    removed = ids[:50]
    newer = index.updated(ids[300:], vectors[300:], removed)
    assert np.array_equal(index.ids(), np.sort(ids[:300]))  # the original is unchanged
    assert np.array_equal(newer.ids(), np.sort(ids[50:]))
    assert np.array_equal(newer.vectors(ids[350:360]), vectors[350:360])
    assert newer.search(vectors[10], 1)[0][0] != ids[10]  # a removed id never comes back
    with pytest.raises(ValueError, match="already in the index"):
        index.updated(ids[:1], vectors[:1], np.zeros(0, np.int64))


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
