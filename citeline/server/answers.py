"""The one search answer every served surface gives: ``GET /search`` (JSON), the search page (HTML) and the MCP
``search`` tool (structured content and text) each run :func:`search_answer` and render its :class:`Answer`.

An answer is the request as understood, the generation it was read from, and its records best first: each a result
with its rank (``offset + 1`` on), the other documents its passage is also in (each marked when it is a copy of the
result's work: ``citeline.query.works``), and, asked for, the facet counts of the answer's documents. What differs
between the surfaces is only how they show it: the JSON record is the result's own fields, the page cuts the passage
around its highlighted sentence and links each document, MCP cites each passage by a ``citeline://`` URI.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from citeline.query.plan import SearchRequest
from citeline.query.results import SearchResult, Source
from citeline.server.service import ServedIndex
from citeline.store.documents import FACET_VALUES, Facet
from citeline.util.output import normalize

__all__ = ["AlsoIn", "Answer", "Record", "json_answer", "records_of", "search_answer"]


@dataclasses.dataclass(frozen=True)
class AlsoIn:
    """Another document that holds a result's passage (collapsed into it), and whether it is a copy of the result's
    work (the same work in another form: ``citeline.query.works``)."""

    source: Source
    same_work: bool


@dataclasses.dataclass(frozen=True)
class Record:
    """One result of an answer: its rank (1-based, ``offset + 1`` on) and the other documents its passage is in."""

    rank: int
    result: SearchResult
    also_in: tuple[AlsoIn, ...]

    @property
    def copies(self) -> int:
        """How many of :attr:`also_in` are copies of the result's work."""
        return sum(1 for other in self.also_in if other.same_work)


@dataclasses.dataclass(frozen=True)
class Answer:
    """A search's answer as every surface gives it: ``query`` (the text as the caller gave it), the ``request``
    that ran, the ``generation`` it was read from, its ``records`` best first, the facet counts of their documents
    (None unless asked for) and whether a next page has results (``more``, when the search looked ahead)."""

    query: str
    request: SearchRequest
    generation: int
    records: tuple[Record, ...]
    facets: tuple[Facet, ...] | None = None
    more: bool = False

    @property
    def documents(self) -> int:
        """The documents the records' passages are in (their own and the others'), each counted once."""
        return len({doc for r in self.records for doc in (r.result.doc_id, *(s.doc_id for s in r.result.sources))})


def also_in(result: SearchResult) -> tuple[AlsoIn, ...]:
    """The other places ``result``'s passage is in: its sources but its own passage, in their order (the shown copy
    first, then the others in rank order: ``citeline.query.collapse`` and ``works``)."""
    own = (result.doc_id, result.char_start)
    return tuple(
        AlsoIn(source, result.work_id is not None and source.work_id == result.work_id)
        for source in result.sources
        if (source.doc_id, source.char_start) != own
    )


def records_of(results: list[SearchResult], offset: int = 0) -> tuple[Record, ...]:
    """``results`` as an answer's records, ranked from ``offset + 1``."""
    return tuple(Record(rank, result, also_in(result)) for rank, result in enumerate(results, offset + 1))


async def search_answer(
    served: ServedIndex, query: str, request: SearchRequest, *, facets: bool = False, look_ahead: bool = False
) -> Answer:
    """Run ``request`` (whose text is ``query``) on ``served`` as the request's caller, and answer it. ``facets``:
    count the answer's documents per metadata value too (``Index.facets`` within the results, under the request's
    filters); ``look_ahead``: ask one result more than ``request.k``, to say whether a next page has any
    (:attr:`Answer.more`; the page's "next" link)."""
    asked = dataclasses.replace(request, k=request.k + 1) if look_ahead else request
    found, generation = await served.run(served.search, asked)
    shown = found[: request.k]
    counted = None
    if facets:
        counted = tuple(await served.run(served.facets, request.filters, shown, FACET_VALUES)) if shown else ()
    return Answer(query, request, generation, records_of(shown, request.offset), counted, len(found) > len(shown))


def json_answer(answer: Answer) -> dict[str, Any]:
    """``GET /search``'s answer (``SearchResponse``): each record the result's fields with its rank, the facets
    when they were counted."""
    request = answer.request
    out: dict[str, Any] = {
        "query": answer.query,
        "mode": request.mode,
        "k": request.k,
        "offset": request.offset,
        "generation": answer.generation,
        "results": [{"rank": record.rank, **normalize(record.result)} for record in answer.records],
    }
    if answer.facets is not None:
        out["facets"] = [facet.to_dict() for facet in answer.facets]
    return out
