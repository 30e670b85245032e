"""One file never blocks its folder (issue 50): a document the catalog refuses at commit fails alone, reported
with DuckDB's first error and left out; the rest of the run commits; the next run does not embed the good files
again. Files the door refuses (metadata too wide, too deep, too large) fail at parse, naming the file and bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.sources import MAX_METADATA_CHARS, MAX_METADATA_DEPTH, MAX_METADATA_FIELDS
from citeline.store import connection


def _notes(folder: Path, count: int = 4) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        (folder / f"note{number}.md").write_text(f"# Note {number}\n\nThe ferry crossed at dawn, trip {number}.\n")


def _heavy_record(path: Path) -> None:
    # A record within every bound of the door whose passage rows (its metadata repeated in each of its chunks'
    # rows) pass a small catalog memory limit: the 60,000-column table, scaled to the test's limit.
    metadata = {f"field{i}": "x" * 200 for i in range(250)}
    text = "\n\n".join(f"Paragraph {i} of the harbour report, with words enough for chunks." * 8 for i in range(800))
    records = [{"id": "heavy", "text": text, **metadata}, {"id": "light", "text": "The lighthouse keeper's log."}]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_a_document_the_catalog_refuses_fails_alone_and_the_rest_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    _notes(docs)
    _heavy_record(docs / "export.jsonl")
    monkeypatch.setattr(connection, "MEMORY_LIMIT_MB", 24)  # the catalog's limit, scaled with the record
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())

    run = index.ingest([docs])
    assert run.status == "partial"
    assert (run.added, run.failed) == (5, 1)  # four notes and the light record
    (error,) = run.errors
    assert error["path"].endswith("export.jsonl") and "'heavy'" in error["reason"]
    assert "Out of Memory" in error["reason"]  # DuckDB's first error, not "Current transaction is aborted"
    assert "transaction is aborted" not in error["reason"]
    assert index.runs(1)[0].errors == run.errors  # the ledger says the same
    assert {d.source_id for d in index.documents()} == {f"note{i}.md" for i in range(4)} | {"export.jsonl#light"}
    assert not index.verify().problems

    again = index.ingest([docs])  # the refused record is tried again; nothing else is embedded again
    assert (again.added, again.unchanged, again.failed) == (0, 5, 1)
    assert 0 < again.chunks_embedded < run.chunks_embedded  # the heavy record's chunks only
    assert not index.verify().problems

    monkeypatch.setattr(connection, "MEMORY_LIMIT_MB", 512)  # once the catalog can hold it, it is indexed
    fixed = index.ingest([docs])
    assert (fixed.added, fixed.failed, fixed.status) == (1, 0, "succeeded")


def test_a_refused_update_keeps_the_stored_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    _notes(docs, 2)
    (docs / "export.jsonl").write_text(json.dumps({"id": "heavy", "text": "The first version."}) + "\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    _heavy_record(docs / "export.jsonl")
    (docs / "note0.md").write_text("# Note 0\n\nThe ferry now crosses at noon.\n")
    monkeypatch.setattr(connection, "MEMORY_LIMIT_MB", 24)
    run = index.ingest([docs])
    assert (run.added, run.updated, run.failed) == (1, 1, 1)  # the light record added, note0 updated
    kept = [hit.text for hit in index.search("first version", k=3) if hit.source_id == "export.jsonl#heavy"]
    assert kept == ["The first version."]
    assert not index.verify().problems


def _door_cases(folder: Path) -> dict[str, str]:
    # Files whose metadata is past a bound of the door, and the words their one-line error must hold.
    folder.mkdir(parents=True, exist_ok=True)
    columns = MAX_METADATA_FIELDS + 50
    (folder / "wide.csv").write_text(
        ",".join(f"c{i}" for i in range(columns)) + "\n" + ",".join(f"v{i}" for i in range(columns)) + "\n"
    )
    deep: object = "bottom"
    for _ in range(MAX_METADATA_DEPTH + 1):
        deep = {"x": deep}
    (folder / "deep.jsonl").write_text(json.dumps({"id": "d", "text": "A deep record.", "tree": deep}) + "\n")
    big = {"id": "b", "text": "A record with a large field.", "notes": "y" * (MAX_METADATA_CHARS + 1)}
    (folder / "big.jsonl").write_text(json.dumps(big) + "\n")
    (folder / "huge.jsonl").write_text('{"id": "h", "text": "A huge number.", "n": 1' + "0" * 30 + "}\n")
    return {
        "wide.csv": f"more than the {MAX_METADATA_FIELDS:,}",
        "deep.jsonl": f"nested deeper than {MAX_METADATA_DEPTH} levels",
        "big.jsonl": f"past the {MAX_METADATA_CHARS:,}",
        "huge.jsonl": "past 64 bits",
    }


def test_metadata_past_a_bound_fails_at_the_door_naming_the_bound(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _notes(docs, 2)
    expected = _door_cases(docs)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    run = index.ingest([docs])
    reasons = {Path(error["path"]).name: error["reason"] for error in run.errors}
    for name, words in expected.items():
        assert words in reasons[name], (name, reasons.get(name))
    stored = {d.source_id for d in index.documents()}
    assert {"note0.md", "note1.md"} <= stored
    assert not any(name.startswith(("wide", "deep", "big", "huge")) for name in stored)


def test_a_sharded_run_isolates_a_refused_document_in_its_shard(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _stateful import REFUSED_WORD, refusing_catalog

    docs = tmp_path / "docs"
    _notes(docs, 6)
    (docs / "refused.txt").write_text(f"A document the catalog refuses: {REFUSED_WORD}.\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), shards=2)
    with refusing_catalog():
        run = index.ingest([docs], parallel="serial")
    assert run.status == "partial" and run.added == 6, run
    assert [Path(error["path"]).name for error in run.errors] == ["refused.txt"]
    assert "refused.txt" not in {d.source_id for d in index.documents()}
    assert index.verify().ok
    again = index.ingest([docs], parallel="serial")  # the catalog takes it now; nothing else is read again
    assert (again.added, again.unchanged, again.status) == (1, 6, "succeeded")
