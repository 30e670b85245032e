"""The hybrid search's costs at scale, kept result-identical: the document count a reader needs for the document
BM25 signal comes from the mapped rows (no SQL, no DuckDB), and is the catalog's count after removals."""

from __future__ import annotations

from pathlib import Path

from citeline import Index

_TEXT = "Harbours flood at spring tide when the moon pulls the sea. " * 6


def _index(tmp_path: Path, fake_embedder) -> Index:  # type: ignore[no-untyped-def]
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=16, overlap_tokens=0)
    index.add_texts([f"{_TEXT} Document {n}." for n in range(6)], ids=[f"d{n}" for n in range(6)])
    return index


def test_document_count_is_the_catalogs_after_removals_and_needs_no_duckdb(tmp_path: Path, fake_embedder) -> None:
    index = _index(tmp_path, fake_embedder)
    assert index.snapshot().document_count() == index.status().documents == 6
    by_source = {row.source_id: row.doc_id for row in index.documents()}
    index.remove(doc_ids=[by_source["d1"], by_source["d4"]])  # tombstones in the first segment: its live mask counts
    index.add_texts([_TEXT + " Changed."], ids=["d2"])  # a replaced document counts once
    reader = Index.open(tmp_path / "ix", embedder=fake_embedder)
    snapshot = reader.snapshot()
    assert snapshot.passages._connection is None
    assert snapshot.document_count() == reader.status().documents == 4
    assert snapshot.passages._connection is None  # counted without the in-memory DuckDB the filters use
    filtered = snapshot.passages._query("SELECT chunk_id FROM {rows} WHERE ordinal = 0", [])["chunk_id"]
    assert len(filtered) == 4  # the SQL count it replaced


def test_hybrid_search_needs_no_duckdb(tmp_path: Path, fake_embedder) -> None:
    _index(tmp_path, fake_embedder)
    reader = Index.open(tmp_path / "ix", embedder=fake_embedder)
    assert reader.search("spring tide", k=3, mode="hybrid")
    assert reader.snapshot().passages._connection is None


def test_first_chunks_reads_the_column_buffers_with_offsets_nulls_and_deletions() -> None:
    import numpy as np
    import pyarrow as pa

    from citeline.store.passages import _first_chunks, _Part

    column = pa.chunked_array([pa.array([0, 1, None, 0], pa.int32()).slice(1), pa.array([2, 0, 0], pa.int32())])
    rows = pa.table({"ordinal": column})  # ordinals 1, None, 0 | 2, 0, 0 (the first chunk at an offset)
    assert _first_chunks(_Part(np.arange(6), None, rows)) == 3
    assert _first_chunks(_Part(np.arange(6), np.array([1, 1, 0, 1, 1, 0], bool), rows)) == 1


def test_hybrid_on_two_threads_is_the_one_thread_hybrid_on_an_ivf_index_with_codes(
    tmp_path: Path, fake_embedder, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """The dense leg on the pool's thread beside the lexical one (``PARALLEL_HYBRID``) changes no result, with
    either fusion, on the index shape of the 1M benchmark (an ivf base searched through its fast-scan codes)."""
    import random

    from citeline.query import plan
    from citeline.vectors.ivf import codes

    monkeypatch.setattr(codes, "MIN_VECTORS", 1_000)
    monkeypatch.setattr(codes, "RERANK", 200)
    monkeypatch.setattr(plan, "PARALLEL_HYBRID_MIN_VECTORS", 1_000)
    words = ["harbour", "flood", "tide", "moon", "sea", "storm", "ship", "port", "river", "dune", "sand", "wind"]
    rng = random.Random(3)
    texts = [" ".join(rng.choice(words) for _ in range(12)) + f" item{n}." for n in range(1_500)]
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, vector_index="ivf")
    index.add_texts(texts, ids=[str(n) for n in range(len(texts))])
    reader = Index.open(tmp_path / "ix", embedder=fake_embedder)
    base = reader.snapshot().vectors.base
    assert getattr(base, "inner", base)._codes is not None
    for query in ("harbour flood", "storm ship sand", "moon tide sea river"):
        for fusion in (plan.DEFAULT_FUSION, plan.DOCUMENT_BM25_FUSION):
            monkeypatch.setattr(plan, "PARALLEL_HYBRID", True)
            overlapped = reader.rank(query, 20, mode="hybrid", fusion=fusion)
            monkeypatch.setattr(plan, "PARALLEL_HYBRID", False)
            assert reader.rank(query, 20, mode="hybrid", fusion=fusion) == overlapped


def test_a_hybrid_search_embeds_its_query_beside_the_lexical_leg_on_a_large_index(
    tmp_path: Path, fake_embedder, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """From ``PARALLEL_HYBRID_MIN_VECTORS`` vectors the query is embedded on the pool's thread (once, while this
    thread runs the lexical leg); below it, and with ``PARALLEL_HYBRID`` off, on this thread; the results are the
    same every way."""
    import threading

    from citeline.query import plan

    _index(tmp_path, fake_embedder)
    reader = Index.open(tmp_path / "ix", embedder=fake_embedder)
    threads: list[str] = []
    encode = reader.encode_query

    def recording(query: str):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return encode(query)

    monkeypatch.setattr(reader, "encode_query", recording)
    here = threading.current_thread().name
    small = reader.search("spring tide moon", k=4, mode="hybrid")
    assert threads == [here]  # a small index: the hand-off would cost more than the overlap saves
    threads.clear()
    monkeypatch.setattr(plan, "PARALLEL_HYBRID_MIN_VECTORS", 1)
    assert reader.search("spring tide moon", k=4, mode="hybrid") == small
    assert len(threads) == 1 and threads[0].startswith("citeline-dense")
    monkeypatch.setattr(plan, "PARALLEL_HYBRID", False)
    threads.clear()
    assert reader.search("spring tide moon", k=4, mode="hybrid") == small
    assert threads == [here]
