"""Nothing lost, ever (issue 14): empty or mostly vanished roots, deleted lock files, duplicate rows, and one clear
line for every error. Real files, real DuckDB and FAISS; the embedder is the fast HashEmbedder."""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index
from citeline.cli import cli
from citeline.errors import (
    IndexLockedError,
    RemovalRefusedError,
)
from citeline.store import catalog
from citeline.store.locks import DB_LOCK_FILE, WRITE_LOCK_FILE, database_lock, writer_lock
from citeline.store.verify import INVARIANTS, check

LEGACY = Path(__file__).resolve().parent / "data" / "index-0.1.0"


def make_docs(root: Path, count: int = 4) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        (root / f"doc{number}.md").write_text(f"# Document {number}\n\nThe river bridge number {number} of the town.\n")
    return root


def new_index(tmp_path: Path) -> Index:
    return Index.create(tmp_path / "index", embedder=HashEmbedder())


def documents(index: Index) -> int:
    return index.status().documents


# ---------------------------------------------------------------- empty and vanished roots


def test_an_empty_root_is_refused_recorded_and_keeps_its_documents(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path)
    index.ingest([docs])
    for path in docs.iterdir():  # an unmounted share: the folder is there, its files are not
        path.unlink()
    with pytest.raises(RemovalRefusedError, match="holds no files now, but 4 documents") as refused:
        index.ingest([docs])
    assert "\n" not in str(refused.value)
    assert documents(index) == 4 and index.verify().ok
    last = index.runs(1)[0]
    assert last.status == "refused" and last.errors[0]["path"] == str(docs.resolve())
    assert "holds no files now" in last.errors[0]["reason"]
    # The user chooses it: the documents go.
    run = index.ingest([docs], allow_removals=True)
    assert run.removed == 4 and documents(index) == 0


def test_removing_more_than_the_threshold_needs_a_choice_and_less_does_not(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs", count=4)
    index = new_index(tmp_path)
    index.ingest([docs])
    (docs / "doc0.md").unlink()
    (docs / "doc1.md").unlink()
    assert index.ingest([docs]).removed == 2  # 2 of 4 is not more than half
    (docs / "doc2.md").unlink()
    with pytest.raises(RemovalRefusedError, match="1 of the 2 documents"):
        index.ingest([docs], removal_threshold=0.4)
    assert documents(index) == 2
    assert index.ingest([docs], removal_threshold=0.5).removed == 1


def test_dry_run_reports_the_plan_and_the_objection_and_writes_nothing(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path)
    index.ingest([docs])
    db = catalog.db_path(index.path)
    runs_before = len(index.runs(100))
    for path in list(docs.iterdir())[:3]:
        path.unlink()
    (docs / "new.md").write_text("# New\n\nA mill by the river.\n")
    stamp = db.stat().st_mtime_ns
    run = index.ingest([docs], dry_run=True)
    assert (run.status, run.added, run.removed, run.unchanged) == ("dry-run", 1, 3, 1)
    assert any("would be refused" in error["reason"] for error in run.errors)
    assert db.stat().st_mtime_ns == stamp and len(index.runs(100)) == runs_before and documents(index) == 4


@pytest.fixture
def hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI loads the HashEmbedder where it would load the real model."""
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())


def test_the_cli_refuses_in_one_line_and_offers_allow_removals_and_dry_run(tmp_path: Path, hash_model: None) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path)
    index.ingest([docs])
    shutil.rmtree(docs)
    docs.mkdir()
    runner = CliRunner()
    args = ["ingest", str(docs), "--index", str(index.path)]
    refused = runner.invoke(cli, args)
    assert refused.exit_code == 1 and "Traceback" not in refused.output
    assert "refused to remove documents" in refused.output and "--allow-removals" in refused.output
    dry = runner.invoke(cli, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "dry run, nothing written: would add 0, update 0, remove 4" in dry.output
    assert documents(index) == 4
    allowed = runner.invoke(cli, [*args, "--allow-removals"])
    assert allowed.exit_code == 0, allowed.output
    assert documents(index) == 0


def test_documents_under_a_folder_that_failed_are_kept() -> None:
    from citeline.pipeline import FileError, ParsedBatch, plan_changes

    stored = {"a": ("/r", "sub/a.md", "h1"), "b": ("/r", "sub/deeper/b.md", "h2"), "c": ("/r", "c.md", "h3")}
    parsed = ParsedBatch(errors=[FileError("/r/sub", "cannot read folder: Permission denied")])
    plan = plan_changes(stored, ["/r"], [], parsed)
    assert plan.remove_doc_ids == ["c"]  # only the document outside the unreadable folder vanished


# ---------------------------------------------------------------- locks


def test_deleting_the_lock_files_while_a_writer_runs_does_not_let_a_second_writer_in(tmp_path: Path) -> None:
    index = new_index(tmp_path)
    with writer_lock(index.path):
        for name in (WRITE_LOCK_FILE, DB_LOCK_FILE):
            (index.path / name).unlink(missing_ok=True)
        started = time.monotonic()
        with pytest.raises(IndexLockedError), writer_lock(index.path, wait=0.3):
            pass
        assert time.monotonic() - started >= 0.3
        # A second writer in another thread waits until the first lets go.
        entered = threading.Event()

        def second() -> None:
            with writer_lock(index.path):
                entered.set()

        thread = threading.Thread(target=second)
        thread.start()
        assert not entered.wait(0.3)
    assert entered.wait(5)
    thread.join()


def test_a_db_lock_replaced_between_open_and_lock_is_taken_again(tmp_path: Path) -> None:
    index = new_index(tmp_path)
    deadline = time.monotonic() + 5
    held = database_lock(index.path, exclusive=True, deadline=deadline, what="meta.duckdb")
    assert held is not None
    (index.path / DB_LOCK_FILE).unlink()  # the lock file goes while held: a newcomer locks the new file
    other = database_lock(index.path, exclusive=True, deadline=deadline, what="meta.duckdb")
    assert other is not None and (index.path / DB_LOCK_FILE).exists()
    other.close()
    held.close()


# ---------------------------------------------------------------- duplicate rows


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    path = tmp_path / "legacy"
    shutil.copytree(LEGACY, path)
    return path


def _duplicate_some_rows(index_dir: Path) -> None:
    # What two writers at once left behind: every row of two documents (and their chunks) stored twice, one
    # of them as another version (a later run, other text) whose chunks have other ids, and a ledger row twice.
    with contextlib.closing(duckdb.connect(str(catalog.db_path(index_dir)))) as connection:
        doc_ids = [
            row[0] for row in connection.execute("SELECT doc_id FROM documents ORDER BY doc_id LIMIT 2").fetchall()
        ]
        connection.execute("INSERT INTO documents SELECT * FROM documents WHERE doc_id = ?", [doc_ids[0]])
        connection.execute("INSERT INTO chunks SELECT * FROM chunks WHERE doc_id = ?", [doc_ids[0]])
        connection.execute(
            "INSERT INTO documents SELECT * REPLACE ('zz-later' AS run_id, ingested_at + INTERVAL 1 HOUR AS "
            "ingested_at) FROM documents WHERE doc_id = ?",
            [doc_ids[1]],
        )
        connection.execute(
            "INSERT INTO chunks SELECT * REPLACE (chunk_id + 1 AS chunk_id, 'zz-later' AS run_id) "
            "FROM chunks WHERE doc_id = ?",
            [doc_ids[1]],
        )
        connection.execute("INSERT INTO runs SELECT * FROM runs LIMIT 1")


def test_verify_reports_duplicate_rows_and_rebuild_removes_them_and_adds_keys(legacy: Path) -> None:
    index = Index.open(legacy, embedder=HashEmbedder())
    with contextlib.closing(catalog.connect(legacy, read_only=True)) as connection:
        before = catalog.counts(connection)
    _duplicate_some_rows(legacy)
    problems = check(legacy, ["no_duplicate_rows"])["no_duplicate_rows"]
    assert problems and "documents (2)" in problems[0] and "runs (1)" in problems[0]
    assert "no_duplicate_rows" in INVARIANTS and not index.verify().ok
    with pytest.warns(Warning, match="kept the newest run's"):
        report = index.rebuild()
    assert report.ok, report.problems
    with contextlib.closing(catalog.connect(legacy, read_only=True)) as connection:
        assert catalog.counts(connection) == before
        assert catalog.duplicate_rows(connection) == dict.fromkeys(catalog.KEYS, 0)
        assert connection.execute("SELECT count(*) FROM documents WHERE run_id = 'zz-later'").fetchall()[0][0] == 1
    # The keys are there now: a second copy of a row cannot be stored any more.
    with (
        contextlib.closing(duckdb.connect(str(catalog.db_path(legacy)))) as connection,
        pytest.raises(duckdb.ConstraintException),
    ):
        connection.execute("INSERT INTO documents SELECT * FROM documents LIMIT 1")
    assert index.search("river", k=3)


def test_a_new_index_cannot_store_a_row_twice(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path)
    index.ingest([docs])
    with contextlib.closing(duckdb.connect(str(catalog.db_path(index.path)))) as connection:
        for table in catalog.KEYS:
            with pytest.raises(duckdb.ConstraintException):
                connection.execute(f"INSERT INTO {table} SELECT * FROM {table} LIMIT 1")
