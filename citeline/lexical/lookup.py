"""The chunks that share a text's rare terms: collapse's lookup of copies of a quote that ranked below the hits
(``SegmentedIndex.sharing_rare_terms``, ``citeline.query.collapse.add_unranked_copies``).

For each text, its :data:`RARE_TERMS` rarest terms that another chunk may hold (in 2 to :data:`RARE_AT_MOST` of
the chunks) weigh their idf; a chunk holding at least ``min_share`` of that weight is a match, and the k heaviest
come back. A copy carries the text's rare words, which most chunks do not.

Every posting of the chosen terms is read (one gather per segment); per segment the postings are keyed by (text,
the chunk's position in the segment, the term's row) and sorted, the idf weights summed per chunk in the terms'
order, and only the chunks that reach ``min_share`` are mapped to index positions
(``tests/unit/test_collapse_lookup.py``
checks the results against the definition). Its cost: docs/performance.md#duplicate-collapse.

Term hashes are kept per lookup (:data:`HASH_CACHE` of them): a search's highlights hold a few hundred distinct
terms, most of them seen before, and hashing each again adds up (docs/performance.md#choices-measured-in-the-code).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from citeline.lexical.analyzer import TOKEN_PATTERN, analyze
from citeline.lexical.scoring import SegmentScorer, term_hashes

#: A text with fewer usable terms than this finds nothing (too few words to single a chunk out).
MIN_SHARED_TERMS = 3
#: Terms in more than this share of the chunks are left out (their postings are long and single nothing out); the
#: share that halved a call's cost on SciFact: docs/performance.md#choices-measured-in-the-code.
RARE_AT_MOST = 0.005
#: ... unless the index is small (then every term's postings are short anyway).
RARE_FLOOR = 50
#: How many of a text's rarest usable terms are weighed.
RARE_TERMS = 8
#: Distinct terms whose hashes a lookup keeps.
HASH_CACHE = 100_000


#: For ASCII text, where ``\w`` is ``[A-Za-z0-9_]``: every other character to a space, capitals to lower case.
_ASCII_LETTERS = frozenset(chr(c) for c in range(128) if chr(c).isalnum() or chr(c) == "_")
_ASCII_WORDS = str.maketrans({c: (chr(c).lower() if chr(c).isalnum() or chr(c) == "_" else " ") for c in range(128)})


def _words(text: str) -> set[str]:
    """The distinct words of ``text`` as :func:`citeline.lexical.analyzer.analyze` finds them before stop words and
    stems.

    ``TOKEN_PATTERN`` finds runs of two or more word characters; in ASCII text (most highlights) ``translate`` and
    ``split`` find the same runs at a third of the cost (docs/performance.md#choices-measured-in-the-code).
    """
    if text.isascii():
        words = set(text.translate(_ASCII_WORDS).split())
        words.difference_update(_ASCII_LETTERS)  # single characters are not tokens
        return words
    return set(TOKEN_PATTERN.findall(text.lower()))


class RareTermLookup:
    """Lookups of chunks sharing texts' rare terms over one generation's :class:`SegmentScorer` (its parts and maps)."""

    def __init__(self, scorer: SegmentScorer):
        self.scorer = scorer
        self._hashes: dict[str, int | None] = {}

    def _text_hashes(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's sorted distinct term hashes, as :func:`citeline.lexical.analyzer.analyze` would name its terms.

        Kept per lowercased word (a stop word as None): a word seen before is neither stemmed nor hashed again,
        which cuts a search's highlights' analysis to a fifth (docs/performance.md#choices-measured-in-the-code).
        The cache is shared by threads: entries are only added, and a full cache is replaced by a new one holding
        these texts' words.
        """
        cache = self._hashes
        words = [_words(text) for text in texts]
        every = set().union(*words)
        new = list(every.difference(cache))
        if new:
            # Each new word analysed alone: one token (it matched TOKEN_PATTERN), its stem, or none for a stop word.
            terms = analyze(new)
            distinct = list({term for per_word in terms for term in per_word})
            hash_of = dict(zip(distinct, term_hashes(distinct).tolist(), strict=True))
            if len(cache) + len(new) > HASH_CACHE:
                cache = {word: cache[word] for word in every if word in cache}
            cache.update(
                (word, hash_of[per_word[0]] if per_word else None) for word, per_word in zip(new, terms, strict=True)
            )
            self._hashes = cache
        out = []
        for per_text in words:
            hashes = set(map(cache.__getitem__, per_text))
            hashes.discard(None)
            found = np.fromiter(hashes, dtype=np.uint64, count=len(hashes))
            found.sort()
            out.append(found)
        return out

    def find(
        self,
        texts: Sequence[str],
        k: int,
        *,
        terms: int = RARE_TERMS,
        min_share: float = 0.5,
        allowed: np.ndarray | None = None,
    ) -> list[list[int]]:
        """For each text, at most k live chunk ids holding the most idf weight of its ``terms`` rarest terms (and at
        least ``min_share`` of it), best first (ties by position); ``allowed`` (sorted ids) restricts them."""
        scorer = self.scorer
        count, maps = len(scorer.chunk_ids), scorer.maps
        out: list[list[int]] = [[] for _ in texts]
        owned = self._text_hashes(texts)
        owner = np.repeat(np.arange(len(owned)), [len(h) for h in owned])
        hashes = np.concatenate(owned) if owned else np.zeros(0, np.uint64)
        # Document frequencies from the postings' bounds (deleted documents included: a ranking of rarity only).
        located = []
        frequency = np.zeros(len(hashes), dtype=np.int64)
        for p in scorer.plain:
            if not len(p.terms):
                # A part whose chunks hold no term at all (a file of stop words, punctuation or one letter): its
                # indptr is [0], so there is no row to read a length from.
                located.append((np.zeros(len(hashes), dtype=np.int64), np.zeros(len(hashes), dtype=bool)))
                continue
            at = np.minimum(np.searchsorted(p.terms, hashes), len(p.terms) - 1)
            hit = p.terms[at] == hashes
            frequency += np.where(hit, p.indptr[at + 1] - p.indptr[at], 0)
            located.append((at, hit))
        # A term one chunk alone holds (a name in the text's own attribution, say) cannot lead to another chunk, and
        # a common one singles nothing out.
        usable = (frequency > 1) & (frequency <= max(RARE_AT_MOST * count, RARE_FLOOR))
        order = np.lexsort((frequency, owner))
        order = order[usable[order]]
        rank_in_text = np.arange(len(order)) - np.searchsorted(owner[order], owner[order])
        chosen = order[rank_in_text < terms]
        enough = np.bincount(owner[chosen], minlength=len(owned)) >= MIN_SHARED_TERMS
        chosen = chosen[enough[owner[chosen]]]
        if not len(chosen):
            return out
        idf = np.log1p((count - frequency[chosen] + 0.5) / (frequency[chosen] + 0.5))
        texts_of = owner[chosen]
        totals = np.bincount(texts_of, weights=idf, minlength=len(owned))
        # Per part, one key per posting: (text, the chunk's position in the part, the term's row in chosen), sorted.
        # A plain sort is cheaper than np.unique's stable argsort (docs/performance.md#choices-measured-in-the-code),
        # and with the
        # term's row in the key each chunk's idf weights are summed in the terms' order (the same float sums as the
        # first version's bincount). Only the chunks that hold enough of the weight are then mapped to index
        # positions: mapping every posting (a gather from an array as long as the index) cost more than the sort.
        row_bits = max(int(len(chosen) - 1).bit_length(), 1)
        row_mask = (1 << row_bits) - 1
        found_text, found_position, found_score = [], [], []
        for p, mapping, (at, hit) in zip(scorer.plain, maps, located, strict=True):
            inside = np.flatnonzero(hit[chosen])
            if not len(inside):
                continue
            starts, ends = p.indptr[at[chosen[inside]]], p.indptr[at[chosen[inside]] + 1]
            lengths = ends - starts
            # The postings of all chosen terms in one gather: start of each term's run, plus 0, 1, 2, ...
            offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
            # The key's fields packed in bits (text, position, row: at most ~10 + 20 + 9 of 63 bits at 1M chunks),
            # so that splitting them again is a shift and a mask rather than np.divmod's integer divisions, and
            # sorted by timsort ("stable"), which merges the keys' ascending runs (each term's postings) rather than
            # sorting them afresh, which measured cheaper at 1M chunks
            # (docs/performance.md#choices-measured-in-the-code).
            # The keys are distinct, so any sort gives the same order and the same float sums.
            size_bits = max(int(len(p.chunk_ids) - 1).bit_length(), 1)
            pair = np.repeat(texts_of[inside].astype(np.int64) << size_bits, lengths) | p.postings[offsets]
            keys = np.sort((pair << row_bits) | np.repeat(inside, lengths), kind="stable")
            pair_of, row_of = keys >> row_bits, keys & row_mask
            new_pair = np.r_[True, pair_of[1:] != pair_of[:-1]]
            scores = np.bincount(np.cumsum(new_pair) - 1, weights=idf[row_of])
            text, local = pair_of[new_pair] >> size_bits, pair_of[new_pair] & ((1 << size_bits) - 1)
            good = scores >= min_share * totals[text]
            where = mapping[local[good]]
            live = where >= 0
            found_text.append(text[good][live])
            found_position.append(where[live])
            found_score.append(scores[good][live])
        if not found_text:
            return out
        text, positions = np.concatenate(found_text), np.concatenate(found_position)
        scores = np.concatenate(found_score)
        good = np.ones(len(text), dtype=bool)
        if allowed is not None:
            good &= scorer.allowed_mask(allowed)[positions]
        text, positions, scores = text[good], positions[good], scores[good]
        best = np.lexsort((positions, -scores, text))
        text, positions = text[best], positions[best]
        keep_best = np.arange(len(text)) - np.searchsorted(text, text) < k
        for t, position in zip(text[keep_best].tolist(), positions[keep_best].tolist(), strict=True):
            out[t].append(int(scorer.chunk_ids[position]))
        return out
