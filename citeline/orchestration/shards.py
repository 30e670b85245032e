"""The ingestion flow on a sharded root: each shard's run is one Prefect task.

:meth:`citeline.sharding.index.ShardedIndex.ingest` does the run (discovery and parsing as the flow's tasks, keys only,
on Dask workers when the flow fans out; the plan once, in the flow's process, under the root's writer lock; the
manifest after the shards); the flow hands it its steps (``PrefectSteps``) and
:class:`ShardTasks`, which runs each shard's job (:func:`citeline.sharding.runs.run_shard`) as the task
``shard-002 [1,204 documents]`` on the flow's task runner: its own threads, or the Dask workers of
``dask_address``/``dask_workers``. A shard that fails is a failed task run in the UI; the others' commits stand, the
manifest records them, and the flow run fails with :class:`citeline.sharding.index.ShardsFailedError`, one line naming
each failed shard. The same run again completes it (the shards that committed find nothing to do).
"""

from __future__ import annotations

import time
from typing import Any

import dask
from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import TaskRunner

from citeline.orchestration.blocks import task_storage
from citeline.sharding.remote import Placement, ShardWorkers
from citeline.sharding.runs import ShardJob, run_shard
from citeline.store.ledger import RunSummary


def _shard_run_name() -> str:
    from prefect.runtime import task_run

    job: ShardJob = task_run.parameters["job"]
    return f"{shard_dir_name(job)} [{len(job.parsed.documents) + len(job.parsed.keys):,} documents]"


def shard_dir_name(job: ShardJob) -> str:
    """The shard's folder name (``shard-002``), as the manifest, ``verify`` and errors name it."""
    return job.shard_dir.rstrip("/").rsplit("/", 1)[-1]


def shard_number(job: ShardJob) -> int:
    """The shard's number (``shard-002``: 2), as ``shard_workers`` names it."""
    return int(shard_dir_name(job).rsplit("-", 1)[-1])


# Not retried: a shard run commits as it goes; its failure is reported and the next run finishes the shard.
@task(cache_policy=NO_CACHE, task_run_name=_shard_run_name)
def shard_task(job: ShardJob) -> RunSummary:
    """Run one shard's part of the run (:func:`citeline.sharding.runs.run_shard`), under the shard's writer lock."""
    started = time.monotonic()
    with task_storage(job.discovery.files):  # a Dask worker's credentials from the flow's storage_block
        summary = run_shard(job)
    get_run_logger().info(
        f"{shard_dir_name(job)}: {summary.added} added, {summary.updated} updated, {summary.removed} removed, "
        f"{summary.chunks_embedded} chunks embedded, generation {summary.generation}, "
        f"{time.monotonic() - started:.1f} s"
    )
    return summary


class ShardTasks:
    """The ``run_jobs`` of :meth:`ShardedIndex.ingest`: one :func:`shard_task` per shard on ``runner``; a shard
    that ``shard_workers`` pins runs only on its worker (``runner`` is then a started Dask task runner, whose
    ``submit`` honours ``dask.annotate``; placement: ``citeline.sharding.remote.Placement``)."""

    def __init__(self, runner: TaskRunner[Any], shard_workers: ShardWorkers = None):
        self.runner = runner
        self.shard_workers = shard_workers

    def __call__(self, jobs: list[ShardJob]) -> list[RunSummary | BaseException]:
        client = self.runner.client if self.shard_workers else None  # type: ignore[attr-defined]  # a Dask runner
        placement = Placement(client, None, self.shard_workers) if self.shard_workers else None
        futures: list[Any] = []
        for job in jobs:
            try:
                pinned = placement.pinned_to(shard_number(job)) if placement is not None else {}
                with dask.annotate(**pinned):
                    futures.append(self.runner.submit(shard_task, {"job": job}))
            except Exception as exc:  # a pinned worker that is gone: that shard fails, in one line
                futures.append(exc)
        outcomes: list[RunSummary | BaseException] = []
        for future in futures:
            try:
                outcomes.append(future if isinstance(future, BaseException) else future.result())
            except Exception as exc:  # reported with the other shards' outcomes (the task run shows it failed)
                outcomes.append(exc)
        return outcomes
