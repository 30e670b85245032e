"""A LlamaIndex retriever over a citeline index: ``pip install "citeline[llamaindex]"``.

>>> from citeline import Index
>>> from citeline.integrations.llamaindex import CitelineRetriever
>>> retriever = CitelineRetriever(Index.open("index"), k=5, mode="dense")
>>> nodes = retriever.retrieve("why did soldiers defect", k=3)  # per call: k, mode, filters, collapse, min_score, group
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
from citeline.integrations import flat, options_of, provenance, search, settings_of
from citeline.model.embedding import Embedder
from citeline.query.plan import DEFAULT_K, DEFAULT_MODE
from citeline.query.results import SearchResult
from citeline.store.filters import Filters

__all__ = ["LLM_METADATA_KEYS", "CitelineRetriever", "to_node"]

#: The metadata LlamaIndex shows the LLM and the embedder beside a node's text; the rest of the provenance
#: (offsets, hashes, other sources) stays in ``metadata`` for citing but out of prompts.
LLM_METADATA_KEYS = ("title", "source_path")


class CitelineRetriever(BaseRetriever):
    """Passages of a citeline index as LlamaIndex ``NodeWithScore(TextNode)`` objects, best first.

    ``k``, ``mode``, ``filters``, ``collapse``, ``min_score`` (the relevance floor; None: the calibrated
    default, which answers a query that matches nothing with no nodes) and ``group`` (one document per node, its
    other passages in ``metadata["more_passages"]``; off by default: k passages, as ``similarity_top_k`` means) pass
    through to
    :meth:`citeline.Index.search`, as set at construction or per call: ``retriever.retrieve(query, k=3)``
    (``similarity_top_k`` is read as ``k``). Each node's ``id_`` is the chunk id, ``start_char_idx``/
    ``end_char_idx`` its offsets in the document, its SOURCE relationship the document id, its ``metadata`` the
    provenance (:func:`citeline.integrations.provenance`), flattened with ``flat_metadata=True`` for vector stores
    that only store scalar metadata (:func:`citeline.integrations.flat`). ``aretrieve`` runs the search on a
    thread.
    """

    def __init__(
        self,
        index: Index,
        *,
        k: int = DEFAULT_K,
        mode: str = DEFAULT_MODE,
        filters: Filters | Mapping[str, Any] | None = None,
        collapse: bool = True,
        min_score: float | None = None,
        group: bool = False,
        flat_metadata: bool = False,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **options: Any,
    ) -> None:
        self.index = index
        self.search_options = options_of({}, options)  # the other options of a search (offset, highlight, ...), by name
        self.k = k
        self.mode = mode
        self.filters = filters
        self.collapse = collapse
        self.min_score = min_score
        self.group = group
        self.flat_metadata = flat_metadata
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], *, embedder: Embedder | None = None, **settings: Any
    ) -> CitelineRetriever:
        """A retriever over the index at ``path``, opened read-only (no repair, so no writer lock is taken)."""
        return cls(Index.open(path, embedder=embedder, repair=False), **settings)

    def with_options(self, **options: Any) -> CitelineRetriever:
        """A retriever over the same index with some of its search options replaced."""
        settings = options_of(settings_of(self, self.search_options), options)
        return CitelineRetriever(
            self.index,
            **settings,
            flat_metadata=self.flat_metadata,
            callback_manager=self.callback_manager,
            verbose=self._verbose,
        )

    def retrieve(self, str_or_query_bundle: str | QueryBundle, **options: Any) -> list[NodeWithScore]:
        """LlamaIndex's ``retrieve``, with per-call search options (``k=3``, ``filters=...``, ``min_score=...``)."""
        if options:
            return self.with_options(**options).retrieve(str_or_query_bundle)
        return super().retrieve(str_or_query_bundle)

    async def aretrieve(self, str_or_query_bundle: str | QueryBundle, **options: Any) -> list[NodeWithScore]:
        """LlamaIndex's ``aretrieve``, with per-call search options."""
        if options:
            return await self.with_options(**options).aretrieve(str_or_query_bundle)
        return await super().aretrieve(str_or_query_bundle)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        settings = settings_of(self, self.search_options)
        results = search(self.index, query_bundle.query_str, **settings)
        return [to_node(result, flat_metadata=self.flat_metadata) for result in results]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # LlamaIndex's default runs the sync search on the event loop; searching is CPU work, so use a thread.
        return await asyncio.to_thread(self._retrieve, query_bundle)


def to_node(result: SearchResult, *, flat_metadata: bool = False) -> NodeWithScore:
    """One search result as a scored LlamaIndex ``TextNode`` with its provenance in ``metadata`` (flattened with
    ``flat_metadata``, see :func:`citeline.integrations.flat`)."""
    metadata: dict[str, Any] = provenance(result)
    if flat_metadata:
        metadata = flat(metadata)
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
