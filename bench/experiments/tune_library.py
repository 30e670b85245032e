"""Score hybrid fusion settings through the library itself (``citeline.eval.beir.evaluate_index``), and time them.

    python bench/experiments/tune_library.py --beir ../shared/benchmarks/scifact --index /tmp/qual2/base \\
        --split train 0.4,0.1,0.1 0.4,0.0,0.0 ...  # chunk dense weight, document dense weight, document BM25 weight
    python bench/experiments/tune_library.py --beir ../shared/benchmarks/scifact --index /tmp/qual2/base --p50 100

bench/tune_doclevel.py chooses among signals from cached scores; this scores weights end to end (the library's
candidates, rescaling, document grouping and ``doc_signals.DEPTH``): choose on ``--split train``, then report
``--split test`` for the choice. ``--p50 N`` times ``Index.search`` (k=10, hybrid, collapse on) on N test
claims with the settings shipped before (convex 0.5, chunks only), the default and ``DOCUMENT_FUSION`` (the
default plus the whole-document vector: on an index without them, the mean chunk vector), alternating query by query.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import citeline.query.plan as search
from citeline import Index
from citeline.eval.beir import evaluate_index, load_beir
from citeline.query import doc_signals
from citeline.query.plan import Fusion

BEFORE = Fusion(weight=0.5, documents=())


def score(index: Index, beir: Path, split: str, specs: list[str]) -> None:
    """nDCG@10 and Recall@100 of each ``dense,doc_dense,doc_lexical[,doc_whole]`` weight spec on one split."""
    dataset = load_beir(beir, split)
    for spec in specs:
        weight, dense, lexical, *rest = map(float, spec.split(","))
        whole = rest[0] if rest else 0.0
        documents = tuple((n, w) for n, w in (("dense", dense), ("lexical", lexical), ("whole", whole)) if w)
        fusion = Fusion(weight=weight, documents=documents)
        wall, cpu = time.perf_counter(), time.process_time()
        (result,) = evaluate_index(index, dataset, ["hybrid"], fusion=fusion)
        print(
            f"  {split:<5} depth {doc_signals.DEPTH} w_dense={weight:g} doc_dense={dense:g} doc_bm25={lexical:g} "
            f"doc_whole={whole:g}  "
            f"nDCG@10 {result.ndcg_at_10:.4f}  R@100 {result.recall_at_100:.4f}  "
            f"({time.perf_counter() - wall:.0f} s, {time.process_time() - cpu:.0f} CPU-s)",
            flush=True,
        )


def p50(index: Index, beir: Path, count: int) -> None:
    """Median search time before and after, alternating (the machine's load hits both alike)."""
    wanted = set(load_beir(beir, "test").queries)
    with (beir / "queries.jsonl").open(encoding="utf-8") as handle:
        queries = [r["text"] for r in map(json.loads, handle) if r["_id"] in wanted][:count]
    after = search.rank.__defaults__
    assert after is not None
    variants = {"before": (*after[:-1], BEFORE), "after": after, "whole": (*after[:-1], search.DOCUMENT_FUSION)}
    for query in queries[:3]:
        index.search(query, k=10)
    walls: dict[str, list[float]] = {name: [] for name in variants}
    cpus: dict[str, list[float]] = {name: [] for name in variants}
    for query in queries:
        for name, defaults in variants.items():
            search.rank.__defaults__ = defaults  # the fusion hybrid search uses when none is passed
            wall, cpu = time.perf_counter(), time.process_time()
            index.search(query, k=10)
            walls[name].append((time.perf_counter() - wall) * 1000)
            cpus[name].append((time.process_time() - cpu) * 1000)
    search.rank.__defaults__ = after
    for name in variants:
        print(
            f"  {name}: p50 {statistics.median(walls[name]):.1f} ms wall, {statistics.median(cpus[name]):.1f} ms CPU "
            f"(k=10, hybrid, collapse on, {len(queries)} test claims, alternating)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--split", default="train")
    parser.add_argument("--depth", type=int, default=doc_signals.DEPTH, help="candidates given document signals")
    parser.add_argument("--p50", type=int, default=0, help="time this many test claims instead of scoring")
    parser.add_argument("specs", nargs="*", help="w_dense,doc_dense,doc_bm25 triples")
    args = parser.parse_args()
    index = Index.open(args.index)
    doc_signals.DEPTH = args.depth
    if args.p50:
        p50(index, args.beir, args.p50)
    else:
        score(index, args.beir, args.split, args.specs)


if __name__ == "__main__":
    main()
