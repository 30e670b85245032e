"""The ingestion flow: :func:`citeline.ingest.pipeline.run`, with each step a Prefect task.

The flow holds no logic of its own: it runs the same ``pipeline.run`` as :meth:`citeline.Index.ingest`, with
:class:`PrefectSteps`, whose methods run each step as a task, and then the same :meth:`citeline.Index.prepare_queries`
(searches start fast). Tasks only call :mod:`citeline.ingest.pipeline` functions; they take paths and plain data (never
a
loaded model), so they can run on Dask workers. Work is batched — one task per few hundred files or chunks — because
Prefect's per-task overhead and its server's handling of task bursts make per-chunk tasks slow.

What an operator sees in the Prefect UI: a flow run named after the index and its roots; task runs named by stage
and batch (``chunk+embed [batch 3/12, 412 documents]``); the run logger's INFO lines per stage (files discovered,
parsed, failed with reasons, chunks made, embedded, reused, documents removed, seconds); a progress artifact
(``<key>-progress``) updated while the run goes; the report (``<key>-report``) and a table of failed files
(``<key>-failures``), where ``<key>`` is :func:`index_key` of the index path. A run that waits for another writer
says so in its log and in its state message, with the holder's pid and start time.

Parsing and chunk/embed batches fan out to a Dask cluster when ``dask_address`` (a running scheduler) or
``dask_workers`` (a local cluster of that many processes) is given; discovery, planning and the commit stay in the
flow's own process, which holds the index's writer lock for the whole run.

The run is :meth:`citeline.Index.run` with the index's own committer, given the flow's placement
(``citeline.ingest.options.Placement``), so the flow never asks which kind of index it writes: a sharded root
(``shards``, or an index with a ``shards.json``) has the same discover and parse tasks as a plain run (on Dask, the
workers parse; keys only come back), each shard's run a task (citeline/orchestration/shards.py); a failed shard
fails the flow run with one line naming it.

Run it with ``citeline ingest --prefect PATH...`` (``python -m flows.ingest PATH...`` is the same command); serve it
on a schedule with ``citeline schedule`` or ``python -m flows.serve`` (flows/serve.py).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# PREFECT_HOME etc. are the caller's to set (see PREFECT-NOTES.md). Log level: Prefect's default (INFO), so the
# UI shows each run's lines; `citeline ingest --prefect` keeps the console quiet unless -v.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("DO_NOT_TRACK", "1")

from prefect import Task, flow, get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.context import FlowRunContext
from prefect.exceptions import TerminationSignal
from prefect.futures import PrefectFutureList, as_completed
from prefect.states import Completed, State
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.tasks import exponential_backoff

from citeline.errors import PartialRunError, SettingsError
from citeline.index import Index, index_for_run
from citeline.ingest import pipeline, stopping
from citeline.ingest.options import IndexSettings, IngestOptions, Placement
from citeline.orchestration.blocks import block_storage, task_storage
from citeline.orchestration.parameters import IngestParameters
from citeline.orchestration.reporting import (
    BatchReporter,
    FlowReporter,
    drawing_terminal_bar,
    index_key,
    report_artifacts,
    wants_terminal_bar,
)
from citeline.orchestration.shards import ShardTasks
from citeline.sharding.runs import LOCAL_CLUSTER
from citeline.sources.discovery import Discovery
from citeline.sources.parsers import SourceFile
from citeline.sources.selection import Selection
from citeline.store.ledger import RunSummary

# Prefect raises TerminationSignal on SIGTERM (a cancellation, docker stop): a run stops on it as on Ctrl-C, keeping
# what it embedded whole, then raises it again for Prefect to end the flow run (Cancelled, or Crashed).
stopping.register_stop_exception(TerminationSignal)

RETRIES = 3  # after 2, 4 and 8 seconds

#: Timeouts: a hung network read must not hang a run forever (a timed-out task is retried like any I/O error).
#: Only the tasks that run on the flow's main thread get one: there Prefect interrupts a blocking call, while in
#: the task runner's worker threads it cannot (and logs a warning per task run saying so). The mapped parse and
#: chunk+embed batches are bounded by the flow's timeout, which includes the wait for another writer (bound
#: that per run with `wait`). A batch of chunks takes minutes with torch on 2 cores
#: (docs/performance.md#choices-measured-in-the-code).
DISCOVER_TIMEOUT = 30 * 60
PLAN_TIMEOUT = 30 * 60
COMMIT_TIMEOUT = 60 * 60
PREPARE_TIMEOUT = 30 * 60
FLOW_TIMEOUT = 12 * 60 * 60


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
    except OSError:  # includes TimeoutError (a task's own timeout too) and ConnectionError
        return True
    except Exception:
        return False
    return False


def _retrying(**options: Any) -> Any:
    # The decorator of the tasks that are safe to retry.
    return task(
        cache_policy=NO_CACHE,
        retries=RETRIES,
        retry_delay_seconds=exponential_backoff(backoff_factor=2),
        retry_condition_fn=transient_failure,
        **options,
    )


def _task_parameters() -> dict[str, Any]:
    from prefect.runtime import task_run

    return dict(task_run.parameters)


def _batch_name(stage: str, unit: str) -> Any:
    def name() -> str:
        parameters = _task_parameters()
        work = parameters.get("work")
        items = len(parameters.get("files") or []) if work is None else work.documents_planned
        return f"{stage} [batch {parameters['batch']}/{parameters['batches']}, {items:,} {unit}]"

    return name


def _flow_run_name() -> str:
    from prefect.runtime import flow_run

    parameters = flow_run.parameters
    roots = ", ".join(parameters.get("paths") or [])
    name = f"{parameters.get('index_path', 'index')} <- {roots}"
    return name if len(name) <= 120 else name[:117] + "..."


# One Index (and so one loaded model) per process and index path: Dask workers load the model once and keep
# it across batches and runs; in the flow's own process the flow registers the Index it opened.
_open_indexes: dict[str, Index] = {}


def _index(index_path: str) -> Index:
    index = _open_indexes.get(index_path)
    if index is None:
        index = _open_indexes[index_path] = Index.open(index_path)
    return index


@_retrying(
    timeout_seconds=DISCOVER_TIMEOUT, task_run_name=lambda: f"discover [{', '.join(_task_parameters()['paths'])}]"
)
def discover_task(paths: list[str], selection: Selection | None = None) -> Discovery:
    """Find the files to ingest, and what could not be read (retried: network filesystems fail transiently)."""
    return pipeline.Steps().discover(paths, selection)


@_retrying(task_run_name=_batch_name("parse", "files"))
def parse_task(files: list[SourceFile], max_file_bytes: int, batch: int = 1, batches: int = 1) -> pipeline.ParsedBatch:
    """Parse a batch of files; bad files become reported errors, not task failures. Only the documents' keys go
    back to the flow (the chunk+embed tasks parse the files of the documents to index again), so the flow's
    process never holds the corpus."""
    with task_storage(files):  # a Dask worker's credentials from the flow's storage_block (blocks.py)
        parsed = pipeline.parse_files(files, max_file_bytes=max_file_bytes, hold_chars=0)  # keys only, as they stream
    get_run_logger().info(pipeline.parsed_counts(len(files), parsed))
    return parsed.without_texts()


@_retrying(timeout_seconds=PLAN_TIMEOUT, task_run_name="plan")
def plan_task(index_path: str, roots: list[str], discovery: Discovery, parsed: pipeline.ParsedBatch) -> pipeline.Plan:
    """Decide what is new, changed, unchanged and vanished."""
    return pipeline.plan(_index(index_path).path, roots, discovery, parsed)


@_retrying(task_run_name=_batch_name("chunk+embed", "documents"))
def chunk_embed_task(
    index_path: str,
    work: pipeline.Work,
    max_file_bytes: int,
    batch: int = 1,
    batches: int = 1,
    flow_reporter: FlowReporter | None = None,
) -> pipeline.Embedded:
    """Parse again the files of a batch's documents, chunk and embed them; returns the documents, rows and counts.
    ``flow_reporter``: the flow's, when the batch runs in the flow's process, to report its chunks as they go."""
    started = time.monotonic()
    index = _index(index_path)
    with task_storage(work.files):
        done = pipeline.load_documents(work, max_file_bytes)
    done.rows = pipeline.chunk_documents(done.documents, index.chunker)
    reporter = BatchReporter(flow_reporter, batch)
    try:
        done.embedded, done.reused = pipeline.embed(index, done.rows, reporter=reporter)
    except pipeline.EmbedInterrupted as stop:  # the flow run was stopped (SIGTERM: a cancellation, docker stop)
        done = pipeline.embedded_whole(done.documents, done.rows, stop, index, done.errors)
        get_run_logger().warning(f"batch {batch}/{batches} stopped: {len(done.documents)} documents embedded whole")
        return done
    finally:
        reporter.finish()
    get_run_logger().info(
        f"batch {batch}/{batches}: {len(done.documents)} documents, {len(done.rows)} chunks made, {done.embedded} "
        f"embedded, {done.reused} reused in {time.monotonic() - started:.1f} s"
    )
    return done


@task(cache_policy=NO_CACHE, timeout_seconds=COMMIT_TIMEOUT, task_run_name="commit")
def commit_task(index_path: str, batch: pipeline.CommitBatch, run: RunSummary) -> RunSummary:
    """Publish one new generation of the run and its ledger row.

    Not retried: once its transaction has committed, running it again would insert the same documents twice.
    A commit that fails rolls back, so the index stays at the run's last commit and the next run redoes the rest.
    """
    run.generation = pipeline.commit_batch(_index(index_path).path, batch, run)
    return run


@task(cache_policy=NO_CACHE, timeout_seconds=PREPARE_TIMEOUT, task_run_name="prepare query model")
def prepare_queries_task(index_path: str) -> None:
    """Export the ONNX query model (once per model), as :meth:`Index.ingest` does, so searches start fast."""
    logger = get_run_logger()
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            _index(index_path).prepare_queries()
        except Exception as exc:  # the index is committed; a slow first search is no reason to fail the run
            warnings.warn(f"could not prepare the query model ({exc}); searches will start slowly", stacklevel=1)
    for warning in caught:
        logger.warning(str(warning.message))
    logger.info(f"query model ready in {time.monotonic() - started:.1f} s")


class PrefectSteps(pipeline.Steps):
    """The pipeline's steps as Prefect tasks; the parse and chunk/embed batches are mapped on ``runner``.

    Discovery, plan and commit run in the flow's own process, which holds the writer lock.
    """

    def __init__(self, index_dir: str, runner: TaskRunner[Any]):
        self.index_dir = index_dir
        self.runner = runner

    def discover(self, paths: Sequence[str | os.PathLike[str]], selection: Selection | None = None) -> Discovery:
        return discover_task([os.fspath(path) for path in paths], selection)

    def parse(
        self, file_batches: list[list[SourceFile]], max_file_bytes: int, hold_chars: int | None = None
    ) -> Iterator[pipeline.ParsedBatch]:
        # The tasks send back keys only (parse_task), whatever ``hold_chars``.
        parameters = {
            "files": file_batches,
            "max_file_bytes": unmapped(max_file_bytes),
            "batch": list(range(1, len(file_batches) + 1)),
            "batches": unmapped(len(file_batches)),
        }
        sizes = [len(files) for files in file_batches]
        yield from self._map(parse_task, parameters, sizes)

    def plan(
        self, index: pipeline.WrittenIndex, roots: list[str], discovery: Discovery, parsed: pipeline.ParsedBatch
    ) -> pipeline.Plan:
        return plan_task(self.index_dir, roots, discovery, parsed)

    def chunk_embed(self, index: pipeline.WrittenIndex, work: list[pipeline.Work], max_file_bytes: int) -> list[Any]:
        # One stage for parsing again, chunking and embedding, counted in thousandths of a batch.
        self.reporter.stage("embed", 1000 * len(work))
        parameters = {
            "index_path": unmapped(self.index_dir),
            "work": work,
            "max_file_bytes": unmapped(max_file_bytes),
            "batch": list(range(1, len(work) + 1)),
            "batches": unmapped(len(work)),
            # The batches report their chunks as they go to the flow's reporter when they run in this process (its
            # threads); one on a Dask worker cannot reach it (and a reporter, with its locks, does not pickle).
            "flow_reporter": unmapped(self._live_reporter()),
        }
        futures = self.runner.map(chunk_embed_task, parameters)
        try:
            return self._results(futures, None)
        except BaseException as exc:  # SIGTERM (Prefect's TerminationSignal) or Ctrl-C while the batches run
            if not stopping.is_stop(exc):
                raise
            stopping.request_stop()  # the batches running stop at their next encode call, keeping what is whole
            raise pipeline.RunInterrupted(_finished(futures), exc) from None

    def commit(self, index: pipeline.WrittenIndex, batch: pipeline.CommitBatch, run: RunSummary) -> RunSummary:
        return commit_task(self.index_dir, batch, run)

    def _live_reporter(self) -> FlowReporter | None:
        # The flow's reporter if the mapped batches run in this process (the flow's thread runner), not on Dask.
        in_process = isinstance(self.runner, ThreadPoolTaskRunner)
        return self.reporter if in_process and isinstance(self.reporter, FlowReporter) else None

    def _map(self, batch_task: Task[..., Any], parameters: dict[str, Any], sizes: list[int] | None) -> list[Any]:
        # One task run per batch on the runner; results in order (raises if a batch failed for good).
        return self._results(self.runner.map(batch_task, parameters), sizes)

    def _results(self, futures: PrefectFutureList[Any], sizes: list[int] | None) -> list[Any]:
        # The mapped batches' results in order. Progress advances as each batch finishes (by its size, or as a
        # whole batch of the chunk+embed stage).
        position = {future.task_run_id: number for number, future in enumerate(futures)}
        for future in as_completed(list(futures)):
            number = position[future.task_run_id]  # finished, or failed for good: result() below raises then
            if sizes is None and isinstance(self.reporter, FlowReporter):
                self.reporter.batch_progress(number + 1, 1.0)
                if future.state.is_completed():  # its chunks, for the progress lines (a Dask batch's, at its end)
                    self.reporter.batch_embedded(number + 1, future.result().embedded)
            elif sizes is not None:
                self.reporter.advance(sizes[number])
        return list(futures.result())


#: Seconds a stopped flow run waits for its running chunk+embed batches to hand back what they embedded whole (they
#: stop at their next encode call, a few seconds at most; Dask workers, which a stop does not reach, may not).
STOP_WAIT = 4.0


def _finished(futures: PrefectFutureList[Any]) -> list[pipeline.Embedded]:
    # The results of the batches that end within STOP_WAIT seconds, whole or stopped; the others are left.
    deadline = time.monotonic() + STOP_WAIT
    done = []
    for future in futures:
        future.wait(max(0.0, deadline - time.monotonic()))
        if future.state.is_completed():
            done.append(future.result())
    return done


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
        cluster_kwargs={"n_workers": dask_workers, "processes": True, **LOCAL_CLUSTER},
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
    # Prefect's log handler would send the cluster's start-up and shutdown chatter (dozens of INFO lines).
    logging.getLogger("distributed").setLevel(logging.WARNING)
    with runner:
        yield runner


def _register(index_dir: str, index: Index, key: str, every: float) -> FlowReporter:
    # The flow's Index, for tasks in this process, and the run's reporter (the steps hand it to the batches that run
    # here). A module-level function, not globals named in the flow's body: Dask pickles the flow function by value
    # with the globals it names.
    _open_indexes[index_dir] = index
    return FlowReporter(key, index_dir, bar=wants_terminal_bar(), every=every)


def _declared(function: Any) -> Any:
    # The flow's signature and docstring Args from IngestParameters (so from the declarations of the index settings
    # and run options): Prefect builds the UI's run form from them, each field with its type, default, bounds,
    # choices and description, and validates a run's parameters against them.
    from typing import Annotated

    parameters = [inspect.Parameter("paths", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=list[str])]
    for name, field in IngestParameters.model_fields.items():
        if name != "paths":
            annotation = Annotated[field.annotation, field]  # type: ignore[name-defined]  # bounds reach the schema
            keyword = inspect.Parameter.KEYWORD_ONLY  # the function takes them as **parameters
            parameters.append(inspect.Parameter(name, keyword, default=field.default, annotation=annotation))
    function.__signature__ = inspect.Signature(parameters, return_annotation=dict[str, Any])
    function.__doc__ = (
        (function.__doc__ or "").rstrip()
        + "\n\nArgs:\n"
        + "".join(f"    {name}: {field.description}\n" for name, field in IngestParameters.model_fields.items())
    )
    return function


# The function keeps the flow's name: a served deployment's entrypoint is this module's attribute of that name.
@flow(name="citeline-ingest", flow_run_name=_flow_run_name, timeout_seconds=FLOW_TIMEOUT, validate_parameters=True)
@_declared
def ingest_flow(paths: list[str], **parameters: Any) -> dict[str, Any]:
    """Bring the index at ``index_path`` up to date with ``paths``; returns the run's ledger row.

    The parameters are :data:`citeline.orchestration.parameters.IngestParameters`' fields: the paths and index, the
    index settings of a new index (:class:`citeline.ingest.options.IndexSettings`: ``model``, ``backend``,
    ``max_tokens``, ``overlap_tokens``, ``vector_index``, ``document_vectors``, ``shards``), the run's options
    (:class:`citeline.ingest.options.IngestOptions`), and where the work runs: ``dask_address``
    (``tcp://host:8786``) or ``dask_workers`` (a local cluster) spread parsing and embedding over Dask workers,
    which must see ``paths`` and ``index_path`` at the same locations; on a sharded root, ``shard_workers`` pins
    shards' tasks to the Dask workers that hold their disks (``{0: "tcp://10.0.0.5:8786"}`` or
    ``"0=ADDRESS,1=NAME"``; ``citeline.sharding.remote``). ``files_per_batch`` and ``chunks_per_batch`` size the
    mapped tasks; ``commit_every`` chunks are committed at a time (a generation each; the run's ledger row says
    ``running`` until the last). A root that comes back empty, or would lose more than ``removal_threshold`` of
    its documents, fails the flow run with :class:`citeline.RemovalRefusedError` (recorded in the ledger as
    refused) unless ``allow_removals``; ``dry_run`` returns what the run would do and writes nothing.

    A partial run (some files failed) logs each failed file at WARNING and ends Completed with a message naming
    the failures (an automation matches ``state.message`` starting with ``partial``), or Failed with
    :class:`citeline.errors.PartialRunError` when ``strict``.
    """
    given = IngestParameters.parse(paths=paths, **parameters).model_dump()
    dask_address, dask_workers, shard_workers = given["dask_address"], given["dask_workers"], given["shard_workers"]
    dask_runner = dask_task_runner(dask_address, dask_workers)  # bad settings fail before the index is touched
    index_path, create = given["index_path"], IndexSettings.pick(given)
    # A dry run where no index exists plans in an empty one in a temporary folder (citeline.index.index_for_run).
    with index_for_run(index_path, dry_run=given["dry_run"], create=Index.create, **create) as index:
        # Tasks get the absolute path (Dask workers may start elsewhere); those that run in this process use this
        # Index, which for a new index has loaded its model already.
        index_dir = str(index.path.resolve())
        key = index_key(str(Path(index_path).resolve()))  # the index asked for, even in a dry run
        reporter = _register(index_dir, index, key, given["progress_every"])
        options = IngestOptions.of(
            **IngestOptions.pick(given),
            reporter=reporter,
            prepare_queries=False,  # its own task below, visible in the UI
        )
        strict_failure: PartialRunError | None = None
        try:
            with block_storage(given["storage_block"]), _fan_out(dask_runner) as fan_out:
                # a sharded root's shards: each shard's run a task (citeline/orchestration/shards.py), sharing this
                # process's model on threads unless on Dask; a plain index has no parts (Index.committer)
                placement = Placement(
                    parallel="threads", dask_address=dask_address, dask_workers=dask_workers,
                    shard_workers=shard_workers,  # checked against the shard count before any work
                    run_jobs=ShardTasks(fan_out, shard_workers),
                )  # fmt: skip
                steps = PrefectSteps(index_dir, fan_out)  # parsed as a plain run is: tasks, keys only
                run = index.run(paths, options, steps, committer=index.committer(steps, placement))
        except PartialRunError as partial:  # strict: the commits stand, the flow run fails naming the files
            run, strict_failure = partial.run, partial
        if run.status != "dry-run":
            prepare_queries_task(index_dir)
        reporter.run_done(run)
        report_artifacts(run, key, index_dir, reporter.seconds, index.status() if run.status != "dry-run" else None)
        if run.status == "partial":
            _warn_failures(run)
        if strict_failure is not None:
            raise strict_failure
        if run.status == "partial":
            return Completed(message=partial_message(run), data=run.to_dict())  # type: ignore[return-value]
        return run.to_dict()


#: Failed files the flow logs at WARNING one line each; the rest are counted (all are in the failures artifact).
WARNED_FAILURES = 100


def _warn_failures(run: RunSummary) -> None:
    logger = get_run_logger()
    for error in run.errors[:WARNED_FAILURES]:
        logger.warning(f"failed {error['path'] or '(run)'}: {error['reason']}")
    if len(run.errors) > WARNED_FAILURES:
        logger.warning(f"... and {len(run.errors) - WARNED_FAILURES} more failed files (see `citeline runs`)")


def partial_message(run: RunSummary) -> str:
    """The state message of a partial run's Completed state: ``partial: N files failed (a, b, ...)``."""
    paths = [error["path"] or error["reason"] for error in run.errors]
    shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    return f"partial: {len(paths)} files failed ({shown}); the others were indexed; see `citeline runs`"


def run_from_cli(*, progress: bool = False, **parameters: Any) -> dict[str, Any]:
    """``citeline ingest --prefect``: validate the parameters (one-line errors, before Prefect starts), then run
    the flow in this process, with a terminal bar when ``progress``."""
    IngestParameters.parse(**parameters)
    with drawing_terminal_bar(progress):
        return ingest_flow(**parameters)
