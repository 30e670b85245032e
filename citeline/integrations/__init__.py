"""Adapters from :class:`citeline.Index` to the retriever interfaces of other frameworks.

``citeline.integrations.langchain`` (``pip install "citeline[langchain]"``) and
``citeline.integrations.llamaindex`` (``pip install "citeline[llamaindex]"``). Both put the same provenance in
their objects' metadata: :func:`provenance` builds it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from citeline.util.formats import normalize

if TYPE_CHECKING:
    from citeline.index import Index
    from citeline.query.results import SearchResult
    from citeline.store.filters import Filters

__all__ = ["PROVENANCE_KEYS", "provenance", "search"]

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
    "content_hash",
    "run_id",
    "ingested_at",
    "model",
    "score",
    "other_sources",
)

# One lock per Index: a search reads the index's in-memory snapshot (one DuckDB connection, replaced after a
# commit), which is not safe to use from two threads at once, and async retrievers run searches on threads.
_LOCKS: weakref.WeakKeyDictionary[Index, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def search(
    index: Index,
    query: str,
    *,
    k: int,
    mode: str,
    filters: Filters | Mapping[str, Any] | None,
    collapse: bool,
) -> list[SearchResult]:
    """``index.search(...)``, one search at a time per index, so that threads (and async callers) can share it."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(index, threading.Lock())
    with lock:
        return index.search(query, k, mode=mode, filters=filters, collapse=collapse)


def provenance(result: SearchResult) -> dict[str, Any]:
    """A search result's provenance as flat, JSON-ready metadata (keys :data:`PROVENANCE_KEYS`).

    ``other_sources`` lists the other documents of a collapsed result (each with its own offsets, score and
    ``shared_start``/``shared_end``); ``highlights`` and the document's own ``metadata`` (as
    ``document_metadata``, so that its keys cannot shadow provenance) are included when the result has them.
    """
    meta: dict[str, Any] = {key: getattr(result, key) for key in PROVENANCE_KEYS if key != "other_sources"}
    meta["other_sources"] = [source.to_dict() for source in result.sources[1:]]
    # getattr: SearchResult gains these fields in the restructuring; the adapters carry them as soon as it does.
    highlights = getattr(result, "highlights", None)
    if highlights is not None:
        meta["highlights"] = highlights
    document_metadata = getattr(result, "metadata", None)
    if document_metadata is not None:
        meta["document_metadata"] = document_metadata
    return dict(normalize(meta))
