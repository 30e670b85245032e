"""The whole product with the real bundled model: the Prefect flow builds the index, Python and the CLI search it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from citeline import Index
from citeline.cli.main import cli

pytestmark = pytest.mark.slow

GARRISON = "defections-at-the-river-garrison.md"
LETTERS = "a-mothers-letters-and-a-broken-front.md"
SEED_FILES = len(list((Path(__file__).resolve().parents[2] / "seeds").glob("*.md")))  # one document each


@pytest.fixture(scope="session")
def seeds_index(tmp_path_factory, seeds_dir_session: Path) -> Path:
    """The seeds ingested by the Prefect flow (ephemeral Prefect API), with the real model."""
    from prefect.testing.utilities import prefect_test_harness

    from citeline.orchestration.ingest import ingest_flow

    index_path = tmp_path_factory.mktemp("seeds") / "index"
    with prefect_test_harness(server_startup_timeout=90):
        summary = ingest_flow(paths=[str(seeds_dir_session)], index_path=str(index_path))
    assert summary["status"] == "succeeded"
    assert summary["added"] == SEED_FILES
    return index_path


@pytest.fixture(scope="session")
def seeds_dir_session() -> Path:
    return Path(__file__).resolve().parents[2] / "seeds"


def test_flow_index_answers_with_passages_from_both_articles(seeds_index: Path, seeds_dir_session: Path) -> None:
    index = Index.open(seeds_index)
    results = index.search("soldiers fear for their families", k=5)
    sources = {r.source_id for r in results}
    assert {GARRISON, LETTERS} <= sources
    for result in results:
        file_text = (seeds_dir_session / result.source_id).read_text(encoding="utf-8")
        assert file_text[result.char_start : result.char_end] == result.text
        assert result.model == "all-MiniLM-L6-v2"
    # The passage quoting the soldier's fear is among the top results.
    assert any("afraid of what was happening to our families" in r.text for r in results[:3])


def test_rerunning_the_flow_changes_nothing(seeds_index: Path, seeds_dir_session: Path) -> None:
    from prefect.testing.utilities import prefect_test_harness

    from citeline.orchestration.ingest import ingest_flow

    before = Index.open(seeds_index).status()
    with prefect_test_harness(server_startup_timeout=90):
        summary = ingest_flow(paths=[str(seeds_dir_session)], index_path=str(seeds_index))
    assert (summary["unchanged"], summary["added"], summary["chunks_embedded"]) == (SEED_FILES, 0, 0)
    after = Index.open(seeds_index).status()
    assert (after.generation, after.chunks) == (before.generation, before.chunks)


def test_cli_search_prints_sources_and_offsets(seeds_index: Path) -> None:
    result = CliRunner().invoke(cli, ["search", "why did soldiers defect", "--index", str(seeds_index), "-k", "5"])
    assert result.exit_code == 0, result.output
    assert GARRISON in result.output and LETTERS in result.output
    assert "[chars " in result.output


def test_cli_search_json_is_one_object_per_line(seeds_index: Path, seeds_dir_session: Path) -> None:
    argv = ["search", "why did soldiers defect", "--index", str(seeds_index), "--json", "--flat", "--min-score", "0"]
    result = CliRunner().invoke(cli, argv)  # every passage: k=10 of them
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert len(rows) == min(10, Index.open(seeds_index).status().chunks)
    for row in rows:
        text = (seeds_dir_session / row["source_id"]).read_text(encoding="utf-8")
        assert text[row["char_start"] : row["char_end"]] == row["text"]
        assert {"doc_id", "title", "ordinal", "content_hash", "run_id", "model", "score"} <= row.keys()


def test_cli_status_and_runs(seeds_index: Path) -> None:
    status = CliRunner().invoke(cli, ["status", "--index", str(seeds_index), "--json"])
    assert status.exit_code == 0, status.output
    info = json.loads(status.output)
    assert info["documents"] == SEED_FILES and info["model"] == "all-MiniLM-L6-v2" and info["generation"] >= 1
    runs = CliRunner().invoke(cli, ["runs", "--index", str(seeds_index)])
    assert runs.exit_code == 0 and "succeeded" in runs.output


def test_cli_ingest_in_process(tmp_path: Path, seeds_dir_session: Path) -> None:
    index_dir = tmp_path / "cli-index"
    result = CliRunner().invoke(cli, ["ingest", str(seeds_dir_session), "--index", str(index_dir), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.splitlines()[-1])
    assert summary["added"] == SEED_FILES and summary["generation"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "", "--index", "{index}"], "query is empty"),
        (["search", "x", "-k", "0", "--index", "{index}"], "k must be at least 1"),
        (["search", "x", "-k", "-5", "--index", "{index}"], "k must be at least 1"),
        (["search", "   ", "--index", "{index}"], "query is empty"),
        (["search", "x", "--index", "{missing}"], "no citeline index"),
        (["ingest", "{missing}/nowhere", "--index", "{index}"], "no such file or directory"),
    ],
)
def test_cli_user_errors_are_one_line_and_nonzero(
    seeds_index: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    argv = [a.format(index=seeds_index, missing=tmp_path / "missing") for a in args]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "x", "-k", "abc"], "not a valid integer"),
        (["search"], "Missing argument 'QUERY'"),
        (["search", "x", "--bogus"], "No such option"),
    ],
)
def test_cli_usage_errors_are_one_line_with_exit_status_2(seeds_index: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, [*args, "--index", str(seeds_index)])
    assert result.exit_code == 2
    assert message in result.output and "--help" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_cli_huge_k_is_clamped_to_what_the_index_holds(seeds_index: Path) -> None:
    argv = ["search", "soldiers", "-k", "100000000", "--no-collapse", "--json", "--flat", "--min-score", "0"]
    argv += ["--index", str(seeds_index)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0, result.output
    chunks = Index.open(seeds_index).status().chunks
    assert len(result.output.splitlines()) == chunks
