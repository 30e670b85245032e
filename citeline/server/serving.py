"""Running the API: :func:`serve` (uvicorn, one process or ``workers``), :func:`app_from_environment` (one worker's
app, for uvicorn or gunicorn), :func:`serve_mcp_stdio` (``citeline mcp``), and the HTTP protocol that drops
connections whose request head never comes."""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import Sequence
from typing import Any

import anyio
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from citeline.errors import SettingsError
from citeline.index import Index
from citeline.model.embedding import Embedder
from citeline.server import mcp
from citeline.server.app import create_app
from citeline.server.guard import check_bind
from citeline.server.limits import (
    DEFAULT_HOST,
    DEFAULT_LIMIT_CONCURRENCY,
    DEFAULT_PORT,
    DEFAULT_TIMEOUT,
    HEAD_TIMEOUT,
    LIMITS,
    SETTINGS_ENV,
    TOKEN_ENV,
)
from citeline.server.metrics import log_access_to_stderr
from citeline.server.service import IndexService
from citeline.sharding.remote import ShardWorkers
from citeline.store.access import TokenFile


class TimelyH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol that closes a connection whose request head has not arrived within
    :attr:`head_timeout` seconds of connecting or of the last response (uvicorn's keep-alive timeout stops at the
    first byte, so a client trickling a request head, or one that connects and says nothing, was kept forever)."""

    head_timeout = HEAD_TIMEOUT
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_late)

    def _head_late(self) -> None:
        # A request in progress has its head; the request timeout bounds the rest.
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()


def serve(
    index_path: str | os.PathLike[str],
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    embedder: Embedder | None = None,
    log_level: str = "info",
    dask_address: str | None = None,
    shard_workers: ShardWorkers = None,
    token: str | None = None,
    no_auth: bool = False,
    cors: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    root_path: str = "",
    timeout: float = DEFAULT_TIMEOUT,
    workers: int = 1,
    limit_concurrency: int = DEFAULT_LIMIT_CONCURRENCY,
    tokens: str | os.PathLike[str] | None = None,
    access_log: str = "plain",
) -> None:
    """Run the API with uvicorn until interrupted (``citeline serve``); the settings as in :func:`create_app`.

    ``token`` defaults to the ``CITELINE_TOKEN`` environment variable; a host other than a loopback address needs
    a token or ``no_auth`` (:func:`check_bind`); without a token, requests must name the server (its address or a
    loopback name with its port) or one of ``allowed_hosts`` in their ``Host`` header. ``workers`` > 1 runs that
    many processes on one port (uvicorn's process manager), each with the index open and its own search slot;
    ``limit_concurrency`` connections at once at most, more are answered 503. ``tokens``: the named tokens' file
    (default ``tokens.json`` in the index directory), which counts as a token for the bind check when it holds one;
    ``access_log``: ``plain``, ``json`` or ``off``.
    """
    token = token or os.environ.get(TOKEN_ENV) or None
    named = TokenFile.of_index(index_path, tokens).tokens()
    check_bind(host, token or ("named tokens" if named else None), no_auth)
    if workers < 1:
        raise SettingsError(f"workers must be at least 1, got {workers}")
    settings = {
        "index_path": str(index_path),
        "dask_address": dask_address,
        "shard_workers": shard_workers,
        "cors": list(cors),
        "allowed_hosts": list(allowed_hosts),
        "timeout": timeout,
        "tokens": None if tokens is None else os.fspath(tokens),
        "access_log": access_log,
    }
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "limit_concurrency": limit_concurrency,
        "timeout_keep_alive": 5,
        "http": TimelyH11,
        "root_path": root_path,
        # The access log is citeline's own (citeline.access: the token's name and the route, never the query
        # string, which holds what people searched for). uvicorn's printed each request's path and query string,
        # and built that line for every request even when its logger's level dropped it.
        "access_log": False,
    }
    if access_log != "off":
        log_access_to_stderr()
    if workers == 1:
        uvicorn.run(create_app(index_path, embedder, token=token, **_without_path(settings)), **options)
        return
    if embedder is not None:
        raise SettingsError("several workers load the index's own model; an embedder object cannot be passed")
    if shard_workers is not None and not isinstance(shard_workers, str):
        raise SettingsError("shard_workers for several workers: give it as text (SHARD=WORKER,...)")
    # Opened here first: a missing index is one error line and exit 1, not workers that fail one by one.
    Index.open(index_path, repair=False)
    os.environ[SETTINGS_ENV] = json.dumps(settings)
    if token:
        os.environ[TOKEN_ENV] = token  # the workers read it from their environment, never from argv
    uvicorn.run("citeline.server:app_from_environment", factory=True, workers=workers, **options)


def serve_mcp_stdio(
    index_path: str | os.PathLike[str],
    *,
    embedder: Embedder | None = None,
    ingest_roots: Sequence[str | os.PathLike[str]] = (),
    timeout: float = DEFAULT_TIMEOUT,
) -> None:
    """``citeline mcp``: serve the index's MCP tools and resources over stdin/stdout until the client closes them
    (``citeline.server.mcp``), reading as :func:`create_app` does; ``ingest_roots`` enables the ``ingest`` tool for
    those roots only. Raises :class:`IndexNotFoundError` before serving if there is no index."""
    roots = mcp.allowed_roots(ingest_roots)
    service = IndexService(Index.open(index_path, embedder=embedder, repair=False), timeout)
    server = mcp.build_server(service, LIMITS, ingest_roots=roots)
    anyio.run(functools.partial(mcp.run_stdio, server, drain=timeout))


def _without_path(settings: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in settings.items() if key != "index_path"}


def app_from_environment() -> FastAPI:
    """The app of one worker process of ``serve(workers=N)``, from the settings in ``CITELINE_SERVE_SETTINGS``
    and the token in ``CITELINE_TOKEN``; also what to give uvicorn or gunicorn to run workers of your own
    (``uvicorn --factory citeline.server:app_from_environment --workers 4``)."""
    raw = os.environ.get(SETTINGS_ENV)
    if not raw:
        raise SettingsError(f'set {SETTINGS_ENV} to JSON settings, at least {{"index_path": "PATH"}}')
    settings = json.loads(raw)
    if settings.get("access_log", "plain") != "off":
        log_access_to_stderr()
    return create_app(settings.pop("index_path"), token=os.environ.get(TOKEN_ENV) or None, **settings)
