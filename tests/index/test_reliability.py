"""Concurrent readers never see a half-commit, and a FAISS file that disagrees with DuckDB is detected and rebuilt
from the stored vectors. The kill trials are tests/system/test_crash_trials.py's.

The reader trials live in ``_reliability.py`` (shared with ``bench/reliability.py``, which runs more trials, and
the kill trials at full count); their figures are printed at the end of the test session (see
``conftest.pytest_terminal_summary``).
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest
from _reliability import check_index, create_index, run_concurrent_readers, write_docs
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index, IndexCorruptError, IndexRepairedWarning
from citeline.cli.main import cli
from citeline.store import catalog, generation, locks


def test_readers_see_exactly_one_generation_while_a_writer_commits(tmp_path: Path, reliability_figures) -> None:
    figures = run_concurrent_readers(tmp_path, generations=5, readers=2)
    reliability_figures["readers during writes"] = figures
    assert figures["processes_ok"]
    assert figures["errors"] == 0 and figures["inconsistencies"] == 0, figures["problems"]
    assert figures["queries"] >= 20
    assert figures["generations_seen"] >= 2  # the readers did run across commits


# ---------------------------------------------------------------- detecting and repairing a damaged FAISS file


@pytest.fixture
def built(tmp_path: Path) -> Index:
    """A small committed index (generation 1) built with the fake embedder."""
    docs = tmp_path / "docs"
    write_docs(docs, 0)
    index = create_index(tmp_path / "ix")
    index.ingest([docs])
    return index


def _damage(index: Index, how: str) -> Path:
    path = generation.vectors_path(index.path, int(index.meta["generation"]), generation.vector_kind(index.meta))
    if how == "missing":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "flipped":  # same size, one vector component changed: only the checksum can tell
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif how == "stale":  # the file of an older generation put back in place of the current one
        stale = create_index(index.path.parent / "other")
        shutil.copy(generation.vectors_path(stale.path, 0, generation.vector_kind(stale.meta)), path)
    elif how == "bm25-missing":
        shutil.rmtree(generation.bm25_path(index.path, int(index.meta["generation"])))
    elif how == "bm25-altered":  # one array of bm25s's files rewritten with other content of the same shape
        folder = generation.bm25_path(index.path, int(index.meta["generation"]))
        target = max((entry for entry in folder.iterdir() if entry.suffix == ".npy"), key=lambda e: e.stat().st_size)
        data = bytearray(target.read_bytes())
        data[-1] ^= 0x01
        target.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how", ["missing", "truncated", "flipped", "stale", "bm25-missing", "bm25-altered"])
def test_open_rebuilds_a_damaged_faiss_file_from_duckdb_without_reembedding(built: Index, how: str) -> None:
    before = {r.chunk_id: r.score for r in built.search("river bridge soldier", k=10)}
    lexical_before = [r.chunk_id for r in built.search("river bridge soldier", k=10, mode="lexical")]
    _damage(built, how)
    assert not built.verify().ok

    embedder = HashEmbedder()
    with pytest.warns(IndexRepairedWarning, match="rebuilt vectors.1.faiss"):
        reopened = Index.open(built.path, embedder=embedder)
    assert embedder.texts_encoded == 0  # nothing was re-embedded
    assert reopened.verify().ok
    after = {r.chunk_id: r.score for r in reopened.search("river bridge soldier", k=10)}
    assert after.keys() == before.keys()
    assert after == pytest.approx(before)
    assert [r.chunk_id for r in reopened.search("river bridge soldier", k=10, mode="lexical")] == lexical_before
    assert check_index(built.path) == []


def test_repair_can_be_turned_off_and_a_damaged_file_then_fails_clearly(built: Index) -> None:
    _damage(built, "truncated")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no repair, so no warning either
        index = Index.open(built.path, embedder=HashEmbedder(), repair=False)
    with pytest.raises(IndexCorruptError, match="citeline rebuild"):
        index.search("river")


def test_orphan_files_of_dead_generations_are_removed_on_open(built: Index) -> None:
    # What a writer killed mid-commit leaves: the next generation's files, and temporaries.
    (built.path / "vectors.2.faiss").write_bytes(b"half")
    (built.path / "vectors.3.faiss.tmp").write_bytes(b"half")
    assert built.verify().orphans == ["vectors.2.faiss", "vectors.3.faiss.tmp"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # leftovers are cleaned up silently: nothing was wrong with the index
        Index.open(built.path, embedder=HashEmbedder())
    assert sorted(p.name for p in built.path.glob("vectors.*")) == ["vectors.1.faiss"]


def test_a_reader_does_not_repair_while_a_writer_holds_the_lock(built: Index) -> None:
    _damage(built, "missing")
    with locks.writer_lock(built.path, wait=0), pytest.warns(IndexRepairedWarning, match="citeline rebuild"):
        Index.open(built.path, embedder=HashEmbedder())
    assert not built.verify().ok  # left for the writer, or for `citeline rebuild`


def test_verify_and_rebuild_commands(built: Index) -> None:
    runner = CliRunner()
    ok = runner.invoke(cli, ["verify", "--index", str(built.path)])
    assert ok.exit_code == 0, ok.output
    assert "consistent" in ok.output

    _damage(built, "flipped")
    bad = runner.invoke(cli, ["verify", "--index", str(built.path), "--json"])
    assert bad.exit_code == 1
    report = json.loads(bad.output)
    assert report["ok"] is False and report["checksum_ok"] is False
    assert any("checksum" in problem for problem in report["problems"])

    rebuilt = runner.invoke(cli, ["rebuild", "--index", str(built.path)])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "consistent" in rebuilt.output
    assert runner.invoke(cli, ["verify", "--index", str(built.path)]).exit_code == 0


def test_a_damaged_duckdb_file_is_a_clear_error_not_a_traceback(built: Index) -> None:
    db = catalog.db_path(built.path)
    db.write_bytes(b"this is not a database" * 100)
    result = CliRunner().invoke(cli, ["status", "--index", str(built.path)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert str(db) in result.output and "damaged" in result.output
    assert len(result.output.strip().splitlines()) == 1
