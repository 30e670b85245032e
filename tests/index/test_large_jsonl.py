"""Large record files (issue 30, part 5): a JSONL file of any size is streamed line by line, embedded and committed
in parts, resumed after a crash or Ctrl-C at its last commit, and a one-record change re-embeds that record alone.
The 500 MB figures are bench/scale.py large-jsonl's (docs/scale.md#large-jsonl-files)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import HashEmbedder

from citeline import Index
from citeline.ingest import pipeline
from citeline.sources.parsers import SourceFile, parse_source

RECORDS = 600
#: Chunks a commit: with ~600-character records (one chunk each, sized as 1,000 characters) a group of about 60
#: records, so the file is committed in about 10 parts.
COMMIT_EVERY = 60


def _record(number: int, word: str = "alpha") -> str:
    text = f"Record {number} about {word} and topic {number % 13}: " + "the ford was held until dawn. " * 18
    return json.dumps({"_id": f"d{number}", "title": f"Title {number}", "text": text})


def _corpus(folder: Path, records: int = RECORDS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "corpus.jsonl"
    path.write_text("".join(_record(number) + "\n" for number in range(records)), encoding="utf-8")
    then = time.time() - 3600  # settled: freshness trusts the file's stat once indexed
    os.utime(path, (then, then))
    return path


def _spans_read(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int] | None]:
    # The span each parse of a file asked for (None: the whole file).
    spans: list[tuple[int, int] | None] = []
    real = pipeline.parse_source

    def recording(source, **options):  # type: ignore[no-untyped-def]
        spans.append(options.get("span"))
        return real(source, **options)

    monkeypatch.setattr(pipeline, "parse_source", recording)
    return spans


def test_a_jsonl_file_above_max_file_bytes_is_streamed_and_committed_in_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    path = _corpus(docs)
    (docs / "big.txt").write_text("A text file read whole. " * 100, encoding="utf-8")
    real_read_bytes = Path.read_bytes

    def no_whole_read(self: Path) -> bytes:  # a record file is never read whole
        assert self.suffix != ".jsonl", self
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", no_whole_read)
    spans = _spans_read(monkeypatch)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    run = index.ingest([docs], max_file_bytes=1000, commit_every=COMMIT_EVERY)
    assert path.stat().st_size > 100 * 1000
    assert run.added == RECORDS and run.status == "partial"  # big.txt alone fails, with the limit's message
    assert [e["path"] for e in run.errors] == [str(docs / "big.txt")]
    assert "above the 1,000-byte limit (raise max_file_bytes" in run.errors[0]["reason"]
    assert run.generation >= 5  # committed in parts
    reads = [span for span in spans if span is not None]
    assert len(reads) >= 5 and all(first <= last for first, last in reads)
    assert reads == sorted(reads) and reads[-1][1] < path.stat().st_size  # each part reads its own lines again
    found = index.search("Record 417 about alpha", k=3, mode="lexical")
    assert found and found[0].source_id == "corpus.jsonl#d417"
    assert index.verify().ok


def test_parsing_a_record_file_holds_only_the_texts_asked_for(tmp_path: Path) -> None:
    path = _corpus(tmp_path / "docs", records=200)
    source = SourceFile(str(tmp_path / "docs"), str(path), "corpus.jsonl")
    batch = pipeline.parse_files([source], max_file_bytes=10, hold_chars=5000)
    assert batch.held_chars <= 5000 and len(batch.documents) == 5000 // len(batch.documents[0].text)
    assert len(batch.documents) + len(batch.keys) == 200 and not batch.errors
    assert [key.offset for key in batch.keys] == sorted(key.offset for key in batch.keys)
    assert len(batch.read_files) == 1  # the file's stat, recorded by the run's last commit
    # A span reads the records whose lines start in it, and line numbers count from there.
    lines = path.read_bytes().splitlines(keepends=True)
    start = sum(len(line) for line in lines[:50])
    last = start + sum(len(line) for line in lines[50:59])
    parsed = parse_source(source, span=(start, last))
    assert [d.record_id for d in parsed.documents] == [f"d{n}" for n in range(50, 60)]
    assert [d.offset for d in parsed.documents][:2] == [start, start + len(lines[50])]


def test_a_line_that_is_not_utf8_fails_alone_as_the_file_streams(tmp_path: Path) -> None:
    # A byte that is not UTF-8 on line 151 fails that record alone (it used to fail the whole file): the records
    # streamed before and after it are kept, and the file is incomplete (the line's id is unknown: nothing of the
    # file is removed this run).
    path = _corpus(tmp_path / "docs", records=200)
    data = path.read_bytes().splitlines(keepends=True)
    data[150] = data[150].replace(b"dawn", b"d\xffwn", 1)
    path.write_bytes(b"".join(data))
    source = SourceFile(str(tmp_path / "docs"), str(path), "corpus.jsonl")
    batch = pipeline.parse_files([source], hold_chars=5000)
    assert batch.document_count == 199 and batch.incomplete == [(source.root, "corpus.jsonl")]
    offset = sum(len(line) for line in data[:150]) + data[150].index(b"\xff")
    assert [error.reason for error in batch.errors] == [
        f"line 151: not valid UTF-8 at byte {offset} (re-save the file as UTF-8)"
    ]


class _InterruptAfter(HashEmbedder):
    """Embeds ``calls`` encode calls, then raises ``error`` (a crash, or Ctrl-C)."""

    def __init__(self, calls: int, error: BaseException) -> None:
        super().__init__()
        self.limit, self.error, self.armed = calls, error, True

    def encode(self, texts, *, batch_size: int = 64):  # type: ignore[no-untyped-def]
        if self.armed and self.calls >= self.limit:
            raise self.error
        return super().encode(texts, batch_size=batch_size)


@pytest.mark.parametrize("error", [RuntimeError("killed"), KeyboardInterrupt()], ids=["crash", "ctrl-c"])
def test_a_run_stopped_inside_a_large_file_resumes_at_its_last_commit(tmp_path: Path, error: BaseException) -> None:
    docs = tmp_path / "docs"
    _corpus(docs)
    embedder = _InterruptAfter(calls=5, error=error)
    index = Index.create(tmp_path / "ix", embedder=embedder)
    with pytest.raises(type(error)):
        index.ingest([docs], commit_every=COMMIT_EVERY, progress=False)
    committed = len(index.documents())
    assert 0 < committed < RECORDS
    assert index.runs(1)[0].status in {"failed", "interrupted"}
    embedder.armed = False
    run = index.ingest([docs], commit_every=COMMIT_EVERY, progress=False)
    # The file is read and hashed again (its stat was never recorded), and only what was not committed embedded.
    assert run.status == "succeeded" and run.added == RECORDS - committed and run.updated == 0
    assert run.chunks_embedded == RECORDS - committed
    assert len(index.documents()) == RECORDS and index.verify().ok


def test_one_changed_record_of_a_large_file_is_the_only_one_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    path = _corpus(docs)
    embedder = HashEmbedder()
    index = Index.create(tmp_path / "ix", embedder=embedder)
    index.ingest([docs], commit_every=COMMIT_EVERY)
    before = {d.doc_id: d.content_hash for d in index.documents()}
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[321] = _record(321, word="zeta") + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    spans = _spans_read(monkeypatch)
    embedder.texts_encoded = 0
    run = index.ingest([docs], commit_every=COMMIT_EVERY)
    assert (run.added, run.updated, run.removed, run.chunks_embedded) == (0, 1, 0, 1)
    assert embedder.texts_encoded <= 2  # that record's chunk (and the embed step's warm-up text)
    start = sum(len(line.encode()) for line in lines[:321])
    assert spans == [None, (start, start)]  # read whole once (hashed), then that record's line alone
    after = {d.doc_id: d.content_hash for d in index.documents()}
    assert [doc_id for doc_id in after if after[doc_id] != before[doc_id]] == [
        d.doc_id for d in index.documents() if d.source_id == "corpus.jsonl#d321"
    ]
    assert index.search("zeta", k=1, mode="lexical")[0].source_id == "corpus.jsonl#d321"
    assert np.isfinite(index.status().documents)
