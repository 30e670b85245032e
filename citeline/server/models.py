"""What the API answers: response models generated from the Python objects' dataclasses (so the OpenAPI schema
names exactly their fields), and the one form of every error."""

from __future__ import annotations

import dataclasses
import enum
import types
from typing import Any, Union, get_args, get_origin, get_type_hints

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, create_model

from citeline.query.plan import MODES
from citeline.query.results import SearchResult
from citeline.store.catalog import IndexStatus
from citeline.store.documents import DocumentDetail, DocumentInfo, Facet
from citeline.store.ledger import RunSummary

#: The search modes, an enum so that the OpenAPI schema lists them.
Mode = enum.StrEnum("Mode", [(mode, mode) for mode in MODES])  # type: ignore[misc]

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


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An error answer: ``{"error": "<one line>"}`` with ``status`` (and ``headers``)."""
    return JSONResponse({"error": " ".join(message.split())}, status_code=status, headers=headers)
