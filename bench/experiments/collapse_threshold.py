"""How close do *different* passages come? The evidence behind ``collapse.DEFAULT_COLLAPSE_THRESHOLD``.

    citeline ingest ../shared/benchmarks/scifact/corpus.jsonl --index /tmp/scifact --backend onnx-int8
    python bench/experiments/collapse_threshold.py /tmp/scifact [--queries 200]

For the first ``--queries`` SciFact queries it takes the top 30 chunks (no collapse) and measures the cosine of
every pair of chunks from different documents (SciFact abstracts are distinct papers, so every pair above the
threshold would be a false collapse). Then it runs each query at k=10 with and without collapse and reports how
many results were collapsed and the mean latency of both. Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from citeline import Index
from citeline.query.plan import chunk_vectors

QUERIES = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "scifact" / "queries.jsonl"


def main() -> None:
    """Print the distribution of cross-document cosines among top hits, and collapse's effect at k=10."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--queries-file", type=Path, default=QUERIES)
    args = parser.parse_args()
    index = Index.open(args.index)
    with args.queries_file.open(encoding="utf-8") as handle:
        queries = [json.loads(line)["text"] for line in handle][: args.queries]
    snapshot = index.snapshot()
    cosines: list[float] = []
    collapsed = results = 0
    with_collapse = without = 0.0
    for query in queries:
        hits = index.search(query, k=30, collapse=False)
        vectors = chunk_vectors(snapshot.faiss, [hit.chunk_id for hit in hits])
        similarity = vectors @ vectors.T
        cosines += [
            float(similarity[i, j]) for i in range(len(hits)) for j in range(i) if hits[i].doc_id != hits[j].doc_id
        ]
        start = time.perf_counter()
        found = index.search(query, k=10)
        with_collapse += time.perf_counter() - start
        start = time.perf_counter()
        index.search(query, k=10, collapse=False)
        without += time.perf_counter() - start
        results += len(found)
        collapsed += sum(len(result.sources) > 1 for result in found)
    values = np.array(cosines)
    print(f"{len(queries)} queries, {len(values)} cross-document pairs among each query's top 30")
    for threshold in (0.8, 0.85, 0.9, 0.95, 0.97):
        print(f"  cosine >= {threshold}: {(values >= threshold).sum()} pairs ({(values >= threshold).mean():.4%})")
    print(f"  max {values.max():.3f}, 99.9th percentile {np.quantile(values, 0.999):.3f}")
    print(
        f"k=10 with collapse: {collapsed} of {results} results list more than one source; mean latency "
        f"{with_collapse / len(queries) * 1000:.1f} ms with collapse, {without / len(queries) * 1000:.1f} ms without"
    )


if __name__ == "__main__":
    main()
