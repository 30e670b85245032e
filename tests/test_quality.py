"""Retrieval-quality settings: contextual chunk headers (what the model embeds) and the baseline rows of eval."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_evaluate import make_beir

from citeline import Index
from citeline.baseline import document_texts, rrf
from citeline.chunking import embed_text
from citeline.evaluate import baseline_results, evaluate_beir, load_beir
from citeline.store import catalog


def stored_vector(index: Index, text: str) -> np.ndarray:
    """The stored vector of the (only) chunk whose text is ``text``."""
    with catalog.connect(index.path, read_only=True) as connection:
        (chunk_id,) = connection.execute("SELECT chunk_id FROM chunks WHERE text = ?", [text]).fetchone()
    return index.snapshot().vectors.vectors(np.array([chunk_id], dtype=np.int64))[0]


def test_embed_text_puts_the_title_before_the_chunk_once() -> None:
    assert embed_text("Tides", "The moon raises tides.") == "Tides\nThe moon raises tides."
    assert embed_text("", "The moon raises tides.") == "The moon raises tides."
    assert embed_text("Tides", "# Tides\n\nThe moon raises tides.") == "# Tides\n\nThe moon raises tides."


def test_chunks_are_embedded_with_their_title_and_keep_their_offsets(tmp_path, fake_embedder, monkeypatch) -> None:
    monkeypatch.setattr("citeline.index.EMBED_TEXT", "title + chunk")  # the setting, not the default (see chunking)
    corpus = tmp_path / "docs.jsonl"
    text = "Snow becomes ice. " * 6 + "Meltwater lubricates the glacier bed."
    corpus.write_text(json.dumps({"_id": "1", "title": "Glaciers", "text": text}) + "\n")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=16, overlap_tokens=0)
    index.ingest([corpus])
    assert index.meta["embed_text"] == "title + chunk"
    hits = index.search("meltwater lubricates", k=1, mode="lexical", collapse=False)
    hit = hits[0]
    assert hit.ordinal > 0 and not hit.text.startswith("Glaciers")  # a later chunk: the title is not in its text
    assert index.document_text(hit.doc_id)[hit.char_start : hit.char_end] == hit.text
    vector = stored_vector(index, hit.text)
    assert np.allclose(vector, fake_embedder.encode([f"Glaciers\n{hit.text}"])[0])
    assert not np.allclose(vector, fake_embedder.encode([hit.text])[0])


def test_an_index_made_before_headers_keeps_embedding_chunks_alone(tmp_path, fake_embedder, monkeypatch) -> None:
    """An index whose meta has no embed_text (built before the setting) never mixes the two kinds of vector."""
    monkeypatch.setattr("citeline.index.EMBED_TEXT", "title + chunk")
    corpus = tmp_path / "docs.jsonl"
    text = "Snow becomes ice. " * 6 + "Meltwater lubricates the glacier bed."
    corpus.write_text(json.dumps({"_id": "1", "title": "Glaciers", "text": text}) + "\n")
    Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=16, overlap_tokens=0)
    with catalog.connect(tmp_path / "ix", read_only=False) as connection:
        connection.execute("DELETE FROM index_meta WHERE key = 'embed_text'")
    index = Index.open(tmp_path / "ix", embedder=fake_embedder)
    assert "embed_text" not in index.meta and index.chunker.embed_text == "chunk"
    index.ingest([corpus])
    hit = index.search("meltwater lubricates", k=1, mode="lexical", collapse=False)[0]
    assert hit.ordinal > 0
    assert np.allclose(stored_vector(index, hit.text), fake_embedder.encode([hit.text])[0])


def test_rrf_fuses_ranks() -> None:
    assert rrf([["a", "b", "c"], ["b", "c"]], k=60) == ["b", "c", "a"]
    assert rrf([["a"], []]) == ["a"]


def test_baseline_rows_score_whole_documents_and_are_cached(tmp_path, fake_embedder) -> None:
    dataset = load_beir(make_beir(tmp_path / "beir"))
    ids, texts = document_texts(dataset.corpus)
    assert ids[0] == "10" and texts[0].startswith("Volcanoes Magma rises")
    rows = baseline_results(dataset, list(dataset.queries), fake_embedder, cache=tmp_path / "cache")
    assert [r.mode for r in rows] == ["dense-doc", "lexical-doc", "baseline"]
    assert rows[1].ndcg_at_10 == pytest.approx(1.0) and all(r.queries == 3 for r in rows)
    (cached,) = (tmp_path / "cache" / "baseline").glob("*.npy")
    assert np.load(cached).shape == (5, fake_embedder.dimension)
    again = baseline_results(dataset, list(dataset.queries), fake_embedder, cache=tmp_path / "cache")
    assert [r.ndcg_at_10 for r in again] == [r.ndcg_at_10 for r in rows]


def test_eval_reports_the_baseline_rows(tmp_path: Path, fake_embedder, monkeypatch) -> None:
    monkeypatch.setenv("CITELINE_CACHE", str(tmp_path / "cache"))
    beir = make_beir(tmp_path / "beir")
    report = evaluate_beir(beir, index_path=tmp_path / "ix", mode="hybrid", embedder=fake_embedder)
    assert [r.mode for r in report.results] == ["hybrid", "dense-doc", "lexical-doc", "baseline"]
    plain = evaluate_beir(beir, index_path=tmp_path / "ix", mode="hybrid", embedder=fake_embedder, baseline=False)
    assert [r.mode for r in plain.results] == ["hybrid"]
