"""Ingestion speed: a full citeline ingest against plain sentence-transformers encoding of the same chunks.

    python bench/embed.py [--corpus ../shared/benchmarks/scifact] [--limit N] [--best onnx-int8]
                          [--backends onnx,onnx-int8] [--batch-size 32]

In one process, on one corpus (a BEIR folder or a ``corpus.jsonl``):

1. a full ``Index.ingest`` with the ``--best`` backend (parse, chunk, embed, commit), timed;
2. the chunks that ingest produced, encoded by plain ``SentenceTransformer(model).encode(chunks)`` on torch with
   ``--batch-size`` (32 is sentence-transformers' default: the normal user's baseline), timed;
3. each of ``--backends`` encoding the same chunks through citeline's embedder (encode only), timed;
4. with ``queries.jsonl`` and ``qrels/test.tsv`` beside the corpus: dense nDCG@10 (ranx) of the torch vectors
   against the ingested index's vectors, each with its own query encoder, ranked the same way (a document
   scores its best chunk).

Prints chunks, seconds, chunks/s, the ratios to the baseline and PASS/FAIL against the targets (full ingest
≥ 2.5× the baseline; nDCG@10 within 0.005 of torch). Model loading and the one-time ONNX export are kept out
of every timing. On a shared machine timings are noisy; both sides of each ratio are measured in the same run.
Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import duckdb
import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"
INGEST_TARGET = 2.5
NDCG_TOLERANCE = 0.005


def load_records(corpus: Path, limit: int | None) -> list[dict[str, str]]:
    """The first ``limit`` records of a BEIR corpus.jsonl."""
    records = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            records.append(json.loads(line))
            if limit is not None and len(records) >= limit:
                break
    return records


def indexed_chunks(index_dir: Path) -> tuple[list[str], list[str], np.ndarray]:
    """Chunk texts, the BEIR ``_id`` of each chunk's record, and the stored vectors, in chunk order."""
    from citeline.store import catalog

    connection = duckdb.connect(str(catalog.db_path(index_dir)), read_only=True)
    try:
        rows = connection.execute(
            "SELECT c.text, coalesce(json_extract_string(d.metadata, '$._citeline.record_id'), "
            "json_extract_string(d.metadata, '$.record_id')), c.vector "
            "FROM chunks c JOIN documents d USING (doc_id) ORDER BY c.doc_id, c.ordinal"
        ).fetchall()
    finally:
        connection.close()
    return [r[0] for r in rows], [r[1] for r in rows], np.array([r[2] for r in rows], dtype=np.float32)


def dense_ndcg(
    chunk_vectors: np.ndarray, chunk_docs: list[str], query_ids: list[str], query_vectors: np.ndarray, qrels: Path
) -> float:
    """nDCG@10 of documents ranked by their best chunk's inner product with each query."""
    import faiss
    from ranx import Qrels, Run, evaluate

    flat = faiss.IndexFlatIP(chunk_vectors.shape[1])
    flat.add(chunk_vectors)
    scores, ids = flat.search(np.ascontiguousarray(query_vectors, dtype=np.float32), 100)
    run: dict[str, dict[str, float]] = {}
    for query_id, row_scores, row_ids in zip(query_ids, scores, ids, strict=True):
        ranked: dict[str, float] = {}
        for score, chunk in zip(row_scores, row_ids, strict=True):
            if chunk >= 0 and chunk_docs[chunk] not in ranked:
                ranked[chunk_docs[chunk]] = float(score)
        run[query_id] = dict(list(ranked.items())[:10])
    judged: dict[str, dict[str, int]] = {}
    for line in qrels.read_text(encoding="utf-8").splitlines()[1:]:
        query_id, doc_id, score = line.split("\t")
        if query_id in run:
            judged.setdefault(query_id, {})[doc_id] = int(score)
    return float(evaluate(Qrels(judged), Run({q: run[q] for q in judged}), "ndcg@10"))


def line(label: str, seconds: float, cpu: float, chunks: int, baseline: float | None) -> None:
    """One timing: wall seconds, chunks/s, ratio to the baseline, and CPU seconds (all threads of the process)."""
    ratio = f"  {baseline / seconds:5.2f}x" if baseline else "  1.00x"
    print(f"{label:<56} {seconds:8.2f} s  {chunks / seconds:7.1f} chunks/s{ratio}  cpu {cpu:7.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=SCIFACT, help="BEIR folder or corpus.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N records")
    parser.add_argument("--best", default="onnx-int8", choices=["torch", "onnx", "onnx-int8"])
    parser.add_argument("--backends", default="onnx,onnx-int8", help="comma-separated; encode-only timings")
    parser.add_argument("--batch-size", type=int, default=32, help="the baseline's batch size")
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    from citeline import Index
    from citeline.model.embedding import SentenceTransformerEmbedder, ensure_onnx_model

    folder = args.corpus if args.corpus.is_dir() else args.corpus.parent
    corpus_file = args.corpus / "corpus.jsonl" if args.corpus.is_dir() else args.corpus
    records = load_records(corpus_file, args.limit)
    backends = [b for b in args.backends.split(",") if b]
    model_path = SentenceTransformerEmbedder().model_path
    for backend in {args.best, *backends} - {"torch"}:
        ensure_onnx_model(model_path, backend)  # one-time costs, kept out of the timings
    warnings.simplefilter("ignore")

    work = Path(tempfile.mkdtemp(prefix="citeline-bench-embed-"))
    try:
        corpus = work / "docs" / "corpus.jsonl"
        corpus.parent.mkdir()
        corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        index = Index.create(work / "index", backend=args.best)
        index.encode([" "])  # load the model: the baseline's load is not timed either
        start, cpu = time.perf_counter(), time.process_time()
        run = index.ingest([corpus])
        ingest_seconds, ingest_cpu = time.perf_counter() - start, time.process_time() - cpu
        texts, chunk_docs, best_vectors = indexed_chunks(index.path)
        print(
            f"{len(records)} documents, {len(texts)} chunks ({run.chunks_embedded} embedded), "
            f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )

        plain = SentenceTransformer(model_path, device="cpu", local_files_only=True)
        plain.encode(texts[:64], batch_size=args.batch_size)  # warm-up
        start, cpu = time.perf_counter(), time.process_time()
        torch_vectors = plain.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
        baseline = time.perf_counter() - start
        line(
            f"plain SentenceTransformer.encode, torch, batch {args.batch_size}",
            baseline,
            time.process_time() - cpu,
            len(texts),
            None,
        )

        for backend in backends:
            embedder = SentenceTransformerEmbedder(backend=backend)
            embedder.encode(texts[:16])  # load and warm up
            start, cpu = time.perf_counter(), time.process_time()
            embedder.encode(texts)
            line(
                f"citeline {backend} encode",
                time.perf_counter() - start,
                time.process_time() - cpu,
                len(texts),
                baseline,
            )
        line(
            f"FULL INGEST, citeline {args.best} (parse+chunk+embed+commit)",
            ingest_seconds,
            ingest_cpu,
            len(texts),
            baseline,
        )
        ratio = baseline / ingest_seconds
        verdict = "PASS" if ratio >= INGEST_TARGET else "FAIL"
        print(f"full ingest speed-up over plain torch encoding: {ratio:.2f}x  {verdict} (target >= {INGEST_TARGET}x)")
        print(f"load average now {os.getloadavg()[0]:.1f}", flush=True)

        queries_file, qrels = folder / "queries.jsonl", folder / "qrels" / "test.tsv"
        if queries_file.exists() and qrels.exists():
            queries = [json.loads(q) for q in queries_file.read_text(encoding="utf-8").splitlines()]
            query_ids = [str(q["_id"]) for q in queries]
            torch_queries = plain.encode([q["text"] for q in queries], normalize_embeddings=True)
            best_queries = np.stack([index.encode_query(q["text"]) for q in queries])
            torch_ndcg = dense_ndcg(torch_vectors, chunk_docs, query_ids, torch_queries, qrels)
            best_ndcg = dense_ndcg(best_vectors, chunk_docs, query_ids, best_queries, qrels)
            delta = best_ndcg - torch_ndcg
            verdict = "PASS" if abs(delta) <= NDCG_TOLERANCE else "FAIL"
            print(
                f"dense nDCG@10: torch {torch_ndcg:.4f}, {args.best} index {best_ndcg:.4f}, "
                f"difference {delta:+.4f}  {verdict} (within {NDCG_TOLERANCE})"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
