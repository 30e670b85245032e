"""Serve the ingestion flow on a cron schedule: ``python -m flows.serve --cron "0 * * * *" PATH...``.

``citeline schedule`` is the same command. It checks that ``PREFECT_API_URL`` names a reachable Prefect server
(Prefect's temporary server has no scheduler: a cron schedule would never fire), registers the deployment
``citeline-ingest/<name>`` (schedule and parameters visible and editable in the UI, every parameter described,
``backend`` a choice), optionally starts one run at once (``--run-now``), and then runs each scheduled or manually
triggered run in a subprocess of this process until it is stopped (Ctrl-C or SIGTERM: it stops cleanly, and a run
it had claimed but not started is cancelled with a message rather than left "Submitting").

One source of truth: this module builds the deployment (:func:`build_deployment`); ``prefect.yaml`` registers
the *worker* variant under another name (:data:`WORKER_NAME`), with the same concurrency limit and schedule
defaults, and tests/system/test_deployment_files.py checks they agree, so the two paths never merge into one definition.

Overlapping runs: the deployment allows one run at a time (:data:`CONCURRENCY`, collision strategy
``CANCEL_NEW``): a run due while the previous one still runs is cancelled at once, visibly, instead of queueing
behind it; the next tick picks up whatever changed. Runs of *other* deployments or the CLI on the same index wait
for its writer lock, and say so (holder's pid and start time) in their log and state message. A failed run
leaves the index at its last good generation and is recorded in the run ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from citeline.errors import CitelineError, SettingsError

if TYPE_CHECKING:  # Prefect is imported only when a deployment is built: `citeline` starts fast without it
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.deployments.runner import RunnerDeployment

DEFAULT_NAME = "scheduled"  #: citeline-ingest/scheduled: `citeline schedule`, `python -m flows.serve`
WORKER_NAME = "worker"  #: citeline-ingest/worker: prefect.yaml, run by a process work pool's worker
DEFAULT_CRON = "0 * * * *"
#: Seconds to wait for the server's health check before refusing.
HEALTH_TIMEOUT = 5.0


class ServerUnavailableError(CitelineError):
    """No reachable Prefect server with a scheduler is configured."""


def concurrency() -> ConcurrencyLimitConfig:
    """One run of the deployment at a time; a run due while another runs is cancelled (``CANCEL_NEW``)."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy

    return ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW)


def check_server() -> str:
    """The API URL of the configured Prefect server; raises :class:`ServerUnavailableError` (one line) when
    ``PREFECT_API_URL`` is unset (Prefect would start a temporary server, whose scheduler is off) or the server
    does not answer its health check."""
    from prefect.client.orchestration import get_client
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        raise ServerUnavailableError(
            "PREFECT_API_URL is not set: a schedule needs a running Prefect server (`prefect server start`, or "
            "`docker compose up -d prefect-server`), e.g. PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    with get_client(sync_client=True, httpx_settings={"timeout": HEALTH_TIMEOUT}) as client:
        problem = client.api_healthcheck()
    if problem is not None:
        raise ServerUnavailableError(f"the Prefect server at PREFECT_API_URL={url} does not answer: {problem}")
    return str(url)


def build_deployment(
    paths: list[str],
    *,
    cron: str = DEFAULT_CRON,
    name: str = DEFAULT_NAME,
    timezone: str | None = None,
    **parameters: Any,
) -> RunnerDeployment:
    """The deployment ``citeline-ingest/<name>``: the ingestion flow with these ``parameters`` on ``cron``.

    ``parameters`` are the flow's (:data:`citeline.orchestration.parameters.IngestParameters`: ``index_path``, the
    index settings, the run options, the Dask settings); one given as None takes its default. Paths are made
    absolute, so runs do not depend on the directory they start in. Raises :class:`SourceError` for a path that
    does not exist and :class:`SettingsError` (a ``ValueError``) for a bad cron string, Dask settings or parameter,
    before anything is registered.
    """
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Cron

    from citeline.orchestration.ingest import IngestParameters, dask_task_runner, index_key, ingest_flow
    from citeline.sources.remote import is_remote

    if name == WORKER_NAME:
        raise SettingsError(f"the deployment name {WORKER_NAME!r} belongs to prefect.yaml's worker deployment")
    given = {key: value for key, value in parameters.items() if value is not None}
    given["index_path"] = os.path.abspath(given.get("index_path", "index"))
    given |= {key: list(given[key]) for key in ("include", "exclude") if key in given}
    absolute = [path if is_remote(path) else os.path.abspath(path) for path in paths]  # a URL stays as given
    settings = IngestParameters.parse(paths=absolute, **given)
    dask_address, dask_workers = given.get("dask_address"), given.get("dask_workers")
    dask_task_runner(dask_address, dask_workers)  # validates the Dask settings
    try:
        schedule = Cron(cron, timezone=timezone or "UTC")
    except ValueError as exc:  # a bad cron string or time zone
        raise SettingsError(f"--cron {cron!r}: {exc}") from None
    parameters = settings.model_dump(exclude_none=True, exclude={"files_per_batch", "chunks_per_batch"})
    from prefect.types.entrypoint import EntrypointType

    deployment = ingest_flow.to_deployment(
        name=name,
        # The module path, not a file path relative to the working directory: the runner's subprocess loads the
        # flow from any directory wherever citeline is installed.
        entrypoint_type=EntrypointType.MODULE_PATH,
        schedule=schedule,
        parameters=parameters,
        concurrency_limit=concurrency(),
        description=(
            f"citeline ingestion of {', '.join(settings.paths)} into {settings.index_path} "
            f"(artifacts {index_key(settings.index_path)}-*)"
        ),
        tags=["citeline"],
    )
    assert isinstance(deployment, RunnerDeployment)  # to_deployment is only awaitable in async code
    return deployment


def serve(paths: list[str], *, cron: str, run_now: bool = False, **options: Any) -> None:
    """Check the server, register the deployment (see :func:`build_deployment` for the options), start a run at
    once when ``run_now``, and run its runs until stopped; Ctrl-C stops cleanly."""
    deployment = build_deployment(paths, cron=cron, **options)  # bad input is reported first, server or not
    check_server()
    from prefect.exceptions import TerminationSignal

    # Ctrl-C, or SIGTERM (docker stop): stop without a traceback. Ctrl-C cancels _serve (see _stop_on_interrupt),
    # so asyncio.run ends with CancelledError rather than KeyboardInterrupt.
    with contextlib.suppress(KeyboardInterrupt, TerminationSignal, asyncio.CancelledError):
        asyncio.run(_serve(deployment, run_now))
    asyncio.run(_cancel_unstarted(deployment))
    print(f"stopped serving citeline-ingest/{deployment.name}", file=sys.stderr)


async def _serve(deployment: RunnerDeployment, run_now: bool) -> None:
    from prefect.deployments import arun_deployment
    from prefect.runner import Runner

    _stop_on_interrupt()
    runner = Runner(name=f"citeline-{deployment.name}")
    await runner.aadd_deployment(deployment)
    if run_now:
        await arun_deployment(name=f"citeline-ingest/{deployment.name}", timeout=0)
    print(
        f"serving citeline-ingest/{deployment.name} on cron {deployment.schedules[0].schedule.cron!r}"  # type: ignore[union-attr,index]
        f"{' (a first run starts now)' if run_now else ''}; Ctrl-C stops",
        file=sys.stderr,
    )
    await runner.start()


#: Seconds after a Ctrl-C before the serving task is cancelled again if it is still running.
RECANCEL_SECONDS = 10.0


def _stop_on_interrupt() -> None:
    """Make one Ctrl-C stop the running ``_serve`` task, even if a cancellation is absorbed on the way.

    asyncio.run cancels its main task once on Ctrl-C and leaves the rest to a second Ctrl-C. Once in CI, under a
    load of 7-15 on 2 cores, `citeline schedule` was still serving 60 s after Ctrl-C (it normally stops in about
    5 s): a cancellation that lands while Prefect's runner enters its task groups can be absorbed there. So the task
    is cancelled again every RECANCEL_SECONDS until it has ended; a second Ctrl-C does the same at once.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers belong to the main thread; elsewhere asyncio's default stands
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def cancel() -> None:
        if not task.done():
            task.cancel()
            loop.call_later(RECANCEL_SECONDS, cancel)

    loop.add_signal_handler(signal.SIGINT, cancel)


async def _cancel_unstarted(deployment: RunnerDeployment) -> None:
    # A run this runner claimed ("Submitting", a Pending state) but never started would stay so forever.
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterName,
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Cancelled

    async with get_client() as client:
        runs = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PENDING]))
            ),
            flow_filter=FlowFilter(name=FlowFilterName(any_=[deployment.flow_name or "citeline-ingest"])),
            deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[deployment.name])),
        )
        for flow_run in runs:
            await client.set_flow_run_state(
                flow_run.id, Cancelled(message="citeline schedule stopped before this run started"), force=True
            )
