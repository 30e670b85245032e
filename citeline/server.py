"""``citeline serve``: a read-only HTTP API over one index (FastAPI, run with uvicorn), and a search page.

GET ``/search``, ``/status``, ``/runs``, ``/documents``, ``/documents/{doc_id}`` and ``/health``, and MCP (streamable
HTTP) at ``/mcp`` (``citeline.mcp_server``); query parameters
have the names of the CLI's flags (``q``, ``k``, ``offset``, ``mode``, ``source``, ``path``, ``where``,
``ingested_after``, ``ingested_before``, ``collapse``, ``limit``), and the response models are generated from the
Python objects' dataclasses (``SearchResult``, ``RunSummary``, ``IndexStatus``), so the OpenAPI schema at
``/openapi.json`` names exactly their fields. ``/`` is a search page for people (``citeline.web``: plain HTML,
no script) and ``/docs`` and ``/redoc`` the interactive API docs, their assets served by the server itself
(``fastapi-standalone-docs`` ships them), so everything works offline.

Errors are ``{"error": "<one line>"}``: 400 for a bad parameter (every parameter is bounded: see the ``MAX_``
constants; a query string that is not UTF-8 too), 401 without the token, 404 for an unknown document, 409 when
the index stayed locked by a commit, 503 when a request waited longer than the timeout; 500 only for a bug.

The server never takes the writer lock: the index is opened with ``repair=False`` and every read goes through a
read-only connection or the search snapshot, which reloads itself after a commit, so ``citeline ingest`` can run
beside it and the next query sees the new generation without a restart. A process runs one search at a time (the
snapshot is one DuckDB connection); several processes (``workers``) serve more at once, and each answer says in
its ``X-Citeline-Generation`` header (and ``generation`` field) which committed generation it was read from.

Security: the server binds 127.0.0.1 unless told otherwise, and refuses any other address unless a bearer token
is set (``token``, or the ``CITELINE_TOKEN`` environment variable so that it stays out of ``ps``) or ``no_auth``
says it is meant to be open; CORS is off unless origins are given; it reads nothing but the index (documents'
texts come from the catalog, never from their source paths) and the assets inside the installed packages.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import enum
import functools
import inspect
import ipaddress
import json
import os
import secrets
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints
from urllib.parse import unquote_to_bytes, urlencode

import anyio
import anyio.to_thread
import fastapi_standalone_docs  # type: ignore[import-untyped]
import uvicorn
from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi import Path as PathParameter
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field, create_model
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from citeline import mcp_server, web
from citeline.errors import CitelineError, IndexLockedError, IndexNotFoundError, QueryError, SettingsError
from citeline.index import Index
from citeline.model.embedding import Embedder
from citeline.query.plan import DEFAULT_MODE, MODES, SearchRequest
from citeline.query.results import SearchResult
from citeline.sharding.remote import ShardWorkers
from citeline.store.catalog import IndexStatus
from citeline.store.documents import FACET_VALUES, DocumentDetail, DocumentInfo, Facet
from citeline.store.filters import filters_from
from citeline.store.ledger import RunSummary
from citeline.util.declared import offered, pick
from citeline.util.formats import normalize

__all__ = [
    "app_from_environment",
    "check_bind",
    "create_app",
    "model_of",
    "serve",
    "serve_mcp_stdio",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

# What one request may ask for, so that none costs much more than a normal one: a search ranks at most
# MAX_K + MAX_OFFSET passages for a query of at most MAX_QUERY_CHARS characters, a listing returns at most MAX_PAGE
# rows, and each filter takes at most MAX_FILTER_VALUES values of at most MAX_QUERY_CHARS characters.
MAX_QUERY_CHARS = 1000
MAX_K = 100
MAX_OFFSET = 100
MAX_PAGE = 1000
DEFAULT_PAGE = 100
MAX_FILTER_VALUES = 20
MAX_ID_CHARS = 200
#: The bounds above as the search page and the MCP tools take them.
LIMITS = web.Limits(MAX_QUERY_CHARS, MAX_K, MAX_OFFSET, MAX_ID_CHARS, MAX_FILTER_VALUES)
#: Seconds a request may take, waiting for the index included, before it is answered 503 (``timeout``).
DEFAULT_TIMEOUT = 30.0
#: Seconds a connection may take to send a request's head (after connecting, or after the last response): uvicorn
#: itself waits forever, so an idle or trickling client would hold a connection slot (``_TimelyH11``).
HEAD_TIMEOUT = 10.0
#: Connections uvicorn serves at once; more are answered 503 at once (``limit_concurrency``).
DEFAULT_LIMIT_CONCURRENCY = 256
#: The response header naming the committed generation a search or health check read.
GENERATION_HEADER = "X-Citeline-Generation"
#: The environment variable that holds the bearer token (so that it does not show in ``ps``).
TOKEN_ENV = "CITELINE_TOKEN"
#: The environment variable ``app_from_environment`` reads its settings from (``serve(workers=N)`` sets it).
SETTINGS_ENV = "CITELINE_SERVE_SETTINGS"
#: The search modes, an enum so that the OpenAPI schema lists them.
Mode = enum.StrEnum("Mode", [(mode, mode) for mode in MODES])  # type: ignore[misc]
_DEFAULT_MODE = Mode(DEFAULT_MODE)
_DOC_ASSETS = Path(fastapi_standalone_docs.__path__[0]) / "static"

# ---------------------------------------------------------------- response models

_MODELS: dict[type, type[BaseModel]] = {}


def model_of(cls: type, *, name: str | None = None, **extra: Any) -> type[BaseModel]:
    """A pydantic model with the fields (names, types, defaults, docstring) of the dataclass ``cls``.

    Nested dataclasses become their own models and ``tuple[X, ...]`` a list, so the schema follows the Python
    objects as they change; ``extra`` adds fields first (``rank=(int, ...)``).
    """
    if not extra and cls in _MODELS:
        return _MODELS[cls]
    hints = get_type_hints(cls)
    fields: dict[str, Any] = dict(extra)
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            default: Any = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = Field(default_factory=field.default_factory)
        else:
            default = ...
        fields[field.name] = (_pydantic_type(hints[field.name]), default)
    model = create_model(name or cls.__name__, __doc__=cls.__doc__, **fields)
    if not extra:
        _MODELS[cls] = model
    return model


def _pydantic_type(hint: Any) -> Any:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return model_of(hint)
    origin, args = get_origin(hint), get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return list[_pydantic_type(args[0])]  # type: ignore[misc]
    if origin is list and args:
        return list[_pydantic_type(args[0])]  # type: ignore[misc]
    if origin in (Union, types.UnionType):
        return Union[tuple(_pydantic_type(arg) for arg in args)]  # noqa: UP007 - built from a runtime tuple
    return hint


SearchResultModel = model_of(SearchResult, rank=(int, Field(description="1-based position in this answer")))
RunSummaryModel = model_of(RunSummary)
IndexStatusModel = model_of(IndexStatus)


FacetModel = model_of(Facet)


class SearchResponse(BaseModel):
    """The answer to ``GET /search``: the request as understood, the generation it was read from, and the results
    best first (ranks ``offset + 1`` to ``offset + k``); with ``facets=true``, the facet counts of these results'
    documents (``Index.facets``)."""

    query: str
    mode: Mode
    k: int
    offset: int
    generation: int
    results: list[SearchResultModel]  # type: ignore[valid-type]
    facets: list[FacetModel] | None = None  # type: ignore[valid-type]


#: ``GET /documents``' records and ``GET /documents/{doc_id}``'s answer: ``Index.documents``' and
#: ``Index.document``'s dataclasses, so the schema follows them (the chunk spans become ``ChunkSpan``).
DocumentRecord = model_of(DocumentInfo, name="DocumentRecord")
DocumentDetailModel = model_of(DocumentDetail)


class Health(BaseModel):
    """``GET /health``: the index opens and is at this generation."""

    status: str
    generation: int


class ErrorResponse(BaseModel):
    """Every error: the one line the CLI prints for the same problem."""

    error: str


# ---------------------------------------------------------------- requests

# The filter parameters of /search and /documents, named as the CLI's flags.
_Value = Annotated[str, Field(max_length=MAX_QUERY_CHARS)]
_Values = list[_Value] | None
_MANY = {"max_length": MAX_FILTER_VALUES}
SourceParam = Annotated[_Values, Query(description="Only this ingested folder or file (or a source id).", **_MANY)]
PathParam = Annotated[_Values, Query(description="Only documents whose source id or path matches this glob.", **_MANY)]
WhereParam = Annotated[
    _Values,
    Query(
        description="KEY=VALUE: only documents whose metadata KEY is VALUE; also KEY!=VALUE, KEY~TEXT, KEY>=VALUE "
        "(>, <, <=) and 'KEY in A,B', as the CLI's --where.",
        **_MANY,
    ),
]
_Date = Annotated[str | None, Field(max_length=64)]
AfterParam = Annotated[_Date, Query(description="Only documents ingested at or after this date (ISO 8601).")]
BeforeParam = Annotated[_Date, Query(description="Only documents ingested before this date (ISO 8601).")]


#: The filter options as query parameters, by :func:`citeline.store.filters.filters_from`'s names.
FILTER_PARAMETERS = {
    "source": SourceParam,
    "path": PathParam,
    "where": WhereParam,
    "ingested_after": AfterParam,
    "ingested_before": BeforeParam,
}


def _dependency(
    parameters: list[inspect.Parameter], make: Callable[..., dict[str, Any]] = dict
) -> Callable[..., dict[str, Any]]:
    """A FastAPI dependency taking ``parameters`` (query parameters) and answering ``make(**values)``."""

    def values(**given: Any) -> dict[str, Any]:
        return make(**given)

    values.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # what FastAPI reads
    return values


#: ``GET /search``'s and ``GET /documents``' filter parameters, answering the filters they select.
filter_parameters = _dependency(
    [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
        for name, kind in FILTER_PARAMETERS.items()
    ],
    filters_from,
)


def search_parameters() -> Callable[..., dict[str, Any]]:
    """``GET /search``'s query parameters, generated from the declared fields of :class:`citeline.SearchRequest`
    (``citeline.util.declared``): its type, default, bounds, choices and help; ``q`` is the query's text, the filters
    are :data:`filter_parameters`, and the server's own bounds apply (``MAX_QUERY_CHARS``, ``MAX_K``)."""
    hints, keyword = get_type_hints(SearchRequest), inspect.Parameter.KEYWORD_ONLY
    parameters: list[inspect.Parameter] = []
    for spec in offered(SearchRequest):
        if spec.name == "filters":  # a dependency of its own (filter_parameters), as GET /documents takes them
            continue
        meta, annotation = spec.metadata, hints[spec.name]
        bounds: dict[str, Any] = {"ge": meta["minimum"], "le": meta["maximum"]}
        if spec.name == "text":
            bounds = {"min_length": 1, "max_length": MAX_QUERY_CHARS}
        if spec.name == "k":
            bounds["le"] = min(MAX_K, meta["maximum"])
        if "choices" in meta:  # an enum in the OpenAPI schema (the modes': the Mode schema the response names too)
            annotation = Mode if spec.name == "mode" else Literal[tuple(meta["choices"])]
        default = inspect.Parameter.empty if spec.default is dataclasses.MISSING else spec.default
        kind = Annotated[annotation, Query(description=meta["help"], **bounds)]  # type: ignore[valid-type]
        parameters.append(
            inspect.Parameter("q" if spec.name == "text" else spec.name, keyword, default=default, annotation=kind)
        )
    return _dependency(parameters)


#: ``GET /search``'s ``facets`` parameter (the page shows them always).
FACETS_HELP = (
    "Add the facet counts of this answer's documents: for each metadata field, the documents per value (the most "
    "frequent first), as GET /facets gives them for the filters alone."
)


class ServerBusyError(CitelineError):
    """A request waited longer than the server's timeout (for the index, or for its own work): 503."""


T = TypeVar("T")


class _Reader:
    """The served index, kept open (its search snapshot reloads itself after every commit). Searches run one at
    a time in the index's own search slot (:meth:`Index.reading`), which a request waits for until its deadline."""

    def __init__(self, index: Index, timeout: float):
        self.index = index
        self.timeout = timeout

    def _in_slot(self, work: Callable[[], T], deadline: float) -> T:
        # ``work`` in the index's search slot, waited for until ``deadline`` (then 503).
        try:
            with self.index.reading(timeout=deadline - time.monotonic()):
                return work()
        except TimeoutError:
            raise ServerBusyError(f"the server is busy: no search slot within {self.timeout:g} s; try again") from None

    def search(self, request: SearchRequest, deadline: float) -> tuple[list[SearchResult], int]:
        """The results of ``request`` and the generation of the snapshot they were read from."""

        def answer() -> tuple[list[SearchResult], int]:
            return self.index.search(request), int(self.index.snapshot(refresh=False).generation)

        return self._in_slot(answer, deadline)

    def facets(
        self, filters: Any, within: Sequence[SearchResult] | None, limit: int | None, deadline: float
    ) -> list[Facet]:
        """``Index.facets``, in the search slot (it reads the search's snapshot)."""
        return self._in_slot(lambda: self.index.facets(filters, within=within, limit=limit), deadline)

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args, deadline)`` on a worker thread, answered 503 after :attr:`timeout` seconds (the thread
        finishes on its own; the search lock keeps the abandoned ones from piling up)."""
        deadline = time.monotonic() + self.timeout
        try:
            with anyio.fail_after(self.timeout):
                return await anyio.to_thread.run_sync(functools.partial(work, *args, deadline), abandon_on_cancel=True)
        except TimeoutError:
            raise ServerBusyError(f"the request took longer than {self.timeout:g} s; try a narrower one") from None


def _status_code(exc: BaseException) -> int:
    if isinstance(exc, QueryError | ValueError):
        return 400
    if isinstance(exc, IndexNotFoundError):
        return 404
    if isinstance(exc, IndexLockedError):
        return 409
    if isinstance(exc, ServerBusyError):
        return 503
    return 500


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status, headers=headers)


def _shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error line echoes what it got, never a whole request."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------- what every request passes first


class _Guard:
    """ASGI middleware in front of every route: the bearer token (when set), then a UTF-8 query string and path.

    A browser asking for HTML is challenged with Basic authentication (the token as the password, any user
    name), so the search page works with a token and no script; programs send ``Authorization: Bearer TOKEN``.
    """

    def __init__(self, app: ASGIApp, token: str | None):
        self.app = app
        self.token = token.encode("utf-8") if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        if self.token is not None and not self._authorised(headers.get(b"authorization", b"")):
            wants_page = b"text/html" in headers.get(b"accept", b"")
            challenge = 'Basic realm="citeline"' if wants_page else 'Bearer realm="citeline"'
            return _error(
                401,
                "this server needs its token: send the header `Authorization: Bearer TOKEN`",
                {"WWW-Authenticate": challenge},
            )
        for part, raw in (("query string", scope.get("query_string", b"")), ("path", scope.get("raw_path") or b"")):
            try:
                unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
            except UnicodeDecodeError:
                return _error(400, f"the {part} is not valid UTF-8; percent-encode text as UTF-8")
        return None

    def _authorised(self, header: bytes) -> bool:
        assert self.token is not None
        scheme, _, credentials = header.partition(b" ")
        if scheme.lower() == b"bearer":
            return secrets.compare_digest(credentials.strip(), self.token)
        if scheme.lower() == b"basic":
            try:
                password = base64.b64decode(credentials.strip(), validate=True).partition(b":")[2]
            except (binascii.Error, ValueError):
                return False
            return secrets.compare_digest(password, self.token)
        return False


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): only this machine can connect."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, no_auth: bool) -> None:
    """Refuse (:class:`SettingsError`) to listen on an address other machines reach without a token, unless
    ``no_auth`` says so explicitly, and a token together with ``no_auth``."""
    if token and no_auth:
        raise SettingsError("give a token or --no-auth, not both")
    if not is_loopback(host) and not token and not no_auth:
        raise SettingsError(
            f"--host {host} lets other machines search this index: set a token (--token, or the {TOKEN_ENV} "
            "environment variable) or pass --no-auth if it is meant to be open"
        )


class _TimelyH11(H11Protocol):
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


# ---------------------------------------------------------------- the app


def create_app(
    index_path: str | os.PathLike[str],
    embedder: Embedder | None = None,
    *,
    dask_address: str | None = None,
    shard_workers: ShardWorkers = None,
    token: str | None = None,
    cors: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
) -> FastAPI:
    """The HTTP API and search page over the index at ``index_path`` (read-only; see the module docstring).

    Raises :class:`IndexNotFoundError` if there is no index there: a server that would 404 every request does
    not start. ``embedder`` replaces the index's sentence-transformers model, as in :meth:`citeline.Index.open`.
    On a sharded index, ``dask_address`` runs each shard's part of a search on that Dask cluster's workers, and
    ``shard_workers`` pins shards to workers (as in :meth:`citeline.ShardedIndex.open`). ``token``: requests must
    carry it (``Authorization: Bearer``); ``cors``: origins whose pages may call the API from a browser (none by
    default); ``timeout``: seconds a request may take before it is answered 503. (A proxy's path prefix is the
    server's setting: ``serve(root_path=...)``, uvicorn's ``--root-path``.)
    """
    on_dask: dict[str, Any] = {"dask_address": dask_address, "shard_workers": shard_workers} if dask_address else {}
    if shard_workers and not dask_address:
        raise SettingsError("shard_workers pins shards to Dask workers: give dask_address too")
    if not timeout > 0:
        raise SettingsError(f"timeout must be more than 0 seconds, got {timeout!r}")
    reader = _Reader(Index.open(index_path, embedder=embedder, repair=False, **on_dask), timeout)
    # MCP over streamable HTTP at /mcp, behind the same guard (token) as every route, reading through the same reader.
    mcp_endpoint, mcp_lifespan = mcp_server.http_app(
        mcp_server.build_server(reader, LIMITS), loopback_only=token is None
    )
    errors: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (400, 401, 404, 409, 503)}
    app = FastAPI(
        title="citeline",
        summary="Search a citeline index; every passage comes with its provenance.",
        version=_version(),
        responses=errors,
        docs_url=None,
        redoc_url=None,
        lifespan=mcp_lifespan,
    )
    app.add_route("/mcp", mcp_endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    app.add_middleware(_Guard, token=token)
    if cors:
        # Outermost, so that a browser's preflight is answered before the token check (it carries no header).
        app.add_middleware(
            CORSMiddleware, allow_origins=list(cors), allow_methods=["GET"], allow_headers=["Authorization"]
        )
    app.mount("/assets/docs", StaticFiles(directory=_DOC_ASSETS), name="doc-assets")

    @app.exception_handler(CitelineError)
    async def citeline_error(request: Request, exc: CitelineError) -> JSONResponse:
        status = _status_code(exc)
        return _error(status, str(exc), {"Retry-After": "1"} if status == 503 else None)

    @app.exception_handler(ValueError)
    async def value_error(request: Request, exc: ValueError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # A bug: the log has the traceback; the body names no internals (no SQL, no paths).
        return _error(500, f"internal error ({type(exc).__name__}); the server's log has the details")

    @app.get("/search", response_model=SearchResponse, summary="The passages most relevant to q")
    async def search(
        response: Response,
        options: Annotated[dict[str, Any], Depends(search_parameters())],
        filters: Annotated[dict[str, Any], Depends(filter_parameters)],
        offset: Annotated[int, Query(description="Skip this many ranked passages (paging).", ge=0, le=MAX_OFFSET)] = 0,
        facets: Annotated[bool, Query(description=FACETS_HELP)] = False,
    ) -> dict[str, Any]:
        q, k = options.pop("q"), options.pop("k")
        wanted = SearchRequest.of(q, k + offset, filters=filters, **pick(SearchRequest, options))
        found, generation = await reader.run(reader.search, wanted)
        response.headers[GENERATION_HEADER] = str(generation)
        records = [{"rank": rank, **normalize(r.to_dict())} for rank, r in enumerate(found, 1)][offset:]
        mode = options["mode"]
        answer = {"query": q, "mode": mode, "k": k, "offset": offset, "generation": generation, "results": records}
        if facets:
            counted = await reader.run(reader.facets, wanted.filters, found[offset:], FACET_VALUES)
            answer["facets"] = [facet.to_dict() for facet in counted]
        return answer

    @app.get("/facets", response_model=list[FacetModel], summary="Documents per metadata value, for the filters")  # type: ignore[valid-type]
    async def facet_counts(
        filters: Annotated[dict[str, Any], Depends(filter_parameters)],
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many values a field.")] = FACET_VALUES,
    ) -> list[dict[str, Any]]:
        counted = await reader.run(reader.facets, filters, None, limit)
        return [facet.to_dict() for facet in counted]

    @app.get("/status", response_model=IndexStatusModel, summary="Counts, model, generation and the last run")
    async def status() -> dict[str, Any]:
        return await reader.run(lambda deadline: dict(normalize(reader.index.status().to_dict())))

    @app.get("/runs", response_model=list[RunSummaryModel], summary="The run ledger, newest first")  # type: ignore[valid-type]
    async def runs(
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="How many runs.")] = 20,
    ) -> list[dict[str, Any]]:
        return await reader.run(lambda deadline: [normalize(run.to_dict()) for run in reader.index.runs(limit)])

    @app.get("/documents", response_model=list[DocumentRecord], summary="The documents the filters select")  # type: ignore[valid-type]
    async def documents(
        request: Request,
        response: Response,
        filters: Annotated[dict[str, Any], Depends(filter_parameters)],
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many documents.")] = DEFAULT_PAGE,
        offset: Annotated[int, Query(ge=0, le=2**62, description="Skip this many documents (paging).")] = 0,
    ) -> list[dict[str, Any]]:
        rows = await reader.run(lambda deadline: reader.index.documents(filters, limit + 1, offset))
        if len(rows) > limit:  # another page: say where (RFC 8288), as GitHub's API does
            query = [(key, value) for key, value in request.query_params.multi_items() if key != "offset"]
            following = urlencode([*query, ("offset", str(offset + limit))])
            response.headers["Link"] = f'<{request.url.path}?{following}>; rel="next"'
        return [record.to_dict() for record in rows[:limit]]

    @app.get("/documents/{doc_id}", response_model=DocumentDetailModel, summary="One document with its chunk spans")
    async def document(doc_id: Annotated[str, PathParameter(max_length=MAX_ID_CHARS)]) -> dict[str, Any]:
        return await reader.run(lambda deadline: reader.index.document(doc_id).to_dict())

    @app.get("/health", response_model=Health, summary="The index opens")
    async def health(response: Response) -> dict[str, Any]:
        generation = await reader.run(lambda deadline: reader.index.status().generation)
        response.headers[GENERATION_HEADER] = str(generation)
        return {"status": "ok", "generation": generation}

    _add_docs_page(app, "/docs", get_swagger_ui_html, swagger_js_url="swagger/swagger-ui-bundle.js",
                   swagger_css_url="swagger/swagger-ui.css", swagger_favicon_url="fastapi/favicon.png")  # fmt: skip
    _add_docs_page(app, "/redoc", get_redoc_html, redoc_js_url="redoc/redoc.standalone.js",
                   redoc_favicon_url="fastapi/favicon.png", with_google_fonts=False)  # fmt: skip
    web.add_pages(app, reader, LIMITS)
    return app


def _add_docs_page(app: FastAPI, route: str, render: Callable[..., HTMLResponse], **assets: Any) -> None:
    """FastAPI's interactive docs at ``route`` with their assets (paths under /assets/docs) served by the app."""

    @app.get(route, include_in_schema=False)
    async def page(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        urls = {
            name: f"{root}/assets/docs/{value}" if isinstance(value, str) else value for name, value in assets.items()
        }
        return render(openapi_url=f"{root}{app.openapi_url}", title="citeline API", **urls)


def validation_message(exc: RequestValidationError) -> str:
    """The first problem of a request FastAPI refused, as one line naming the parameter."""
    problem = exc.errors()[0]
    name = ".".join(str(part) for part in problem["loc"][1:] if not isinstance(part, int)) or "request"
    if problem.get("type") == "missing":
        return f"Missing parameter {name!r}"
    return f"Invalid value for {name!r}: {problem['msg']} (got {_shown(problem.get('input'))})"


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
    root_path: str = "",
    timeout: float = DEFAULT_TIMEOUT,
    workers: int = 1,
    limit_concurrency: int = DEFAULT_LIMIT_CONCURRENCY,
) -> None:
    """Run the API with uvicorn until interrupted (``citeline serve``); the settings as in :func:`create_app`.

    ``token`` defaults to the ``CITELINE_TOKEN`` environment variable; a host other than a loopback address needs
    a token or ``no_auth`` (:func:`check_bind`). ``workers`` > 1 runs that many processes on one port (uvicorn's
    process manager), each with the index open and its own search slot; ``limit_concurrency`` connections at once
    at most, more are answered 503.
    """
    token = token or os.environ.get(TOKEN_ENV) or None
    check_bind(host, token, no_auth)
    if workers < 1:
        raise SettingsError(f"workers must be at least 1, got {workers}")
    settings = {
        "index_path": str(index_path),
        "dask_address": dask_address,
        "shard_workers": shard_workers,
        "cors": list(cors),
        "timeout": timeout,
    }
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "limit_concurrency": limit_concurrency,
        "timeout_keep_alive": 5,
        "http": _TimelyH11,
        "root_path": root_path,
    }
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
    (``citeline.mcp_server``), reading as :func:`create_app` does; ``ingest_roots`` enables the ``ingest`` tool for
    those roots only. Raises :class:`IndexNotFoundError` before serving if there is no index."""
    roots = mcp_server.allowed_roots(ingest_roots)
    reader = _Reader(Index.open(index_path, embedder=embedder, repair=False), timeout)
    server = mcp_server.build_server(reader, LIMITS, ingest_roots=roots)
    anyio.run(functools.partial(mcp_server.run_stdio, server, drain=timeout))


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
    return create_app(settings.pop("index_path"), token=os.environ.get(TOKEN_ENV) or None, **settings)


def _version() -> str:
    from citeline import __version__

    return __version__
