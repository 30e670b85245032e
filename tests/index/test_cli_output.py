"""Terminal output people can read: tables that fit the terminal, --columns and --no-headers, TSV one line a
record, a plain highlight marker without colour, runs with start, duration and roots, status as a table, and
bare ``citeline`` printing its usage."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.main import cli


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("output")
    seeds = Path(__file__).resolve().parents[2] / "seeds"
    Index.create(root / "ix", embedder=HashEmbedder()).ingest([seeds])
    return str(root / "ix")


def run(*args: str, width: int = 80) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": str(width), "NO_COLOR": "1"})


def search(index_path: str, *args: str, width: int = 80) -> Result:
    query = "soldiers defect from the garrison"
    return run("search", query, "--index", index_path, "--mode", "lexical", *args, width=width)


def test_bare_citeline_prints_usage_and_exits_0() -> None:
    result = run()
    assert result.exit_code == 0 and not result.output.startswith("Error")
    assert result.output.startswith("Usage: ") and "\nCommands:\n" in result.output
    assert "  search " in result.output


def test_search_table_is_one_line_a_hit_within_the_terminal(index_path: str) -> None:
    lines = search(index_path, "-k", "3", "--flat", "--format", "table").output.splitlines()
    assert lines[0].split() == ["rank", "relevance", "source_path", "title", "highlight"]
    assert len(lines) == 5 and all(len(line) <= 80 for line in lines)
    assert lines[2].split()[0] == "1" and ".md " in lines[2]  # a path cut keeps its file name
    wide = search(index_path, "-k", "3", "--format", "table", width=200).output.splitlines()
    assert max(len(line) for line in wide) > 80 and all(len(line) <= 200 for line in wide)


def test_columns_and_no_headers(index_path: str) -> None:
    lines = search(index_path, "-k", "2", "--format", "tsv", "--columns", "rank,source_id,highlight", "--no-headers")
    rows = [line.split("\t") for line in lines.output.splitlines()]
    assert [row[0] for row in rows] == ["1", "2"] and all(len(row) == 3 for row in rows)
    table = search(index_path, "-k", "2", "--format", "table", "--columns", "source_id,rank", "--no-headers")
    assert [line.split()[-1] for line in table.output.splitlines()] == ["1", "2"]
    bad = search(index_path, "--format", "csv", "--columns", "rank,nope")
    assert bad.exit_code == 2 and "unknown field nope; choose from rank, " in bad.output


def test_tsv_keeps_each_result_on_one_line(index_path: str) -> None:
    lines = search(index_path, "-k", "3", "--flat", "--format", "tsv").output.splitlines()
    header = lines[0].split("\t")
    assert len(lines) == 4 and all(len(line.split("\t")) == len(header) for line in lines)
    text = [line.split("\t")[header.index("text")] for line in lines[1:]]
    assert any("\\n" in cell for cell in text)  # the chunks' newlines, escaped


def test_highlight_marker_without_colour(index_path: str) -> None:
    result = search(index_path, "-k", "2")
    assert result.exit_code == 0 and "»" in result.output and "«" in result.output
    assert "relevance" in result.output


def test_documents_table_fits_and_shows_paths(index_path: str) -> None:
    lines = run("documents", "--index", index_path).output.splitlines()
    assert "source_path" in lines[0].split() and all(len(line) <= 80 for line in lines)
    assert len(lines) == 2 + len(list((Path(__file__).resolve().parents[2] / "seeds").iterdir()))


def test_runs_show_start_duration_and_roots(index_path: str) -> None:
    plain = run("runs", "--index", index_path).output
    assert " started 20" in plain and " s, gen " in plain and "roots: " in plain and "seeds" in plain
    table = run("runs", "--index", index_path, "--format", "table", width=200).output.splitlines()
    assert table[0].split()[:5] == ["run_id", "status", "started_at", "duration", "roots"]
    assert float(table[2].split()[3]) >= 0


def test_status_table_is_readable(index_path: str) -> None:
    lines = run("status", "--index", index_path, "--format", "table", width=200).output.splitlines()
    keys = [line.split()[0] for line in lines if line.strip()]
    assert "last_run.status" in keys and "last_run.roots" in keys
    assert not any("{" in line for line in lines)


@pytest.mark.parametrize("query", ["soldiers defect from the garrison", "zzyzx qwertyuiop"])
def test_columns_are_checked_before_the_search_with_hits_or_without(index_path: str, query: str) -> None:
    """``--columns`` names fields of the search record whether or not the query has hits (issue 42.5): a known
    field prints (or prints nothing) with exit 0, an unknown one is a usage error (exit 2) even before the index
    is opened."""
    known = run(
        "search", query, "--index", index_path, "--mode", "lexical", "--format", "csv", "--columns", "rank,source_id"
    )
    assert known.exit_code == 0, known.output
    for where in (index_path, index_path + "-missing"):
        bad = run("search", query, "--index", where, "--mode", "lexical", "--format", "csv", "--columns", "rank,nope")
        assert bad.exit_code == 2 and "unknown field nope; choose from rank, text, score" in bad.output, bad.output
    for command, good in (("documents", "doc_id,source_id"), ("runs", "run_id,duration")):
        filters = ["--where", "author=Nobody"] if command == "documents" else ["--limit", "0"]
        empty = run(command, "--index", index_path, *filters, "--format", "csv", "--columns", good)
        assert empty.exit_code == 0, empty.output
        bad = run(command, "--index", index_path + "-missing", "--format", "csv", "--columns", "nope")
        assert bad.exit_code == 2 and "unknown field nope" in bad.output, bad.output


def test_a_table_without_hits_says_so_as_the_text_format_does(index_path: str) -> None:
    text = run("search", "zzyzx qwertyuiop", "--index", index_path, "--mode", "lexical")
    table = run("search", "zzyzx qwertyuiop", "--index", index_path, "--mode", "lexical", "--format", "table")
    assert table.exit_code == 0 and text.exit_code == 0
    assert table.output == text.output and table.output.startswith("no passages found")
    where = ["--where", "author=Mara"]
    text = run("search", "zzyzx qwertyuiop", "--index", index_path, "--mode", "lexical", *where)
    table = run("search", "zzyzx qwertyuiop", "--index", index_path, "--mode", "lexical", "--format", "table", *where)
    assert table.output == text.output and table.output.startswith("no passages found matching the filters")
