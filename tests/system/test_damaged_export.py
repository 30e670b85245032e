"""A damaged ONNX export in the model cache is exported again by the next search, in a venv where pandas is installed
(transformers, which the re-export imports, probes for pandas: no import-system trick may break that)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from citeline import Index
from citeline.model import embedding

pytestmark = pytest.mark.slow


def search(index: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "citeline.cli.main", "search", "river levee", "--index", str(index)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_search_recovers_from_a_damaged_export_with_pandas_installed(tmp_path: Path, seeds_dir: Path) -> None:
    assert importlib.util.find_spec("pandas") is not None, "the dev extras install pandas (ranx)"
    model_path = embedding.resolve_model_path(embedding.DEFAULT_MODEL)
    machine_export = embedding.onnx_model_dir(model_path)
    env = {**os.environ, "CITELINE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(Path.cwd())}
    os.environ["CITELINE_CACHE"] = env["CITELINE_CACHE"]
    try:
        export = embedding.onnx_model_dir(model_path)
        if (machine_export / "onnx" / "model.onnx").exists():  # exporting takes a while: start from the machine's
            shutil.copytree(machine_export, export)
        Index.create(tmp_path / "index", backend="onnx").ingest([seeds_dir])
    finally:
        del os.environ["CITELINE_CACHE"]
    exported = export / "onnx" / "model.onnx"
    damaged = [exported, *exported.parent.glob("model.*.onnx"), *exported.parent.glob("model.*.onnx.data")]
    for file in damaged:  # the export and its fast-starting copies: an interrupted copy of each
        file.write_bytes(file.read_bytes()[: file.stat().st_size // 3])
    first = search(tmp_path / "index", env)
    assert first.returncode == 0, first.stderr
    assert len(first.stderr.splitlines()) <= 1, first.stderr
    assert "does not load" in first.stderr and "Traceback" not in first.stderr
    assert "levee" in first.stdout.lower()
    second = search(tmp_path / "index", env)
    assert second.returncode == 0 and second.stderr == "", second.stderr
    assert second.stdout == first.stdout
