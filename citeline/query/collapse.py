"""Near-duplicate collapse: one result per passage, listing every document it occurs in.

After ranking, hits from *different* documents that carry the same passage become one result: the best-scored
hit is kept and :attr:`SearchResult.sources` lists every source, each with its own chunk offsets and the offsets
of the part it shares. Two hits carry the same passage when

1. they are the same text: their chunk vectors are near-identical (cosine >= ``threshold``) *and* their words are
   (:func:`citeline.query.quotes.same_text`: spelling, punctuation, casing and a few added or dropped words aside,
   and no number, name or other content word in the place of another) — the same article syndicated twice, a
   record ingested from two exports, a page rendered as HTML beside its Markdown source; or
2. they report the same quote or statement (``citeline.query.quotes``: at least 10 normalised words aligned, tolerant of
   re-punctuation, inserted and dropped words, never a frame filled differently), and the shared words are why
   both hits matched: they cover half of a highlight that scores at least half the two hits' best
   (:func:`answers`) when highlights are set, else their vector is at least as close to the query as the hit's
   (a common footer or disclaimer never merges two otherwise unrelated hits).

Records made from one sentence frame ("In 1922 the hospital near the harbour collapsed. Witnesses recall ...", with
other years, places and events: catalogues, logs, forms, product pages) have near-identical vectors and share long
runs of words, but they are not one passage: the vector alone never merges (the words must be the same text), and
a run of shared words whose chain holds a slot filled differently (a year, a name, a place) is a frame, not a quote
(:func:`citeline.query.quotes.alignment`). Measured on generated sets: docs/quality.md#collapse-precision.

Rule 2 exists because a chunk is ~250 tokens of context around a quote: in the seed articles the two chunks that
quote Corporal Drury have a cosine of only 0.67 with the real model, lower than the 0.76 of two chunks of theirs
that quote nobody in common, so no chunk-level threshold separates "same passage" from "same topic"; and outlets
that rewrite each other's copy re-punctuate, re-attribute and split the quote differently, so identical word runs
are often shorter than a sentence.

Grouping is greedy in rank order: a hit joins the first better-ranked group whose leader it duplicates and which
holds no passage of the same document yet, so results stay in score order and the kept passage is the best one.

A copy need not rank near its original: the ranking scores it by the query, and a rewrite that wraps a short quote
in other news can rank below hundreds of passages that merely share the query's words. So after collapsing the k
best hits, each result's highlighted sentences are looked up in the lexical index by their rarest terms
(:func:`add_unranked_copies`, :data:`LOOKUP_DEPTH` chunks each) and the matches pass the same two rules. That lookup
replaces ranking 3k + 10 candidates: a collapsed search ranks k hits (deeper only when collapsing merged some) and
highlights only its k results; a deepening reads only the new hits' passages and vectors.

A search analyses each chunk once (:class:`WordCache` for the normalised words, ``highlight.analysis_cache`` for
sentences and stems), since the slow searches are those that deepen. What collapse adds to a search, most of it the
rare-term lookup: docs/performance.md#duplicate-collapse.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from citeline.errors import QueryError
from citeline.query.quotes import (  # noqa: F401  (MIN_SHARED_WORDS, words_of, word_spans: re-exported, the tests name them)
    MIN_SHARED_WORDS,
    Words,
    quote_partners,
    same_text,
    shared_statement,
    text_words,
    word_spans,
    words_of,
)
from citeline.query.results import Highlight, SearchResult, evolve

#: Chunks whose vectors have at least this cosine, and whose words are the same text (``same_text``), are the same
#: passage: copies of one passage score above it, two distinct SciFact papers below it
#: (docs/quality.md#choices-measured-in-the-code). Lowering it (--collapse-threshold 0.9) lets copies whose chunks
#: were cut at other places merge too; it never merges two texts whose words differ in content.
DEFAULT_COLLAPSE_THRESHOLD = 0.95


#: Chunks the lexical lookup of a result's highlighted sentences brings (:func:`add_unranked_copies`): a chunk's own
#: text and the overlapping neighbour of its document take two; the rest leaves room for two copies per result per
#: query (more copies rank among the hits themselves, where the deepening finds them all).
LOOKUP_DEPTH = 4
#: The least share of the idf weight of a highlight's rarest terms a chunk must hold to be looked at as a copy:
#: 0.6 finds as many copies as 0.5 for half the fetches (docs/quality.md#choices-measured-in-the-code).
LOOKUP_MIN_SHARE = 0.6


Encode = Callable[[list[str]], np.ndarray]
Highlighter = Callable[[Sequence[SearchResult]], list[SearchResult]]


def validate_threshold(threshold: object) -> float:
    """Check a collapse threshold: a cosine in (0, 1]."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float | np.floating):
        raise QueryError(f"collapse_threshold must be a number between 0 and 1, not {threshold!r}")
    if not 0 < float(threshold) <= 1:
        raise QueryError(
            f"collapse_threshold must be above 0 and at most 1 (a cosine), got {threshold}; "
            f"{DEFAULT_COLLAPSE_THRESHOLD} keeps only near-identical passages together"
        )
    return float(threshold)


class WordCache:
    """Each chunk text's :func:`text_words`, and each pair of texts' comparisons, computed once per search (a search
    that deepens collapses its first hits again)."""

    def __init__(self) -> None:
        self._known: dict[str, Words] = {}
        self._shared: dict[tuple[str, str], tuple[tuple[int, int], tuple[int, int]] | None] = {}
        self._same: dict[tuple[str, str], bool] = {}

    def __call__(self, text: str) -> Words:
        found = self._known.get(text)
        if found is None:
            found = self._known[text] = text_words(text)
        return found

    def shared(self, a: Words, b: Words) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """:func:`shared_statement` of ``a`` and ``b``."""
        key = (a[0], b[0])
        if key not in self._shared:
            self._shared[key] = shared_statement(a, b)
        return self._shared[key]

    def same(self, a: Words, b: Words) -> bool:
        """:func:`same_text` of ``a`` and ``b``."""
        key = (a[0], b[0])
        if key not in self._same:
            self._same[key] = same_text(a, b)
        return self._same[key]


def reading_once(vectors: Callable[[Sequence[int]], np.ndarray]) -> Callable[[Sequence[int]], np.ndarray]:
    """``vectors`` that remembers what it read and asks only for ids it has not read yet."""
    known: dict[int, np.ndarray] = {}

    def read(ids: Sequence[int]) -> np.ndarray:
        missing = [chunk_id for chunk_id in dict.fromkeys(ids) if chunk_id not in known]
        if missing or not len(ids):
            fresh = vectors(missing)
            if not len(ids):
                return fresh
            known.update(zip(missing, fresh, strict=True))
        return np.stack([known[chunk_id] for chunk_id in ids])

    return read


@dataclass(frozen=True)
class Lookup:
    """Where :func:`add_unranked_copies` looks for copies of a result's quote that ranked below the candidates.

    ``find(texts, n)``: for each text, the ids of the n chunks that match it best lexically, within the search's
    filters; ``documents(ids)``: each chunk's document id; ``passages(ids)``: those chunks as hits (rows and
    provenance; their scores are not used).
    """

    find: Callable[[Sequence[str], int], list[list[int]]]
    passages: Callable[[Sequence[int]], list[SearchResult]]
    documents: Callable[[Sequence[int]], list[str]]


def add_unranked_copies(
    results: Sequence[SearchResult],
    hits: Sequence[SearchResult],
    lookup: Lookup,
    vectors: Callable[[Sequence[int]], np.ndarray],
    *,
    threshold: float = DEFAULT_COLLAPSE_THRESHOLD,
    words: WordCache | None = None,
) -> list[SearchResult]:
    """``results`` (collapsed from the ranked ``hits``) with the copies of their quotes ranked below ``hits`` added.

    The query's ranking scores a copy by the query, not by the quote, so a copy whose other words say little about
    the query (a long rewrite around a short quote) can rank below every candidate while hundreds of passages that
    merely share the query's words rank above it. Each result's highlighted sentences (the words that answered the
    query, and what a shared quote must overlap) go to ``lookup.find``, which returns the :data:`LOOKUP_DEPTH` best
    lexical matches: a copy carries the sentence's rare words, which most passages do not. A match that was not
    among the ``hits`` joins the result's sources under the same rules as :func:`collapse`: a chunk vector cosine
    of at least ``threshold`` with the result's, or a shared statement (:func:`shared_statement`) overlapping the
    result's highlights; one document per result, one result per chunk. Its ``score`` is the last hit's, an upper
    bound of its own (it ranked below every hit).
    """
    ranked = {hit.chunk_id for hit in hits}
    wanted = [at for at, result in enumerate(results) if result.highlights]
    if not wanted:
        return list(results)
    found = lookup.find([" ".join(h.text for h in results[at].highlights) for at in wanted], LOOKUP_DEPTH)
    new_ids = sorted({chunk_id for ids in found for chunk_id in ids if chunk_id not in ranked})
    if not new_ids:
        return list(results)
    # Most matches are the overlapping neighbours of the results' own chunks: their documents are read first (cheap),
    # and only the other chunks' rows (a passage fetch has a large fixed cost).
    document_of = dict(zip(new_ids, lookup.documents(new_ids), strict=True))
    new_ids = sorted(
        {
            chunk_id
            for result, ids in zip((results[at] for at in wanted), found, strict=True)
            for chunk_id in ids
            if chunk_id in document_of and document_of[chunk_id] not in {s.doc_id for s in result.sources}
        }
    )
    if not new_ids:
        return list(results)
    copies = {copy.chunk_id: copy for copy in lookup.passages(new_ids)}
    lead_ids = [results[at].chunk_id for at in wanted]
    stored = vectors(lead_ids + new_ids)
    vector_of = dict(zip(lead_ids + new_ids, stored, strict=True))
    words = words or WordCache()
    taken: set[int] = set()
    out = list(results)
    for at, ids in zip(wanted, found, strict=True):
        result = out[at]
        docs = {source.doc_id for source in result.sources}
        lead_words: Words | None = None
        lead = result.sources[0]
        # What of the leader's chunk its sources share; a leader alone shares nothing yet (an empty span, widened).
        lead_shared: tuple[int, int] = (result.char_end, result.char_start)
        if len(result.sources) > 1:
            lead_shared = (
                result.char_start if lead.shared_start is None else lead.shared_start,
                result.char_end if lead.shared_end is None else lead.shared_end,
            )
        extra = []
        for chunk_id in ids:
            copy = copies.get(chunk_id)
            if copy is None or chunk_id in ranked or chunk_id in taken or copy.doc_id in docs:
                continue
            if float(vector_of[chunk_id] @ vector_of[result.chunk_id]) >= threshold and words.same(
                lead_words := lead_words or words(result.text), words(copy.text)
            ):
                extra.append(copy.as_source())
                lead_shared = (result.char_start, result.char_end)
            else:
                lead_words = lead_words or words(result.text)
                shared = words.shared(lead_words, words(copy.text))
                if shared is None:
                    continue
                (lead_start, lead_end), (start, end) = shared
                lead_start, lead_end = result.char_start + lead_start, result.char_start + lead_end
                best = max(h.score for h in result.highlights)
                if not answers(result.highlights, lead_start, lead_end, floor=ANSWER_SHARE * best):
                    continue  # shared words elsewhere than what answered the query (a footer, a disclaimer)
                extra.append(copy.as_source(shared_start=copy.char_start + start, shared_end=copy.char_start + end))
                lead_shared = (min(lead_shared[0], lead_start), max(lead_shared[1], lead_end))
            taken.add(chunk_id)
            docs.add(copy.doc_id)
        if not extra:
            continue
        floor = hits[-1].score
        sources = [evolve(lead, shared_start=lead_shared[0], shared_end=lead_shared[1]), *result.sources[1:]]
        out[at] = evolve(result, sources=tuple(sources + [evolve(s, score=floor) for s in extra]))
    return out


#: The least score, as a share of the best highlight of the two hits, of the highlight shared words must cover to be
#: what answered the query: a boilerplate line ("A citeline seed document: an original ...") that holds one common
#: query word (0.08) is highlighted second in a passage whose answer scores 1.0, and is not why it matched.
ANSWER_SHARE = 0.5


def answers(highlights: Sequence[Highlight], start: int, end: int, *, floor: float = 0.0) -> bool:
    """Are the shared words ``start:end`` (document offsets) what answered the query: do they cover at least half of
    a highlight scoring above ``floor`` (or a highlight half of them)? A highlight holding none of the query's words
    (scored 0: the passage matched by its vector) says nothing, and shared words that only touch the answer (a
    disclaimer whose alignment runs a word into the next sentence) are not it."""
    return any(
        h.score > floor
        and h.score > 0
        and min(end, h.char_end) - max(start, h.char_start) >= 0.5 * min(h.char_end - h.char_start, end - start)
        for h in highlights
    )


@dataclass
class _Group:
    leader: int
    docs: set[str]
    members: list[tuple[int, int, int]] = field(default_factory=list)  # (hit, shared_start, shared_end)
    #: what of the leader's chunk the members share, in document offsets; None until a quote joins
    lead_shared: tuple[int, int] | None = None
    lead_whole: bool = False  #: a near-duplicate chunk joined, so the leader's whole chunk is shared

    def add_quote(self, start: int, end: int) -> None:
        old = self.lead_shared or (start, end)
        self.lead_shared = (min(old[0], start), max(old[1], end))


def collapse(
    hits: Sequence[SearchResult],
    vectors: np.ndarray,
    *,
    query_vector: np.ndarray | None,
    encode: Encode | None,
    threshold: float = DEFAULT_COLLAPSE_THRESHOLD,
    highlight: Highlighter | None = None,
    words: WordCache | None = None,
) -> list[SearchResult]:
    """Merge ranked ``hits`` (best first; ``vectors`` their chunk vectors, row by row) that are the same passage.

    Returns one result per group, in rank order, each with every source of its group in ``sources``. Hits without
    highlights get them from ``highlight`` (all at once) when a shared statement must be checked against them.
    """
    if len(hits) < 2:
        return list(hits)
    words_of_text = words or WordCache()
    hit_words = [words_of_text(hit.text) for hit in hits]
    quoting = quote_partners([hit.doc_id for hit in hits], [ids for _, ids in hit_words])
    leader_vectors = np.zeros_like(vectors)
    groups: list[_Group] = []
    group_of: dict[int, int] = {}  # leader's hit -> its group
    lit: list[SearchResult] = []

    def lit_hit(i: int) -> SearchResult:
        hit = hits[i]
        if not hit.highlights and highlight is not None:
            if not lit:
                lit.extend(highlight(hits))
            hit = lit[i]
        return hit

    def relevant(i: int, start: int, end: int, other: int) -> bool:
        """Are the shared words of hit ``i`` (document offsets) why it matched the query (as well as hit ``other``
        matched it)?"""
        hit = lit_hit(i)
        if hit.highlights:
            best = max(h.score for h in (*hit.highlights, *lit_hit(other).highlights))
            return answers(hit.highlights, start, end, floor=ANSWER_SHARE * best)
        if encode is None or query_vector is None:
            return False  # nothing to judge by (a search always sets highlights)
        shared = np.asarray(encode([hit.text[start - hit.char_start : end - hit.char_start]])[0], np.float32)
        # The cosine of the hit itself, not hit.score: fused (hybrid) scores are not cosines.
        return float(shared @ query_vector) >= float(vectors[i] @ query_vector)

    for i, hit in enumerate(hits):
        joined = False
        if groups:
            similar = np.flatnonzero(leader_vectors[: len(groups)] @ vectors[i] >= threshold)
            for near in similar:
                group = groups[near]
                if hit.doc_id not in group.docs and words_of_text.same(hit_words[group.leader], hit_words[i]):
                    group.members.append((i, hit.char_start, hit.char_end))
                    group.docs.add(hit.doc_id)
                    group.lead_whole = True
                    joined = True
                    break
        if not joined:
            for partner in quoting.get(i, ()):
                if partner not in group_of or hit.doc_id in groups[group_of[partner]].docs:
                    continue
                group = groups[group_of[partner]]
                leader = hits[group.leader]
                shared = words_of_text.shared(hit_words[group.leader], hit_words[i])
                if shared is None:
                    continue
                (lead_start, lead_end), (start, end) = shared
                lead_start, lead_end = leader.char_start + lead_start, leader.char_start + lead_end
                start, end = hit.char_start + start, hit.char_start + end
                if not (relevant(group.leader, lead_start, lead_end, i) or relevant(i, start, end, group.leader)):
                    continue  # the shared words are not what the hits matched on (a footer, a disclaimer)
                group.members.append((i, start, end))
                group.add_quote(lead_start, lead_end)
                group.docs.add(hit.doc_id)
                joined = True
                break
        if not joined:
            leader_vectors[len(groups)] = vectors[i]
            group_of[i] = len(groups)
            groups.append(_Group(i, {hit.doc_id}))
    return [_merged(hits, group) for group in groups]


def _merged(hits: Sequence[SearchResult], group: _Group) -> SearchResult:
    leader = hits[group.leader]
    if not group.members:
        return leader
    if group.lead_whole or group.lead_shared is None:
        sources = [leader.as_source()]
    else:
        sources = [leader.as_source(shared_start=group.lead_shared[0], shared_end=group.lead_shared[1])]
    sources += [hits[i].as_source(shared_start=start, shared_end=end) for i, start, end in group.members]
    return evolve(leader, sources=tuple(sources))
