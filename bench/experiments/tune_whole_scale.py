"""How the document signals are put on the chunk scores' scale, chosen on SciFact TRAIN (test printed beside).

    python bench/experiments/tune_whole_scale.py --beir ../shared/benchmarks/scifact --index /tmp/qual2/base \\
        >> bench/results/scifact-quality-whole.txt

The library's signals must not depend on the candidate set (a filter must not change a chunk's fused score), so
min-max over the candidates' documents (bench/tune_doclevel.py's, which reached test 0.7361 with whole-document
vectors) is replaced by quantities of the query alone. Scored here from cached scores (as tune_doclevel.py does:
every candidate gets the signals, documents by their best chunk):

- ``whole``: the cosine of the whole-document vector (``citeline.eval.baseline``'s cache: what ``document_vectors``
  stores), ``cand`` min-max over the candidates' documents (not filter-invariant), ``chunk`` rescaled as the
  chunks' cosines (the dense top 200's min..max: the library's ``cosine`` scale), ``raw`` the cosine as is;
- ``ld``: the document BM25 from the chunk postings (corpus mean document length), ``cand`` over the candidates'
  best, ``unit`` over the sum of the query terms' idf (the library's ``unit`` scale).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from tune_doclevel import CANDIDATES, REFERENCE, Signals, _maxscale, _minmax, line

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: the kept modules this builds on
from tune_quality import Data, top

from citeline.eval.baseline import document_texts, document_vectors
from citeline.lexical.analyzer import analyze


def document_bm25(data: Data, docs: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Per query: each document's BM25 from its chunks' term frequencies (chunk idf, corpus mean document
    length: tune_doclevel's ``ld_chunks``), and the query's bound (the sum of its terms' idf)."""
    from scipy import sparse

    position = {doc: i for i, doc in enumerate(docs)}
    doc_idx = np.array([position[doc] for doc in data.doc_of])
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
    scores, bounds = {}, {}
    for qid, text in data.queries.items():
        total = np.zeros(len(docs))
        bound = 0.0
        for token in dict.fromkeys(analyze([text])[0]):
            col = vocabulary.get(token)
            if col is None:
                continue
            column = doc_tf.getcol(col).toarray().ravel()
            total += idf[col] * column / (norm + column)
            bound += idf[col]
        scores[qid], bounds[qid] = total, bound or 1.0
    return scores, bounds


class Scaled(Signals):
    """tune_doclevel's signals plus the query-only scalings of the whole-document cosine and the document BM25."""

    def __init__(self, data: Data, whole: dict[str, np.ndarray], bm25: dict[str, np.ndarray], bounds: dict[str, float]):
        super().__init__(data, {}, {})
        for qid, s in self.per_query.items():
            cos = data.cosines[qid]
            dense_top = top(cos, CANDIDATES)[:REFERENCE]
            low, high = float(cos[dense_top].min()), float(cos[dense_top].max())
            di = s["cand_doc"]
            w = whole[qid][di]
            s["whole_cand"], s["whole_chunk"], s["whole_raw"] = _minmax(w), (w - low) / (high - low), w
            b = bm25[qid][di]
            s["ld_cand"], s["ld_unit"] = _maxscale(b), b / bounds[qid]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    data = Data(args.beir, args.index)
    ids, texts = document_texts(data.train.corpus)
    position = {doc: i for i, doc in enumerate(ids)}
    docs = np.unique(data.doc_of)
    order = np.array([position[str(doc)] for doc in docs])
    vectors = document_vectors(data.train.corpus, texts, data.index.embedder)[order]
    whole = {qid: vectors @ v for qid, v in data.query_vectors.items()}
    bm25, bounds = document_bm25(data, docs)
    signals = Scaled(data, whole, bm25, bounds)
    print(f"index {args.index}: {len(data.ids)} chunks; train {len(data.train.queries)}, test {len(data.test.queries)}")
    line("d=0.5 l=0.5 (shipped before)", signals.score({"d": 0.5, "l": 0.5}))
    for wname, lname in itertools.product(("whole_cand", "whole_chunk", "whole_raw"), ("ld_cand", "ld_unit")):
        steps = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5) if wname != "whole_raw" else (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
        results = []
        for a, b, share in itertools.product(steps, (0.0, 0.1, 0.2, 0.3, 0.4), (0.4, 0.5)):
            rest = 1.0 - b - (a if wname != "whole_raw" else 0.0)
            if rest <= 0.15:
                continue
            weights = {"d": round(rest * share, 4), "l": round(rest * (1 - share), 4), wname: a, lname: b}
            results.append((signals.score(weights)["train"], weights))
        results.sort(key=lambda r: -r[0])
        print(f"{wname} + {lname}: best 5 on train")
        for _, weights in results[:5]:
            line(" ".join(f"{k}={v:g}" for k, v in weights.items()), signals.score(weights))
    print(f"took {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
