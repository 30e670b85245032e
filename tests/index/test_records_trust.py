"""Records and files on real data: a removed record comes back with the next ingest, a bad record fails alone, a
file rewritten while it is read is never stored as a mix, and links not followed are skips (issue 40)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.main import cli
from citeline.ingest import pipeline


def _old(path: Path, text: str | bytes) -> Path:
    """Write ``path`` an hour in the past: settled, so the next run may skip it as unchanged."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    then = time.time() - 3600
    os.utime(path, (then, then))
    return path


def _folder(docs: Path) -> None:
    _old(docs / "table.csv", "id,title,text\nc1,Mill,The mill ground grain.\nc2,Port,Ships left the port.\n")
    rows = [{"_id": "j1", "text": "The bishop kept a ledger."}, {"_id": "j2", "text": "Salt came by ship."}]
    _old(docs / "log.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    _old(docs / "note.md", "# Note\n\nThe river bridge held through the flood.\n")


# ---------------------------------------------------------------- a removed record comes back


@pytest.mark.parametrize("removed", ["table.csv#c2", "log.jsonl#j1", "note.md"])
def test_a_removed_document_comes_back_with_the_next_ingest(tmp_path: Path, removed: str) -> None:
    docs = tmp_path / "docs"
    _folder(docs)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    assert index.ingest([docs]).unchanged == 5  # settled files: none read again
    doc_id = next(d.doc_id for d in index.documents() if d.source_id == removed)
    assert index.remove(doc_ids=doc_id).removed == 1
    assert removed not in {d.source_id for d in index.documents()}

    dry = index.ingest([docs], dry_run=True)
    assert (dry.added, dry.unchanged, dry.removed) == (1, 4, 0)  # a dry run reports it as to add
    run = index.ingest([docs])
    assert (run.added, run.updated, run.unchanged, run.removed, run.failed) == (1, 0, 4, 0, 0)
    assert removed in {d.source_id for d in index.documents()}
    assert (run.chunks_embedded, run.chunks_reused) == (1, 0)  # it alone: the file's other records are unchanged
    assert index.ingest([docs]).unchanged == 5  # and its file is skipped again afterwards
    assert index.verify().ok


def test_a_removed_record_comes_back_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *a, **k: HashEmbedder())
    docs, ix = tmp_path / "docs", str(tmp_path / "ix")
    _folder(docs)
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", str(docs), "--index", ix]).exit_code == 0
    doc_id = next(d.doc_id for d in Index.open(ix, embedder=HashEmbedder()).documents() if d.source_id.endswith("c1"))
    assert runner.invoke(cli, ["remove", "--doc", doc_id, "--index", ix]).exit_code == 0
    dry = runner.invoke(cli, ["ingest", str(docs), "--index", ix, "--dry-run"])
    assert "would add 1," in dry.output, dry.output
    run = runner.invoke(cli, ["ingest", str(docs), "--index", ix])
    assert run.exit_code == 0 and ": 1 added, 0 updated, 4 unchanged, 0 removed" in run.output, run.output
