"""Tune BM25 and hybrid-fusion settings on half of a BEIR split's queries; report the other half and all.

    python bench/tune_fusion.py --beir ../shared/benchmarks/scifact --index /tmp/scifact-4a

The index must already hold the dataset's corpus (``citeline eval --beir DIR --index DIR`` builds it). Queries are
split once, by a fixed seed, into a tuning half and a held-out half; every setting is chosen by its mean nDCG@10
on the tuning half only, and the held-out half and all queries are reported for the chosen settings. The query
embeddings and the BM25 analysis are computed once; each setting then re-ranks in-process with the library's
own functions (``dense_search``, ``lexical_search``, ``hybrid_search``), exactly as ``Index.search`` does. Run by
hand; not part of CI.
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from citeline import Index, store
from citeline.evaluate import CorpusChunks, documents_by_best_chunk, load_beir, score_rankings
from citeline.search import (
    BM25_B,
    BM25_K1,
    BM25_METHOD,
    Fusion,
    LexicalIndex,
    analyze,
    dense_search,
    hybrid_search,
    lexical_search,
)

SEED = 2026
CHUNK_DEPTH = 400  # chunks per query: enough for 100 documents on SciFact (about 2.5 chunks per abstract)


def split_queries(query_ids: list[str], seed: int = SEED) -> tuple[list[str], list[str]]:
    """A fixed random half of the queries for tuning, the other half held out."""
    shuffled = sorted(query_ids)
    random.Random(seed).shuffle(shuffled)
    half = len(shuffled) // 2
    return sorted(shuffled[:half]), sorted(shuffled[half:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--stages", default="dense,lexical,hybrid", help="Comma-separated stages to run.")
    args = parser.parse_args()

    dataset = load_beir(args.beir, args.split)
    index = Index.open(args.index)
    snapshot = index.snapshot()
    chunks = CorpusChunks(index, dataset.corpus)
    tuning, held_out = split_queries(list(dataset.queries))
    every = sorted(dataset.queries)
    print(
        f"{len(every)} queries: {len(tuning)} tuning, {len(held_out)} held out (seed {SEED}); "
        f"{chunks.documents} documents, {chunks.chunks} chunks"
    )

    stages = args.stages.split(",")
    vectors = {}
    if "dense" in stages or "hybrid" in stages:
        start = time.perf_counter()
        vectors = {qid: index.encode_query(text) for qid, text in dataset.queries.items()}
        print(f"encoded the queries in {time.perf_counter() - start:.1f} s")

    def score(label: str, search: Callable[[str], list[tuple[int, float]]]) -> dict[str, float]:
        rankings = {qid: documents_by_best_chunk(search(qid), chunks.record_of) for qid in every}
        result = score_rankings(label, rankings, dataset.qrels)
        figures = {
            "tune": result.subset(tuning)[0],
            "held": result.subset(held_out)[0],
            "all": result.ndcg_at_10,
            "recall": result.recall_at_100,
        }
        return figures

    def line(label: str, figures: dict[str, float]) -> None:
        print(
            f"  {label:<58} tune {figures['tune']:.4f}  held-out {figures['held']:.4f}  all {figures['all']:.4f}"
            f"  R@100 {figures['recall']:.4f}",
            flush=True,
        )

    if "dense" in stages:
        print("dense (nothing to tune):")
        line(
            "all-MiniLM-L6-v2, flat inner product",
            score("dense", lambda q: dense_search(snapshot.faiss, vectors[q], CHUNK_DEPTH)),
        )

    # ---- lexical: BM25 variants over the chunk texts (stemmed, English stopwords), and with titles added
    connection = snapshot.connection
    rows = connection.execute("SELECT chunk_id, text FROM chunks ORDER BY chunk_id").fetchall()
    ids, with_titles = store.load_texts(connection)  # what the index's BM25 folder holds
    assert np.array_equal(ids, np.array([r[0] for r in rows], dtype=np.int64))
    texts = {"chunk text": [r[1] for r in rows], "title + chunk text": with_titles}
    tokens = {name: analyze(values) for name, values in texts.items()}

    def build(name: str, method: str, k1: float, b: float) -> LexicalIndex:
        import bm25s

        retriever = bm25s.BM25(method=method, k1=k1, b=b)
        retriever.index(tokens[name], show_progress=False)
        return LexicalIndex(retriever, ids)

    shipped = (BM25_METHOD, BM25_K1, BM25_B)
    if "lexical" in stages:
        print("lexical (BM25, bm25s + PyStemmer english + English stopwords):")
        lexical_results = {}
        for name, method, k1, b in itertools.product(
            texts, ("lucene", "robertson", "atire", "bm25l", "bm25+"), (0.9, 1.2, 1.5), (0.5, 0.75, 0.9)
        ):
            lexical = build(name, method, k1, b)
            figures = score("lexical", lambda q, lex=lexical: lexical_search(lex, dataset.queries[q], CHUNK_DEPTH))
            lexical_results[(name, method, k1, b)] = figures
            if (k1, b) == (1.2, 0.75) or (method, k1, b) == shipped:
                line(f"{name}, {method} k1={k1} b={b}", figures)
        best_lexical = max(lexical_results, key=lambda key: lexical_results[key]["tune"])
        line(f"BEST ON TUNING HALF: {best_lexical}", lexical_results[best_lexical])
        line(f"shipped: title + chunk text, {shipped}", lexical_results[("title + chunk text", *shipped)])
    if "hybrid" not in stages:
        return

    # ---- hybrid: fusion of dense and the shipped lexical ranking (the index's own BM25 folder)
    lexical = snapshot.lexical
    print("hybrid (dense + lexical as shipped):")
    hybrid_results = {}

    def hybrid(fusion: Fusion) -> dict[str, float]:
        return score(
            "hybrid",
            lambda q: hybrid_search(snapshot.faiss, lexical, dataset.queries[q], vectors[q], CHUNK_DEPTH, None, fusion),
        )

    for rrf_k, depth in itertools.product((10, 20, 40, 60, 100), (100, 200)):
        fusion = Fusion(method="rrf", rrf_k=rrf_k, depth=depth)
        hybrid_results[fusion] = hybrid(fusion)
        if depth == 100:
            line(f"rrf k={rrf_k} depth={depth}", hybrid_results[fusion])
    for normalization, depth, weight in itertools.product(
        ("minmax", "zscore"), (100, 200), [round(float(w), 2) for w in np.arange(0.3, 0.81, 0.05)]
    ):
        fusion = Fusion(method="convex", weight=weight, depth=depth, normalization=normalization)
        hybrid_results[fusion] = hybrid(fusion)
        if depth == 100 and weight in (0.3, 0.4, 0.5, 0.6, 0.7):
            line(f"convex {normalization} w_dense={weight} depth={depth}", hybrid_results[fusion])
    for method in ("rrf", "convex"):
        best = max((f for f in hybrid_results if f.method == method), key=lambda f: hybrid_results[f]["tune"])
        line(f"BEST {method.upper()} ON TUNING HALF: {best}", hybrid_results[best])
    line(f"shipped default: {Fusion()}", hybrid(Fusion()))


if __name__ == "__main__":
    main()
