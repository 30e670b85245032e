"""Every repository path and dotted ``citeline.`` name written in the docs, the README, docstrings and comments
resolves: a moved module or renamed function that leaves its old name in prose fails here, not in a reader's hands.

The last design review found "flows/ingest.py" named as the flow's home in 6 places (one a ``--help`` text) and
stale module names in 8 docstrings; this scan found 9 more (tests that moved into tiers, a bench script folded
into another, a renamed stage). Example paths that a page invents on purpose are listed in ``EXAMPLES`` with the
reason.
"""

from __future__ import annotations

import dataclasses
import importlib
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
}

#: Dotted names that are not Python names under the package: a logger's name, a key, a host name in an example.
NOT_MODULES = {
    "citeline.access": "citeline/server/metrics.py: the access log's logger name",
    "citeline.caller": "citeline/server/access.py: the ASGI scope key that carries a request's caller",
    "citeline.internal": "docs/operations.md: the host name of a scrape configuration's example target",
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
    if name in NOT_MODULES:
        return
    assert resolves(name), f"{name} is named in {sorted(NAMES[name])} but does not resolve"
