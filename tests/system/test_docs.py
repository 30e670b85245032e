"""The docs stay true: the CLI reference is what ``--help`` says, the README is a front door whose set-up commands
come first, and the quickstart's commands run."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from citeline.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def _code_blocks(text: str) -> list[list[str]]:
    """The fenced code blocks of a Markdown text, each as its lines."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _citeline_commands(line: str) -> list[list[str]]:
    """The ``citeline ...`` commands of a shell line (``a && b``), as argument lists, comments dropped."""
    commands = []
    for part in line.split("&&"):
        words = shlex.split(part, comments=True)
        if words and words[0] == "citeline":
            commands.append(words[1:])
    return commands


def test_cli_reference_is_current() -> None:
    """docs/cli.md is what docs/gen_cli.py writes from click's help (run it after changing a command)."""
    check = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_cli.py"), "--check"], capture_output=True, text=True, cwd=ROOT
    )
    assert check.returncode == 0, check.stderr


def test_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    first = _code_blocks(text)[0]
    assert first[:2] == [
        "pip install torch==2.13.0 && pip install -e . && citeline ingest seeds"
        ' && citeline search "why did soldiers defect"',
        'pip install torch==2.13.0 && pip install -e ".[dev]" && pytest -n auto',
    ]
    assert "../shared" not in text  # nothing outside a clone


def _quickstart() -> list[list[str]]:
    """The README's first line's citeline commands, then those of its Quickstart section's first block."""
    text = README.read_text(encoding="utf-8")
    commands = _citeline_commands(_code_blocks(text)[0][0])
    section = text.split("## Quickstart", 1)[1]
    for line in _code_blocks(section)[0]:
        commands.extend(_citeline_commands(line))
    return commands


def test_quickstart_commands_are_listed() -> None:
    commands = _quickstart()
    assert commands[0] == ["ingest", "seeds"]
    assert commands[1] == ["search", "why did soldiers defect"]


@pytest.mark.slow
def test_quickstart_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each quickstart command, on a copy of seeds/ and with ``--index`` in tmp_path, succeeds and finds seeds' text."""
    shutil.copytree(ROOT / "seeds", tmp_path / "seeds")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CITELINE_INDEX", raising=False)
    index = str(tmp_path / "index")
    outputs = {}
    for args in _quickstart():
        result = CliRunner().invoke(cli, [*args, "--index", index])
        assert result.exit_code == 0, (args, result.output)
        outputs[" ".join(args)] = result.output
    assert "defections-at-the-river-garrison.md" in outputs["search why did soldiers defect"]
    json_lines = [line for key, out in outputs.items() if "--json" in key for line in out.splitlines()]
    assert json_lines and all(json.loads(line)["source_path"] for line in json_lines)


def test_docstring_links_point_at_headings() -> None:
    """Every ``docs/PAGE.md#anchor`` the code names is a heading of that page (as mkdocs makes its anchors)."""
    from markdown.extensions.toc import slugify

    named = {
        (page, anchor)
        for path in [*(ROOT / "citeline").rglob("*.py"), *(ROOT / "flows").rglob("*.py")]
        for page, anchor in re.findall(r"docs/([\w/]+\.md)(?:#([\w-]+))?", path.read_text(encoding="utf-8"))
    }
    assert named
    for page, anchor in sorted(named):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        headings = {slugify(line.lstrip("#").strip(), "-") for line in text.splitlines() if line.startswith("#")}
        assert not anchor or anchor in headings, f"docs/{page}#{anchor}: no such heading"


def test_every_dependency_is_explained() -> None:
    """docs/dependencies.md names each package of pyproject.toml (and says why it is there)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = [
        *project["dependencies"],
        *(r for extra in project["optional-dependencies"].values() for r in extra),
    ]
    page = (ROOT / "docs" / "dependencies.md").read_text(encoding="utf-8").lower()
    names = {re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower() for requirement in requirements}
    assert sorted(name for name in names if name not in page) == []


#: Tags by which a page loads something (an href of <a> is a link the reader may follow, not a load).
_LOADS = re.compile(r"<(?:link|script|img|iframe|source|audio|video)\b[^>]*?\b(?:href|src)=\"((?:https?:)?//[^\"]+)\"")


@pytest.mark.slow  # a whole site build and a browser; CI builds the site (`mkdocs build --strict`) before the tests
def test_the_docs_site_builds_and_reads_offline(tmp_path: Path) -> None:
    """``mkdocs build --strict`` succeeds, and no page, stylesheet or script of the site loads anything from the
    internet (the material theme fetched Roboto from Google Fonts unless ``theme.font`` is false): each page's
    resource tags and the stylesheets' ``url(...)``/``@import`` point at the site itself. In a headless chromium
    (when installed), opening the home and the quickstart page asks for nothing outside the site."""
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stderr[-2000:]
    loads = {
        (str(page.relative_to(site)), url)
        for page in site.rglob("*.html")
        for url in _LOADS.findall(page.read_text(encoding="utf-8"))
    }
    assert sorted(loads) == []
    styles = [
        (str(sheet.relative_to(site)), found)
        for sheet in site.rglob("*.css")
        for found in re.findall(r"(?:url\(|@import\s+)[\"']?((?:https?:)?//[^\"')\s]+)", sheet.read_text("utf-8"))
    ]
    assert styles == []
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return
    sync_api = pytest.importorskip("playwright.sync_api")
    outside: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox"])
        try:
            page = browser.new_page()

            def offline(route: object) -> None:
                request = route.request  # type: ignore[attr-defined]
                if request.url.startswith("file://"):
                    route.continue_()  # type: ignore[attr-defined]
                else:
                    outside.append(request.url)
                    route.abort()  # type: ignore[attr-defined]

            page.route("**/*", offline)
            for name in ("index.html", "quickstart/index.html"):
                page.goto((site / name).as_uri())
                page.wait_for_load_state("load")
                assert page.locator("h1").first.inner_text()
        finally:
            browser.close()
    assert outside == []
