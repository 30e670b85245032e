"""A dry run writes nothing, not even the index: ``citeline ingest --dry-run`` where no index exists plans every
document as new and leaves the path as it was (``citeline.index.index_for_run``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.main import cli


@pytest.fixture
def hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI loads the HashEmbedder where it would load the real model."""
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())


def _docs(folder: Path) -> Path:
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.txt").write_text(f"Notes {name}\n\nThe river rose over the bridge at {name}.\n")
    return folder


def test_dry_run_on_a_missing_index_creates_nothing(tmp_path: Path, hash_model: None) -> None:
    docs, absent = _docs(tmp_path / "docs"), tmp_path / "no" / "index"
    dry = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(absent), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "dry run, nothing written: would add 3, update 0, remove 0" in dry.output
    assert not (tmp_path / "no").exists()
    as_json = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(absent), "--dry-run", "--json"])
    summary = json.loads(as_json.output)
    assert (summary["status"], summary["added"], summary["generation"]) == ("dry-run", 3, 0)
    assert not (tmp_path / "no").exists()


def test_dry_run_into_an_empty_folder_leaves_it_empty(tmp_path: Path, hash_model: None) -> None:
    docs, empty = _docs(tmp_path / "docs"), tmp_path / "empty"
    empty.mkdir()
    dry = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(empty), "--dry-run", "--shards", "2"])
    assert dry.exit_code == 0, dry.output
    assert "would add 3" in dry.output
    assert list(empty.iterdir()) == []


def test_dry_run_of_texts_on_stdin_creates_nothing(tmp_path: Path, hash_model: None) -> None:
    absent = tmp_path / "ix"
    stdin = json.dumps({"id": "n1", "text": "The river rose over the bridge."}) + "\n"
    dry = CliRunner().invoke(cli, ["ingest", "-", "--index", str(absent), "--dry-run", "--json"], input=stdin)
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["added"] == 1
    assert not absent.exists()


def test_dry_run_on_an_existing_index_plans_against_it(tmp_path: Path, hash_model: None) -> None:
    docs, path = _docs(tmp_path / "docs"), tmp_path / "index"
    assert CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(path)]).exit_code == 0
    (docs / "d.txt").write_text("Notes d\n\nGrain prices doubled.\n")
    before = sorted(p.name for p in path.iterdir())
    dry = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(path), "--dry-run"])
    assert "would add 1, update 0, remove 0, keep 3 unchanged" in dry.output, dry.output
    assert sorted(p.name for p in path.iterdir()) == before
    assert Index.open(path, embedder=HashEmbedder()).status().documents == 3
