"""A search that must fall back to the torch model says why, once (issue 15: a silent 15 s fallback)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from citeline.model.embedding import SentenceTransformerEmbedder


def test_torch_fallback_without_an_onnx_export_warns_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITELINE_CACHE", str(tmp_path / "empty-cache"))  # no export there
    embedder = SentenceTransformerEmbedder(backend="torch")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert embedder.query_encoder is embedder
        assert embedder.query_encoder is embedder  # cached: said once
    messages = [str(w.message) for w in caught if "no ONNX query model" in str(w.message)]
    assert len(messages) == 1 and "prepare_queries" in messages[0]
