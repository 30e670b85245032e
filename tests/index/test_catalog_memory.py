"""DuckDB's settings on citeline's connections (``store/connection.py``): a memory ceiling that grows with the
catalog, one thread, and spill files outside the index directory, removed when the connection closes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from citeline import Index
from citeline.store import catalog, connection, verify


def _setting(index_dir: Path, name: str, *, read_only: bool) -> str:
    with catalog.connect(index_dir, read_only=read_only) as opened:
        return str(opened.execute("SELECT current_setting(?)", [name]).fetchone()[0])


def test_connections_get_the_memory_limit_one_thread_and_a_spill_folder_outside_the_index(
    tmp_path: Path, seeds_dir: Path, fake_embedder
) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([seeds_dir])
    for read_only in (True, False):
        assert _setting(index.path, "threads", read_only=read_only) == str(connection.THREADS)
        assert _setting(index.path, "memory_limit", read_only=read_only) == "488.2 MiB"  # 512 MB
        spill = Path(_setting(index.path, "temp_directory", read_only=read_only))
        assert spill.parent == Path(tempfile.gettempdir()) and not spill.is_relative_to(index.path)
        assert not spill.exists()  # DuckDB creates it only to spill, and removes it at close
    assert not list(index.path.glob("*.tmp"))


def test_the_memory_limit_grows_with_a_large_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    database = tmp_path / "meta.duckdb"
    assert connection.settings(database)["memory_limit"] == "512MB"  # no file yet
    database.write_bytes(b"\0" * 4_000_000)
    monkeypatch.setattr(connection, "MEMORY_LIMIT_MB", 1)
    assert connection.settings(database)["memory_limit"] == "1MB"  # a quarter of 4 MB
    monkeypatch.setattr(connection, "MEMORY_SHARE_OF_CATALOG", 1.0)
    assert connection.settings(database)["memory_limit"] == "4MB"


def test_ingest_verify_and_rebuild_work_under_a_small_ceiling(
    tmp_path: Path, fake_embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every statement of an ingest in several commits, verify and rebuild runs under DuckDB's ceiling (the 1M-chunk
    # figures are in store/connection.py). 32 MB is about the least these tables commit in: at 16 MB DuckDB fails
    # to pin a block, which the commit reports as one IndexWriteError line, the index left at its generation.
    monkeypatch.setattr(connection, "MEMORY_LIMIT_MB", 32)
    docs = tmp_path / "docs"
    docs.mkdir()
    words = [f"w{number}" for number in range(3000)]
    for number in range(150):
        text = " ".join(words[(number * 7 + step * 13) % len(words)] for step in range(2000)) + "."
        (docs / f"d{number:03}.txt").write_text(text)
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    run = index.ingest([docs], commit_every=300)
    assert run.status == "succeeded" and run.added == 150 and run.generation > 2
    assert verify.check(index.path) == {name: [] for name in verify.INVARIANTS}
    index.rebuild()
    assert verify.check(index.path) == {name: [] for name in verify.INVARIANTS}
    assert not list(index.path.glob("*.tmp"))
