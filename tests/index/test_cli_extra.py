"""The commands of citeline.cli.documents and citeline.cli.serve (documents, show, serve's wiring, --format), run
through click on a real index."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.common import emit_search, format_option, resolve_format
from citeline.cli.documents import AROUND_CHARS
from citeline.cli.main import cli


@pytest.fixture(scope="module")
def group() -> click.Group:
    return cli


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("cli_extra")
    docs = root / "docs"
    docs.mkdir()
    (docs / "long.md").write_text("# Long\n\n" + " ".join(f"word{i}" for i in range(600)) + "\n", encoding="utf-8")
    (docs / "records.jsonl").write_text(
        '{"_id": "r1", "title": "Ledger", "text": "Pay stopped in June.", "author": "Mara"}\n', encoding="utf-8"
    )
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    return str(index.path)


def run(group: click.Group, *args: str) -> click.testing.Result:
    result = CliRunner().invoke(group, list(args))
    return result


def test_commands_are_registered(group: click.Group) -> None:
    assert {"serve", "documents", "show"} <= set(group.commands)
    assert "--port" in run(group, "serve", "--help").output


def test_documents_in_every_format(group: click.Group, index_path: str) -> None:
    table = run(group, "documents", "--index", index_path)
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[0].split()[:3] == ["doc_id", "source_path", "title"]
    rows = [json.loads(line) for line in run(group, "documents", "--index", index_path, "--json").output.splitlines()]
    assert sorted(r["source_id"] for r in rows) == ["long.md", "records.jsonl#r1"]
    array = json.loads(run(group, "documents", "--index", index_path, "--format", "json").output)
    assert array == rows
    parsed = list(csv.DictReader(io.StringIO(run(group, "documents", "--index", index_path, "--format", "csv").output)))
    assert [r["doc_id"] for r in parsed] == [r["doc_id"] for r in rows]
    mara = run(group, "documents", "--index", index_path, "--where", "author=Mara", "--format", "tsv").output
    assert len(mara.splitlines()) == 2 and "records.jsonl#r1" in mara
    assert len(run(group, "documents", "--index", index_path, "--limit", "1", "--json").output.splitlines()) == 1
    conflict = run(group, "documents", "--index", index_path, "--json", "--format", "csv")
    assert conflict.exit_code == 2 and "--json means --format jsonl" in conflict.output
    none = run(group, "documents", "--index", index_path, "--path", "*.pdf")
    assert none.exit_code == 0 and "no documents match the filters" in none.output


def test_show_text_chunk_and_around(group: click.Group, index_path: str) -> None:
    rows = [json.loads(line) for line in run(group, "documents", "--index", index_path, "--json").output.splitlines()]
    long_id = next(r["doc_id"] for r in rows if r["source_id"] == "long.md")
    text = Index.open(index_path).document_text(long_id)
    whole = run(group, "show", long_id, "--index", index_path)
    assert whole.exit_code == 0 and whole.output.rstrip("\n").endswith(text.rstrip("\n"))
    assert "long.md" in whole.output and f"[chars 0-{len(text)} of {len(text)}]" in whole.output
    chunk = json.loads(run(group, "show", long_id, "--index", index_path, "--chunk", "1", "--json").output)
    assert chunk["text"] == text[chunk["char_start"] : chunk["char_end"]]
    span = next(s for s in chunk["spans"] if s["ordinal"] == 1)
    assert (chunk["char_start"], chunk["char_end"]) == (span["char_start"], span["char_end"])
    around = json.loads(run(group, "show", long_id, "--index", index_path, "--around", "1000", "--json").output)
    assert (around["char_start"], around["char_end"]) == (1000 - AROUND_CHARS, 1000 + AROUND_CHARS)
    bad_chunk = run(group, "show", long_id, "--index", index_path, "--chunk", "99")
    assert bad_chunk.exit_code == 1 and f"document {long_id} has chunks 0 to" in bad_chunk.output
    past = run(group, "show", long_id, "--index", index_path, "--around", "999999")
    assert past.exit_code == 1 and "is past the end" in past.output
    unknown = run(group, "show", "nope", "--index", index_path)
    assert unknown.exit_code == 1 and "no document 'nope'" in unknown.output
    assert "Traceback" not in unknown.output


def test_format_option_for_search(index_path: str) -> None:
    @click.command()
    @format_option
    @click.option("--json", "as_json", is_flag=True)
    def search(fmt: str | None, as_json: bool) -> None:
        output = resolve_format(fmt, as_json)
        assert output is not None
        emit_search(Index.open(index_path, embedder=HashEmbedder()).search("pay stopped", k=2), output)

    table = CliRunner().invoke(search, ["--format", "table"]).output.splitlines()
    assert table[0].split() == ["rank", "relevance", "source_path", "title", "highlight"]
    assert len(table) == 4  # header, rule, one line a result
    lines = CliRunner().invoke(search, ["--json"]).output.splitlines()
    assert [json.loads(line)["rank"] for line in lines] == [1, 2]
    rows = list(csv.DictReader(io.StringIO(CliRunner().invoke(search, ["--format", "csv"]).output)))
    assert rows[0]["rank"] == "1" and json.loads(rows[0]["sources"])[0]["doc_id"] == rows[0]["doc_id"]
    assert resolve_format(None, False) is None
    assert resolve_format(None, False, default="table") == "table"


def test_missing_index_is_one_line(group: click.Group, tmp_path: Path) -> None:
    result = run(group, "documents", "--index", str(tmp_path / "none"))
    assert result.exit_code == 1 and "no citeline index at" in result.output and "Traceback" not in result.output
