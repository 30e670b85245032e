"""Issue 18: pseudo-relevance feedback on the dense side (Rocchio on the query vector), on SciFact train and test.

    python bench/experiments/tune_prf.py --beir ../shared/benchmarks/scifact --index /tmp/q18-scifact \\
        > bench/results/scifact-quality-prf.txt

Replays the library's hybrid fusion as ``bench/tune_q18.py`` does (same Corpus and Split, same candidates and
scaling), then moves the query vector toward the vectors of the first ranking's top documents:
``q' = normalise(q + beta * mean(feedback vectors))``, scores every chunk by cosine with ``q'`` and fuses again with
the unchanged BM25 scores. The feedback documents come from the hybrid ranking (the better first list) or from the
dense one; each document gives its best chunk's vector (the chunk that ranked it) or its length-weighted centroid.
Variants are chosen on train; test is printed beside them.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_q18 import CANDIDATES, SCALE_DEPTH, Corpus, Split, replay_setup, scaled_chunks


def fused_chunks(split: Split, weight: float, cosines: np.ndarray | None = None) -> np.ndarray:
    """Per-chunk fused scores of the convex fusion (non-candidates at -1e9)."""
    d, lex, candidates = scaled_chunks(split, cosines)
    return np.where(candidates, weight * d + (1 - weight) * lex, -1e9)


def best_chunks(corpus: Corpus, chunk_scores: np.ndarray, depth: int) -> np.ndarray:
    """For each query, the chunk index that ranks each of its top ``depth`` documents (queries x depth)."""
    out = np.empty((chunk_scores.shape[0], depth), dtype=np.int64)
    for i, row in enumerate(chunk_scores):
        order = np.argsort(-row, kind="stable")
        seen: set[int] = set()
        picked: list[int] = []
        for c in order:
            doc = int(corpus.doc_of[c])
            if doc not in seen:
                seen.add(doc)
                picked.append(int(c))
                if len(picked) == depth:
                    break
        out[i] = picked
    return out


def moved_queries(
    split: Split, feedback: np.ndarray, beta: float, vectors: np.ndarray, by_document: np.ndarray | None = None
) -> np.ndarray:
    """Each query's ``normalise(q + beta * mean(feedback))``; ``feedback`` holds chunk indexes (queries x depth),
    mapped to their documents' centroids when ``by_document`` is given."""
    q = split.query_vectors.astype(np.float64)
    rows = vectors[feedback] if by_document is None else by_document[split.corpus.doc_of[feedback]]
    moved = q + beta * rows.mean(axis=1)
    moved /= np.linalg.norm(moved, axis=1, keepdims=True)
    return moved


def rocchio(
    split: Split, feedback: np.ndarray, beta: float, vectors: np.ndarray, by_document: np.ndarray | None = None
) -> np.ndarray:
    """Cosines of every chunk with the moved queries (:func:`moved_queries`)."""
    return moved_queries(split, feedback, beta, vectors, by_document) @ vectors.T


def moved_scaled(first_cosines: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """Cosines with the moved query, min-max rescaled over the first dense top 200's new values, as the library's
    second fusion rescales them."""
    order = np.argsort(-first_cosines, axis=1)[:, :SCALE_DEPTH]
    top = np.take_along_axis(moved, order, axis=1)
    low, high = top.min(axis=1, keepdims=True), top.max(axis=1, keepdims=True)
    return (moved - low) / (high - low)


def rescored(split: Split, weight: float, first_cosines: np.ndarray, moved: np.ndarray) -> np.ndarray:
    """Chunk scores of the second fusion over the *first* pass's candidates (no second search): cosines with the
    moved query (:func:`moved_scaled`), BM25 as before."""
    _, lex, candidates = scaled_chunks(split, first_cosines)
    return np.where(candidates, weight * moved_scaled(first_cosines, moved) + (1 - weight) * lex, -1e9)


def bootstrap(a: np.ndarray, b: np.ndarray, rounds: int = 2000) -> tuple[float, float, float]:
    """Mean paired difference b - a over queries and its 95 % bootstrap interval."""
    rng = np.random.default_rng(18)
    diff = b - a
    means = np.array([diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(rounds)])
    return float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def compared(split: Split, label: str, docs: np.ndarray, against: np.ndarray) -> str:
    """``split.row`` of document scores ``docs``, with the mean paired nDCG@10 difference from the per-query
    ``against`` and its 95 % bootstrap interval."""
    nd, rc = split.score_documents(docs)
    mean, low, high = bootstrap(against, nd)
    return split.line(label, nd, rc) + f"  d {mean:+.4f} [{low:+.4f}, {high:+.4f}]"


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    args, index, corpus = replay_setup(
        __doc__.splitlines()[0], lambda parser: parser.add_argument("--only", choices=("1", "2"), help="one section")
    )
    print(f"# index {args.index} (backend {index.meta['backend']}): {len(corpus.chunk_ids)} chunks")
    splits = [Split(index, corpus, args.beir, name) for name in ("train", "test")]
    vectors = corpus.vectors.astype(np.float64)
    centroids = corpus.mean_vectors(corpus.length)
    print("# columns: nDCG@10 all, relevant documents of 1 chunk, 2, >=3 chunks; then Recall@100")
    print(f"# candidates per list: {CANDIDATES}")
    for split in splits if args.only != "2" else []:
        base = fused_chunks(split, 0.4)
        print(split.row("hybrid 0.4 (shipped)", corpus.reduce_max(base)))
        print(split.row("dense best chunk (shipped first stage)", corpus.reduce_max(split.cosines)))
        for source, first in (("hybrid", base), ("dense", split.cosines)):
            top = best_chunks(corpus, first, 10)
            for depth in (1, 3, 5, 10):
                for kind, by_document in (("chunk", None), ("centroid", centroids)):
                    for beta in (0.25, 0.5, 1.0):
                        cos = rocchio(split, top[:, :depth], beta, vectors, by_document)
                        for weight in (0.4, 0.5):
                            label = f"{source} top{depth} {kind} beta={beta} -> hybrid {weight}"
                            print(split.row(label, corpus.reduce_max(fused_chunks(split, weight, cos))), flush=True)
                        if source == "dense" and depth in (3, 5):
                            label = f"{source} top{depth} {kind} beta={beta} -> dense"
                            print(split.row(label, corpus.reduce_max(cos)), flush=True)
    if args.only == "1":
        return
    print("\n## 2. the fused top documents' centroids, second fusion over a new search or the same candidates")
    for split in splits:
        base = fused_chunks(split, 0.4)
        shipped_nd, _ = split.score_documents(corpus.reduce_max(base))
        top = best_chunks(corpus, base, 2)
        for depth in (1, 2):
            for beta in (0.25, 0.5, 0.75):
                cos = rocchio(split, top[:, :depth], beta, vectors, centroids)
                for weight in (0.4, 0.45, 0.5):
                    for how, scores in (
                        ("search", fused_chunks(split, weight, cos)),
                        ("rescore", rescored(split, weight, split.cosines, cos)),
                    ):
                        label = f"fused top{depth} centroid beta={beta} {how} -> hybrid {weight}"
                        print(compared(split, label, corpus.reduce_max(scores), shipped_nd), flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
