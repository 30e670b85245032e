"""torch embedding in batches of a fixed number of texts (sentence-transformers' 32) against batches sized by a
token budget over length-sorted texts (a batch of long chunks holds fewer texts than one of short chunks), issue 33
item 4.

    python bench/experiments/token_batches.py [RECORDS] [ROUNDS] [BUDGETS]

Chunks the first RECORDS SciFact abstracts (default 400) with the index's chunker and embeds them with the torch
backend through ``citeline.ingest.embed_step.embed_chunks`` with a reporter (encode calls of 32 texts sorted by
length, as in a run), the variants alternating for ROUNDS rounds (default 2): ``fixed 32`` passes
``batch_size=32`` (the behaviour before token budgets); ``budget B`` leaves the batch size to the embedder with
``TORCH_TOKEN_BUDGET = B`` (BUDGETS, default 2048,4096). Prints CPU-s and wall s per round, chunks per CPU-second,
and the largest difference of the vectors from ``fixed 32``'s. Run by hand; not part of CI.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from embed_window import (  # run as a script: bench/experiments is on sys.path
    alternate,
    chunk_rows,
    print_times,
    scifact_chunks,
)

from citeline.ingest import embed_step
from citeline.ingest.progress import Reporter
from citeline.model import embedding


def main() -> None:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    budgets = [int(b) for b in (sys.argv[3] if len(sys.argv) > 3 else "2048,4096").split(",")]
    embedder = embedding.SentenceTransformerEmbedder(backend="torch")
    chunks = scifact_chunks(limit, embedder)
    print(f"{limit} records, {len(chunks)} chunks, torch threads on {os.cpu_count()} CPUs", flush=True)
    embedder.encode(["warm up"])

    def fixed(texts: list[str]) -> np.ndarray:
        return embedder.encode(texts, batch_size=32)

    variants = {"fixed 32": (fixed, 0)} | {f"budget {b}": (embedder.encode, b) for b in budgets}
    vectors: dict[str, np.ndarray] = {}

    def run(name: str) -> None:
        encode, budget = variants[name]
        embedding.TORCH_TOKEN_BUDGET = budget
        rows = chunk_rows(chunks, embedder.dimension)
        embed_step.embed_chunks(rows, encode, embedder.dimension, reporter=Reporter())
        vectors[name] = rows.vectors

    times = alternate({name: (lambda name=name: run(name)) for name in variants}, rounds)
    print(f"load {os.getloadavg()[0]:.1f}")
    diffs = {name: f"max |dv| {float(np.abs(v - vectors['fixed 32']).max()):.1e}" for name, v in vectors.items()}
    print_times(times, len(chunks), diffs)


if __name__ == "__main__":
    main()
