"""Nothing lost, ever (issue 14): empty or mostly vanished roots, deleted lock files, duplicate rows, and one clear
line for every error. Real files, real DuckDB and FAISS; the embedder is the fast HashEmbedder."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from conftest import LEGACY, HashEmbedder

from citeline import Index
from citeline.cli.main import cli
from citeline.errors import (
    IndexLockedError,
    IndexMismatchError,
    IndexWriteError,
    QueryError,
    RemovalRefusedError,
    SettingsError,
)
from citeline.store import catalog, checks, generation
from citeline.store.locks import DB_LOCK_FILE, WRITE_LOCK_FILE, database_lock, writer_lock
from citeline.store.verify import INVARIANTS, check


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
    from citeline.ingest.pipeline import ParsedBatch, plan_changes
    from citeline.sources.discovery import Discovery, Problem

    stored = {"a": ("/r", "sub/a.md", "h1"), "b": ("/r", "sub/deeper/b.md", "h2"), "c": ("/r", "c.md", "h3")}
    discovery = Discovery(
        roots=["/r"], errors=[Problem("/r/sub", "cannot read folder: Permission denied")], unreadable_dirs=["/r/sub"]
    )
    plan = plan_changes(stored, ["/r"], discovery, ParsedBatch())
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
        assert checks.duplicate_rows(connection) == dict.fromkeys(checks.KEYS, 0)
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
        for table in checks.KEYS:
            with pytest.raises(duckdb.ConstraintException):
                connection.execute(f"INSERT INTO {table} SELECT * FROM {table} LIMIT 1")


# ---------------------------------------------------------------- read-only mounts and full disks (real mounts)


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only_view(source: Path, target: Path):
    """``source`` seen through a read-only bind mount at ``target`` (needs root and mount privileges)."""
    target.mkdir()
    if not _mount("--bind", str(source), str(target)):
        pytest.skip("cannot bind-mount here (needs root and mount privileges)")
    try:
        if not _mount("-o", "remount,ro,bind", str(target)):
            pytest.skip("cannot remount read-only here")
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def test_a_read_only_index_directory_can_be_searched_and_refuses_writes_in_one_line(tmp_path: Path) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path)
    index.ingest([docs])
    with read_only_view(index.path, tmp_path / "ro") as mounted:
        with pytest.raises(OSError):
            (mounted / "probe").touch()
        reader = Index.open(mounted, embedder=HashEmbedder())
        assert reader.search("river bridge", k=2) and reader.status().documents == 4
        assert reader.runs(5) and reader.verify().ok
        with pytest.raises(IndexWriteError, match="Read-only file system"):
            reader.ingest([docs])


@contextlib.contextmanager
def small_disk(target: Path, size: str = "8m"):
    """A tmpfs of ``size`` mounted at ``target`` (needs root and mount privileges)."""
    target.mkdir()
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)):
        pytest.skip("cannot mount a tmpfs here (needs root and mount privileges)")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def _fill(disk: Path) -> None:
    # Fill the disk to the last byte.
    with (disk / "filler").open("wb") as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()


@pytest.mark.parametrize("when", ["artifacts", "commit"])
def test_a_full_disk_says_so_in_one_line_and_in_the_ledger_and_keeps_the_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    with small_disk(tmp_path / "disk") as disk:
        index = Index.create(disk / "index", embedder=HashEmbedder())
        index.ingest([make_docs(tmp_path / "docs")])
        more = make_docs(tmp_path / "more", count=30)
        publish = generation.publish_incremental

        def then_fill(*args, **kwargs):  # the artifacts fit; the disk fills before DuckDB's COMMIT
            entries = publish(*args, **kwargs)
            _fill(disk)
            return entries

        if when == "commit":
            monkeypatch.setattr(generation, "publish_incremental", then_fill)
        else:
            _fill(disk)  # full before the run: writing the new generation's files fails
        with pytest.raises(IndexWriteError, match="no space left on device") as failed:
            index.ingest([more])
        assert "\n" not in str(failed.value) and "generation 1" in str(failed.value)
        if when == "commit":
            # The staged files were removed at once, which freed the room for the ledger row saying why.
            last = index.runs(1)[0]
            assert last.status == "failed" and "no space left on device" in last.errors[0]["reason"]
            assert "no transaction is active" not in last.errors[0]["reason"]
        (disk / "filler").unlink()
        monkeypatch.undo()
        assert index.status().generation == 1 and index.status().documents == 4 and index.verify().ok
        result = CliRunner().invoke(cli, ["status", "--index", str(index.path)])
        assert result.exit_code == 0, result.output


# ---------------------------------------------------------------- one clear line for damage and bad input


def _damaged_copy(tmp_path: Path, name: str, *statements: str) -> Path:
    path = tmp_path / name
    shutil.copytree(LEGACY, path)
    with contextlib.closing(duckdb.connect(str(catalog.db_path(path)))) as connection:
        for statement in statements:
            connection.execute(statement)
    return path


DAMAGE = {
    "meta_not_json": ["UPDATE index_meta SET value = '{bad' WHERE key = 'generation'"],
    "meta_wrong_type": ["UPDATE index_meta SET value = '\"abc\"' WHERE key = 'generation'"],
    "meta_missing": ["DELETE FROM index_meta WHERE key = 'dimension'"],
    "runs_bad_json": ["ALTER TABLE runs ALTER roots TYPE VARCHAR", "UPDATE runs SET roots = 'zz'"],
    "runs_dropped": ["DROP TABLE runs"],
    "documents_dropped": ["DROP TABLE documents"],
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("command", [["status"], ["runs"], ["verify"], ["search", "river", "--mode", "lexical"]])
def test_damaged_catalog_rows_give_one_line_not_a_traceback(
    tmp_path: Path, hash_model: None, damage: str, command: list[str]
) -> None:
    path = _damaged_copy(tmp_path, damage, *DAMAGE[damage])
    result = CliRunner().invoke(cli, [*command, "--index", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert "Traceback" not in result.output
    if result.exit_code and "INCONSISTENT" not in result.output:  # verify's report of problems is not an error
        assert result.exit_code == 1
        lines = [line for line in result.output.splitlines() if line.startswith("Error")]
        assert len(lines) == 1 and ("damaged" in lines[0] or "runs" in lines[0]), result.output
    if command == ["verify"] and damage.startswith("runs"):
        assert "INCONSISTENT" in result.output and "run ledger" in result.output


def test_a_damaged_header_is_damage_reported_at_once_not_a_lock_after_30_s(tmp_path: Path) -> None:
    path = tmp_path / "index"
    shutil.copytree(LEGACY, path)
    data = bytearray(catalog.db_path(path).read_bytes())
    data[4096:4128] = b"\xff" * 32  # DuckDB: "... does not match stored checksum ... in block at location 4096"
    catalog.db_path(path).write_bytes(bytes(data))
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["status", "--index", str(path)])
    assert time.monotonic() - started < 5
    assert result.exit_code == 1 and "damaged" in result.output and "locked" not in result.output


def test_a_chunk_without_its_document_is_skipped_by_search_and_reported_by_verify(tmp_path: Path) -> None:
    path = _damaged_copy(tmp_path, "dangling", "DELETE FROM documents WHERE doc_id = (SELECT min(doc_id) FROM chunks)")
    index = Index.open(path, embedder=HashEmbedder())
    for mode in ("hybrid", "dense", "lexical"):
        results = index.search("soldiers defect across the river", k=50, mode=mode)
        assert results and all(result.doc_id for result in results)
    assert index.verify().invariants["chunks_have_documents"]


@pytest.mark.parametrize(
    "filters", [{"meta": {"n": 10**400}}, {"source": "~nosuchuser/x"}, {"source": "a\0b"}, {"meta": {"k": "\udcff"}}]
)
def test_filter_values_python_cannot_handle_are_query_errors(legacy: Path, filters: dict) -> None:
    index = Index.open(legacy, embedder=HashEmbedder())
    with pytest.raises(QueryError):
        index.search("river", k=3, filters=filters)


def test_text_duckdb_cannot_take_is_the_callers_error_wherever_it_comes_in(legacy: Path) -> None:
    """A lone surrogate (a byte that was not UTF-8 in an argument) in a document name, a removal's selector or a
    filter is a QueryError saying so, never DuckDB's conversion error read as a damaged database; and any path that
    would still let one through to DuckDB is caught the same way (``argument_error``)."""
    import duckdb

    from citeline.store.catalog import damage_reported
    from citeline.store.connection import argument_error

    index = Index.open(legacy, embedder=HashEmbedder())
    for call in (
        lambda: index.document("\udcff"),
        lambda: index.remove(["\udcff"]),
        lambda: index.remove(doc_ids=["\udcff"]),
        lambda: index.documents({"path_glob": "*\udcff"}),
    ):
        with pytest.raises(QueryError, match="not valid text"):
            call()
    connection = duckdb.connect()
    with pytest.raises(QueryError, match="not valid text"):
        damage_reported(lambda c, value: c.execute("SELECT ?", [value]).fetchall(), connection, "\udcff")
    with pytest.raises(duckdb.Error) as raised:
        connection.execute("SELECT * FROM no_such_table")
    assert argument_error(raised.value) is None  # damage (or a bug) stays what it is


def test_a_query_that_is_not_utf8_is_a_query_error(legacy: Path) -> None:
    with pytest.raises(QueryError, match="not valid text"):
        Index.open(legacy, embedder=HashEmbedder()).search("river \udcff", k=3)


@pytest.fixture(scope="module")
def indexed_docs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """:func:`make_docs` and an index of them, built once for the module (its tests copy the index, never write
    into this one, nor into the documents)."""
    root = tmp_path_factory.mktemp("indexed")
    docs = make_docs(root / "docs")
    new_index(root).ingest([docs])
    return docs, root / "index"


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["runs", "--limit", "-1"], 2, "--limit"),
        (["ingest", "DOCS", "--max-tokens", "0"], 2, "--max-tokens"),
        (["ingest", "a\0b"], 2, "NUL"),
        (["ingest", "~nosuchuser/docs"], 1, "~nosuchuser/docs"),
        (["ingest", "LOOP"], 1, "symbolic link loop"),
        (["search", "x", "--source", "~nosuchuser"], 1, "~nosuchuser"),
        (["show", "~nosuchuser/x"], 1, "~nosuchuser/x"),
        (["show", "LOOP"], 1, "loop"),
        (["remove", "~nosuchuser/x"], 2, "~nosuchuser/x"),
        (["documents", "--source", "~nosuchuser"], 1, "~nosuchuser"),
        (["ingest", "DOCS", "--removal-threshold", "2"], 2, "--removal-threshold"),
        # not UTF-8 (an undecodable byte in a terminal's argument): the user's text, never "the database failed"
        (["runs", "--limit", "99999999999999999999"], 2, "--limit"),
        (["show", "\udcff"], 1, "not valid text (not UTF-8)"),
        (["show", "DOCS/caf\udce9.md"], 1, "no file whose name is not UTF-8 is indexed"),
        (["remove", "\udcff"], 1, "not valid text (not UTF-8)"),
        (["remove", "--doc", "\udcff"], 1, "not valid text (not UTF-8)"),
        (["remove", "--source", "\udcff"], 1, "not valid text (not UTF-8)"),
        (["documents", "--path", "\udcff"], 1, "not valid text (not UTF-8)"),
    ],
)
def test_bad_arguments_are_one_line_with_the_right_exit_status(
    tmp_path: Path, hash_model: None, indexed_docs: tuple[Path, Path], args: list[str], code: int, says: str
) -> None:
    docs, built = indexed_docs
    index_path = tmp_path / "index"
    shutil.copytree(built, index_path)  # a command that wrote anyway writes into this test's copy
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    args = [
        arg.replace("DOCS", str(docs)) if arg.startswith("DOCS") else {"LOOP": str(loop)}.get(arg, arg) for arg in args
    ]
    result = CliRunner().invoke(cli, [*args, "--index", str(index_path)])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output and says in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_only_settings_errors_are_usage_errors(hash_model: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def bug(*args, **kwargs):
        raise ValueError("a bug, not the user's fault")

    monkeypatch.setattr("citeline.index.Index.open", bug)
    result = CliRunner().invoke(cli, ["status", "--index", "x"])
    assert isinstance(result.exception, ValueError)  # a bug surfaces as one, not as exit 2
    assert issubclass(SettingsError, ValueError)


def test_max_tokens_zero_is_refused_not_the_default(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="max_tokens"):
        Index.create(tmp_path / "index", embedder=HashEmbedder(), max_tokens=0)
    assert not (tmp_path / "index" / "meta.duckdb").exists()


def test_two_first_runs_with_different_chunk_sizes_the_loser_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "index"
    outcomes: dict[int, object] = {}
    gate = threading.Barrier(2)

    def create(max_tokens: int) -> None:
        gate.wait()
        try:
            outcomes[max_tokens] = Index.create(path, embedder=HashEmbedder(), max_tokens=max_tokens)
        except IndexMismatchError as exc:
            outcomes[max_tokens] = exc

    threads = [threading.Thread(target=create, args=(size,)) for size in (100, 200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [size for size, outcome in outcomes.items() if isinstance(outcome, Index)]
    losers = [outcome for outcome in outcomes.values() if isinstance(outcome, IndexMismatchError)]
    assert len(winners) == 1 and len(losers) == 1
    assert generation.read_meta(path)["max_tokens"] == winners[0]
    assert "chunking" in str(losers[0])


# ---------------------------------------------------------------- the model cache


@pytest.mark.slow
def test_a_damaged_onnx_file_in_the_model_cache_is_exported_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citeline.model import embedding

    embedder = embedding.SentenceTransformerEmbedder(backend="onnx")
    cached = embedding.onnx_model_dir(embedder.model_path)
    monkeypatch.setenv("CITELINE_CACHE", str(tmp_path / "cache"))
    export = embedding.onnx_model_dir(embedder.model_path)
    if (cached / "onnx" / "model.onnx").exists():  # start from the machine's export: exporting takes a while
        shutil.copytree(cached, export)
    export = embedding.ensure_onnx_model(embedder.model_path, "onnx")
    model_file = export / "onnx" / "model.onnx"
    size = model_file.stat().st_size
    for damaged in {model_file, embedding.model_file(export, "onnx")}:  # the export, and its mapped copy if any
        damaged.write_bytes(damaged.read_bytes()[: damaged.stat().st_size // 3])  # an interrupted copy
    with pytest.warns(UserWarning, match="does not load"):
        vector = embedder.query_encoder.encode(["the river bridge"])
    assert vector.shape == (1, embedder.dimension) and model_file.stat().st_size == size


# ---------------------------------------------------------------- every fault class at once (bench/reliability.py)


# Slow: every fault class's trial in a row (a tmpfs mount, a second writer); each class has its own fast test above
# (empty root, the lock files, duplicate rows, the full disk), and in test_sources_safety.py and test_reliability.py.
@pytest.mark.slow
def test_every_fault_class_loses_no_document(tmp_path: Path) -> None:
    from _faults import fault_table, run_fault_trials

    results = run_fault_trials(tmp_path, rounds=1)
    table = fault_table(results)
    for result in results:
        assert result.lost == 0 and result.completed == result.runs and not result.notes, table
