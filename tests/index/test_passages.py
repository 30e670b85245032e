"""Readers memory-map the passage rows beside each lexical segment (``store/passages.py``) instead of copying the
corpus: nothing is copied at open, a long-lived reader keeps its generation and never blocks a writer, indexes
written before the rows files still open, and ``verify`` catches rows that are not the catalog's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.store import passages, verify
from citeline.store.filters import Filters
from citeline.store.snapshot import ReadSnapshot


def _write(root: Path, name: str, text: str) -> None:
    (root / name).write_text(f"# {name}\n\n{text}\n")


@pytest.fixture
def grown(tmp_path: Path, fake_embedder: HashEmbedder) -> tuple[Index, Path]:
    """An index grown by three commits (three segments), one document changed and one removed on the way."""
    root = tmp_path / "docs"
    root.mkdir()
    index = Index.create(tmp_path / "index", embedder=fake_embedder)
    for number in range(6):
        _write(root, f"a{number}.md", f"The garrison {number} crossed the river at dawn. Letters reached home.")
    index.ingest([root])
    for number in range(6, 9):
        _write(root, f"b{number}.md", f"The harvest {number} failed and the families wrote letters.")
    index.ingest([root])
    _write(root, "a1.md", "The garrison changed its orders and stayed by the bridge.")
    (root / "a2.md").unlink()
    index.ingest([root])
    return index, root


def _rows_by_text(index: Index, query: str) -> list[tuple[str, str]]:
    return [(r.source_id, r.text) for r in index.search(query, k=20, mode="lexical", collapse=False)]


def test_a_reader_maps_the_rows_and_copies_nothing(grown: tuple[Index, Path]) -> None:
    index, _ = grown
    before = pa.total_allocated_bytes()
    snapshot = ReadSnapshot(index.path)
    try:
        assert pa.total_allocated_bytes() - before < 4096  # the rows stay in the files
        assert len(snapshot.passages._parts) == len(snapshot.lexical.parts) >= 2
        assert all((index.path / str(part.name) / passages.ROWS_FILE).is_file() for part in snapshot.lexical.parts)
    finally:
        snapshot.close()
    texts = dict(_rows_by_text(index, "garrison"))
    assert texts["a1.md"].startswith("# a1.md\n\nThe garrison changed its orders")
    assert "a2.md" not in texts and len(texts) == 5
    assert verify.check(index.path) == {name: [] for name in verify.INVARIANTS}


def test_a_long_lived_reader_keeps_its_generation_and_does_not_block_writers(
    grown: tuple[Index, Path], fake_embedder: HashEmbedder
) -> None:
    index, root = grown
    snapshot = index.snapshot()
    old = snapshot.passage_rows(snapshot.lexical.chunk_ids.tolist())
    old_allowed = snapshot.allowed_chunk_ids(Filters.from_value({"path_glob": "*a1.md"}))
    # Another writer (its own Index) changes and removes documents while the reader holds its snapshot; the
    # segments the reader maps are unlinked as orphans by that commit.
    writer = Index.open(index.path, embedder=fake_embedder)
    _write(root, "a1.md", "A third version of the garrison's orders.")
    for number in range(3, 6):
        (root / f"a{number}.md").unlink()
    writer.ingest([root])
    assert snapshot.passage_rows(snapshot.lexical.chunk_ids.tolist()) == old
    assert list(snapshot.allowed_chunk_ids(Filters.from_value({"path_glob": "*a1.md"}))) == list(old_allowed)
    assert not snapshot.is_current()
    texts = dict(_rows_by_text(index, "garrison"))  # the Index notices the commit and maps the new generation
    assert texts["a1.md"].endswith("A third version of the garrison's orders.") and "a3.md" not in texts


def test_the_same_chunk_removed_then_added_again_reads_the_new_row(grown: tuple[Index, Path]) -> None:
    index, root = grown
    text = (root / "b6.md").read_text()
    (root / "b6.md").unlink()
    index.ingest([root])
    (root / "b6.md").write_text(text)
    run = index.ingest([root])
    rows = [r for r in index.search("harvest", k=20, mode="lexical", collapse=False) if r.source_id == "b6.md"]
    assert len(rows) == 1 and rows[0].run_id == run.run_id
    assert verify.check(index.path) == {name: [] for name in verify.INVARIANTS}


def test_an_index_written_before_the_rows_files_opens_then_gets_them_on_its_next_commit(
    tmp_path: Path, fake_embedder: HashEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    for number in range(4):
        _write(root, f"a{number}.md", f"The garrison {number} crossed the river at dawn.")
    with monkeypatch.context() as patched:  # write segments as citeline did before rows files
        patched.setattr(passages, "write", lambda folder, batches: 0)
        index = Index.create(tmp_path / "index", embedder=fake_embedder)
        index.ingest([root])
    assert not list(index.path.glob(f"seg.*/{passages.ROWS_FILE}"))
    reopened = Index.open(index.path, embedder=fake_embedder)
    assert reopened.verify().ok
    snapshot = reopened.snapshot()
    assert len(snapshot.passages._parts) == 1  # the in-memory copy
    before = _rows_by_text(reopened, "garrison")
    assert len(before) == 4
    _write(root, "b.md", "The harvest failed.")
    reopened.ingest([root])
    assert list(index.path.glob(f"seg.*/{passages.ROWS_FILE}"))
    assert len(reopened.snapshot().passages._parts) == len(reopened.snapshot().lexical.parts)
    assert _rows_by_text(reopened, "garrison") == before
    assert verify.check(index.path) == {name: [] for name in verify.INVARIANTS}


def test_verify_catches_rows_files_that_are_not_the_catalogs(grown: tuple[Index, Path]) -> None:
    index, _ = grown
    segments = sorted(index.path.glob("seg.*"))
    assert len(segments) >= 2
    first, second = (segment / passages.ROWS_FILE for segment in segments[:2])
    shutil.copyfile(second, first)
    problems = verify.check(index.path, ["passages_match"])["passages_match"]
    assert problems and segments[0].name in problems[0]
    first.unlink()
    problems = verify.check(index.path, ["passages_match"])["passages_match"]
    assert problems == [f"{segments[0].name}/{passages.ROWS_FILE} is missing; run `citeline rebuild` to restore it"]
    index.rebuild()
    assert verify.check(index.path) == {name: [] for name in verify.INVARIANTS}


def test_a_row_read_from_the_buffers_equals_pyarrows_own_values() -> None:
    """``_Part.row`` reads values straight from the mapped buffers: strings (with nulls and non-ASCII), integers and
    floats (with nulls), UTC timestamps and other types must come back as ``column[i].as_py()`` gives them, in a
    table of several batches, one of them a slice (a non-zero array offset)."""
    from datetime import UTC, datetime, timedelta

    count = 40
    columns = {
        "chunk_id": pa.array(range(count), pa.int64()),
        "text": pa.array([None if i % 7 == 3 else f"Wörter {i} “quoted” é" * (i % 3) for i in range(count)]),
        "ordinal": pa.array([None if i % 5 == 1 else i for i in range(count)], pa.int32()),
        "size": pa.array([i * 10**9 for i in range(count)], pa.uint64()),
        "mtime": pa.array([None if i == 2 else i / 3 for i in range(count)], pa.float64()),
        "ratio": pa.array([i / 7 for i in range(count)], pa.float32()),
        "flag": pa.array([i % 2 == 0 for i in range(count)]),
        "ingested_at": pa.array(
            [None if i == 9 else datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=i) for i in range(count)],
            pa.timestamp("us", tz="UTC"),
        ),
    }
    whole = pa.table(columns)
    table = pa.Table.from_batches([*whole.slice(0, 13).to_batches(), *whole.slice(13).to_batches(max_chunksize=9)])
    assert any(batch.column("text").offset for batch in table.to_batches())
    part = passages._Part(table.column("chunk_id").to_numpy(), None, table)
    for position in range(count):
        row = part.row(position)
        expected = {name: whole.column(name)[position].as_py() for name in whole.column_names}
        assert row == expected
        assert [type(value) for value in row.values()] == [type(value) for value in expected.values()]
