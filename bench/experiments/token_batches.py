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
import resource
import sys
import time

import numpy as np
from embed_window import chunk_rows, scifact_chunks  # run as a script: bench/experiments is on sys.path

from citeline.ingest import embed_step
from citeline.ingest.progress import Reporter
from citeline.model import embedding


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    vectors: dict[str, np.ndarray] = {}
    for round_ in range(rounds):
        for name in list(variants) if round_ % 2 == 0 else list(reversed(variants)):
            encode, budget = variants[name]
            embedding.TORCH_TOKEN_BUDGET = budget
            rows = chunk_rows(chunks, embedder.dimension)
            before, wall = cpu(), time.perf_counter()
            embed_step.embed_chunks(rows, encode, embedder.dimension, reporter=Reporter())
            times[name].append((cpu() - before, time.perf_counter() - wall))
            vectors[name] = rows.vectors
    print(f"load {os.getloadavg()[0]:.1f}")
    for name, runs in times.items():
        rate = len(chunks) * len(runs) / sum(c for c, _ in runs)
        diff = float(np.abs(vectors[name] - vectors["fixed 32"]).max())
        print(
            f"{name:12s} CPU-s "
            + " ".join(f"{c:6.1f}" for c, _ in runs)
            + "  wall s "
            + " ".join(f"{w:6.1f}" for _, w in runs)
            + f"  {rate:5.1f} chunks/CPU-s  max |dv| {diff:.1e}"
        )


if __name__ == "__main__":
    main()
