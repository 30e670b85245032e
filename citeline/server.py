"""``citeline serve``: a read-only HTTP API over one index (FastAPI, run with uvicorn).

GET ``/search``, ``/status``, ``/runs``, ``/documents``, ``/documents/{doc_id}`` and ``/health``; query parameters
have the names of the CLI's flags (``q``, ``k``, ``mode``, ``source``, ``path``, ``where``, ``ingested_after``,
``ingested_before``, ``collapse``, ``limit``), and the response models are generated from the Python objects'
dataclasses (``SearchResult``, ``RunSummary``, ``IndexStatus``), so the OpenAPI schema at ``/openapi.json`` names
exactly their fields. Errors are ``{"error": "<the line the CLI prints>"}`` with 400 for a bad request, 404 for
an unknown document or index, 409 when the index stayed locked by a commit, 500 otherwise.

The server never takes the writer lock: the index is opened with ``repair=False`` and every read goes through a
read-only connection or the search snapshot, which reloads itself after a commit, so ``citeline ingest`` can run
beside it and the next query sees the new generation without a restart.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import types
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, create_model
from starlette.exceptions import HTTPException as StarletteHTTPException

from citeline.errors import CitelineError, IndexLockedError, IndexNotFoundError, QueryError, SettingsError
from citeline.index import Index
from citeline.integrations import search as locked_search
from citeline.model.embedding import Embedder
from citeline.query.plan import DEFAULT_MODE
from citeline.query.results import SearchResult
from citeline.sharding.remote import ShardWorkers
from citeline.store.catalog import IndexStatus
from citeline.store.filters import where_meta
from citeline.store.ledger import RunSummary
from citeline.util.formats import normalize

__all__ = ["create_app", "filters_from_params", "model_of", "serve"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

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


class SearchResponse(BaseModel):
    """The answer to ``GET /search``: the request as understood, and the results best first."""

    query: str
    mode: str
    k: int
    results: list[SearchResultModel]  # type: ignore[valid-type]


class DocumentRecord(BaseModel):
    """One document of ``GET /documents`` (``Index.documents``)."""

    doc_id: str
    source_path: str
    source_id: str
    source_root: str
    title: str
    format: str
    chunks: int
    pages: int | None
    encoding: str | None
    size_bytes: int | None
    content_hash: str
    run_id: str
    ingested_at: str
    metadata: dict[str, Any]


class ChunkSpan(BaseModel):
    """Where one chunk of a document lies in its text."""

    chunk_id: int
    ordinal: int
    char_start: int
    char_end: int
    page: int | None


class DocumentDetail(DocumentRecord):
    """``GET /documents/{doc_id}``: the document, its text (what offsets index into) and its chunks' spans."""

    text: str
    spans: list[ChunkSpan]


class Health(BaseModel):
    """``GET /health``: the index opens and is at this generation."""

    status: str
    generation: int


class ErrorResponse(BaseModel):
    """Every error: the one line the CLI prints for the same problem."""

    error: str


# ---------------------------------------------------------------- requests

# The filter parameters of /search and /documents, named as the CLI's flags.
SourceParam = Annotated[list[str] | None, Query(description="Only this ingested folder or file (or a source id).")]
PathParam = Annotated[list[str] | None, Query(description="Only documents whose source id or path matches this glob.")]
WhereParam = Annotated[
    list[str] | None,
    Query(description="KEY=VALUE: only documents whose metadata KEY is VALUE; also KEY!=VALUE, KEY~TEXT, KEY>=VALUE "
          "(>, <, <=) and 'KEY in A,B', as the CLI's --where."),
]  # fmt: skip
AfterParam = Annotated[str | None, Query(description="Only documents ingested at or after this date (ISO 8601).")]
BeforeParam = Annotated[str | None, Query(description="Only documents ingested before this date (ISO 8601).")]


def filters_from_params(
    source: list[str] | None = None,
    path: list[str] | None = None,
    where: list[str] | None = None,
    ingested_after: str | None = None,
    ingested_before: str | None = None,
) -> dict[str, Any]:
    """The filter dict of :meth:`citeline.Index.search` from the CLI's flag values (``where`` as the CLI's
    ``--where``: ``KEY=VALUE``, ``KEY>=VALUE``, ``KEY~TEXT``, ``KEY in A,B``, ...; see
    :func:`citeline.store.filters.where_meta`). Raises :class:`QueryError` for a malformed ``where``."""
    try:
        meta = where_meta(where or [])
    except QueryError as exc:
        raise QueryError(f"Invalid value for where: {exc}") from None
    candidates = {
        "source": list(source or []),
        "path_glob": list(path or []),
        "meta": meta,
        "ingested_after": ingested_after,
        "ingested_before": ingested_before,
    }
    return {key: value for key, value in candidates.items() if value}


class _Reader:
    """The served index, opened on first use (so a server can start before the index exists) and then kept:
    its search snapshot reloads itself after every commit."""

    def __init__(self, path: Path, embedder: Embedder | None, on_dask: dict[str, Any]):
        self.path = path
        self.embedder = embedder
        self.on_dask = on_dask  #: ``dask_address`` and ``shard_workers`` of a sharded index searched on Dask
        self._index: Index | None = None
        self._lock = threading.Lock()

    def index(self) -> Index:
        with self._lock:
            if self._index is None:
                self._index = Index.open(self.path, embedder=self.embedder, repair=False, **self.on_dask)
            return self._index


def _status_code(exc: BaseException) -> int:
    if isinstance(exc, QueryError | ValueError):
        return 400
    if isinstance(exc, IndexNotFoundError):
        return 404
    if isinstance(exc, IndexLockedError):
        return 409
    return 500


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)


# ---------------------------------------------------------------- the app


def create_app(
    index_path: str | os.PathLike[str],
    embedder: Embedder | None = None,
    *,
    dask_address: str | None = None,
    shard_workers: ShardWorkers = None,
) -> FastAPI:
    """The HTTP API over the index at ``index_path`` (read-only; see the module docstring).

    ``embedder`` replaces the index's sentence-transformers model, as in :meth:`citeline.Index.open`. On a sharded
    index, ``dask_address`` runs each shard's part of a search on that Dask cluster's workers, and
    ``shard_workers`` pins shards to workers (as in :meth:`citeline.ShardedIndex.open`).
    """
    on_dask = {"dask_address": dask_address, "shard_workers": shard_workers} if dask_address else {}
    if shard_workers and not dask_address:
        raise SettingsError("shard_workers pins shards to Dask workers: give dask_address too")
    reader = _Reader(Path(index_path), embedder, on_dask)
    errors: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (400, 404, 409, 500)}
    app = FastAPI(
        title="citeline",
        summary="Search a citeline index; every passage comes with its provenance.",
        version=_version(),
        responses=errors,
    )

    @app.exception_handler(CitelineError)
    async def citeline_error(request: Request, exc: CitelineError) -> JSONResponse:
        return _error(_status_code(exc), str(exc))

    @app.exception_handler(ValueError)
    async def value_error(request: Request, exc: ValueError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problem = exc.errors()[0]
        name = ".".join(str(part) for part in problem["loc"][1:]) or "request"
        if problem.get("type") == "missing":
            return _error(400, f"Missing parameter {name!r}")
        return _error(400, f"Invalid value for {name!r}: {problem['msg']} (got {problem.get('input')!r})")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return _error(500, f"{type(exc).__name__}: {exc}")

    @app.get("/search", response_model=SearchResponse, summary="The passages most relevant to q")
    def search(
        q: Annotated[str, Query(description="What to look for.")],
        k: Annotated[int, Query(description="Number of passages.")] = 10,
        mode: Annotated[str, Query(description="hybrid, dense or lexical.")] = DEFAULT_MODE,
        source: SourceParam = None,
        path: PathParam = None,
        where: WhereParam = None,
        ingested_after: AfterParam = None,
        ingested_before: BeforeParam = None,
        collapse: Annotated[bool, Query(description="Near-duplicates as one result listing each source.")] = True,
        min_score: Annotated[
            float | None,
            Query(
                ge=0,
                le=1,
                description="Drop passages whose relevance (0-1) is lower; 0 keeps all [default: none, unless all "
                "are below the calibrated floor].",
            ),
        ] = None,
    ) -> dict[str, Any]:
        filters = filters_from_params(source, path, where, ingested_after, ingested_before)
        results = locked_search(
            reader.index(), q, k=k, mode=mode, filters=filters, collapse=collapse, min_score=min_score
        )
        records = [{"rank": rank, **normalize(result.to_dict())} for rank, result in enumerate(results, 1)]
        return {"query": q, "mode": mode, "k": k, "results": records}

    @app.get("/status", response_model=IndexStatusModel, summary="Counts, model, generation and the last run")
    def status() -> dict[str, Any]:
        return dict(normalize(reader.index().status().to_dict()))

    @app.get("/runs", response_model=list[RunSummaryModel], summary="The run ledger, newest first")  # type: ignore[valid-type]
    def runs(limit: Annotated[int, Query(ge=1, description="How many runs.")] = 20) -> list[dict[str, Any]]:
        return [normalize(run.to_dict()) for run in reader.index().runs(limit=limit)]

    @app.get("/documents", response_model=list[DocumentRecord], summary="The documents the filters select")
    def documents(
        source: SourceParam = None,
        path: PathParam = None,
        where: WhereParam = None,
        ingested_after: AfterParam = None,
        ingested_before: BeforeParam = None,
        limit: Annotated[int | None, Query(description="At most this many documents.")] = None,
    ) -> list[dict[str, Any]]:
        filters = filters_from_params(source, path, where, ingested_after, ingested_before)
        return [record.to_dict() for record in reader.index().documents(filters=filters, limit=limit)]

    @app.get("/documents/{doc_id}", response_model=DocumentDetail, summary="One document with its chunk spans")
    def document(doc_id: str) -> dict[str, Any]:
        return reader.index().document(doc_id).to_dict()

    @app.get("/health", response_model=Health, summary="The index opens")
    def health() -> dict[str, Any]:
        return {"status": "ok", "generation": reader.index().status().generation}

    return app


def serve(
    index_path: str | os.PathLike[str],
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    embedder: Embedder | None = None,
    log_level: str = "info",
    dask_address: str | None = None,
    shard_workers: ShardWorkers = None,
) -> None:
    """Run the API with uvicorn until interrupted (``citeline serve``); ``dask_address`` and ``shard_workers`` as
    in :func:`create_app`."""
    import uvicorn

    app = create_app(index_path, embedder, dask_address=dask_address, shard_workers=shard_workers)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def _version() -> str:
    from citeline import __version__

    return __version__
