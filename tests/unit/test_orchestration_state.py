"""Orchestration flips no process globals (issue 41.6): a flow run's settings and reporter reach its tasks as
parameters or through a context variable set for one call, never through module-level state the flow writes. Two
flow runs in one process (two threads, or a CLI run beside a served one) would otherwise share them, and Dask pickles
the module globals a flow or task names with it.

Checked on the source of ``citeline/orchestration/``: no ``global`` statement, and no module-level container (a dict,
list or set) that a function writes (an item set or deleted, or a mutating method called), but the caches named below,
each with the reason it is process-wide. Tables built once at import (the parameters' declarations) are not state.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ORCHESTRATION = Path(__file__).resolve().parents[2] / "citeline" / "orchestration"
MODULES = sorted(ORCHESTRATION.glob("*.py"))

#: Module-level containers meant to be process-wide.
PROCESS_CACHES = {
    # One Index (one loaded model) per index path and process: Dask workers keep theirs across batches and runs.
    "_open_indexes",
}
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add", "discard"}


def _mutable(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("dict", "list", "set")


def _containers(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and _mutable(node.value):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and _mutable(node.value) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _written_in_functions(tree: ast.Module) -> set[str]:
    written = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
                target = node.value
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                target = node.func.value
            else:
                continue
            if isinstance(target, ast.Name):
                written.add(target.id)
    return written


TREES = {path.name: ast.parse(path.read_text()) for path in MODULES}
CONTAINERS = set().union(*(_containers(tree) for tree in TREES.values()))


@pytest.mark.parametrize("name", sorted(TREES))
def test_no_module_state_that_a_flow_flips(name: str) -> None:
    tree = TREES[name]
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Global)], f"{name}: a global statement"
    flipped = (_written_in_functions(tree) & CONTAINERS) - PROCESS_CACHES
    assert not flipped, f"{name} writes module-level state: {sorted(flipped)}"


def test_the_check_sees_a_flipped_flag() -> None:
    tree = ast.parse("FLAG = {'on': False}\ndef run():\n    FLAG['on'] = True\n    SEEN.pop('x', None)\nSEEN = {}\n")
    assert _written_in_functions(tree) & _containers(tree) == {"FLAG", "SEEN"}


def test_a_terminal_bar_is_drawn_only_by_runs_started_in_its_block() -> None:
    import threading

    from citeline.orchestration.reporting import drawing_terminal_bar, wants_terminal_bar

    elsewhere: list[bool] = []
    with drawing_terminal_bar():
        assert wants_terminal_bar()
        other = threading.Thread(target=lambda: elsewhere.append(wants_terminal_bar()))
        other.start()
        other.join()
    assert elsewhere == [False] and not wants_terminal_bar()
