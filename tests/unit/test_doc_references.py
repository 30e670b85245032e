"""Every repository path and dotted ``citeline.`` name written in the docs, the README, docstrings and comments
resolves, and every bare or short name in backticks on a docs page is found in the code (the section at the end):
a moved module or renamed function that leaves its old name in prose fails here, not in a reader's hands.

The last design review found "flows/ingest.py" named as the flow's home in 6 places (one a ``--help`` text) and
stale module names in 8 docstrings; this scan found 9 more (tests that moved into tiers, a bench script folded
into another, a renamed stage). Example paths that a page invents on purpose are listed in ``EXAMPLES`` with the
reason.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import keyword
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Files whose prose and code are scanned.
SCANNED = [
    ROOT / "README.md",
    *sorted(ROOT.glob("docs/**/*.md")),
    *sorted(ROOT.glob("citeline/**/*.py")),
    *sorted(ROOT.glob("flows/*.py")),
    *sorted(ROOT.glob("bench/*.py")),
    *sorted(ROOT.glob("tests/**/*.py")),
]

# A repository path: a top-level folder of the project, then a file with a known extension (longest first, so
# ``.jsonl`` is not read as ``.json``).
PATH = re.compile(
    r"(?<![\w./-])((?:citeline|flows|bench|tests|docs|seeds)/[\w./-]*?\w\.(?:jsonl|json|py|md|yml|yaml|txt|csv|toml))"
    r"(?![\w])"
)
# A dotted name under the package; a trailing file extension (``citeline.json``, the settings file) is a file name.
DOTTED = re.compile(r"(?<![\w./-])(citeline(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIXES = {"json", "jsonl", "py", "md", "yml", "yaml", "toml", "txt", "csv", "lock"}

#: Paths written as examples of the user's own files, not the project's.
EXAMPLES = {
    "docs/draft.md": "docs/managing.md: an example of removing one's own document",
    "docs/x.txt": "docs/sources.md: an example path in a warning line",
    "docs/rows.csv": "docs/sources.md: an example path in a run's summary line",
    "docs/PAGE.md": "tests/system/test_docs.py: a placeholder in a failure message",
    "docs/applications.md": "tests/index/test_works.py: Starlette's page, in tests/data/realdocs/starlette-0.37.2",
}

#: Dotted names that are not code: a logger's name, a key of the request scope, a host name in an example.
NOT_CODE = {
    "citeline.access": "the access log's logger (citeline/server/metrics.py)",
    "citeline.caller": "the request scope's key of the caller (citeline/server/access.py)",
    "citeline.internal": "docs/operations.md: an example host name in a Prometheus scrape config",
}


def _references() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    paths: dict[str, set[str]] = {}
    names: dict[str, set[str]] = {}
    for file in SCANNED:
        if file == Path(__file__).resolve():
            continue
        text = file.read_text(encoding="utf-8")
        where = str(file.relative_to(ROOT))
        for match in PATH.finditer(text):
            paths.setdefault(match.group(1), set()).add(where)
        for match in DOTTED.finditer(text):
            name = match.group(1)
            if name.rsplit(".", 1)[-1] in FILE_SUFFIXES:
                continue
            names.setdefault(name, set()).add(where)
    return paths, names


def _has(obj: Any, attribute: str) -> Any:
    if hasattr(obj, attribute):
        return getattr(obj, attribute)
    # A dataclass field with a default factory, or an annotation-only field, is not a class attribute.
    if dataclasses.is_dataclass(obj) and attribute in {f.name for f in dataclasses.fields(obj)}:
        return None
    if attribute in getattr(obj, "__annotations__", {}):
        return None
    raise AttributeError(attribute)


def resolves(name: str) -> bool:
    """Whether ``name`` is an importable module, or an attribute chain on the longest importable prefix."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                obj = _has(obj, attribute)
        except AttributeError:
            return False
        return True
    return False


PATHS, NAMES = _references()


def test_the_scan_finds_references() -> None:
    # A regex that stopped matching would pass every check below vacuously.
    assert len(PATHS) > 100 and len(NAMES) > 50


@pytest.mark.parametrize("path", sorted(PATHS))
def test_path_exists(path: str) -> None:
    if path in EXAMPLES:
        return
    assert (ROOT / path).exists(), f"{path} is named in {sorted(PATHS[path])} but does not exist"


@pytest.mark.parametrize("name", sorted(NAMES))
def test_dotted_name_resolves(name: str) -> None:
    if name in NOT_CODE:
        return
    assert resolves(name), f"{name} is named in {sorted(NAMES[name])} but does not resolve"


# ---------------------------------------------------------------- bare and short names in backticks
#
# A page names code mostly by its short name: `IVFIndex`, `load_folder`, `remote.fetch_ahead`, `Index.rank`. A
# bare name in single backticks that looks like a Python identifier must be found in the code (a def, class,
# attribute, argument, module, or a word of a string: option names, settings keys, environment variables); a
# short dotted name whose head is a citeline module or class must resolve on it. docs/decisions/ is left out:
# its pages record experiments on other libraries' internals.

#: Words of the code and the project's other files (Dockerfile, prefect.yaml, pyproject.toml...).
CODE_DIRS = ("citeline", "flows", "bench", "tests")
OTHER_FILES = ("Dockerfile", "docker-compose.yml", "prefect.yaml", "pyproject.toml", "mkdocs.yml", ".ci/run")
#: Pages whose backticked names are checked.
PAGES = [ROOT / "README.md", *sorted(p for p in ROOT.glob("docs/**/*.md") if "decisions" not in p.parts)]
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: A name in single backticks (a call's ``()`` allowed); fenced blocks are taken out first.
TICKED = re.compile(r"(?<!`)`((?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*)(?:\(\))?`(?!`)")
FENCE = re.compile(r"```.*?```", re.DOTALL)
#: Names a page writes that are not citeline's, each with why (kept small: a stale name of ours is fixed, not
#: listed).
ALLOWED_NAMES = {
    # other programs' names: FAISS, NumPy, pyarrow, the MCP SDK, S3, nginx, systemd, Kubernetes, shells
    "autoclass": "Sphinx's autodoc directive (docs/sources.md, the .rst reader)",
    "TooManyRedirects": "aiohttp's exception for a redirect loop (docs/reliability.md)",
    "options.rst": "a page of Click's docs (docs/quality.md, the real documentation trees)",
    "CLIVFPQ1": "FAISS's fourcc of a fast-scan IVF file (docs/scale.md)",
    "reconstruct_batch": "a FAISS method",
    "http.server": "Python's standard library HTTP server (docs/reliability.md), not citeline.server.mcp.http",
    "einsum": "a NumPy function",
    "fail_after": "anyio's timeout scope (docs/performance.md, the server's thread hand-off)",
    "run_sync": "anyio.to_thread.run_sync (docs/performance.md)",
    "run_in_executor": "asyncio's loop method (docs/performance.md)",
    "jsonable_encoder": "FastAPI's encoder (docs/performance.md)",
    "solve_dependencies": "FastAPI's parameter resolution (docs/performance.md)",
    "extract_metadata": "trafilatura's metadata function (docs/performance.md)",
    "find_date": "htmldate's date function, which trafilatura calls (docs/performance.md)",
    "pyphen": "the hyphenation package a deleted experiment set lines with (docs/quality.md)",
    "searchsorted": "a NumPy method",
    "to_numpy": "a pyarrow method",
    "without_pandas": "a bench option of pyarrow's to_pylist comparison (docs/performance.md)",
    "CallToolResult": "the MCP SDK's type",
    "LimitReachedError": "pypdf's exception",
    "ListObjectVersions": "the S3 API call",
    "client_header_timeout": "an nginx setting",
    "TimeoutStopSec": "a systemd setting",
    "terminationGracePeriodSeconds": "a Kubernetes setting",
    "fish_source": "click's shell completion for fish",
    "zsh_source": "click's shell completion for zsh",
    # example queries and words of a test collection
    "beer": "an example query (docs/quality.md)",
    "golf": "an example query (docs/quality.md)",
}
#: File names written with a dot (``rows.arrow``, ``shards.json``): not names of code.
NAME_SUFFIXES = FILE_SUFFIXES | {
    "arrow",
    "onnx",
    "duckdb",
    "faiss",
    "cfg",
    "zip",
    "pdf",
    "docx",
    "lock",
    "creating",
    "html",
}


def _code_words() -> set[str]:
    words = set(dir(builtins))
    for folder in CODE_DIRS:
        for path in ROOT.glob(f"{folder}/**/*.py"):
            words.update(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    words.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    words.add(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    words.add(node.attr)
                elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
                    words.add(node.arg)
                elif isinstance(node, ast.alias):
                    words.update(node.name.split("."))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    words.update(IDENTIFIER.findall(node.value))
    for name in OTHER_FILES:
        words.update(IDENTIFIER.findall((ROOT / name).read_text(encoding="utf-8")))
    return words | set(keyword.kwlist)


def _homes() -> dict[str, list[tuple[str, str]]]:
    # A short head (``remote``, ``sources.remote``, ``IVFIndex``) -> the modules (and class) it can name.
    homes: dict[str, list[tuple[str, str]]] = {}
    for path in ROOT.glob("citeline/**/*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        parts = module.split(".")
        for start in range(1, len(parts)):
            homes.setdefault(".".join(parts[start:]), []).append((module, ""))
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                homes.setdefault(node.name, []).append((module, node.name))
    return homes


def short_name_resolves(name: str, homes: dict[str, list[tuple[str, str]]]) -> bool | None:
    """Whether a dotted name whose head is a citeline module or class resolves on one of them (None: its head is
    not citeline's, e.g. ``np.unique``)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        for module, cls in homes.get(".".join(parts[:cut]), []):
            try:
                obj: Any = importlib.import_module(module)
                if cls:
                    obj = getattr(obj, cls)
                for attribute in parts[cut:]:
                    obj = _has(obj, attribute)
            except (ImportError, AttributeError):
                continue
            return True
        if ".".join(parts[:cut]) in homes:
            return False
    return None


def _ticked() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for page in PAGES:
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        for match in TICKED.finditer(text):
            found.setdefault(match.group(1), set()).add(str(page.relative_to(ROOT)))
    return found


TICKED_NAMES = _ticked()


def test_the_scan_finds_ticked_names() -> None:
    assert len(TICKED_NAMES) > 500


def test_ticked_names_are_found_in_the_code() -> None:
    words, homes = _code_words(), _homes()
    unknown, used = [], set()
    for name, pages in sorted(TICKED_NAMES.items()):
        if name in ALLOWED_NAMES:
            used.add(name)
            continue
        if name.startswith("citeline.") or name.rsplit(".", 1)[-1] in NAME_SUFFIXES:
            continue  # resolved by test_dotted_name_resolves; a file name
        if "." in name:
            if short_name_resolves(name, homes) is False:
                unknown.append(f"{name} (in {', '.join(sorted(pages))}): does not resolve")
        elif name not in words:
            unknown.append(f"{name} (in {', '.join(sorted(pages))}): not a name in the code")
    assert not unknown, "stale names in the docs (rename them, or list another program's in ALLOWED_NAMES):\n  " + (
        "\n  ".join(unknown)
    )
    stale = sorted(set(ALLOWED_NAMES) - used)
    assert not stale, f"ALLOWED_NAMES entries no page writes any more (remove them): {stale}"
