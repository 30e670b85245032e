"""Serve the ingestion flow on a cron schedule: ``python -m flows.serve --cron "0 * * * *" PATH...``.

``citeline schedule`` is the same command. It registers the deployment ``citeline-ingest/<name>`` with the
Prefect server at ``PREFECT_API_URL`` (schedule and parameters are visible and editable in the UI) and then runs
each scheduled or manually triggered run in a subprocess of this process, until it is stopped. A cron schedule
needs a real server (``prefect server start``, or docker-compose.yml): Prefect's temporary server has no
scheduler.

Runs of the deployment never overlap on the index: each holds the index's writer lock, so a run that starts
while another is still writing waits for it (``--wait`` bounds that). A failed run leaves the index at its
last good generation and is recorded in the run ledger; the next scheduled run picks up where it left off.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from citeline.errors import SettingsError, SourceError
from citeline.sources import DEFAULT_MAX_FILE_BYTES

if TYPE_CHECKING:  # Prefect is imported only when a deployment is built: `citeline` starts fast without it
    from prefect.deployments.runner import RunnerDeployment

DEFAULT_NAME = "scheduled"


def build_deployment(
    paths: list[str],
    *,
    cron: str,
    name: str = DEFAULT_NAME,
    timezone: str | None = None,
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
    allow_removals: bool = False,
    removal_threshold: float | None = None,
    dry_run: bool = False,
) -> RunnerDeployment:
    """The deployment ``citeline-ingest/<name>``: the ingestion flow with these parameters on ``cron``.

    Paths are made absolute, so runs do not depend on the directory they start in. Raises
    :class:`SourceError` for a path that does not exist and :class:`SettingsError` (a ``ValueError``) for a bad
    cron string or Dask settings, before anything is registered.
    """
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Cron

    from flows.ingest import dask_task_runner, ingest_flow

    for path in paths:
        if not os.path.exists(path):
            raise SourceError(path, "no such file or directory")
    dask_task_runner(dask_address, dask_workers)  # validates the Dask settings
    try:
        schedule = Cron(cron, timezone=timezone or "UTC")
    except ValueError as exc:  # a bad cron string or time zone
        raise SettingsError(f"--cron {cron!r}: {exc}") from None
    parameters: dict[str, Any] = {
        "paths": [os.path.abspath(path) for path in paths],
        "index_path": os.path.abspath(index_path),
        "model": model,
        "backend": backend,
        "max_tokens": max_tokens,
        "overlap_tokens": overlap_tokens,
        "vector_index": vector_index,
        "max_file_bytes": max_file_bytes,
        "wait": wait,
        "dask_address": dask_address,
        "dask_workers": dask_workers,
        "allow_removals": allow_removals or None,
        "removal_threshold": removal_threshold,
        "dry_run": dry_run or None,
    }
    deployment = ingest_flow.to_deployment(
        name=name,
        schedule=schedule,
        parameters={key: value for key, value in parameters.items() if value is not None},
        description=f"citeline ingestion of {', '.join(parameters['paths'])} into {parameters['index_path']}",
        tags=["citeline"],
    )
    assert isinstance(deployment, RunnerDeployment)  # to_deployment is only awaitable in async code
    return deployment


def serve(paths: list[str], *, cron: str, **options: Any) -> None:
    """Register the deployment (see :func:`build_deployment` for the options) and run its runs until stopped."""
    from prefect import serve as prefect_serve

    prefect_serve(build_deployment(paths, cron=cron, **options))


def main(argv: list[str] | None = None) -> None:
    """``python -m flows.serve --cron CRON PATH... [options]``: the same command as ``citeline schedule`` (one
    option table, the CLI's)."""
    from citeline.cli import cli

    cli.main(["schedule", *(sys.argv[1:] if argv is None else argv)], prog_name="python -m flows.serve")


if __name__ == "__main__":
    main()
