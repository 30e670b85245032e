"""The query parameters of ``GET /search``, ``/facets`` and ``/documents``: the filters named as the CLI's
flags, and the search's generated from :class:`citeline.SearchRequest`'s declared fields, bounded by the server's
limits."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Query
from pydantic import Field

from citeline.server.limits import MAX_FILTER_VALUES, MAX_K, MAX_OFFSET, MAX_QUERY_CHARS
from citeline.server.models import Mode
from citeline.server.page import request_parameters
from citeline.store.filters import FilterOptions, filters_from
from citeline.util.declared import offered

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


def _dependency(
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
filter_parameters = _dependency(
    [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind)
        for name, kind in FILTER_PARAMETERS.items()
    ],
    filters_from,
)


#: The server's bounds of the request's numbers and text, tighter than the declared ones (``citeline.server.limits``).
SERVER_BOUNDS = {"k": MAX_K, "offset": MAX_OFFSET, "query_chars": MAX_QUERY_CHARS}


def search_parameters() -> Callable[..., Awaitable[dict[str, Any]]]:
    """``GET /search``'s query parameters, generated from the declared fields of :class:`citeline.SearchRequest`
    (:func:`citeline.server.page.request_parameters`, as the search page's): its type, default, bounds, choices and
    help; ``q`` is the query's text, the filters are :data:`filter_parameters`, and the server's own bounds apply
    (:data:`SERVER_BOUNDS`); the mode is the ``Mode`` schema the response names too. A coroutine, as
    :func:`_dependency`'s are."""
    given = request_parameters(SERVER_BOUNDS, kinds={"mode": Mode})
    return _dependency(list(inspect.signature(given).parameters.values()), given)


#: ``GET /search``'s ``facets`` parameter (the page shows them always).
FACETS_HELP = (
    "Add the facet counts of this answer's documents: for each metadata field, the documents per value (the most "
    "frequent first), as GET /facets gives them for the filters alone."
)
