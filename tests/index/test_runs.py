"""Run settings declared once (IngestOptions), file selection (include/exclude, .citelineignore, defaults), and
runs that say what happened (--strict, Ctrl-C, a missing path). Real DuckDB, the HashEmbedder for plumbing."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline.cli.main import cli
from citeline.errors import PartialRunError, SettingsError
from citeline.index import Index
from citeline.ingest.options import DEFAULTS, IngestOptions, user_options
from citeline.sources.discovery import scan
from citeline.sources.selection import Selection


@pytest.fixture
def hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())


def write(root: Path, relative: str, text: str = "some words about rivers and mountains") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def mixed_folder(root: Path) -> Path:
    write(root, "notes/a.md", "# A\n\nAlpha notes on rivers.")
    write(root, "b.txt", "Beta text about mountains.")
    write(root, "node_modules/pkg/readme.md", "a package readme")
    write(root, "__pycache__/x.txt", "cache")
    write(root, ".hidden/secret.md", "hidden")
    write(root, "env/pyvenv.cfg", "home = /usr/bin")
    write(root, "env/lib/site.md", "a virtualenv file")
    write(root, "drafts/d.md", "a draft")
    write(root, "report.docx.bin", "binary")
    write(root, "image.png", "png")
    return root


# ---------------------------------------------------------------- A: one IngestOptions


def test_every_layer_takes_its_defaults_and_help_from_ingest_options() -> None:
    from citeline.cli.common import ingest_options
    from citeline.orchestration.parameters import IngestParameters

    command = ingest_options(click.command()(lambda **options: None))
    params = {param.name: param for param in command.params}
    for spec in user_options("cli"):
        default = params[spec.name].default
        assert default == spec.default, spec.name
        assert params[spec.name].help == spec.metadata["help"]  # type: ignore[attr-defined]
    for spec in user_options("flow"):
        field = IngestParameters.model_fields[spec.name]
        default = tuple(field.default) if isinstance(spec.default, tuple) else field.default
        assert default == spec.default and field.description == spec.metadata["help"], spec.name
    assert DEFAULTS.removal_threshold == 0.5 and DEFAULTS.commit_every == 20_000


def test_options_are_checked_once_for_every_caller(tmp_path: Path, fake_embedder: HashEmbedder) -> None:
    with pytest.raises(SettingsError, match="removal_threshold must be between 0 and 1"):
        IngestOptions(removal_threshold=1.5)
    with pytest.raises(SettingsError, match="unknown ingest option"):
        IngestOptions.of(remove_threshold=0.2)
    index = Index.create(tmp_path / "index", embedder=fake_embedder)
    with pytest.raises(SettingsError, match="commit_every must be at least 1"):
        index.ingest([str(tmp_path)], commit_every=0)
    docs = write(tmp_path / "docs", "a.md").parent
    write(docs, "b.md")
    # options= and keyword arguments: the keywords replace the options' fields
    run = index.ingest([docs], options=IngestOptions(include=("a.md",)), dry_run=True)
    assert run.status == "dry-run" and run.added == 1 and run.excluded == 1


# ---------------------------------------------------------------- B: selection


def test_defaults_leave_out_hidden_node_modules_pycache_and_virtualenvs(tmp_path: Path) -> None:
    found = scan([mixed_folder(tmp_path / "docs")])
    assert sorted(source.source_id for source in found.files) == ["b.txt", "drafts/d.md", "notes/a.md"]
    assert {"node_modules/", "__pycache__/", ".hidden/", "env/"} <= {
        p.rsplit("/", 2)[-2] + "/" for p in found.excluded_paths
    }
    assert found.unsupported == 2 and found.excluded == 4


def test_exclude_include_and_the_ignore_file(tmp_path: Path) -> None:
    docs = mixed_folder(tmp_path / "docs")
    assert [s.source_id for s in scan([docs], Selection(exclude=("drafts/",))).files] == ["b.txt", "notes/a.md"]
    assert [s.source_id for s in scan([docs], Selection(include=("*.md",))).files] == ["drafts/d.md", "notes/a.md"]
    (docs / ".citelineignore").write_text("# mine\n*.txt\n!node_modules/\n")
    found = scan([docs])
    assert sorted(s.source_id for s in found.files) == ["drafts/d.md", "node_modules/pkg/readme.md", "notes/a.md"]


def test_cli_counts_and_lists_skipped_files_and_keeps_what_an_exclusion_leaves_out(
    tmp_path: Path, hash_model: None, caplog: pytest.LogCaptureFixture
) -> None:
    docs, index = mixed_folder(tmp_path / "docs"), tmp_path / "index"
    first = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(index), "--json"])
    assert first.exit_code == 0, first.output
    summary = json.loads(first.output.splitlines()[-1])
    assert (summary["added"], summary["unsupported"], summary["excluded"]) == (3, 2, 4)
    # Excluding drafts/ now: its indexed document is kept (an exclude rule deletes nothing) and nothing fails.
    again = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(index), "--exclude", "drafts/", "-v"])
    assert again.exit_code == 0, again.output
    assert "0 removed" in again.output and "2 files skipped as unsupported, 5 excluded" in again.output
    assert "drafts/: excluded" in caplog.text and "image.png: unsupported file type" in caplog.text  # -v's lines
    assert sorted(d.source_id for d in Index.open(index).documents()) == ["b.txt", "drafts/d.md", "notes/a.md"]


# ---------------------------------------------------------------- C: runs that say what happened


def broken_folder(root: Path) -> Path:
    write(root, "good.md", "# Good\n\nA good document about rivers.")
    write(root, "records.jsonl", '{"id": "1", "text": "a record"}\n{not json\n')
    return root


def test_strict_exits_3_on_a_partial_run_and_keeps_what_it_indexed(tmp_path: Path, hash_model: None) -> None:
    docs, index = broken_folder(tmp_path / "docs"), tmp_path / "index"
    plain = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(index)])
    assert plain.exit_code == 0 and "partial" in plain.output
    write(docs, "more.md", "# More\n\nAnother document.")
    strict = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(index), "--strict"])
    assert strict.exit_code == 3, strict.output
    assert "partial" in strict.output and "records.jsonl" in strict.output
    assert "Exit status" in CliRunner().invoke(cli, ["ingest", "--help"]).output
    as_json = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(index), "--strict", "--json"])
    assert as_json.exit_code == 3 and json.loads(as_json.output.splitlines()[-1])["status"] == "partial"
    assert {d.source_id for d in Index.open(index).documents()} >= {"good.md", "more.md"}


def test_strict_in_python_raises_with_the_run(tmp_path: Path, fake_embedder: HashEmbedder) -> None:
    docs = broken_folder(tmp_path / "docs")
    index = Index.create(tmp_path / "index", embedder=fake_embedder)
    with pytest.raises(PartialRunError, match="partial") as raised:
        index.ingest([docs], strict=True)
    assert raised.value.run.status == "partial" and raised.value.run.added >= 2
    assert index.status().documents >= 2


def test_a_missing_path_creates_no_index(tmp_path: Path, hash_model: None) -> None:
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "does-not-exist"), "--index", str(tmp_path / "ix")])
    assert result.exit_code == 1 and "no such file or directory" in result.output
    assert not (tmp_path / "ix").exists()


class InterruptingEmbedder(HashEmbedder):
    """Embeds ``calls_before`` encode calls, then raises KeyboardInterrupt (a Ctrl-C mid-run)."""

    def __init__(self, calls_before: int) -> None:
        super().__init__()
        self.calls_before = calls_before
        self.armed = False

    def encode(self, texts: list[str], *, batch_size: int = 64) -> np.ndarray:  # type: ignore[override]
        if self.armed and self.calls >= self.calls_before:
            raise KeyboardInterrupt
        return super().encode(texts, batch_size=batch_size)


def test_ctrl_c_commits_what_was_embedded_and_the_ledger_says_interrupted(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write(docs, "old.md", "# Old\n\nIndexed before the interrupted run.")
    embedder = InterruptingEmbedder(calls_before=0)
    index = Index.create(tmp_path / "index", embedder=embedder)
    index.ingest([docs])
    for number in range(120):  # one document a file, each a chunk: 32 texts per encode call while reporting
        write(docs, f"new/{number:03d}.md", f"# Note {number}\n\nWords number {number} about topic {number % 7}.")
    embedder.calls, embedder.calls_before, embedder.armed = 0, 3, True  # the model loads (1 call), 2 batches
    with pytest.raises(KeyboardInterrupt):
        index.ingest([docs])  # its reporter makes the embed step encode 32 texts a call
    run = index.runs(1)[0]
    assert run.status == "interrupted", run
    assert "interrupted" in run.errors[-1]["reason"] and "kept what it committed" in run.errors[-1]["reason"]
    kept = {d.source_id for d in index.documents()}
    assert "old.md" in kept and 1 < len(kept) - 1 < 120 and run.added == len(kept) - 1
    assert index.verify().ok
    embedder.armed = False
    finished = index.ingest([docs])
    assert finished.status == "succeeded" and finished.added == 121 - len(kept) and finished.removed == 0


def test_a_sharded_run_selects_counts_and_keeps_excluded_documents_too(
    tmp_path: Path, fake_embedder: HashEmbedder
) -> None:
    docs = mixed_folder(tmp_path / "docs")
    index = Index.create(tmp_path / "index", embedder=fake_embedder, shards=2)
    first = index.ingest([docs], parallel="serial")
    assert (first.added, first.unsupported, first.excluded) == (3, 2, 4)
    again = index.ingest([docs], parallel="serial", exclude=["*.md"])
    assert (again.removed, again.excluded) == (0, 6)
    assert len(index.documents()) == 3


def test_selection_flags_apply_to_folders_not_to_stdin(tmp_path: Path, hash_model: None) -> None:
    texts = '{"id": "1", "text": "a text"}\n'
    for flag in (["--include", "*.md"], ["--exclude", "x/"], ["--strict"]):
        result = CliRunner().invoke(cli, ["ingest", "-", "--index", str(tmp_path / "ix"), *flag], input=texts)
        assert result.exit_code == 2 and "applies to folders" in result.output, result.output
