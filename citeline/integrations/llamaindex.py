"""A LlamaIndex retriever over a citeline index: ``pip install "citeline[llamaindex]"``.

>>> from citeline import Index
>>> from citeline.integrations.llamaindex import CitelineRetriever
>>> retriever = CitelineRetriever(Index.open("index"), k=5, mode="dense")
>>> nodes = retriever.retrieve("why did soldiers defect")
>>> nodes[0].score, nodes[0].node.metadata["source_path"], nodes[0].node.start_char_idx
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'citeline.integrations.llamaindex needs llama-index-core: pip install "citeline[llamaindex]"'
    ) from exc

from citeline.index import Index
from citeline.integrations import provenance, search
from citeline.model.embedding import Embedder
from citeline.query.plan import DEFAULT_MODE
from citeline.query.results import SearchResult
from citeline.store.filters import Filters

__all__ = ["LLM_METADATA_KEYS", "CitelineRetriever", "to_node"]

#: The metadata LlamaIndex shows the LLM and the embedder beside a node's text; the rest of the provenance
#: (offsets, hashes, other sources) stays in ``metadata`` for citing but out of prompts.
LLM_METADATA_KEYS = ("title", "source_path")


class CitelineRetriever(BaseRetriever):
    """Passages of a citeline index as LlamaIndex ``NodeWithScore(TextNode)`` objects, best first.

    ``k``, ``mode``, ``filters`` and ``collapse`` pass through to :meth:`citeline.Index.search`. Each node's
    ``id_`` is the chunk id, ``start_char_idx``/``end_char_idx`` its offsets in the document, its SOURCE
    relationship the document id, its ``metadata`` the provenance (:func:`citeline.integrations.provenance`).
    ``aretrieve`` runs the search on a thread.
    """

    def __init__(
        self,
        index: Index,
        *,
        k: int = 10,
        mode: str = DEFAULT_MODE,
        filters: Filters | Mapping[str, Any] | None = None,
        collapse: bool = True,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        self.index = index
        self.k = k
        self.mode = mode
        self.filters = filters
        self.collapse = collapse
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], *, embedder: Embedder | None = None, **settings: Any
    ) -> CitelineRetriever:
        """A retriever over the index at ``path``, opened read-only (no repair, so no writer lock is taken)."""
        return cls(Index.open(path, embedder=embedder, repair=False), **settings)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        results = search(
            self.index,
            query_bundle.query_str,
            k=self.k,
            mode=self.mode,
            filters=self.filters,
            collapse=self.collapse,
        )
        return [to_node(result) for result in results]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # LlamaIndex's default runs the sync search on the event loop; searching is CPU work, so use a thread.
        return await asyncio.to_thread(self._retrieve, query_bundle)


def to_node(result: SearchResult) -> NodeWithScore:
    """One search result as a scored LlamaIndex ``TextNode`` with its provenance in ``metadata``."""
    metadata = provenance(result)
    hidden = [key for key in metadata if key not in LLM_METADATA_KEYS]
    node = TextNode(
        id_=str(result.chunk_id),
        text=result.text,
        metadata=metadata,
        start_char_idx=result.char_start,
        end_char_idx=result.char_end,
        excluded_embed_metadata_keys=hidden,
        excluded_llm_metadata_keys=hidden,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=result.doc_id)},
    )
    return NodeWithScore(node=node, score=result.score)
