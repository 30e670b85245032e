"""Records and files on real data: a removed record comes back with the next ingest, a bad record fails alone, a
file rewritten while it is read is never stored as a mix, and links not followed are skips (issue 40)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from _common import examples, no_library_warnings
from click.testing import CliRunner
from conftest import HashEmbedder
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from citeline import Index
from citeline.cli.main import cli
from citeline.errors import QueryError
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


def test_a_removed_record_comes_back_in_a_sharded_index(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    rows = [{"_id": f"r{n}", "text": f"Record {n} of the harbour ledger, cargo {n * 7}."} for n in range(12)]
    _old(docs / "ledger.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    _old(docs / "note.md", "# Note\n\nThe river bridge held through the flood.\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), shards=3)
    index.ingest([docs])
    assert index.ingest([docs]).unchanged == 13
    doc_ids = [d.doc_id for d in index.documents() if d.source_id in ("ledger.jsonl#r5", "note.md")]
    with pytest.raises(QueryError, match=r"nothing removed: .* matches --doc nosuchid"):
        index.remove(doc_ids=[*doc_ids, "nosuchid"])  # all or nothing, over every shard
    assert index.remove(doc_ids=doc_ids, dry_run=True).removed == 2 and len(index.documents()) == 13
    removal = index.remove(doc_ids=doc_ids)
    assert removal.removed == 2 and len(index.documents()) == 11
    assert index.runs(1)[0].roots == [f"remove doc {doc_id}" for doc_id in doc_ids]
    assert index.verify().ok  # every shard at the generation the manifest recorded
    dry = index.ingest([docs], dry_run=True)
    assert (dry.added, dry.unchanged, dry.removed) == (2, 11, 0)
    run = index.ingest([docs])
    assert (run.added, run.unchanged, run.removed, run.chunks_embedded) == (2, 11, 0, 2)
    assert len(index.documents()) == 13 and index.ingest([docs]).unchanged == 13


# ---------------------------------------------------------------- a bad record fails alone


def _jsonl_lines(count: int) -> list[bytes]:
    return [
        json.dumps({"_id": f"d{n}", "text": f"Entry {n}: the caravan reached well {n}."}).encode() + b"\n"
        for n in range(count)
    ]


@pytest.mark.parametrize("hold_chars", [None, 200])  # texts held, or streamed past a few records (keys only)
def test_a_jsonl_line_of_invalid_utf8_fails_alone(tmp_path: Path, hold_chars: int | None) -> None:
    docs = tmp_path / "docs"
    lines = _jsonl_lines(40)
    lines[17] = lines[17].replace(b"caravan", b"car\xffvan")
    lines[30] = b"\xc3\x28 not even json\n"
    path = _old(docs / "caravans.jsonl", b"".join(lines))
    source = pipeline.SourceFile(str(docs), str(path), "caravans.jsonl")
    batch = pipeline.parse_files([source], hold_chars=hold_chars)
    ids = sorted(d.record_id for d in batch.documents) if hold_chars is None else []
    assert batch.document_count == 38 and (
        hold_chars is not None or ids == sorted(f"d{n}" for n in range(40) if n not in (17, 30))
    )
    offset = sum(len(line) for line in lines[:17]) + lines[17].index(b"\xff")
    assert [e.reason for e in batch.errors] == [
        f"line 18: not valid UTF-8 at byte {offset} (re-save the file as UTF-8)",
        f"line 31: not valid UTF-8 at byte {sum(len(line) for line in lines[:30])} (re-save the file as UTF-8)",
    ]
    assert batch.incomplete == [(str(docs), "caravans.jsonl")]  # a line whose id is unknown removes nothing


def test_an_ingest_keeps_the_records_around_a_bad_line(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    lines = _jsonl_lines(10)
    path = _old(docs / "caravans.jsonl", b"".join(lines))
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    assert index.ingest([docs]).added == 10
    lines[4] = lines[4].replace(b"caravan", b"car\xffvan")  # the stored version of d4 is kept
    lines[9] = json.dumps({"_id": "d9", "text": "Entry 9: the caravan turned back."}).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    run = index.ingest([docs], commit_every=1)  # the file streamed, and re-read in parts
    assert (run.status, run.updated, run.unchanged, run.removed, run.failed) == ("partial", 1, 8, 0, 1)
    assert run.errors[0]["reason"].startswith("line 5: not valid UTF-8 at byte ")
    assert len(index.documents()) == 10 and index.verify().ok


def test_a_csv_cell_over_the_csv_modules_limit_is_indexed_and_the_rows_after_it_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citeline.sources.formats import delimited

    docs = tmp_path / "docs"
    big = "word " * 40_000  # 200,000 characters: past Python csv's default field limit of 131,072
    rows = [f'r{n},"Row {n}: the tithe barn of parish {n}."' for n in range(6)]
    rows[2] = f'r2,"Row 2: {big}"'
    rows[4] = 'r4,"Row 4: a quoted cell\nover two lines ' + "x" * 150_000 + '"'
    _old(docs / "parishes.csv", "id,text\n" + "\n".join(rows) + "\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    run = index.ingest([docs])
    assert (run.added, run.failed) == (6, 0), run.errors
    assert {d.source_id for d in index.documents()} == {f"parishes.csv#r{n}" for n in range(6)}

    # A row past citeline's own limit fails alone; the rows after it (and its stored version) stay.
    monkeypatch.setattr(delimited, "MAX_ROW_CHARS", 180_000)
    _old(docs / "parishes.csv", "id,text\n" + "\n".join([*rows, 'r6,"Row 6: the last barn."']) + "\n")
    run = index.ingest([docs])
    assert (run.added, run.updated, run.unchanged, run.removed, run.failed) == (1, 0, 5, 0, 1)
    assert run.errors[0]["reason"] == (
        "line 4: row holds more than 180,000 characters, the limit for one record; the row is skipped"
    )
    assert len(index.documents()) == 7 and index.verify().ok


# ---------------------------------------------------------------- a file rewritten while it is read


def _rewriting_reader(monkeypatch: pytest.MonkeyPatch, path: Path, versions: list[bytes]) -> list[int]:
    """Make the read step of a whole file rewrite ``path`` in place halfway through, with each of ``versions`` in
    turn (a writer racing the reader), so what was read is half one version and half the next. Returns the
    list of reads made."""
    from citeline.sources import parsers

    reads: list[int] = []

    def read_all(handle):  # type: ignore[no-untyped-def]
        reads.append(1)
        first = handle.read(os.fstat(handle.fileno()).st_size // 2)
        if versions:
            with open(path, "r+b") as writer:  # in place: the reader's open file sees the new bytes
                writer.write(versions.pop(0))
                writer.truncate()
        return first + handle.read()

    monkeypatch.setattr(parsers, "_read_all", read_all)
    return reads


def test_a_file_rewritten_while_it_is_read_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    old = "# Old\n\n" + "The old harbour wall stood. " * 40 + "\n"
    new = "# New\n\n" + "A new stone quay was built in its place by the guild. " * 40 + "\n"
    path = _old(docs / "harbour.md", old)
    reads = _rewriting_reader(monkeypatch, path, [new.encode()])
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    run = index.ingest([docs])
    assert (run.added, run.failed) == (1, 0) and len(reads) == 2
    (document,) = index.documents()
    assert index.document(document.doc_id).text == new  # the second read's version whole, not half of each
    assert index.verify().ok


def test_a_file_that_keeps_changing_fails_alone_and_nothing_of_it_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    path = _old(docs / "harbour.md", "# Harbour\n\n" + "The harbour wall stood. " * 40)
    _old(docs / "other.md", "# Other\n\nThe mill stood by the river.\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    assert index.ingest([docs]).added == 2
    versions = [f"# Harbour {n}\n\n".encode() + b"A quay of version %d. " % n * (30 + 9 * n) for n in range(5)]
    reads = _rewriting_reader(monkeypatch, path, versions)
    os.utime(path)  # touched: read again
    run = index.ingest([docs])
    assert len(reads) == 3 and run.status == "partial" and run.failed == 1
    assert run.errors == [
        {
            "path": str(path),
            "reason": "changed while it was read (3 times); nothing of it is stored this run, the next run reads it "
            "again",
        }
    ]
    texts = {d.source_id: index.document(d.doc_id).text for d in index.documents()}
    assert texts["harbour.md"].startswith("# Harbour\n\nThe harbour wall stood.")  # the stored version, kept
    assert index.verify().ok


@pytest.mark.parametrize("hold_chars", [None, 100])
def test_a_record_file_rewritten_while_it_streams_is_never_stored_as_a_mix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hold_chars: int | None
) -> None:
    from citeline.sources import registry

    docs = tmp_path / "docs"
    version = [b"".join(_jsonl_lines(30)), b"".join(line.replace(b"caravan", b"convoy") for line in _jsonl_lines(30))]
    path = _old(docs / "caravans.jsonl", version[0])
    real = registry.RECORD_PARSERS[".jsonl"]
    rewrites = [version[1]]

    def rewriting(source, stream, parsed):  # type: ignore[no-untyped-def]
        for number, document in enumerate(real(source, stream, parsed)):
            if number == 10 and rewrites:  # a third of the way: a writer rewrites the file in place
                with open(path, "r+b") as writer:  # a new size: the time may not move within one clock tick
                    writer.write(rewrites.pop(0))
                    writer.truncate()
            yield document

    monkeypatch.setitem(registry.RECORD_PARSERS, ".jsonl", rewriting)
    source = pipeline.SourceFile(str(docs), str(path), "caravans.jsonl")
    batch = pipeline.parse_files([source], hold_chars=hold_chars)  # read again after the change: one version
    assert batch.document_count == 30 and not batch.errors
    if hold_chars is None:
        assert all("convoy" in d.text for d in batch.documents)
    assert [(stat.source_file, stat.size) for stat in batch.read_files] == [("caravans.jsonl", path.stat().st_size)]

    # A file rewritten on every read fails alone, what it streamed dropped.
    rewrites.extend([version[0], version[1] + b" ", version[0] + b"  "])
    batch = pipeline.parse_files([source], hold_chars=hold_chars)
    assert batch.document_count == 0 and not batch.read_files and batch.incomplete == [(str(docs), "caravans.jsonl")]
    assert [e.reason.split(" (")[0] for e in batch.errors] == ["changed while it was read"]


# ---------------------------------------------------------------- links not followed are skips


def test_links_not_followed_are_skips_and_the_run_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *a, **k: HashEmbedder())
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    _old(docs / "note.md", "# Note\n\nThe river bridge held.\n")
    _old(outside / "secret.txt", "must not be indexed")
    (docs / "loop").symlink_to(docs / "loop")
    (docs / "leak.txt").symlink_to(outside / "secret.txt")
    (docs / "dangling.txt").symlink_to(docs / "gone.txt")
    ix = str(tmp_path / "ix")
    result = CliRunner().invoke(cli, ["ingest", str(docs), "--index", ix, "--strict", "-v"])
    assert result.exit_code == 0, result.output
    assert " succeeded: 1 added," in result.output and ", 0 failed;" in result.output
    assert "0 files skipped as unsupported, 0 excluded, 3 symbolic links not followed" in result.output
    logged = [record.getMessage() for record in caplog.records]  # -v: one line a link, with why
    for name in ("loop", "leak.txt", "dangling.txt"):
        assert any(line.startswith(f"skipped {docs / name}: ") and "not followed" in line for line in logged)
    index = Index.open(ix, embedder=HashEmbedder())
    run = index.ingest([docs], strict=True)  # --strict: no PartialRunError
    assert (run.status, run.failed, run.links_skipped, run.errors) == ("succeeded", 0, 3, [])
    # The ledger says what the summary said, every field (links_skipped read back as 0 before issue 50).
    assert [row.to_dict() for row in index.runs(2)] == [run.to_dict(), index.runs(2)[1].to_dict()]
    assert index.runs(2)[1].links_skipped == 3
    listed = CliRunner().invoke(cli, ["runs", "--index", ix, "--format", "json"])
    assert [row["links_skipped"] for row in json.loads(listed.output)] == [3, 3]


# ---------------------------------------------------------------- patterns that cannot be compiled

FUZZ = settings(
    max_examples=int(os.environ.get("CITELINE_FUZZ_EXAMPLES", examples(40))),
    deadline=None,
    derandomize=not os.environ.get("CITELINE_FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
#: Glob pieces that have broken pattern compilers: ranges backwards or unclosed, escapes at the end, negations.
GLOB_PIECES = ["[z-a]", "[", "]", "[!", "[^a]", "\\", "\\[", "**", "*", "?", "!", "/", "#", "a", "[a-", "{a,b}", " "]


@st.composite
def patterns(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.one_of(st.sampled_from(GLOB_PIECES), st.text(max_size=4)), min_size=1, max_size=5))
    return "".join(pieces).replace("\n", "").replace("\r", "").replace("\0", "")


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("patterns")
    _old(root / "docs" / "a.md", "# A\n\nThe river bridge.\n")
    _old(root / "docs" / "sub" / "b.txt", "Letters about wages.\n")
    Index.create(root / "index", embedder=HashEmbedder()).ingest([root / "docs"])
    return root


@pytest.mark.parametrize("where", [".citelineignore", "--include", "--exclude"])
def test_a_bad_pattern_is_one_line_naming_where_it_came_from(small_index: Path, where: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *a, **k: HashEmbedder())
    docs = small_index / "docs"
    ignore = docs / ".citelineignore"
    args = ["ingest", str(docs), "--index", str(small_index / "index")]
    if where == ".citelineignore":
        ignore.write_text("# notes\n*.log\n[z-a]\n", encoding="utf-8")
    else:
        args += [where, "*.md", where, "[z-a]"]
    try:
        result = CliRunner().invoke(cli, args)
    finally:
        ignore.unlink(missing_ok=True)
    expected = (
        f"Error: {ignore}: line 3: bad pattern '[z-a]' (bad character range z-a); nothing was indexed\n"
        if where == ".citelineignore"
        else f"Error: {where} ({where[2:]}): bad pattern '[z-a]' (bad character range z-a) (see `cli ingest --help`)\n"
    )
    assert (result.exit_code, result.output) == (1 if where == ".citelineignore" else 2, expected)
    assert len(Index.open(small_index / "index", embedder=HashEmbedder()).documents()) == 2


@FUZZ
@given(pattern=patterns(), where=st.sampled_from([".citelineignore", "--include", "--exclude"]))
@example(pattern="[[a]", where="--exclude")  # re's FutureWarning "Possible nested set" reached the user's terminal
@example(pattern="[[a]", where=".citelineignore")
def test_random_patterns_give_a_run_or_one_line(small_index: Path, pattern: str, where: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *a, **k: HashEmbedder())
    docs, index = small_index / "docs", small_index / "index"
    ignore = docs / ".citelineignore"
    args = ["ingest", str(docs), "--index", str(index), "--dry-run"]  # a dry run: the index stays as built
    if where == ".citelineignore":
        ignore.write_text(f"{pattern}\n", encoding="utf-8", errors="surrogateescape")
    else:
        args += [where, pattern]
    try:
        with no_library_warnings(where, pattern):
            result = CliRunner().invoke(cli, args, catch_exceptions=True)
    finally:
        ignore.unlink(missing_ok=True)
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, f"{where} {pattern!r}: {result.exc_info[0].__name__ if result.exc_info else ''}"
    assert "Traceback" not in result.output and result.exit_code in (0, 1, 2), (where, pattern, result.output)
    if result.exit_code:
        assert result.output.count("Error:") == 1 and "bad pattern" in result.output, (where, pattern, result.output)
        assert (str(ignore) if where == ".citelineignore" else where) in result.output


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_row_past_the_limit_is_skipped_whole_wherever_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, newline: str
) -> None:
    """A row too large is skipped before the csv module buffers it: its end is found as the csv module would find
    it (a quoted cell over several lines, quotes doubled inside it, a quote inside an unquoted cell), and every row
    after it is read with its own line number."""
    from citeline.sources.formats import delimited
    from citeline.sources.parsers import SourceFile, parse_source

    monkeypatch.setattr(delimited, "MAX_ROW_CHARS", 200)
    big = '"a cell ""quoted"" inside,' + newline + ("over lines, " * 30 + newline) * 3 + 'done"'
    lines = ["id,text", 'a,the "first" row', f"b,{big}", "c,after the big one", f"d,{'x' * 300}", "e,the last row"]
    path = tmp_path / "rows.csv"
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    parsed = parse_source(SourceFile(str(tmp_path), str(path), path.name))
    assert [(d.record_id, d.text) for d in parsed.documents] == [
        ("a", 'the "first" row'),
        ("c", "after the big one"),
        ("e", "the last row"),
    ]
    skipped = "row holds more than 200 characters, the limit for one record; the row is skipped"
    assert [error.reason for error in parsed.errors] == [f"line 3: {skipped}", f"line 9: {skipped}"]
