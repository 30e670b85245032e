"""The layout rules of docs/architecture.md, checked on the source: no import cycle inside citeline/ (type-checking
imports included), no module over 500 lines, Index at most 300, and one module that renames index files."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "citeline"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(path): path for path in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """citeline modules ``path`` imports (``from citeline import x`` counts as importing ``citeline.x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("citeline"):
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & MODULES.keys()
            found |= submodules or {node.module}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in MODULES}
    return found


def test_no_import_cycle_inside_citeline() -> None:
    graph = {name: _imports(path) - {name} for name, path in MODULES.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph.get(name, ())):
            if target == "citeline":
                continue  # the package's public re-exports (citeline/__init__.py), not a module-level cycle
            if state.get(target) == 1:
                cycles.append([*trail, name, target])
            elif target in graph and not state.get(target):
                visit(target, [*trail, name])
        state[name] = 2

    for name in sorted(graph):
        if not state.get(name):
            visit(name, [])
    assert cycles == []


def test_module_sizes() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {name: size for name, size in sizes.items() if size > 500} == {}
    assert sizes["citeline.index"] <= 300


def test_only_store_files_renames_index_files_into_place() -> None:
    renaming = {name for name, path in MODULES.items() if "os.replace(" in path.read_text()}
    assert renaming <= {"citeline.store.files", "citeline.onnx_models"}  # onnx_models: the model cache, not the index
