"""A run's encodings: a low-confidence guess named in the run's log, ``--encoding`` overriding detection (and
re-reading the unchanged files whose reading it changes), a file not valid in it failing alone, byte-order marks
still winning. Detection's accuracy itself: tests/unit/test_encoding_accuracy.py."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from citeline import Index
from citeline.cli.main import cli
from citeline.errors import SettingsError
from citeline.orchestration.parameters import IngestParameters

#: Czech in Windows-1250 that reads as plausibly in Windows-1252 ("Veèer pùjdeme"): detection's close call.
CZECH = "Večer půjdeme do divadla."


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "czech.txt").write_bytes(CZECH.encode("cp1250"))
    (docs / "plain.txt").write_text("Ferries cross the river at dawn.", encoding="utf-8")
    (docs / "german.txt").write_bytes("Die Straße ist nach dem Regen nass.".encode("cp1252"))
    # Written a minute ago: a file written within freshness.SETTLED_SECONDS of a run is read again by the next one
    # (git's "racy" case), and a re-read without --encoding guesses again; on a loaded machine that made the
    # "later run keeps what it read" check flaky.
    then = time.time() - 60
    for path in docs.iterdir():
        os.utime(path, (then, then))
    return docs


def _texts(index: Index) -> dict[str, tuple[str, str | None]]:
    return {info.source_id: (index.document(info.doc_id).text, info.encoding) for info in index.documents()}


@pytest.mark.parametrize("shards", [None, 2])
def test_a_close_call_is_named_in_the_log_and_encoding_fixes_it(
    tmp_path: Path, fake_embedder, caplog, shards: int | None
) -> None:
    docs = _folder(tmp_path)
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, shards=shards)
    serial = {"parallel": "serial"} if shards else {}
    with caplog.at_level(logging.INFO, logger="citeline.ingest"):
        run = index.ingest([docs], **serial)
    assert run.status == "succeeded" and run.added == 3
    guessed = [r for r in caplog.records if "encoding guessed" in r.getMessage()]
    assert len(guessed) == 1 and guessed[0].levelno == logging.WARNING
    chosen = _texts(index)["czech.txt"][1]
    assert guessed[0].getMessage() == (
        f"{docs / 'czech.txt'}: encoding guessed as {chosen} (low confidence; pass --encoding to set it)"
    )
    # The user re-runs with --encoding: the unchanged files whose reading changes are read again, and updated: in
    # their text, or (the same text) in the encoding they record as read in, which embeds nothing again.
    before = _texts(index)
    run = index.ingest([docs], encoding="cp1250", **serial)
    texts = _texts(index)
    changed = sum(before[name] != texts[name] for name in texts)
    assert (run.added, run.updated, run.unchanged, run.failed) == (0, changed, 3 - changed, 0)
    assert run.chunks_embedded == sum(before[name][0] != texts[name][0] for name in texts)
    assert texts["czech.txt"] == (CZECH, "cp1250")
    assert texts["plain.txt"] == ("Ferries cross the river at dawn.", "utf-8")  # valid UTF-8 still wins
    assert index.search("divadla", k=1, mode="lexical")[0].source_id == "czech.txt"
    # A later run without --encoding keeps what it read: the file is unchanged, not guessed again.
    run = index.ingest([docs], **serial)
    assert (run.updated, run.unchanged) == (0, 3) and _texts(index)["czech.txt"] == (CZECH, "cp1250")


def test_only_files_whose_reading_changes_are_read_again(tmp_path: Path, fake_embedder, caplog) -> None:
    docs = _folder(tmp_path)
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([docs], encoding="cp1250")
    with caplog.at_level(logging.INFO, logger="citeline.ingest"):
        run = index.ingest([docs], encoding="cp1250")  # the same encoding again: nothing to read
    assert run.unchanged == 3 and any("parsed 3 files: 3 documents" in r.getMessage() for r in caplog.records)
    assert _texts(index)["german.txt"] == ("Die Straße ist nach dem Regen nass.", "cp1250")  # ß, ä alike in both
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="citeline.ingest"):
        run = index.ingest([docs], encoding="cp1252")  # czech.txt and german.txt were read as cp1250
    assert (run.updated, run.unchanged) == (2, 1) and _texts(index)["czech.txt"][0] == CZECH.encode("cp1250").decode(
        "cp1252"
    )
    # german.txt reads the same in both: updated only in the encoding it records, nothing embedded for it
    assert _texts(index)["german.txt"] == ("Die Straße ist nach dem Regen nass.", "cp1252")
    assert run.chunks_embedded == 1


def test_a_file_not_valid_in_the_encoding_fails_alone_naming_the_byte(tmp_path: Path, fake_embedder) -> None:
    docs = _folder(tmp_path)
    (docs / "bad.txt").write_bytes(b"Caf\xe9 au lait \x81 here.")  # 0x81: no character in Windows-1252
    (docs / "bom.txt").write_bytes("Unicode with a mark: ferry.".encode("utf-16"))
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    run = index.ingest([docs], encoding="cp1252")
    assert run.status == "partial" and run.added == 4 and run.failed == 1
    (error,) = run.errors
    assert error["path"].endswith("bad.txt")
    assert error["reason"].startswith("not valid cp1252 at byte 13 (--encoding cp1252)") and "\n" not in error["reason"]
    assert _texts(index)["bom.txt"] == ("Unicode with a mark: ferry.", "utf-16")  # a byte-order mark still wins


def test_utf16_without_a_mark_is_read_when_named(tmp_path: Path, fake_embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "wide.txt").write_bytes("Ferries at dawn, déjà vu.".encode("utf-16-le"))  # NUL bytes, no mark
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    assert index.ingest([docs]).failed == 1  # binary, without the encoding
    run = index.ingest([docs], encoding="UTF-16LE")
    assert run.added == 1 and _texts(index)["wide.txt"] == ("Ferries at dawn, déjà vu.", "utf-16-le")


def test_an_unknown_encoding_is_one_line_before_any_work(tmp_path: Path, fake_embedder) -> None:
    docs = _folder(tmp_path)
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    with pytest.raises(SettingsError, match="unknown encoding 'cp9999'"):
        index.ingest([docs], encoding="cp9999")
    with pytest.raises(SettingsError, match="not a text encoding"):
        index.ingest([docs], encoding="zlib")
    assert index.documents() == []
    result = CliRunner().invoke(cli, ["ingest", str(docs), "--index", str(tmp_path / "cli"), "--encoding", "cp9999"])
    assert result.exit_code == 2 and "unknown encoding 'cp9999'" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "cli").exists()
    with pytest.raises(ValueError, match="unknown encoding"):
        IngestParameters.parse(paths=[str(docs)], encoding="cp9999")
    assert IngestParameters.parse(paths=[str(docs)], encoding="Latin-1").encoding == "iso8859-1"


def test_the_cli_takes_the_encoding(tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    (docs / "bad.txt").write_bytes(b"Caf\xe9 au lait \x81 here.")
    command = ["ingest", str(docs), "--index", str(tmp_path / "absent"), "--dry-run", "--json"]
    result = CliRunner().invoke(cli, [*command, "--encoding", "cp1252"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.splitlines()[-1])
    assert summary["added"] == 3 and [e["reason"].split(" (")[0] for e in summary["errors"]] == [
        "not valid cp1252 at byte 13"
    ]
    stdin = CliRunner().invoke(cli, ["ingest", "-", "--index", str(tmp_path / "t"), "--encoding", "cp1250"], input="")
    assert stdin.exit_code == 2 and "--encoding applies to folders" in stdin.output
