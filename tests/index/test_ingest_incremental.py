"""Incremental, idempotent ingestion: skip, replace, remove (scoped), cache, ledger, and bad files mid-run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from citeline import Index, RemovalRefusedError
from citeline.store import catalog, verify


def chunk_rows(index: Index) -> set[tuple[str, int, str]]:
    connection = duckdb.connect(str(catalog.db_path(index.path)), read_only=True)
    try:
        return set(connection.execute("SELECT doc_id, chunk_id, text FROM chunks").fetchall())
    finally:
        connection.close()


def assert_consistent(index: Index) -> None:
    # The invariants verify() checks, named once in citeline.store.verify.
    assert verify.check(index.path) == {name: [] for name in verify.INVARIANTS}


def paragraphs(topic: str, count: int) -> str:
    return "\n\n".join(
        f"Paragraph {i} of the {topic} report. " + " ".join(f"{topic}-word-{i}-{j}" for j in range(60))
        for i in range(count)
    )


def make_docs(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "wages.md").write_text("# Wages\n\n" + paragraphs("wages", 6), encoding="utf-8")
    (root / "letters.txt").write_text("Letters\n\n" + paragraphs("letters", 4), encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "river.md").write_text("# River\n\n" + paragraphs("river", 3), encoding="utf-8")
    return root


def new_index(tmp_path: Path, embedder: object, name: str = "ix") -> Index:
    return Index.create(tmp_path / name, embedder=embedder, max_tokens=64, overlap_tokens=0)  # type: ignore[arg-type]


def test_unchanged_rerun_does_no_work(tmp_path, fake_embedder) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path, fake_embedder)
    first = index.ingest([docs])
    assert (first.added, first.chunks_embedded > 0, first.generation) == (3, True, 1)
    calls = fake_embedder.texts_encoded
    again = index.ingest([docs])
    assert (again.added, again.updated, again.unchanged, again.removed) == (0, 0, 3, 0)
    assert again.chunks_embedded == 0 and again.generation == 1
    assert fake_embedder.texts_encoded == calls
    assert_consistent(index)


def test_changed_document_replaces_its_chunks_and_reuses_unchanged_ones(tmp_path, fake_embedder) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path, fake_embedder)
    index.ingest([docs])
    before = chunk_rows(index)
    wages = docs / "wages.md"
    wages.write_text(wages.read_text().replace("Paragraph 5 of the wages report.", "A rewritten last paragraph."))
    run = index.ingest([docs])
    assert (run.updated, run.unchanged, run.added, run.removed) == (1, 2, 0, 0)
    assert run.chunks_reused > 0 and 0 < run.chunks_embedded < run.chunks_reused
    after = chunk_rows(index)
    assert not any("Paragraph 5 of the wages report." in text for _, _, text in after)
    assert any("A rewritten last paragraph." in text for _, _, text in after)
    # Untouched documents keep exactly their chunks.
    wages_doc = {doc for doc, _, text in before if "wages-word" in text}
    assert {r for r in before if r[0] not in wages_doc} == {r for r in after if r[0] not in wages_doc}
    assert_consistent(index)
    for result in index.search("rewritten last paragraph", k=3):
        assert index.document_text(result.doc_id)[result.char_start : result.char_end] == result.text


def test_vanished_documents_are_removed_only_under_their_root(tmp_path, fake_embedder) -> None:
    root_a = make_docs(tmp_path / "a")
    root_b = make_docs(tmp_path / "b")
    index = new_index(tmp_path, fake_embedder)
    index.ingest([root_a])
    index.ingest([root_b])
    assert index.status().documents == 6
    (root_a / "sub" / "river.md").unlink()
    (root_b / "letters.txt").unlink()  # b is not re-ingested: its documents must stay
    run = index.ingest([root_a])
    assert (run.removed, run.unchanged) == (1, 2)
    sources = {r.source_path for r in index.search("river letters wages", k=100)}
    assert str(root_a / "sub" / "river.md") not in sources
    assert str(root_b / "letters.txt") in sources and str(root_b / "sub" / "river.md") in sources
    assert index.status().documents == 5
    assert_consistent(index)
    # An emptied root removes everything under it, and nothing else, once the user allows it (see
    # tests/index/test_safety.py for the refusal without allow_removals).
    shutil.rmtree(root_a)
    root_a.mkdir()
    assert index.ingest([root_a], allow_removals=True).removed == 2
    assert index.status().documents == 3


def test_bad_files_are_reported_and_never_cost_what_was_indexed(tmp_path, fake_embedder) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path, fake_embedder)
    index.ingest([docs])
    letters_before = {r for r in chunk_rows(index) if "letters-word" in r[2]}
    # A file that was fine becomes undecodable; new bad files appear beside a new good one.
    # (Bytes no text encoding fits: control characters; a legacy encoding would be detected and decoded.)
    (docs / "letters.txt").write_bytes(b"Letters " + bytes(range(1, 256)) + b" broken now")
    (docs / "empty.md").write_bytes(b"")  # empty: skipped, not a failure
    (docs / "binary.txt").write_bytes(b"\x00\x01\x02")
    (docs / "corrupt.pdf").write_bytes(b"%PDF-1.4 garbage")
    (docs / "fresh.md").write_text("# Fresh\n\nA new document about the ferry.", encoding="utf-8")
    run = index.ingest([docs])
    assert run.status == "partial" and run.failed == 3 and run.added == 1 and run.removed == 0
    reasons = {Path(e["path"]).name: e["reason"] for e in run.errors}
    assert reasons.keys() == {"letters.txt", "binary.txt", "corrupt.pdf"}
    assert "UTF-8" in reasons["letters.txt"]
    assert "binary" in reasons["binary.txt"] and "PDF" in reasons["corrupt.pdf"]
    # The old version of letters.txt is still searchable, unchanged.
    assert letters_before <= chunk_rows(index)
    ledger = index.runs()
    assert ledger[0].run_id == run.run_id and ledger[0].errors == run.errors
    assert_consistent(index)


def test_jsonl_records_are_tracked_one_by_one(tmp_path, fake_embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    records = [
        {"_id": f"r{i}", "title": f"Record {i}", "text": f"Text of record {i} about topic {i}."} for i in range(5)
    ]
    corpus = docs / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    index = new_index(tmp_path, fake_embedder)
    assert index.ingest([docs]).added == 5
    records[1]["text"] = "Edited record one."
    del records[3]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    run = index.ingest([docs])
    assert (run.updated, run.removed, run.unchanged) == (1, 1, 3)
    # A corrupt rewrite of the file keeps every record as it was.
    corpus.write_text(corpus.read_text() + "{not json\n", encoding="utf-8")
    run = index.ingest([docs])
    assert run.failed == 1 and run.removed == 0 and index.status().documents == 4


def test_incremental_index_equals_a_fresh_build(tmp_path, fake_embedder) -> None:
    docs = make_docs(tmp_path / "docs")
    index = new_index(tmp_path, fake_embedder, "incremental")
    index.ingest([docs])
    (docs / "letters.txt").write_text("Letters\n\n" + paragraphs("letters", 5), encoding="utf-8")
    (docs / "sub" / "river.md").unlink()
    (docs / "new.md").write_text("# New\n\n" + paragraphs("ferry", 2), encoding="utf-8")
    index.ingest([docs])
    fresh = new_index(tmp_path, fake_embedder, "fresh")
    fresh.ingest([docs])
    assert chunk_rows(index) == chunk_rows(fresh)
    for query in ("letters word", "ferry report", "wages paragraph 3"):
        assert [r.chunk_id for r in index.search(query, k=10)] == [r.chunk_id for r in fresh.search(query, k=10)]


# ---------------------------------------------------------------- streaming: commits of commit_every chunks


def many_docs(root: Path, count: int = 12) -> Path:
    """``count`` files of about 2,000-4,000 characters, and a JSONL file of 6 records (several commits at a
    commit_every of 2, i.e. about 2,000 characters a commit)."""
    root.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        (root / f"doc{number:02d}.md").write_text(f"# Doc {number}\n\n" + paragraphs(f"t{number}", 2 + number % 3))
    records = [{"_id": f"r{i}", "title": f"R{i}", "text": paragraphs(f"rec{i}", 1)} for i in range(6)]
    (root / "records.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return root


def test_commits_in_batches_give_the_index_of_one_commit(tmp_path, fake_embedder) -> None:
    docs = many_docs(tmp_path / "docs")
    whole = new_index(tmp_path, fake_embedder, "whole")
    one = whole.ingest([docs])
    assert one.generation == 1
    encoded = fake_embedder.texts_encoded
    batched = new_index(tmp_path, fake_embedder, "batched")
    # commit_every=2: texts beyond ~2,000 characters are let go after parsing and their files parsed again.
    run = batched.ingest([docs], commit_every=2)
    assert run.generation > 5 and run.status == "succeeded"
    assert (run.added, run.chunks_embedded, run.chunks_reused) == (18, one.chunks_embedded, one.chunks_reused)
    # Each text embedded once, as in one commit (plus the one-text warm-up before each commit's embed stage).
    assert fake_embedder.texts_encoded - encoded == encoded + run.generation - 1
    assert chunk_rows(batched) == chunk_rows(whole)
    # One ledger row for the run, at its last generation.
    assert [(r.run_id, r.status, r.generation) for r in batched.runs()] == [(run.run_id, "succeeded", run.generation)]
    assert_consistent(batched)
    # An update in batches: replaced documents leave in the commit that brings their new version.
    (docs / "doc03.md").write_text("# Doc 3\n\n" + paragraphs("changed", 3), encoding="utf-8")
    (docs / "doc07.md").unlink()
    (docs / "new.md").write_text("# New\n\n" + paragraphs("ferry", 4), encoding="utf-8")
    for index in (whole, batched):
        again = index.ingest([docs], commit_every=1)
        assert (again.added, again.updated, again.removed, again.unchanged) == (1, 1, 1, 16)
    assert chunk_rows(batched) == chunk_rows(whole)
    assert_consistent(batched)


class CrashAfter(Exception):
    """Stands for a crash of the writer after some commits of a run."""


def crash_after_commits(monkeypatch, commits: int, *, killed: bool) -> None:
    """Make the pipeline's commits fail after ``commits`` of them; ``killed``: the writer dies without recording
    the failure (as with SIGKILL), so the run's row stays ``running``."""
    from citeline.ingest import pipeline

    done = {"commits": 0}
    real = pipeline.commit_batch

    def commit_batch(*args, **kwargs):
        if done["commits"] == commits:
            raise CrashAfter("writer died")
        done["commits"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "commit_batch", commit_batch)
    if killed:
        monkeypatch.setattr(pipeline, "record_failure", lambda *args: None)


def test_a_run_that_dies_between_commits_is_finished_by_the_next_without_re_embedding(
    tmp_path, fake_embedder, monkeypatch
) -> None:
    docs = many_docs(tmp_path / "docs")
    reference = new_index(tmp_path, fake_embedder, "reference")
    reference.ingest([docs])
    index = new_index(tmp_path, fake_embedder, "ix")
    with monkeypatch.context() as patch:
        crash_after_commits(patch, 3, killed=True)
        with pytest.raises(CrashAfter):
            index.ingest([docs], commit_every=2)
    # The index is at the run's third commit: consistent, searchable, its row "running" at that generation.
    assert_consistent(index)
    (row,) = index.runs()
    assert (row.status, row.generation) == ("running", 3) and index.status().generation == 3
    committed = index.status().documents
    assert 0 < committed < 18 and index.search("paragraph", k=3)
    encoded = fake_embedder.texts_encoded
    rest = index.ingest([docs], commit_every=2)
    # The next run embeds only what was not committed, and marks the dead run interrupted.
    assert (rest.added, rest.unchanged) == (18 - committed, committed)
    assert fake_embedder.texts_encoded - encoded == rest.chunks_embedded + rest.generation - 3  # (+ warm-ups)
    assert [r.status for r in index.runs()] == ["succeeded", "interrupted"]
    assert chunk_rows(index) == chunk_rows(reference)
    assert_consistent(index)


def test_a_run_that_fails_between_commits_is_recorded_failed_at_its_last_commit(
    tmp_path, fake_embedder, monkeypatch
) -> None:
    docs = many_docs(tmp_path / "docs")
    index = new_index(tmp_path, fake_embedder)
    with monkeypatch.context() as patch:
        crash_after_commits(patch, 2, killed=False)
        with pytest.raises(CrashAfter):
            index.ingest([docs], commit_every=2)
    (row,) = index.runs()
    assert (row.status, row.generation) == ("failed", 2) and "writer died" in row.errors[0]["reason"]
    assert row.added == index.status().documents > 0  # the counts of what its commits wrote
    assert_consistent(index)


def test_removals_are_judged_over_the_whole_run_before_any_commit(tmp_path, fake_embedder) -> None:
    docs = many_docs(tmp_path / "docs")
    index = new_index(tmp_path, fake_embedder)
    index.ingest([docs])
    before = chunk_rows(index)
    for number in range(10):  # 10 of 18 documents vanish (over the 0.5 threshold) while new ones arrive
        (docs / f"doc{number:02d}.md").unlink()
    many_docs(tmp_path / "more", 8)
    for path in (tmp_path / "more").glob("*.md"):
        path.rename(docs / f"new-{path.name}")
    with pytest.raises(RemovalRefusedError, match="nothing was changed"):  # not even the additions
        index.ingest([docs], commit_every=1)
    assert chunk_rows(index) == before and index.status().generation == 1
    assert index.runs()[0].status == "refused"
    dry = index.ingest([docs], commit_every=1, dry_run=True)
    assert (dry.status, dry.added, dry.removed, dry.generation) == ("dry-run", 8, 10, 1)
    run = index.ingest([docs], commit_every=1, allow_removals=True)
    assert (run.added, run.removed, run.status) == (8, 10, "succeeded")
    assert_consistent(index)


def test_a_file_that_changes_before_it_is_parsed_again_is_reported(tmp_path, fake_embedder) -> None:
    from citeline.ingest import pipeline

    docs = many_docs(tmp_path / "docs")
    records = docs / "records.jsonl"

    class EditingSteps(pipeline.Steps):
        def chunk_embed(self, index, work, max_file_bytes):
            if any(source.path == str(records) for item in work for source in item.files):
                lines = records.read_text(encoding="utf-8").splitlines(keepends=True)
                records.write_text("".join(lines[:2]), encoding="utf-8")  # 4 planned records are gone
            return super().chunk_embed(index, work, max_file_bytes)

    index = new_index(tmp_path, fake_embedder)
    run = pipeline.run(index, [docs], pipeline.Options(commit_every=1), EditingSteps())
    # Its records are read again part by part (planning.work_batches): each part reports the records it missed.
    assert run.status == "partial" and run.added == 14
    assert all(error["path"].endswith("records.jsonl") for error in run.errors)
    assert sum(int(error["reason"].split()[0]) for error in run.errors) == 4
    assert all("documents planned from it were gone" in error["reason"] for error in run.errors)
    assert index.status().documents == 14
    assert_consistent(index)
    again = index.ingest([docs])
    assert (again.added, again.removed, again.unchanged) == (0, 0, 14)


def test_progress_moves_forward_through_the_commits(tmp_path, fake_embedder) -> None:
    from citeline.ingest.progress import Reporter

    fractions: list[float] = []

    class Recording(Reporter):
        def on_stage(self, name, total):
            fractions.append(self.fraction())

        def on_advance(self, count):
            fractions.append(self.fraction())

    docs = many_docs(tmp_path / "docs")
    index = new_index(tmp_path, fake_embedder)
    from citeline.ingest import pipeline

    pipeline.run(index, [docs], pipeline.Options(commit_every=2, reporter=Recording(), prepare_queries=False))
    assert len(fractions) > 20 and fractions == sorted(fractions) and fractions[-1] <= 1.0


def test_the_cli_and_the_flow_default_to_the_pipelines_commit_every() -> None:
    import click

    from citeline.cli.common import ingest_options
    from citeline.ingest import pipeline

    command = ingest_options(click.command()(lambda **options: None))
    defaults = {param.name: param.default for param in command.params}
    assert defaults["commit_every"] == pipeline.COMMIT_EVERY
    assert pipeline.Options().commit_every == pipeline.COMMIT_EVERY
