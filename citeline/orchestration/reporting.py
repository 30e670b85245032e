"""What a flow run shows an operator besides its task runs: the pipeline's lines through Prefect's run logger, a
progress artifact, the waiting-for-a-writer state message, and the report and failures artifacts keyed per index.
The flow is in :mod:`citeline.orchestration.ingest`; no task or flow is defined here."""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.context import FlowRunContext
from prefect.states import Running

from citeline.ingest.progress import Bar, Reporter
from citeline.store.catalog import IndexStatus
from citeline.store.ledger import RunSummary

#: Seconds between updates of the progress artifact (each is one API call).
PROGRESS_UPDATE_SECONDS = 2.0


def index_key(index_path: str | os.PathLike[str]) -> str:
    """The artifact key prefix of an index: ``citeline-`` and its absolute path in lowercase and dashes
    (``/data/index`` -> ``citeline-data-index``); long paths end in a hash, so keys stay short and distinct."""
    absolute = os.path.abspath(os.fspath(index_path))
    slug = re.sub(r"[^a-z0-9]+", "-", absolute.lower()).strip("-") or "root"
    if len(slug) > 60:
        slug = f"{slug[-48:].strip('-')}-{hashlib.blake2b(absolute.encode(), digest_size=4).hexdigest()}"
    return f"citeline-{slug}"


class BatchReporter(Reporter):
    """Inside a chunk+embed task: the batch's embedding progress, forwarded to the flow's reporter."""

    # Inside a chunk+embed task: forwards the batch's embedding progress to the flow's reporter, which the flow
    # hands its batches when they run in its own process (thread runner); a batch on a Dask worker gets None, and
    # the flow counts its chunks when it finishes.
    def __init__(self, flow: FlowReporter | None, batch: int):
        super().__init__()
        self.flow = flow
        self.batch = batch

    def on_advance(self, count: int) -> None:
        if self.flow is not None and self.total:
            self.flow.batch_chunks(self.batch, count)
            self.flow.batch_progress(self.batch, self.done / self.total)

    def on_stage_end(self, name: str, seconds: float) -> None:
        pass  # the task logs its own summary line


class ConsoleBar(Bar):
    """The terminal bar of `citeline ingest --prefect`."""

    # The terminal bar of `citeline ingest --prefect`: the lines go to Prefect's logger, not a second time here.
    def emit(self, level: int, message: str) -> None:
        pass


class FlowReporter(Reporter):
    """The pipeline's reporter inside the flow: lines to Prefect's run logger, a progress artifact updated at
    most every :data:`PROGRESS_UPDATE_SECONDS`, the waiting-for-a-writer message in the flow run's state, and
    optionally a terminal bar (``citeline ingest --prefect`` on a terminal), else a progress line in the run's log
    every ``every`` seconds (``progress_every``: what an operator reads in a worker's log)."""

    #: the flow's embed stage counts thousandths of its batches; the batches in this process report their chunks
    embed_counts_chunks = False

    def __init__(self, key: str, index_dir: str, bar: bool = False, every: float = 0.0):
        super().__init__(0.0 if bar else every)
        self.logger = get_run_logger()
        self.bar = ConsoleBar() if bar else None
        self._batches: dict[int, float] = {}
        self._live_chunks: dict[int, int] = {}  # chunks each batch of this stage reported while it ran
        self._last_update = 0.0
        self.artifact_id: UUID | None = None
        try:
            self.artifact_id = create_progress_artifact(  # type: ignore[assignment]  # sync here: not in async code
                0.0, key=f"{key}-progress", description=f"citeline ingestion into {index_dir}"
            )
        except Exception as exc:  # progress is a courtesy: never fail a run for it
            self.logger.warning(f"could not create the progress artifact: {exc}")

    def emit(self, level: int, message: str) -> None:
        self.logger.log(level, message)

    def waiting(self, message: str) -> None:
        super().waiting(message)
        set_state_message(message)

    def on_stage(self, name: str, total: int | None) -> None:
        self._batches.clear()
        self._live_chunks.clear()
        if self.bar is not None:
            self.bar.stage(name, total)
        self._update(force=True)

    def on_advance(self, count: int) -> None:
        if self.bar is not None:
            self.bar.advance(count)
        self._update()

    def batch_progress(self, batch: int, fraction: float) -> None:
        """Batch ``batch`` of the current stage is ``fraction`` done (from a task, or when it finishes)."""
        with self._lock:
            self._batches[batch] = max(self._batches.get(batch, 0.0), fraction)
            units = round(sum(self._batches.values()) * 1000)
            if units > self.done:
                self.advance(units - self.done)

    def batch_chunks(self, batch: int, count: int) -> None:
        """Batch ``batch`` embedded ``count`` more chunks (a task in this process, as it runs)."""
        with self._lock:
            self._live_chunks[batch] = self._live_chunks.get(batch, 0) + count
            self.chunks_embedded(count)

    def batch_embedded(self, batch: int, chunks: int) -> None:
        """Batch ``batch`` finished having embedded ``chunks``: those it did not report as it ran (a Dask
        worker's batch reports none) are counted now."""
        with self._lock:
            self.chunks_embedded(max(chunks - self._live_chunks.pop(batch, 0), 0))

    def finish(self) -> None:
        super().finish()
        if self.bar is not None:
            self.bar.finish()
        self._update(force=True)

    def run_done(self, run: RunSummary) -> None:
        """The run is over: the progress artifact at 100 % says what it did (not the last stage's units)."""
        self._describe(
            100.0,
            f"{run.status}: {run.added:,} added, {run.updated:,} updated, {run.unchanged:,} unchanged, "
            f"{run.removed:,} removed, {run.failed:,} failed; {run.chunks_embedded:,} chunks embedded",
        )

    def _update(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.artifact_id is None or (not force and now - self._last_update < PROGRESS_UPDATE_SECONDS):
            return
        self._last_update = now
        if self.current is None:
            return  # between the last stage and done(): the artifact keeps its last counts
        part = f" (commit {self.parts[0]} of {self.parts[1]})" if self.parts and self.parts[1] > 1 else ""
        counts = f"{self.done:,} of {self.total:,}" if self.total else f"{self.done:,} so far"
        self._describe(round(100 * self.fraction(), 1), f"{self.current}{part}: {counts}")

    def _describe(self, percent: float, description: str) -> None:
        if self.artifact_id is None:
            return
        try:
            update_progress_artifact(self.artifact_id, percent, description=description)
        except Exception as exc:
            self.logger.debug(f"could not update the progress artifact: {exc}")


def set_state_message(message: str) -> None:
    # The flow run's state message (the UI shows it beside "Running"), so a run waiting on a lock says why.
    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(context.flow_run.id, Running(message=message), force=True)
    except Exception as exc:
        get_run_logger().debug(f"could not set the state message: {exc}")


# `citeline ingest --prefect` on a terminal: the flow run it starts in this process also draws a bar. A context
# variable, set for that one call (:func:`drawing_terminal_bar`), not a flag flipped for the whole process: a flow
# run started meanwhile by another thread or caller draws none. Only the flow's own process reads it, when the flow
# makes its reporter; no task names it, so nothing Dask pickles reaches it.
_terminal_bar: ContextVar[bool] = ContextVar("citeline_terminal_bar", default=False)


@contextmanager
def drawing_terminal_bar(on: bool = True) -> Iterator[None]:
    """Flow runs started inside this block, in this context, draw a terminal bar (``on``)."""
    token = _terminal_bar.set(on)
    try:
        yield
    finally:
        _terminal_bar.reset(token)


def wants_terminal_bar() -> bool:
    """Whether a flow run started here draws a terminal bar (:func:`drawing_terminal_bar`)."""
    return _terminal_bar.get()


def run_figures(run: RunSummary, status: IndexStatus | None, seconds: dict[str, float]) -> list[dict[str, object]]:
    """The figures ``citeline serve``'s ``/metrics`` gives of a run and its index (``citeline.server.metrics``), as
    the rows of the ``-metrics`` table artifact: where Prefect users look for a scheduled run's numbers."""
    rows: list[dict[str, object]] = [
        {"figure": "run status", "value": run.status},
        {"figure": "run seconds", "value": round(sum(seconds.values()), 3)},
        *({"figure": f"files {name}", "value": getattr(run, name)}
          for name in ("added", "updated", "unchanged", "removed", "failed")),
        {"figure": "chunks embedded", "value": run.chunks_embedded},
        {"figure": "chunks reused", "value": run.chunks_reused},
    ]  # fmt: skip
    if status is not None:
        rows += [
            {"figure": "index generation", "value": status.generation},
            {"figure": "index documents", "value": status.documents},
            {"figure": "index chunks", "value": status.chunks},
        ]
    return rows


def report_artifacts(
    run: RunSummary, key: str, index_dir: str, seconds: dict[str, float], status: IndexStatus | None = None
) -> None:
    # The run's report, its figures (those /metrics gives) and its failed files as artifacts keyed per index,
    # naming the index's path. ``status``: the index after the run (None for a dry run).
    timing = ", ".join(f"{stage} {value:.1f} s" for stage, value in seconds.items())
    create_markdown_artifact(
        key=f"{key}-report",
        markdown=f"# citeline run into `{index_dir}`\n\n{run.to_markdown()}\n\nStages: {timing}\n",
        description=f"citeline run {run.run_id} into {index_dir}",
    )
    create_table_artifact(
        key=f"{key}-metrics",
        table=run_figures(run, status, seconds),
        description=f"citeline run {run.run_id} into {index_dir}: its figures and the index's after it",
    )
    failures = [{"path": error["path"], "reason": error["reason"]} for error in run.errors] or [
        {"path": "(none)", "reason": "every file was ingested"}
    ]
    create_table_artifact(
        key=f"{key}-failures", table=failures, description=f"files run {run.run_id} could not ingest into {index_dir}"
    )
