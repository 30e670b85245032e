"""BM25 queries that do not rank every chunk (citeline.lexical_query): the top k and the scores of given chunks are
those of scoring every posting (``SegmentedIndex.scores``), bit for bit, with deletions, filters and shard-wide
statistics."""

from __future__ import annotations

import random

import numpy as np
import pytest

from citeline.lexical import top_positions
from citeline.lexical_segments import Part, Segment, SegmentedIndex, Statistics

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
