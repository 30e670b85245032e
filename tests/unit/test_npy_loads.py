"""Every .npy read goes through ``citeline.util.arrays.load_npy``: numpy parses a .npy header with
``ast.literal_eval``, which CPython 3.11 cannot run in two threads at once (python/cpython#106905: ``SystemError: AST
constructor recursion depth mismatch``, seen once in a sharded removal, whose shards load segments in threads)."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from citeline.util.arrays import load_npy

CITELINE = Path(__file__).resolve().parents[2] / "citeline"


def test_no_module_but_the_arrays_helper_calls_np_load() -> None:
    calling = []
    for path in sorted(CITELINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "load"
                and getattr(node.value, "id", "") in {"np", "numpy"}
            ):
                calling.append(f"{path.relative_to(CITELINE.parent)}:{node.lineno}")
    assert [where.split(":")[0] for where in calling] == ["citeline/util/arrays.py"], calling


def test_threads_load_arrays_at_once(tmp_path: Path) -> None:
    # Many threads read headers at once, memory-mapped and whole, as a sharded run's shards do: every array comes back
    # whole. (Nothing here parses Python in a thread besides the loads: two unguarded ``ast.parse`` calls in threads
    # are the interpreter's race itself, which the lock cannot prevent and this test once reproduced.)
    arrays = {n: np.arange(n * 7, dtype=np.int64) for n in range(1, 17)}
    for n, values in arrays.items():
        np.save(tmp_path / f"{n}.npy", values, allow_pickle=False)

    def read(n: int) -> bool:
        mapped = load_npy(tmp_path / f"{n}.npy", mmap_mode="r")
        whole = load_npy(tmp_path / f"{n}.npy")
        return bool(np.array_equal(mapped, arrays[n]) and np.array_equal(whole, arrays[n]))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(read, [n for _ in range(20) for n in arrays]))
