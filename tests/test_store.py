"""Store and commit protocol on real DuckDB and FAISS files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from citeline import Index, IndexLockedError, IndexMismatchError, IndexNotFoundError, store


def faiss_ids(index_dir: Path, generation: int) -> set[int]:
    faiss_index = store.read_faiss(store.faiss_path(index_dir, generation))
    return {int(faiss_index.id_map.at(i)) for i in range(faiss_index.ntotal)}


def duckdb_ids(index_dir: Path) -> set[int]:
    connection = duckdb.connect(str(store.db_path(index_dir)), read_only=True)
    try:
        return {row[0] for row in connection.execute("SELECT chunk_id FROM chunks").fetchall()}
    finally:
        connection.close()


def test_ingest_commits_a_generation_whose_faiss_matches_duckdb(tmp_path, seeds_dir, fake_embedder) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    assert index.status().generation == 0
    run = index.ingest([seeds_dir])
    assert run.status == "succeeded" and run.added == 2 and run.generation == 1
    assert faiss_ids(index.path, 1) == duckdb_ids(index.path)
    assert len(duckdb_ids(index.path)) == run.chunks_embedded
    # Only the current generation's file is kept.
    assert sorted(p.name for p in index.path.glob("vectors.*")) == ["vectors.1.faiss"]


def test_orphan_generation_files_are_removed_by_the_next_commit(tmp_path, seeds_dir, fake_embedder) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    # A crashed writer could leave a file of a generation DuckDB never recorded.
    (index.path / "vectors.7.faiss").write_bytes(b"partial")
    (index.path / "vectors.2.faiss.tmp").write_bytes(b"partial")
    index.ingest([seeds_dir])
    assert sorted(p.name for p in index.path.glob("vectors.*")) == ["vectors.1.faiss"]


def test_open_refuses_another_model_or_schema(tmp_path, fake_embedder) -> None:
    path = tmp_path / "ix"
    Index.create(path, embedder=fake_embedder)
    with pytest.raises(IndexMismatchError, match="built with model 'hash-bow-64'"):
        Index.open(path, model="all-MiniLM-L6-v2")
    with pytest.raises(IndexMismatchError, match="backend"):
        Index.open(path, backend="onnx")
    connection = duckdb.connect(str(store.db_path(path)))
    connection.execute("UPDATE index_meta SET value = ? WHERE key = 'schema_version'", [json.dumps(99)])
    connection.close()
    with pytest.raises(IndexMismatchError, match="schema version 99"):
        Index.open(path)


def test_create_refuses_other_chunking_on_an_existing_index(tmp_path, fake_embedder) -> None:
    path = tmp_path / "ix"
    Index.create(path, embedder=fake_embedder, max_tokens=100)
    assert Index.create(path, embedder=fake_embedder, max_tokens=100).meta["max_tokens"] == 100
    with pytest.raises(IndexMismatchError, match="chunking"):
        Index.create(path, embedder=fake_embedder, max_tokens=50)


def test_open_missing_index_says_how_to_build_one(tmp_path) -> None:
    with pytest.raises(IndexNotFoundError, match="citeline ingest PATH --index"):
        Index.open(tmp_path / "nothing")


def test_second_writer_fails_clearly_when_told_not_to_wait(tmp_path, seeds_dir, fake_embedder) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    with store.writer_lock(index.path), pytest.raises(IndexLockedError, match="another process is writing"):
        index.ingest([seeds_dir], wait=0.2)
    # The refused run changed nothing.
    assert index.status().documents == 0


def test_failed_run_is_recorded_and_keeps_the_last_generation(tmp_path, seeds_dir, fake_embedder) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([seeds_dir])
    before = duckdb_ids(index.path)

    def broken_encode(texts: list[str]) -> None:
        raise RuntimeError("embedding backend crashed")

    docs = tmp_path / "docs"
    shutil.copytree(seeds_dir, docs)
    (docs / "new.txt").write_text("A brand new document about river crossings.")
    index.encode = broken_encode  # type: ignore[method-assign,assignment]
    with pytest.raises(RuntimeError):
        index.ingest([docs])
    assert duckdb_ids(index.path) == before
    assert index.status().generation == 1
    last = index.runs(limit=1)[0]
    assert last.status == "failed" and "embedding backend crashed" in last.errors[0]["reason"]
