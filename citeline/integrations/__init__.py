"""Adapters from :class:`citeline.Index` to the retriever interfaces of other frameworks.

``citeline.integrations.langchain`` (``pip install "citeline[langchain]"``) and
``citeline.integrations.llamaindex`` (``pip install "citeline[llamaindex]"``). Both put the same provenance in
their objects' metadata: :func:`provenance` builds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from citeline.errors import QueryError
from citeline.query.plan import SearchRequest
from citeline.util.declared import offered
from citeline.util.output import flat, normalize

if TYPE_CHECKING:
    from citeline.index import Index
    from citeline.query.results import SearchResult


__all__ = [
    "OPTION_ALIASES",
    "PROVENANCE_KEYS",
    "SEARCH_OPTIONS",
    "flat",
    "options_of",
    "provenance",
    "search",
    "settings_of",
]

#: Metadata keys every adapter's objects carry (``highlights`` and ``document_metadata`` too when the result has
#: them).
PROVENANCE_KEYS = (
    "doc_id",
    "source_path",
    "source_id",
    "title",
    "chunk_id",
    "ordinal",
    "char_start",
    "char_end",
    "page",
    "first_page",
    "last_page",
    "content_hash",
    "run_id",
    "ingested_at",
    "model",
    "score",
    "relevance",
    "record_id",
    "other_sources",
    "more_passages",
)

#: The options a retriever passes to :meth:`citeline.Index.search`, set at construction and per call: the declared
#: fields of :class:`~citeline.SearchRequest` but its text.
SEARCH_OPTIONS = tuple(spec.name for spec in offered(SearchRequest) if spec.name != "text")
#: Names other retrievers use for them: LangChain vector-store retrievers' ``filter`` and ``score_threshold``,
#: LlamaIndex's ``similarity_top_k``.
OPTION_ALIASES = {"filter": "filters", "score_threshold": "min_score", "similarity_top_k": "k"}


def options_of(defaults: Mapping[str, Any], *overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A retriever's search options: ``defaults`` (its settings) updated by each of ``overrides`` in turn
    (``search_kwargs``, then a call's keyword arguments), aliases resolved; an unknown key is a :class:`QueryError`
    naming the ones there are."""
    options = dict(defaults)
    for override in overrides:
        for key, value in override.items():
            name = OPTION_ALIASES.get(key, key)
            if name not in SEARCH_OPTIONS:
                raise QueryError(
                    f"unknown search option {key!r}; a retriever takes {', '.join(SEARCH_OPTIONS)} "
                    f"(or {', '.join(OPTION_ALIASES)})"
                )
            options[name] = value
    return options


def search(index: Index, query: str, **options: Any) -> list[SearchResult]:
    """``index.search(...)`` of the :class:`~citeline.SearchRequest` the options make (the index serialises its
    searches itself, so threads and async callers can share it)."""
    return index.search(SearchRequest.of(query, **options))


def settings_of(retriever: Any, given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A retriever's search options: its attribute of each option's name where it has one (``k``, ``mode``, ...),
    else the option ``given`` at construction, else the declared default."""
    given = given or {}
    return {
        spec.name: getattr(retriever, spec.name, given.get(spec.name, spec.default))
        for spec in offered(SearchRequest)
        if spec.name != "text"
    }


def provenance(result: SearchResult) -> dict[str, Any]:
    """A search result's provenance as flat, JSON-ready metadata (keys :data:`PROVENANCE_KEYS`).

    ``other_sources`` lists the other documents of a collapsed result (each with its own offsets, score and
    ``shared_start``/``shared_end``), ``more_passages`` the document's other passages of a grouped result;
    ``highlights`` and the document's own ``metadata`` (as ``document_metadata``, so that its keys cannot shadow
    provenance) are included.
    """
    lists = ("other_sources", "more_passages")
    meta: dict[str, Any] = {key: getattr(result, key) for key in PROVENANCE_KEYS if key not in lists}
    meta["other_sources"] = [source.to_dict() for source in result.sources[1:]]
    meta["more_passages"] = [passage.to_dict() for passage in result.more_passages]
    meta["highlights"] = result.highlights
    meta["document_metadata"] = result.metadata
    return dict(normalize(meta))
