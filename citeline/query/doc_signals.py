"""Document-level signals for hybrid fusion: a chunk's score also says how well its whole document matches.

A passage in a relevant document is more likely the answer, and a long document (a report, a manual) spreads the
words of a query over several chunks that BM25 over one chunk never sees together. Each hybrid candidate gets,
beside its own cosine and BM25 score, one value per registered signal, the same for every candidate of one
document (:data:`SIGNALS`, filled by ``@document_signal(name)``; the weights are ``citeline.query.plan.Fusion``'s
``documents``):

- ``lexical``: BM25 of the document as one text, computed from the chunk index's postings: each query term's
  frequency and the length summed over the document's chunks, the chunk index's idf (corpus-wide statistics,
  so a sharded index scores as one), the length normalised by the corpus's mean document length (its chunk
  tokens over its documents), divided by the query's bound (the sum of its terms' idf: each term's share is
  below its idf), so that a document's value depends on the query and the corpus alone, never on which other
  candidates a filter let through. No second index is written. It scores as well as bm25s over whole document
  texts, while the sum of the chunks' BM25 scores lowers it (docs/quality.md#choices-measured-in-the-code).
- ``dense``: the cosine of the mean of the document's chunk vectors (stored vectors: nothing is embedded).
- ``dense_length``: the same with each chunk vector weighted by the chunk's length in characters (``char_end -
  char_start``, read from the passage rows by :attr:`Documents.lengths_of`), so a short chunk (a title left alone
  as chunk 0) counts for its share of the text. Dense mode's document stage
  (``citeline.query.dense_stage.DenseDocument``)
  blends it into each chunk's cosine: weighting by length is what gains, the plain mean does not
  (docs/quality.md#more-fusion-and-dense-ideas-measured).
- ``whole``: the cosine of the document's whole-text vector (title and text embedded at once, truncated at the
  model's window, as BEIR and MTEB encode documents), which an index created with ``document_vectors`` stores on
  each document's first chunk (``citeline.ingest.embed_step``); a document without one (an older index) takes the
  ``dense`` value instead. A title and lead paragraph read together say what a document is about better than
  its chunks' mean (docs/quality.md#document-level-signals).

A document's chunks are found from a candidate's row: chunk ids are ``pipeline.chunk_id_for(doc_id,
content_hash, ordinal)`` and a document's ordinals run from 0, so its neighbours are probed outwards from the
candidates' ordinals, at most :data:`WINDOW` chunks each way (a long document is represented by the chunks around
its candidates).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from hashlib import blake2b
from typing import Any

import numpy as np

from citeline.errors import QueryError
from citeline.lexical.analyzer import BM25_B, BM25_K1
from citeline.lexical.scoring import idf_of
from citeline.query.readers import LexicalReader
from citeline.util.ids import chunk_id_for
from citeline.vectors import VectorReader

#: Candidates (the best by the chunk scores) whose documents get the signals. Grouping candidates by document
#: has a cost per candidate (reading their rows, probing their neighbours); the first results are decided
#: among the best few dozen (docs/quality.md#choices-measured-in-the-code).
DEPTH = 100

#: Chunks probed on each side of a document's candidates: a long document's signal is that of their neighbourhood.
WINDOW = 32

#: ``(doc_id, content_hash, ordinal)`` of each chunk id asked (None for one the snapshot does not hold).
RowsOf = Callable[[np.ndarray], list[tuple[str, str, int] | None]]
#: The whole-document vectors stored on the chunk ids asked (documents' first chunks), by chunk id.
VectorsOf = Callable[[Sequence[int]], dict[int, np.ndarray]]
#: The length in characters of the chunk ids asked that the snapshot holds, by chunk id.
LengthsOf = Callable[[Sequence[int]], dict[int, int]]


@dataclass
class Documents:
    """The candidates' documents: which one each candidate belongs to, and each document's chunk ids."""

    of_candidate: np.ndarray  #: document number of each candidate (-1: its row is missing)
    chunks: list[np.ndarray]  #: each document's chunk ids, by ordinal
    held: np.ndarray  #: the index's live chunk ids, ascending (where neighbours are looked for)
    keys: list[tuple[str, str]] = field(default_factory=list)  #: each document's (doc_id, content_hash)
    #: documents the index holds (the corpus's mean document length); None: unknown (the candidates' mean is used)
    corpus_documents: int | None = None
    #: where the documents' whole-text vectors are read (None: the index keeps none)
    vectors_of: VectorsOf | None = None
    #: where the chunks' lengths are read (``dense_length``; None: every chunk weighs the same)
    lengths_of: LengthsOf | None = None

    @classmethod
    def of(
        cls,
        candidates: np.ndarray,
        rows_of: RowsOf,
        held: np.ndarray,
        corpus_documents: int | None = None,
        vectors_of: VectorsOf | None = None,
        probe: bool = True,
        lengths_of: LengthsOf | None = None,
    ) -> Documents:
        """Group ``candidates`` by document and find every document's chunks (see the module docstring)."""
        rows = rows_of(candidates)
        number: dict[tuple[str, str], int] = {}
        ordinals: list[list[int]] = []
        members: list[list[int]] = []  # a document's candidates are its chunks whatever the probing finds (a
        # chunk whose id is not the hash of its row, as in a damaged catalog, is still counted once)
        of_candidate = np.full(len(candidates), -1, dtype=np.int64)
        for position, (row, candidate) in enumerate(zip(rows, candidates.tolist(), strict=True)):
            if row is None:
                continue
            key = (row[0], row[1])
            d = number.get(key)
            if d is None:
                d = number[key] = len(ordinals)
                ordinals.append([])
                members.append([])
            of_candidate[position] = d
            ordinals[d].append(int(row[2]))
            members[d].append(candidate)
        keys = list(number)
        low = [min(found) for found in ordinals]
        high = [max(found) for found in ordinals]
        # Each document's id prefix hashed once (ids.chunk_id_for hashes "doc_id\0content_hash\0ordinal"); a
        # probe copies the hasher and adds its ordinal: the same ids (about 430 probes a query at 1M chunks).
        hashers = [blake2b(f"{doc_id}\0{content_hash}\0".encode(), digest_size=8) for doc_id, content_hash in keys]
        # Every ordinal between a document's candidates, then one more on each side per round while it is held:
        # each round's ids are looked up at once (one searchsorted).
        probes = [(d, o) for d in range(len(keys)) for o in range(low[d], high[d] + 1)]
        open_low, open_high = list(range(len(keys))), list(range(len(keys)))
        for step in range(WINDOW + 1 if probe else 0):  # without probing: the candidates' own chunks
            if step:
                open_low = [d for d in open_low if low[d] - step >= 0]
                probes = [(d, low[d] - step) for d in open_low] + [(d, high[d] + step) for d in open_high]
            if not probes:
                break
            ids = np.fromiter((_probe(hashers[d], o) for d, o in probes), dtype=np.int64, count=len(probes))
            found_mask = _held(held, ids).tolist()
            for (d, _), chunk_id, ok in zip(probes, ids.tolist(), found_mask, strict=True):
                if ok:
                    members[d].append(chunk_id)
            if step:
                below = len(open_low)  # the low side's probes come first
                open_low = [d for d, ok in zip(open_low, found_mask[:below], strict=True) if ok]
                open_high = [d for d, ok in zip(open_high, found_mask[below:], strict=True) if ok]
            if not open_low and not open_high and step:
                break
        chunks = [np.array(sorted(set(ids)), dtype=np.int64) for ids in members]
        return cls(of_candidate, chunks, held, keys, corpus_documents, vectors_of, lengths_of)


def _probe(hasher: Any, ordinal: int) -> int:
    """``ids.chunk_id_for`` of a document's ``hasher`` (its id prefix hashed) and ``ordinal``."""
    digest = hasher.copy()
    digest.update(str(ordinal).encode())
    return int.from_bytes(digest.digest(), "big") & 0x7FFF_FFFF_FFFF_FFFF


def depth_of(name: str) -> int | None:
    """How many of the best candidates get signal ``name`` (None: all)."""
    depth = DEPTHS.get(name, -1)
    return DEPTH if depth == -1 else depth


def _held(held: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Which of ``ids`` are in ``held`` (ascending)."""
    if not len(held):
        return np.zeros(len(ids), dtype=bool)
    at = np.minimum(np.searchsorted(held, ids), len(held) - 1)
    return held[at] == ids


Signal = Callable[[Documents, str, np.ndarray, VectorReader, LexicalReader], np.ndarray]
#: The document signals, by name: each returns one value per document of a :class:`Documents`.
SIGNALS: dict[str, Signal] = {}
#: How many of the best candidates (by the chunk scores) get each signal: -1 for :data:`DEPTH`, None for all of
#: them (a signal that needs no neighbouring chunks and costs one vector a document); see :func:`depth_of`.
DEPTHS: dict[str, int | None] = {}
#: Whether a signal reads a document's neighbouring chunks (:meth:`Documents.of`'s probing).
PROBES: dict[str, bool] = {}
#: How each signal is put on the chunk scores' scale: ``"cosine"`` (rescaled as the chunks' cosines are: by the
#: query's dense top list) or ``"unit"`` (already in [0, 1] by quantities of the query alone: used as it is).
#: Neither depends on the candidate set, so a filter never changes a chunk's fused score.
SCALES: dict[str, str] = {}


def document_signal(
    name: str, scale: str = "cosine", depth: int | None = -1, probe: bool = True
) -> Callable[[Signal], Signal]:
    """Register a document signal under ``name`` (a ``Fusion.documents`` key); ``scale``, ``depth`` and
    ``probe``: see :data:`SCALES`, :data:`DEPTHS` and :data:`PROBES`."""
    if scale not in ("cosine", "unit"):
        raise ValueError(f"document signal scale must be 'cosine' or 'unit', not {scale!r}")

    def register(function: Signal) -> Signal:
        SIGNALS[name] = function
        SCALES[name] = scale
        DEPTHS[name] = depth
        PROBES[name] = probe
        return function

    return register


@document_signal("dense")
def mean_vector_cosine(
    documents: Documents, query: str, query_vector: np.ndarray, vectors: VectorReader, lexical: LexicalReader
) -> np.ndarray:
    """The cosine of the query with the mean of each document's chunk vectors (normalised)."""
    return _centroid_cosine(documents, query_vector, vectors, weighted=False)


@document_signal("dense_length")
def length_weighted_vector_cosine(
    documents: Documents, query: str, query_vector: np.ndarray, vectors: VectorReader, lexical: LexicalReader
) -> np.ndarray:
    """The cosine of the query with the mean of each document's chunk vectors weighted by the chunks' lengths in
    characters (normalised; the plain mean when ``documents.lengths_of`` is None)."""
    return _centroid_cosine(documents, query_vector, vectors, weighted=True)


def _centroid_cosine(
    documents: Documents, query_vector: np.ndarray, vectors: VectorReader, *, weighted: bool
) -> np.ndarray:
    # The cosine of the query with each document's centroid (see centroids).
    if not documents.chunks:
        return np.zeros(0)
    return centroids(documents, vectors, weighted=weighted) @ np.asarray(query_vector, dtype=np.float64).ravel()


def centroids(documents: Documents, vectors: VectorReader, *, weighted: bool = True) -> np.ndarray:
    """Each document's sum of chunk vectors (each weighted by its chunk's length when ``weighted`` and the lengths
    are known), normalised to unit length: documents x dimension, float64."""
    every, starts = _flat(documents.chunks)
    stacked = np.asarray(vectors.vectors(every), dtype=np.float64)
    if weighted and documents.lengths_of is not None:
        lengths = documents.lengths_of(every.tolist())
        weights = np.fromiter((max(lengths.get(i, 0), 0) for i in every.tolist()), np.float64, count=len(every))
        stacked *= weights[:, None]
    sums = np.add.reduceat(stacked, starts, axis=0)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return sums / norms


@document_signal("whole", depth=None, probe=False)
def whole_document_cosine(
    documents: Documents, query: str, query_vector: np.ndarray, vectors: VectorReader, lexical: LexicalReader
) -> np.ndarray:
    """The cosine of the query with each document's stored whole-text vector (the ``dense`` value for a document
    without one)."""
    firsts = np.array([chunk_id_for(doc_id, content_hash, 0) for doc_id, content_hash in documents.keys], np.int64)
    found = documents.vectors_of(firsts.tolist()) if documents.vectors_of is not None and len(firsts) else {}
    query64 = np.asarray(query_vector, dtype=np.float64).ravel()
    values = np.zeros(len(documents.chunks))
    missing = []
    for number, first in enumerate(firsts.tolist()):
        vector = found.get(first)
        if vector is None:
            missing.append(number)
        else:
            values[number] = float(np.asarray(vector, dtype=np.float64) @ query64)
    if missing:
        fallback = replace(documents, chunks=[documents.chunks[number] for number in missing])
        values[missing] = mean_vector_cosine(fallback, query, query_vector, vectors, lexical)
    return values


def _flat(chunks: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every document's chunk ids in one array, and where each document's start (for ``np.add.reduceat``)."""
    sizes = np.array([len(c) for c in chunks], dtype=np.int64)
    return np.concatenate(chunks), np.concatenate(([0], np.cumsum(sizes)[:-1]))


@document_signal("lexical", scale="unit")
def document_bm25(
    documents: Documents, query: str, query_vector: np.ndarray, vectors: VectorReader, lexical: LexicalReader
) -> np.ndarray:
    """BM25 ("lucene", the index's k1 and b) of each document as one text, from the chunk postings, over the
    query's bound (the sum of its terms' idf): in [0, 1), whatever the candidates."""
    if not documents.chunks:
        return np.zeros(0)
    statistics = lexical.statistics(query)  # corpus-wide (a sharded index sums its shards')
    if statistics is None:  # a BM25 folder from before segments keeps no term statistics
        return np.zeros(len(documents.chunks))
    weighted = [
        (column, float(idf_of(statistics.count, frequency)))
        for column, frequency in enumerate(statistics.frequencies)
        if frequency
    ]
    if not weighted:
        return np.zeros(len(documents.chunks))
    every, starts = _flat(documents.chunks)
    # Each chunk's counts from the index (a sharded one asks the shard that holds it, on its Dask worker if remote).
    counted = lexical.term_frequencies(query, every)
    if counted is None:  # (never, where statistics are kept)
        return np.zeros(len(documents.chunks))
    tfs, lengths = counted
    doc_tfs = np.add.reduceat(tfs, starts, axis=0)
    doc_lengths = np.add.reduceat(lengths, starts)
    if documents.corpus_documents:
        average = statistics.total_length / documents.corpus_documents
    else:  # a view that cannot count its documents (a remote shard): the candidates' documents' mean
        average = float(doc_lengths.mean())
    norm = BM25_K1 * ((1 - BM25_B) + BM25_B * doc_lengths / (average or 1.0))
    scores = np.zeros(len(documents.chunks))
    for column, idf in weighted:
        tf = doc_tfs[:, column]
        scores += idf * tf / (norm + tf)
    return scores / sum(idf for _, idf in weighted)


def candidate_values(
    names: Sequence[str],
    candidates: np.ndarray,
    rows_of: RowsOf,
    held: np.ndarray,
    query: str,
    query_vector: np.ndarray,
    vectors: VectorReader,
    lexical: LexicalReader,
    corpus_documents: int | None = None,
    vectors_of: VectorsOf | None = None,
    lengths_of: LengthsOf | None = None,
) -> dict[str, np.ndarray]:
    """Each named signal's value for each candidate (its document's; 0 for a candidate without a row)."""
    probe = any(PROBES.get(name, True) for name in names)
    documents = Documents.of(candidates, rows_of, held, corpus_documents, vectors_of, probe, lengths_of)
    out = {}
    for name in names:
        if name not in SIGNALS:
            raise QueryError(f"unknown document signal {name!r}; known: {', '.join(sorted(SIGNALS))}")
        per_document = SIGNALS[name](documents, query, query_vector, vectors, lexical)
        values = np.zeros(len(candidates))
        known = documents.of_candidate >= 0
        values[known] = per_document[documents.of_candidate[known]]
        out[name] = values
    return out
