"""Vector segments (``citeline.vectors.segments``, ``citeline.store.vector_files``): a commit writes one delta
segment and hashes only it; deltas merge past ``MAX_DELTAS`` and compact into a new base past the kind's budget;
damaged or missing segments are found by the quick check and ``verify`` and rebuilt; rankings equal a fresh
index's. (The contract every kind passes in its segmented forms is in ``test_vector_contract.py``.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.errors import IndexCorruptError, IndexRepairedWarning
from citeline.store import generation
from citeline.vectors import segments
from citeline.vectors.flat import FlatIndex
from citeline.vectors.segments import Delta, SegmentedVectors


def _data(n: int, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, 8)).astype(np.float32)
    return rng.choice(10**12, n, replace=False).astype(np.int64), vectors / np.linalg.norm(vectors, axis=1)[:, None]


def test_plan_merges_many_deltas_and_compacts_past_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, vectors = _data(300)
    index = SegmentedVectors(FlatIndex.build(ids[:200], vectors[:200], 8))
    assert segments.plan(SegmentedVectors(FlatIndex.build(ids[:0], vectors[:0], 8))) == segments.COMPACTION
    for number in range(segments.MAX_DELTAS):
        index = index.updated(ids[200 + number : 201 + number], vectors[200 + number : 201 + number], ids[:0])
        assert segments.plan(index) is None
    index = index.updated(ids[250:251], vectors[250:251], ids[:1])
    assert segments.plan(index) == segments.MERGE
    assert segments.delta_budget(index.base) == segments.FLAT_DELTA_MIN  # a tenth of 200 is less
    monkeypatch.setattr(segments, "FLAT_DELTA_MIN", 9)
    monkeypatch.setattr(segments, "FLAT_DELTA_FRACTION", 0.0)
    assert segments.plan(index) == segments.COMPACTION  # 9 delta rows and 1 tombstone
    compacted = index.compacted()
    assert np.array_equal(compacted.ids(), index.ids()) and np.array_equal(compacted.vectors(ids[1:5]), vectors[1:5])
    with pytest.raises(KeyError, match="not in the vector index"):
        index.vectors(ids[:1])  # a tombstone


def test_a_damaged_delta_is_a_clear_error(tmp_path: Path) -> None:
    ids, vectors = _data(10)
    Delta.build(ids, vectors, ids[:0], 8).save(tmp_path / "vdelta.3")
    assert len(Delta.load(tmp_path / "vdelta.3", 8).ids) == 10
    with pytest.raises(IndexCorruptError, match=r"vdelta.3/ is not a delta segment of 4-dimensional vectors"):
        Delta.load(tmp_path / "vdelta.3", 4)
    (tmp_path / "vdelta.3" / "ids.npy").write_bytes(b"garbage")
    with pytest.raises(IndexCorruptError, match=r"vdelta.3/ cannot be read"):
        Delta.load(tmp_path / "vdelta.3", 8)


def _edit(docs: Path, step: int) -> None:
    (docs / f"added-{step}.md").write_text(f"# Added {step}\n\nThe garrison left the river bridge at dawn {step}.\n")
    if step % 2:
        (docs / f"added-{step - 1}.md").unlink()


@pytest.fixture
def grown(tmp_path: Path, seeds_dir: Path) -> tuple[Index, Path]:
    docs = tmp_path / "docs"
    shutil.copytree(seeds_dir, docs)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    return index, docs


def test_a_commit_writes_one_delta_and_carries_the_other_checksums(grown: tuple[Index, Path]) -> None:
    index, docs = grown
    base = index.path / "vectors.1.faiss"
    inode = base.stat().st_ino
    _edit(docs, 0)
    index.ingest([docs])
    meta = generation.read_meta(index.path)
    assert meta["vector_base"] == "vectors.1.faiss" and base.stat().st_ino == inode  # the base is untouched
    assert [item["name"] for item in meta["vector_deltas"]] == ["vdelta.2"]
    _edit(docs, 1)  # removes added-0.md: a tombstone in the delta of generation 3
    index.ingest([docs])
    later = generation.read_meta(index.path)
    assert later["vector_deltas"][0] == meta["vector_deltas"][0] and later["faiss_sha256"] == meta["faiss_sha256"]
    assert [item["name"] for item in later["vector_deltas"]] == ["vdelta.2", "vdelta.3"]
    vectors = index.snapshot().vectors
    assert isinstance(vectors, SegmentedVectors) and len(vectors.deltas) == 2
    assert index.verify().ok


def test_merges_and_compactions_keep_rankings_equal_to_a_fresh_index(
    grown: tuple[Index, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, docs = grown
    monkeypatch.setattr(segments, "MAX_DELTAS", 2)
    monkeypatch.setattr(segments, "FLAT_DELTA_MIN", 3)
    monkeypatch.setattr(segments, "FLAT_DELTA_FRACTION", 0.0)
    seen = set()
    for step in range(8):
        _edit(docs, step)
        index.ingest([docs])
        meta = generation.read_meta(index.path)
        seen.add((meta["vector_base"], len(meta["vector_deltas"])))
        names = {p.name for p in index.path.glob("v*.*")}
        assert names == {meta["vector_base"], *(item["name"] for item in meta["vector_deltas"])}  # no leftovers
        assert index.verify().ok
    assert any(count == 1 for _, count in seen) and len({base for base, _ in seen}) > 1  # merged, compacted
    fresh = Index.create(tmp_path / "fresh", embedder=HashEmbedder())
    fresh.ingest([docs])
    for query in ("garrison river", "quokka census", "dawn 7"):
        got = index.search(query, k=10, mode="dense", collapse=False)
        expected = fresh.search(query, k=10, mode="dense", collapse=False)
        assert [(r.chunk_id, r.score) for r in got] == [(r.chunk_id, r.score) for r in expected]


@pytest.mark.parametrize("damage", ["missing", "altered"])
def test_a_damaged_delta_is_found_and_rebuilt_on_open(grown: tuple[Index, Path], damage: str) -> None:
    index, docs = grown
    _edit(docs, 0)
    index.ingest([docs])
    delta = index.path / "vdelta.2"
    if damage == "missing":
        shutil.rmtree(delta)
    else:
        vectors = np.load(delta / "vectors.npy")
        np.save(delta / "vectors.npy", vectors * 2)
    report = index.verify()
    assert not report.ok and any("vdelta.2" in problem for problem in report.problems)
    with pytest.warns(IndexRepairedWarning, match="vdelta.2"):
        reopened = Index.open(index.path, embedder=HashEmbedder())
    assert reopened.verify().ok and not delta.exists()
    assert generation.read_meta(index.path)["vector_deltas"] == []


def test_orphan_deltas_of_uncommitted_generations_are_removed(grown: tuple[Index, Path]) -> None:
    index, docs = grown
    ids, vectors = _data(3)
    Delta.build(ids, vectors, ids[:0], 8).save(index.path / "vdelta.9")
    (index.path / "vdelta.4.tmp").mkdir()
    assert {p.name for p in generation.orphan_files(index.path, 1)} == {"vdelta.9", "vdelta.4.tmp"}
    _edit(docs, 0)
    index.ingest([docs])
    assert sorted(p.name for p in index.path.glob("v*.*")) == ["vdelta.2", "vectors.1.faiss"]
