"""Index.documents and Index.document: listing documents with the search filters, and one document with its
chunk spans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _common import minimal_pdf
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index, IndexNotFoundError, QueryError
from citeline.cli.main import cli
from citeline.store.documents import DOCUMENT_FIELDS, ChunkSpan, DocumentDetail


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, Path]:
    """One root with Markdown, a two-page PDF and JSONL records with metadata; ingested once."""
    root = tmp_path_factory.mktemp("documents") / "library"
    root.mkdir()
    (root / "river.md").write_text("# The river\n\nSoldiers crossed the river at night.\n", encoding="utf-8")
    (root / "report.pdf").write_bytes(minimal_pdf(["Page one about pay.", "Page two about letters."]))
    records = [
        {"_id": "r1", "title": "Record one", "text": "Letters from home.", "author": "Mara", "year": 2020},
        {"_id": "r2", "title": "Record two", "text": "Pay stopped in June.", "author": "Ilan", "year": 2021},
    ]
    (root / "records.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    index = Index.create(root.parent / "ix", embedder=HashEmbedder())
    index.ingest([root])
    return index, root


def test_documents_lists_everything_with_provenance(library: tuple[Index, Path]) -> None:
    index, root = library
    rows = [record.to_dict() for record in index.documents()]
    assert [r["source_id"] for r in rows] == ["records.jsonl#r1", "records.jsonl#r2", "report.pdf", "river.md"]
    for row in rows:
        assert tuple(row) == DOCUMENT_FIELDS
        assert row["source_root"] == str(root.resolve())
        assert row["chunks"] >= 1
        assert row["ingested_at"].endswith("+00:00")
        assert len(row["ingested_at"]) == len("2026-01-31T08:00:00.000+00:00")
    by_id = {r["source_id"]: r for r in rows}
    assert by_id["report.pdf"]["pages"] == 2 and by_id["report.pdf"]["format"] == "pdf"
    assert by_id["river.md"]["pages"] is None and by_id["river.md"]["title"] == "The river"
    assert by_id["records.jsonl#r1"]["metadata"].items() >= {"author": "Mara", "year": 2020}.items()
    assert by_id["river.md"]["source_path"] == str(root.resolve() / "river.md")
    assert len({r["run_id"] for r in rows}) == 1


def test_documents_filters_and_limit(library: tuple[Index, Path]) -> None:
    index, root = library
    assert [r.source_id for r in index.documents({"meta": {"author": "Ilan"}})] == ["records.jsonl#r2"]
    assert [r.source_id for r in index.documents({"path_glob": "*.md"})] == ["river.md"]
    assert len(index.documents({"source": str(root)})) == 4
    assert index.documents({"ingested_before": "2000-01-01"}) == []
    assert len(index.documents(limit=3)) == 3
    with pytest.raises(QueryError, match="limit must be a whole number from 1 to 9223372036854775807, got 0"):
        index.documents(limit=0)
    with pytest.raises(QueryError, match="unknown filter key 'author'"):
        index.documents({"author": "Mara"})


def test_document_has_text_and_chunk_spans(library: tuple[Index, Path]) -> None:
    index, _ = library
    listed = {r.source_id: r.to_dict() for r in index.documents()}["report.pdf"]
    detail = index.document(listed["doc_id"])
    assert isinstance(detail, DocumentDetail) and detail.text == index.document_text(detail.doc_id)
    assert all(isinstance(span, ChunkSpan) for span in detail.spans)
    doc = detail.to_dict()
    assert {k: doc[k] for k in DOCUMENT_FIELDS} == listed
    assert doc["text"] == index.document_text(listed["doc_id"])
    assert len(doc["spans"]) == listed["chunks"]
    assert [s["ordinal"] for s in doc["spans"]] == list(range(len(doc["spans"])))
    for span in doc["spans"]:
        assert 0 <= span["char_start"] < span["char_end"] <= len(doc["text"])
        assert span["page"] in (1, 2)


def test_unknown_document_is_one_clear_error(library: tuple[Index, Path]) -> None:
    index, _ = library
    with pytest.raises(IndexNotFoundError, match=r"^no document 'nope' in .*ix; list the documents with"):
        index.document("nope")


def test_pages_of_a_sharded_index_are_pages_of_the_whole_listing(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    for n in range(7):
        (tmp_path / "docs" / f"d{n}.md").write_text(f"# Note {n}\n\nThe mill by river {n}.\n", encoding="utf-8")
    index = Index.create(tmp_path / "root", embedder=HashEmbedder(), shards=2)
    index.ingest([tmp_path / "docs"], parallel="serial")
    whole = [record.doc_id for record in index.documents()]
    assert len(whole) == 7
    for offset in range(8):
        for limit in (1, 3, None):
            page = [record.doc_id for record in index.documents(limit=limit, offset=offset)]
            assert page == (whole[offset:] if limit is None else whole[offset : offset + limit]), (offset, limit)
    with pytest.raises(QueryError, match="offset must be a whole number from 0"):
        index.documents(offset=-1)


@pytest.fixture(scope="module")
def one_document(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """An index of one document, plain (1) and of 2 shards, built once for the module: its tests only read."""
    built: dict[int, Path] = {}
    for shards in (1, 2):
        root = tmp_path_factory.mktemp(f"one-document-{shards}")
        (root / "docs").mkdir()
        (root / "docs" / "a.md").write_text("---\nauthor: Mara\n---\n# A\n\nThe mill.\n", encoding="utf-8")
        index = Index.create(root / "ix", embedder=HashEmbedder(), shards=shards)
        index.ingest([root / "docs"], **({"parallel": "serial"} if shards > 1 else {}))
        built[shards] = root / "ix"
    return built


@pytest.mark.parametrize("shards", [1, 2])
@pytest.mark.parametrize("value", [-1, 2**63, 10**20, True, 1.5])
def test_every_count_a_caller_gives_is_checked_before_it_reaches_duckdb(  # type: ignore[no-untyped-def]
    one_document: dict[int, Path], shards: int, value
) -> None:
    """A ``limit`` or ``offset`` out of range is the caller's QueryError, in one line, on every listing (documents,
    the run ledger, facets), plain and sharded; never DuckDB's error read as a damaged index (``runs(10**20)`` said
    "the run ledger ... is damaged ... restore meta.duckdb from a backup"), and never a slice from the end (a
    negative facet limit hid values). The CLI refuses it as a usage error."""
    index = Index.open(one_document[shards], embedder=HashEmbedder())
    calls = {
        "documents limit": lambda: index.documents(limit=value),
        "documents offset": lambda: index.documents(offset=value),
        "runs": lambda: index.runs(limit=value),
        "facets": lambda: index.facets(limit=value),
    }
    for name, call in calls.items():
        with pytest.raises(QueryError, match=r"(limit|offset) must be a whole number from [01] to 9223372036854775807"):
            call()
            pytest.fail(f"{name}({value!r}) was taken")
    assert len(index.runs(limit=2**63 - 1)) == 1 and index.runs(limit=0) == []
    if isinstance(value, int) and not isinstance(value, bool):
        result = CliRunner().invoke(cli, ["runs", "--index", str(index.path), "--limit", str(value)])
        assert result.exit_code == 2 and "is not in the range 0<=x<=9223372036854775807" in result.output, result.output
