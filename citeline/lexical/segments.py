"""The lexical index in segments, so that a commit costs what changed.

An index is a list of immutable *segments* (:class:`Segment`: postings of term hashes with raw term
frequencies and document lengths, in their own folder) and, per generation, a small folder (the *manifest*:
which segments, which of their documents are deleted, the live chunk ids). A commit adds one delta segment and
marks the removed chunks deleted, so it costs what changed; :func:`merge_plan` merges segments of one size tier
once there are :data:`MERGE_WIDTH` of them, and compacts everything once :data:`COMPACT_DELETED` of the documents
are deleted. Scores are computed at query time from raw term frequencies with corpus-wide statistics (live
documents, document frequencies of live documents, average live length), so a segmented index ranks exactly as
one built from scratch over the same chunks (bm25s's "lucene" formula, to float rounding; see
``tests/index/test_incremental_commits.py``). bm25s precomputes each posting's score with its own corpus's idf, which
cannot be shared between segments, so it serves only as the analyzer here, and for folders written before
segments (read as they are through ``citeline.lexical.legacy.LegacyLexical``) and tuning experiments.

Where segments and generation folders live, and how they are published crash-safely, is
``citeline.store.generation``'s business.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from citeline.errors import IndexCorruptError
from citeline.lexical.analyzer import (
    CHUNK_IDS_FILE,
    SETTINGS_FILE,
    analyze,
    bm25_settings,
    top_positions,
)
from citeline.lexical.legacy import LegacyLexical
from citeline.lexical.lookup import (  # noqa: F401  (re-exported: the tests name them here)
    MIN_SHARED_TERMS,
    RARE_AT_MOST,
    RARE_FLOOR,
    RareTermLookup,
)
from citeline.lexical.scoring import (  # also re-exported: shards and the tests name them here
    SegmentScorer,
    Statistics,
    shares,
    term_hashes,
)
from citeline.util.arrays import load_npy, positions_of

#: ``format`` of a generation folder that lists segments (folders without it are bm25s's, from before segments).
SEGMENTED_FORMAT = 2
#: The arrays of a segment folder.
SEGMENT_ARRAYS = ("chunk_ids", "lengths", "terms", "indptr", "postings", "tfs")
#: Segments of one size tier (live documents within a factor of ten) merged into one once there are this many:
#: each chunk is rewritten about once per tier (log10 of the index size), and a one-document commit merges only
#: small segments.
MERGE_WIDTH = 10
#: Every segment is merged into one (a compaction) once this fraction of their documents is deleted.
COMPACT_DELETED = 0.25


@dataclass
class Segment:
    """Immutable postings of some chunks: document positions follow ascending chunk ids."""

    chunk_ids: np.ndarray  #: int64, ascending: position -> chunk id
    lengths: np.ndarray  #: int32: analyzed terms per document (BM25's document length)
    terms: np.ndarray  #: uint64, ascending term hashes
    indptr: np.ndarray  #: int64, len(terms) + 1: the postings of terms[i] are postings[indptr[i]:indptr[i + 1]]
    postings: np.ndarray  #: int32 document positions, ascending within a term
    tfs: np.ndarray  #: uint16 term frequency of each posting

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @classmethod
    def build(cls, chunk_ids: np.ndarray, texts: Sequence[str]) -> Segment:
        """Analyze ``texts`` (named by ``chunk_ids``, unique, any order) into a segment."""
        ids = np.asarray(chunk_ids, dtype=np.int64)
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} chunk ids for {len(texts)} texts")
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        if not len(ids):
            return cls._from_pairs(ids, np.zeros(0, np.int32), *(np.zeros(0, np.int64),) * 3)
        vocabulary: dict[str, int] = {}  # term -> its position in the order terms first occur
        term_ids = [
            [vocabulary.setdefault(term, len(vocabulary)) for term in terms]
            for terms in analyze([texts[i] for i in order])
        ]
        hash_of_id = term_hashes(list(vocabulary))
        lengths = np.fromiter((len(doc) for doc in term_ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(term_ids), dtype=np.int64, count=int(lengths.sum()))
        docs = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
        return cls._from_pairs(ids, lengths.astype(np.int32), hash_of_id[flat], docs, np.ones(len(flat), np.int64))

    @classmethod
    def _from_pairs(
        cls, ids: np.ndarray, lengths: np.ndarray, keys: np.ndarray, docs: np.ndarray, counts: np.ndarray
    ) -> Segment:
        """A segment from (term hash, document position, count) triples (repeated pairs are summed)."""
        if len(np.unique(ids)) != len(ids):
            raise ValueError("a chunk id occurs twice in one segment")
        order = np.lexsort((docs, keys))
        keys, docs, counts = keys[order], docs[order], counts[order]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = (keys[1:] != keys[:-1]) | (docs[1:] != docs[:-1])
        starts = np.flatnonzero(first)
        tfs = np.add.reduceat(counts, starts) if len(starts) else np.zeros(0, np.int64)
        keys, docs = keys[starts], docs[starts]
        new_term = np.ones(len(keys), dtype=bool)
        new_term[1:] = keys[1:] != keys[:-1]
        term_starts = np.flatnonzero(new_term)
        return cls(
            chunk_ids=np.ascontiguousarray(ids, dtype=np.int64),
            lengths=np.ascontiguousarray(lengths, dtype=np.int32),
            terms=np.ascontiguousarray(keys[term_starts], dtype=np.uint64),
            indptr=np.append(term_starts, len(keys)).astype(np.int64),
            postings=docs.astype(np.int32),
            tfs=np.minimum(tfs, np.iinfo(np.uint16).max).astype(np.uint16),
        )

    def save(self, directory: Path) -> None:
        """Write the arrays as plain ``.npy`` files (memory-mappable, no pickles)."""
        directory.mkdir(parents=True, exist_ok=True)
        for name in SEGMENT_ARRAYS:
            np.save(directory / f"{name}.npy", getattr(self, name), allow_pickle=False)

    @classmethod
    def load(cls, directory: Path, *, mmap: bool = True) -> Segment:
        """Read a segment folder (memory-mapped by default); raises :class:`IndexCorruptError` if unreadable."""
        try:
            arrays = {
                name: load_npy(directory / f"{name}.npy", mmap_mode="r" if mmap else None) for name in SEGMENT_ARRAYS
            }
        except (OSError, ValueError) as exc:
            raise IndexCorruptError(f"{directory} cannot be read ({exc}); run `citeline rebuild`") from exc
        segment = cls(**arrays)
        if not (
            len(segment.lengths) == len(segment.chunk_ids)
            and len(segment.indptr) == len(segment.terms) + 1
            and int(segment.indptr[-1]) == len(segment.postings) == len(segment.tfs)
        ):
            raise IndexCorruptError(f"{directory} is inconsistent (array lengths); run `citeline rebuild`")
        return segment


@dataclass
class Part:
    """A segment as one generation sees it: its folder name (None until published) and its deleted positions."""

    name: str | None
    segment: Segment
    deleted: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))  #: sorted positions
    sha256: str = ""

    @cached_property
    def live(self) -> np.ndarray:
        """Boolean mask of the documents not deleted."""
        mask = np.ones(len(self.segment), dtype=bool)
        mask[self.deleted] = False
        return mask

    @property
    def live_count(self) -> int:
        """Documents not deleted."""
        return len(self.segment) - len(self.deleted)

    def without(self, chunk_ids: np.ndarray) -> Part:
        """This part with the live documents among ``chunk_ids`` (sorted int64) deleted as well."""
        found = np.unique(positions_of(self.segment.chunk_ids, chunk_ids))
        found = found[self.live[found]]
        if not len(found):
            return self
        return Part(self.name, self.segment, np.union1d(self.deleted, found).astype(np.int32), self.sha256)


def merge_plan(parts: Sequence[Part]) -> tuple[str, list[int]] | None:
    """Which parts to merge after a commit, and whether that is a ``"merge"`` or a ``"compaction"`` (all parts).

    Parts without live documents are simply dropped (see :func:`live_parts`), not merged.
    """
    total = sum(len(part.segment) for part in parts)
    deleted = sum(len(part.deleted) for part in parts)
    if total and deleted and deleted / total > COMPACT_DELETED:
        return "compaction", list(range(len(parts)))
    tiers: dict[int, list[int]] = {}
    for number, part in enumerate(parts):
        tiers.setdefault(int(math.log10(max(part.live_count, 1))), []).append(number)
    for tier in sorted(tiers):
        if len(tiers[tier]) >= MERGE_WIDTH:
            return "merge", tiers[tier]
    return None


def live_parts(parts: Sequence[Part]) -> list[Part]:
    """The parts that still hold a live document."""
    return [part for part in parts if part.live_count]


class SegmentedIndex:
    """BM25 over segments with corpus-wide statistics (see the module docstring); ``chunk_ids`` are the live
    chunk ids, ascending, and ``scores`` follows them. A ``citeline.query.readers.LexicalReader``, and a
    ``LexicalShard`` (:meth:`as_shard`)."""

    def __init__(self, parts: Sequence[Part], chunk_ids: np.ndarray | None = None):
        if chunk_ids is None:
            live = [part.segment.chunk_ids[part.live] for part in parts]
            chunk_ids = np.sort(np.concatenate(live)) if live else np.zeros(0, dtype=np.int64)
        self.chunk_ids = np.asarray(chunk_ids, dtype=np.int64)
        self.parts = list(parts)

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @classmethod
    def build(cls, chunk_ids: np.ndarray, texts: Sequence[str], **_: Any) -> SegmentedIndex:
        """One segment over ``texts`` (named by ``chunk_ids``)."""
        segment = Segment.build(chunk_ids, texts)
        return cls([Part(None, segment)] if len(segment) else [], segment.chunk_ids)

    @cached_property
    def _scorer(self) -> SegmentScorer:
        """Query evaluation over the parts (``citeline.lexical.scoring``): term locations, pruned top k."""
        return SegmentScorer(self.parts, self.chunk_ids)

    @cached_property
    def _lookup(self) -> RareTermLookup:
        """Lookups of chunks sharing a text's rare terms over the same parts (``citeline.lexical.lookup``)."""
        return RareTermLookup(self._scorer)

    def statistics(self, query: str) -> Statistics:
        """This index's share of the corpus-wide statistics ``query`` is scored with (see :class:`Statistics`)."""
        return self._scorer.statistics(query)

    def as_shard(self) -> SegmentedIndex:
        """Itself: its scores take the corpus-wide statistics of a sharded index (``citeline.sharding.search``)."""
        return self

    def scores(self, query: str, statistics: Statistics | None = None) -> np.ndarray:
        """The BM25 score of every live chunk (``chunk_ids`` order) for ``query``; zeros where no term occurs.

        ``statistics`` (the sum of every shard's :meth:`statistics`) scores this index as one part of a larger
        corpus: then a sharded index ranks exactly as one index over all the chunks (``citeline.sharding.index``). Every
        posting of every query term is read: :meth:`search` and :meth:`scores_of` read far fewer."""
        scorer = self._scorer
        scores = np.zeros(len(self.chunk_ids), dtype=np.float32)
        if not len(scores):
            return scores
        weighted, average = scorer.weighted(query, statistics)
        for term, idf in weighted:
            for number, start, end in scorer.term(term).ranges:
                plain, mapping = scorer.plain[number], scorer.maps[number]
                docs = plain.postings[start:end]
                where = mapping[docs]
                keep = where >= 0
                scores[where[keep]] += shares(idf, plain.tfs[start:end][keep], plain.lengths[docs[keep]], average)
        return scores

    def search(
        self, query: str, k: int, allowed: np.ndarray | None = None, statistics: Statistics | None = None
    ) -> list[tuple[int, float]]:
        """The k chunks with the highest BM25 score, as ``(chunk_id, score)`` best first (ties by chunk id), among
        ``allowed`` if given; exact, without scoring every posting when the query's rare terms decide the top k
        (``citeline.lexical.scoring``)."""
        found = self._scorer.top(query, k, allowed, statistics)
        if found is not None:
            return found
        scores = self.scores(query, statistics)
        positions = None if allowed is None else positions_of(self.chunk_ids, allowed)
        top = top_positions(scores, positions, k)
        return [(int(self.chunk_ids[p]), float(scores[p])) for p in top if scores[p] > 0]

    def ranked(
        self, query: str, k: int, allowed: np.ndarray | None = None, statistics: Statistics | None = None
    ) -> tuple[list[tuple[int, float]], Callable[[np.ndarray], np.ndarray]]:
        """:meth:`search`'s k best and a function scoring any chunk ids as :meth:`scores_of` does (hybrid fusion
        scores only the candidates the k best do not hold): read from the scores the k best were ranked from."""
        return self._scorer.ranked(query, k, allowed, statistics)

    def term_frequencies(self, query: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``ids``'s frequency of each analyzed query term (ids x terms, query order) and its length in
        tokens; 0 for an id not held (``citeline.query.doc_signals`` sums them over a document's chunks)."""
        return self._scorer.term_frequencies(query, ids)

    def scores_of(self, query: str, ids: np.ndarray, statistics: Statistics | None = None) -> np.ndarray:
        """The BM25 scores of chunk ``ids`` (float32; 0 for an id not held), equal to ``scores(query)``'s."""
        return self._scorer.scores_of(query, ids, statistics)

    def sharing_rare_terms(
        self, texts: Sequence[str], k: int, *, terms: int = 8, min_share: float = 0.5, allowed: np.ndarray | None = None
    ) -> list[list[int]]:
        """For each text, at most k live chunk ids holding the most idf weight of its ``terms`` rarest terms (and at
        least ``min_share`` of it), best first: where a sentence is repeated, without scoring the whole text.

        Only the postings of a few rare terms are read, and in full only those of the rarest (see
        ``citeline.lexical.lookup``): collapse's lookup of copies of a quote (``citeline.query.collapse``).
        """
        return self._lookup.find(texts, k, terms=terms, min_share=min_share, allowed=allowed)

    def save(self, directory: Path) -> None:
        """Write this generation's folder (the manifest); the parts' segments must already be published."""
        write_manifest(directory, self.parts, self.chunk_ids)


def write_manifest(directory: Path, parts: Sequence[Part], chunk_ids: np.ndarray) -> None:
    """Write a generation's folder: settings and the list of segments, their deletions, the live chunk ids."""
    directory.mkdir(parents=True, exist_ok=True)
    segments = []
    for part in parts:
        if part.name is None:
            raise ValueError("a segment must be published before a generation lists it")
        segments.append({"name": part.name, "docs": len(part.segment), "sha256": part.sha256})
        if len(part.deleted):
            np.save(directory / f"deleted.{part.name}.npy", part.deleted.astype(np.int32), allow_pickle=False)
    np.save(directory / CHUNK_IDS_FILE, np.ascontiguousarray(chunk_ids, dtype=np.int64), allow_pickle=False)
    settings = {**bm25_settings(), "format": SEGMENTED_FORMAT, "chunks": len(chunk_ids), "segments": segments}
    (directory / SETTINGS_FILE).write_text(json.dumps(settings))


def read_segments(directory: Path) -> list[dict[str, Any]] | None:
    """The segments a generation folder lists (``name``, ``docs``, ``sha256``): none for a bm25s folder, None
    when the folder cannot be read."""
    try:
        settings = json.loads((directory / SETTINGS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return list(settings.get("segments", [])) if settings.get("format") == SEGMENTED_FORMAT else []


def load_segmented(directory: Path, settings: dict[str, Any]) -> SegmentedIndex:
    """Read a generation folder and the segments it lists (siblings of the folder, memory-mapped)."""
    try:
        chunk_ids = load_npy(directory / CHUNK_IDS_FILE, mmap_mode="r")
        parts = []
        for entry in settings["segments"]:
            segment = Segment.load(directory.parent / entry["name"])
            deleted_file = directory / f"deleted.{entry['name']}.npy"
            deleted = load_npy(deleted_file) if deleted_file.exists() else np.zeros(0, np.int32)
            if len(segment) != entry["docs"] or (len(deleted) and int(deleted.max()) >= len(segment)):
                raise IndexCorruptError(f"{directory.parent / entry['name']} is not the segment {directory} lists")
            parts.append(Part(entry["name"], segment, deleted, entry.get("sha256", "")))
    except (OSError, ValueError, KeyError) as exc:
        raise IndexCorruptError(f"{directory} cannot be read ({exc}); run `citeline rebuild`") from exc
    index = SegmentedIndex(parts, chunk_ids)
    if settings.get("chunks") != len(chunk_ids) or sum(part.live_count for part in parts) != len(chunk_ids):
        raise IndexCorruptError(f"{directory} is inconsistent (chunk count); run `citeline rebuild`")
    return index


#: A generation's BM25 folder as read: segmented, or a 0.1.0 bm25s folder behind its adapter.
LexicalFolder = SegmentedIndex | LegacyLexical


def load_folder(directory: Path, *, mmap: bool = False) -> LexicalFolder:
    """Read a generation's BM25 folder: segmented (a :class:`SegmentedIndex`), or bm25s's own files (0.1.0, read
    through ``citeline.lexical.legacy.LegacyLexical``)."""
    try:
        settings = json.loads((directory / SETTINGS_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise IndexCorruptError(f"{directory} cannot be read ({exc}); run `citeline rebuild`") from exc
    if "segments" in settings:
        return load_segmented(directory, settings)
    return LegacyLexical.load(directory, mmap=mmap)


def structure_problems(index: LexicalFolder) -> list[str]:
    """What makes a segment unable to answer though its arrays load: terms or chunk ids out of order, an indptr that
    does not rise from 0 to the postings' count, postings naming no document of their segment, deletions out of
    range. ``citeline verify`` reports them (``store/verify.py``, ``lexical_answers``)."""
    problems = []
    for part in index.parts if isinstance(index, SegmentedIndex) else []:
        s, name = part.segment, part.name
        indptr = np.asarray(s.indptr)
        if len(s.terms) > 1 and not bool(np.all(np.diff(np.asarray(s.terms)) > 0)):
            problems.append(f"{name}: its terms are not strictly ascending")
        if len(s.chunk_ids) > 1 and not bool(np.all(np.diff(np.asarray(s.chunk_ids)) > 0)):
            problems.append(f"{name}: its chunk ids are not strictly ascending")
        if not len(indptr) or int(indptr[0]) != 0 or bool(np.any(np.diff(indptr) < 0)):
            problems.append(f"{name}: its indptr does not rise from 0")
        if len(s.postings) and (int(np.min(s.postings)) < 0 or int(np.max(s.postings)) >= len(s.chunk_ids)):
            problems.append(f"{name}: a posting names no document of the segment")
        if len(part.deleted) and (int(part.deleted.min()) < 0 or int(part.deleted.max()) >= len(s.chunk_ids)):
            problems.append(f"{name}: a deleted position is outside the segment")
    return problems


def probe_problems(index: LexicalFolder, texts: Sequence[str], k: int = 10) -> list[str]:
    """Whether ``index`` answers every kind of lexical question about ``texts`` (the stored texts of some of its
    chunks: each segment's first, say) without error: the k best, the scores of chunk ids, the term frequencies and
    the lookup of chunks sharing rare terms (collapse's). An empty or one-term segment once made every search fail
    while every stored file was consistent: this is the check that a derived index can answer, not only that it is
    the catalog's."""
    if not texts:
        return []
    ids = np.asarray(index.chunk_ids[:k], dtype=np.int64)
    query = " ".join(texts)
    try:
        for text in (*texts, query):
            index.search(text, k)
            index.search(text, k, ids)
            index.ranked(text, k)[1](ids)
            index.scores_of(text, ids)
            index.term_frequencies(text, ids)  # None for a 0.1.0 folder
        index.sharing_rare_terms([*texts, query], k)
    except Exception as exc:  # any failure is the finding: it would end a user's search
        return [f"the BM25 index cannot answer a search ({type(exc).__name__}: {exc}); run `citeline rebuild`"]
    return []


def probe_ids(index: LexicalFolder) -> np.ndarray:
    """The chunk ids whose texts :func:`probe_problems` asks about: each segment's first and last live chunk (the
    whole index's first and last for a bm25s folder), ascending."""
    found: list[int] = []
    if isinstance(index, SegmentedIndex):
        for part in index.parts:
            live = np.asarray(part.segment.chunk_ids)[part.live]
            if len(live):
                found += [int(live[0]), int(live[-1])]
    elif len(index.chunk_ids):
        found += [int(index.chunk_ids[0]), int(index.chunk_ids[-1])]
    return np.unique(np.asarray(found, dtype=np.int64))
