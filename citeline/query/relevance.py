"""Relevance per hit: an absolute, calibrated relevance of each hit, and the rule that keeps or drops each hit.

A hit's ``score`` ranks it among the query's candidates: hybrid scores are rescaled per query (min-max over each
ranking's top), dense ones are cosines (after the document stage), lexical ones BM25; they compare hits of one
answer only, and hybrid and dense ones can be negative. ``relevance`` is what people are shown (the CLI, the page,
JSON's ``relevance``): a number in [0, 1] that does not depend on the other candidates, read as the chance that
the hit's document answers the query. It is a logistic model of two quantities of the query and the hit's chunk:

- ``cosine``: the cosine of the query's vector and the chunk's stored vector (hybrid and dense searches);
- ``coverage``: the idf-weighted share of the query's distinct analyzed terms that occur in the chunk,
  ``sum(idf(t) for t in query if t in chunk) / sum(idf(t) for t in query)``; a term the corpus lacks counts with
  the largest idf, so a query made of words the index has never seen covers nothing.

``relevance = 1 / (1 + exp(-(intercept + a * cosine + b * coverage)))`` (:data:`DENSE_MODEL`; a lexical search has
no query vector, so :data:`LEXICAL_MODEL` uses ``coverage`` alone). Cosines are on each embedding model's own
scale: the dense/hybrid model is fitted for all-MiniLM-L6-v2 (:data:`CALIBRATED_MODELS`); an index of another model
gets ``relevance=None`` in dense and hybrid search, and its hits are never dropped. The models were fitted by
``bench/relevance_per_hit.py --fit`` on the hits users see (``Index.search``, k=10) of SciFact's train claims, of
the train questions of a judged documentation-like collection the bench generates (bench/_judged_docs.py) and of
half of an off-topic query set (bench/data/off_topic_queries.txt), a hit being relevant when its document is
judged relevant; figures in docs/quality.md#relevance-per-hit.

``min_score`` (``Index.search``, ``citeline search --min-score``, the server, the page, the retrievers): a number
drops every hit whose relevance is below it (``0`` keeps every hit). Unset (None, the default), each hit is kept
or dropped on its own merit (:meth:`Rule.kept`), against the *unfiltered* ranking's first :data:`BEST_OF` hits, so
that a filter changes which hits there are but never whether a hit is shown:

1. the query matches nothing in the index when the best of those hits is below the topic floor (``Rule.topic``:
   the model fitted before per-hit relevance, on-topic SciFact chunks against off-topic queries' hits; it answers
   nearly every held-out off-topic query with nothing: docs/quality.md#relevance-per-hit): then no hit is kept;
2. else the answer ends where relevance falls off relative to that best hit: a hit is kept when its relevance
   reaches :meth:`Rule.level` of the best, the highest of ``Rule.keep`` (an absolute floor), ``Rule.ratio`` times
   the best's relevance and the relevance ``Rule.spread`` log-odds below the best's; the unfiltered ranking's first
   hit is kept whenever it reaches ``keep`` (an answer never loses the ranking's own first choice);
3. in a lexical search, a hit holding a rare query term verbatim (a word of the query, case folded, that is in the
   chunk's text as a word and whose analyzed term is in at most :func:`rare_limit` chunks) is always kept: a query
   of five rare words, each in one record, shows the five records although each covers a fifth of the query.

The relevance shown down an answer never rises as rank rises (:func:`shown`): each kept hit shows its own relevance
or the lowest of the kept hits above it, whichever is lower, whatever the rule (the default or ``min_score``), so a
hit never claims more than the hits ranked above it and every shown relevance still reaches the rule's level.
The rule and its figures on news, documentation, records and scientific abstracts:
docs/quality.md#answers-that-stop.

An index whose BM25 folder predates segments has no term frequencies to read: its hits get ``relevance=None`` and
are never dropped. Computing relevance reads the hits' stored vectors and the query terms' frequencies in the
hits' chunks; a filtered search also ranks the unfiltered index for its first :data:`BEST_OF` hits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from citeline.errors import QueryError
from citeline.lexical.analyzer import ENGLISH_STOPWORDS, TOKEN_PATTERN, analyze
from citeline.lexical.scoring import idf_of
from citeline.query.readers import LexicalReader
from citeline.query.results import SearchResult, evolve


@dataclass(frozen=True)
class RelevanceModel:
    """``relevance = sigmoid(intercept + cosine * cos + coverage * cov)``; ``floor``: a threshold on it (the topic
    gate's, see :class:`Rule`; 0 for a hit model)."""

    intercept: float
    cosine: float
    coverage: float
    floor: float = 0.0

    def probability(self, cosine: np.ndarray | None, coverage: np.ndarray) -> np.ndarray:
        """The relevance of hits with these cosines (None: a lexical search, the model ignores them) and
        coverages."""
        logit = self.intercept + self.coverage * np.asarray(coverage, dtype=np.float64)
        if cosine is not None:
            logit = logit + self.cosine * np.asarray(cosine, dtype=np.float64)
        return 1.0 / (1.0 + np.exp(-logit))


@dataclass(frozen=True)
class Rule:
    """The default rule of one search kind (see the module docstring): ``hit``, the model of each hit's shown
    ``relevance``; ``topic``, the model whose ``floor`` the query's best hit in the whole index must reach for the
    query to match anything; ``keep``, the relevance each hit must reach; ``spread``, how far (in log-odds) below
    the best hit's relevance a hit's may lie; ``ratio``, the share of the best hit's relevance a hit's must reach
    (where relevance falls off relative to the top: a hit a small fraction as likely to answer as the best one is
    padding, however likely the best one is)."""

    hit: RelevanceModel
    topic: RelevanceModel
    keep: float = 0.0
    spread: float = math.inf
    ratio: float = 0.0

    def level(self, best: float) -> float:
        """The lowest relevance a hit may have when the best of the unfiltered ranking's first hits has ``best``."""
        below = float(log_odds(np.float64(best))) - self.spread
        return max(self.keep, self.ratio * best, float(1.0 / (1.0 + math.exp(-below))) if below > -700 else 0.0)

    def kept(self, values: np.ndarray, best: float, on_topic: bool) -> np.ndarray:
        """Which hits of these relevances the rule keeps: ``best`` is the highest relevance of the unfiltered
        ranking's first hits, ``on_topic`` whether its best hit reaches the topic floor (both the same for a
        filtered search as for the unfiltered one)."""
        values = np.asarray(values, dtype=np.float64)
        if not on_topic:
            return np.zeros(len(values), dtype=bool)
        return values >= self.level(best)


def shown(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """The relevance shown down an answer: each hit's own, or the lowest of the hits above it when that is lower,
    so that the relevance shown never rises as rank rises (a hit never claims more than the hits ranked above it;
    the ranking and the relevance model each err, and the ranking has the last word on order)."""
    array = np.asarray(values, dtype=np.float64)
    return np.minimum.accumulate(array) if len(array) else array


def log_odds(values: Any) -> Any:
    """``log(p / (1 - p))``, kept finite at 0 and 1."""
    clipped = np.clip(values, 1e-12, 1 - 1e-12)
    return np.log(clipped) - np.log1p(-clipped)


#: Whether a query matches anything in the index, hybrid and dense searches with all-MiniLM-L6-v2: fitted on SciFact
#: train claims' judged chunks against the top 10 of the off-topic calibration half (bench/tune_quality.py
#: relevance-floor, an onnx-int8 index); its floor is the highest that empties no train claim's answer.
DENSE_TOPIC = RelevanceModel(intercept=-12.1206, cosine=27.535, coverage=6.6393, floor=0.45)
#: The same for lexical searches (coverage alone).
LEXICAL_TOPIC = RelevanceModel(intercept=-6.6153, cosine=0.0, coverage=16.6012, floor=0.04)
#: Each hit's relevance, hybrid and dense searches with all-MiniLM-L6-v2: the chance that the hit's document is
#: judged relevant, fitted on the hits users see (``Index.search``, k=10) of SciFact train claims, of the judged
#: documentation collection's train questions and of the off-topic calibration half (bench/relevance_per_hit.py).
DENSE_MODEL = RelevanceModel(intercept=-6.7278, cosine=6.3468, coverage=4.4149)
#: The same for lexical searches (coverage alone; at most 0.91, a chunk holding every query term).
LEXICAL_MODEL = RelevanceModel(intercept=-4.8357, cosine=0.0, coverage=7.1249)
#: Hybrid and dense searches with all-MiniLM-L6-v2: ``keep`` chosen on the same train lists (the highest share of
#: relevant hits shown whose nDCG@10 and recall@10 fall by at most 0.002 on each collection); ``ratio`` chosen the
#: same way on the train splits of SciFact, the judged documentation collection and citeline's own docs
#: (bench/relevance_per_hit.py --choose), ``spread`` one step wider than their choice, so that the seeds' passage
#: quoting the soldiers' fear stays (docs/quality.md#answers-that-stop).
DENSE_RULE = Rule(DENSE_MODEL, DENSE_TOPIC, keep=0.005, spread=3.5, ratio=0.07)
#: Lexical searches: ``keep`` and ``ratio`` chosen the same way; ``spread`` one wider than the train choice (at
#: the train choice lexical search lost recall on SciFact test: docs/quality.md#relevance-per-hit).
LEXICAL_RULE = Rule(LEXICAL_MODEL, LEXICAL_TOPIC, keep=0.02, spread=4.0, ratio=0.1)
#: The embedding models :data:`DENSE_RULE` is calibrated for: cosines of other models are on other scales, so
#: their dense and hybrid hits get ``relevance=None`` (never dropped) until a rule of theirs is fitted here.
CALIBRATED_MODELS = {"all-MiniLM-L6-v2": DENSE_RULE, "sentence-transformers/all-MiniLM-L6-v2": DENSE_RULE}
#: The unfiltered ranking's first this many hits give the best relevance every hit is measured against.
BEST_OF = 10
#: A term in at most this share of the chunks (and at least RARE_MIN_CHUNKS) is rare: a lexical hit holding one
#: verbatim is never dropped by the default rule.
RARE_SHARE = 0.001
RARE_MIN_CHUNKS = 3


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


def model_for(model: str) -> Rule | None:
    """The dense/hybrid rule calibrated for an embedding model (a name, or a local folder of it)."""
    name = model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return CALIBRATED_MODELS.get(model) or CALIBRATED_MODELS.get(name)


def rule_for(query_vector: np.ndarray | None, model: str) -> Rule | None:
    """The rule of a search: lexical (no query vector) or the embedding model's; None when it is not calibrated."""
    return LEXICAL_RULE if query_vector is None else model_for(model)


def features(
    snapshot: Any,
    query: str,
    query_vector: np.ndarray | None,
    chunk_ids: Sequence[int] | np.ndarray,
    vectors: Callable[[Sequence[int]], np.ndarray] | None = None,
) -> tuple[np.ndarray | None, np.ndarray] | None:
    """Each chunk's cosine (None in a lexical search) and coverage; None when the lexical index cannot tell."""
    ids = np.asarray(chunk_ids, dtype=np.int64)
    covered = coverage(snapshot.lexical, query, ids)
    if covered is None:
        return None
    if query_vector is None:
        return None, covered
    return cosines(vectors or snapshot.vectors.vectors, query_vector, ids), covered


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
    rule = rule_for(query_vector, model)
    found = None if rule is None else features(snapshot, query, query_vector, chunk_ids, vectors)
    return None if rule is None or found is None else rule.hit.probability(*found)


@dataclass(frozen=True)
class Best:
    """What every hit of a search is measured against: the unfiltered ranking's first :data:`BEST_OF` hits' highest
    relevance, whether the best of them reaches the topic floor, and the chunk id of that ranking's first hit (kept
    whenever the query is on topic and it reaches ``Rule.keep``: an answer never loses the ranking's own first
    choice to a better-scored hit below it)."""

    relevance: float
    on_topic: bool
    first: int | None = None


def best_of(
    snapshot: Any,
    query: str,
    query_vector: np.ndarray | None,
    chunk_ids: Sequence[int],
    model: str,
    vectors: Callable[[Sequence[int]], np.ndarray] | None = None,
) -> Best | None:
    """:class:`Best` of ``chunk_ids`` (the unfiltered ranking's first hits); None when it cannot be told or there
    are none."""
    rule = rule_for(query_vector, model)
    found = None if rule is None or not len(chunk_ids) else features(snapshot, query, query_vector, chunk_ids, vectors)
    if rule is None or found is None:
        return None
    topic = float(rule.topic.probability(*found).max())
    return Best(float(rule.hit.probability(*found).max()), topic >= rule.topic.floor, int(chunk_ids[0]))


def rare_terms_held(lexical: LexicalReader, query: str, results: Sequence[SearchResult]) -> np.ndarray | None:
    """Whether each result's chunk holds a rare query term verbatim: a query word (case folded) that is in the
    chunk's text as a word and whose analyzed term occurs in at most :func:`rare_limit` chunks of the index. None
    when the lexical index cannot tell (a BM25 folder from before segments)."""
    statistics = lexical.statistics(query)
    if statistics is None:
        return None
    held = np.zeros(len(results), dtype=bool)
    words = [word for word in TOKEN_PATTERN.findall(query.lower()) if word not in ENGLISH_STOPWORDS]
    terms = analyze([query])[0]
    if not results or not terms or len(words) != len(terms):
        return held
    limit = rare_limit(int(statistics.count))
    # the surface words of each rare term (its column in the query order the frequencies follow)
    rare: dict[int, set[str]] = {}
    for column, (word, term) in enumerate(zip(words, terms, strict=True)):
        if 0 < int(statistics.frequencies[column]) <= limit:
            rare.setdefault(terms.index(term), set()).add(word)
    if not rare:
        return held
    for at, result in enumerate(results):
        text_words = set(TOKEN_PATTERN.findall(result.text.lower()))
        held[at] = any(words_of & text_words for words_of in rare.values())
    return held


def rare_limit(count: int) -> int:
    """The most chunks a term may occur in and count as rare in an index of ``count`` chunks: :data:`RARE_SHARE`
    of them, and at least :data:`RARE_MIN_CHUNKS`."""
    return max(RARE_MIN_CHUNKS, int(count * RARE_SHARE))


def apply_floor(
    snapshot: Any,
    query: str,
    query_vector: np.ndarray | None,
    results: Sequence[SearchResult],
    min_score: float | None,
    model: str,
    vectors: Callable[[Sequence[int]], np.ndarray] | None = None,
    best: Best | None = None,
) -> list[SearchResult]:
    """``results`` with their ``relevance`` set, less those the rule drops (the plan's last step, see the module
    docstring): with ``min_score``, those below it; without, those :meth:`Rule.kept` drops, measured against
    ``best`` (:func:`best_of` the unfiltered ranking's first hits; None: of ``results``), except that ranking's first
    hit and, in a lexical search, hits holding a rare query term verbatim. The ``relevance`` set is :func:`shown`'s:
    it never rises down the hits kept."""
    if not results:
        return []
    rule = rule_for(query_vector, model)
    ids = [result.chunk_id for result in results]
    found = None if rule is None else features(snapshot, query, query_vector, ids, vectors)
    if rule is None or found is None:
        return list(results)
    values = rule.hit.probability(*found)
    if min_score is not None:
        keep = values >= min_score
    else:
        if best is None:
            on_topic = float(rule.topic.probability(*found).max()) >= rule.topic.floor
            best = Best(float(values.max()), on_topic, ids[0])
        keep = rule.kept(values, best.relevance, best.on_topic)
        if best.on_topic and best.first is not None:
            keep |= (np.asarray(ids) == best.first) & (values >= rule.keep)
        if query_vector is None:
            held = rare_terms_held(snapshot.lexical, query, results)
            if held is not None:
                keep |= held
    chosen = [result for result, kept in zip(results, keep, strict=True) if kept]
    return [evolve(result, relevance=float(value)) for result, value in zip(chosen, shown(values[keep]), strict=True)]
