"""A cold search does not connect to DuckDB: ``Index.open`` reads the meta from ``meta.json`` while its stamp holds
(``store.meta_cache``), else once from the catalog, and the first snapshot maps the generation it read, unless a
commit came in between (then it reads the meta again). Neither DuckDB nor the shards modules are imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, HashEmbedder

from citeline import Index
from citeline.store import catalog, connection, generation, meta_cache
from citeline.util.arrays import unique


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
    (tmp_path / "index" / meta_cache.CACHE_FILE).unlink()  # as an index last written before meta.json
    calls = _counting_connects(monkeypatch)
    index = Index.open(tmp_path / "index", embedder=HashEmbedder())
    results = index.search("wages", k=2)
    assert len(results) == 2
    assert calls == [True]  # Index.open's read; the snapshot mapped what it read


def test_open_then_search_reads_meta_json_and_never_connects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _notes(tmp_path / "docs", ["river", "garrison"])
    Index.create(tmp_path / "index", embedder=HashEmbedder()).ingest([docs])
    calls = _counting_connects(monkeypatch)
    results = Index.open(tmp_path / "index", embedder=HashEmbedder()).search("wages", k=2)
    assert len(results) == 2
    assert calls == []


def _cached(index_dir: Path) -> dict | None:
    return meta_cache.read(index_dir, meta_cache.db_stamp(index_dir))


def test_meta_json_is_the_catalogs_meta_after_every_write(tmp_path: Path) -> None:
    docs = _notes(tmp_path / "docs", ["river", "garrison", "mill"])
    index = Index.create(tmp_path / "index", embedder=HashEmbedder())
    index.ingest([docs])
    assert _cached(index.path) == generation.read_meta(index.path)
    (docs / "mill.txt").unlink()
    index.ingest([docs], allow_removals=True)  # a removal: generation 2
    assert _cached(index.path) == generation.read_meta(index.path)
    assert _cached(index.path)["generation"] == 2  # type: ignore[index]
    index.rebuild()
    assert _cached(index.path) == generation.read_meta(index.path)


def test_a_stale_or_unreadable_meta_json_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _notes(tmp_path / "docs", ["river"])
    Index.create(tmp_path / "index", embedder=HashEmbedder()).ingest([docs])
    # A writer killed after its commit, before it refreshed meta.json: the file still says generation 1.
    _notes(docs, ["bridge", "mill"])
    with monkeypatch.context() as patched:
        patched.setattr(connection, "_AFTER_WRITES", [])
        Index.open(tmp_path / "index", embedder=HashEmbedder()).ingest([docs])
    stale = json.loads((tmp_path / "index" / meta_cache.CACHE_FILE).read_text())
    assert stale["meta"]["generation"] == 1 and _cached(tmp_path / "index") is None
    reader = Index.open(tmp_path / "index", embedder=HashEmbedder())
    assert reader.meta["generation"] == 2
    assert len(reader.search("wages", k=5, collapse=False)) == 3
    for damaged in (b"", b'{"format": 1, "stamp": [[0, 0]]', b"[1, 2]", b"\xff\xfe"):
        (tmp_path / "index" / meta_cache.CACHE_FILE).write_bytes(damaged)
        assert Index.open(tmp_path / "index", embedder=HashEmbedder()).search("wages", k=5, collapse=False)


#: What a one-index search must not import: DuckDB (meta.json), the shards modules, the writing pipeline (planning,
#: sources, chunking), verify, the full build of a generation and the vector kinds a small index does not use.
NOT_ON_THE_SEARCH_PATH = (
    "duckdb",
    "citeline.sharding.index",
    "citeline.sharding.search",
    "citeline.ingest.pipeline",
    "citeline.store.full_build",
    "citeline.vectors.ivf",
    "citeline.vectors.ivf.build",
    "citeline.vectors.hnsw",
    "citeline.model.chunking",
    "citeline.ingest.planning",
    "citeline.sources.parsers",
    "citeline.sources.formats",
    "citeline.sources.encoding",
    "citeline.sources.discovery",
    "citeline.store.verify",
    "numpy.ma",  # (np.unique and np.union1d import it: citeline.util.arrays.unique instead)
)

_CLI_SEARCH = """
import json, sys
import citeline.index
from conftest import HashEmbedder
citeline.index.SentenceTransformerEmbedder = lambda *args, **kwargs: HashEmbedder()
from citeline.cli.main import cli
try:
    cli(["search", "wages", "-k", "2", "--index", *sys.argv[1:]])
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(name for name in sys.modules if name.startswith(("duckdb", "citeline", "numpy.ma")))))
"""


def _cold_cli_search(index_dir: Path, *options: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    done = subprocess.run(
        [sys.executable, "-c", _CLI_SEARCH, str(index_dir), *options], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert "citeline.cli.render" in loaded and "citeline.query.plan" in loaded  # it did search and print
    return loaded


def test_a_cold_cli_search_imports_neither_duckdb_nor_the_shards(tmp_path: Path) -> None:
    docs = _notes(tmp_path / "docs", ["river", "garrison"])
    index = Index.create(tmp_path / "index", embedder=HashEmbedder())
    index.ingest([docs])
    index.ingest([_notes(docs, ["mill"])])  # an update: a vector delta segment, read with the base
    assert index.meta["generation"] == 2 and _cached(index.path)["vector_deltas"]  # type: ignore[index]
    loaded = _cold_cli_search(index.path)
    assert loaded.isdisjoint(NOT_ON_THE_SEARCH_PATH), sorted(loaded & set(NOT_ON_THE_SEARCH_PATH))
    # A filter's allowed set (``passages.allowed`` runs its WHERE in DuckDB over the mapped rows) is made unique
    # without np.unique, which would import numpy.ma.
    assert "numpy.ma" not in _cold_cli_search(index.path, "--path", "*river*")


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


_KINDS_ON_USE = """
import sys
from citeline.vectors import kind_of
assert kind_of("flat").kind == "flat" and "citeline.vectors.ivf" not in sys.modules
try:
    kind_of("annoy")
except Exception as exc:
    print(exc)
from citeline.vectors import KINDS
print(sorted(KINDS))
"""


def test_vector_kinds_load_on_first_use() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _KINDS_ON_USE], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    error, kinds = done.stdout.splitlines()
    assert error == "unknown vector index kind 'annoy'; this citeline has auto, flat, hnsw, ivf"
    assert kinds == "['auto', 'flat', 'hnsw', 'ivf']"
