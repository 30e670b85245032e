"""The backend of a new index is the fastest that keeps quality (issue 33): int8 ONNX where the CPU has the
instructions its kernels are quantized for, else fp32 ONNX; an index keeps the backend it was built with."""

from __future__ import annotations

from pathlib import Path

import pytest

from citeline import Index
from citeline.model import embedding


@pytest.mark.parametrize(
    ("target", "machine", "expected"),
    [
        ("avx512_vnni", "x86_64", "onnx-int8"),
        ("avx2", "x86_64", "onnx-int8"),
        ("arm64", "aarch64", "onnx-int8"),
        ("arm64", "x86_64", "onnx"),  # an x86 CPU without AVX2: no kernels quantized for it
    ],
)
def test_default_backend_follows_the_cpu(monkeypatch: pytest.MonkeyPatch, target: str, machine: str, expected: str):
    monkeypatch.setattr(embedding, "quantization_target", lambda: target)
    monkeypatch.setattr("platform.machine", lambda: machine)
    assert embedding.default_backend() == expected


def test_a_new_index_takes_the_default_and_a_torch_index_keeps_torch(tmp_path: Path) -> None:
    assert Index.create(tmp_path / "new").meta["backend"] == embedding.default_backend()
    Index.create(tmp_path / "torch", backend="torch")
    assert Index.create(tmp_path / "torch").meta["backend"] == "torch"
    assert Index.open(tmp_path / "torch").embedder.backend == "torch"  # type: ignore[attr-defined]
