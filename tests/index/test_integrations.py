"""The LangChain and LlamaIndex retrievers, against the real langchain-core and llama-index-core packages."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from conftest import HashEmbedder
from langchain_core.documents import Document
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore, TextNode

from citeline import Index, QueryError
from citeline.integrations import PROVENANCE_KEYS, provenance
from citeline.integrations.langchain import CitelineRetriever as LangChainRetriever
from citeline.integrations.llamaindex import CitelineRetriever as LlamaIndexRetriever
from citeline.util.output import iso_utc

QUERY = "soldiers defect when pay stops"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    """The seeds, plus a near-copy of one seed in another folder (so collapse has something to merge)."""
    root = tmp_path_factory.mktemp("adapters")
    seeds = Path(__file__).resolve().parents[2] / "seeds"
    copies = root / "copies"
    copies.mkdir()
    original = seeds / "defections-at-the-river-garrison.md"
    (copies / "copy.md").write_text(original.read_text(encoding="utf-8"), encoding="utf-8")
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([seeds, copies])
    return index


def _check_provenance(index: Index, metadata: dict[str, object], text: str) -> None:
    assert set(PROVENANCE_KEYS) <= set(metadata)
    document_text = index.document_text(str(metadata["doc_id"]))
    assert document_text[int(metadata["char_start"]) : int(metadata["char_end"])] == text  # type: ignore[call-overload]
    assert metadata["model"] == "hash-bow-64"
    assert metadata["ingested_at"] == iso_utc(str(metadata["ingested_at"]))
    json.dumps(metadata)  # JSON-ready: vector stores and tracing serialize it


def test_langchain_retriever_returns_documents_with_provenance(index: Index) -> None:
    retriever = LangChainRetriever(index=index, k=3, collapse=False)
    docs = retriever.invoke(QUERY)
    assert len(docs) == 3 and all(isinstance(doc, Document) for doc in docs)
    expected = index.search(QUERY, 3, collapse=False)
    assert [doc.id for doc in docs] == [str(r.chunk_id) for r in expected]
    assert [doc.metadata["score"] for doc in docs] == [r.score for r in expected]
    for doc in docs:
        _check_provenance(index, doc.metadata, doc.page_content)
        assert doc.metadata["other_sources"] == []


def test_langchain_retriever_passes_mode_filters_and_collapse(index: Index) -> None:
    lexical = LangChainRetriever(index=index, k=2, mode="lexical", collapse=False).invoke(QUERY)
    assert [d.metadata["chunk_id"] for d in lexical] == [
        r.chunk_id for r in index.search(QUERY, 2, mode="lexical", collapse=False)
    ]
    only_copies = LangChainRetriever(index=index, k=10, filters={"path_glob": "copy.md"}).invoke(QUERY)
    assert only_copies and {d.metadata["source_id"] for d in only_copies} == {"copy.md"}
    collapsed = LangChainRetriever(index=index, k=3, collapse=True).invoke("river garrison defections")
    merged = [d for d in collapsed if d.metadata["other_sources"]]
    assert merged, "the copied seed collapses with its original"
    other = merged[0].metadata["other_sources"][0]
    assert other["doc_id"] != merged[0].metadata["doc_id"]
    assert {"source_path", "char_start", "char_end", "shared_start", "shared_end"} <= set(other)
    with pytest.raises(QueryError, match="mode must be one of"):
        LangChainRetriever(index=index, mode="fuzzy").invoke(QUERY)


def test_langchain_async_runs_on_a_thread(index: Index) -> None:
    retriever = LangChainRetriever(index=index, k=2, collapse=False)

    async def both() -> list[list[Document]]:
        return list(await asyncio.gather(retriever.ainvoke(QUERY), retriever.ainvoke("letters from mothers")))

    first, second = asyncio.run(both())
    assert [d.id for d in first] == [d.id for d in retriever.invoke(QUERY)]
    assert [d.id for d in second] == [d.id for d in retriever.invoke("letters from mothers")]


def test_llamaindex_retriever_returns_scored_text_nodes(index: Index) -> None:
    retriever = LlamaIndexRetriever(index, k=3, mode="dense", collapse=False)
    nodes = retriever.retrieve(QUERY)
    expected = index.search(QUERY, 3, mode="dense", collapse=False)
    assert len(nodes) == 3 and all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    assert [n.node.node_id for n in nodes] == [str(r.chunk_id) for r in expected]
    assert [n.score for n in nodes] == [r.score for r in expected]
    for node_with_score in nodes:
        node = node_with_score.node
        assert isinstance(node, TextNode)
        _check_provenance(index, node.metadata, node.text)
        assert (node.start_char_idx, node.end_char_idx) == (node.metadata["char_start"], node.metadata["char_end"])
        assert node.relationships[NodeRelationship.SOURCE].node_id == node.metadata["doc_id"]  # type: ignore[union-attr]
        # Prompts see the title and path, not offsets and hashes.
        shown = node.get_content(metadata_mode=MetadataMode.LLM)
        assert "source_path:" in shown and "content_hash" not in shown


def test_llamaindex_filters_and_async(index: Index) -> None:
    retriever = LlamaIndexRetriever(index, k=10, filters={"path_glob": "copy.md"})
    nodes = asyncio.run(retriever.aretrieve(QUERY))
    assert nodes and {n.node.metadata["source_id"] for n in nodes} == {"copy.md"}
    assert [n.node.node_id for n in nodes] == [n.node.node_id for n in retriever.retrieve(QUERY)]


def test_from_path_opens_read_only(index: Index) -> None:
    docs = LangChainRetriever.from_path(index.path, embedder=HashEmbedder(), k=1).invoke(QUERY)
    nodes = LlamaIndexRetriever.from_path(index.path, embedder=HashEmbedder(), k=1).retrieve(QUERY)
    assert docs[0].id == nodes[0].node.node_id


@pytest.fixture
def ledger(tmp_path: Path) -> Index:
    """One JSONL record with metadata."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "r.jsonl").write_text('{"_id": "1", "title": "Ledger", "text": "Pay stopped in June.", "author": "Mara"}\n')
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    return index


def test_provenance_carries_highlights_and_metadata(ledger: Index) -> None:
    index = ledger
    meta = provenance(index.search("pay stopped", 1, collapse=False)[0])
    assert meta["highlights"] and all(
        set(h) == {"char_start", "char_end", "text", "score", "page", "last_page"} for h in meta["highlights"]
    )
    assert meta["document_metadata"]["author"] == "Mara"


def test_langchain_per_call_options_and_search_kwargs(index: Index) -> None:
    retriever = LangChainRetriever(index=index, k=5, collapse=False)
    assert len(retriever.invoke(QUERY, k=1)) == 1
    assert len(retriever.invoke(QUERY, k=3)) == 3
    assert len(retriever.invoke(QUERY)) == 5  # a call's options do not stick
    search_kwargs = {"k": 2, "filter": {"path_glob": "copy.md"}}
    by_kwargs = LangChainRetriever(index=index, collapse=False, search_kwargs=search_kwargs)
    docs = by_kwargs.invoke(QUERY)
    assert len(docs) == 2 and {d.metadata["source_id"] for d in docs} == {"copy.md"}
    assert len(by_kwargs.invoke(QUERY, k=1)) == 1  # the call wins over search_kwargs
    assert retriever.invoke(QUERY, mode="lexical", min_score=1.0) == []
    assert asyncio.run(retriever.ainvoke(QUERY, k=2)) and len(asyncio.run(retriever.ainvoke(QUERY, k=2))) == 2
    with pytest.raises(QueryError, match="unknown search option 'top_k'"):
        retriever.invoke(QUERY, top_k=3)


def test_llamaindex_per_call_options(index: Index) -> None:
    retriever = LlamaIndexRetriever(index, k=5, collapse=False)
    assert len(retriever.retrieve(QUERY, k=1)) == 1
    assert len(retriever.retrieve(QUERY, similarity_top_k=2)) == 2
    assert len(retriever.retrieve(QUERY)) == 5
    assert len(asyncio.run(retriever.aretrieve(QUERY, k=3))) == 3
    only = retriever.retrieve(QUERY, filters={"path_glob": "copy.md"})
    assert only and {n.node.metadata["source_id"] for n in only} == {"copy.md"}
    assert retriever.retrieve(QUERY, mode="lexical", min_score=1.0) == []


def test_flat_metadata_stores_in_scalar_only_vector_stores(ledger: Index) -> None:
    index = ledger
    document = LangChainRetriever(index=index, k=1, flat_metadata=True).invoke("pay stopped")[0]
    node = LlamaIndexRetriever(index, k=1, flat_metadata=True).retrieve("pay stopped")[0].node
    for metadata in (document.metadata, node.metadata):
        assert all(isinstance(value, str | int | float | bool) for value in metadata.values())
        assert metadata["document_metadata.author"] == "Mara"
        assert json.loads(str(metadata["highlights"]))[0]["text"]
        assert json.loads(str(metadata["other_sources"])) == []
        assert "page" not in metadata  # None values are left out


def test_the_readme_retriever_example_finds_the_seeds(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    # The README once filtered on {"source": "reports"}, a folder its walkthrough never ingests: [] by design.
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    docs = LangChainRetriever(index=index, k=5, filters={"source": "seeds"}).invoke("why did soldiers defect")
    assert docs and all(d.metadata["source_path"].startswith(str(Path("seeds").resolve())) for d in docs)
    assert LangChainRetriever(index=index, k=5, filters={"source": "reports"}).invoke("why did soldiers defect") == []
