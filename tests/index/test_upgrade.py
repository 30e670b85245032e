"""An index directory built by citeline 0.1.0 opens, searches and grows with this citeline, unchanged on disk
until the next commit (the index is the user's data: no schema bump, persisted names kept)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.main import cli
from citeline.query.plan import CHUNK_FUSION
from citeline.store import catalog, generation
from citeline.store.locks import DB_GATE_FILE

DATA = Path(__file__).resolve().parents[1] / "data"


def test_an_index_built_by_0_1_0_opens_and_searches_the_same(legacy: Path) -> None:
    before = {entry.name: entry.stat().st_size for entry in legacy.iterdir()}
    index = Index.open(legacy, embedder=HashEmbedder())
    meta = generation.read_meta(legacy)
    assert "vector_index" not in meta and generation.vector_kind(meta).kind == "flat"
    assert index.verify().ok
    expected = json.loads((DATA / "index-0.1.0.expected.json").read_text())
    # Every hit's provenance as 0.1.0 recorded it, in any mode's list (the default hybrid's feedback stage brings
    # in a chunk only 0.1.0's lexical list held).
    provenance = {row[0]: row[:4] for rows in expected.values() for row in rows}
    for mode, rows in expected.items():
        results = index.search("soldiers defect across the river", k=5, mode=mode, collapse=False)
        got = [[r.chunk_id, r.doc_id, r.char_start, r.char_end] for r in results]
        assert len(got) == len(rows) and all(provenance[row[0]] == row for row in got), mode
        # 0.1.0's ranking, ids and scores, with 0.1.0's settings: hybrid's chunk fusion (the default since adds the
        # feedback stage, issue 18, which reorders this query's hits), dense's cosines alone (dense mode's document
        # stage, issue 18, blends in each document's centroid; the order is unchanged).
        ranking = index.rank(
            "soldiers defect across the river", 5, mode=mode, fusion=CHUNK_FUSION, dense_document_weight=0
        )
        assert [chunk_id for chunk_id, _ in ranking] == [row[0] for row in rows], mode
        assert [score for _, score in ranking] == pytest.approx([row[4] for row in rows], abs=1e-5)
        if mode != "hybrid":
            assert got == [row[:4] for row in rows], mode
    after = {entry.name: entry.stat().st_size for entry in legacy.iterdir()}
    after.pop(DB_GATE_FILE, None)  # the lock gate: an empty file any reader may create, as it does db.lock
    assert after == before  # read only


def test_verify_json_keeps_0_1_0_field_names(legacy: Path) -> None:
    result = CliRunner().invoke(cli, ["verify", "--index", str(legacy), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    for name in (
        "path",
        "generation",
        "chunks",
        "vector_count",
        "faiss_file",
        "faiss_present",
        "faiss_ntotal",
        "ids_equal",
        "vectors_equal",
        "checksum_ok",
        "dangling_chunks",
        "bm25_dir",
        "bm25_present",
        "bm25_ids_equal",
        "orphans",
        "problems",
        "ok",
    ):
        assert name in report, name
    assert report["faiss_file"] == "vectors.1.faiss" and report["ok"] is True


def test_a_0_1_0_index_takes_new_commits(legacy: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "new.md").write_text("# Ferry\n\nThe ferry across the river stopped running in winter.\n")
    index = Index.open(legacy, embedder=HashEmbedder())
    run = index.ingest([docs])
    assert (run.added, run.generation) == (1, 2)
    assert index.verify().ok
    assert index.search("ferry winter", k=1, mode="lexical")[0].source_id == "new.md"
    # 0.1.0's BM25 folder predates segments, so this first commit rebuilt both; the next adds a delta segment.
    assert sorted(p.name for p in legacy.glob("v*.*")) == ["vectors.2.faiss"]
    (docs / "new.md").unlink()
    assert index.ingest([docs], allow_removals=True).generation == 3 and index.verify().ok
    assert sorted(p.name for p in legacy.glob("v*.*")) == ["vdelta.3", "vectors.2.faiss"]


def test_an_index_with_one_vector_file_per_generation_continues_from_it(tmp_path: Path, seeds_dir: Path) -> None:
    # Before vector segments, index_meta had no vector_base/vector_deltas: the generation's file was the vectors.
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([seeds_dir])
    with contextlib.closing(catalog.connect(index.path, read_only=False)) as connection:
        connection.execute("DELETE FROM index_meta WHERE key IN ('vector_base', 'vector_deltas')")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "new.md").write_text("# Ferry\n\nThe ferry across the river stopped running in winter.\n")
    reopened = Index.open(index.path, embedder=HashEmbedder())
    assert reopened.verify().ok
    assert reopened.ingest([docs]).generation == 2 and reopened.verify().ok
    meta = generation.read_meta(index.path)
    assert meta["vector_base"] == "vectors.1.faiss" and [d["name"] for d in meta["vector_deltas"]] == ["vdelta.2"]
    assert sorted(p.name for p in index.path.glob("v*.*")) == ["vdelta.2", "vectors.1.faiss"]
    assert reopened.search("ferry winter", k=1, mode="dense")[0].source_id == "new.md"
