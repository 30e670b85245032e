"""Document-level signals beside the chunk ones, chosen on a BEIR dataset's TRAIN split (test printed beside).

    python bench/experiments/tune_doclevel.py --beir ../shared/benchmarks/scifact --index /tmp/qual2/base \\
        > bench/results/scifact-quality-doclevel.txt

A hybrid candidate (the union of the dense and the lexical top ``CANDIDATES`` chunks, as ``citeline eval`` asks
``citeline.query.stages`` (the hybrid stages)) gets four signals, each rescaled as the shipped fusion rescales its two:

- ``d``: the chunk's cosine, min-max over the dense top 200 (shipped);
- ``l``: the chunk's BM25 over the query's best BM25 (shipped);
- ``dd``: its document's dense score: the cosine of the mean of the document's chunk vectors (costs no
  embedding), or of the whole-document vector ``citeline.eval.baseline`` encodes (an upper bound: it costs a second
  embedding pass), or the best chunk cosine; min-max over the candidates' documents;
- ``ld``: its document's lexical score: the sum of its chunks' BM25 (computable from the chunk index), or BM25
  over the whole document text (a second index), over the best such score among the candidates' documents.

The fused score is ``wd d + wl l + wdd dd + wld ld``; documents are ranked by their best chunk. Every weight
vector is scored on train and test; the choice is the best train nDCG@10. Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: the kept modules this builds on
from tune_quality import Data, top

from citeline.eval.baseline import document_texts, document_vectors
from citeline.eval.beir import ndcg, recall
from citeline.lexical.analyzer import LexicalIndex, analyze

CANDIDATES = 300  #: each list's depth: citeline eval asks 3 chunks per wanted document (100)
REFERENCE = 200  #: the shipped fusion depth: the rescaling's reference


class Signals:
    """Per query: the candidates' document index and their four kinds of signals (rescaled), computed once."""

    def __init__(self, data: Data, doc_vectors_of: dict[str, np.ndarray], doc_bm25: dict[str, dict[str, np.ndarray]]):
        self.data = data
        docs, self.doc_idx = np.unique(data.doc_of, return_inverse=True)
        self.docs = docs
        sums = np.zeros((len(docs), data.vectors.shape[1]), dtype=np.float64)
        np.add.at(sums, self.doc_idx, data.vectors)
        mean = sums / np.linalg.norm(sums, axis=1, keepdims=True)
        lex_all = data.bm25(("lucene", 1.2, 0.5))
        self.per_query: dict[str, dict[str, np.ndarray]] = {}
        for qid in data.queries:
            cos, lex = data.cosines[qid], lex_all[qid]
            dense_top, lexical_top = top(cos, CANDIDATES), top(lex, CANDIDATES)
            lexical_top = lexical_top[lex[lexical_top] > 0]
            cand = np.union1d(dense_top, lexical_top)
            d_ref = cos[dense_top[:REFERENCE]]
            low, high = float(d_ref.min()), float(d_ref.max())
            l_high = float(lex[lexical_top[:REFERENCE]].max()) if len(lexical_top) else 1.0
            di = self.doc_idx[cand]
            q = data.query_vectors[qid].astype(np.float64)
            doc_sum = np.bincount(self.doc_idx, weights=lex, minlength=len(docs))
            doc_max_cos = np.full(len(docs), -1.0)
            np.maximum.at(doc_max_cos, self.doc_idx, cos)
            signals = {
                "d": (cos[cand] - low) / (high - low),
                "l": lex[cand] / l_high,
                "dd_mean": _minmax(mean[di] @ q),
                "dd_max": _minmax(doc_max_cos[di]),
                "ld_sum": _maxscale(doc_sum[di]),
            }
            if doc_vectors_of:
                signals["dd_whole"] = _minmax(doc_vectors_of[qid][di])
            for name, scores in doc_bm25.items():
                signals[name] = _maxscale(scores[qid][di])
            signals["cand_doc"] = di
            self.per_query[qid] = signals

    def rankings(self, weights: dict[str, float], query_ids: list[str]) -> dict[str, list[str]]:
        """Each query's document ranking (best chunk) under a weight per signal."""
        out = {}
        for qid in query_ids:
            s = self.per_query[qid]
            values = sum(w * s[name] for name, w in weights.items() if w)
            order = np.lexsort((np.arange(len(values)), -values))
            docs = s["cand_doc"][order]
            _, first = np.unique(docs, return_index=True)
            out[qid] = [str(self.docs[docs[i]]) for i in np.sort(first)[:100]]
        return out

    def score(self, weights: dict[str, float]) -> dict[str, float]:
        """nDCG@10 on train and test, Recall@100 on test."""
        figures = {}
        for name, split in (("train", self.data.train), ("test", self.data.test)):
            rankings = self.rankings(weights, list(split.queries))
            figures[name] = float(np.mean([ndcg(rankings[q], split.qrels[q]) for q in rankings]))
            figures[f"{name}_recall"] = float(np.mean([recall(rankings[q], split.qrels[q]) for q in rankings]))
        return figures


def postings_bm25(data: Data, docs: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Document BM25 from the chunk index's texts: ``ld_concat`` indexes each document's chunk texts joined (title
    repeated per chunk, overlaps twice) with bm25s; ``ld_chunks`` sums each document's term frequencies and lengths
    over its chunks and scores them with the chunk index's idf and the mean document length (what a query can
    compute from the chunk postings without a second index)."""
    from scipy import sparse

    position = {doc: i for i, doc in enumerate(docs)}
    doc_idx = np.array([position[doc] for doc in data.doc_of])
    joined = ["" for _ in docs]
    for i, text in zip(doc_idx, data.lexical_texts, strict=True):
        joined[i] += text + "\n"
    concat = LexicalIndex.build(np.arange(len(docs), dtype=np.int64), joined, method="lucene", k1=1.2, b=0.5)
    out = {"ld_concat": {qid: concat.scores(text).astype(np.float64) for qid, text in data.queries.items()}}
    vocabulary: dict[str, int] = {}
    rows, cols = [], []
    for chunk, tokens in enumerate(data._tokens):
        for token in tokens:
            rows.append(chunk)
            cols.append(vocabulary.setdefault(token, len(vocabulary)))
    tf = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(data._tokens), len(vocabulary)))
    df = np.asarray((tf > 0).sum(axis=0)).ravel()
    idf = np.log(1 + (tf.shape[0] - df + 0.5) / (df + 0.5))
    grouping = sparse.csr_matrix((np.ones(len(doc_idx)), (doc_idx, np.arange(len(doc_idx)))))
    doc_tf = (grouping @ tf).tocsc()
    lengths = np.asarray(doc_tf.sum(axis=1)).ravel()
    norm = 1.2 * (0.5 + 0.5 * lengths / lengths.mean())
    scores = {}
    for qid, text in data.queries.items():
        total = np.zeros(len(docs))
        for token in analyze([text])[0]:
            col = vocabulary.get(token)
            if col is None:
                continue
            column = doc_tf.getcol(col).toarray().ravel()
            total += idf[col] * column / (norm + column)
        scores[qid] = total
    out["ld_chunks"] = scores
    return out


def _minmax(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else values - low


def _maxscale(values: np.ndarray) -> np.ndarray:
    high = float(values.max())
    return values / high if high > 0 else values


def line(label: str, figures: dict[str, float]) -> None:
    """One result line."""
    print(
        f"  {label:<72} train {figures['train']:.4f}  test {figures['test']:.4f}  "
        f"test R@100 {figures['test_recall']:.4f}",
        flush=True,
    )


def label_of(weights: dict[str, float]) -> str:
    """A weight vector in a few words."""
    return " ".join(f"{name}={w:g}" for name, w in weights.items() if w)


def best(signals: Signals, grid: list[dict[str, float]], show: Callable[[dict[str, float]], bool]) -> dict[str, float]:
    """The weight vector with the best train nDCG@10 (those ``show`` picks printed)."""
    results = []
    for weights in grid:
        figures = signals.score(weights)
        results.append((figures["train"], weights, figures))
        if show(weights):
            line(label_of(weights), figures)
    _, chosen, figures = max(results, key=lambda r: r[0])
    line(f"CHOSEN ON TRAIN: {label_of(chosen)}", figures)
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--whole", action="store_true", help="also the cached whole-document vectors (dd_whole)")
    parser.add_argument("--only", nargs="*", help="signal pairs to grid, e.g. dd_mean,ld_chunks")
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    data = Data(args.beir, args.index)
    print(f"index {args.index}: {len(data.ids)} chunks; train {len(data.train.queries)}, test {len(data.test.queries)}")

    ids, texts = document_texts(data.train.corpus)
    position = {doc: i for i, doc in enumerate(ids)}
    start, start_cpu = time.perf_counter(), time.process_time()
    whole_bm25 = LexicalIndex.build(np.arange(len(ids), dtype=np.int64), texts, method="lucene", k1=1.2, b=0.5)
    build = (time.perf_counter() - start, time.process_time() - start_cpu)
    docs = np.unique(data.doc_of)
    order = np.array([position[str(doc)] for doc in docs])
    start, start_cpu = time.perf_counter(), time.process_time()
    doc_bm25 = {qid: whole_bm25.scores(text)[order].astype(np.float64) for qid, text in data.queries.items()}
    per_query = (time.perf_counter() - start) / len(data.queries) * 1000
    print(
        f"whole-document BM25 (lucene k1=1.2 b=0.5, title + text): built in {build[0]:.1f} s wall "
        f"{build[1]:.1f} CPU-s; {per_query:.2f} ms a query (all documents scored)"
    )
    doc_bm25s = {"ld_doc": doc_bm25, **postings_bm25(data, docs)}
    doc_vectors_of: dict[str, np.ndarray] = {}
    if args.whole:
        vectors = document_vectors(data.train.corpus, texts, data.index.embedder)[order]
        doc_vectors_of = {qid: vectors @ v for qid, v in data.query_vectors.items()}
    signals = Signals(data, doc_vectors_of, doc_bm25s)

    print("shipped (convex minmax 0.5 over d and l):")
    line("d=0.5 l=0.5", signals.score({"d": 0.5, "l": 0.5}))
    line("d=0.4 l=0.6", signals.score({"d": 0.4, "l": 0.6}))
    steps = (0.0, 0.1, 0.2, 0.3, 0.4)
    pairs = [(dd, ld) for dd in ("dd_mean", "dd_max") for ld in ("ld_sum", "ld_doc")]
    pairs += [("dd_mean", "ld_concat"), ("dd_mean", "ld_chunks")] + ([("dd_whole", "ld_doc")] if args.whole else [])
    for dd, ld in pairs if not args.only else [tuple(pair.split(",")) for pair in args.only]:
        print(f"d, l, {dd}, {ld}: weights (d and l share what the document signals leave, d/(d+l) in 0.4-0.6):")
        grid = []
        for a, b, share in itertools.product(steps, steps, (0.4, 0.5, 0.6)):
            rest = 1.0 - a - b
            if rest <= 0.2:
                continue
            grid.append({"d": round(rest * share, 4), "l": round(rest * (1 - share), 4), dd: a, ld: b})
        best(signals, grid, lambda w, dd=dd, ld=ld: w["d"] == w["l"] or (w[dd] == 0 and w[ld] == 0))
    print(f"took {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
