"""Recall@10 and CPU of an ivf base's fast-scan code search over a grid of lists scanned and candidates re-ranked,
on a ``bench/scale.py`` index (hash-bow vectors), against an exact scan of every stored vector.

    python bench/experiments/codes_grid.py --index /tmp/scale1m/1M/index --queries 100

Chose ``codes.NPROBE_FACTOR`` and ``RERANK`` (their comment quotes the grid). Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: the kept modules this builds on
import scale
from _synthetic import HashBowEmbedder

from citeline.vectors.ivf import IVFIndex, codes


def main() -> None:
    """Print one line per (lists scanned, re-rank) pair: recall@10, worst query, CPU-ms a dense rank."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--factors", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--reranks", type=int, nargs="+", default=[1000, 2000, 3000, 5000])
    args = parser.parse_args()
    k = 10
    index = scale._open_index({"index": str(args.index)})
    embedder = HashBowEmbedder()
    queries = scale.load_queries(args.queries)
    query_vectors = embedder.encode(queries)
    best = np.full((len(queries), k), -np.inf, dtype=np.float32)
    scores: dict[int, np.ndarray] = {}
    for ids, vectors in scale._stored_vectors(args.index, embedder):
        batch = query_vectors @ vectors.T
        best = -np.sort(-np.concatenate([best, batch], axis=1), axis=1)[:, :k]
        scores.update(zip(ids.tolist(), batch.T, strict=True))
    index.rank(queries[0], k, mode="dense")  # loads the vector index
    base = next(o for o in gc.get_objects() if isinstance(o, IVFIndex))
    print(f"nlist {base.nlist}, calibrated nprobe {int(base._ivf().nprobe)}, {len(base)} base vectors")
    for factor in args.factors:
        for rerank in args.reranks:
            codes.NPROBE_FACTOR, codes.RERANK = factor, rerank
            start = time.process_time()
            found = [[c for c, _ in index.rank(q, k, mode="dense")] for q in queries]
            cpu_ms = (time.process_time() - start) / len(queries) * 1000
            recalls = [sum(scores[c][r] >= best[r, k - 1] - 1e-5 for c in ids) / k for r, ids in enumerate(found)]
            print(f"factor {factor} re-rank {rerank}: recall {np.mean(recalls):.3f} (worst {min(recalls):.2f}), "
                  f"{cpu_ms:.1f} CPU-ms")  # fmt: skip


if __name__ == "__main__":
    main()
