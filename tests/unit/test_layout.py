"""The layout rules of docs/architecture.md, checked on the source of ``citeline/`` and ``flows/`` together:

- no import cycle between modules (type-checking and function-level imports included);
- imports point one way, down the layers below (a package may import its own modules and anything in a lower
  layer, never a higher one): interfaces → query/ingest → store → lexical/vectors → sources/model → util;
- the library never imports ``flows`` (the Prefect entry points) or the CLI;
- one module renames index files into place;
- a module is imported under its own name (``from citeline.ingest import texts``, never ``... as texts_module``), in
  the tests and benchmarks too;
- no caller (the CLI, the flow, the server, the integrations) asks whether an index is sharded: it hands its
  placement to whatever index it opened, and asks the index's class what it would leave unused
  (``Index.front_class``, ``Index.unused_placement``).

There is no line cap: a cohesive module may be long.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = [*(ROOT / "citeline").rglob("*.py"), *(ROOT / "flows").rglob("*.py")]

#: Lowest first. A module's layer is its package's (``citeline.query.plan`` → ``citeline.query``), or its own for a
#: top-level module (``citeline.index``).
LAYERS: list[set[str]] = [
    {"citeline.errors", "citeline.util"},
    {"citeline.sources", "citeline.model"},
    {"citeline.lexical", "citeline.vectors"},
    {"citeline.store"},
    {"citeline.query", "citeline.ingest"},
    {"citeline.index"},
    {"citeline.sharding", "citeline.eval", "citeline.integrations"},
    {"citeline", "citeline.server", "citeline.orchestration"},
    {"citeline.cli"},
    {"flows"},
]
RANK = {group: rank for rank, groups in enumerate(LAYERS) for group in groups}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(path): path for path in FILES}


def _group(module: str) -> str:
    parts = module.split(".")
    return parts[0] if parts[0] == "flows" or len(parts) == 1 else ".".join(parts[:2])


def _imports(path: Path) -> set[str]:
    """citeline and flows modules ``path`` imports (``from citeline.query import plan`` counts as importing
    ``citeline.query.plan``; ``from citeline import __version__`` imports nothing that could make a cycle)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("citeline", "flows"):
            if node.module == "citeline" and [alias.name for alias in node.names] == ["__version__"]:
                continue
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & MODULES.keys()
            found |= submodules or {node.module}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in MODULES}
    return found


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def test_every_package_has_a_layer() -> None:
    assert {_group(name) for name in MODULES} - RANK.keys() == set()


def test_no_import_cycle() -> None:
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(name: str, trail: list[str]) -> None:
        state[name] = 1
        for target in sorted(GRAPH.get(name, ())):
            if target == "citeline":
                continue  # the package's public re-exports (citeline/__init__.py), checked by the layers below
            if state.get(target) == 1:
                cycles.append([*trail, name, target])
            elif target in GRAPH and not state.get(target):
                visit(target, [*trail, name])
        state[name] = 2

    for name in sorted(GRAPH):
        if not state.get(name):
            visit(name, [])
    assert cycles == []


def test_imports_point_down_the_layers() -> None:
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if _group(target) != _group(name) and RANK[_group(target)] > RANK[_group(name)]
    )
    assert upward == []


def test_the_library_never_imports_flows_or_the_cli() -> None:
    library = {name for name in MODULES if _group(name) not in ("flows", "citeline.cli")}
    offending = sorted(
        f"{name} -> {target}"
        for name in library
        for target in GRAPH[name]
        if _group(target) in ("flows", "citeline.cli")
    )
    assert offending == []


def test_only_store_files_renames_index_files_into_place() -> None:
    renaming = {name for name, path in MODULES.items() if "os.replace(" in path.read_text()}
    assert renaming <= {"citeline.store.files", "citeline.model.onnx"}  # model.onnx: the model cache, not the index


def test_modules_are_imported_under_their_own_names() -> None:
    files = [*FILES, *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    renamed = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                pairs = [(f"{node.module}.{alias.name}", alias.name, alias.asname) for alias in node.names]
            elif isinstance(node, ast.Import):
                pairs = [(alias.name, alias.name, alias.asname) for alias in node.names]
            else:
                continue
            renamed += [
                f"{path.relative_to(ROOT)}:{node.lineno} {module} as {alias}"
                for module, name, alias in pairs
                if module in MODULES and alias not in (None, name.split(".")[-1])
            ]
    assert renamed == []


#: What only the index layer knows: which layout a root has.
LAYOUT_NAMES = {"ShardedIndex", "SHARDS_MANIFEST", "marker_of", "layout_of"}
#: The callers of the library: they open an index and hand it their placement, whatever its kind.
CALLERS = ("citeline.cli", "citeline.orchestration", "citeline.server", "citeline.integrations", "flows")


def _names_used(path: Path) -> set[str]:
    """The names ``path``'s code uses, reads of attributes and imported names included (docstrings are not code)."""
    used = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.ImportFrom):
            used |= {alias.name for alias in node.names}
    return used


def test_no_caller_asks_whether_an_index_is_sharded() -> None:
    asking = sorted(
        f"{name}: {sorted(_names_used(path) & LAYOUT_NAMES)}"
        for name, path in MODULES.items()
        if _group(name) in CALLERS and _names_used(path) & LAYOUT_NAMES
    )
    assert asking == []
