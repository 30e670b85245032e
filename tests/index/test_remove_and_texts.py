"""Removing documents (``Index.remove``, ``citeline remove``) and indexing texts that are not files
(``Index.add_texts``, ``citeline ingest -``), on real index files (DuckDB, FAISS, BM25 segments)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.main import cli
from citeline.errors import IndexNotFoundError, QueryError, SettingsError, SourceError
from citeline.ingest.texts import read_jsonl
from citeline.store import catalog
from citeline.store.verify import check


def _write(docs: Path) -> None:
    (docs / "sub").mkdir(parents=True, exist_ok=True)
    (docs / "alpha.txt").write_text("Alpha: the river bridge held through the winter flood.\n", encoding="utf-8")
    (docs / "beta.md").write_text("# Beta\n\nThe soldier wrote a letter about the siege.\n", encoding="utf-8")
    (docs / "sub" / "gamma.txt").write_text("Gamma: grain, the mill and the new tax.\n", encoding="utf-8")
    (docs / "sub" / "delta.txt").write_text("Delta: the guild charter of the port.\n", encoding="utf-8")
    (docs / "records.jsonl").write_text(
        '{"_id": "r1", "text": "Salt and wool came by ship."}\n{"_id": "r2", "text": "The bishop kept a ledger."}\n',
        encoding="utf-8",
    )


@pytest.fixture
def built(tmp_path: Path) -> tuple[Index, Path]:
    docs = tmp_path / "docs"
    _write(docs)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    return index, docs


def _source_ids(index: Index) -> list[str]:
    return sorted(record.source_id for record in index.documents())


def _consistent(index: Index) -> None:
    assert index.verify().ok
    assert check(index.path) == {name: [] for name in check(index.path)}


# ---------------------------------------------------------------- remove


def test_remove_a_file_a_folder_and_by_id(built: tuple[Index, Path]) -> None:
    index, docs = built
    gamma = next(d for d in index.documents() if d.source_id == "sub/gamma.txt")
    assert any(r.doc_id == gamma.doc_id for r in index.search("grain mill tax", k=3))

    run = index.remove([docs / "alpha.txt"])
    assert run.status == "succeeded" and run.removed == 1 and run.generation == 2
    assert [d["source_path"] for d in run.documents] == [str(docs / "alpha.txt")]
    run = index.remove(paths=[docs / "sub"])  # a folder: every document under it
    assert run.removed == 2 and index.meta["generation"] == 3
    run = index.remove(doc_ids=[index.documents(filters={"path_glob": "*#r1"})[0].doc_id])
    assert run.removed == 1
    assert _source_ids(index) == ["beta.md", "records.jsonl#r2"]
    assert all(r.doc_id != gamma.doc_id for r in index.search("grain mill tax", k=10))
    assert all("grain" not in r.text for r in index.search("grain mill tax", k=10, mode="lexical"))
    _consistent(index)


def test_remove_by_source_and_a_jsonl_file_takes_its_records(built: tuple[Index, Path]) -> None:
    index, docs = built
    assert index.remove([docs / "records.jsonl"]).removed == 2
    assert index.remove(source=str(docs)).removed == 4  # the ingested root as a --source filter selects it
    assert index.documents() == []
    assert index.status().chunks == 0
    _consistent(index)


def test_remove_is_a_run_in_the_ledger(built: tuple[Index, Path]) -> None:
    index, docs = built
    index.remove([docs / "sub"], doc_ids=[index.documents()[0].doc_id])
    last = index.runs(limit=1)[0]
    assert last.status == "succeeded" and last.removed == 3 and last.generation == 2
    assert last.roots[0] == f"remove path {docs / 'sub'}" and last.roots[1].startswith("remove doc ")
    shown = CliRunner().invoke(cli, ["runs", "--index", str(index.path), "--json"])
    assert shown.exit_code == 0 and json.loads(shown.output.splitlines()[0])["removed"] == 3


def test_dry_run_lists_and_writes_nothing(built: tuple[Index, Path]) -> None:
    index, docs = built
    before = (catalog.db_path(index.path).read_bytes(), len(index.runs()))
    run = index.remove([docs / "sub"], dry_run=True)
    assert run.status == "dry-run" and run.removed == 2 and run.generation == 1
    assert sorted(d["source_path"] for d in run.documents) == [
        str(docs / "sub" / n) for n in ("delta.txt", "gamma.txt")
    ]
    assert (catalog.db_path(index.path).read_bytes(), len(index.runs())) == before
    assert len(index.documents()) == 6


def test_a_selector_matching_nothing_removes_nothing(built: tuple[Index, Path]) -> None:
    index, docs = built
    with pytest.raises(QueryError, match=r"nothing removed: .*--doc 0000000000000000") as caught:
        index.remove([docs / "sub"], doc_ids=["0000000000000000"])
    assert "\n" not in str(caught.value)
    with pytest.raises(QueryError, match=r"path .*nowhere"):
        index.remove([docs / "nowhere"])
    with pytest.raises(QueryError, match="--source elsewhere"):
        index.remove(source="elsewhere")
    with pytest.raises(SettingsError, match="remove what"):
        index.remove()
    assert len(index.documents()) == 6 and index.runs(limit=1)[0].removed == 0  # no run recorded either


def test_removed_documents_come_back_on_ingest_only_while_their_files_exist(built: tuple[Index, Path]) -> None:
    index, docs = built
    index.remove([docs / "sub"])
    (docs / "sub" / "delta.txt").unlink()
    run = index.ingest([docs])
    assert (run.added, run.removed, run.unchanged) == (1, 0, 4)  # gamma is back, delta is gone for good
    assert "sub/gamma.txt" in _source_ids(index) and "sub/delta.txt" not in _source_ids(index)
    _consistent(index)


def test_remove_through_the_cli(built: tuple[Index, Path], tmp_path: Path) -> None:
    index, docs = built
    runner = CliRunner()
    dry = runner.invoke(cli, ["remove", str(docs / "sub"), "--index", str(index.path), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would remove" in dry.output and "gamma.txt" in dry.output and "nothing written" in dry.output
    missing = runner.invoke(cli, ["remove", "--doc", "nope", "--index", str(index.path)])
    assert missing.exit_code == 1 and missing.output.count("\n") == 1 and "--doc nope" in missing.output
    nothing = runner.invoke(cli, ["remove", "--index", str(index.path)])
    assert nothing.exit_code == 2 and "remove what" in nothing.output
    both = [str(docs / "sub"), "--source", str(docs / "beta.md")]
    done = runner.invoke(cli, ["remove", *both, "--index", str(index.path), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["removed"] == 3
    # No index there: one line, and --dry-run creates none.
    absent = tmp_path / "absent"
    result = runner.invoke(cli, ["remove", str(docs), "--index", str(absent), "--dry-run"])
    assert result.exit_code == 1 and "no citeline index" in result.output
    assert not absent.exists()
    with pytest.raises(IndexNotFoundError):
        Index.open(absent)


# ---------------------------------------------------------------- add_texts


def test_add_texts_is_incremental_by_id(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    index = Index.create(tmp_path / "ix", embedder=embedder)
    run = index.add_texts(["the river bridge in winter", "grain and the mill"], ids=["a", 2], metadata={"k": "v"})
    assert (run.added, run.updated, run.unchanged, run.roots) == (2, 0, 0, ["texts"])
    encoded = embedder.texts_encoded
    texts = ["the river bridge in winter", "grain and the mill"]
    again = index.add_texts(texts, ids=["a", "2"], metadata={"k": "v"})  # 2 == "2"
    assert (again.added, again.updated, again.unchanged, again.chunks_embedded) == (0, 0, 2, 0)
    assert embedder.texts_encoded == encoded and again.generation == run.generation
    # Metadata alone changed: the document is replaced (what was given last is what is stored), nothing embedded.
    relabelled = index.add_texts(texts[1:], ids=[2], metadata={"k": "w"})
    assert (relabelled.updated, relabelled.unchanged, relabelled.chunks_embedded) == (1, 0, 0)
    assert embedder.texts_encoded == encoded
    assert {d.source_id: d.metadata for d in index.documents()} == {"a": {"k": "v"}, "2": {"k": "w"}}
    changed = index.add_texts(["grain, the mill and the tax"], ids=[2])  # "a" is left out: kept, not removed
    assert (changed.added, changed.updated, changed.unchanged, changed.removed) == (0, 1, 0, 0)
    records = {d.source_id: d for d in index.documents()}
    assert sorted(records) == ["2", "a"] and records["a"].metadata == {"k": "v"}
    assert records["2"].source_path == "texts:2" and records["2"].format == "text"
    hit = index.search("tax mill", k=1, filters={"source": "texts"})[0]
    assert hit.source_path == "texts:2" and hit.source_id == "2"
    assert index.document_text(hit.doc_id)[hit.char_start : hit.char_end] == hit.text
    _consistent(index)


def test_texts_without_ids_are_keyed_by_content_hash_and_sources_stay_apart(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    run = index.add_texts(["same words", "same words", "other words"], source="notes", titles=["Note", "x", None])
    assert run.added == 2  # the repeated text is one document
    ids = sorted(d.source_id for d in index.documents(filters={"source": "notes"}))
    assert ids == sorted(hashlib.sha256(t.encode()).hexdigest() for t in ("same words", "other words"))
    titled = index.documents(filters={"path_glob": "notes:" + hashlib.sha256(b"same words").hexdigest()})[0]
    assert titled.title == "Note" and index.document_text(titled.doc_id) == "Note\n\nsame words"
    index.add_texts(["same words"])  # the default source "texts" is another source: another document
    assert len(index.documents()) == 3
    assert index.remove(source="notes").removed == 2 and len(index.documents()) == 1


def test_add_texts_refuses_bad_arguments_before_writing(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    cases = [
        (["ok", ""], {}, r"texts\[1\]"),
        (["ok", "fine"], {"ids": ["a", "a"]}, r"ids\[1\] 'a' repeats ids\[0\]"),
        (["ok"], {"ids": [True]}, r"ids\[0\]"),
        (["ok"], {"ids": ["a", "b"]}, "as long as texts"),
        (["ok"], {"metadata": [{"a": 1}, {}]}, "metadata"),
        (["ok"], {"source": "/abs/path"}, "looks like a path"),
        (["bad \ud800"], {}, "lone surrogate"),
        ("a string", {}, "list of strings"),
    ]
    for texts, kwargs, message in cases:
        with pytest.raises(SettingsError, match=message):
            index.add_texts(texts, **kwargs)  # type: ignore[arg-type]
    assert index.documents() == [] and index.runs() == []


def test_a_folder_ingest_never_removes_texts(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _write(docs)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.add_texts(["a note"], ids=["n1"])
    index.ingest([docs])
    shutil.rmtree(docs / "sub")
    index.ingest([docs])
    assert "n1" in _source_ids(index)


# ---------------------------------------------------------------- citeline ingest -


@pytest.fixture
def hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI builds its own model: make it the fast stand-in.
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())


def test_ingest_stdin_jsonl(tmp_path: Path, hash_model: None) -> None:
    ix = str(tmp_path / "ix")
    lines = [
        {"id": "n1", "text": "The river rose over the bridge.", "title": "Flood", "metadata": {"author": "Mara"}},
        {"id": 7, "text": "Grain prices doubled."},
    ]
    stdin = "\n".join(json.dumps(line) for line in lines) + "\n\n"
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", "-", "--index", ix, "--json"], input=stdin)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["added"] == 2
    again = runner.invoke(cli, ["ingest", "-", "--index", ix, "--json"], input=stdin)
    assert json.loads(again.output)["unchanged"] == 2
    other = runner.invoke(cli, ["ingest", "-", "--index", ix, "--source", "crm"], input='{"text": "hello there"}\n')
    assert other.exit_code == 0, other.output
    index = Index.open(ix, embedder=HashEmbedder())
    flood = index.documents(filters={"meta": {"author": "Mara"}})[0]
    assert (flood.source_path, flood.title) == ("texts:n1", "Flood")
    assert len(index.documents(filters={"source": "crm"})) == 1
    removed = runner.invoke(cli, ["remove", "texts:n1", "--index", ix])  # a text's source path, as listed
    assert removed.exit_code == 0 and "removed 1 document;" in removed.output
    removed = runner.invoke(cli, ["remove", "--source", "texts", "--index", ix])
    assert removed.exit_code == 0 and "removed 1 document;" in removed.output
    assert [d.source_path for d in index.documents()] == ["crm:" + hashlib.sha256(b"hello there").hexdigest()]
    _consistent(index)


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ('{"id": 1, "text": "ok"}\n{"id": 2, "text": \n', "line 2: invalid JSON"),
        ('{"id": 1, "text": "ok"}\n\n[1, 2]\n', "line 3: expected a JSON object"),
        ('{"id": 1, "txt": "ok"}\n', "line 1: unknown key 'txt'"),
        ('{"id": 1, "text": "  "}\n', "line 1: no text"),
        ('{"id": 1, "text": "a"}\n{"text": "b"}\n', "line 2: give an id on every line or on none"),
        ('{"id": 1, "text": "a"}\n{"id": "1", "text": "b"}\n', "line 2: id '1' repeats line 1"),
        ('{"id": 1, "text": "a", "metadata": [1]}\n', "line 1: metadata must be a JSON object"),
    ],
)
def test_ingest_stdin_bad_lines_are_one_line_errors_and_change_nothing(
    tmp_path: Path, hash_model: None, stdin: str, message: str
) -> None:
    ix = tmp_path / "ix"
    result = CliRunner().invoke(cli, ["ingest", "-", "--index", str(ix)], input=stdin)
    assert result.exit_code == 1
    assert message in result.output and "<stdin>" in result.output
    assert result.output.count("\n") == 1 and "Traceback" not in result.output
    assert not ix.exists()  # checked before the index was created


def test_ingest_stdin_usage_errors(tmp_path: Path, hash_model: None) -> None:
    runner = CliRunner()
    mixed = runner.invoke(cli, ["ingest", "-", str(tmp_path), "--index", str(tmp_path / "ix")], input="")
    assert mixed.exit_code == 2 and "cannot be combined" in mixed.output
    source_only = runner.invoke(cli, ["ingest", str(tmp_path), "--source", "x", "--index", str(tmp_path / "ix")])
    assert source_only.exit_code == 2 and "PATH -" in source_only.output
    with pytest.raises(SourceError, match="line 1: not valid UTF-8"):
        read_jsonl([b'{"text": "\xff"}\n'])


# ---------------------------------------------------------------- crash safety
