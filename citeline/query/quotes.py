"""Shared statements between two passages: the same quote or statement, however each outlet punctuated, quoted,
attributed or slightly reworded it (rule 2 of ``citeline.query.collapse``).

Words are normalised (case, Unicode forms and accents, punctuation and quote marks ignored) and stand as their
hashes; two passages are candidates when they share :data:`MIN_SHARED_SHINGLES` runs of
:data:`SHINGLE` words (:func:`quote_partners`, a cheap prefilter over a search's hits), and a candidate pair shares
a statement when an alignment of their words (rapidfuzz's Indel alignment, C++, a few microseconds a pair) holds a
chain of at least :data:`MIN_SHARED_WORDS` matching words with gaps of at most :data:`MAX_GAP` words (an inserted
"he said", a dropped "now", "did not" against "didn't") and at least :data:`MIN_DENSITY` of the chain's words
matching (:func:`shared_statement`). On tests/data/quotes (31 pairs sharing a quote, 31 same-topic pairs sharing
none; bench/collapse.py eval) every setting with MAX_GAP 3-4, MIN_SHARED_WORDS 8-10 and MIN_DENSITY 0.6-0.7 finds
all 31 quotes and no false pair. MIN_SHARED_WORDS sits at the top of that range so that templated one-line reports
that differ only in a number (9 matching words, tests/index/test_collapse.py) stay apart.

A shared statement is a quote, not a frame: records made from one template share long runs of words around their
slots (a year, a building, a place), and :func:`alignment` reads the gaps between matching runs. An edit (function
words for function words, a spelling variant, one number written two ways, a few words added or dropped) keeps a
chain going; a chain of :data:`MIN_SHARED_WORDS` that holds a slot filled differently (a number, a name, another
content word) is a frame, never a shared statement. :func:`same_text` is the stricter
test of collapse's first rule: one chain of edits over :data:`SAME_SHARE` of the longer text. The generated sets
(tests/_collapse_sets.py) and bench/collapse.py precision measure both: docs/quality.md#collapse-precision.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from rapidfuzz.distance import OSA, Indel

from citeline.query.highlight import STOP_WORDS, _stemmer

#: The fewest matching words that make two passages report the same statement: a full clause, more than the stock
#: phrases ("the defence ministry said on Monday that") that reports of one event share.
MIN_SHARED_WORDS = 10
#: The most words skipped on either side between two matching runs of one shared statement.
MAX_GAP = 3
#: The least share of a shared statement's words (on the longer side) that match.
MIN_DENSITY = 0.65
#: A pair of hits is aligned only if they share this many distinct SHINGLE-word runs (a cheap numpy prefilter):
#: 4-word runs, 2 of them, keep every pair of the evaluation set and send only a few pairs of 40 SciFact candidates (a
#: query's worth) to alignment; the whole collapse then costs less than with the previous exact-12-word rule on the
#: same hits (bench/collapse.py eval; docs/performance.md#choices-measured-in-the-code).
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

    ASCII text (most of SciFact's hits) is split with ``str.translate`` and ``split`` (cheaper than ``findall``), and
    the words become ids by ``map(hash, ...)`` (a C loop), not by numbering them through a per-search vocabulary dict
    (``setdefault`` in a Python loop); ``finditer`` with a span per word cost several times as much
    (docs/performance.md#choices-measured-in-the-code), and the spans are needed only for the rare pairs that share a
    statement. Hashes need no shared state, so any two texts' words compare.
    """
    return text, list(map(hash, normalised_words(text)))


def words_of(*texts: str) -> list[Words]:
    """:func:`text_words` of each text (to compare texts with :func:`shared_statement`)."""
    return [text_words(text) for text in texts]


@lru_cache(maxsize=256)
def word_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each word of ``text``, as :func:`text_words` counts them."""
    return [match.span() for match in _WORD.finditer(text)]


def shared_statement(a: Words, b: Words) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Where texts ``a`` and ``b`` (their :func:`text_words`) report the same words, if they do.

    Aligns the two word sequences (longest common subsequence), chains matching runs separated by at most
    :data:`MAX_GAP` words on either side, and returns the character span of the longest chain in each text, from
    its first matching word to its last, if it has :data:`MIN_SHARED_WORDS` matches and :data:`MIN_DENSITY`.
    None when the two texts are one frame filled in differently (:func:`alignment`): records of a template share
    long runs of words, not a statement.
    """
    if len(a[1]) < MIN_SHARED_WORDS or len(b[1]) < MIN_SHARED_WORDS:
        return None
    found = alignment(a, b, MIN_SHARED_WORDS)
    if found is None or found.best is None:
        return None
    _, (a_first, a_last), (b_first, b_last) = found.best
    a_spans, b_spans = word_spans(a[0]), word_spans(b[0])
    return (a_spans[a_first][0], a_spans[a_last][1]), (b_spans[b_first][0], b_spans[b_last][1])


def same_text(a: Words, b: Words) -> bool:
    """Are ``a`` and ``b`` the same text, however spelt, punctuated and cased, with at most a few words added or
    dropped (:data:`SAME_SHARE` of the longer text's words matched in one chain), and no slot filled differently (a
    number, a name or another content word in the same place: :func:`alignment`)?"""
    longest = max(len(a[1]), len(b[1]))
    if not longest:
        return False
    if a[1] == b[1]:
        return True
    found = alignment(a, b, math.ceil(SAME_SHARE * longest))
    return found is not None and found.best is not None


#: The least share of the longer text's words that two chunks must match, in one chain, to be the same text.
SAME_SHARE = 0.85
#: A substitution of content words (a slot filled differently) of up to this many words on each side keeps a chain
#: going, marked: texts whose chain holds one are records of one frame (:func:`alignment`).
SLOT_SPAN = 8
#: Matched words a chain must still hold beyond a slot for the slot to count: a quote followed by a different
#: attribution ("said Corporal Drury" against "he told us") and a stray "the" is not a frame.
FRAME_RUN = 3


@dataclass(frozen=True)
class Alignment:
    """The result of :func:`alignment`: the best plain chain ``(matched, (a_first, a_last), (b_first, b_last))`` in
    word indexes, if one holds enough words, and whether a chain of as many words was a frame filled in
    differently (not a statement, so never the best chain)."""

    best: tuple[int, tuple[int, int], tuple[int, int]] | None
    templated: bool


def alignment(a: Words, b: Words, least: int) -> Alignment | None:
    """Align ``a`` and ``b`` word by word; the best chain of at least ``least`` matched words, and whether they are
    templated.

    Matching runs chain across gaps of at most :data:`MAX_GAP` words that are edits: an insertion or a deletion,
    function words for function words ("did not" against "didn't"), spelling variants ("harbour", "harbor"), one
    number written two ways ("two thousand", "2,000"). A gap where content words stand for other content words (a
    slot of a frame filled differently) chains too when it is short beside the runs around it (a frame is mostly
    frame). Once the run beyond each outermost slot is dropped if it holds fewer than :data:`FRAME_RUN` matched words
    (an attribution: 'else," Tiago Alves said' against 'else," the striker said'), a chain of at least ``least``
    matched words that still holds a slot is templated: there the two texts share a frame, not a statement, and it
    is never the best chain (another chain of the pair may still be a quote they share). None when no chain holds
    ``least`` words.
    """
    (a_text, a_ids), (b_text, b_ids) = a, b
    found: list[tuple[int, tuple[int, int], tuple[int, int]]] = []
    templated = False
    words: list[list[str]] = []  # both texts' normalised words, read only for a chain long enough to matter

    def strings() -> tuple[list[str], list[str]]:
        if not words:
            words.extend((normalised_words(a_text), normalised_words(b_text)))
        return words[0], words[1]

    def close(chain: list[tuple[int, int, int]]) -> None:
        """Judge a chain of runs: split it at long edits, then find its slots and its best plain part."""
        a_words, b_words = strings()
        piece: list[tuple[int, int, int]] = [chain[0]]
        slots: list[tuple[int, str]] = []  # (i, kind): between piece[i] and piece[i + 1]
        for run in chain[1:]:
            before = piece[-1]
            a_end, b_end = before[0] + before[2], before[1] + before[2]
            a_gap, b_gap = run[0] - a_end, run[1] - b_end
            kind = "edit"
            if a_gap and b_gap and max(a_gap, b_gap) <= min(SLOT_SPAN, min(before[2], run[2]) + 1):
                kind = gap_kind(tuple(a_words[a_end : run[0]]), tuple(b_words[b_end : run[1]]))
            if kind == "edit" and max(a_gap, b_gap) > MAX_GAP:
                judge(piece, slots)
                piece, slots = [run], []
                continue
            if kind != "edit":
                slots.append((len(piece) - 1, kind))
            piece.append(run)
        judge(piece, slots)

    def judge(runs: list[tuple[int, int, int]], slots: list[tuple[int, str]]) -> None:
        nonlocal templated
        if sum(size for _, _, size in runs) < least:
            return
        marks = list(slots)
        # (A number is never an attribution: "Record 1964. In 1959" against "Record 1999. In 1959" stays a slot.)
        if marks and marks[-1][1] != "number" and sum(size for _, _, size in runs[marks[-1][0] + 1 :]) < FRAME_RUN:
            runs = runs[: marks[-1][0] + 1]
            marks.pop()
        if marks and marks[0][1] != "number" and sum(size for _, _, size in runs[: marks[0][0] + 1]) < FRAME_RUN:
            cut = marks[0][0] + 1
            runs = runs[cut:]
            marks = [(at - cut, kind) for at, kind in marks[1:]]
        if marks:
            templated = templated or sum(size for _, _, size in runs) >= least
            return
        # A lone word at either end that only an insertion separates from the rest ('mud," said' against 'mud,"
        # he said') is attribution, not the shared words; one past a substituted word ("We cannot keep" against
        # "We can't keep") is kept.
        while len(runs) > 1 and runs[-1][2] == 1 and 0 in _gaps(runs[-2], runs[-1]):
            runs.pop()
        while len(runs) > 1 and runs[0][2] == 1 and 0 in _gaps(runs[0], runs[1]):
            runs.pop(0)
        if not runs:
            return
        matched = sum(size for _, _, size in runs)
        (a0, b0, _), (a1, b1, size) = runs[0], runs[-1]
        span = max(a1 + size - a0, b1 + size - b0)
        if matched >= least and matched >= MIN_DENSITY * span:
            found.append((matched, (a0, a1 + size - 1), (b0, b1 + size - 1)))

    # Runs chain across any gap that may be an edit or a slot; a chain with fewer than ``least`` matched words is
    # dropped without reading its gaps (most chains of two unrelated passages are a few common words apart, and
    # reading each gap's words would cost more than the alignment).
    chain: list[tuple[int, int, int]] = []
    total = 0
    for block in Indel.opcodes(a_ids, b_ids).as_matching_blocks():
        if not block.size:
            continue
        if chain:
            last = chain[-1]
            a_gap, b_gap = block.a - last[0] - last[2], block.b - last[1] - last[2]
            slot_sized = a_gap and b_gap and max(a_gap, b_gap) <= min(SLOT_SPAN, min(last[2], block.size) + 1)
            if not slot_sized and max(a_gap, b_gap) > MAX_GAP:
                if total >= least:
                    close(chain)
                chain, total = [], 0
        chain.append((block.a, block.b, block.size))
        total += block.size
    if total >= least:
        close(chain)
    if not found and not templated:
        return None
    return Alignment(max(found) if found else None, templated)


@lru_cache(maxsize=65_536)  # the gaps of a frame's records recur in every pair of them
def gap_kind(a_words: tuple[str, ...], b_words: tuple[str, ...]) -> str:
    """What a gap where ``a_words`` stand for ``b_words`` is: ``"edit"`` (function words, spelling variants, one
    number written two ways), ``"number"`` (numbers that differ) or ``"content"`` (other content words: a name, a
    place, a thing)."""
    if not any(map(_numeric, a_words)) and not any(map(_numeric, b_words)):
        return _content_kind(a_words, b_words)
    a_number, b_number = _number(a_words), _number(b_words)
    if a_number is not None and b_number is not None:
        return "edit" if a_number == b_number else "number"
    # ("one" alone is as often a pronoun: "nobody" against "no one".)
    a_numbers = sorted(n for n in map(_number, ([w] for w in a_words if w != "one")) if n is not None)
    b_numbers = sorted(n for n in map(_number, ([w] for w in b_words if w != "one")) if n is not None)
    if a_numbers != b_numbers:
        return "number"
    return _content_kind(a_words, b_words)


def _numeric(word: str) -> bool:
    return word[:1].isdigit() or word in NUMBER_WORDS or word in _SCALES


def _content_kind(a_words: Sequence[str], b_words: Sequence[str]) -> str:
    """``"edit"`` when every content word of one side is a variant of one of the other's (or a side has none),
    else ``"content"``."""
    a_content = [w for w in a_words if w not in FUNCTION_WORDS]
    b_content = [w for w in b_words if w not in FUNCTION_WORDS]
    if not a_content or not b_content:
        return "edit"
    left = list(b_content)
    for word in a_content:
        twin = next((other for other in left if _variant(word, other)), None)
        if twin is None:
            return "content"
        left.remove(twin)
    return "edit"


def _variant(a: str, b: str) -> bool:
    """Are two normalised words forms or spellings of one word ("harbour" and "harbor", "losing" and "lose")? Never
    two numbers: 1922 and 1923 are as alike as letters go, and are another record."""
    if a == b:
        return True
    if a.isdigit() or b.isdigit() or min(len(a), len(b)) < 4:
        return False
    if OSA.normalized_similarity(a, b) >= VARIANT_SIMILARITY:
        return True
    stem = _stemmer().stemWord
    if stem(a) == stem(b):
        return True
    # One word inside the other's ending or beginning ("papers" in "newspapers", "every" of "everybody" and
    # "everyone"): a shorter form an editor chose, not another thing.
    shorter = min(len(a), len(b))
    prefix = _common_start(a, b)
    suffix = _common_start(a[::-1], b[::-1])
    return max(prefix, suffix) >= max(AFFIX, AFFIX_SHARE * shorter)


def _common_start(a: str, b: str) -> int:
    """How many first characters ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


#: How alike two words' letters must be to be spellings of one word (rapidfuzz's normalised optimal string alignment
#: similarity, a swap of two letters one edit): "harbour"/"harbor" 0.86, "organised"/"organized" 0.89,
#: "metre"/"meter" 0.8, "centre"/"center" 0.83; "north"/"south" 0.6, "green"/"grey" 0.6.
VARIANT_SIMILARITY = 0.8
#: The least shared beginning or ending of two words that are one word's forms.
AFFIX = 5
#: ... and its least share of the shorter word.
AFFIX_SHARE = 0.6


def _split(words: str) -> list[str]:
    return words.split()


#: Number words and their values, to read "two thousand" as 2000.
NUMBER_WORDS = {
    word: value
    for value, word in enumerate(
        _split(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
            "seventeen eighteen nineteen"
        )
    )
} | {word: 10 * (i + 2) for i, word in enumerate(_split("twenty thirty forty fifty sixty seventy eighty ninety"))}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_DIGITS = re.compile(r"(\d+)[a-z]*")

#: Words that say how, not what: a gap of only these on both sides is an edit, not a slot filled differently.
#: English function words (the highlighter's) and the pieces contractions leave ("didn't": "didn", "t").
FUNCTION_WORDS = (STOP_WORDS - NUMBER_WORDS.keys()) | frozenset(
    _split(
        "t s d ll m re ve didn doesn don isn wasn weren aren hasn haven hadn couldn wouldn shouldn won can cannot "
        "mustn needn shan ain also says told tells without"
    )
)


def _number(words: Sequence[str]) -> int | None:
    """The number ``words`` write, if they are only a number: digits ("2 000" as 2000, "10pm" as 10) or words."""
    if not words:
        return None
    digits = [_DIGITS.fullmatch(w) for w in words]
    if all(digits):
        return int("".join(m.group(1) for m in digits if m))
    if not any(word in NUMBER_WORDS or word in _SCALES for word in words):
        return None
    total = current = 0
    for word in words:
        if word in NUMBER_WORDS:
            current += NUMBER_WORDS[word]
        elif word in _SCALES:
            current = max(current, 1) * _SCALES[word]
            if _SCALES[word] > 100:
                total, current = total + current, 0
        elif word != "and":
            return None
    return total + current


@lru_cache(maxsize=256)
def normalised_words(text: str) -> list[str]:
    """The normalised words of ``text`` as strings, the words :func:`text_words` hashes."""
    if text.isascii():
        return text.translate(_ASCII_WORDS).split()  # the same words as _WORD.findall(text.lower())
    return [w.lower() if w.isascii() else _folded(w) for w in _WORD.findall(text)]


def _gaps(first: tuple[int, int, int], second: tuple[int, int, int]) -> tuple[int, int]:
    """Words skipped in each text between two matching runs ``(a, b, size)``."""
    return second[0] - first[0] - first[2], second[1] - first[1] - first[2]


def quote_partners(docs: Sequence[str], words: Sequence[list[int]]) -> dict[int, list[int]]:
    """For each hit (``docs``: their document ids, best first; ``words``: their word ids), the better-ranked hits of
    other documents that share :data:`MIN_SHARED_SHINGLES` shingles.

    Every run of :data:`SHINGLE` normalised words is hashed with numpy, all hits' at once, and hits are paired
    through equal hashes with one sort. A pair is only a candidate: :func:`shared_statement` aligns its words.
    Hashing hit by hit and counting pairs in Python cost twice this (docs/performance.md#choices-measured-in-the-code);
    up to :data:`SMALL_HITS` hits Python sets of word tuples cost as little.
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
#: hits that costs no more than the numpy pairing (docs/performance.md#choices-measured-in-the-code).
SMALL_HITS = 16
_MULTIPLIER = np.int64(1_000_003)


def _quote_partners_few(docs: Sequence[str], words: Sequence[list[int]]) -> dict[int, list[int]]:
    """:func:`quote_partners` for a few hits: every pair's shared shingles counted with set intersections."""
    # Every hit's shingles hashed at once with numpy (the polynomial hash of quote_partners; int64 arithmetic wraps
    # around), then one set of ints per hit, rather than sets of word tuples; and a hit is intersected pair by pair
    # only if it shares two shingles with the union of the hits above it: cheaper than the tuple sets
    # (docs/performance.md#choices-measured-in-the-code).
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
