"""No stored value can break a read (issue 50): an index holding the worst values the door accepts
(tests/_worst_values.py: metadata at the depth, width and size bounds, 64-bit integers at their ends, control
characters, escape sequences and bidi marks in ids, titles, keys and values) reads back on every surface: the
CLI's ``documents``, ``search`` and ``show`` in every format, the HTTP API (``/documents``, ``/documents/ID``,
``/search``, ``/facets``, the page), and the MCP tools. Each answer is the stored values, never a traceback or a
500. A JSONL record nested 500 deep was accepted and then broke ``citeline documents``, ``search --format json``,
``GET /documents`` and ``/search`` (RecursionError); it is refused at the door now
(tests/index/test_refused_commit.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _mcp_wire import Wire, hash_server  # the least MCP client, one JSON-RPC line each way
from _worst_values import DOCUMENTS, NASTY, WORD, worst_folder, worst_records
from click.testing import CliRunner
from conftest import HashEmbedder
from fastapi.testclient import TestClient

from citeline import Index
from citeline.cli.main import cli
from citeline.server import create_app

FORMATS = ["table", "json", "jsonl", "csv", "tsv"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("hostile")
    index = Index.create(root / "ix", embedder=HashEmbedder())
    run = index.ingest([worst_folder(root / "docs")])
    assert (run.added, run.failed) == (DOCUMENTS, 0), run.errors  # every worst value is accepted
    return index


def _cli(index: Index, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *a, **k: HashEmbedder())
    result = CliRunner().invoke(cli, [*args, "--index", str(index.path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output[-2000:]
    assert "Traceback" not in result.output
    return result.output


@pytest.mark.parametrize("output", FORMATS)
def test_the_cli_reads_back_every_stored_value(hostile: Index, output: str, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = _cli(hostile, monkeypatch, "documents", "--format", output)
    found = _cli(hostile, monkeypatch, "search", WORD, "--mode", "lexical", "-k", "20", "--format", output)
    if output == "json":
        documents = json.loads(listed)
        assert len(documents) == DOCUMENTS
        deep = next(d for d in documents if d["source_id"].endswith("#deep"))
        assert deep["metadata"]["tree"] == hostile.document(deep["doc_id"]).metadata["tree"]
        assert len(json.loads(found)) >= 5  # the JSONL records' hits, metadata and all
    if output == "jsonl":
        assert len([json.loads(line) for line in listed.split("\n") if line]) == DOCUMENTS
        [json.loads(line) for line in found.split("\n") if line]
    for document in hostile.documents():
        shown = _cli(hostile, monkeypatch, "show", document.doc_id, "--json")
        assert json.loads(shown.split("\n")[0])
        _cli(hostile, monkeypatch, "show", document.doc_id)


def test_the_library_reads_back_what_it_stored(hostile: Index) -> None:
    documents = hostile.documents()
    assert len(documents) == DOCUMENTS
    deep = next(d for d in documents if d.source_id.endswith("#deep"))
    assert deep.metadata["tree"] == worst_records()[0]["tree"]  # the deepest admitted, read back whole
    nasty = next(d for d in documents if d.source_id.endswith(f"#{NASTY}"))
    assert nasty.metadata[NASTY] == NASTY and nasty.title == NASTY
    numbers = hostile.document(next(d.doc_id for d in documents if d.source_id.endswith("#numbers"))).metadata
    assert (numbers["biggest"], numbers["smallest"]) == (2**63 - 1, -(2**63))
    hits = hostile.search(WORD, k=20, mode="lexical")
    assert {hit.doc_id for hit in hits} >= {d.doc_id for d in documents if d.source_id.startswith("worst.jsonl")}
    for hit in hits:
        assert hostile.document(hit.doc_id).text[hit.char_start : hit.char_end] == hit.text
    assert not hostile.verify().problems


def test_the_http_api_reads_back_every_stored_value(hostile: Index) -> None:
    with TestClient(create_app(hostile.path, embedder=HashEmbedder())) as client:
        listed = client.get("/documents", params={"limit": 100})
        assert listed.status_code == 200, listed.text[:500]
        assert len(listed.json()) == DOCUMENTS
        for document in listed.json():
            one = client.get(f"/documents/{document['doc_id']}")
            assert one.status_code == 200, one.text[:500]
            page = client.get(f"/view/{document['doc_id']}")
            assert page.status_code in (200, 404), page.text[:500]
        found = client.get("/search", params={"q": WORD, "k": 20, "mode": "lexical"})
        assert found.status_code == 200, found.text[:500]
        assert len(found.json()["results"]) >= 5
        for path in ("/facets", "/status", "/runs"):
            assert client.get(path).status_code == 200, path
        assert client.get("/", params={"q": WORD, "mode": "lexical"}).status_code == 200


def _call(wire: Wire, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    # One tool call, answered with a result that is not an error.
    answer = wire.ask("tools/call", {"name": tool, "arguments": arguments})
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    text = result["content"][0]["text"]
    assert not result.get("isError") and "Traceback" not in text, (tool, arguments, text[:500])
    return result


@pytest.fixture(scope="module")
def wire(hostile: Index) -> Iterator[Wire]:
    client = Wire(hash_server(hostile.path))
    yield client
    client.close()


def test_the_mcp_tools_read_back_every_stored_value(hostile: Index, wire: Wire) -> None:
    found = _call(wire, "search", {"query": WORD, "k": 20, "mode": "lexical"})
    assert len(found["structuredContent"]["results"]) >= 5
    listed = _call(wire, "list_documents", {"limit": 100})
    assert len(listed["structuredContent"]["documents"]) == DOCUMENTS
    for document in hostile.documents():
        _call(wire, "get_document", {"doc_id": document.doc_id})
        _call(wire, "get_passage", {"doc_id": document.doc_id, "char_start": 0, "char_end": 10})
        read = wire.ask("resources/read", {"uri": f"citeline://{document.doc_id}"})
        assert "result" in read, read
    _call(wire, "index_status", {})


def test_an_index_written_before_the_bounds_reads_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index written before the door's bounds may hold metadata nested 500 deep (9734f94 accepted it, and then
    every read of the index failed): readers cut what is nested past the bound (``store.metadata.TOO_DEEP``)."""
    from citeline.sources import document
    from citeline.store.metadata import TOO_DEEP

    deep: Any = 1
    for _ in range(500):
        deep = {"x": deep}
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "old.jsonl").write_text(json.dumps({"id": "deep", "text": f"An old deep record at the {WORD}.", "m": deep}))
    with monkeypatch.context() as before:
        before.setattr(document, "metadata_problem", lambda metadata: None)  # the door as it was
        index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
        assert index.ingest([docs]).added == 1
    (stored,) = index.documents()
    assert TOO_DEEP in json.dumps(stored.metadata)
    assert index.search(WORD, mode="lexical")[0].doc_id == stored.doc_id
    for output in FORMATS:
        _cli(index, monkeypatch, "documents", "--format", output)
        _cli(index, monkeypatch, "search", WORD, "--mode", "lexical", "--format", output)
    _cli(index, monkeypatch, "show", stored.doc_id, "--json")
    with TestClient(create_app(index.path, embedder=HashEmbedder())) as client:
        for path, params in (("/documents", {}), ("/search", {"q": WORD, "mode": "lexical"}), ("/facets", {})):
            assert client.get(path, params=params).status_code == 200, path
        assert client.get(f"/documents/{stored.doc_id}").status_code == 200
