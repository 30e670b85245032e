"""Names that try to drive the terminal: a folder whose file names (and a record's id, title and metadata) carry
escape sequences, C1 controls and bidirectional overrides, as an archive unpacked from anywhere can. Every command's
text for people prints them escaped (``citeline.util.output.printable``), never raw, in its output, its progress
and log lines and its errors; the exact formats keep them exact (JSON escapes the C0 controls itself)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.main import cli
from citeline.util.output import printable

#: What may never reach a terminal raw: C0 but newline and tab, DEL, C1, the bidi embeddings, overrides, isolates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: File names as they come: a screen clear, a terminal title (OSC, ended by BEL), a C1 CSI, a cursor move by
#: backspace and carriage return, a right-to-left override hiding an extension, an isolate, DEL.
NAMES = ["a\x1b[2Jb.txt", "title\x1b]0;pwned\x07.md", "c1\x9b31mred.txt", "back\x08\x08\rspace.txt",
         "invoice\u202etxt.exe.md", "iso\u2066late\u2069.txt", "del\x7f.txt"]  # fmt: skip
RECORD = {"_id": "r\x1b[4m1", "title": "T\x1b[5mitle\u202e", "text": "Garrison ledger of pay\x1b[8m stopped.",
          "author": "Ma\x9bra\x1b[2J"}  # fmt: skip


@pytest.fixture(autouse=True)
def hash_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI loads the HashEmbedder where it would load the real model."""
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs\x1b[2J"
    docs.mkdir()
    for n, name in enumerate(NAMES):
        (docs / name).write_text(f"# Note {n}\n\nThe garrison's pay stopped in month {n}; ledger entry {n}.\n")
    (docs / "records\x1b[7m.jsonl").write_text(json.dumps(RECORD) + "\n")
    (docs / "broken\x1b[31m.pdf").write_bytes(b"%PDF-1.4 not really a pdf")  # an error line naming the file
    return docs


def _run(*args: str) -> Result:
    # color=True: click would strip ANSI sequences from what it writes to a test's pipe, hiding what a terminal
    # gets; a terminal gets them raw unless citeline escapes them
    return CliRunner().invoke(cli, list(args), color=True, env={"COLUMNS": "200"})


#: The colours citeline itself writes (click.style: cyan names, bold, yellow highlights, reset); none of the hostile
#: names above carries one of these, so taking them out hides nothing of theirs.
OWN_STYLES = re.compile("\x1b\\[(?:0|1|22|33|36|39)m")


def _clean(result: Result, what: str) -> str:
    text = OWN_STYLES.sub("", result.stdout + result.stderr)
    assert "Traceback" not in text, (what, text)
    assert not RAW.search(text), (what, [match.group() for match in RAW.finditer(text)], text[-2000:])
    return text


def test_every_command_prints_hostile_names_escaped(folder: Path, tmp_path: Path) -> None:
    ix = str(tmp_path / "ix")
    ingest = _run("ingest", str(folder), "--index", ix, "-v", "--progress-every", "0.001")
    shown = _clean(ingest, "ingest")
    assert ingest.exit_code == 0 and "broken\\x1b[31m.pdf" in shown, shown
    index = Index.open(ix, embedder=HashEmbedder())
    doc_ids = [document.doc_id for document in index.documents()]
    commands: list[tuple[str, ...]] = [
        ("ingest", str(folder), "--index", ix, "--dry-run"),
        ("search", "garrison ledger", "--index", ix, "--mode", "lexical", "-k", "20"),
        ("search", "garrison ledger", "--index", ix, "--mode", "lexical", "--full", "--flat"),
        ("search", "garrison ledger", "--index", ix, "--mode", "lexical", "--format", "table"),
        ("documents", "--index", ix),
        ("documents", "--index", ix, "--format", "table", "--columns", "source_path,title,metadata"),
        ("status", "--index", ix),
        ("status", "--index", ix, "--format", "table"),
        ("runs", "--index", ix),
        ("runs", "--index", ix, "--format", "table"),
        ("verify", "--index", ix),
        ("remove", str(folder / NAMES[0]), "--index", ix, "--dry-run"),
        *(("show", doc_id, "--index", ix) for doc_id in doc_ids),
        # errors that echo what they were given
        ("show", "nosuch\x1b[2J\u202e", "--index", ix),
        ("search", "x", "--index", ix, "--where", "a\x1b[2J~"),
        ("ingest", str(folder / "missing\x1b[2J\u202e"), "--index", ix),
        ("documents", "--index", str(tmp_path / "no\x1b]0;index\x07")),
    ]
    for command in commands:
        _clean(_run(*command), " ".join(command))
    # a name stays recognisable: escaped as Python writes it
    listed = _run("documents", "--index", ix, "--format", "table", "--columns", "source_path").stdout
    assert printable(NAMES[0]) in listed and "invoice\\u202etxt.exe.md" in listed
    # then the writes: a re-run that updates and removes hostile names, a removal, a rebuild
    (folder / NAMES[1]).write_text("# Changed\n\nThe ledger was rewritten.\n")
    (folder / NAMES[2]).unlink()
    for command in [
        ("ingest", str(folder), "--index", ix, "-v"),
        ("remove", str(folder / NAMES[0]), "--index", ix),
        ("rebuild", "--index", ix),
        ("runs", "--index", ix),
    ]:
        done = _run(*command)
        assert done.exit_code == 0, (command, done.output)
        _clean(done, " ".join(command))


def test_exact_formats_keep_names_exact(folder: Path, tmp_path: Path) -> None:
    ix = str(tmp_path / "ix")
    assert _run("ingest", str(folder), "--index", ix).exit_code == 0
    rows = json.loads(_run("documents", "--index", ix, "--format", "json").stdout)
    assert {Path(row["source_path"]).name for row in rows} >= set(NAMES)
    lines = _run("documents", "--index", ix, "--format", "jsonl").stdout.splitlines()
    assert {Path(json.loads(line)["source_path"]).name for line in lines} >= set(NAMES)


@pytest.mark.parametrize(
    "text", ["", "plain text, ünïcödé ✓", "\x1b[2J", "a\u202eb", "\x00\x7f\x80\x9f\u2066", "line\nbreak\ttab"]
)
def test_printable_escapes_exactly_the_controls(text: str) -> None:
    shown = printable(text)
    assert not RAW.search(shown) and "\n" not in shown and "\t" not in shown
    assert shown == text or "\\x" in shown or "\\u" in shown
    assert printable(text, lines=True).count("\n") == text.count("\n")
    assert shown.encode().decode("unicode_escape") == text or not text.isascii()
