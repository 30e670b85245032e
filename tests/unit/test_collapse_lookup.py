"""Collapse's lookup of copies of a quote (citeline.lexical.lookup): the chunks sharing a text's rare terms, over
segments with deletions, equal the definition computed directly, chunk for chunk."""

from __future__ import annotations

import numpy as np
import pytest

from citeline.lexical.analyzer import analyze
from citeline.lexical.lookup import MIN_SHARED_TERMS, RARE_AT_MOST, RARE_FLOOR
from citeline.lexical.scoring import term_hashes
from citeline.lexical.segments import Part, Segment, SegmentedIndex

WORDS = [f"w{n}x" for n in range(400)]


def corpus(seed: int) -> tuple[SegmentedIndex, list[str], dict[int, str], list[str]]:
    """Three segments of Zipf-worded texts (some terms past RARE_FLOOR), some chunks deleted, one id replaced in a
    later segment; the index, texts to look up, every live chunk's text, and every text the segments hold (deleted
    ones too: rarity counts them)."""
    rng = np.random.default_rng(seed)
    weights = 1 / np.arange(1, len(WORDS) + 1)
    weights /= weights.sum()

    def text() -> str:
        return " ".join(rng.choice(WORDS, size=int(rng.integers(8, 40)), p=weights))

    texts = {chunk_id: text() for chunk_id in rng.choice(10**9, size=360, replace=False).tolist()}
    ids = sorted(texts)
    groups = [ids[:150], ids[150:300], ids[300:]]
    replaced = ids[5]  # deleted from the first segment, its new version in the last
    held = [texts[i] for group in groups for i in group]
    texts[replaced] = text()
    held.append(texts[replaced])
    groups[2] = sorted([*groups[2], replaced])
    parts = []
    for number, group in enumerate(groups):
        segment = Segment.build(np.array(group, np.int64), [texts[i] for i in group] if number else held[:150])
        part = Part(f"seg.{number}", segment)
        if number == 0:
            part = part.without(np.array(sorted([replaced, *ids[10:20]]), np.int64))
        parts.append(part)
    for gone in ids[10:20]:
        del texts[gone]
    # Texts to look up: copies of live chunks' sentences (some cut, some with words changed) and random ones.
    live = sorted(texts)
    queries = []
    for chunk_id in rng.choice(live, size=12, replace=False).tolist():
        words = texts[chunk_id].split()
        start = int(rng.integers(0, max(1, len(words) - 8)))
        copy = words[start : start + int(rng.integers(6, 20))]
        if rng.random() < 0.5:
            copy[int(rng.integers(0, len(copy)))] = str(rng.choice(WORDS))
        queries.append(" ".join(copy))
    queries += [text() for _ in range(4)] + ["", "w1x"]
    return SegmentedIndex(parts), queries, texts, held


def direct(
    index: SegmentedIndex,
    analyzed: dict[int, set[str]],
    every: list[set[str]],
    query: str,
    k: int,
    terms: int,
    min_share: float,
    allowed: np.ndarray | None,
) -> list[int]:
    """The lookup's definition, chunk by chunk: ``analyzed``, each live chunk's terms; ``every``, the terms of every
    document the segments hold (document frequency counts deleted ones too)."""
    count = len(index.chunk_ids)
    permitted = None if allowed is None else set(allowed.tolist())
    distinct = sorted(set(analyze([query])[0]))
    hashes = dict(zip(distinct, term_hashes(distinct).tolist(), strict=True))
    frequency = {term: sum(term in words for words in every) for term in hashes}
    usable = [t for t in hashes if 1 < frequency[t] <= max(RARE_AT_MOST * count, RARE_FLOOR)]
    chosen = sorted(usable, key=lambda t: (frequency[t], hashes[t]))[:terms]
    if len(chosen) < MIN_SHARED_TERMS:
        return []
    idf = {t: np.log1p((count - frequency[t] + 0.5) / (frequency[t] + 0.5)) for t in chosen}
    total = np.bincount(np.zeros(len(chosen), np.int64), weights=[idf[t] for t in chosen])[0]
    found = []
    for position, chunk_id in enumerate(index.chunk_ids.tolist()):
        if permitted is not None and chunk_id not in permitted:
            continue
        held = [idf[t] for t in chosen if t in analyzed[chunk_id]]
        if not held:
            continue
        score = np.bincount(np.zeros(len(held), np.int64), weights=held)[0]
        if score >= min_share * total:
            found.append((-score, position, chunk_id))
    return [chunk_id for _, _, chunk_id in sorted(found)[:k]]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("k", "terms", "min_share"), [(4, 8, 0.6), (10, 3, 0.5), (3, 8, 0.0), (5, 5, 1.0)])
def test_lookup_equals_its_definition(seed: int, k: int, terms: int, min_share: float) -> None:
    index, queries, texts, held = corpus(seed)
    analyzed = {chunk_id: set(words) for chunk_id, words in zip(texts, analyze(list(texts.values())), strict=True)}
    every = [set(words) for words in analyze(held)]
    allowed = np.sort(np.random.default_rng(seed).choice(index.chunk_ids, size=200, replace=False))
    for restrict in (None, allowed):
        found = index.sharing_rare_terms(queries, k, terms=terms, min_share=min_share, allowed=restrict)
        assert found == [direct(index, analyzed, every, q, k, terms, min_share, restrict) for q in queries]
    assert any(found), "the lookups find chunks"


def test_lookup_analyses_words_as_the_lexical_index_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # Words are analysed once each and kept (a full cache is replaced): the terms stay analyze()'s, ASCII or not.
    from citeline.lexical import lookup
    from citeline.lexical.analyzer import TOKEN_PATTERN

    texts = [
        "".join(chr(c) for c in range(128)) * 2,
        'The soldiers\' "mud" -- e.g. x1 1x a_b _ Running runners RAN',
        "Café naïve Ünïcode words and the same words again: running",
    ]
    for text in texts:
        assert lookup._words(text) == set(TOKEN_PATTERN.findall(text.lower()))
    index, *_ = corpus(0)
    rare = lookup.RareTermLookup(index._lookup.scorer)
    expected = [np.array(sorted(set(term_hashes(words).tolist())), dtype=np.uint64) for words in analyze(texts)]
    monkeypatch.setattr(lookup, "HASH_CACHE", 20)  # every call overflows the cache
    for _ in range(2):
        got = rare._text_hashes(texts)
        assert [found.tolist() for found in got] == [found.tolist() for found in expected]
