"""IVF's nprobe is measured when the lists are trained, so recall holds on vectors that barely cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from citeline.vectors.ivf import CALIBRATION_RECALL, IVFIndex, nprobe_for


def _recall(index: IVFIndex, ids: np.ndarray, data: np.ndarray, queries: np.ndarray) -> float:
    hits = 0
    for query in queries:
        exact = set(ids[np.argsort(-(data @ query), kind="stable")[:10]].tolist())
        hits += len(exact & {chunk_id for chunk_id, _ in index.search(query, 10)})
    return hits / (10 * len(queries))


def test_nprobe_rises_where_the_vectors_spread_and_is_kept_in_the_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    data = rng.standard_normal((20_000, 64)).astype(np.float32)  # no clusters at all: the hardest case for lists
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    ids = np.arange(len(data), dtype=np.int64) * 3 + 1
    index = IVFIndex.build(ids, data, 64)
    measured = int(index._ivf().nprobe)
    assert measured > nprobe_for(index.nlist)
    queries = data[rng.choice(len(data), 30, replace=False)] + 0.05 * rng.standard_normal((30, 64)).astype(np.float32)
    assert _recall(index, ids, data, queries) >= CALIBRATION_RECALL - 0.05
    index.save(tmp_path / "v.ivf.faiss")
    loaded = IVFIndex.load(tmp_path / "v.ivf.faiss")
    assert int(loaded._ivf().nprobe) == measured
    # an update without retraining keeps the measured nprobe
    kept = loaded.updated(np.array([2], dtype=np.int64), data[:1], ids[:5])
    assert int(kept._ivf().nprobe) == measured


def test_clustered_vectors_keep_the_fixed_rule() -> None:
    rng = np.random.default_rng(3)
    centres = rng.standard_normal((50, 64)).astype(np.float32)
    data = centres[rng.integers(0, 50, 20_000)] + 0.05 * rng.standard_normal((20_000, 64)).astype(np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    index = IVFIndex.build(np.arange(len(data), dtype=np.int64), data, 64)
    assert int(index._ivf().nprobe) == nprobe_for(index.nlist)
