"""Torch embedding batches sized by a token budget (citeline.model.embedding.token_batches)."""

from __future__ import annotations

from citeline.model.embedding import token_batches


def test_every_text_once_shortest_first_within_the_budget() -> None:
    lengths = [50, 5, 200, 7, 60, 256, 9, 100, 5, 30]
    batches = token_batches(lengths, 256)
    flat = [position for batch in batches for position in batch]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[p] for p in flat] == sorted(lengths)
    for batch in batches:
        assert len(batch) * max(lengths[p] for p in batch) <= 256


def test_long_texts_get_smaller_batches_than_short_ones() -> None:
    lengths = [10] * 100 + [200] * 100
    sizes = {lengths[batch[0]]: len(batch) for batch in token_batches(lengths, 2048)}
    assert sizes == {10: 100, 200: 10}


def test_a_text_above_the_budget_is_a_batch_of_its_own() -> None:
    assert token_batches([300, 3, 400], 256) == [[1], [0], [2]]
    assert token_batches([], 256) == []
