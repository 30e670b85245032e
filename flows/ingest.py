"""The ingestion flow: :func:`citeline.pipeline.run`, with each step a Prefect task.

The flow holds no logic of its own: it runs the same ``pipeline.run`` as :meth:`citeline.Index.ingest`, with
:class:`PrefectSteps`, whose methods run each step as a task. Tasks only call :mod:`citeline.pipeline` functions;
they take paths and plain data (never a loaded model), so they can run on Dask workers. Work is batched — one task
per few hundred files or chunks — because Prefect's per-task overhead and its server's handling of task bursts make
per-chunk tasks slow.

Parsing and chunk/embed batches fan out to a Dask cluster when ``dask_address`` (a running scheduler) or
``dask_workers`` (a local cluster of that many processes) is given; discovery, planning and the commit stay in the
flow's own process, which holds the index's writer lock for the whole run.

Run it with ``citeline ingest --prefect PATH...`` (``python -m flows.ingest PATH...`` is the same command); serve it
on a schedule with ``citeline schedule`` or ``python -m flows.serve`` (flows/serve.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

# Quiet by default; PREFECT_HOME etc. are the caller's to set (see PREFECT-NOTES.md).
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("DO_NOT_TRACK", "1")

from prefect import Task, flow, task, unmapped
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.context import FlowRunContext
from prefect.states import State
from prefect.task_runners import TaskRunner
from prefect.tasks import exponential_backoff

from citeline import pipeline
from citeline.discovery import Discovery
from citeline.errors import SettingsError
from citeline.index import Index
from citeline.sources import DEFAULT_MAX_FILE_BYTES, Document, SourceFile
from citeline.store.ledger import RunSummary
from citeline.store.rows import ChunkRows

RETRIES = 3  # after 2, 4 and 8 seconds

# OSErrors a retry cannot fix: the user must change something first.
_PERMANENT_OS_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


def transient_failure(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry condition: retry I/O hiccups (network filesystems, timeouts), never bad input or bugs.

    Retrying is safe for every task it is set on: they only read files and the index, and return data.
    """
    try:
        state.result()
    except _PERMANENT_OS_ERRORS:
        return False
    except OSError:  # includes TimeoutError and ConnectionError
        return True
    except Exception:
        return False
    return False


# The decorator of the tasks that are safe to retry.
retrying_task = task(
    cache_policy=NO_CACHE,
    retries=RETRIES,
    retry_delay_seconds=exponential_backoff(backoff_factor=2),
    retry_condition_fn=transient_failure,
)


# One Index (and so one loaded model) per process and index path: Dask workers load the model once and keep
# it across batches and runs; in the flow's own process the flow registers the Index it opened.
_open_indexes: dict[str, Index] = {}


def _index(index_path: str) -> Index:
    index = _open_indexes.get(index_path)
    if index is None:
        index = _open_indexes[index_path] = Index.open(index_path)
    return index


@retrying_task
def discover_task(paths: list[str]) -> Discovery:
    """Find the files to ingest, and what could not be read (retried: network filesystems fail transiently)."""
    return pipeline.Steps().discover(paths)


@retrying_task
def parse_task(files: list[SourceFile], max_file_bytes: int) -> pipeline.ParsedBatch:
    """Parse a batch of files; bad files become reported errors, not task failures."""
    return pipeline.parse_files(files, max_file_bytes=max_file_bytes)


@retrying_task
def plan_task(
    index_path: str, roots: list[str], discovery: Discovery, parsed: pipeline.ParsedBatch
) -> pipeline.Plan:
    """Decide what is new, changed, unchanged and vanished."""
    return pipeline.plan(_index(index_path).path, roots, discovery, parsed)


@retrying_task
def chunk_embed_task(index_path: str, documents: list[Document]) -> tuple[ChunkRows, int, int]:
    """Chunk and embed a batch of documents; returns the rows and (embedded, reused) counts."""
    index = _index(index_path)
    rows = pipeline.chunk_documents(documents, index.chunker)
    embedded, reused = pipeline.embed(index, rows)
    return rows, embedded, reused


@task(cache_policy=NO_CACHE)
def commit_task(index_path: str, plan: pipeline.Plan, rows: ChunkRows, run: RunSummary) -> RunSummary:
    """Publish the new generation and the run's ledger row.

    Not retried: once its transaction has committed, running it again would insert the same documents twice.
    A commit that fails rolls back, so the index stays at its last generation and the next run redoes the work.
    """
    pipeline.commit(_index(index_path).path, plan, rows, run)
    return run


class PrefectSteps(pipeline.Steps):
    """The pipeline's steps as Prefect tasks; the parse and chunk/embed batches are mapped on ``runner``.

    Discovery, plan and commit run in the flow's own process, which holds the writer lock.
    """

    def __init__(self, index_dir: str, runner: TaskRunner[Any]):
        self.index_dir = index_dir
        self.runner = runner

    def discover(self, paths: Sequence[str | os.PathLike[str]]) -> Discovery:
        return discover_task([os.fspath(path) for path in paths])

    def parse(self, file_batches: list[list[SourceFile]], max_file_bytes: int) -> pipeline.ParsedBatch:
        parameters = {"files": file_batches, "max_file_bytes": unmapped(max_file_bytes)}
        return pipeline.ParsedBatch.merge(_map(self.runner, parse_task, parameters))

    def plan(
        self, target: pipeline.Target, roots: list[str], discovery: Discovery, parsed: pipeline.ParsedBatch
    ) -> pipeline.Plan:
        return plan_task(self.index_dir, roots, discovery, parsed)

    def chunk_embed(
        self, target: pipeline.Target, document_batches: list[list[Document]], progress: bool
    ) -> list[pipeline.Embedded]:
        parameters = {"index_path": unmapped(self.index_dir), "documents": document_batches}
        return _map(self.runner, chunk_embed_task, parameters)

    def commit(self, target: pipeline.Target, plan: pipeline.Plan, rows: ChunkRows, run: RunSummary) -> RunSummary:
        return commit_task(self.index_dir, plan, rows, run)


def dask_task_runner(dask_address: str | None = None, dask_workers: int | None = None) -> TaskRunner[Any] | None:
    """The Dask task runner for a scheduler address or a local cluster of ``dask_workers`` processes, or None.

    Local workers are processes with one thread each (the model is not thread-parallel; each worker loads it
    once); distributed limits their BLAS/OpenMP threads to one by default.
    """
    if dask_address and dask_workers:
        raise SettingsError("give either dask_address (an existing cluster) or dask_workers (a local one), not both")
    if dask_workers is not None and dask_workers < 1:
        raise SettingsError(f"dask_workers must be at least 1, not {dask_workers}")
    if not dask_address and not dask_workers:
        return None
    from prefect_dask import DaskTaskRunner  # imported only when asked for: distributed is slow to import

    if dask_address:
        return DaskTaskRunner(address=dask_address)
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={"n_workers": dask_workers, "threads_per_worker": 1, "processes": True},
    )


@contextlib.contextmanager
def _fan_out(runner: TaskRunner[Any] | None) -> Iterator[TaskRunner[Any]]:
    # The task runner for the mapped batches. A flow has one task runner, but plan and commit must run here,
    # in the process holding the writer lock; so the batches go through a started Dask runner's map (what
    # Task.map calls on the flow's runner) and everything else through the flow's own runner.
    if runner is None:
        context = FlowRunContext.get()
        assert context is not None and context.task_runner is not None, "only called inside the flow"
        yield context.task_runner
        return
    # Prefect's log handler would print the cluster's start-up and shutdown chatter (dozens of INFO lines).
    logging.getLogger("distributed").setLevel(os.environ.get("PREFECT_LOGGING_LEVEL", "WARNING").upper())
    with runner:
        yield runner


def _map(runner: TaskRunner[Any], batch_task: Task[..., Any], parameters: dict[str, Any]) -> list[Any]:
    # One task run per batch on ``runner``; the results in order (raises if a batch failed for good).
    return list(runner.map(batch_task, parameters).result())


@flow(name="citeline-ingest", log_prints=True)
def ingest_flow(
    paths: list[str],
    index_path: str = "index",
    model: str | None = None,
    backend: str | None = None,
    max_tokens: int | None = None,
    overlap_tokens: int | None = None,
    vector_index: str | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    wait: float | None = None,
    dask_address: str | None = None,
    dask_workers: int | None = None,
    files_per_batch: int = pipeline.FILES_PER_BATCH,
    chunks_per_batch: int = pipeline.CHUNKS_PER_BATCH,
    allow_removals: bool = False,
    removal_threshold: float = pipeline.DEFAULT_REMOVAL_THRESHOLD,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Bring the index at ``index_path`` up to date with ``paths``; returns the run's ledger row.

    ``vector_index`` is the vector index kind of a new index (auto, flat, ivf, hnsw; see ``citeline.vectors``).
    ``wait`` bounds the seconds to wait for another writer (default: as long as it takes). ``dask_address``
    (``tcp://host:8786``) or ``dask_workers`` (a local cluster) spread parsing and embedding over Dask
    workers, which must see ``paths`` and ``index_path`` at the same locations. ``files_per_batch`` and
    ``chunks_per_batch`` size the mapped tasks (about 1,000 characters a chunk). A root that comes back empty,
    or would lose more than ``removal_threshold`` of its documents, fails the flow run with
    :class:`citeline.RemovalRefusedError` (recorded in the ledger as refused) unless ``allow_removals``;
    ``dry_run`` returns what the run would do and writes nothing.
    """
    dask_runner = dask_task_runner(dask_address, dask_workers)  # bad settings fail before the index is touched
    index = Index.create(index_path, model=model, backend=backend, max_tokens=max_tokens,
                         overlap_tokens=overlap_tokens, vector_index=vector_index)
    # Tasks get the absolute path (Dask workers may start elsewhere); those that run in this process use this
    # Index, which for a new index has loaded its model already.
    index_dir = str(index.path.resolve())
    _open_indexes[index_dir] = index
    options = pipeline.Options(max_file_bytes=max_file_bytes, wait=wait, files_per_batch=files_per_batch,
                               chunks_per_batch=chunks_per_batch, allow_removals=allow_removals,
                               removal_threshold=removal_threshold, dry_run=dry_run)
    with _fan_out(dask_runner) as fan_out:
        run = pipeline.run(index, paths, options, PrefectSteps(index_dir, fan_out))
    create_markdown_artifact(key="ingest-report", markdown=run.to_markdown(), description="citeline run")
    return run.to_dict()


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.ingest PATH... [options]``: the same command as ``citeline ingest --prefect``."""
    from citeline.cli import cli

    cli.main(["ingest", "--prefect", *(sys.argv[1:] if argv is None else argv)], prog_name="python -m flows.ingest")


if __name__ == "__main__":
    main()
