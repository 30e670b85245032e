"""Every filter example of the README and docs/ finds something on seeds/ (issue 42.6).

A newcomer copies ``citeline search "pay stopped" --where author=Mara`` from the quickstart: on a seeds/ without
front matter it printed nothing, and a filter never seemed to work. The examples are read from the pages
themselves (fenced shell blocks: ``citeline search``/``documents`` with a filter flag, ``curl`` with a filter
parameter; Python blocks: every literal ``filters=`` argument) and run against an index of a copy of seeds/ built
with the fast test embedder; each must print at least one seed document.
"""

from __future__ import annotations

import ast
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from conftest import REPO, HashEmbedder
from fastapi.testclient import TestClient

from citeline import Index
from citeline.cli.main import cli
from citeline.server import create_app

PAGES = [REPO / "README.md", *sorted(page for page in (REPO / "docs").rglob("*.md") if page.name != "cli.md")]
FILTER_FLAGS = ("--where", "--source", "--path", "--ingested-after", "--ingested-before")
FILTER_PARAMETER = re.compile(r"[?&](where|source|path|ingested_after|ingested_before)=")
SEED_NAMES = [seed.name for seed in (REPO / "seeds").iterdir()]


def _fenced(text: str) -> Iterator[tuple[str, list[str]]]:
    """The fenced code blocks of a Markdown text: ``(language, lines)``."""
    language, lines = None, []
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if language is None:
                language, lines = line.strip().strip("`").strip() or "text", []
            else:
                yield language, lines
                language = None
        elif language is not None:
            lines.append(line)


def _examples() -> list[tuple[str, str, object]]:
    """``(page, kind, example)``: ``cli`` (argument list), ``http`` (a URL's path and query), ``python`` (filters)."""
    found: list[tuple[str, str, object]] = []
    for page in PAGES:
        name = str(page.relative_to(REPO))
        for language, lines in _fenced(page.read_text(encoding="utf-8")):
            if language in ("bash", "sh", "shell", "console"):
                for line in "\n".join(lines).replace("\\\n", " ").splitlines():  # continued lines joined
                    for part in line.split("&&"):
                        words = shlex.split(part, comments=True)
                        if words[:1] == ["curl"]:
                            url = next((word for word in words if word.startswith("http")), "")
                            if FILTER_PARAMETER.search(url):
                                parts = urlsplit(url)
                                found.append((name, "http", f"{parts.path}?{parts.query}"))
                        elif words[:1] == ["citeline"] and words[1:2] in (["search"], ["documents"]):
                            filtered = any(word.split("=")[0] in FILTER_FLAGS for word in words)
                            if filtered:
                                found.append((name, "cli", words[1:]))
            elif language == "python":
                try:
                    tree = ast.parse("\n".join(lines))
                except SyntaxError:
                    continue
                for node in ast.walk(tree):
                    for keyword in getattr(node, "keywords", []):
                        if keyword.arg == "filters":
                            try:
                                found.append((name, "python", ast.literal_eval(keyword.value)))
                            except ValueError:
                                continue
    return found


EXAMPLES = _examples()


def test_the_docs_hold_filter_examples_of_each_kind() -> None:
    kinds = {kind for _, kind, _ in EXAMPLES}
    assert kinds == {"cli", "http", "python"}, EXAMPLES
    assert any("--where" in example for _, kind, example in EXAMPLES if kind == "cli")  # type: ignore[operator]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a copy of seeds/ and ``index/`` built from it, as the quickstart's reader has."""
    root = tmp_path_factory.mktemp("documented")
    shutil.copytree(REPO / "seeds", root / "seeds")
    Index.create(root / "index", embedder=HashEmbedder()).ingest([root / "seeds"])
    return root


@pytest.fixture
def in_workdir(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(workdir)
    monkeypatch.delenv("CITELINE_INDEX", raising=False)
    # The CLI opens the index with its model; the index was built with the test embedder, so it answers instead.
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *a, **k: HashEmbedder())
    return workdir


@pytest.mark.parametrize(
    ("page", "kind", "example"), EXAMPLES, ids=[f"{page}:{kind}:{i}" for i, (page, kind, _) in enumerate(EXAMPLES)]
)
def test_a_documented_filter_finds_seed_documents(in_workdir: Path, page: str, kind: str, example: object) -> None:
    if kind == "cli":
        assert isinstance(example, list)
        result = CliRunner().invoke(cli, example, env={"NO_COLOR": "1", "COLUMNS": "200"})
        assert result.exit_code == 0, (page, example, result.output)
        output = result.output
    elif kind == "http":
        with TestClient(create_app(in_workdir / "index", HashEmbedder())) as client:
            answer = client.get(str(example))
        assert answer.status_code == 200, (page, example, answer.text)
        assert answer.json()["results"], (page, example, "no results")
        output = answer.text
    else:
        index = Index.open(in_workdir / "index", embedder=HashEmbedder())
        assert isinstance(example, dict)
        hits = index.search("why did soldiers defect", 5, filters=example)
        assert hits and index.documents(example), (page, example, "no results")
        output = " ".join(hit.source_path for hit in hits)
    assert "no passages found" not in output, (page, example, output)
    assert any(name in output for name in SEED_NAMES), (page, example, output)
