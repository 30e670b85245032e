"""A cold search connects to DuckDB once: the first snapshot maps the generation ``Index.open`` read, unless a commit
came in between (then it reads the meta again)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.arrays import unique
from citeline.store import catalog


def _notes(folder: Path, names: list[str]) -> Path:
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / f"{name}.txt").write_text(f"Notes {name}\n\nSoldiers at {name} wrote home about their wages.\n")
    return folder


def _counting_connects(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    calls: list[bool] = []
    connect = catalog.connect

    def counted(index_dir: Path, *, read_only: bool, timeout: float = 30.0):  # type: ignore[no-untyped-def]
        calls.append(read_only)
        return connect(index_dir, read_only=read_only, timeout=timeout)

    monkeypatch.setattr(catalog, "connect", counted)
    return calls


def test_open_then_search_connects_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _notes(tmp_path / "docs", ["river", "garrison"])
    Index.create(tmp_path / "index", embedder=HashEmbedder()).ingest([docs])
    calls = _counting_connects(monkeypatch)
    index = Index.open(tmp_path / "index", embedder=HashEmbedder())
    results = index.search("wages", k=2)
    assert len(results) == 2
    assert calls == [True]  # Index.open's read; the snapshot mapped what it read


def test_a_commit_between_open_and_search_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _notes(tmp_path / "docs", ["river"])
    Index.create(tmp_path / "index", embedder=HashEmbedder()).ingest([docs])
    reader = Index.open(tmp_path / "index", embedder=HashEmbedder())
    _notes(docs, ["bridge", "mill"])
    Index.open(tmp_path / "index", embedder=HashEmbedder()).ingest([docs])  # generation 2, after the reader's read
    calls = _counting_connects(monkeypatch)
    assert len(reader.search("wages", k=5, collapse=False)) == 3
    assert reader.snapshot().generation == 2
    assert calls == [True]  # the stamp changed: the snapshot read the meta again


def test_unique_is_numpy_unique() -> None:
    rng = np.random.default_rng(3)
    for size in (0, 1, 2, 7, 500):
        for dtype in (np.int64, np.uint64):
            values = rng.integers(0, 20, size).astype(dtype)
            assert np.array_equal(unique(values), np.unique(values))
            assert unique(values).dtype == np.unique(values).dtype
