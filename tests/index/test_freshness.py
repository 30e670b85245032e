"""Files whose size and modification time are what was indexed are not read again (citeline.ingest.freshness)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.ingest import pipeline
from citeline.sources.parsers import supported_suffixes


def _write(folder: Path, name: str, text: str, age: float = 3600.0) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def _indexed_notes(tmp_path: Path, count: int, shards: int | None = None, suffix: str = ".md") -> tuple[Path, Index]:
    """An index of ``count`` old notes in ``tmp_path/docs`` (old enough to count as settled)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for number in range(count):
        _write(docs, f"note{number}{suffix}", f"# Note {number}\n\nThe garrison at river crossing {number} held.\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), shards=shards)
    index.ingest([docs])
    return docs, index


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = pipeline.parse_source

    def counting(source, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(Path(source.path).name)
        return real(source, **kwargs)

    monkeypatch.setattr(pipeline, "parse_source", counting)
    return seen


def test_unchanged_files_are_not_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, index = _indexed_notes(tmp_path, 4)
    parsed = _count_parses(monkeypatch)
    run = index.ingest([docs])
    assert parsed == [] and run.unchanged == 4 and run.removed == 0

    _write(docs, "note1.md", "# Note 1\n\nThe garrison at river crossing 1 fell.\n")  # same size, new content
    os.utime(docs / "note2.md")  # touched: read again, found unchanged
    run = index.ingest([docs])
    assert sorted(parsed) == ["note1.md", "note2.md"]
    assert (run.updated, run.unchanged, run.removed) == (1, 3, 0)
    assert index.verify().ok


def test_a_file_indexed_as_soon_as_written_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its time may not move if it changes again within the filesystem's timestamp resolution (git's racy case).
    docs = tmp_path / "docs"
    docs.mkdir()
    _write(docs, "fresh.md", "# Fresh\n\nWritten a moment ago.\n", age=0.0)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    parsed = _count_parses(monkeypatch)
    assert index.ingest([docs]).unchanged == 1
    assert parsed == ["fresh.md"]


def test_the_plan_loads_only_the_documents_of_files_read_again_or_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # File-level planning: fresh files' documents are counted in SQL and never come to Python.
    from citeline.ingest import freshness

    docs, index = _indexed_notes(tmp_path, 6)
    loaded: list[set[str]] = []
    real = freshness.documents_to_plan

    def spying(connection, roots, fresh):  # type: ignore[no-untyped-def]
        stored, counts = real(connection, roots, fresh)
        loaded.append({source_file for _, source_file, _ in stored.values()})
        return stored, counts

    monkeypatch.setattr(freshness, "documents_to_plan", spying)  # where the planner looks it up
    _write(docs, "note1.md", "# Note 1\n\nThe garrison at river crossing 1 fell at dawn.\n")
    (docs / "note4.md").unlink()
    (docs / "note5.md").unlink()
    # 2 of 6 documents vanish: a third, under the removal threshold, only if the guard counts the root's stored
    # documents in SQL (the loaded ones alone, 3, would make it 2 of 3 and refuse the run)
    run = index.ingest([docs])
    assert loaded == [{"note1.md", "note4.md", "note5.md"}]
    assert (run.added, run.updated, run.unchanged, run.removed) == (0, 1, 3, 2)
    assert index.verify().ok


def test_a_root_emptied_of_its_fresh_files_is_still_refused(tmp_path: Path) -> None:
    from citeline.errors import RemovalRefusedError

    docs, index = _indexed_notes(tmp_path, 4)
    for number in range(3):
        (docs / f"note{number}.md").unlink()
    with pytest.raises(RemovalRefusedError):
        index.ingest([docs])
    assert index.status().documents == 4


class _FailsOn(HashEmbedder):
    """Fails the batch holding ``word`` (once): a run interrupted in the middle of a file's records."""

    def __init__(self, word: str) -> None:
        super().__init__()
        self.word, self.failed = word, False

    def encode(self, texts, *, batch_size: int | None = 64):  # type: ignore[no-untyped-def]
        if not self.failed and any(self.word in text for text in texts):
            self.failed = True
            raise RuntimeError("interrupted")
        return super().encode(texts, batch_size=batch_size)


def test_a_run_interrupted_inside_a_file_indexes_the_rest_of_it_next_time(tmp_path: Path) -> None:
    # A JSONL file's records are committed in parts (planning.work_batches); the file's stat is recorded only by
    # the run's last commit, so after a crash it is read again and only the records not committed are embedded.
    docs = tmp_path / "docs"
    docs.mkdir()
    filler = "the garrison held the ford until the relief column came over the hills. " * 10  # ~700 characters
    lines = [
        f'{{"id": "r{n}", "text": "Record {n} {"zulu" if n == 15 else "alpha"} says {filler}"}}' for n in range(30)
    ]
    _write(docs, "a.jsonl", "\n".join(lines) + "\n")
    _write(docs, "b.jsonl", '{"id": "b0", "text": "The other file."}\n')
    embedder = _FailsOn("zulu")
    index = Index.create(tmp_path / "ix", embedder=embedder)
    with pytest.raises(RuntimeError, match="interrupted"):
        index.ingest([docs], commit_every=2)
    stored = {d.source_id for d in index.documents()}
    assert 0 < sum(source_id.startswith("a.jsonl") for source_id in stored) < 30  # a.jsonl committed in part
    assert "a.jsonl#r15" not in stored
    run = index.ingest([docs], commit_every=2)
    assert run.added == 31 - len(stored) and len(index.documents()) == 31
    assert run.chunks_embedded == 31 - len(stored)  # one chunk a record: only what was not committed
    assert index.verify().ok


def _file_rows(index: Index) -> dict[str, tuple[int, float]]:
    import contextlib

    from citeline.store import catalog, file_stats

    with contextlib.closing(catalog.connect(index.path, read_only=True)) as connection:
        if not file_stats.exists(connection):
            return {}
        rows = connection.execute(f"SELECT source_file, size, mtime FROM {file_stats.TABLE}").fetchall()
    return {source_file: (size, mtime) for source_file, size, mtime in rows}


def test_a_file_edited_in_part_is_not_read_again_once_indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The flaw the files table fixes: a run rewrites only the changed records' documents, so the file's other
    # documents kept the older stat and the file was read again on every later run (24.6 CPU-s for an unchanged
    # re-run at 1M chunks after a 1 % update, instead of 0.9).
    docs = tmp_path / "docs"
    docs.mkdir()
    records = [f'{{"id": "r{n}", "text": "Record {n}: the ferry ran at dawn."}}' for n in range(3)]
    _write(docs, "log.jsonl", "\n".join(records) + "\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    records[1] = '{"id": "r1", "text": "Record 1: the ferry stopped for the winter."}'
    _write(docs, "log.jsonl", "\n".join(records) + "\n", age=600.0)
    parsed = _count_parses(monkeypatch)
    run = index.ingest([docs])
    assert parsed == ["log.jsonl"] and (run.updated, run.unchanged) == (1, 2)
    run = index.ingest([docs])
    assert parsed == ["log.jsonl"] and (run.updated, run.unchanged) == (0, 3)  # not read the second time
    assert index.verify().ok


def test_a_touched_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs, index = _indexed_notes(tmp_path, 3)
    then = time.time() - 60
    os.utime(docs / "note0.md", (then, then))  # a new time, the same content
    parsed = _count_parses(monkeypatch)
    assert index.ingest([docs]).unchanged == 3
    assert index.ingest([docs]).unchanged == 3
    assert parsed == ["note0.md"]
    assert _file_rows(index)["note0.md"][1] == pytest.approx(then)


def test_a_file_that_failed_in_part_is_read_until_it_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    _write(docs, "log.jsonl", '{"id": "r0", "text": "The ferry ran."}\n{"id": "r1", "text": 5}\n')
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    assert index.ingest([docs]).failed == 1
    parsed = _count_parses(monkeypatch)
    assert index.ingest([docs]).failed == 1  # its error is reported again, not hidden by a skipped file
    assert parsed == ["log.jsonl"] and "log.jsonl" not in _file_rows(index)


def test_the_rows_of_removed_files_go_with_their_documents(tmp_path: Path) -> None:
    docs, index = _indexed_notes(tmp_path, 4)
    assert sorted(_file_rows(index)) == [f"note{n}.md" for n in range(4)]
    (docs / "note3.md").unlink()
    index.ingest([docs])
    assert sorted(_file_rows(index)) == [f"note{n}.md" for n in range(3)]


def test_an_index_written_before_the_files_table_gets_it_filled_from_its_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib

    from citeline.store import catalog, file_stats

    # Text notes: a format still at reader 1, which an index from before the table read with too.
    docs, index = _indexed_notes(tmp_path, 4, suffix=".txt")
    with contextlib.closing(catalog.connect(index.path, read_only=False)) as connection:
        connection.execute(f"DROP TABLE {file_stats.TABLE}")
    parsed = _count_parses(monkeypatch)
    assert index.ingest([docs]).unchanged == 4 and parsed == []  # the documents' own stat answers meanwhile
    _write(docs, "note1.txt", "# Note 1\n\nThe garrison at river crossing 1 fell at dawn.\n")
    index.ingest([docs])  # the first commit creates the table, filled from the documents' stat
    assert sorted(_file_rows(index)) == [f"note{n}.txt" for n in range(4)]
    assert index.ingest([docs]).unchanged == 4
    assert parsed == ["note1.txt"]


@pytest.mark.parametrize("shards", [None, 3])
def test_an_upgraded_reader_reads_the_files_of_its_format_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: int | None
) -> None:
    """An index built by a release that read ``.csv`` with ``,`` only (reader 1) stored a semicolon table as one
    column. After the upgrade (reader 2, the delimiter detected), the next run reads the unchanged table again and
    stores its rows' cells as they are; the Markdown files beside it, whose reader did not change, stay unread."""
    from citeline.sources import registry
    from citeline.sources.formats import delimited

    with monkeypatch.context() as old_release:
        old_release.setitem(registry.READER_VERSIONS, ".csv", 1)
        old_release.setattr(delimited, "delimiter_of", lambda text, kind: "\t" if kind == "tsv" else ",")
        docs, index = _indexed_notes(tmp_path, 2, shards)
        _write(docs, "prices.csv", "id;name;city;price\n1;lamp;Tartu;12\n2;chair;Riga;40\n")
        index.ingest([docs])
        # one column named "id;name;city;price", no id column found: the rows are named by their lines
        assert index.document("prices.csv#2").metadata == {"id;name;city;price": "1;lamp;Tartu;12"}
        assert index.ingest([docs]).unchanged == 4  # the old release: nothing is read again, ever
    parsed = _count_parses(monkeypatch)
    run = index.ingest([docs])
    assert parsed == ["prices.csv"] and (run.added, run.updated, run.removed) == (1, 1, 1), run
    assert index.document("prices.csv#1").metadata == {"name": "lamp", "city": "Tartu", "price": 12}
    assert index.search("lamp", 5, filters={"meta": {"city": "Tartu"}}, min_score=0)[0].source_id == "prices.csv#1"
    assert index.ingest([docs]).unchanged == 4 and parsed == ["prices.csv"]  # read once, then fresh again
    assert index.verify().ok


def test_an_index_written_before_reader_versions_reads_as_version_1(tmp_path: Path) -> None:
    """A ``files`` table without the ``reader`` column (written before versions) gets it on the next commit, its
    rows NULL: read as version 1, so formats still at 1 are not read again by an upgrade."""
    import contextlib

    from citeline.store import catalog, file_stats

    docs, index = _indexed_notes(tmp_path, 3, suffix=".txt")  # .txt: still at reader 1
    with contextlib.closing(catalog.connect(index.path, read_only=False)) as connection:
        connection.execute(f"ALTER TABLE {file_stats.TABLE} DROP COLUMN reader")
    assert index.ingest([docs]).unchanged == 3  # read-only planning: the missing column reads as 1
    _write(docs, "note9.txt", "# Note 9\n\nA new note about the ford.\n")
    assert index.ingest([docs]).added == 1  # the commit adds the column
    with contextlib.closing(catalog.connect(index.path, read_only=True)) as connection:
        readers = dict(connection.execute(f"SELECT source_file, reader FROM {file_stats.TABLE}").fetchall())
    assert readers == {"note0.txt": None, "note1.txt": None, "note2.txt": None, "note9.txt": 1}
    assert index.ingest([docs]).unchanged == 4


@pytest.mark.parametrize("suffix", supported_suffixes())
def test_a_new_reader_version_of_any_format_reads_its_files_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """Every registered format: when its reader version rises, the next run reads its files again, once, and
    nothing else; a file whose text comes out the same stays unchanged (not embedded again)."""
    from _common import sample

    from citeline.sources import registry

    docs, index = _indexed_notes(tmp_path, 2)
    path = docs / f"sample{suffix}"
    path.write_bytes(sample(suffix))
    then = time.time() - 3600
    os.utime(path, (then, then))
    first = index.ingest([docs])
    assert first.added >= 1 and not first.errors, first
    parsed = _count_parses(monkeypatch)
    assert not index.ingest([docs]).updated and parsed == []
    monkeypatch.setitem(registry.READER_VERSIONS, suffix, registry.READER_VERSIONS[suffix] + 1)
    run = index.ingest([docs])
    of_format = sorted(p.name for p in docs.iterdir() if p.suffix == suffix)  # the notes too, for .md
    assert sorted(parsed) == of_format and (run.added, run.updated, run.removed) == (0, 0, 0), run
    assert run.chunks_embedded == 0
    index.ingest([docs])
    assert sorted(parsed) == of_format  # recorded with the new version: fresh again
