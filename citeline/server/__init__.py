"""``citeline serve``: a read-only HTTP API over one index (FastAPI, run with uvicorn), and a search page.

GET ``/search``, ``/status``, ``/runs``, ``/documents``, ``/documents/{doc_id}`` and ``/health``, and MCP (streamable
HTTP) at ``/mcp`` (``citeline.server.mcp``); query parameters
have the names of the CLI's flags (``q``, ``k``, ``offset``, ``mode``, ``source``, ``path``, ``where``,
``ingested_after``, ``ingested_before``, ``collapse``, ``limit``), and the response models are generated from the
Python objects' dataclasses (``SearchResult``, ``RunSummary``, ``IndexStatus``), so the OpenAPI schema at
``/openapi.json`` names exactly their fields. ``/`` is a search page for people (``page.py``: plain HTML,
no script) and ``/docs`` and ``/redoc`` the interactive API docs, their assets served by the server itself
(``fastapi-standalone-docs`` ships them), so everything works offline.

Errors are ``{"error": "<one line>"}``: 400 for a bad parameter (every parameter is bounded: see the ``MAX_``
constants; a query string that is not UTF-8 too), 401 without the token, 403 for what a token may not do
(``citeline.server.access``), 421 for a ``Host`` and 403 for an ``Origin`` that are not the server's (without a
token), 404 for an unknown document (or one outside a token's scope: the same answer), 409 when the index stayed
locked by a commit, 503 when a request waited longer than the timeout; 500 only for a bug. Each error's class
declares its status (``http_status``: docs/api.md#errors).

The server never takes the writer lock: the index is opened with ``repair=False`` and every read goes through a
read-only connection or the search snapshot, which reloads itself after a commit, so ``citeline ingest`` can run
beside it and the next query sees the new generation without a restart. A process runs one search at a time (the
snapshot is one DuckDB connection); several processes (``workers``) serve more at once, and each answer says in
its ``X-Citeline-Generation`` header (and ``generation`` field) which committed generation it was read from.

Security: the server binds 127.0.0.1 unless told otherwise, and refuses any other address unless a bearer token
is set (``token``, or the ``CITELINE_TOKEN`` environment variable so that it stays out of ``ps``) or ``no_auth``
says it is meant to be open; without a token every request must name the server in its ``Host`` (and a browser's
``Origin``), so that no web page can read it by pointing a name of its own at 127.0.0.1 (DNS rebinding;
``allowed_hosts`` names more); every response carries the security headers (a Content-Security-Policy, ``nosniff``,
``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer``); CORS is off unless origins are given; it reads
nothing but the index (documents' texts come from the catalog, never from their source paths) and the assets inside
the installed packages.

The modules: ``limits.py`` (the defaults and bounds, :class:`~citeline.server.limits.Limits`), ``models.py`` (the
response models and the error form), ``parameters.py`` (the query parameters), ``service.py`` (the serving contract
:class:`~citeline.server.service.ServedIndex` and its implementation :class:`IndexService`: how requests read the
index), ``answers.py`` (the one search answer ``/search``, the page and MCP's ``search`` render), ``guard.py`` (the
token, the Host and Origin check, the security headers and the bind check), ``access.py`` (the caller a request's
token names, and what of the index a scoped one sees), ``metrics.py`` (``/metrics`` and the access log), ``page.py``
(the search page ``/`` and ``/view/{doc_id}``, its templates in ``templates/``), ``mcp/`` (the MCP server:
``schemas.py``, ``tools.py``, ``stdio.py``, ``http.py``), ``app.py`` (:func:`create_app`: the routes) and
``serving.py`` (:func:`serve`, :func:`app_from_environment`, :func:`serve_mcp_stdio`: running it).

Named tokens (``citeline tokens``, ``tokens.json`` in the index directory) each have a scope, a filter ANDed into
every request before ranking, so a scoped caller sees only its documents on every surface; ``/metrics`` is
Prometheus' scrape (docs/operations.md).
"""

from citeline.server.app import create_app
from citeline.server.guard import check_bind, is_loopback
from citeline.server.limits import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DEFAULT_TIMEOUT,
    GENERATION_HEADER,
    LIMITS,
    MAX_FILTER_VALUES,
    MAX_ID_CHARS,
    MAX_K,
    MAX_OFFSET,
    MAX_PAGE,
    MAX_QUERY_CHARS,
    TOKEN_ENV,
)
from citeline.server.models import DocumentRecord, model_of
from citeline.server.service import IndexService, ServerBusyError
from citeline.server.serving import TimelyH11, app_from_environment, serve, serve_mcp_stdio

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "DEFAULT_TIMEOUT",
    "GENERATION_HEADER",
    "LIMITS",
    "MAX_FILTER_VALUES",
    "MAX_ID_CHARS",
    "MAX_K",
    "MAX_OFFSET",
    "MAX_PAGE",
    "MAX_QUERY_CHARS",
    "TOKEN_ENV",
    "DocumentRecord",
    "IndexService",
    "ServerBusyError",
    "TimelyH11",
    "app_from_environment",
    "check_bind",
    "create_app",
    "is_loopback",
    "model_of",
    "serve",
    "serve_mcp_stdio",
]
