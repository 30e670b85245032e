"""Issue 18: fusion weights from how strongly each list matches the query, on SciFact train (choose) and test.

    python bench/experiments/tune_strength.py --beir ../shared/benchmarks/scifact --index /tmp/q18-scifact \\
        > bench/results/scifact-quality-strength.txt          # and --index /tmp/q18-scifact-int8

Both lists are min-max scaled per query before the fusion, so each list's best chunk scores 1 whether it matches
the query well or barely. This replays the shipped hybrid ranking (``DEFAULT_FUSION``: dense weight 0.4, then the
feedback stage at beta 0.25 and weight 0.5, as ``bench/tune_prf.py`` does) with each list's weight multiplied by
its strength for this query, relative to the split's median, raised to ``gamma``:

- lexical strength: the best chunk's BM25 over the query's bound (the sum of its terms' idf, the most any chunk can
  score under "lucene" BM25), so 1 is every query term matched at saturation;
- dense strength: the best cosine minus the 200th (the span the cosines are scaled over).

The weights are renormalised per query: ``(a * d + b * l) / (a + b)``. Paired bootstrap intervals are against
the shipped ranking, over queries.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_prf import best_chunks, compared, moved_scaled, rocchio
from tune_q18 import SCALE_DEPTH, Corpus, Split, replay_setup, scaled_chunks

from citeline.eval.beir import load_beir

GAMMAS = (0.25, 0.5, 1.0)


def fused(
    d: np.ndarray, lex: np.ndarray, candidates: np.ndarray, weight: float, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Chunk scores of the convex fusion with per-query multipliers ``a`` (dense) and ``b`` (lexical)."""
    dense, lexical = weight * a[:, None], (1 - weight) * b[:, None]
    return np.where(candidates, (dense * d + lexical * lex) / (dense + lexical), -1e9)


def ranking(
    split: Split, corpus: Corpus, a: np.ndarray, b: np.ndarray, vectors: np.ndarray, centroids: np.ndarray
) -> np.ndarray:
    """Document scores of the shipped two-pass hybrid ranking with per-query list multipliers (``vectors``: the
    chunk vectors as float64)."""
    d, lex, candidates = scaled_chunks(split)
    first = fused(d, lex, candidates, 0.4, a, b)
    moved = rocchio(split, best_chunks(corpus, first, 1), 0.25, vectors, centroids)
    return corpus.reduce_max(fused(moved_scaled(split.cosines, moved), lex, candidates, 0.5, a, b))


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    args, index, corpus = replay_setup(__doc__.splitlines()[0])
    reader = index.snapshot().lexical._reader  # the segmented index's query reader: each query term's idf
    print(f"# index {args.index} (backend {index.meta['backend']}): {len(corpus.chunk_ids)} chunks")
    print("# columns: nDCG@10 all, relevant documents of 1 chunk, 2, >=3 chunks; then Recall@100; d: against shipped")
    vectors, centroids = corpus.vectors.astype(np.float64), corpus.mean_vectors(corpus.length)
    for name in ("train", "test"):
        split = Split(index, corpus, args.beir, name)
        queries = load_beir(args.beir, name).queries
        bound = np.array([sum(float(idf) for _, idf in reader.weighted(queries[q], None)[0]) for q in split.queries])
        lexical = split.bm25.max(axis=1) / np.where(bound > 0, bound, 1.0)
        ranked = -np.sort(-split.cosines, axis=1)
        dense = ranked[:, 0] - ranked[:, SCALE_DEPTH - 1]
        print(
            f"# {name}: lexical strength median {np.median(lexical):.3f} (quartiles {np.percentile(lexical, 25):.3f}"
            f"-{np.percentile(lexical, 75):.3f}); dense span median {np.median(dense):.3f}"
        )
        ones = np.ones(len(split.queries))
        shipped = ranking(split, corpus, ones, ones, vectors, centroids)
        shipped_nd, _ = split.score_documents(shipped)
        print(split.row("shipped (DEFAULT_FUSION)", shipped))
        lexical, dense = lexical / np.median(lexical), dense / np.median(dense)
        for gamma in GAMMAS:
            for which, a, b in (
                ("lexical", ones, lexical**gamma),
                ("dense", dense**gamma, ones),
                ("both", dense**gamma, lexical**gamma),
            ):
                docs = ranking(split, corpus, a, b, vectors, centroids)
                print(compared(split, f"strength {which} gamma={gamma}", docs, shipped_nd), flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
