"""Incremental ingestion on SciFact: first run, unchanged re-run, 1% edited + 1% deleted, and a fresh build.

    python bench/ingest.py [--backend onnx-int8] [--limit N] [--corpus ../shared/benchmarks/scifact/corpus.jsonl]

Copies the corpus to a temporary folder, ingests it with the real model, re-runs it unchanged, then edits 1% of
the records and deletes another 1% and re-runs, printing each pass's wall time and its ratio to the first run
(targets: unchanged < 3%, 1% edits < 5%). Finally it builds a fresh index of the final file and checks that both
indexes hold the same chunk set and return the same top-10 for every query. Times are of ``Index.ingest`` in one
process (no Prefect: its fixed start-up is reported in PREFECT-NOTES.md, not part of the work). Run by hand.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import duckdb

from citeline import Index
from citeline.store import catalog

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"


def chunk_set(index: Index) -> set[tuple[str, int, int, int, str]]:
    """Every chunk as (doc, ordinal, start, end, text)."""
    connection = duckdb.connect(str(catalog.db_path(index.path)), read_only=True)
    try:
        return set(connection.execute("SELECT doc_id, ordinal, char_start, char_end, text FROM chunks").fetchall())
    finally:
        connection.close()


def timed(label: str, index: Index, corpus: Path, first: float | None, target: float | None) -> float:
    start = time.perf_counter()
    run = index.ingest([corpus])
    elapsed = time.perf_counter() - start
    ratio = f"  {elapsed / first:6.2%} of the first run" if first else ""
    verdict = ""
    if first and target:
        verdict = "  PASS" if elapsed / first < target else f"  FAIL (target < {target:.0%})"
    print(
        f"{label:<28} {elapsed:8.2f} s  +{run.added} ~{run.updated} ={run.unchanged} -{run.removed} "
        f"embedded {run.chunks_embedded} reused {run.chunks_reused}{ratio}{verdict}",
        flush=True,
    )
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=SCIFACT / "corpus.jsonl")
    parser.add_argument("--queries", type=Path, default=SCIFACT / "queries.jsonl")
    parser.add_argument("--backend", default="onnx-int8", choices=["torch", "onnx", "onnx-int8"])
    parser.add_argument("--limit", type=int, default=None, help="use only the first N records")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    records = [json.loads(line) for line in args.corpus.open(encoding="utf-8")][: args.limit]
    queries = [json.loads(line)["text"] for line in args.queries.open(encoding="utf-8")]
    work = Path(tempfile.mkdtemp(prefix="citeline-bench-ingest-"))
    try:
        corpus = work / "docs" / "corpus.jsonl"
        corpus.parent.mkdir()
        corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        print(f"{len(records)} records, backend {args.backend}")
        index = Index.create(work / "incremental", backend=args.backend)
        index.prepare_queries()  # the one-time ONNX export is not ingestion work
        first = timed("first run", index, corpus, None, None)
        timed("unchanged re-run", index, corpus, first, 0.03)

        rng = random.Random(args.seed)
        count = max(1, len(records) // 100)
        chosen = rng.sample(range(len(records)), 2 * count)
        for i in chosen[:count]:
            records[i]["text"] = records[i]["text"] + " This sentence was added by the benchmark's edit pass."
        deleted = set(chosen[count:])
        records = [r for i, r in enumerate(records) if i not in deleted]
        corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        timed(f"{count} edited, {count} deleted", index, corpus, first, 0.05)

        fresh = Index.create(work / "fresh", backend=args.backend)
        timed("fresh build of final files", fresh, corpus, None, None)
        same_chunks = chunk_set(index) == chunk_set(fresh)
        differing = sum(
            [r.chunk_id for r in index.search(q, k=10)] != [r.chunk_id for r in fresh.search(q, k=10)] for q in queries
        )
        print(f"same chunk set as a fresh build: {'PASS' if same_chunks else 'FAIL'}")
        print(
            f"same top-10 for all {len(queries)} queries: {'PASS' if differing == 0 else f'FAIL ({differing} differ)'}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
