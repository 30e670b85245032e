"""The Prefect flow's ``encoding`` parameter: a flow run reads the unmarked, non-UTF-8 files in it, re-reading the
unchanged files whose reading it changes, as ``citeline ingest --encoding`` does (tests/index/test_encodings.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_flows import prefect_api  # noqa: F401  (the module's Prefect server fixture)

from citeline import Index

CZECH = "Večer půjdeme do divadla."


def test_the_flow_reads_with_its_encoding_parameter(
    prefect_api: str,  # noqa: F811
    tmp_path: Path,
    fake_embedder: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from conftest import HashEmbedder

    from citeline.orchestration.ingest import ingest_flow

    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "czech.txt").write_bytes(CZECH.encode("cp1250"))
    (docs / "plain.txt").write_text("Ferries cross the river at dawn.", encoding="utf-8")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([docs])  # detection's close call: read as Windows-1252
    summary = ingest_flow(paths=[str(docs)], index_path=str(index.path), encoding="cp1250")
    assert (summary["status"], summary["updated"], summary["unchanged"]) == ("succeeded", 1, 1)
    (czech,) = [d for d in Index.open(index.path).documents() if d.source_id == "czech.txt"]
    assert czech.encoding == "cp1250" and Index.open(index.path).document(czech.doc_id).text == CZECH
    with pytest.raises(ValueError, match="unknown encoding"):
        ingest_flow(paths=[str(docs)], index_path=str(index.path), encoding="cp9999")
