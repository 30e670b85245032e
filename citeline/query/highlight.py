"""Highlights: the sentence or sentences of a passage that best answer the query, with exact document offsets.

A hit is a whole chunk (up to ~250 tokens, often 1,000-1,300 characters); a reader wants the sentence that answers.
:func:`sentences` splits a chunk into sentences with offsets (a regex splitter that knows quotes and common
abbreviations), :func:`highlight` scores each sentence against the query and
returns the hits with their :attr:`SearchResult.highlights` set: ``document_text[h.char_start:h.char_end] == h.text``.

Scoring is by query-term overlap (stemmed, stop words aside, each term weighted by its rarity among the hits'
sentences), optionally blended with the model's sentence-vs-query cosine. The choice is measured on 40 SciFact
claims whose supporting sentence we labelled by hand; see :data:`MODEL_WEIGHT`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import numpy as np

from citeline.query.results import Highlight, SearchResult, highlight_pages

Encode = Callable[[list[str]], np.ndarray]

#: How many highlights a result carries at most: the best sentence, and a second one only when it scores nearly as
#: well (:data:`SECOND_WITHIN`), e.g. a quote split over two sentences.
MAX_HIGHLIGHTS = 2
SECOND_WITHIN = 0.85

#: Weight of the model's cosine in a sentence's score (the rest is term overlap). 0 skips the model: term overlap
#: picks a labelled evidence sentence first for most SciFact claims (how many: docs/quality.md#todays-figures).
MODEL_WEIGHT = 0.0


# ---------------------------------------------------------------- sentences


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words after which a full stop does not end a sentence (titles, ranks, Latin and bibliographic abbreviations).
ABBREVIATIONS = _words(
    "al approx apr aug ca capt cf co col corp cpl dec dept dr eq eqs etc feb fig figs gen gov inc jan jr jul jun "
    "lt ltd maj mar mr mrs ms no nos nov oct prof ref refs rep resp rev sen sep sept sgt sr st univ vol vs"
)
# The leading lookahead names every alternative's first character: the regex engine then skips other positions
# at once, at well under half the cost, with the same matches on SciFact's abstracts and the test and seed files
# (docs/performance.md#choices-measured-in-the-code).
_BOUNDARY = re.compile(
    r"""(?=[.!?…"'”’»\n])(?:"""
    r"""(?:[.!?…]+["'”’»)\]]*|["'”’»]\s*[-—–]\s*)(?=\s+["'“‘«(\[]?[A-Z0-9À-Þ])"""  # end mark, then a capital
    r"""|[.!?]["'”’»)\]]*(?=\s*\n)"""  # end mark at a line's end
    r"""|\n\s*\n"""  # a blank line
    r""")"""
)
_LAST_WORD = re.compile(r"\w[\w.]*$")  # the word before a full stop, brackets aside
_RUN = re.compile(r"[\w.]*")


def sentences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text``, in order, without surrounding whitespace.

    Splits after ``.``, ``!``, ``?`` (and closing quotes or brackets) followed by a capital or a digit, and at blank
    lines; not after an abbreviation (``Dr.``, ``e.g.``, ``et al.``) or an initial (``J. Smith``).
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        mark = match.group()
        if mark.startswith("."):
            before = _last_word(text, start, match.start())
            word = before.group().lower().rstrip(".") if before else ""
            last = word.rsplit(".", 1)[-1] if word else ""
            if last in ABBREVIATIONS or (len(last) == 1 and last.isalpha()) or word in ("e.g", "i.e"):
                continue
        _add(text, start, end, spans)
        start = end
    _add(text, start, len(text), spans)
    return spans


#: How far back from a full stop :func:`_last_word` looks first.
_WORD_WINDOW = 48


def _last_word(text: str, start: int, end: int) -> re.Match[str] | None:
    """``_LAST_WORD.search(text, start, end)``, searched first in the last :data:`_WORD_WINDOW` characters: a search
    from the sentence's start tries the pattern at every word of the sentence (the window more than halves it, the
    same matches: docs/performance.md#choices-measured-in-the-code).
    When the window may have cut the word, the whole sentence is searched."""
    window = max(start, end - _WORD_WINDOW)
    found = _LAST_WORD.search(text, window, end)
    # The word may begin before the window only if the whole window is word characters and dots.
    if window > start and _RUN.fullmatch(text, window, end) is not None:
        return _LAST_WORD.search(text, start, end)
    return found


def _add(text: str, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if any(c.isalnum() for c in stripped):
        offset = start + len(piece) - len(piece.lstrip())
        spans.append((offset, offset + len(stripped)))


# ---------------------------------------------------------------- term overlap

#: English function words: they say nothing about what a sentence answers.
STOP_WORDS = _words(
    "a about above after again against all also am an and any are as at be because been before being below "
    "between both but by can could did do does doing down during each few for from further had has have having he "
    "her here hers herself him himself his how i if in into is it its itself just may me might more most must my "
    "myself no nor not now of off on once one only or other our ours out over own said same say says shall she "
    "should so some such than that the their theirs them then there these they this those through to too two "
    "under until up very was we were what when where which while who whom why will with would you your yours"
)
_TERM = re.compile(r"\w+")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer  # PyStemmer, already a dependency of the lexical index (bm25s)

    return Stemmer.Stemmer("english")


def terms(text: str) -> list[str]:
    """The stemmed content words of ``text`` (Unicode-normalised, case-folded, stop words dropped)."""
    return _stemmed([_words_of(text)])[0]


def _words_of(text: str) -> list[str]:
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return [w for w in _TERM.findall(text.casefold()) if w not in STOP_WORDS]


#: Stems of words seen before (at most :data:`STEM_CACHE`): a search's hits hold ~1,000 distinct words, nearly all
#: seen in earlier searches, and stemming them (with the set and dict around it) was a fifth of highlighting.
_STEMS: dict[str, str] = {}
STEM_CACHE = 200_000


def _stemmed(texts: Sequence[list[str]]) -> list[list[str]]:
    """Stem many word lists: the words not stemmed before, with one call of the stemmer (far cheaper than a call
    each: docs/performance.md#choices-measured-in-the-code).

    Shared by threads: entries are only added (a full cache is replaced by a new one), and a stem never changes.
    """
    global _STEMS
    stems = _STEMS
    new = list({word for words in texts for word in words if word not in stems})
    if new:
        if len(stems) + len(new) > STEM_CACHE:
            stems = {}
        stems.update(zip(new, _stemmer().stemWords(new), strict=True))
        _STEMS = stems
    return [[stems[word] for word in words] for words in texts]


def overlap_scores(query_terms: Sequence[str], sentence_terms: Sequence[Sequence[str]]) -> np.ndarray:
    """Each sentence's share of the query's weight it contains, in [0, 1].

    A query term weighs by its rarity among the given sentences (``log(1 + n / df)``), so a word every sentence
    shares ("patients", "soldiers") counts less than the one word that singles the answer out.
    """
    wanted = dict.fromkeys(query_terms)
    if not wanted or not sentence_terms:
        return np.zeros(len(sentence_terms))
    sets = [set(s) for s in sentence_terms]
    n = len(sets)
    weight = {t: math.log(1 + n / (1 + sum(t in s for s in sets))) for t in wanted}
    total = sum(weight.values())
    return np.array([sum(w for t, w in weight.items() if t in s) / total for s in sets])


# ---------------------------------------------------------------- highlights


#: Per search, each chunk text's sentences and their stemmed terms (set by :func:`analysis_cache`): a collapsed
#: search highlights its candidates to judge a shared quote, then its k results among themselves, and a deepening
#: does it again over more hits; splitting and stemming a chunk is the costly part, its scores (which depend on the
#: other hits' sentences) cheap.
_ANALYSED: ContextVar[dict[str, tuple[list[tuple[int, int]], list[list[str]]]] | None] = ContextVar(
    "citeline_highlight_analysed", default=None
)


@contextmanager
def analysis_cache() -> Iterator[None]:
    """Within this block, :func:`highlight` splits and stems each distinct chunk text once (one search's scope)."""
    token = _ANALYSED.set({})
    try:
        yield
    finally:
        _ANALYSED.reset(token)


def _analysed(texts: Sequence[str]) -> list[tuple[list[tuple[int, int]], list[list[str]]]]:
    """Each text's sentence spans and each sentence's stemmed terms (one stemmer call for all new texts)."""
    cache = _ANALYSED.get()
    known = cache if cache is not None else {}
    new = list(dict.fromkeys(text for text in texts if text not in known))
    if new:
        spans = [sentences(text) for text in new]
        words = [[_words_of(text[s:e]) for s, e in found] for text, found in zip(new, spans, strict=True)]
        stemmed = iter(_stemmed([w for per_text in words for w in per_text]))
        for text, found in zip(new, spans, strict=True):
            known[text] = (found, [next(stemmed) for _ in found])
    return [known[text] for text in texts]


def highlight(
    hits: Sequence[SearchResult],
    query: str,
    *,
    query_vector: np.ndarray | None = None,
    encode: Encode | None = None,
    model_weight: float = MODEL_WEIGHT,
) -> list[SearchResult]:
    """``hits`` with :attr:`~citeline.query.plan.SearchResult.highlights` set: their best sentences for ``query``.

    With ``model_weight`` > 0 (and ``query_vector`` and ``encode``), every hit's sentences are embedded in one
    ``encode`` call and their cosine to the query blends into the score.
    """
    analysed = _analysed([hit.text for hit in hits])
    scored = _scores(
        [[hit.text[s:e] for s, e in spans] for hit, (spans, _) in zip(hits, analysed, strict=True)],
        [terms for _, per_hit in analysed for terms in per_hit],
        query,
        query_vector=query_vector,
        encode=encode,
        model_weight=model_weight,
    )
    out = []
    for hit, (spans, _), scores in zip(hits, analysed, scored, strict=True):
        chosen = pick(_headings_last(hit.text, spans, scores))
        found = tuple(
            Highlight(
                hit.char_start + spans[i][0],
                hit.char_start + spans[i][1],
                hit.text[slice(*spans[i])],
                round(float(scores[i]), 4),
            )
            for i in chosen
        )
        out.append(highlight_pages(hit, found))
    return out


def score_sentences(
    texts: Sequence[Sequence[str]],
    query: str,
    *,
    query_vector: np.ndarray | None = None,
    encode: Encode | None = None,
    model_weight: float = MODEL_WEIGHT,
) -> list[np.ndarray]:
    """For each hit's sentence texts, each sentence's score for ``query`` (term overlap, blended with the model)."""
    flat_terms = _stemmed([_words_of(t) for hit in texts for t in hit])
    return _scores(texts, flat_terms, query, query_vector=query_vector, encode=encode, model_weight=model_weight)


def _scores(
    texts: Sequence[Sequence[str]],
    flat_terms: Sequence[Sequence[str]],
    query: str,
    *,
    query_vector: np.ndarray | None,
    encode: Encode | None,
    model_weight: float,
) -> list[np.ndarray]:
    """:func:`score_sentences` given every sentence's stemmed terms (``flat_terms``, all hits' in order)."""
    query_terms = terms(query)
    lexical = overlap_scores(query_terms, flat_terms)
    scores = lexical
    if model_weight > 0 and encode is not None and query_vector is not None and flat_terms:
        vectors = np.asarray(encode([t for hit in texts for t in hit]), dtype=np.float32)
        cosine = vectors @ np.asarray(query_vector, dtype=np.float32)
        scores = (1 - model_weight) * lexical + model_weight * cosine
    out, at = [], 0
    for hit in texts:
        out.append(np.asarray(scores[at : at + len(hit)], dtype=np.float64))
        at += len(hit)
    return out


#: A heading's (a title line's) share of its score when sentences compete: a title ("Record 1942", "Installation")
#: names what a passage is about, the sentence under it says it, so a heading is highlighted only when it holds
#: more than twice the query's weight of the best sentence, and never when no sentence holds a query word.
HEADING_WEIGHT = 0.5
_HEADING_END = ".!?…:;,\"'”’)]"


def is_heading(text: str, start: int, end: int) -> bool:
    """Is the sentence ``text[start:end]`` a heading: a whole line of its own, of at most 15 words, with no
    sentence-ending punctuation (a title line, a record's title, a Markdown ``#`` heading)?"""
    if text[end - 1] in _HEADING_END or (start and text[:start].rstrip(" \t")[-1:] not in ("\n", "")):
        return False
    after = text[end:].lstrip(" \t")
    return (not after or after[0] in "\r\n") and len(text[start:end].split()) <= 15


def _headings_last(text: str, spans: Sequence[tuple[int, int]], scores: np.ndarray) -> np.ndarray:
    """``scores`` for choosing: a heading's weighed by :data:`HEADING_WEIGHT`, and below any other sentence's on a
    tie (when no sentence holds a query word, the first sentence that is not a heading is chosen, not the title)."""
    if len(spans) < 2:
        return scores
    heading = np.fromiter((is_heading(text, s, e) for s, e in spans), bool, count=len(spans))
    if not heading.any() or heading.all():
        return scores
    return np.where(heading, scores * HEADING_WEIGHT - 1e-9, scores)


def pick(scores: np.ndarray) -> list[int]:
    """Which sentences to highlight, in text order: the best, and the runner-up if within :data:`SECOND_WITHIN`."""
    if not len(scores):
        return []
    order = np.argsort(-scores, kind="stable")
    best = [int(order[0])]
    for i in order[1:MAX_HIGHLIGHTS]:
        if scores[i] > 0 and scores[i] >= SECOND_WITHIN * scores[order[0]]:
            best.append(int(i))
    return sorted(best)
