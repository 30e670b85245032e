"""The relevance floor: an absolute, calibrated relevance of each hit, and the ``min_score`` that drops the others.

A hit's ``score`` ranks it among the query's candidates: hybrid scores are rescaled per query (min-max over each
ranking's top), so the best hit of a query that matches nothing (``xyzzy plugh``) scores as high as the best hit of
one that matches well. ``relevance`` does not depend on the other candidates. It is a logistic model of two
quantities of the query and the hit's chunk alone:

- ``cosine``: the cosine of the query's vector and the chunk's stored vector (hybrid and dense searches);
- ``coverage``: the idf-weighted share of the query's distinct analyzed terms that occur in the chunk,
  ``sum(idf(t) for t in query if t in chunk) / sum(idf(t) for t in query)``; a term the corpus lacks counts with
  the largest idf, so a query made of words the index has never seen covers nothing.

``relevance = 1 / (1 + exp(-(intercept + a * cosine + b * coverage)))``, read as the chance that the hit is on the
query's topic. A lexical search has no query vector (it needs no model), so it uses a model of ``coverage`` alone.
Cosines are on each embedding model's own scale: the dense/hybrid model is fitted for all-MiniLM-L6-v2
(:data:`CALIBRATED_MODELS`); an index of another model gets ``relevance=None`` in dense and hybrid search.
The coefficients were fitted on SciFact's train claims (their judged documents' best-ranked chunks as on-topic
hits) and on half of an off-topic query set (bench/data/off_topic_queries.txt: questions about cooking, sport,
travel, ... and gibberish, no relevant SciFact abstract; their top-10 chunks as off-topic hits) by
``bench/tune_quality.py relevance-floor``, which also chose each model's ``floor`` and measures it on SciFact test
and the other half (docs/quality.md).

``min_score`` (``Index.search``, ``citeline search --min-score``, the retrievers): a number drops every hit whose
relevance is below it (``0`` keeps every hit). Unset (None, the default), a search whose hits are *all* below the
model's calibrated ``floor`` returns nothing (the query matches nothing in the index) and otherwise returns its hits
as ranked. The default only ever empties an answer, never thins one; its floor is the highest that emptied no
SciFact train claim's answer (on test, hybrid emptied 4 claims, none with a relevant document in its top 10:
nDCG@10 unchanged; 77 of 79 held-out off-topic queries emptied). A per-hit floor as high drops relevant hits of low
cosine and coverage from answers that keep others (hybrid test nDCG@10 0.7325 -> 0.7227, docs/quality.md).
An index whose BM25 folder predates segments has no term frequencies to read: its hits get ``relevance=None`` and
are never dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from citeline.errors import QueryError
from citeline.lexical.analyzer import analyze
from citeline.lexical.query import idf_of
from citeline.query.readers import LexicalReader
from citeline.query.results import SearchResult, evolve


@dataclass(frozen=True)
class RelevanceModel:
    """``relevance = sigmoid(intercept + cosine * cos + coverage * cov)``; ``floor``: the relevance a search's best hit
    must reach when no ``min_score`` is given (see the module docstring)."""

    intercept: float
    cosine: float
    coverage: float
    floor: float

    def probability(self, cosine: np.ndarray | None, coverage: np.ndarray) -> np.ndarray:
        """The relevance of hits with these cosines (None: a lexical search, the model ignores them) and
        coverages."""
        logit = self.intercept + self.coverage * np.asarray(coverage, dtype=np.float64)
        if cosine is not None:
            logit = logit + self.cosine * np.asarray(cosine, dtype=np.float64)
        return 1.0 / (1.0 + np.exp(-logit))


#: Hybrid and dense searches with all-MiniLM-L6-v2 (bench/tune_quality.py relevance-floor, SciFact train + off-topic
#: calibration half, on an onnx-int8 index). Relevance 0.5 is a cosine of 0.44 with no query term, or 0.20 with all.
DENSE_MODEL = RelevanceModel(intercept=-12.1206, cosine=27.535, coverage=6.6393, floor=0.45)
#: The embedding models :data:`DENSE_MODEL` is calibrated for: cosines of other models are on other scales, so
#: their dense and hybrid hits get ``relevance=None`` (never dropped) until a model of theirs is fitted here.
CALIBRATED_MODELS = {"all-MiniLM-L6-v2": DENSE_MODEL, "sentence-transformers/all-MiniLM-L6-v2": DENSE_MODEL}
#: Lexical searches: coverage alone.
LEXICAL_MODEL = RelevanceModel(intercept=-6.6153, cosine=0.0, coverage=16.6012, floor=0.04)


def validate_min_score(min_score: object) -> float | None:
    """Check a ``min_score``: a number in [0, 1], or None (the calibrated default, see the module docstring)."""
    if min_score is None:
        return None
    if isinstance(min_score, bool) or not isinstance(min_score, int | float | np.floating | np.integer):
        raise QueryError(f"min_score must be a number between 0 and 1, not {min_score!r}")
    value = float(min_score)
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise QueryError(f"min_score must be between 0 and 1 (0 keeps every hit), got {min_score!r}")
    return value


def coverage(lexical: LexicalReader, query: str, chunk_ids: np.ndarray) -> np.ndarray | None:
    """Each chunk's idf-weighted share of the query's distinct terms (see the module docstring); None when the
    lexical index cannot tell (a BM25 folder from before segments)."""
    statistics = lexical.statistics(query)
    if statistics is None:
        return None
    ids = np.asarray(chunk_ids, dtype=np.int64)
    terms = analyze([query])[0]
    if not terms:  # only stopwords: nothing to weigh, nothing covered
        return np.zeros(len(ids), dtype=np.float64)
    count = max(int(statistics.count), 1)
    seen: dict[str, int] = {}
    for column, term in enumerate(terms):
        seen.setdefault(term, column)
    first = sorted(seen.values())
    # a term the corpus lacks (frequency 0) gets the largest idf there is
    weights = np.array([float(idf_of(count, int(statistics.frequencies[c]))) for c in first], dtype=np.float64)
    if not len(ids):
        return np.zeros(0, dtype=np.float64)
    counted = lexical.term_frequencies(query, ids)
    if counted is None:  # (never, where statistics are kept)
        return None
    tfs = counted[0]
    present = np.asarray(tfs)[:, first] > 0
    total = float(weights.sum())
    return (present @ weights) / total if total > 0 else np.zeros(len(ids), dtype=np.float64)


def cosines(read: Callable[[Sequence[int]], np.ndarray], query_vector: np.ndarray, chunk_ids: np.ndarray) -> np.ndarray:
    """The cosine of the query's vector and each chunk's stored vector (``read``: ids -> stored vectors, e.g. a
    snapshot's ``vectors.vectors``)."""
    ids = np.asarray(chunk_ids, dtype=np.int64)
    if not len(ids):
        return np.zeros(0, dtype=np.float64)
    query32 = np.asarray(query_vector, dtype=np.float32).ravel()
    return (np.asarray(read([int(i) for i in ids]), dtype=np.float32) @ query32).astype(np.float64)


def model_for(model: str) -> RelevanceModel | None:
    """The dense/hybrid relevance model calibrated for an embedding model (a name, or a local folder of it)."""
    name = model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return CALIBRATED_MODELS.get(model) or CALIBRATED_MODELS.get(name)


def relevance(
    snapshot: Any,
    query: str,
    query_vector: np.ndarray | None,
    chunk_ids: Sequence[int] | np.ndarray,
    model: str,
    vectors: Callable[[Sequence[int]], np.ndarray] | None = None,
) -> np.ndarray | None:
    """The relevance of each chunk for ``query`` in an index of embedding ``model`` (see the module docstring);
    None when it cannot be told. ``vectors`` reads the chunks' stored vectors (default: the snapshot's; a search
    passes the reader that already holds its results' vectors)."""
    ids = np.asarray(chunk_ids, dtype=np.int64)
    fitted = LEXICAL_MODEL if query_vector is None else model_for(model)
    covered = None if fitted is None else coverage(snapshot.lexical, query, ids)
    if fitted is None or covered is None:
        return None
    read = vectors or snapshot.vectors.vectors
    return fitted.probability(None if query_vector is None else cosines(read, query_vector, ids), covered)


def apply_floor(
    snapshot: Any,
    query: str,
    query_vector: np.ndarray | None,
    results: Sequence[SearchResult],
    min_score: float | None,
    model: str,
    vectors: Callable[[Sequence[int]], np.ndarray] | None = None,
) -> list[SearchResult]:
    """``results`` with their ``relevance`` set, less those below ``min_score``; with ``min_score`` None, none if
    every one is below the calibrated floor (the plan's last step, see the module docstring)."""
    if not results:
        return []
    fitted = LEXICAL_MODEL if query_vector is None else model_for(model)
    found = relevance(snapshot, query, query_vector, [result.chunk_id for result in results], model, vectors)
    if found is None or fitted is None:
        return list(results)
    if min_score is None and float(found.max()) < fitted.floor:
        return []
    floor = 0.0 if min_score is None else min_score
    return [
        evolve(result, relevance=float(value)) for result, value in zip(results, found, strict=True) if value >= floor
    ]
