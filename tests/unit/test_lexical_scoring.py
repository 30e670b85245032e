"""BM25 queries that do not rank every chunk (citeline.lexical.scoring): the top k and the scores of given chunks are
those of scoring every posting (``SegmentedIndex.scores``), bit for bit, with deletions, filters and shard-wide
statistics."""

from __future__ import annotations

import random

import numpy as np
import pytest

from citeline.lexical.analyzer import top_positions
from citeline.lexical.segments import Part, Segment, SegmentedIndex, Statistics

WORDS = ["river", "bridge", "soldier", "letter", "harvest", "winter", "archive", "garrison", "famine", "treaty"]
WORDS += ["ledger", "monastery", "plague", "siege", "the", "of", "running", "runs", "zebra", "quartz"]
QUERIES = ("river bridge", "soldier soldier running", "famine treaty monastery zebra", "the", "zyzzyva", "quartz")


def _segmented(seed: int = 3) -> SegmentedIndex:
    rng = random.Random(seed)
    # Skewed word frequencies, so that ties and common terms both occur.
    texts = [" ".join(rng.choices(WORDS, weights=range(20, 0, -1), k=rng.randint(0, 40))) for _ in range(900)]
    ids = np.array(rng.sample(range(10**12), len(texts)), dtype=np.int64)
    parts = [Part(None, Segment.build(ids[a:b], texts[a:b])) for a, b in ((0, 500), (500, 850), (850, 900))]
    removed = np.sort(ids[rng.sample(range(len(texts)), 150)])
    return SegmentedIndex([part.without(removed) for part in parts])


def _full_top(index: SegmentedIndex, query: str, k: int, allowed: np.ndarray | None, statistics=None):
    scores = index.scores(query, statistics)
    positions = None if allowed is None else np.searchsorted(index.chunk_ids, allowed)
    return [(int(index.chunk_ids[p]), float(scores[p])) for p in top_positions(scores, positions, len(scores))][
        :k
    ], scores


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    # Equal scores bit for bit; chunks of equal score ordered by chunk id, except that a tie across the k-th place may
    # keep another chunk of the same score.
    want = [pair for pair in want if pair[1] > 0]
    assert [score for _, score in got] == [score for _, score in want]
    last = want[-1][1] if want else None
    assert [pair for pair in got if pair[1] != last] == sorted(
        (pair for pair in want if pair[1] != last), key=lambda pair: (-pair[1], pair[0])
    )


@pytest.mark.parametrize("k", [1, 5, 40, 2000])
def test_top_k_and_scores_of_equal_scoring_every_posting(k: int) -> None:
    index = _segmented()
    rng = np.random.default_rng(k)
    allowed = np.sort(rng.choice(index.chunk_ids, 120, replace=False))
    for query in QUERIES:
        for subset in (None, allowed):
            want, scores = _full_top(index, query, k, subset)
            _same(index.search(query, k, subset), want)
        ids = np.concatenate([rng.choice(index.chunk_ids, 60), [1, 2]])  # 1, 2: not held -> 0
        expected = np.where(
            np.isin(ids, index.chunk_ids), scores[np.searchsorted(index.chunk_ids, ids) % len(scores)], 0
        )
        assert index.scores_of(query, ids).tobytes() == expected.astype(np.float32).tobytes()


def test_shard_wide_statistics_score_a_part_as_one_index_would() -> None:
    index = _segmented()
    other = _segmented(seed=4)
    for query in QUERIES:
        statistics = index.statistics(query) + other.statistics(query)
        assert isinstance(statistics, Statistics)
        want, scores = _full_top(index, query, 7, None, statistics)
        _same(index.search(query, 7, None, statistics), want)
        ids = index.chunk_ids[::7]
        assert index.scores_of(query, ids, statistics).tobytes() == scores[::7].tobytes()


def test_ties_across_parts_go_by_chunk_id_whatever_part_holds_them() -> None:
    # The same few texts in every part, ids interleaved across parts: many chunks tie at every score, and the
    # one ranking over all parts must keep the lowest chunk ids of a tie at the k-th place, as one part would.
    rng = random.Random(11)
    texts = [rng.choice(["river bridge", "bridge", "river river bridge", "famine", "the treaty"]) for _ in range(300)]
    ids = np.array(rng.sample(range(10**6), len(texts)), dtype=np.int64)
    parts = [Part(None, Segment.build(ids[a::3], texts[a::3])) for a in range(3)]
    index = SegmentedIndex(parts)
    removed = np.sort(ids[:40])
    deleted = SegmentedIndex([part.without(removed) for part in parts])
    for segmented in (index, deleted):
        for query in ("river bridge", "bridge", "famine treaty"):
            for k in (1, 7, 50, 299):
                want, _ = _full_top(segmented, query, k, None)
                got = segmented.search(query, k)
                assert got == sorted(want, key=lambda pair: (-pair[1], pair[0]))[: len(got)]
                assert len(got) == min(k, len([pair for pair in want if pair[1] > 0]))


def test_ranked_scores_the_candidates_hybrid_fusion_reads_as_scores_of_does() -> None:
    from citeline.query.stages import lexical_values as _lexical_values

    index = _segmented()
    rng = np.random.default_rng(5)
    removed = index.parts[0].segment.chunk_ids[~index.parts[0].live]  # deleted: not held, score 0
    allowed = np.sort(rng.choice(index.chunk_ids, 100, replace=False))
    for query in QUERIES:
        for subset in (None, allowed):
            top, score = index.ranked(query, 30, subset)
            assert top == index.search(query, 30, subset)
            others = np.concatenate([rng.choice(index.chunk_ids, 40), removed[:5], [1, 2]])
            ids = np.unique(np.concatenate([[chunk_id for chunk_id, _ in top], others]).astype(np.int64))
            assert score(ids).tobytes() == index.scores_of(query, ids).tobytes()
            assert not score(removed).any()
        top_ids = np.array([chunk_id for chunk_id, _ in top], dtype=np.int64)
        top_scores = np.array([value for _, value in top], dtype=np.float64)
        glued = _lexical_values(ids, top_ids, top_scores, score)
        assert glued.tobytes() == index.scores_of(query, ids).astype(np.float64).tobytes()
