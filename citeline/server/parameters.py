"""The query parameters of ``GET /search``, ``/facets`` and ``/documents``: the filters named as the CLI's
flags, and the search's generated from :class:`citeline.SearchRequest`'s declared fields, bounded by the server's
limits."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Query
from pydantic import Field

from citeline.server.limits import MAX_FILTER_VALUES, MAX_K, MAX_OFFSET, MAX_QUERY_CHARS
from citeline.server.models import Mode
from citeline.store.filters import filters_from
from citeline.web import request_parameters

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


#: The server's bounds of the request's numbers and text, tighter than the declared ones (``citeline.server.limits``).
SERVER_BOUNDS = {"k": MAX_K, "offset": MAX_OFFSET, "query_chars": MAX_QUERY_CHARS}


def search_parameters() -> Callable[..., dict[str, Any]]:
    """``GET /search``'s query parameters, generated from the declared fields of :class:`citeline.SearchRequest`
    (:func:`citeline.web.request_parameters`, as the search page's): its type, default, bounds, choices and help;
    ``q`` is the query's text, the filters are :data:`filter_parameters`, and the server's own bounds apply
    (:data:`SERVER_BOUNDS`); the mode is the ``Mode`` schema the response names too."""
    return request_parameters(SERVER_BOUNDS, kinds={"mode": Mode})


#: ``GET /search``'s ``facets`` parameter (the page shows them always).
FACETS_HELP = (
    "Add the facet counts of this answer's documents: for each metadata field, the documents per value (the most "
    "frequent first), as GET /facets gives them for the filters alone."
)
