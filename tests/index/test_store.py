"""Store and commit protocol on real DuckDB and FAISS files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from citeline import Index, IndexLockedError, IndexMismatchError, IndexNotFoundError
from citeline.store import catalog, generation, locks


def faiss_ids(index_dir: Path, number: int) -> set[int]:
    meta = generation.read_meta(index_dir)
    kind = generation.vector_kind(meta)
    vectors = kind.load(generation.vectors_path(index_dir, number, kind))
    return set(vectors.ids().tolist())


def duckdb_ids(index_dir: Path) -> set[int]:
    connection = duckdb.connect(str(catalog.db_path(index_dir)), read_only=True)
    try:
        return {row[0] for row in connection.execute("SELECT chunk_id FROM chunks").fetchall()}
    finally:
        connection.close()


def test_ingest_commits_a_generation_whose_faiss_matches_duckdb(tmp_path, seeds_dir, fake_embedder) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    assert index.status().generation == 0
    run = index.ingest([seeds_dir])
    assert run.status == "succeeded" and run.added == len(list(seeds_dir.glob("*.md"))) and run.generation == 1
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
    connection = duckdb.connect(str(catalog.db_path(path)))
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
    with locks.writer_lock(index.path), pytest.raises(IndexLockedError, match="another process is writing"):
        index.ingest([seeds_dir], wait=0.2)
    # The refused run changed nothing.
    assert index.status().documents == 0


# A writer in its own process: the test embedder, one folder, a --wait; prints "ready" just before ingesting.
_WRITER = """
import sys
sys.path.insert(0, sys.argv[1])
from conftest import HashEmbedder
from citeline import Index, IndexLockedError
index = Index.create(sys.argv[2], embedder=HashEmbedder())
print("ready", flush=True)
try:
    run = index.ingest([sys.argv[3]], wait=float(sys.argv[4]))
except IndexLockedError as exc:
    print(exc, file=sys.stderr)
    sys.exit(3)
print(run.generation)
"""


def _writer(index_dir: Path, folder: Path, wait: float) -> subprocess.Popen[str]:
    tests = str(Path(__file__).resolve().parents[1])
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, tests, str(index_dir), str(folder), str(wait)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_writers_in_other_processes_wait_or_fail_and_never_interleave(
    tmp_path, seeds_dir, fake_embedder
) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    folders = []
    for source in sorted(seeds_dir.iterdir())[:2]:  # one seed per folder, so each writer adds one document
        folder = tmp_path / source.stem
        folder.mkdir()
        shutil.copy(source, folder)
        folders.append(folder)
    with locks.writer_lock(index.path):
        refused = _writer(index.path, folders[0], wait=0)
        _, refused_error = refused.communicate(timeout=60)
        assert refused.returncode == 3
        assert f"another process is writing to {index.path}" in refused_error
        waiting = [_writer(index.path, folder, wait=60) for folder in folders]
        for writer in waiting:  # both have opened the index and now wait for the lock this test holds
            assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        assert all(writer.poll() is None for writer in waiting)
    generations = []
    for writer in waiting:
        output, error = writer.communicate(timeout=60)
        assert writer.returncode == 0, error
        generations.append(int(output.split()[-1]))
    # One commit after the other: each published its own generation on top of the other's.
    assert sorted(generations) == [1, 2]
    runs = index.runs()
    assert sorted((run.generation, run.status, run.added) for run in runs) == [(1, "succeeded", 1), (2, "succeeded", 1)]
    status = index.status()
    assert (status.documents, status.generation) == (2, 2)
    assert index.verify().ok


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
