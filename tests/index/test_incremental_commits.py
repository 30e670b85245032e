"""Commits that cost what changed: a generation is the previous one's vector file updated with the delta, and its
lexical segments plus a delta segment, merged past a threshold; rankings equal a build from scratch."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.lexical import merge, segments
from citeline.lexical.analyzer import LexicalIndex
from citeline.lexical.segments import Part, Segment, SegmentedIndex, merge_plan
from citeline.store import catalog, generation

WORDS = ["river", "bridge", "soldier", "letter", "harvest", "winter", "archive", "garrison", "famine", "treaty"]
WORDS += ["ledger", "monastery", "plague", "siege", "the", "of", "and", "running", "runs", "ran"]
QUERIES = ("river bridge", "soldier soldier running", "famine treaty monastery", "the", "zyzzyva")


def _corpus(size: int, seed: int = 1) -> tuple[np.ndarray, list[str]]:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30))) for _ in range(size)]
    return np.array(rng.sample(range(10**12), size), dtype=np.int64), texts


def _by_id(index: LexicalIndex, query: str) -> dict[int, float]:
    return dict(zip(np.asarray(index.chunk_ids).tolist(), index.scores(query).tolist(), strict=True))


def _assert_same_scores(got: LexicalIndex, expected: LexicalIndex) -> None:
    for query in QUERIES:
        a, b = _by_id(got, query), _by_id(expected, query)
        assert a.keys() == b.keys()
        assert np.allclose([a[key] for key in b], list(b.values()), rtol=1e-5, atol=1e-6), query


def test_segments_with_deletions_score_like_one_bm25s_index_of_the_live_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, texts = _corpus(500)
    _assert_same_scores(SegmentedIndex.build(ids, texts), LexicalIndex.build(ids, texts))
    parts = [Part(None, Segment.build(ids[a:b], texts[a:b])) for a, b in ((0, 200), (200, 400), (400, 500))]
    removed = np.sort(ids[random.Random(2).sample(range(500), 100)])
    parts = [part.without(removed) for part in parts]
    live = ~np.isin(ids, removed)
    expected = LexicalIndex.build(ids[live], [text for text, keep in zip(texts, live, strict=True) if keep])
    _assert_same_scores(SegmentedIndex(parts), expected)
    monkeypatch.setattr(merge, "GROUP_POSTINGS", 2_000)  # several ranges of terms, merged one by one
    merged = merge.write_merged(parts, tmp_path / "merged")
    _assert_same_scores(SegmentedIndex([Part(None, merged)]), expected)
    assert len(merged) == int(live.sum())
    # Array for array (and byte for byte on disk) the segment built from the live chunks' texts.
    built = Segment.build(ids[live], [text for text, keep in zip(texts, live, strict=True) if keep])
    built.save(tmp_path / "built")
    for name in segments.SEGMENT_ARRAYS:
        assert (tmp_path / "merged" / f"{name}.npy").read_bytes() == (tmp_path / "built" / f"{name}.npy").read_bytes()


def test_merge_plan_merges_a_full_tier_and_compacts_when_many_chunks_are_deleted() -> None:
    ids, texts = _corpus(2000)
    base = Part(None, Segment.build(ids[:1000], texts[:1000]))
    small = [
        Part(None, Segment.build(ids[1000 + 5 * n : 1005 + 5 * n], texts[1000 + 5 * n : 1005 + 5 * n]))
        for n in range(segments.MERGE_WIDTH)
    ]
    assert merge_plan([base, *small[:-1]]) is None
    assert merge_plan([base, *small]) == ("merge", list(range(1, segments.MERGE_WIDTH + 1)))
    deleted = base.without(np.sort(ids[:400]))
    assert merge_plan([deleted, small[0]]) == ("compaction", [0, 1])


@pytest.fixture
def docs(tmp_path: Path, seeds_dir: Path) -> Path:
    copy = tmp_path / "docs"
    shutil.copytree(seeds_dir, copy)
    return copy


def _edit(docs: Path, step: int) -> None:
    files = sorted(p for p in docs.rglob("*") if p.is_file())
    files[step % len(files)].write_text(f"# Note {step}\n\nA quokka census on Rottnest island, pass {step}.\n")
    (docs / f"added-{step}.md").write_text(f"# Added {step}\n\nThe garrison left the river bridge at dawn {step}.\n")
    if step % 3 == 2:
        (docs / f"added-{step - 1}.md").unlink()


def test_commits_are_incremental_and_rank_like_a_fresh_index(tmp_path: Path, docs: Path, monkeypatch) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])

    def no_full_reads(*args: object, **kwargs: object) -> None:
        raise AssertionError("an incremental commit read every vector from the catalog")

    with monkeypatch.context() as patched:
        patched.setattr(catalog, "vector_batches", no_full_reads)
        patched.setattr(segments, "MERGE_WIDTH", 2)
        for step in range(5):
            _edit(docs, step)
            index.ingest([docs])
    assert index.verify().ok
    meta = generation.read_meta(index.path)
    names = {p.name for p in index.path.glob("seg.*")}
    assert names == set(meta["lexical_segments"])  # merged-away segments were removed
    assert len(names) <= 3

    fresh = Index.create(tmp_path / "fresh", embedder=HashEmbedder())
    fresh.ingest([docs])
    _assert_same_scores(index.snapshot().lexical, fresh.snapshot().lexical)
    for mode in ("lexical", "dense", "hybrid"):
        got = index.search("garrison river quokka", k=10, mode=mode, collapse=False)
        expected = fresh.search("garrison river quokka", k=10, mode=mode, collapse=False)
        assert [r.score for r in got] == pytest.approx([r.score for r in expected], abs=1e-5)
        assert _tie_groups(got) == _tie_groups(expected), mode


def _tie_groups(results: list) -> list[frozenset[int]]:
    """The ranking as groups of equal scores (the HashEmbedder gives exact ties, which FAISS may return in either
    order, and the chunk ids depend on the temporary path). The last group is cut by k, so only its size counts."""
    groups: dict[float, set[int]] = {}
    for result in results:
        groups.setdefault(round(result.score, 5), set()).add(result.chunk_id)
    ordered = [frozenset(ids) for _, ids in sorted(groups.items(), reverse=True)]
    return [*ordered[:-1], frozenset({len(ordered[-1])})] if ordered else []


def test_rebuild_is_a_full_compaction_into_one_segment(tmp_path: Path, docs: Path) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    _edit(docs, 0)
    index.ingest([docs])
    before = [r.chunk_id for r in index.search("garrison river", k=5, mode="lexical")]
    assert index.rebuild().ok
    assert len(list(index.path.glob("seg.*"))) == 1
    assert [r.chunk_id for r in index.search("garrison river", k=5, mode="lexical")] == before


def test_a_damaged_segment_is_found_and_rebuilt_on_open(tmp_path: Path, docs: Path) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    segment = next(index.path.glob("seg.*"))
    target = segment / "tfs.npy"
    data = bytearray(target.read_bytes())
    data[-1] ^= 0x01
    target.write_bytes(bytes(data))
    report = Index.open(index.path, repair=False).verify()
    assert not report.ok and any(segment.name in problem for problem in report.problems)
    with pytest.warns(Warning, match="rebuilt"):
        reopened = Index.open(index.path, embedder=HashEmbedder())
    assert reopened.verify().ok and not segment.exists()
