"""CPU cost of embedding a batch's texts in windows of ``EMBED_WINDOW`` (document order, sorted by length inside
each window: what lets a Ctrl-C commit whole documents) against one sort of the whole batch by length.

    python bench/experiments/embed_window.py [RECORDS] [BACKEND]

Chunks the first RECORDS SciFact abstracts (default 800) with the index's chunker and embeds them through
``citeline.ingest.embed_step.embed_chunks`` (32 texts per encode call, as in a run) twice per variant,
alternating; prints CPU and wall seconds of each. Run by hand; not part of CI.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import islice
from pathlib import Path

from citeline.index import Index
from citeline.ingest import embed_step
from citeline.ingest.progress import Reporter
from citeline.model.embedding import SentenceTransformerEmbedder
from citeline.sources.parsers import text_hash
from citeline.store.rows import ChunkRows

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "scifact" / "corpus.jsonl"


def scifact_chunks(limit: int, embedder: SentenceTransformerEmbedder) -> list[str]:
    """The chunk texts of the first ``limit`` SciFact abstracts, cut by the chunker of a new index."""
    with tempfile.TemporaryDirectory() as folder:
        index = Index.create(Path(folder) / "ix", embedder=embedder)
        with CORPUS.open() as lines:
            records = [json.loads(line) for line in islice(lines, limit)]
        spans = index.chunker.split_many([(f"{r.get('title', '')}\n\n{r['text']}", False) for r in records])
    return [span.text for document in spans for span in document]


def chunk_rows(chunks: list[str], dimension: int) -> ChunkRows:
    """Rows holding ``chunks`` (one document), ready for ``embed_chunks``."""
    rows = ChunkRows.empty(dimension)
    rows.text.extend(chunks)
    rows.text_hash.extend(text_hash(chunk) for chunk in chunks)
    for name, value in (("chunk_id", None), ("doc_id", "d"), ("ordinal", 0), ("char_start", 0), ("char_end", 0)):
        getattr(rows, name).extend(range(len(chunks)) if value is None else [value] * len(chunks))
    rows.page.extend([None] * len(chunks))
    return rows


def alternate(variants: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[tuple[float, float]]]:
    """Run each variant once per round, in reverse order every other round; CPU-s and wall s of each run."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for round_ in range(rounds):
        for name in list(variants) if round_ % 2 == 0 else list(reversed(variants)):
            before, wall = process_cpu(), time.perf_counter()
            variants[name]()
            times[name].append((process_cpu() - before, time.perf_counter() - wall))
    return times


def print_times(times: dict[str, list[tuple[float, float]]], chunks: int, notes: dict[str, str] | None = None) -> None:
    """One line per variant: CPU-s and wall s of each round, chunks per CPU-second and its note."""
    width = max(len(name) for name in times)
    for name, runs in times.items():
        rate = chunks * len(runs) / sum(c for c, _ in runs)
        print(
            f"{name:{width}s} CPU-s "
            + " ".join(f"{c:6.2f}" for c, _ in runs)
            + "  wall s "
            + " ".join(f"{w:6.2f}" for _, w in runs)
            + f"  {rate:5.1f} chunks/CPU-s  {(notes or {}).get(name, '')}"
        )


def process_cpu() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 800
    embedder = SentenceTransformerEmbedder(backend=sys.argv[2] if len(sys.argv) > 2 else "onnx-int8")
    chunks = scifact_chunks(limit, embedder)
    print(f"{limit} records, {len(chunks)} chunks", flush=True)
    embedder.encode(["warm up"])
    for window in (embed_step.EMBED_WINDOW, 10**9, embed_step.EMBED_WINDOW, 10**9):
        embed_step.EMBED_WINDOW = window
        rows = chunk_rows(chunks, embedder.dimension)
        before, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        embed_step.embed_chunks(rows, embedder.encode, embedder.dimension, reporter=Reporter())
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        shown = "whole batch" if window >= 10**9 else f"window {window}"
        print(f"{shown}: {cpu:.1f} CPU-s, {time.perf_counter() - wall:.1f} s wall", flush=True)


if __name__ == "__main__":
    main()
