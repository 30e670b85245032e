"""Hybrid search's feedback stage (``citeline.query.feedback``): the query vector moved toward the first fused
document's
length-weighted centroid, the same candidates fused again. Real DuckDB and FAISS files, the hashing embedder."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from citeline import Index
from citeline.errors import QueryError
from citeline.query.feedback import FEEDBACK, FEEDBACK_WEIGHT, TIE, moved_query
from citeline.query.plan import DEFAULT_FUSION, Fusion, document_rows
from citeline.store.filters import Filters

QUERY = "harbours flood tide"


def corpus_index(tmp_path: Path, fake_embedder) -> Index:
    """Six documents of several chunks; the query's words spread over some of them."""
    corpus = tmp_path / "docs.jsonl"
    records = [
        {"_id": "tides", "title": "Tides", "text": "The moon pulls the sea. " * 4 + "Harbours flood at tide. " * 4},
        {"_id": "ports", "title": "Ports", "text": "Harbours flood in storms. " * 4 + "Ships wait outside. " * 4},
        {"_id": "storms", "title": "Storms", "text": "Storm surge floods the harbour walls. " * 6, "kind": 1},
        {"_id": "moon", "title": "Moon", "text": "The moon and the sea and the tide. " * 6, "kind": 1},
        {"_id": "sand", "title": "Deserts", "text": "Sand dunes move slowly. " * 8},
        {"_id": "ships", "title": "Ships", "text": "Ships wait outside the harbour in a storm. " * 5},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=16, overlap_tokens=0)
    index.ingest([corpus])
    return index


def test_the_default_fusion_runs_the_feedback_stage() -> None:
    assert DEFAULT_FUSION.feedback == FEEDBACK > 0 and DEFAULT_FUSION.feedback_weight == FEEDBACK_WEIGHT
    assert DEFAULT_FUSION.describe()["feedback"] == FEEDBACK
    for bad in ({"feedback": -0.1}, {"feedback_weight": 1.5}):
        with pytest.raises(QueryError, match="feedback"):
            Fusion(**bad)  # type: ignore[arg-type]


def test_moved_query_is_the_normalised_sum_with_the_documents_length_weighted_centroid(tmp_path, fake_embedder):
    index = corpus_index(tmp_path, fake_embedder)
    snapshot = index.snapshot()
    ids = np.asarray(snapshot.lexical.chunk_ids)
    docs = snapshot.doc_ids(ids.tolist())
    tides = ids[[d == docs[0] for d in docs]]  # every chunk of one document
    assert len(tides) > 2
    query = index.encode_query(QUERY)
    moved = moved_query(
        query, int(tides[-1]), 0.25, document_rows(snapshot), ids, snapshot.vectors, snapshot.chunk_lengths
    )
    lengths = snapshot.chunk_lengths(tides.tolist())
    vectors = snapshot.vectors.vectors(tides).astype(np.float64)
    centroid = (vectors * np.array([lengths[int(c)] for c in tides])[:, None]).sum(axis=0)
    expected = query + 0.25 * centroid / np.linalg.norm(centroid)
    assert moved is not None and moved.dtype == np.float32
    assert moved == pytest.approx(expected / np.linalg.norm(expected), abs=1e-6)
    # A chunk the index does not hold moves nothing (the feedback stage keeps the first fusion).
    rows = document_rows(snapshot)
    assert moved_query(query, 12345, 0.25, rows, ids, snapshot.vectors, snapshot.chunk_lengths) is None


def test_feedback_rescores_the_same_candidates_with_the_moved_query(tmp_path, fake_embedder) -> None:
    """The second fusion's scores, recomputed by hand: cosines with the moved query min-max scaled over the first
    dense top (less a tie at its last place; the top: the best candidate), BM25 as before, at ``feedback_weight``;
    no new candidate appears."""
    index = corpus_index(tmp_path, fake_embedder)
    snapshot = index.snapshot()
    fusion = Fusion(weight=0.4, depth=8, feedback=0.5, feedback_weight=0.6)
    plain = index.rank(QUERY, 100, mode="hybrid", fusion=replace(fusion, feedback=0))
    fed = index.rank(QUERY, 100, mode="hybrid", fusion=fusion)
    assert {c for c, _ in fed} == {c for c, _ in plain} and fed != plain
    query = index.encode_query(QUERY)
    ids = np.array(sorted(c for c, _ in plain), dtype=np.int64)
    first = plain[0][0]
    moved = moved_query(
        query, first, 0.5, document_rows(snapshot), snapshot.lexical.chunk_ids, snapshot.vectors, snapshot.chunk_lengths
    )
    assert moved is not None
    vectors = snapshot.vectors.vectors(ids)
    dense_top = [c for c, _ in snapshot.vectors.search(query, 8)]
    assert len(dense_top) == 8  # a full list: a tie at its last place is left out of the scale
    first_cos = dict(zip(ids.tolist(), (vectors @ query).astype(np.float64).tolist(), strict=True))
    floor = min(first_cos[c] for c in dense_top)
    above = [c for c in dense_top if first_cos[c] > floor + TIE]  # a tie at the depth-th place is left out
    cos = dict(zip(ids.tolist(), (vectors @ moved).astype(np.float64).tolist(), strict=True))
    low = min(cos[c] for c in above)
    high = max(cos.values())
    bm25 = dict(zip(ids.tolist(), snapshot.lexical.scores_of(QUERY, ids).tolist(), strict=True))
    best_bm25 = max(score for _, score in snapshot.lexical.search(QUERY, 8))
    for chunk_id, score in fed:
        expected = 0.6 * (cos[chunk_id] - low) / (high - low) + 0.4 * bm25[chunk_id] / best_bm25
        assert score == pytest.approx(expected, abs=1e-6)


def test_a_dense_list_shorter_than_the_depth_scales_over_all_of_it(tmp_path, fake_embedder) -> None:
    """A corpus smaller than the fusion's depth: every chunk is in the first dense list, none is left out of the
    moved cosines' scale, so every fused score stays in [0, 1], as the chunk fusion's do."""
    index = corpus_index(tmp_path, fake_embedder)
    assert len(index.snapshot().vectors) < DEFAULT_FUSION.depth
    ranking = index.rank(QUERY, 100, mode="hybrid")
    assert len(ranking) == len(index.snapshot().vectors)
    assert all(0.0 <= score <= 1.0 for _, score in ranking)


def test_feedback_top_results_do_not_depend_on_k_and_a_filtered_ranking_holds_allowed_chunks_only(
    tmp_path, fake_embedder
) -> None:
    index = corpus_index(tmp_path, fake_embedder)
    assert index.rank(QUERY, 3, mode="hybrid") == index.rank(QUERY, 40, mode="hybrid")[:3]
    snapshot = index.snapshot()
    allowed = snapshot.allowed_chunk_ids(Filters.from_value({"meta": {"kind": 1}}))
    assert allowed is not None and len(allowed)
    hits = index.rank(QUERY, 10, mode="hybrid", allowed=allowed)
    assert hits and {c for c, _ in hits} <= set(allowed.tolist())
    # The feedback document is the best allowed one: the filtered ranking is the fusion of the allowed candidates
    # with the query moved toward it, whatever the unfiltered first document was.
    results = index.search(QUERY, k=10, filters={"meta": {"kind": 1}})
    assert [r.chunk_id for r in results][:1] == [hits[0][0]]


@pytest.mark.parametrize("nudge", [-3e-7, 3e-7])
def test_a_last_bit_apart_in_the_dense_lists_tied_last_cosines_changes_no_score(
    tmp_path, fake_embedder, monkeypatch, nudge: float
) -> None:
    """Chunks tied at the full dense list's last place are left out of the moved cosines' scale even when their
    float32 cosines differ in the last bit, as a plain and a sharded index compute them (different candidate
    matrices, so different BLAS blocking). CI on c6b88e6: with an exact tie test, 2 of SciFact's 300 test queries
    scored up to 0.009 apart between a plain and a 4-shard index."""
    index = corpus_index(tmp_path, fake_embedder)
    fusion = Fusion(weight=0.4, depth=8, feedback=0.5, feedback_weight=0.6)
    want = index.rank(QUERY, 100, mode="hybrid", fusion=fusion)
    reader = index.snapshot().vectors
    dense = reader.search(index.encode_query(QUERY), 8)
    tied = [c for c, score in dense if abs(score - dense[-1][1]) <= TIE]
    assert len(dense) == 8 and len(tied) >= 2  # a full list with a tie at its last place
    stored = type(reader).vectors

    def nudged(self, ids):  # one tied chunk's cosine moves by a float32 last bit or two
        found = stored(self, ids).copy()
        found[np.asarray(ids) == tied[0]] *= np.float32(1 + nudge)
        return found

    monkeypatch.setattr(type(reader), "vectors", nudged)
    got = index.rank(QUERY, 100, mode="hybrid", fusion=fusion)
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
