"""BM25 queries over segments without a score array over every chunk: the exact top k, the scores of given chunks,
(the lookup of chunks sharing a text's rare terms, collapse's copies of a quote, is ``citeline.lexical.lookup``'s).

``SegmentedIndex.scores`` sums every query term's postings into one float32 score per live chunk, through each
part's position -> index position map, and a ranking then partitions all of it.
:meth:`SegmentScorer.top` sums in each part's own positions (no map) into that part's slice of one array, with each
part's length norms computed once per average length, gathers and adds with ``np.take``/``np.add.at`` (no intp
copies of the positions), and ranks only the chunks that reach the k-th best score of a rarest term's chunks (a
lower bound of the k-th best): a fraction of the whole-array cost at 1M
(figures: docs/scale.md#choices-measured-in-the-code).
What is left is memory-bound: a gather and a scatter of each posting of the query's terms. :meth:`SegmentScorer.ranked`
also reads hybrid's candidates' scores from that array; :meth:`SegmentScorer.scores_of` scores given chunks by binary
search in each term's postings.

MaxScore pruning (score the chunks of the rarest terms, look up the others) was measured twice and dropped: even
knowing the true k-th score, the terms that must be read in full hold a large share of the query's postings, and
term-at-a-time with exact per-term upper bounds switched to look-ups only at the last terms and cost more than the
exhaustive sum. Scoring in doc-range blocks (cache-sized) was slower too, as was reading tf=1 shares from a
per-document table (figures: docs/scale.md#choices-measured-in-the-code).

Both are exact: the same chunks, the same float32 scores bit for bit (every term's share computed as :func:`shares`
does and summed in query order, as ``SegmentedIndex.scores`` does), ties by chunk id, so a sharded index still ranks
exactly as one (tests/unit/test_lexical_scoring.py, tests/index/test_shards.py). Terms' locations and live document
frequencies are cached per scorer (a generation's snapshot). Nothing here imports the segment format
(``citeline.lexical.segments`` builds a :class:`SegmentScorer` from its parts).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from citeline.lexical.analyzer import BM25_B, BM25_K1, analyze
from citeline.util.arrays import positions_of

#: Distinct terms whose locations and live document frequencies a :class:`SegmentScorer` keeps (a generation's scorer
#: lives as long as its snapshot; common terms recur in most queries).
TERM_CACHE = 50_000


def term_hashes(terms: Sequence[str]) -> np.ndarray:
    """The 64-bit hashes segments name terms by (two of a million terms collide with probability about 3e-8)."""
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little") for term in terms),
        dtype=np.uint64,
        count=len(terms),
    )


@dataclass(frozen=True)
class Statistics:
    """The corpus-wide numbers BM25 scores one query with: live documents, their total length (in analyzed
    terms), and the document frequency of each analyzed query term (in query order). Shards add theirs up."""

    count: int
    total_length: int
    frequencies: tuple[int, ...]

    @property
    def average(self) -> float:
        """Average live document length (as :class:`SegmentScorer` computes it for itself)."""
        return self.total_length / self.count if self.count else 0.0

    def __add__(self, other: Statistics) -> Statistics:
        return Statistics(
            self.count + other.count,
            self.total_length + other.total_length,
            tuple(a + b for a, b in zip(self.frequencies, other.frequencies, strict=True)),
        )


@dataclass(frozen=True)
class _Plain:
    """One part's arrays as plain views (slicing a memmap costs a hundred times a view's), and its deletions."""

    chunk_ids: np.ndarray
    lengths: np.ndarray
    terms: np.ndarray
    indptr: np.ndarray
    postings: np.ndarray
    tfs: np.ndarray
    live: np.ndarray | None  #: None when nothing is deleted
    deleted: np.ndarray

    def located(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each of ``ids`` (int64, any order) would sit in this part (clamped to its positions) and whether
        the part holds it live."""
        if not len(self.chunk_ids):
            return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
        at = np.minimum(np.searchsorted(self.chunk_ids, ids), len(self.chunk_ids) - 1)
        held = self.chunk_ids[at] == ids
        if self.live is not None:
            held &= self.live[at]
        return at, held


@dataclass(frozen=True)
class _Term:
    """One distinct term in every part: its postings' bounds and its live document frequency."""

    ranges: tuple[tuple[int, int, int], ...]  #: (part, start, end) of the parts that hold it
    frequency: int


def shares(idf: np.float32, tfs: np.ndarray, lengths: np.ndarray, average: float) -> np.ndarray:
    """A term's float32 share of the BM25 score of chunks with these term frequencies and lengths ("lucene")."""
    tf = tfs.astype(np.float32)
    return idf * (tf / (BM25_K1 * ((1 - BM25_B) + BM25_B * lengths / average) + tf)).astype(np.float32)


def idf_of(count: int, frequency: int) -> np.float32:
    """BM25's ("lucene") idf of a term in ``frequency`` of ``count`` documents, as float32."""
    return np.float32(math.log(1 + (count - frequency + 0.5) / (frequency + 0.5)))


class SegmentScorer:
    """BM25 scoring over a generation's parts (``citeline.lexical.segments.Part``: a segment and its deletions);
    ``chunk_ids`` are the live ids, ascending."""

    def __init__(self, parts: Sequence[Any], chunk_ids: np.ndarray):
        self.chunk_ids = chunk_ids
        #: the last read-only ``allowed`` array and its positions in each part: a filter's ids (kept by the rows,
        #: ``store.passages``) come back as the same array on each search of that filter (a token's scope)
        self._allowed_at: tuple[np.ndarray, list[np.ndarray]] | None = None
        self._allowed_mask: tuple[np.ndarray, np.ndarray] | None = None
        self.plain = [
            _Plain(
                np.asarray(p.segment.chunk_ids),
                np.asarray(p.segment.lengths),
                np.asarray(p.segment.terms),
                np.asarray(p.segment.indptr),
                np.asarray(p.segment.postings),
                np.asarray(p.segment.tfs),
                p.live if len(p.deleted) else None,
                np.asarray(p.deleted),
            )
            for p in parts
        ]
        self._terms: dict[int, _Term] = {}
        self._norms: dict[tuple[int, float], np.ndarray] = {}

    @cached_property
    def total_length(self) -> int:
        """Analyzed terms in the live documents."""
        return sum(
            int(p.lengths.sum() if p.live is None else p.lengths[p.live].sum()) for p in self.plain if len(p.lengths)
        )

    @cached_property
    def maps(self) -> list[np.ndarray]:
        """Each part's position -> index position map (-1: deleted)."""
        maps = []
        for p in self.plain:
            mapping = np.full(len(p.chunk_ids), -1, dtype=np.int64)
            live = slice(None) if p.live is None else p.live
            mapping[live] = np.searchsorted(self.chunk_ids, p.chunk_ids[live])
            maps.append(mapping)
        return maps

    def term(self, term: int) -> _Term:
        """Where a term's postings are in each part and how many live documents hold it (cached)."""
        found = self._terms.get(term)
        if found is not None:
            return found
        ranges, frequency = [], 0
        for number, p in enumerate(self.plain):
            at = int(np.searchsorted(p.terms, np.uint64(term)))
            if at >= len(p.terms) or int(p.terms[at]) != term:
                continue
            start, end = int(p.indptr[at]), int(p.indptr[at + 1])
            ranges.append((number, start, end))
            frequency += end - start - _deleted_among(p, start, end)
        found = _Term(tuple(ranges), frequency)
        if len(self._terms) >= TERM_CACHE:
            self._terms.clear()
        self._terms[term] = found
        return found

    def term_frequencies(self, query: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``ids``'s frequency of each query term (ids x :meth:`query_terms`, float64) and its length; 0
        for an id this index does not hold (document-level BM25, ``citeline.query.doc_signals``)."""
        ids = np.asarray(ids, dtype=np.int64)
        terms = self.query_terms(query)
        tfs = np.zeros((len(ids), len(terms)), dtype=np.float64)
        lengths = np.zeros(len(ids), dtype=np.float64)
        for number, plain in enumerate(self.plain):
            at, held = plain.located(ids)
            rows, local = np.flatnonzero(held), at[held]
            if not len(rows):
                continue
            lengths[rows] = plain.lengths[local]
            for column, term in enumerate(terms):
                for hit, at in self._postings_of(term, number, local):
                    tfs[rows[hit], column] = plain.tfs[at]
        return tfs, lengths

    def _postings_of(self, term: int, number: int, local: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Where part ``number``'s sorted ``local`` positions hold ``term``: ``(mask over local, posting index)``
        for each range of the term's postings in that part."""
        found = []
        for part, start, end in self.term(term).ranges:
            if part != number:
                continue
            docs = self.plain[number].postings[start:end]
            # in the postings' dtype: searchsorted would otherwise copy them to int64 first
            at = np.minimum(np.searchsorted(docs, local.astype(docs.dtype)), len(docs) - 1)
            hit = docs[at] == local
            found.append((hit, start + at[hit]))
        return found

    def query_terms(self, query: str) -> list[int]:
        """The analyzed query's term hashes, in query order (a repeated term counts again, as in bm25s)."""
        return list(_query_terms(query))

    def statistics(self, query: str) -> Statistics:
        """This index's share of the corpus-wide statistics ``query`` is scored with."""
        frequencies = tuple(self.term(t).frequency for t in self.query_terms(query))
        return Statistics(len(self.chunk_ids), self.total_length, frequencies)

    def weighted(self, query: str, statistics: Statistics | None) -> tuple[list[tuple[int, np.float32]], float]:
        """(term, idf) of each query term occurrence that this index holds, in query order; the average length."""
        terms = self.query_terms(query)
        count, average = len(self.chunk_ids), (self.total_length / len(self.chunk_ids) if len(self.chunk_ids) else 0)
        if statistics is not None:
            count, average = statistics.count, statistics.average
        weighted = []
        for number, term in enumerate(terms):
            frequency = self.term(term).frequency
            if not frequency:
                continue
            if statistics is not None:
                frequency = statistics.frequencies[number]
            weighted.append((term, idf_of(count, frequency)))
        return weighted, average

    def _score(
        self, weighted: list[tuple[int, np.float32]], average: float, positions: list[np.ndarray]
    ) -> list[np.ndarray]:
        """Exact float32 scores of each part's ``positions`` (sorted local positions), summed in query order.

        One binary search per query term and part; the term frequencies, lengths and shares of every term at once
        (a term's share where it is absent: 0, which adds nothing). Per term, hybrid's ~200 candidates cost ~10
        calls on tiny arrays each, which batching cuts to about a third (docs/scale.md#choices-measured-in-the-code)."""
        out = []
        for number, local in enumerate(positions):
            p = self.plain[number]
            total = np.zeros(len(local), dtype=np.float32)
            out.append(total)
            idfs, found, ends = [], [], []
            # searchsorted copies the postings to the positions' dtype if they differ (int64 here, on every call)
            needles = local.astype(p.postings.dtype)
            for term, idf in weighted if len(local) else ():
                for part, start, end in self.term(term).ranges:
                    if part == number:
                        idfs.append(idf)
                        found.append(start + np.searchsorted(p.postings[start:end], needles))
                        ends.append(end - 1)
            if not found:
                continue
            at = np.minimum(np.stack(found), np.array(ends)[:, None])
            tf = np.where(p.postings[at] == local, p.tfs[at], 0).astype(np.float32)
            norm = BM25_K1 * ((1 - BM25_B) + BM25_B * p.lengths[local] / average)  # as shares() computes it
            share = np.array(idfs, dtype=np.float32)[:, None] * (tf / (norm + tf)).astype(np.float32)
            for row in share:  # in query order: the same float32 sums as SegmentedIndex.scores
                total += row
        return out

    def scores_of(self, query: str, ids: np.ndarray, statistics: Statistics | None = None) -> np.ndarray:
        """The BM25 scores of chunk ``ids`` (any order; 0 for an id not held), as float32."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.zeros(len(ids), dtype=np.float32)
        weighted, average = self.weighted(query, statistics)
        if not weighted or not len(ids):
            return out
        where, positions = [], []
        for p in self.plain:
            at, held = p.located(ids)
            local, order = np.unique(at[held], return_inverse=True)
            where.append((np.flatnonzero(held), order))
            positions.append(local)
        for (rows, order), scores in zip(where, self._score(weighted, average, positions), strict=True):
            out[rows] = scores[order]
        return out

    def _positions_allowed(self, allowed: np.ndarray) -> list[np.ndarray]:
        # Each part's positions of ``allowed``; a read-only array cannot change, so the last one's are kept.
        held = self._allowed_at
        if held is not None and held[0] is allowed:
            return held[1]
        found = [positions_of(p.chunk_ids, allowed) for p in self.plain]
        if isinstance(allowed, np.ndarray) and not allowed.flags.writeable:
            self._allowed_at = (allowed, found)
        return found

    def allowed_mask(self, allowed: np.ndarray) -> np.ndarray:
        """Whether each live chunk (in :attr:`chunk_ids` order) is in ``allowed`` (sorted ids); read-only, and kept
        for the last read-only ``allowed`` as :meth:`_positions_allowed` is."""
        held = self._allowed_mask
        if held is not None and held[0] is allowed:
            return held[1]
        mask = np.zeros(len(self.chunk_ids), dtype=bool)
        mask[positions_of(self.chunk_ids, allowed)] = True
        mask.flags.writeable = False
        if isinstance(allowed, np.ndarray) and not allowed.flags.writeable:
            self._allowed_mask = (allowed, mask)
        return mask

    def top(
        self, query: str, k: int, allowed: np.ndarray | None = None, statistics: Statistics | None = None
    ) -> list[tuple[int, float]]:
        """The k best ``(chunk_id, score)`` with a score above 0, best first, ties by chunk id, among ``allowed``
        (sorted ids) if given."""
        return self.ranked(query, k, allowed, statistics)[0]

    def ranked(
        self, query: str, k: int, allowed: np.ndarray | None = None, statistics: Statistics | None = None
    ) -> tuple[list[tuple[int, float]], Callable[[np.ndarray], np.ndarray]]:
        """:meth:`top`, and a function giving any chunk ids' scores (:meth:`scores_of`'s, bit for bit) read from
        the score array the top k was ranked from (hybrid's candidates: one look-up of the ids a part here instead
        of a binary search in the postings).

        Every part is scored into its own slice of one array, then ranked once: one selection instead of one a part
        saves the zeroing, the floor's compare and the top k of each part
        (docs/scale.md#choices-measured-in-the-code)."""
        weighted, average = self.weighted(query, statistics)
        if not weighted:
            return [], lambda ids: np.zeros(len(ids), dtype=np.float32)
        if k <= 0:
            return [], lambda ids: self.scores_of(query, ids, statistics)
        offsets = self.offsets
        scores = np.zeros(int(offsets[-1]), dtype=np.float32)
        floor, chosen = np.float32(0), []
        for number, p in enumerate(self.plain):
            ranges = [
                (idf, start, end)
                for term, idf in weighted
                for part, start, end in self.term(term).ranges
                if part == number
            ]
            if not ranges:
                continue
            norm = self._norm(number, average)
            part_scores = scores[offsets[number] : offsets[number + 1]]
            for idf, start, end in ranges:  # in query order: the same float32 sums as SegmentedIndex.scores
                _accumulate(part_scores, norm, p.postings[start:end], p.tfs[start:end], idf)
            if p.live is not None:
                part_scores[p.deleted] = 0
            if allowed is not None:
                chosen.append(offsets[number] + self._positions_allowed(allowed)[number])
                continue
            # The k-th best score of the rarest term's chunks (of those with k of them here) bounds this part's k-th
            # best, and so the k-th best of all, from below: only chunks reaching the highest such bound are ranked
            # (a compare is a tenth of an argpartition over every score).
            usable = [(end - start, start, end) for _, start, end in ranges if end - start >= k]
            if usable:
                _, start, end = min(usable)
                sample = part_scores[p.postings[start:end]]
                floor = max(floor, np.partition(sample, len(sample) - k)[len(sample) - k])
        if allowed is not None:
            positions = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
            positions = positions[scores[positions] > 0]
        else:
            positions = np.flatnonzero(scores >= floor) if floor > 0 else np.flatnonzero(scores)
        values = scores[positions]
        if len(values) > k:  # every chunk tied with the k-th best stays, so that ties go by chunk id
            keep = values >= np.partition(values, len(values) - k)[len(values) - k]
            positions, values = positions[keep], values[keep]
        ids = self._ids_at(positions)
        best = np.lexsort((ids, -values))[:k]
        return [(int(ids[i]), float(values[i])) for i in best], lambda wanted: self._read(scores, wanted)

    def _read(self, scores: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The ``scores`` (one array over every part, as :meth:`ranked` fills it) of chunk ``ids``; 0 for an id not
        held live (a chunk id deleted in one part may live in another)."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.zeros(len(ids), dtype=np.float32)
        for number, p in enumerate(self.plain):
            at, held = p.located(ids)
            out[held] = scores[self.offsets[number] + at[held]]
        return out

    @cached_property
    def offsets(self) -> np.ndarray:
        """Where each part's documents start in :meth:`top`'s one score array (and the total, last)."""
        return np.concatenate([[0], np.cumsum([len(p.chunk_ids) for p in self.plain])]).astype(np.int64)

    def _ids_at(self, positions: np.ndarray) -> np.ndarray:
        """The chunk ids at ``positions`` (ascending) of :meth:`top`'s score array."""
        ids = np.empty(len(positions), dtype=np.int64)
        bounds = np.searchsorted(positions, self.offsets)
        for number, p in enumerate(self.plain):
            a, b = bounds[number], bounds[number + 1]
            if b > a:
                ids[a:b] = p.chunk_ids[positions[a:b] - self.offsets[number]]
        return ids

    def _norm(self, number: int, average: float) -> np.ndarray:
        """``k1 * (1 - b + b * length / average)`` of each document of a part (float64, as :func:`shares` computes
        it), kept per average (a generation's own, or a sharded index's corpus-wide one)."""
        key = (number, average)
        cached = self._norms.get(key)
        if cached is None:
            if len(self._norms) >= len(self.plain) * 2:
                self._norms.clear()
            cached = self._norms[key] = BM25_K1 * ((1 - BM25_B) + BM25_B * self.plain[number].lengths / average)
        return cached


@lru_cache(maxsize=64)
def _query_terms(query: str) -> tuple[int, ...]:
    # A hybrid search analyses its query three times here (the lexical leg, the document BM25's statistics and its
    # term frequencies): the analyzer's stemming is pure, so the last queries' terms are kept.
    return tuple(int(h) for h in term_hashes(analyze([query])[0]))


def _accumulate(scores: np.ndarray, norm: np.ndarray, docs: np.ndarray, tfs: np.ndarray, idf: np.float32) -> None:
    """Add one term's float32 share (:func:`shares`'s value, bit for bit) to the ``scores`` of its postings ``docs``
    (distinct positions), given the part's :meth:`SegmentScorer._norm`.

    ``np.take`` and ``np.add.at`` rather than ``norm[docs]`` and ``scores[docs] += ...``: fancy indexing first copies
    the int32 positions to intp, twice for the read-modify-write, and at 1M chunks the gather and the scatter were
    most of a top 200 (figures: docs/scale.md#choices-measured-in-the-code). Temporaries are reused.
    """
    tf = tfs.astype(np.float32)
    ratio = np.take(norm, docs)  # float64, as shares() divides
    ratio += tf
    np.divide(tf, ratio, out=ratio)
    share = ratio.astype(np.float32)
    share *= idf
    np.add.at(scores, docs, share)  # positions are distinct within a term: one float32 add each, as += would


def _deleted_among(p: _Plain, start: int, end: int) -> int:
    """How many of the postings ``start:end`` of a part are deleted documents."""
    if p.live is None:
        return 0
    docs = p.postings[start:end]
    if len(p.deleted) * 16 < len(docs):  # few deletions: find each in the (sorted) postings
        at = np.minimum(np.searchsorted(docs, p.deleted), len(docs) - 1)
        return int(np.count_nonzero(docs[at] == p.deleted))
    return int(len(docs) - np.count_nonzero(p.live[docs]))


def _within(ids: np.ndarray, allowed: np.ndarray) -> Any:
    """Which of ``ids`` are in the sorted ``allowed``."""
    at = np.minimum(np.searchsorted(allowed, ids), len(allowed) - 1)
    return allowed[at] == ids if len(allowed) else np.zeros(len(ids), bool)
