"""The query parameters of ``GET /search``, ``/facets`` and ``/documents``: the filters named as the CLI's
flags, and the search's generated from :class:`citeline.SearchRequest`'s declared fields, bounded by the server's
limits (the search page's too: :func:`request_parameters` with ``people``)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Literal, get_type_hints

from fastapi import Query
from pydantic import BeforeValidator, Field

from citeline.query.plan import SearchRequest
from citeline.server.limits import MAX_FILTER_VALUES, MAX_K, MAX_OFFSET, MAX_QUERY_CHARS
from citeline.server.models import Mode
from citeline.store.filters import FilterOptions, filters_from
from citeline.util.declared import offered, people_default

# ---------------------------------------------------------------- requests


def _filter_parameter(spec: Any) -> Any:
    # A declared filter option (FilterOptions) as a query parameter: a list bounded by MAX_FILTER_VALUES, or a date.
    meta = spec.metadata
    if isinstance(spec.default, tuple):
        value = Annotated[str, Field(max_length=MAX_QUERY_CHARS)]
        return Annotated[list[value] | None, Query(description=meta["help"], max_length=MAX_FILTER_VALUES)]
    date = Annotated[str | None, Field(max_length=meta["maximum"])]
    return Annotated[date, Query(description=meta["help"])]


#: The filter options as query parameters, generated from :class:`citeline.store.filters.FilterOptions`.
FILTER_PARAMETERS = {spec.name: _filter_parameter(spec) for spec in offered(FilterOptions)}


def dependency(
    parameters: list[inspect.Parameter], make: Callable[..., dict[str, Any]] = dict
) -> Callable[..., Awaitable[dict[str, Any]]]:
    """A FastAPI dependency taking ``parameters`` (query parameters) and answering ``make(**values)``.

    A coroutine, run on the event loop: FastAPI runs a plain function dependency on a worker thread, a hand-off
    and back for a few microseconds of work (``make`` reads the parameters it is given, nothing else)."""

    async def values(**given: Any) -> dict[str, Any]:
        return make(**given)

    values.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # what FastAPI reads
    return values


#: ``GET /search``'s and ``GET /documents``' filter parameters, answering the filters they select.
filter_parameters = dependency(
    [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
        for name, kind in FILTER_PARAMETERS.items()
    ],
    filters_from,
)


def blank_to_none(value: str | None) -> str | None:
    """None for a form's empty (or blank) field, else its text."""
    return value if value and value.strip() else None


def request_parameters(
    bounds: Mapping[str, int], *, people: bool = False, kinds: Mapping[str, Any] | None = None
) -> Callable[..., Awaitable[dict[str, Any]]]:
    """A FastAPI dependency (:func:`dependency`) taking :class:`~citeline.SearchRequest`'s declared fields as query
    parameters and answering them by the request's names (``q`` is the query's text; ``filters`` are left to the
    caller, as ``GET /documents`` takes them too): each one's type, default, bounds, choices and help as declared
    there, its maximum lowered to ``bounds``' (the server's limits, never looser). ``people``: the search page's
    parameters (the defaults of the surfaces people read, ``q`` optional, a form's empty number field none);
    ``kinds``: a field's annotation instead of the declared one (the HTTP API's ``Mode`` enum)."""
    hints, keyword, kinds = get_type_hints(SearchRequest), inspect.Parameter.KEYWORD_ONLY, kinds or {}
    parameters: list[inspect.Parameter] = []
    for spec in offered(SearchRequest):
        if spec.name == "filters":
            continue
        meta, annotation = spec.metadata, hints[spec.name]
        limits: dict[str, Any] = {"ge": meta["minimum"], "le": meta["maximum"]}
        default = people_default(spec) if people else spec.default
        if spec.name in bounds:
            limits["le"] = min(bounds[spec.name], meta["maximum"])
        if spec.name == "text":
            limits, annotation = {"min_length": 1, "max_length": bounds["query_chars"]}, str
            if people:
                annotation, limits["min_length"], default = str | None, 0, None
        if "choices" in meta:  # an enum in the OpenAPI schema
            annotation = kinds.get(spec.name, Literal[tuple(meta["choices"])])
        default = inspect.Parameter.empty if default is dataclasses.MISSING else default
        kind: Any = Annotated[annotation, Query(description=meta["help"], **limits)]
        if people and default is None and spec.name != "text":  # a form's empty field: none
            number = Annotated[float, Field(ge=limits["ge"], le=limits["le"])]  # the bounds on the number itself
            kind = Annotated[number | None, BeforeValidator(blank_to_none), Query(description=meta["help"])]
        name = "q" if spec.name == "text" else spec.name
        parameters.append(inspect.Parameter(name, keyword, default=default, annotation=kind))
    return dependency(parameters)


#: The server's bounds of the request's numbers and text, tighter than the declared ones (``citeline.server.limits``).
SERVER_BOUNDS = {"k": MAX_K, "offset": MAX_OFFSET, "query_chars": MAX_QUERY_CHARS}


def search_parameters() -> Callable[..., Awaitable[dict[str, Any]]]:
    """``GET /search``'s query parameters, generated from the declared fields of :class:`citeline.SearchRequest`
    (:func:`request_parameters`, as the search page's): its type, default, bounds, choices and help; ``q`` is the
    query's text, the filters are :data:`filter_parameters`, and the server's own bounds apply
    (:data:`SERVER_BOUNDS`); the mode is the ``Mode`` schema the response names too."""
    return request_parameters(SERVER_BOUNDS, kinds={"mode": Mode})


#: ``GET /search``'s ``facets`` parameter (the page shows them always).
FACETS_HELP = (
    "Add the facet counts of this answer's documents: for each metadata field, the documents per value (the most "
    "frequent first), as GET /facets gives them for the filters alone."
)
