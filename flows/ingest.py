"""The ingestion flow: discover ─► parse ─► plan ─► chunk ─► embed ─► commit, each step a Prefect task.

Tasks only call :class:`citeline.Index` and :mod:`citeline.ingest` functions; they take paths and plain data
(never a loaded model), so they can run on Dask workers. Work is batched — one task per few hundred files or
chunks — because Prefect's per-task overhead and its server's handling of task bursts make per-chunk tasks slow.

Run it with ``citeline ingest --prefect PATH...`` or ``python -m flows.ingest PATH... --index DIR``.
"""

from __future__ import annotations

import argparse
import os
from functools import lru_cache
from typing import Any

# Quiet by default; PREFECT_HOME etc. are the caller's to set (see PREFECT-NOTES.md).
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("DO_NOT_TRACK", "1")

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from citeline import ingest, store
from citeline.index import Index
from citeline.sources import DEFAULT_MAX_FILE_BYTES

FILES_PER_TASK = 500
CHUNKS_PER_TASK = 2000


@lru_cache(maxsize=4)
def _index(index_path: str) -> Index:
    # One Index (and so one loaded model) per worker process and index.
    return Index.open(index_path)


@task(cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2)
def discover_task(paths: list[str]) -> list[ingest.SourceFile]:
    """List the files to ingest (retried: network filesystems fail transiently)."""
    return ingest.discover(paths)


@task(cache_policy=NO_CACHE)
def parse_task(files: list[ingest.SourceFile], max_file_bytes: int) -> ingest.ParsedBatch:
    """Parse a batch of files; bad files become reported errors, not task failures."""
    return ingest.parse_files(files, max_file_bytes=max_file_bytes)


@task(cache_policy=NO_CACHE)
def plan_task(
    index_path: str, roots: list[str], files: list[ingest.SourceFile], parsed: ingest.ParsedBatch
) -> ingest.Plan:
    """Decide what is new, changed, unchanged and vanished."""
    return _index(index_path).plan(roots, files, parsed)


@task(cache_policy=NO_CACHE)
def chunk_embed_task(index_path: str, documents: list[ingest.Document]) -> tuple[store.ChunkRows, int, int]:
    """Chunk and embed a batch of documents; returns the rows and (embedded, reused) counts."""
    index = _index(index_path)
    rows = index.chunk(documents)
    embedded, reused = index.embed(rows)
    return rows, embedded, reused


@task(cache_policy=NO_CACHE)
def commit_task(
    index_path: str, plan: ingest.Plan, rows: store.ChunkRows, run: ingest.RunSummary
) -> ingest.RunSummary:
    """Publish the new generation and the run's ledger row."""
    _index(index_path).commit(plan, rows, run)
    return run


def _batches(items: list[Any], size: int) -> list[list[Any]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _chunk_budget(documents: list[ingest.Document]) -> list[list[ingest.Document]]:
    # Batch documents by text size (~1,000 characters a chunk) so embedding tasks get similar work.
    batches: list[list[ingest.Document]] = [[]]
    size = 0
    for document in documents:
        if size >= CHUNKS_PER_TASK * 1000 and batches[-1]:
            batches.append([])
            size = 0
        batches[-1].append(document)
        size += len(document.text)
    return [batch for batch in batches if batch]


@flow(name="citeline-ingest", log_prints=True)
def ingest_flow(
    paths: list[str],
    index_path: str = "index",
    model: str | None = None,
    backend: str | None = None,
    max_tokens: int | None = None,
    overlap_tokens: int | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    wait: float | None = None,
) -> dict[str, Any]:
    """Bring the index at ``index_path`` up to date with ``paths``; returns the run's ledger row."""
    index = Index.create(index_path, model=model, backend=backend, max_tokens=max_tokens,
                         overlap_tokens=overlap_tokens)
    run_id, started_at = ingest.new_run_id(), ingest.utc_now()
    roots = ingest.resolve_roots(paths)
    with store.writer_lock(index.path, wait=wait):
        try:
            files = discover_task(paths)
            parsed = ingest.ParsedBatch.merge(
                parse_task.map(_batches(files, FILES_PER_TASK), max_file_bytes).result()
            )
            plan = plan_task(str(index.path), roots, files, parsed)
            outputs = chunk_embed_task.map(str(index.path), _chunk_budget(plan.to_index)).result()
            rows = store.ChunkRows.concat([rows for rows, _, _ in outputs], index.dimension)
            run = ingest.summarize(run_id, started_at, plan)
            run.chunks_embedded = sum(embedded for _, embedded, _ in outputs)
            run.chunks_reused = sum(reused for _, _, reused in outputs)
            run = commit_task(str(index.path), plan, rows, run)
        except BaseException as exc:
            index.record_failure(run_id, started_at, roots, exc)
            raise
    create_markdown_artifact(key="ingest-report", markdown=ingest.run_markdown(run), description="citeline run")
    return run.to_dict()


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.ingest PATH... [--index DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m flows.ingest", description=ingest_flow.__doc__)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--index", default="index")
    parser.add_argument("--model", default=None, help="default: the index's, or all-MiniLM-L6-v2")
    parser.add_argument("--backend", default=None, choices=["torch", "onnx", "onnx-int8"])
    args = parser.parse_args(argv)
    print(ingest_flow(paths=args.paths, index_path=args.index, model=args.model, backend=args.backend))


if __name__ == "__main__":
    main()
