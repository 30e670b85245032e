"""The query path stays light: a `citeline search` process imports no torch, transformers, Prefect, bm25s, scipy or
pandas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from citeline import Index

pytestmark = pytest.mark.slow

HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "prefect",
    "optimum",
    # The analyzer no longer imports bm25s (whose package imports scipy.sparse: about 0.7 CPU-s); pyarrow imported
    # pandas where installed (0.35-0.45 CPU-s); numba came with bm25s; the server's and the flow's stacks.
    "bm25s",
    "scipy",
    "pandas",
    "numba",
    "fastapi",
    "uvicorn",
    "pydantic",
    "rich",
    "onnx",
)

# Runs the console script's entry point in a fresh interpreter, then reports which heavy packages got imported.
PROBE = """
import json, sys
from citeline.cli.main import main
index, heavy_names = sys.argv[1], set(sys.argv[2].split(","))
sys.argv = ["citeline", "search", "wages of soldiers", "--index", index, "--json"]
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & heavy_names)
# numpy.ma: np.unique imports it (0.03 CPU-s); the query path uses citeline.util.arrays.unique instead.
heavy += sorted({"numpy.ma"} & set(sys.modules))
print("HEAVY " + json.dumps(heavy))
"""


@pytest.mark.parametrize("backend", ["torch", "onnx-int8"])
def test_cli_search_imports_nothing_heavy(tmp_path: Path, backend: str) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "letters.txt").write_text("Letters home\n\nThe soldiers wrote home about their wages and the post.\n")
    Index.create(tmp_path / "index", backend=backend).ingest([docs])
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "index"), ",".join(HEAVY)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    lines = done.stdout.splitlines()
    assert json.loads(lines[0])["source_path"].endswith("letters.txt")
    assert lines[-1] == "HEAVY []", done.stderr
