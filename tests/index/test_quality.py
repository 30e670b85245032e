"""Retrieval-quality settings: contextual chunk headers (what the model embeds) and the baseline rows of eval."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from _common import make_beir

from citeline import Index
from citeline.eval.baseline import document_texts, rrf
from citeline.eval.beir import baseline_results, evaluate_beir, load_beir
from citeline.model.chunking import embed_text
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
    monkeypatch.setattr(
        "citeline.model.chunking.EMBED_TEXT", "title + chunk"
    )  # the setting, not the default (see chunking)
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
    monkeypatch.setattr("citeline.model.chunking.EMBED_TEXT", "title + chunk")
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


# ---------------------------------------------------------------- document-level signals (citeline.query.doc_signals)


def long_documents_index(tmp_path: Path, fake_embedder) -> Index:
    """Three documents of several chunks each: the query's words spread over one document's chunks."""
    corpus = tmp_path / "docs.jsonl"
    records = [
        {
            "_id": "spread",
            "title": "Tides",
            "text": "The moon pulls the sea. " * 4 + "Harbours flood at spring tide. " * 4,
        },
        {"_id": "one", "title": "Ports", "text": "Harbours flood in storms. " * 4 + "Ships wait outside. " * 4},
        {"_id": "none", "title": "Deserts", "text": "Sand dunes move slowly. " * 8},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=16, overlap_tokens=0)
    index.ingest([corpus])
    return index


def test_every_document_signal_gives_one_value_per_document(tmp_path, fake_embedder) -> None:
    """The contract of the registry: each signal returns a finite value per document of the candidates, the same
    for every candidate of one document, and a document's chunks are all found from any one of them."""
    from citeline.query.doc_signals import SIGNALS, candidate_values
    from citeline.query.plan import document_rows

    index = long_documents_index(tmp_path, fake_embedder)
    snapshot = index.snapshot()
    ids = np.asarray(snapshot.lexical.chunk_ids)
    doc_of = dict(zip(ids.tolist(), snapshot.doc_ids(ids.tolist()), strict=True))
    assert len(set(doc_of.values())) == 3 and len(ids) > 6
    # One chunk of each document (the others are found by probing), in an order that mixes the documents.
    firsts = {doc: chunk_id for chunk_id, doc in reversed(list(doc_of.items()))}
    candidates = np.array(sorted(firsts.values(), reverse=True), dtype=np.int64)
    query = "moon harbours flood"
    vector = index.encode_query(query)
    values = candidate_values(
        sorted(SIGNALS), candidates, document_rows(snapshot), ids, query, vector, snapshot.vectors, snapshot.lexical
    )
    assert set(values) >= {"dense", "lexical"}
    for name, found in values.items():
        assert found.shape == (len(candidates),) and np.isfinite(found).all(), name
        by_doc: dict[str, float] = {}
        for chunk_id, value in zip(candidates.tolist(), found.tolist(), strict=True):
            assert by_doc.setdefault(doc_of[chunk_id], value) == pytest.approx(value), name
    lexical = dict(zip([doc_of[c] for c in candidates.tolist()], values["lexical"].tolist(), strict=True))
    spread, one, none = (
        next(d for d in lexical if index.document(d).source_id.endswith(f"#{n}")) for n in ("spread", "one", "none")
    )
    assert lexical[spread] > lexical[one] > lexical[none] == 0


def test_document_bm25_equals_bm25_over_the_joined_chunks(tmp_path, fake_embedder) -> None:
    """The document BM25 computed from the chunk postings is BM25 over the document's chunk texts joined, with the
    chunk index's idf and the corpus's mean document length, over the sum of the query terms' idf (checked against
    a direct computation): the same whichever candidates ask."""
    from citeline.lexical.analyzer import BM25_B, BM25_K1, analyze
    from citeline.lexical.scoring import idf_of
    from citeline.query.doc_signals import Documents, document_bm25
    from citeline.query.plan import document_rows

    index = long_documents_index(tmp_path, fake_embedder)
    snapshot = index.snapshot()
    ids = np.asarray(snapshot.lexical.chunk_ids)
    documents = Documents.of(ids, document_rows(snapshot), ids, snapshot.document_count())
    assert snapshot.document_count() == 3
    query = "harbours flood moon"
    got = document_bm25(documents, query, np.zeros(1), snapshot.vectors, snapshot.lexical)
    # One document's candidates alone: its value does not change (query-only rescaling, corpus-wide length).
    first = ids[documents.of_candidate == 0][:1]
    alone = Documents.of(first, document_rows(snapshot), ids, snapshot.document_count())
    assert document_bm25(alone, query, np.zeros(1), snapshot.vectors, snapshot.lexical) == pytest.approx(got[:1])
    with catalog.connect(index.path, read_only=True) as connection:
        chunk_ids, texts = catalog.lexical_texts(connection)
    text_of = dict(zip(chunk_ids.tolist(), texts, strict=True))
    terms = analyze([query])[0]
    chunk_terms = {c: analyze([t])[0] for c, t in text_of.items()}
    joined = [[term for c in chunks.tolist() for term in chunk_terms[c]] for chunks in documents.chunks]
    average = sum(len(words) for words in chunk_terms.values()) / 3  # the corpus's chunk tokens over its documents
    expected = []
    for words in joined:
        score = bound = 0.0
        for term in terms:
            frequency = sum(term in chunk_terms[c] for c in chunk_terms)
            tf = words.count(term)
            norm = BM25_K1 * (1 - BM25_B + BM25_B * len(words) / average)
            idf = float(idf_of(len(chunk_terms), frequency))
            score += idf * tf / (norm + tf)
            bound += idf if frequency else 0.0
        expected.append(score / bound)
    assert got == pytest.approx(expected, rel=1e-5)


def test_hybrid_without_document_signals_is_the_chunk_fusion(tmp_path, fake_embedder) -> None:
    """``DOCUMENT_BM25_FUSION`` adds the document BM25 to the chunk scores over the same candidates (a setting eval
    reports); the default (chosen on train) without its feedback stage and ``CHUNK_FUSION`` rank by the chunk scores
    alone."""
    from dataclasses import replace

    from citeline.query.plan import CHUNK_FUSION, DEFAULT_FUSION, DOCUMENT_BM25_FUSION, DOCUMENT_FUSION, Fusion

    index = long_documents_index(tmp_path, fake_embedder)
    plain = index.rank("harbours flood moon", 20, mode="hybrid", fusion=Fusion(weight=0.4))
    fused = index.rank("harbours flood moon", 20, mode="hybrid", fusion=DOCUMENT_BM25_FUSION)
    assert {c for c, _ in plain} == {c for c, _ in fused}
    # The default is the same chunk fusion with the feedback stage after it (tests/index/test_feedback.py).
    assert index.rank("harbours flood moon", 20, mode="hybrid", fusion=replace(DEFAULT_FUSION, feedback=0)) == plain
    assert CHUNK_FUSION.documents == () and DEFAULT_FUSION.documents == ()
    assert DOCUMENT_BM25_FUSION.describe()["documents"] == {"lexical": 0.3}
    assert DOCUMENT_FUSION.describe()["documents"] == {"lexical": 0.3, "whole": 0.1}
    with pytest.raises(Exception, match="unknown document signal"):
        index.rank("harbours", 5, mode="hybrid", fusion=Fusion(documents=(("nope", 0.1),)))


# ---------------------------------------------------------------- whole-document vectors (document_vectors)


def test_document_vectors_are_stored_on_first_chunks_and_read_by_the_whole_signal(tmp_path, fake_embedder) -> None:
    """An index created with ``document_vectors`` stores each document's title + text vector on its first chunk
    (embedded with the chunks; a text equal to a chunk's is embedded once), the rows files carry it, and the
    ``whole`` signal is its cosine with the query; an index without them still searches (the signal falls back to
    the mean chunk vector)."""
    from citeline.query.doc_signals import candidate_values
    from citeline.query.plan import DOCUMENT_FUSION, Fusion, document_rows

    records = [
        {
            "_id": "long",
            "title": "Tides",
            "text": "The moon pulls the sea. " * 4 + "Harbours flood at spring tide. " * 4,
        },
        {"_id": "short", "title": "", "text": "Sand dunes move."},
    ]
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    calls: list[list[str]] = []
    encode = fake_embedder.encode
    fake_embedder.encode = lambda texts, **kw: (calls.append(list(texts)), encode(texts, **kw))[1]
    index = Index.create(
        tmp_path / "ix", embedder=fake_embedder, max_tokens=16, overlap_tokens=0, document_vectors=True
    )
    assert index.meta["document_vectors"] is True
    run = index.ingest([corpus])
    assert run.added == 2
    snapshot = index.snapshot()
    ids = np.asarray(snapshot.lexical.chunk_ids)
    rows = snapshot.chunk_documents(ids.tolist())
    firsts = [chunk_id for chunk_id, row in rows.items() if row[2] == 0]
    stored = snapshot.document_vectors(ids.tolist())
    assert sorted(stored) == sorted(firsts) and len(firsts) == 2
    for chunk_id in firsts:
        document = index.document(rows[chunk_id][0])
        text = f"{document.title} {document.text}".strip()
        assert np.allclose(stored[chunk_id], encode([text])[0], atol=1e-6)
    embedded = [text for call in calls for text in call]
    assert embedded.count("Sand dunes move.") == 1  # the one-chunk document's text is its chunk's: embedded once
    query = "moon harbours"
    vector = index.encode_query(query)
    whole = candidate_values(
        ["whole", "dense"], ids, document_rows(snapshot), ids, query, vector, snapshot.vectors, snapshot.lexical,
        None, snapshot.document_vectors,
    )  # fmt: skip
    for position, chunk_id in enumerate(ids.tolist()):
        first = next(c for c in firsts if rows[c][:2] == rows[chunk_id][:2])
        assert whole["whole"][position] == pytest.approx(float(stored[first] @ vector), abs=1e-5)
    assert index.rank(query, 5, mode="hybrid", fusion=Fusion(documents=(("whole", 0.3),)))
    # The default fusion uses the vectors an index stores (DOCUMENT_FUSION); one without them, the chunk fusion's.
    assert index.rank(query, 5, mode="hybrid") == index.rank(query, 5, mode="hybrid", fusion=DOCUMENT_FUSION)

    old = Index.create(
        tmp_path / "old", embedder=fake_embedder, max_tokens=16, overlap_tokens=0, document_vectors=False
    )
    old.ingest([corpus])
    old_snapshot = old.snapshot()
    old_ids = np.asarray(old_snapshot.lexical.chunk_ids)
    assert old_snapshot.document_vectors(old_ids.tolist()) == {}
    fallback = candidate_values(
        ["whole", "dense"], old_ids, document_rows(old_snapshot), old_ids, query, vector, old_snapshot.vectors,
        old_snapshot.lexical, None, old_snapshot.document_vectors,
    )  # fmt: skip
    assert fallback["whole"] == pytest.approx(fallback["dense"])
    assert old.search(query, k=3)
