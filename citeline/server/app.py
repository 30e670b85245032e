"""The FastAPI app of ``citeline serve`` (:func:`create_app`): its routes, the MCP endpoint, the search page, the
interactive API docs served offline, and how each kind of error is answered."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import fastapi_standalone_docs  # type: ignore[import-untyped]
from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi import Path as PathParameter
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from citeline.errors import CitelineError, SettingsError, status_of
from citeline.index import Index
from citeline.model.embedding import Embedder
from citeline.query.plan import SearchRequest
from citeline.server import mcp
from citeline.server.answers import json_answer, search_answer
from citeline.server.guard import Guard, SecurityHeaders
from citeline.server.limits import (
    DEFAULT_PAGE,
    DEFAULT_TIMEOUT,
    GENERATION_HEADER,
    LIMITS,
    MAX_ID_CHARS,
    MAX_PAGE,
)
from citeline.server.metrics import add_metrics
from citeline.server.models import (
    DocumentDetailModel,
    DocumentRecord,
    ErrorResponse,
    FacetModel,
    Health,
    IndexStatusModel,
    RunSummaryModel,
    SearchResponse,
    error_response,
)
from citeline.server.page import add_pages, inline_source
from citeline.server.parameters import FACETS_HELP, filter_parameters, search_parameters
from citeline.server.service import IndexService
from citeline.server.shortcut import QueryRoute
from citeline.sharding.remote import ShardWorkers
from citeline.store.access import TokenFile
from citeline.store.documents import FACET_VALUES
from citeline.util.output import normalize

_DOC_ASSETS = Path(fastapi_standalone_docs.__path__[0]) / "static"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


class _SecuredApp(FastAPI):
    """FastAPI with :class:`SecurityHeaders` around its whole middleware stack, so that every response carries the
    security headers, the 500 answers of Starlette's outermost error middleware included."""

    def build_middleware_stack(self) -> Any:
        return SecurityHeaders(super().build_middleware_stack())


def create_app(
    index_path: str | os.PathLike[str],
    embedder: Embedder | None = None,
    *,
    dask_address: str | None = None,
    shard_workers: ShardWorkers = None,
    token: str | None = None,
    cors: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    tokens: str | os.PathLike[str] | None = None,
    access_log: str = "plain",
) -> FastAPI:
    """The HTTP API and search page over the index at ``index_path`` (read-only; see the module docstring).

    Raises :class:`IndexNotFoundError` if there is no index there: a server that would 404 every request does
    not start. ``embedder`` replaces the index's sentence-transformers model, as in :meth:`citeline.Index.open`.
    On a sharded index, ``dask_address`` runs each shard's part of a search on that Dask cluster's workers, and
    ``shard_workers`` pins shards to workers (as in :meth:`citeline.ShardedIndex.open`). ``token``: requests must
    carry it (``Authorization: Bearer``); ``cors``: origins whose pages may call the API from a browser (none by
    default); ``allowed_hosts``: without a token, the host names (``name`` on any port, or ``name:port``; ``*``
    for any) the server answers to besides its own address and the loopback names on its port (every request's
    ``Host``, and a browser's ``Origin``, must name one: :class:`citeline.server.guard.Guard`); ``timeout``: seconds
    a request may take before it is answered 503. (A proxy's path prefix is the server's setting:
    ``serve(root_path=...)``, uvicorn's ``--root-path``.) ``tokens``: the file of named tokens with scopes
    (``citeline tokens``; default ``tokens.json`` in the index directory, read again whenever it changes:
    ``citeline.server.access``); ``access_log``: ``plain``, ``json`` or ``off`` (``citeline.server.metrics``).
    """
    on_dask: dict[str, Any] = {"dask_address": dask_address, "shard_workers": shard_workers} if dask_address else {}
    if shard_workers and not dask_address:
        raise SettingsError("shard_workers pins shards to Dask workers: give dask_address too")
    if not timeout > 0:
        raise SettingsError(f"timeout must be more than 0 seconds, got {timeout!r}")
    service = IndexService(Index.open(index_path, embedder=embedder, repair=False, **on_dask), timeout)
    named = TokenFile.of_index(index_path, tokens)
    # MCP over streamable HTTP at /mcp, behind the same guard (a token, or Host and Origin) as every route, reading
    # through the same service.
    mcp_endpoint, mcp_lifespan = mcp.http_app(mcp.build_server(service, LIMITS))
    codes = (400, 401, 403, 404, 409, 503)
    errors: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in codes}
    app = _SecuredApp(
        title="citeline",
        summary="Search a citeline index; every passage comes with its provenance.",
        version=_version(),
        responses=errors,
        docs_url=None,
        redoc_url=None,
        lifespan=mcp_lifespan,
    )
    app.add_route("/mcp", mcp_endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    app.add_middleware(Guard, token=token, tokens=named, allowed_hosts=allowed_hosts, cors=cors)
    add_metrics(app, service, access_log)  # outside the guard: refused requests are counted and logged too
    if cors:
        # Outermost, so that a browser's preflight is answered before the token check (it carries no header).
        app.add_middleware(
            CORSMiddleware, allow_origins=list(cors), allow_methods=["GET"], allow_headers=["Authorization"]
        )
    app.mount("/assets/docs", StaticFiles(directory=_DOC_ASSETS), name="doc-assets")

    @app.exception_handler(CitelineError)
    async def citelineerror_response(request: Request, exc: CitelineError) -> JSONResponse:
        status = status_of(exc)
        return error_response(status, str(exc), {"Retry-After": "1"} if status == 503 else None)

    @app.exception_handler(ValueError)
    async def valueerror_response(request: Request, exc: ValueError) -> JSONResponse:
        return error_response(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def httperror_response(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # A bug: the log has the traceback; the body names no internals (no SQL, no paths).
        return error_response(500, f"internal error ({type(exc).__name__}); the server's log has the details")

    async def search(
        response: Response,
        options: Annotated[dict[str, Any], Depends(search_parameters())],
        filters: Annotated[dict[str, Any], Depends(filter_parameters)],
        facets: Annotated[bool, Query(description=FACETS_HELP)] = False,
    ) -> dict[str, Any]:
        q = options.pop("q")
        wanted = SearchRequest.of(q, filters=filters, **options)  # every declared field: search_parameters' names
        answer = await search_answer(service, q, wanted, facets=facets)
        response.headers[GENERATION_HEADER] = str(answer.generation)
        return json_answer(answer)

    # The same answers as a plain route, with one validation of the 15 parameters (citeline.server.shortcut).
    app.router.add_api_route(
        "/search",
        search,
        methods=["GET"],
        response_model=SearchResponse,
        summary="The passages most relevant to q",
        route_class_override=QueryRoute,
    )

    @app.get("/facets", response_model=list[FacetModel], summary="Documents per metadata value, for the filters")  # type: ignore[valid-type]
    async def facet_counts(
        filters: Annotated[dict[str, Any], Depends(filter_parameters)],
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many values a field.")] = FACET_VALUES,
    ) -> list[dict[str, Any]]:
        counted = await service.run(service.facets, filters, None, limit)
        return [facet.to_dict() for facet in counted]

    @app.get("/status", response_model=IndexStatusModel, summary="Counts, model, generation and the last run")
    async def status() -> dict[str, Any]:
        return dict(normalize((await service.run(service.status)).to_dict()))

    @app.get("/runs", response_model=list[RunSummaryModel], summary="The run ledger, newest first")  # type: ignore[valid-type]
    async def runs(
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="How many runs.")] = 20,
    ) -> list[dict[str, Any]]:
        return [normalize(run.to_dict()) for run in await service.run(service.runs, limit)]

    @app.get("/documents", response_model=list[DocumentRecord], summary="The documents the filters select")  # type: ignore[valid-type]
    async def documents(
        request: Request,
        response: Response,
        filters: Annotated[dict[str, Any], Depends(filter_parameters)],
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most this many documents.")] = DEFAULT_PAGE,
        offset: Annotated[int, Query(ge=0, le=2**62, description="Skip this many documents (paging).")] = 0,
    ) -> list[dict[str, Any]]:
        rows = await service.run(service.documents, filters, limit + 1, offset)
        if len(rows) > limit:  # another page: say where (RFC 8288), as GitHub's API does
            query = [(key, value) for key, value in request.query_params.multi_items() if key != "offset"]
            following = urlencode([*query, ("offset", str(offset + limit))])
            response.headers["Link"] = f'<{request.url.path}?{following}>; rel="next"'
        return [record.to_dict() for record in rows[:limit]]

    @app.get("/documents/{doc_id}", response_model=DocumentDetailModel, summary="One document with its chunk spans")
    async def document(doc_id: Annotated[str, PathParameter(max_length=MAX_ID_CHARS)]) -> dict[str, Any]:
        return (await service.run(service.document, doc_id)).to_dict()

    @app.get("/health", response_model=Health, summary="The index opens")
    async def health(response: Response) -> dict[str, Any]:
        generation = (await service.run(service.status)).generation
        response.headers[GENERATION_HEADER] = str(generation)
        return {"status": "ok", "generation": generation}

    _add_docs_page(app, "/docs", get_swagger_ui_html, swagger_js_url="swagger/swagger-ui-bundle.js",
                   swagger_css_url="swagger/swagger-ui.css", swagger_favicon_url="fastapi/favicon.png")  # fmt: skip
    _add_docs_page(app, "/redoc", get_redoc_html, redoc_js_url="redoc/redoc.standalone.js",
                   redoc_favicon_url="fastapi/favicon.png", with_google_fonts=False)  # fmt: skip
    add_pages(app, service, LIMITS)
    return app


def _add_docs_page(app: FastAPI, route: str, render: Callable[..., HTMLResponse], **assets: Any) -> None:
    """FastAPI's interactive docs at ``route`` with their assets (paths under /assets/docs) served by the app, under
    a Content-Security-Policy of their own: scripts from the server and the page's own inline script (by its hash),
    styles from the server and inline (Redoc writes its styles into the page), images from the server or
    ``data:`` URLs, requests to the server only (the schema, "Try it out"), workers from ``blob:`` (Redoc)."""

    @app.get(route, include_in_schema=False)
    async def page(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        urls = {
            name: f"{root}/assets/docs/{value}" if isinstance(value, str) else value for name, value in assets.items()
        }
        html = render(openapi_url=f"{root}{app.openapi_url}", title="citeline API", **urls)
        scripts = " ".join(inline_source(text) for text in _INLINE_SCRIPT.findall(bytes(html.body).decode()))
        html.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'self' {scripts}; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'"
        )
        return html


def validation_message(exc: RequestValidationError) -> str:
    """The first problem of a request FastAPI refused, as one line naming the parameter."""
    problem = exc.errors()[0]
    name = ".".join(str(part) for part in problem["loc"][1:] if not isinstance(part, int)) or "request"
    if problem.get("type") == "missing":
        return f"Missing parameter {name!r}"
    return f"Invalid value for {name!r}: {problem['msg']} (got {_shown(problem.get('input'))})"


def _shown(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error line echoes what it got, never a whole request."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _version() -> str:
    from citeline import __version__

    return __version__
