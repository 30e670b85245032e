"""A LangChain retriever over a citeline index: ``pip install "citeline[langchain]"``.

>>> from citeline import Index
>>> from citeline.integrations.langchain import CitelineRetriever
>>> retriever = CitelineRetriever(index=Index.open("index"), k=5, filters={"source": "seeds"})
>>> docs = retriever.invoke("why did soldiers defect", k=3)  # per call: k, mode, filters, collapse, min_score, group
>>> docs[0].metadata["source_path"], docs[0].metadata["char_start"], docs[0].metadata["char_end"]
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import Field
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'citeline.integrations.langchain needs langchain-core: pip install "citeline[langchain]"'
    ) from exc

from citeline.index import Index
from citeline.integrations import flat, options_of, provenance, search, settings_of
from citeline.model.embedding import Embedder
from citeline.query.plan import DEFAULT_K, DEFAULT_MODE
from citeline.query.results import SearchResult

__all__ = ["CitelineRetriever", "to_document"]


class CitelineRetriever(BaseRetriever):
    """Passages of a citeline index as LangChain ``Document`` objects, best first.

    ``k``, ``mode`` (``hybrid``, ``dense``, ``lexical``), ``filters`` (as :meth:`citeline.Index.search` takes
    them), ``collapse``, ``min_score`` (the relevance floor; None: the calibrated default, which answers a query
    that matches nothing with no documents) and ``group`` (one document per result, its other passages in
    ``metadata["more_passages"]``; off by default: k passages, each its own document, as LangChain's retrievers
    return) pass through to :meth:`citeline.Index.search`. Each can be given at
    construction, in ``search_kwargs`` (as LangChain's vector-store retrievers take it; ``filter`` and
    ``score_threshold`` are read as ``filters`` and ``min_score``), or per call: ``retriever.invoke(query, k=3)``;
    a call's options win over ``search_kwargs``, which win over the fields.

    Each document's ``page_content`` is the passage text, its ``id`` the chunk id, its ``metadata`` the passage's
    provenance (:func:`citeline.integrations.provenance`); ``flat_metadata=True`` flattens it for vector stores
    that only store scalar metadata (:func:`citeline.integrations.flat`). The async methods run the search on a
    thread.
    """

    index: Index
    k: int = DEFAULT_K
    mode: str = DEFAULT_MODE
    filters: dict[str, Any] | None = None
    collapse: bool = True
    min_score: float | None = None
    group: bool = False
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    flat_metadata: bool = False

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], *, embedder: Embedder | None = None, **settings: Any
    ) -> CitelineRetriever:
        """A retriever over the index at ``path``, opened read-only (no repair, so no writer lock is taken)."""
        return cls(index=Index.open(path, embedder=embedder, repair=False), **settings)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        settings = options_of(settings_of(self), self.search_kwargs, options)
        results = search(self.index, query, **settings)
        return [to_document(result, flat_metadata=self.flat_metadata) for result in results]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **options: Any
    ) -> list[Document]:
        # Searching is CPU work (query embedding, FAISS, BM25): keep it off the event loop.
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=run_manager.get_sync(), **options
        )


def to_document(result: SearchResult, *, flat_metadata: bool = False) -> Document:
    """One search result as a LangChain ``Document`` with its provenance in ``metadata`` (flattened with
    ``flat_metadata``, see :func:`citeline.integrations.flat`)."""
    metadata: dict[str, Any] = provenance(result)
    if flat_metadata:
        metadata = flat(metadata)
    return Document(id=str(result.chunk_id), page_content=result.text, metadata=metadata)
