"""``citeline rebuild`` in bounded memory (``store/full_build.py``): the vector files written span by span are
byte for byte those of the in-memory builds, the lexical segment merged from batches is array for array the one
built from every text, and a rebuilt index ranks exactly as before with every vector kind."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.lexical.segments import SEGMENT_ARRAYS, Segment, SegmentedIndex, load_folder
from citeline.store import catalog, full_build, generation
from citeline.store.lexical_files import bm25_path
from citeline.vectors import flat_files
from citeline.vectors.flat import FlatIndex
from citeline.vectors.ivf import IVFIndex, build

QUERIES = ("garrison river bridge", "quokka census island", "the", "dawn pass", "Rottnest")


def _clustered(count: int, dimension: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dimension)).astype(np.float32)
    data = centres[rng.integers(0, 20, count)] + 0.3 * rng.normal(size=(count, dimension)).astype(np.float32)
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize(("kind", "writer"), [(FlatIndex, flat_files.write_built), (IVFIndex, build.write_built)])
@pytest.mark.parametrize("count", [0, 1, 300, 6000])
def test_streamed_vector_files_are_the_in_memory_builds(tmp_path: Path, kind, writer, count: int) -> None:
    dimension = 16
    vectors = _clustered(count, dimension)
    ids = np.random.default_rng(3).choice(10 * count + 1, count, replace=False).astype(np.int64)
    order = np.argsort(ids)
    kind.build(ids[order], vectors[order], dimension).save(tmp_path / "memory")  # as the catalog gave them
    reads: list[int] = []

    def rows(positions: np.ndarray) -> np.ndarray:
        reads.append(len(positions))
        return vectors[order[positions]]

    if count == 0 and kind is IVFIndex:
        return  # a rebuild of no vectors uses the in-memory build (nothing to stream)
    assert writer(tmp_path / "streamed", ids[order], rows, dimension, span_rows=1000) == count
    assert (tmp_path / "streamed").read_bytes() == (tmp_path / "memory").read_bytes()
    assert max(reads, default=0) <= max(1000, 40 * 200)  # a span, or IVF's training sample, never every vector


def _docs(root: Path, count: int = 40) -> Path:
    root.mkdir()
    words = [
        "garrison",
        "river",
        "bridge",
        "quokka",
        "census",
        "island",
        "dawn",
        "pass",
        "rottnest",
        "ferry",
        "lighthouse",
        "salt",
    ]
    for number in range(count):
        body = " ".join(words[(number * 5 + step * 3) % len(words)] for step in range(60 + number % 17))
        (root / f"note-{number:02}.md").write_text(f"# Note {number}\n\n{body} number{number}.\n")
    return root


def _results(index: Index) -> dict[tuple[str, str], list[tuple[int, float]]]:
    found = {}
    for query in QUERIES:
        for mode in ("lexical", "dense", "hybrid"):
            hits = index.search(query, k=25, mode=mode, collapse=False)
            found[(query, mode)] = [(hit.chunk_id, round(hit.score, 5)) for hit in hits]
    return found


def _same_ranking(got: list[tuple[int, float]], expected: list[tuple[int, float]]) -> bool:
    """The same scores in the same order, and the same ids at each score but the last (the hash embedder's
    vectors tie often: which of tied passages comes first, or makes the cut at k, depends on storage order)."""
    if [score for _, score in got] != [score for _, score in expected]:
        return False
    last = expected[-1][1] if expected else None
    tied = {score for _, score in expected if score != last}
    return all(
        sorted(i for i, s in got if s == score) == sorted(i for i, s in expected if s == score) for score in tied
    )


def _index(tmp_path: Path, vector_index: str) -> Index:
    docs = _docs(tmp_path / "docs")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), vector_index=vector_index)
    index.ingest([docs], commit_every=10)  # several commits: vector deltas, several lexical segments
    (docs / "note-03.md").write_text("# Note 3\n\nThe garrison crossed the river bridge at dawn.\n")
    index.ingest([docs])
    return index


@pytest.mark.parametrize("vector_index", ["auto", "flat", "ivf", "hnsw"])
def test_a_rebuild_in_batches_ranks_exactly_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vector_index: str
) -> None:
    index = _index(tmp_path, vector_index)
    before = _results(index)
    with catalog.connect(index.path, read_only=True) as connection:
        ids, texts = catalog.lexical_texts(connection)
    # The in-memory build (every vector and text at once) on a copy: the reference.
    reference = tmp_path / "reference"
    shutil.copytree(index.path, reference)
    with monkeypatch.context() as patched:
        patched.setattr(full_build, "STREAMED", {})
        patched.setattr(full_build, "TEXT_BATCH", 10**9)
        assert Index.open(reference, embedder=HashEmbedder()).rebuild().ok
    # Batches far smaller than the index, so that the rebuild spills, reads spans and merges segments.
    monkeypatch.setattr(full_build, "VECTOR_BATCH", 7)
    monkeypatch.setattr(full_build, "TEXT_BATCH", 9)
    monkeypatch.setattr(flat_files, "SPAN_ROWS", 11)
    monkeypatch.setattr(build, "SPAN_ROWS", 11)
    report = index.rebuild()
    assert report.ok, report
    after = _results(Index.open(index.path, embedder=HashEmbedder()))
    assert after == _results(Index.open(reference, embedder=HashEmbedder()))
    assert all(_same_ranking(after[key], before[key]) for key in before), [
        key for key in before if not _same_ranking(after[key], before[key])
    ]
    meta = generation.read_meta(index.path)
    assert meta["vector_deltas"] == [] and len(meta["lexical_segments"]) == 1
    assert meta["faiss_sha256"] == generation.read_meta(reference)["faiss_sha256"]  # the same vector file
    lexical = load_folder(bm25_path(index.path, int(meta["generation"])))
    assert isinstance(lexical, SegmentedIndex) and len(lexical.parts) == 1
    expected = Segment.build(ids, texts)
    for name in SEGMENT_ARRAYS:
        assert np.array_equal(getattr(lexical.parts[0].segment, name), getattr(expected, name)), name
    leftovers = [p.name for p in index.path.iterdir() if ".tmp" in p.name or "rebuild" in p.name]
    assert leftovers == []
