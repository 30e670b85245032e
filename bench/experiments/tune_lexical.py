"""Lexical-side experiments on a BEIR dataset's TRAIN split (test printed beside, never used to choose).

    python bench/experiments/tune_lexical.py --beir ../shared/benchmarks/scifact --index /tmp/qual/base \\
        > bench/results/scifact-quality-lexical.txt

Over the index's own chunks (``bench/tune_quality.py``'s ``Data``: chunk cosines from the stored vectors, so no
embedding pass), each experiment makes every query's BM25 score of every chunk another way and scores lexical and
hybrid (the shipped fusion, and its weight re-chosen on train) exactly as ``tune_quality`` does:

- **analyzer**: words of one character kept (``\\w+`` instead of bm25s's ``\\w\\w+``: "IL-6", "β-cell", "type 2");
- **title field**: the title weighted against the body, ``bm25(body) + w * bm25(title)`` with each field's own
  statistics (w=1 is close to today's title prepended to each chunk), and the title repeated r times in the text;
- **pseudo-relevance feedback** (RM3): the first pass's top ``docs`` chunks give expansion terms (each chunk's
  term frequencies over its length, weighted by its share of their BM25 scores); the ``terms`` best are added to
  the query with weight ``lam`` against the original terms' ``1 - lam``, and each term's BM25 scores are weighted.
Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: the kept modules this builds on
from tune_quality import Data, Scorer, Setting, catalog_connection, line

from citeline.lexical.analyzer import ENGLISH_STOPWORDS, LexicalIndex, _stemmer, analyze
from citeline.query.plan import Fusion

WORDS_1 = re.compile(r"(?u)\b\w+\b")


def analyze_with(pattern: re.Pattern[str] | Callable[[str], list[str]], texts: Sequence[str]) -> list[list[str]]:
    """:func:`citeline.lexical.analyzer.analyze` with another token pattern, or a function finding the words of the
    lower-cased text."""
    words_of = pattern.findall if isinstance(pattern, re.Pattern) else pattern
    words = [[w for w in words_of(text.lower()) if w not in ENGLISH_STOPWORDS] for text in texts]
    distinct = list(dict.fromkeys(w for ws in words for w in ws))
    stem = dict(zip(distinct, _stemmer().stemWords(distinct), strict=True))
    return [[stem[w] for w in ws] for ws in words]


class Bm25:
    """A bm25s retriever over pre-analyzed texts, scoring term-weighted queries (one call per distinct term)."""

    def __init__(self, tokens: list[list[str]], k1: float = 1.2, b: float = 0.5):
        import bm25s

        self.retriever = bm25s.BM25(method="lucene", k1=k1, b=b)
        self.retriever.index(tokens, show_progress=False)
        self.vocab: dict[str, int] = self.retriever.vocab_dict
        self.size = len(tokens)

    def scores(self, weights: dict[str, float]) -> np.ndarray:
        """Sum over terms of ``weight * bm25(term)``; terms outside the vocabulary add nothing."""
        out = np.zeros(self.size)
        for term, weight in weights.items():
            if term in self.vocab:
                out += weight * self.retriever.get_scores_from_ids([self.vocab[term]])
        return out


def query_weights(terms: Sequence[str]) -> dict[str, float]:
    """A query's terms with their counts as weights (bm25s counts a repeated term again)."""
    return {t: float(c) for t, c in Counter(terms).items()}


def rm3(
    first: np.ndarray, tokens: list[list[str]], original: dict[str, float], docs: int, terms: int, lam: float
) -> dict[str, float]:
    """RM3 query weights from the ``docs`` best chunks of a first pass ``first`` (see the module docstring)."""
    top = np.argsort(-first, kind="stable")[:docs]
    top = top[first[top] > 0]
    if not len(top):
        return original
    shares = first[top] / first[top].sum()
    model: Counter[str] = Counter()
    for position, share in zip(top, shares, strict=True):
        words = tokens[position]
        if words:
            for term, count in Counter(words).items():
                model[term] += share * count / len(words)
    expansion = dict(model.most_common(terms))
    total = sum(expansion.values()) or 1.0
    norm = sum(original.values()) or 1.0
    weights = {t: (1 - lam) * w / norm for t, w in original.items()}
    for term, weight in expansion.items():
        weights[term] = weights.get(term, 0.0) + lam * weight / total
    return weights


def experiment(scorer: Scorer, name: str, scores: dict[str, np.ndarray], weights: Sequence[float] = (0.4, 0.5)) -> None:
    """Score ``scores`` (each query's BM25 score of every chunk) in lexical and hybrid mode and print them."""
    key = ("exp:" + name, 0.0, 0.0)
    scorer.data._bm25[key] = scores
    line(f"lexical {name}", scorer.score("lexical", Setting(bm25=key)))
    for weight in weights:
        line(f"hybrid {name} w_dense={weight}", scorer.score("hybrid", Setting(bm25=key, fusion=Fusion(weight=weight))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--only", default="analyzer,title,rm3", help="experiments to run")
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    data = Data(args.beir, args.index)
    scorer = Scorer(data)
    with catalog_connection(args.index) as connection:
        rows = connection.sql(
            "SELECT c.chunk_id, c.text, coalesce(d.title, '') FROM chunks c LEFT JOIN documents d USING (doc_id) "
            "ORDER BY c.chunk_id"
        ).fetchall()
    assert [r[0] for r in rows] == data.ids.tolist()
    bodies = [text[len(title) :].lstrip() if title and text.startswith(title) else text for _, text, title in rows]
    titles = [title for _, _, title in rows]
    queries = data.queries
    only = set(args.only.split(","))

    print("shipped (title + chunk, lucene k1=1.2 b=0.5):")
    experiment(scorer, "shipped", data.bm25(("lucene", 1.2, 0.5)))

    def texts_scores(tokens: list[list[str]], analyzer: Callable[[list[str]], list[list[str]]]) -> dict[str, Any]:
        index = LexicalIndex(None, data.ids)
        bm = Bm25(tokens)
        index.retriever = bm.retriever
        return {qid: bm.scores(query_weights(analyzer([text])[0])) for qid, text in queries.items()}

    if "analyzer" in only:
        print("analyzer: one-character words kept (\\w+):")
        tokens = analyze_with(WORDS_1, data.lexical_texts)
        experiment(scorer, "words>=1", texts_scores(tokens, lambda t: analyze_with(WORDS_1, t)))

    if "title" in only:
        print("title field: bm25(body) + w * bm25(title), each field with its own statistics:")
        body = Bm25(analyze(bodies))
        title = Bm25(analyze(titles))
        analyzed = {qid: query_weights(analyze([text])[0]) for qid, text in queries.items()}
        body_scores = {qid: body.scores(w) for qid, w in analyzed.items()}
        title_scores = {qid: title.scores(w) for qid, w in analyzed.items()}
        for w in (0.0, 0.25, 0.5, 0.75, 1.0, 1.5):
            experiment(scorer, f"fields w_title={w}", {q: body_scores[q] + w * title_scores[q] for q in queries})
        print("title repeated r times before each chunk's body:")
        for r in (0, 2, 3):
            texts = [((t + "\n\n") * r + b) if t else b for t, b in zip(titles, bodies, strict=True)]
            experiment(scorer, f"title x{r}", texts_scores(analyze(texts), analyze))

    if "rm3" in only:
        print("RM3 pseudo-relevance feedback over title + chunk (first pass: the shipped BM25):")
        tokens = data._tokens
        bm = Bm25(tokens)
        analyzed = {qid: query_weights(analyze([text])[0]) for qid, text in queries.items()}
        first = {qid: bm.scores(w) for qid, w in analyzed.items()}
        for docs in (5, 10):
            for terms in (10, 20):
                for lam in (0.2, 0.3, 0.5):
                    scores = {
                        qid: bm.scores(rm3(first[qid], tokens, analyzed[qid], docs, terms, lam)) for qid in queries
                    }
                    experiment(scorer, f"rm3 docs={docs} terms={terms} lam={lam}", scores, weights=(0.5,))
    print(f"took {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        main()
