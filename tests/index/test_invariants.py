"""The invariants named once in ``citeline.store.verify``: each one catches the damage it names, on real files.

``verify()`` reports them, the crash trials and the incremental-ingestion tests assert them.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.store import catalog, generation, verify


@pytest.fixture
def built(tmp_path: Path, seeds_dir: Path) -> Index:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), max_tokens=64, overlap_tokens=8)
    index.ingest([seeds_dir])
    return index


def _sql(index: Index, statement: str) -> None:
    with duckdb.connect(str(catalog.db_path(index.path))) as connection:
        connection.execute(statement)


def test_a_fresh_index_holds_every_invariant(built: Index) -> None:
    assert verify.check(built.path) == {name: [] for name in verify.INVARIANTS}
    assert built.verify().invariants == {name: [] for name in verify.INVARIANTS}


@pytest.mark.parametrize(
    ("damage", "invariant"),
    [
        ("UPDATE chunks SET char_end = char_end - 1 WHERE ordinal = 1", "offsets_exact"),
        ("DELETE FROM documents WHERE doc_id = (SELECT min(doc_id) FROM documents)", "chunks_have_documents"),
        ("UPDATE index_meta SET value = '3' WHERE key = 'vector_count'", "counts_match"),
        ("DELETE FROM chunks WHERE chunk_id = (SELECT min(chunk_id) FROM chunks)", "ids_match"),
        ("UPDATE chunks SET vector = list_transform(vector, lambda x: x * 0.5) WHERE ordinal = 0", "vectors_match"),
        ("INSERT INTO work_members VALUES ('gone', 'gone')", "works_match"),
        ("UPDATE index_meta SET value = '{\"a\": \"b\"}' WHERE key = 'works'", "works_match"),
    ],
)
def test_each_invariant_catches_its_damage(built: Index, damage: str, invariant: str) -> None:
    _sql(built, damage)
    found = verify.check(built.path)
    assert found[invariant], found
    report = built.verify()
    assert not report.ok and report.invariants[invariant] == found[invariant]


def test_artifact_invariants_catch_missing_and_altered_files(built: Index) -> None:
    meta = generation.read_meta(built.path)
    path = generation.vectors_path(built.path, int(meta["generation"]), generation.vector_kind(meta))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert verify.check(built.path, ["checksums_match"])["checksums_match"]
    path.unlink()
    assert verify.check(built.path, ["artifacts_present"])["artifacts_present"] == [
        f"{path.name} is missing though meta.duckdb records generation {meta['generation']}"
    ]
