"""A LangChain retriever over a citeline index: ``pip install "citeline[langchain]"``.

>>> from citeline import Index
>>> from citeline.integrations.langchain import CitelineRetriever
>>> retriever = CitelineRetriever(index=Index.open("index"), k=5, filters={"source": "reports"})
>>> docs = retriever.invoke("why did soldiers defect")
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
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'citeline.integrations.langchain needs langchain-core: pip install "citeline[langchain]"'
    ) from exc

from citeline.index import Index
from citeline.integrations import provenance, search
from citeline.model.embedding import Embedder
from citeline.query.plan import DEFAULT_MODE
from citeline.query.results import SearchResult

__all__ = ["CitelineRetriever", "to_document"]


class CitelineRetriever(BaseRetriever):
    """Passages of a citeline index as LangChain ``Document`` objects, best first.

    ``k``, ``mode`` (``hybrid``, ``dense``, ``lexical``), ``filters`` (as :meth:`citeline.Index.search` takes
    them) and ``collapse`` pass through to :meth:`citeline.Index.search`. Each document's ``page_content`` is the
    passage text, its ``id`` the chunk id, its ``metadata`` the passage's provenance
    (:func:`citeline.integrations.provenance`). The async methods run the search on a thread.
    """

    index: Index
    k: int = 10
    mode: str = DEFAULT_MODE
    filters: dict[str, Any] | None = None
    collapse: bool = True

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], *, embedder: Embedder | None = None, **settings: Any
    ) -> CitelineRetriever:
        """A retriever over the index at ``path``, opened read-only (no repair, so no writer lock is taken)."""
        return cls(index=Index.open(path, embedder=embedder, repair=False), **settings)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        results = search(self.index, query, k=self.k, mode=self.mode, filters=self.filters, collapse=self.collapse)
        return [to_document(result) for result in results]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        # Searching is CPU work (query embedding, FAISS, BM25): keep it off the event loop.
        return await asyncio.to_thread(self._get_relevant_documents, query, run_manager=run_manager.get_sync())


def to_document(result: SearchResult) -> Document:
    """One search result as a LangChain ``Document`` with its provenance in ``metadata``."""
    return Document(id=str(result.chunk_id), page_content=result.text, metadata=provenance(result))
