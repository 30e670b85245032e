"""Running shards' pipelines: one :class:`ShardJob` per shard (plain data, so it travels to worker processes and
Dask workers), :func:`run_shard` (``pipeline.run`` with the run's discovery and the shard's parsed documents, under
the shard's own writer lock) and :func:`execute` (the jobs in worker processes, threads, in turn, or on Dask)."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from citeline.errors import SettingsError
from citeline.index import Index
from citeline.ingest import pipeline, stopping
from citeline.ingest.options import IngestOptions
from citeline.ingest.planning import ParsedBatch
from citeline.model.embedding import Embedder
from citeline.sharding.remote import ShardWorkers
from citeline.sources import remote
from citeline.sources.discovery import Discovery
from citeline.sources.parsers import SourceFile
from citeline.store import ledger
from citeline.store.ledger import RunSummary

PARALLEL = ("processes", "threads", "serial")


class PreparsedSteps(pipeline.GivenSteps):
    """A shard's pipeline steps: discovery and parsing were done once for every shard (every shard plans against
    the run's discovery: all files found); the rest runs here."""

    def parse(
        self, file_batches: list[list[SourceFile]], max_file_bytes: int, hold_chars: int | None = None
    ) -> Iterator[ParsedBatch]:
        """This shard's documents of the files the run reads (and every file's errors, which keep their stored
        documents). The run leaves out files whose size and time are what was indexed (``citeline.ingest.freshness``):
        their documents stay in the catalog unplanned, so passing them on would insert them a second time."""
        to_read = {(source.root, source.source_id) for files in file_batches for source in files}
        documents = [
            d
            for d in self.parsed.documents  # given texts have no file: all of this shard's are its to plan
            if self.parsed.given or (d.source_root, d.source_file or d.source_id) in to_read
        ]
        keys = [key for key in self.parsed.keys if (key.source_root, key.source_file) in to_read]
        # Files the root left unread (``citeline.sharding.freshness``) that this shard would read: it holds none of
        # their documents, or they changed since the root looked. Either way they are not planned here (their
        # stored documents stay as they are; a changed file is read by the next run), never taken as vanished.
        unread = [key for key in self.parsed.fresh_files if key in to_read]
        yield replace(self.parsed, documents=documents, keys=keys, fresh_files=unread, fresh_documents=0)


@dataclass
class ShardJob:
    """One shard's part of a run: what a worker needs (plain data: it travels to processes and Dask workers)."""

    shard_dir: str
    paths: list[str]
    discovery: Discovery
    parsed: ParsedBatch
    options: IngestOptions  #: the run's settings for this shard (no reporter: it travels to workers)
    embedder: Embedder | None = None  #: None: the worker loads the index's model (once per process)


_worker_embedders: dict[tuple[str, str], Embedder] = {}


def run_shard(job: ShardJob) -> RunSummary:
    """Run one shard's pipeline (under its own writer lock); a worker process keeps its model across shards."""
    embedder = job.embedder
    if embedder is None:
        index = Index.open(job.shard_dir)
        key = (index.meta["model"], index.meta["backend"])
        if key not in _worker_embedders:
            _worker_embedders[key] = index.embedder
        index._embedder = _worker_embedders[key]
    else:
        index = Index.open(job.shard_dir, embedder=embedder)
    options = replace(job.options, prepare_queries=False)
    steps = PreparsedSteps(job.discovery, job.parsed)
    if multiprocessing.parent_process() is None:  # the coordinator itself (serial): its signals are its caller's
        return pipeline.run(index, job.paths, options, steps)
    # A shard's worker process: a stop commits what is embedded whole and is raised back to the coordinator, which
    # records the run. Ending the worker by the signal (pipeline's deferred_sigterm) broke the process pool, whose
    # manager then sent SIGTERM to the other workers in the middle of their own commits, and the coordinator read
    # their ledgers before they wrote them (the CLI said "kept 146" of 292 kept).
    with stopping.handle_stop_signals():
        try:
            return pipeline.run(index, job.paths, options, steps)
        except BaseException as exc:
            if not stopping.is_stop(exc):
                raise
            signum = stopping.received_signal() or signal.SIGINT
            raise (KeyboardInterrupt() if signum == signal.SIGINT else stopping.StopSignal(signum)) from None


def idle_run(run_id: str, generation: int) -> RunSummary:
    """The outcome of a shard with nothing to do in run ``run_id``: not started, still at ``generation`` (no row
    in the shard's own ledger: the manifest's row of the run has the counts)."""
    return RunSummary(
        run_id="", started_at=ledger.utc_now(), finished_at=ledger.utc_now(), status="succeeded", roots=[],
        generation=generation,
    )  # fmt: skip


def execute(jobs: list[ShardJob], parallel: str = "processes") -> list[RunSummary | BaseException]:
    """Run the jobs here, in ``parallel``: worker processes, threads or in turn; each job's summary, or the
    exception that stopped it (on Dask: :func:`execute_on`)."""
    if not jobs:
        return []
    if parallel not in PARALLEL:
        raise SettingsError(f"parallel must be one of {', '.join(PARALLEL)}, not {parallel!r}")
    if parallel == "serial" or len(jobs) == 1:
        return [_outcome(run_shard, job) for job in jobs]
    executor: Executor
    if parallel == "threads":
        executor = ThreadPoolExecutor(max_workers=len(jobs))
    else:  # spawn: forking a process that has started torch's or FAISS's thread pools can hang the child
        workers = min(len(jobs), os.cpu_count() or 1)
        executor = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    with executor:
        # threads start in an empty context: each shard's is a copy of this one (the run's storage options)
        work = remote.in_context(run_shard) if parallel == "threads" else run_shard
        futures = [executor.submit(work, job) for job in jobs]
        try:
            return [_outcome(future.result) for future in futures]
        except BaseException as exc:
            if stopping.is_stop(exc):
                _pass_on_sigterm(executor)
            raise


def _pass_on_sigterm(executor: Executor) -> None:
    # A SIGTERM reaches this process only (docker stop, Kubernetes: PID 1), unlike a terminal's Ctrl-C, which reaches
    # every process of the group: pass it on to the shards' worker processes, each of which then commits what it
    # embedded whole (stopping.deferred_sigterm); otherwise leaving the executor would wait for their whole runs.
    if stopping.received_signal() != signal.SIGTERM or not isinstance(executor, ProcessPoolExecutor):
        return
    processes: dict[int, Any] = getattr(executor, "_processes", None) or {}  # (not public: pid -> process)
    for process in list(processes.values()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)


#: A local Dask cluster's settings, wherever citeline starts one: one thread a worker process, and every listener on
#: the loopback (the scheduler, workers and nannies bind 127.0.0.1 already; the scheduler's dashboard and metrics
#: server would listen on every address at :8787), the dashboard on a free port (its link: ``client.dashboard_link``).
LOCAL_CLUSTER: dict[str, Any] = {"threads_per_worker": 1, "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}


@contextlib.contextmanager
def dask_client(address: str | None, workers: int | None) -> Iterator[Any]:
    """A client of the cluster at ``address``, or of a local cluster of ``workers`` processes, for one run."""
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        if address:
            client = stack.enter_context(Client(address))
        else:
            cluster = stack.enter_context(LocalCluster(n_workers=workers, **LOCAL_CLUSTER))
            client = stack.enter_context(Client(cluster))
        yield client


def execute_on(client: Any, jobs: list[ShardJob], shard_workers: ShardWorkers) -> list[RunSummary | BaseException]:
    """Run the jobs on ``client``'s workers, each shard's where ``shard_workers`` pins it
    (``citeline.sharding.remote.Placement``); each job's summary, or the exception that stopped it."""
    from citeline.sharding.remote import Placement

    if not jobs:
        return []
    # pure=False and a key of this run's own: a re-run must run again, never meet an earlier run's result (a
    # failed run's erred task can linger on the scheduler for a moment after its client lets go)
    token = uuid.uuid4().hex[:8]
    placement = Placement(client, None, shard_workers)  # checked against the shard count by the caller
    with ThreadPoolExecutor(max_workers=len(jobs)) as waiting:  # each wait checks its pinned worker is there
        futures = [
            waiting.submit(placement.run, _number(job), run_shard, job, key=f"citeline-shard-{job.shard_dir}-{token}")
            for job in jobs
        ]
        return [_outcome(future.result) for future in futures]


class WorkerSteps(pipeline.Steps):
    """A sharded run's steps on Dask: the files are parsed on the cluster's workers, a batch of files a task, and
    only the documents' keys (id, hash, file, length; ``ParsedBatch.without_texts``) come back, so the coordinator
    holds keys, stamps and the plan, never the texts; each shard's run parses again the files of the documents it
    indexes, on its worker. A file is named by its :class:`SourceFile` (root, path, relative id, encoding),
    which the worker opens itself."""

    def __init__(self, client: Any):
        self.client = client

    def parse(
        self, file_batches: list[list[SourceFile]], max_file_bytes: int, hold_chars: int | None = None
    ) -> Iterator[ParsedBatch]:
        """Every batch parsed on a worker, keys only, yielded in order."""
        token = uuid.uuid4().hex[:8]
        futures = [
            self.client.submit(_parse_keys, files, max_file_bytes, key=f"citeline-parse-{number}-{token}")
            for number, files in enumerate(file_batches)
        ]
        try:
            for files, future in zip(file_batches, futures, strict=True):
                parsed = future.result()
                future.release()
                self.reporter.advance(len(files))
                yield parsed
        finally:
            for future in futures:
                future.cancel()


def _parse_keys(files: list[SourceFile], max_file_bytes: int) -> ParsedBatch:
    # On a worker: parse the batch, keeping only the documents' keys (a record file streams as it is read).
    return pipeline.parse_files(files, max_file_bytes=max_file_bytes, hold_chars=0)


def _number(job: ShardJob) -> int:
    # shard-003 -> 3 (the directory names are citeline.sharding.index.shard_dir's)
    return int(job.shard_dir.rstrip("/").rsplit("-", 1)[-1])


def _outcome(call: Callable[..., RunSummary], *args: Any) -> RunSummary | BaseException:
    try:
        return call(*args)
    except Exception as exc:  # one shard's failure is reported with the others' outcomes
        return exc
