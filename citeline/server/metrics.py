"""What an operator scrapes and reads of ``citeline serve``: ``/metrics`` (Prometheus' text format, through the
official ``prometheus-client``) and an access log line per request.

The figures are one process's (each worker of ``serve --workers N`` keeps its own; Prometheus adds them up over the
instances it scrapes). Requests are counted by route (the route's pattern, ``/documents/{doc_id}``, never the
path a caller typed) and status; latencies are histograms per route, and per search stage (``wait``: for the search
slot; ``search``: the plan, from filtering to the relevance floor). The index's generation, documents and chunks,
and per root the last run's status, duration and age are read from the index when Prometheus scrapes (the runs
ledger: ``citeline runs``). ``/metrics`` needs a token with the ``metrics`` permission or the server's own token,
as ``/runs`` does (a scoped token never has it: the figures are the whole index's).

The access log (logger ``citeline.access``) names the caller by its token's name (``-`` for the server's owner: no
tokens, or its own ``--token``; ``?`` for a request refused before a caller was found), never the secret; the
route's pattern, not the query string (which holds what people searched for); the status; the seconds. Plain (``name
route status seconds``) or JSON, one object a line.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from citeline.index import Index
from citeline.server.access import CALLER, CALLER_KEY
from citeline.server.service import IndexService

#: The access log's forms (``serve --access-log``); ``off`` logs nothing.
ACCESS_LOG_FORMATS = ("plain", "json", "off")
ACCESS_LOG = logging.getLogger("citeline.access")
#: The access log's name for a request refused before its caller was known (``-`` is the owner).
REFUSED = "?"
#: Histogram buckets (seconds) of request and search latencies: a cached search is milliseconds, a cold one seconds.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: The runs read to find each root's last run (a root not run in the last this many runs is not reported).
_RUNS_READ = 200


class Metrics:
    """The server's Prometheus registry (its own, not the process-wide default: two apps in one process, as the
    tests make, keep their own figures) and the instruments the middleware and the search slot feed."""

    def __init__(self, service: IndexService):
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "citeline_requests", "HTTP requests answered, by route and status.", ["route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "citeline_request_duration_seconds", "Seconds to answer a request, by route.", ["route"],
            buckets=_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.stages = Histogram(
            "citeline_search_stage_duration_seconds",
            "Seconds of each stage of a search: wait (for the search slot), search (the plan).",
            ["stage"], buckets=_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.registry.register(IndexCollector(service.served))
        service.observe = lambda stage, seconds: self.stages.labels(stage).observe(seconds)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


class IndexCollector(Collector):
    """The index's figures, read when Prometheus scrapes: generation, documents, chunks, and per root the last
    run's status (1 for its status label), duration and age."""

    def __init__(self, index: Index):
        self.index = index

    def collect(self) -> Iterator[Metric]:
        """The gauges (nothing when the index cannot be read now: the scrape still answers the request figures)."""
        try:
            status = self.index.status()
            runs = self.index.runs(_RUNS_READ)
        except Exception as exc:  # a scrape during a damaged or locked moment: say so in the log, not a 500
            logging.getLogger("citeline.server").warning("metrics: cannot read the index: %s", exc)
            return
        yield GaugeMetricFamily("citeline_index_generation", "The committed generation searches read.",
                                value=status.generation)  # fmt: skip
        yield GaugeMetricFamily("citeline_index_documents", "Documents in the index.", value=status.documents)
        yield GaugeMetricFamily("citeline_index_chunks", "Chunks (passages) in the index.", value=status.chunks)
        outcome = GaugeMetricFamily(
            "citeline_last_run_status", "The last run of each root: 1 for its status.", labels=["root", "status"]
        )
        duration = GaugeMetricFamily("citeline_last_run_duration_seconds", "The last run of each root: seconds.",
                                     labels=["root"])  # fmt: skip
        age = GaugeMetricFamily("citeline_last_run_age_seconds", "Seconds since the last run of each root ended "
                                "(or started, while it runs).", labels=["root"])  # fmt: skip
        now = datetime.now(UTC)
        seen: set[str] = set()
        for run in runs:  # newest first: a root's first run here is its last
            for root in run.roots:
                if root in seen:
                    continue
                seen.add(root)
                started = _moment(run.started_at)
                finished = _moment(run.finished_at) if run.finished_at else None
                outcome.add_metric([root, run.status], 1)
                if started is not None and finished is not None:
                    duration.add_metric([root], (finished - started).total_seconds())
                since = finished or started
                if since is not None:
                    age.add_metric([root], (now - since).total_seconds())
        yield outcome
        yield duration
        yield age


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Observed:
    """ASGI middleware outside the guard: every request counted, timed and logged (401s included), with the
    caller the guard found and the route's pattern."""

    def __init__(self, app: ASGIApp, metrics: Metrics, access_log: str = "plain"):
        self.app, self.metrics, self.access_log = app, metrics, access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            route = _route(scope)
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.latency.labels(route).observe(seconds)
            # a request refused before a caller was found (no token, a wrong one, a foreign Host) is nobody's (REFUSED):
            # logged as the owner's (-), a stream of refusals would read as the owner's own requests
            found = scope.get(CALLER_KEY)
            caller = found.name if found is not None else REFUSED
            if self.access_log == "json":
                ACCESS_LOG.info(json.dumps({"token": caller, "route": route, "status": status,
                                            "seconds": round(seconds, 6)}))  # fmt: skip
            elif self.access_log == "plain":
                ACCESS_LOG.info("%s %s %d %.6f", caller, route, status, seconds)


def _route(scope: Scope) -> str:
    # The matched route's pattern (FastAPI sets scope["route"]); a path no route matched is "other", so a caller
    # cannot make a label per path it types.
    route = scope.get("route")
    return route.path if isinstance(route, Route | Mount) else "other"


def log_access_to_stderr() -> None:
    """Write the access log to stderr (``citeline serve``: the logger has no handler of its own otherwise, and
    the root logger drops INFO lines); a process that configured ``citeline.access`` itself keeps its handlers."""
    if not ACCESS_LOG.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        ACCESS_LOG.addHandler(handler)
        ACCESS_LOG.setLevel(logging.INFO)
        ACCESS_LOG.propagate = False


def add_metrics(app: FastAPI, service: IndexService, access_log: str = "plain") -> None:
    """``/metrics`` on ``app`` and the middleware that feeds it and writes the access log (added last: outermost)."""
    if access_log not in ACCESS_LOG_FORMATS:
        raise ValueError(f"access_log must be one of {', '.join(ACCESS_LOG_FORMATS)}, got {access_log!r}")
    metrics = Metrics(service)

    @app.get("/metrics", include_in_schema=False)
    async def exposition() -> Response:
        CALLER.get().require("metrics")
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(Observed, metrics=metrics, access_log=access_log)
