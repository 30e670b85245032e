"""Search through the front class: provenance, offsets, query validation."""

from __future__ import annotations

import pytest

from citeline import Index, QueryError, SearchResult


@pytest.fixture
def seeded(tmp_path, seeds_dir, fake_embedder) -> Index:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([seeds_dir])
    return index


def test_results_carry_full_provenance_and_exact_offsets(seeded: Index, seeds_dir) -> None:
    results = seeded.search("soldiers families letters", k=5)
    assert len(results) == 5
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    run_id = seeded.runs()[0].run_id
    for result in results:
        assert isinstance(result, SearchResult)
        document_text = seeded.document_text(result.doc_id)
        assert document_text[result.char_start : result.char_end] == result.text
        # The stored text is the file's text, so offsets hold against the file on disk too.
        assert (seeds_dir / result.source_id).read_text(encoding="utf-8") == document_text
        assert result.source_path == str(seeds_dir / result.source_id)
        assert result.title and result.content_hash and result.model == "hash-bow-64"
        assert result.run_id == run_id and result.ingested_at


def test_k_larger_than_the_index_returns_everything(seeded: Index) -> None:
    chunks = seeded.status().chunks
    assert len(seeded.search("soldiers", k=1_000_000, collapse=False)) == chunks
    # Collapsed, every chunk is still there: a result or a source of one.
    assert sum(len(r.sources) for r in seeded.search("soldiers", k=1_000_000)) == chunks


@pytest.mark.parametrize(
    ("query", "k", "message"),
    [
        ("", 5, "empty"),
        ("   ", 5, "empty"),
        ("ok", 0, "at least 1"),
        ("ok", -3, "at least 1"),
        (None, 5, "must be text"),
        (b"bytes", 5, "must be text"),
        ("ok", 2.5, "whole number"),
        ("ok", True, "whole"),
    ],
)
def test_bad_queries_raise_query_error(seeded: Index, query: object, k: object, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        seeded.search(query, k=k)  # type: ignore[arg-type]


def test_empty_index_returns_no_results(tmp_path, fake_embedder) -> None:
    assert Index.create(tmp_path / "ix", embedder=fake_embedder).search("anything") == []


def test_a_reader_sees_a_new_generation_after_a_commit(tmp_path, seeds_dir, fake_embedder) -> None:
    writer = Index.create(tmp_path / "ix", embedder=fake_embedder)
    reader = Index.open(tmp_path / "ix", embedder=fake_embedder)
    assert reader.search("soldiers") == []
    writer.ingest([seeds_dir])
    assert reader.search("soldiers")
