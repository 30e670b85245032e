"""Near-duplicate collapse: one result per passage, listing every document it occurs in.

After ranking, hits from *different* documents that carry the same passage become one result: the best-scored
hit is kept and :attr:`SearchResult.sources` lists every source, each with its own chunk offsets and the offsets
of the part it shares. Two hits carry the same passage when

1. their chunk vectors are near-identical: cosine >= ``threshold`` (the same article syndicated twice, a record
   ingested from two exports, a page saved as HTML and PDF); or
2. they share a quoted passage: a run of at least :data:`MIN_SHARED_WORDS` identical words (case and
   punctuation aside) whose two occurrences' vectors are near-identical (cosine >= ``threshold``) and which is
   itself at least as close to the query as the lower-ranked hit (so the shared words are why both hits
   matched; a common footer or disclaimer never merges two otherwise unrelated hits).

Rule 2 exists because a chunk is ~250 tokens of context around a quote: in the seed articles the two chunks that
quote Corporal Drury have a cosine of only 0.67 with the real model, lower than the 0.76 of two chunks of theirs
that quote nobody in common, so no chunk-level threshold separates "same passage" from "same topic". The quote's
own two occurrences are identical text (cosine 1.0).

Grouping is greedy in rank order: a hit joins the first better-ranked group whose leader it duplicates and which
holds no passage of the same document yet, so results stay in score order and the kept passage is the best one.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from citeline.errors import QueryError
from citeline.results import SearchResult

#: Chunks whose vectors have at least this cosine are the same passage. Measured with the real model:
#: formatting variants of one seed chunk (reflowed whitespace, case, curly quotes and no punctuation) score
#: 0.965-1.0 on torch and onnx-int8, the same chunk with its last paragraph dropped or its opening sentence
#: reworded 0.94-0.95; different passages score far lower: 0.76 at most between the two seed articles' chunks, and
#: among SciFact's top-30 hits for 200 queries (84,554 pairs of distinct papers, bench/collapse_threshold.py) the
#: highest is 0.939, with 5 pairs above 0.9 and none at 0.95. So 0.95 merges copies of one passage and never two
#: papers; lower it (--collapse-threshold 0.9) to also merge lightly edited versions.
DEFAULT_COLLAPSE_THRESHOLD = 0.95

#: The shortest quote (in words) that makes two passages the same: a full sentence, longer than the stock phrases
#: ("according to a statement released on ...") that unrelated texts share.
MIN_SHARED_WORDS = 12

#: The first round of a collapsed search ranks this many candidates per wanted result; it deepens if collapsing
#: leaves fewer than k results while more candidates exist.
CANDIDATES_PER_RESULT = 3

_WORD = re.compile(r"\w+")

Encode = Callable[[list[str]], np.ndarray]


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


def collapsed_search(
    k: int,
    rank: Callable[[int], list[SearchResult]],
    vectors: Callable[[Sequence[int]], np.ndarray],
    *,
    query_vector: np.ndarray,
    encode: Encode,
    threshold: float = DEFAULT_COLLAPSE_THRESHOLD,
) -> list[SearchResult]:
    """The k best collapsed results. ``rank(n)`` returns the n best hits; ``vectors(ids)`` their chunk vectors.

    Ranks deeper than k so that k distinct passages come back whenever the candidates hold that many.
    """
    depth = k * CANDIDATES_PER_RESULT + 10
    while True:
        hits = rank(depth)
        groups = collapse(
            hits, vectors([hit.chunk_id for hit in hits]), query_vector=query_vector, encode=encode,
            threshold=threshold,
        )
        if len(groups) >= k or len(hits) < depth:
            return groups[:k]
        depth *= 4


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
    query_vector: np.ndarray,
    encode: Encode,
    threshold: float = DEFAULT_COLLAPSE_THRESHOLD,
) -> list[SearchResult]:
    """Merge ranked ``hits`` (best first; ``vectors`` their chunk vectors, row by row) that are the same passage.

    Returns one result per group, in rank order, each with every source of its group in ``sources``.
    """
    if len(hits) < 2:
        return list(hits)
    quoting = _quote_partners(hits)
    leader_vectors = np.zeros_like(vectors)
    groups: list[_Group] = []
    group_of: dict[int, int] = {}  # leader's hit -> its group
    cache: dict[str, np.ndarray] = {}

    def vector_of(text: str) -> np.ndarray:
        if text not in cache:
            cache[text] = np.asarray(encode([text])[0], dtype=np.float32)
        return cache[text]

    for i, hit in enumerate(hits):
        joined = False
        if groups:
            similar = np.flatnonzero(leader_vectors[: len(groups)] @ vectors[i] >= threshold)
            for near in similar:
                group = groups[near]
                if hit.doc_id not in group.docs:
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
                shared = _shared_passage(hits[group.leader].text, hit.text)
                if shared is None:
                    continue
                (lead_start, lead_end), (start, end) = shared
                lead_text = hits[group.leader].text[lead_start:lead_end]
                text = hit.text[start:end]
                lead_vector = vector_of(lead_text)
                if text != lead_text and float(lead_vector @ vector_of(text)) < threshold:
                    continue
                # The cosine of the hit itself, not hit.score: fused (hybrid) scores are not cosines.
                if float(lead_vector @ query_vector) < float(vectors[i] @ query_vector):
                    continue  # the shared words are not what the hits matched on (a footer, a disclaimer)
                group.members.append((i, hit.char_start + start, hit.char_start + end))
                offset = hits[group.leader].char_start
                group.add_quote(offset + lead_start, offset + lead_end)
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
    return replace(leader, sources=tuple(sources))


def _quote_partners(hits: Sequence[SearchResult]) -> dict[int, list[int]]:
    """For each hit, the better-ranked hits of other documents it shares a run of MIN_SHARED_WORDS words with.

    Every run of that many words (a shingle) is hashed with numpy, and hits are paired through equal hashes with
    one sort; this costs a few milliseconds per thousand hits, where Python sets of word tuples cost a second.
    Equal hashes are only candidates: :func:`_shared_passage` compares the words themselves.
    """
    vocabulary: dict[str, int] = {}
    hashes, owners = [], []
    for i, hit in enumerate(hits):
        words = _WORD.findall(hit.text.lower())
        if len(words) < MIN_SHARED_WORDS:
            continue
        ids = np.fromiter((vocabulary.setdefault(word, len(vocabulary)) for word in words), np.uint64, len(words))
        shingles = np.zeros(len(ids) - MIN_SHARED_WORDS + 1, np.uint64)
        for offset in range(MIN_SHARED_WORDS):  # a polynomial hash; uint64 arithmetic wraps around
            shingles = shingles * np.uint64(1_000_003) + ids[offset : offset + len(shingles)]
        shingles = np.unique(shingles)
        hashes.append(shingles)
        owners.append(np.full(len(shingles), i, np.int64))
    if len(hashes) < 2:
        return {}
    all_hashes, all_owners = np.concatenate(hashes), np.concatenate(owners)
    order = np.lexsort((all_owners, all_hashes))
    all_hashes, all_owners = all_hashes[order], all_owners[order]
    starts = np.flatnonzero(np.r_[True, all_hashes[1:] != all_hashes[:-1]])
    sizes = np.diff(np.r_[starts, len(all_hashes)])
    partners: dict[int, set[int]] = {}
    for start, size in zip(starts[sizes > 1], sizes[sizes > 1], strict=True):
        run = all_owners[start : start + size].tolist()  # ascending: better-ranked first
        for later_at, later in enumerate(run):
            for earlier in run[:later_at]:
                if hits[earlier].doc_id != hits[later].doc_id:
                    partners.setdefault(later, set()).add(earlier)
    return {hit: sorted(found) for hit, found in partners.items()}


def _shared_passage(a: str, b: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The longest run of words texts ``a`` and ``b`` share, as character spans in each (None if too short)."""
    a_matches, b_matches = list(_WORD.finditer(a)), list(_WORD.finditer(b))
    match = difflib.SequenceMatcher(
        None, [m.group().lower() for m in a_matches], [m.group().lower() for m in b_matches], autojunk=False
    ).find_longest_match(0, len(a_matches), 0, len(b_matches))
    if match.size < MIN_SHARED_WORDS:
        return None
    last = match.size - 1
    return (
        (a_matches[match.a].start(), a_matches[match.a + last].end()),
        (b_matches[match.b].start(), b_matches[match.b + last].end()),
    )
