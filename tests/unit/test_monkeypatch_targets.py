"""A test that patches a name on a citeline module (``monkeypatch.setattr(module, "name", ...)``) reaches only the
code that looks the name up through that module. A module that imported the name itself (``from MODULE import
name``) keeps the original, and the patch misses it silently: a spy then sees nothing, and a patch that forbids
something (no reading in the coordinator, a crash at a commit) forbids nothing. A rename moved such an import once,
and a spy on ``store.documents.documents_to_plan`` saw nothing (CI caught it only because that spy asserted what it
saw). This lint lists every patched ``(module, name)`` that some citeline module imports by name; each must be
allowed below with the reason the patch still reaches the code under test."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: (test file, patched module.name) -> why the patch still reaches the code the test exercises.
ALLOWED: dict[tuple[str, str], str] = {}


def imported_by_name() -> dict[tuple[str, str], set[str]]:
    """``(module, name)`` -> the citeline modules that ``from module import name``."""
    found: dict[tuple[str, str], set[str]] = {}
    for path in sorted((ROOT / "citeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("citeline"):
                for alias in node.names:
                    found.setdefault((node.module, alias.name), set()).add(path.relative_to(ROOT).as_posix())
    return found


def patched_module_names(path: Path) -> list[tuple[int, str]]:
    """The ``module.name`` each ``X.setattr(module, "name", ...)`` of a test file patches, where ``module`` is a
    citeline module the file imported (``from MODULE import y``, ``import MODULE as y``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("citeline"):
            for alias in node.names:
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("citeline"):
                    modules[alias.asname or alias.name] = alias.name
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setattr"):
            continue
        if len(node.args) < 2:
            continue
        target, name = node.args[0], node.args[1]
        if isinstance(target, ast.Name) and target.id in modules and isinstance(name, ast.Constant):
            out.append((node.lineno, f"{modules[target.id]}.{name.value}"))
    return out


def test_no_patch_misses_a_module_that_imported_the_name_itself() -> None:
    by_name = imported_by_name()
    found = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for line, patched in patched_module_names(path):
            module, _, name = patched.rpartition(".")
            if (module, name) in by_name:
                found[(path.relative_to(ROOT).as_posix(), patched)] = (line, sorted(by_name[(module, name)]))
    unexplained = {key: value for key, value in found.items() if key not in ALLOWED}
    assert not unexplained, (
        "these patches miss the modules that imported the name themselves: patch the name where the code under "
        f"test looks it up (or allow it here, saying why): {unexplained}"
    )
    assert set(ALLOWED) <= set(found), "an allowed patch is gone: remove it from ALLOWED"


def test_the_lint_sees_a_patch_through_a_module_alias(tmp_path: Path) -> None:
    test = tmp_path / "test_x.py"
    test.write_text(
        "from citeline.store import documents as stored\n"
        "def test(monkeypatch):\n"
        "    monkeypatch.setattr(stored, 'documents_to_plan', None)\n"
    )
    assert patched_module_names(test) == [(3, "citeline.store.documents.documents_to_plan")]
    assert ("citeline.store.documents", "documents_to_plan") in imported_by_name()
