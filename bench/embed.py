"""Embedding throughput: plain sentence-transformers (torch) against citeline's backends, on the same chunks.

    python bench/embed.py [--limit 1000] [--corpus ../shared/benchmarks/scifact/corpus.jsonl] [--ingest]

Chunks the first ``--limit`` SciFact documents once with citeline's chunker, then times, in one process and in
turn: ``SentenceTransformer.encode`` on torch (the baseline), and citeline's ``torch``, ``onnx`` and
``onnx-int8`` backends. Prints chunks/s, docs/s and the ratio to the baseline. ``--ingest`` also times a full
``Index.ingest`` of those documents with each ONNX backend (parse, chunk, embed, commit) against the baseline's
encoding time alone. Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "benchmarks" / "scifact" / "corpus.jsonl"


def load_corpus(path: Path, limit: int) -> list[dict[str, str]]:
    """The first ``limit`` records of a BEIR corpus.jsonl."""
    records = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            records.append(json.loads(line))
            if len(records) >= limit:
                break
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--ingest", action="store_true", help="also time full ingests with each ONNX backend")
    args = parser.parse_args()

    from citeline.chunking import Chunker
    from citeline.embedding import SentenceTransformerEmbedder, ensure_onnx_model

    records = load_corpus(args.corpus, args.limit)
    base = SentenceTransformerEmbedder(backend="torch")
    chunker = Chunker(base.tokenizer_file, max_tokens=base.max_seq_length - 2, overlap_tokens=32,
                      model_max_tokens=base.max_seq_length)
    texts = [span.text for record in records for span in chunker.split(record["text"])]
    print(f"{len(records)} documents, {len(texts)} chunks, batch size {args.batch_size}, {os.cpu_count()} cpus")
    for backend in ("onnx", "onnx-int8"):
        ensure_onnx_model(base.model_path, backend)  # exports are one-time costs, kept out of the timings

    from sentence_transformers import SentenceTransformer

    plain = SentenceTransformer(base.model_path, device="cpu", local_files_only=True)
    plain.encode(texts[:64], batch_size=args.batch_size)  # warm-up
    start = time.perf_counter()
    plain.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
    baseline = time.perf_counter() - start
    print(f"{'sentence-transformers torch (baseline)':<40} {baseline:8.2f} s  {len(texts) / baseline:8.1f} chunks/s  "
          f"{len(records) / baseline:8.1f} docs/s  1.00x")

    for backend in ("torch", "onnx", "onnx-int8"):
        embedder = SentenceTransformerEmbedder(backend=backend)
        embedder.encode(texts[:64], batch_size=args.batch_size)
        start = time.perf_counter()
        embedder.encode(texts, batch_size=args.batch_size)
        elapsed = time.perf_counter() - start
        print(f"{'citeline ' + backend:<40} {elapsed:8.2f} s  {len(texts) / elapsed:8.1f} chunks/s  "
              f"{len(records) / elapsed:8.1f} docs/s  {baseline / elapsed:.2f}x")

    if args.ingest:
        from citeline import Index

        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus.jsonl"
            corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
            for backend in ("onnx", "onnx-int8"):
                index = Index.create(Path(tmp) / f"index-{backend}", backend=backend)
                start = time.perf_counter()
                run = index.ingest([corpus])
                elapsed = time.perf_counter() - start
                print(f"{'full ingest, ' + backend:<40} {elapsed:8.2f} s  ({run.chunks_embedded} chunks embedded) "
                      f"{baseline / elapsed:.2f}x the baseline's encoding alone")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
