"""Shared statements between two passages: the same quote or statement, however each outlet punctuated, quoted,
attributed or slightly reworded it (rule 2 of ``citeline.query.collapse``).

Words are normalised (case, Unicode forms and accents, punctuation and quote marks ignored) and stand as their
hashes; two passages are candidates when they share :data:`MIN_SHARED_SHINGLES` runs of
:data:`SHINGLE` words (:func:`quote_partners`, a cheap prefilter over a search's hits), and a candidate pair shares
a statement when an alignment of their words (rapidfuzz's Indel alignment, C++, a few microseconds a pair) holds a
chain of at least :data:`MIN_SHARED_WORDS` matching words with gaps of at most :data:`MAX_GAP` words (an inserted
"he said", a dropped "now", "did not" against "didn't") and at least :data:`MIN_DENSITY` of the chain's words
matching (:func:`shared_statement`). On tests/data/quotes (31 pairs sharing a quote, 31 same-topic pairs sharing
none; bench/collapse_eval.py) every setting with MAX_GAP 3-4, MIN_SHARED_WORDS 8-10 and MIN_DENSITY 0.6-0.7 finds
all 31 quotes and no false pair. MIN_SHARED_WORDS sits at the top of that range so that templated one-line reports
that differ only in a number (9 matching words, tests/index/test_collapse.py) stay apart.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from rapidfuzz.distance import Indel

#: The fewest matching words that make two passages report the same statement: a full clause, more than the stock
#: phrases ("the defence ministry said on Monday that") that reports of one event share.
MIN_SHARED_WORDS = 10
#: The most words skipped on either side between two matching runs of one shared statement.
MAX_GAP = 3
#: The least share of a shared statement's words (on the longer side) that match.
MIN_DENSITY = 0.65
#: A pair of hits is aligned only if they share this many distinct SHINGLE-word runs (a cheap numpy prefilter):
#: 4-word runs, 2 of them, keep every pair of the evaluation set and send only a few pairs of 40 SciFact candidates (a
#: query's worth) to alignment; the whole collapse then costs 7.0 ms CPU against 7.9-9.1 ms for the previous
#: exact-12-word rule on the same hits (bench/collapse_eval.py, 2 busy shared cores).
MIN_SHARED_SHINGLES = 2
SHINGLE = 4

_WORD = re.compile(r"[\w\u0300-\u036f]+")  # words, with combining accents (NFD text)
#: For ASCII text, where ``\w`` is ``[A-Za-z0-9_]``: every other character to a space, capitals to lower case.
_ASCII_WORDS = str.maketrans({c: (chr(c).lower() if chr(c).isalnum() or chr(c) == "_" else " ") for c in range(128)})


#: A text and its words, each as the Python hash of its normalised form (equal words, equal ids; two distinct words
#: of one search share a 64-bit hash with probability ~1e-14), their character spans found again only for the texts
#: that match.
Words = tuple[str, list[int]]


def _normalised(word: str) -> str:
    if word.isascii():
        return word.lower()
    return _folded(word)


@lru_cache(maxsize=65_536)
def _folded(word: str) -> str:
    # A chunk of a scientific paper is rarely pure ASCII (a Greek letter, a dash, a degree sign); its non-ASCII
    # words are few and recur, so their folded forms are kept.
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c)).casefold()


def text_words(text: str) -> Words:
    """The normalised words of ``text``: case-folded, Unicode-compatibility-decomposed, accents dropped.

    ASCII text (83% of SciFact's hits) is split with ``str.translate`` and ``split`` (18 us an 840-character
    chunk, ``findall`` 45), and the words become ids by ``map(hash, ...)`` (a C loop), not by numbering them through
    a per-search vocabulary dict (``setdefault`` in a Python loop, 15-35 us); ``finditer`` with a span per word
    cost five times as much, and the spans are needed only for the rare pairs that share a
    statement. Hashes need no shared state, so any two texts' words compare.
    """
    if text.isascii():
        words = text.translate(_ASCII_WORDS).split()  # the same words as _WORD.findall(text.lower())
    else:
        words = [w.lower() if w.isascii() else _folded(w) for w in _WORD.findall(text)]
    return text, list(map(hash, words))


def words_of(*texts: str) -> list[Words]:
    """:func:`text_words` of each text (to compare texts with :func:`shared_statement`)."""
    return [text_words(text) for text in texts]


def word_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each word of ``text``, as :func:`text_words` counts them."""
    return [match.span() for match in _WORD.finditer(text)]


def shared_statement(a: Words, b: Words) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Where texts ``a`` and ``b`` (their :func:`text_words`) report the same words, if they do.

    Aligns the two word sequences (longest common subsequence), chains matching runs separated by at most
    :data:`MAX_GAP` words on either side, and returns the character span of the longest chain in each text, from
    its first matching word to its last, if it has :data:`MIN_SHARED_WORDS` matches and :data:`MIN_DENSITY`.
    """
    (a_text, a_ids), (b_text, b_ids) = a, b
    if len(a_ids) < MIN_SHARED_WORDS or len(b_ids) < MIN_SHARED_WORDS:
        return None
    best: tuple[int, tuple[int, int], tuple[int, int]] | None = None
    chain: list[tuple[int, int, int]] = []

    def close() -> None:
        nonlocal best
        # A lone word at either end that only an insertion separates from the rest ('mud," said' against 'mud,"
        # he said') is attribution, not the shared words; one past a substituted word ("We cannot keep" against
        # "We can't keep") is kept.
        while len(chain) > 1 and chain[-1][2] == 1 and 0 in _gaps(chain[-2], chain[-1]):
            chain.pop()
        while len(chain) > 1 and chain[0][2] == 1 and 0 in _gaps(chain[0], chain[1]):
            chain.pop(0)
        if not chain:
            return
        matched = sum(size for _, _, size in chain)
        (a0, b0, _), (a1, b1, size) = chain[0], chain[-1]
        span = max(a1 + size - a0, b1 + size - b0)
        if matched >= MIN_SHARED_WORDS and matched >= MIN_DENSITY * span and (best is None or matched > best[0]):
            best = (matched, (a0, a1 + size - 1), (b0, b1 + size - 1))

    # Trimming a chain only lowers its matches, so a chain with fewer than MIN_SHARED_WORDS (or than the best so
    # far) is dropped without closing it: most chains of two unrelated passages are a few common words apart, and
    # closing each cost a third of an alignment.
    total = 0
    for block in Indel.opcodes(a_ids, b_ids).as_matching_blocks():
        if not block.size:
            continue
        if chain:
            a_end, b_end = chain[-1][0] + chain[-1][2], chain[-1][1] + chain[-1][2]
            if block.a - a_end > MAX_GAP or block.b - b_end > MAX_GAP:
                if total >= MIN_SHARED_WORDS and (best is None or total > best[0]):
                    close()
                chain, total = [], 0
        chain.append((block.a, block.b, block.size))
        total += block.size
    if total >= MIN_SHARED_WORDS and (best is None or total > best[0]):
        close()
    if best is None:
        return None
    _, (a_first, a_last), (b_first, b_last) = best
    a_spans, b_spans = word_spans(a_text), word_spans(b_text)
    return (a_spans[a_first][0], a_spans[a_last][1]), (b_spans[b_first][0], b_spans[b_last][1])


def _gaps(first: tuple[int, int, int], second: tuple[int, int, int]) -> tuple[int, int]:
    """Words skipped in each text between two matching runs ``(a, b, size)``."""
    return second[0] - first[0] - first[2], second[1] - first[1] - first[2]


def quote_partners(docs: Sequence[str], words: Sequence[list[int]]) -> dict[int, list[int]]:
    """For each hit (``docs``: their document ids, best first; ``words``: their word ids), the better-ranked hits of
    other documents that share :data:`MIN_SHARED_SHINGLES` shingles.

    Every run of :data:`SHINGLE` normalised words is hashed with numpy, all hits' at once, and hits are paired
    through equal hashes with one sort. A pair is only a candidate: :func:`shared_statement` aligns its words.
    Hashing hit by hit and counting pairs in Python cost 1.8-3.2 ms for 40 SciFact hits, this 0.8-0.9 (100 test
    queries' hybrid hits, the same pairs); up to :data:`SMALL_HITS` hits Python sets of word tuples cost as little.
    """
    if len(docs) <= SMALL_HITS:
        return _quote_partners_few(docs, words)
    lengths = np.fromiter((len(ids) for ids in words), np.int64, count=len(words))
    ids = np.fromiter(itertools.chain.from_iterable(words), np.int64, count=int(lengths.sum())).view(np.uint64)
    owner = np.repeat(np.arange(len(words)), lengths)
    count = len(ids) - SHINGLE + 1
    if count <= 0:
        return {}
    shingles = np.zeros(count, np.uint64)
    for offset in range(SHINGLE):  # a polynomial hash; uint64 arithmetic wraps around
        shingles = shingles * np.uint64(1_000_003) + ids[offset : offset + count]
    own = owner[:count]
    keep = (own == owner[SHINGLE - 1 :]) & (lengths >= MIN_SHARED_WORDS)[own]  # within one hit, of a long one
    if not keep.any():  # every hit too short to quote (np.r_ below would make a mask of one)
        return {}
    order = np.lexsort((own[keep], shingles[keep]))
    shingles, own = shingles[keep][order], own[keep][order]
    distinct = np.r_[True, (shingles[1:] != shingles[:-1]) | (own[1:] != own[:-1])]
    shingles, own = shingles[distinct], own[distinct]
    # Every pair of hits holding one shingle: each entry with the later entries of its run of equal hashes (the
    # run's owners ascend, so the first of a pair is the better-ranked hit).
    run_end = np.r_[np.flatnonzero(shingles[1:] != shingles[:-1]) + 1, len(shingles)]
    after = run_end[np.searchsorted(run_end, np.arange(len(shingles)), side="right")] - np.arange(len(shingles)) - 1
    first = np.repeat(np.arange(len(shingles)), after)
    second = first + 1 + np.arange(len(first)) - np.repeat(np.cumsum(after) - after, after)
    earlier, later = own[first], own[second]
    code = {doc: number for number, doc in enumerate(dict.fromkeys(docs))}
    codes = np.fromiter((code[doc] for doc in docs), np.int64, count=len(docs))
    other = codes[earlier] != codes[later]
    pairs, counts = np.unique(earlier[other] * len(words) + later[other], return_counts=True)
    partners: dict[int, list[int]] = {}
    for pair in pairs[counts >= MIN_SHARED_SHINGLES].tolist():  # ascending: by later, by earlier
        partners.setdefault(pair % len(words), []).append(pair // len(words))
    return partners


#: Up to this many hits, :func:`quote_partners` pairs them through Python sets of shingles: for a k=10 search's
#: hits that costs 0.24-0.39 ms, the numpy pairing 0.31-0.34 (SciFact, 100 test queries, hybrid).
SMALL_HITS = 16
_MULTIPLIER = np.int64(1_000_003)


def _quote_partners_few(docs: Sequence[str], words: Sequence[list[int]]) -> dict[int, list[int]]:
    """:func:`quote_partners` for a few hits: every pair's shared shingles counted with set intersections."""
    # Every hit's shingles hashed at once with numpy (the polynomial hash of quote_partners; int64 arithmetic wraps
    # around), then one set of ints per hit, rather than sets of word tuples; and a hit is intersected pair by pair
    # only if it shares two shingles with the union of the hits above it. For the hits of SciFact's 300 test queries
    # x 3 modes x collapse on/off (10 each, the same partners): 0.29 ms a search, the tuple sets 0.36 (best of 7).
    lengths = [len(ids) for ids in words]
    ids = np.fromiter(itertools.chain.from_iterable(words), np.int64, count=sum(lengths))
    hashed = np.zeros(max(len(ids) - SHINGLE + 1, 0), np.int64)
    for offset in range(SHINGLE):
        hashed = hashed * _MULTIPLIER + ids[offset : offset + len(hashed)]
    every = hashed.tolist()
    shingles, at = [], 0
    for length in lengths:
        shingles.append(set(every[at : at + length - SHINGLE + 1]) if length >= MIN_SHARED_WORDS else set())
        at += length
    partners: dict[int, list[int]] = {}
    above = set(shingles[0])
    for later in range(1, len(docs)):
        if len(shingles[later] & above) < MIN_SHARED_SHINGLES:
            above |= shingles[later]
            continue
        above |= shingles[later]
        for earlier in range(later):
            if docs[earlier] != docs[later] and (len(shingles[earlier] & shingles[later]) >= MIN_SHARED_SHINGLES):
                partners.setdefault(later, []).append(earlier)
    return partners
