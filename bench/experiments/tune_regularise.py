"""Issue 18: score regularisation over the first documents (the cluster hypothesis), on SciFact train and test.

    python bench/experiments/tune_regularise.py --beir ../shared/benchmarks/scifact --index /tmp/q18-scifact-int8 \\
        > bench/results/scifact-quality-regularise.txt          # and --index /tmp/q18-scifact (torch)

Documents close to each other tend to be relevant to the same query. After the shipped hybrid ranking (the
two-pass ``DEFAULT_FUSION``, replayed as ``bench/normalisation.py`` does), each of the first 100 documents' scores
(min-max scaled over those 100) is blended with the mean score of its ``knn`` nearest neighbours among them, by
cosine of their length-weighted centroids (the dense stage's), each weighted by that cosine:
``(1 - lam) * s + lam * neighbours``. Chosen on train; test printed beside. Run by hand; not part of CI.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from normalisation import rankings
from tune_prf import compared
from tune_q18 import Split, replay_setup

TOP = 100  #: the documents regularised (citeline eval ranks 100)


def regularised(scores: np.ndarray, centroids: np.ndarray, knn: int, lam: float) -> np.ndarray:
    """Document scores (queries x documents) with the first ``TOP`` of each query regularised, kept above the rest."""
    out = scores.copy()
    for i, row in enumerate(scores):
        docs = np.argsort(-row, kind="stable")[:TOP]
        s = row[docs]
        span = s.max() - s.min()
        s = (s - s.min()) / span if span > 0 else np.zeros_like(s)
        similar = centroids[docs] @ centroids[docs].T
        np.fill_diagonal(similar, -np.inf)
        nearest = np.argsort(-similar, axis=1)[:, :knn]
        weights = np.maximum(np.take_along_axis(similar, nearest, axis=1), 0)
        neighbours = (weights * s[nearest]).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        out[i, docs] = 10 + (1 - lam) * s + lam * neighbours
    return out


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    args, index, corpus = replay_setup(__doc__.splitlines()[0])
    print(f"# index {args.index} (backend {index.meta['backend']}): {len(corpus.chunk_ids)} chunks")
    print("# columns: nDCG@10 all, relevant documents of 1 chunk, 2, >=3 chunks; then Recall@100; d: against shipped")
    vectors, centroids = corpus.vectors.astype(np.float64), corpus.mean_vectors(corpus.length)
    for name in ("train", "test"):
        split = Split(index, corpus, args.beir, name)
        shipped = rankings(split, corpus, vectors)["hybrid"]
        shipped_nd, _ = split.score_documents(shipped)
        print(split.row("shipped (DEFAULT_FUSION)", shipped))
        for knn in (3, 5, 10):
            for lam in (0.1, 0.2, 0.3):
                docs = regularised(shipped, centroids, knn, lam)
                print(compared(split, f"regularised knn={knn} lam={lam}", docs, shipped_nd), flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
