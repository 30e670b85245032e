"""Embedding backends with the real bundled model: ONNX exports and the torch-free query encoder."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from citeline.model import embedding
from citeline.model.embedding import (
    OnnxEncoder,
    SentenceTransformerEmbedder,
    ensure_onnx_model,
    mapped_file,
    model_file,
    onnx_file_name,
    onnx_model_dir,
    optimized_file,
    write_mapped_copy,
)

pytestmark = pytest.mark.slow

TEXTS = [
    "soldiers fear for their families",
    "We were not afraid of the enemy across the river.",
    "A much longer passage " + "about wages, letters and the post office, " * 40,
    "Ünïcödé, 日本語のテキスト, and emoji 🙂",
]


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return SentenceTransformerEmbedder(backend="torch").encode(TEXTS)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_torch_vectors_are_unit_length(torch_vectors: np.ndarray) -> None:
    assert torch_vectors.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(torch_vectors, axis=1), 1.0, atol=1e-5)


def test_torch_batches_sized_by_tokens_give_the_vectors_of_one_text_at_a_time(
    torch_vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A budget this small cuts the texts into batches of different sizes (the long one alone); the vectors come
    # back in the texts' order and equal to float32 rounding those of each text encoded alone.
    monkeypatch.setattr(embedding, "TORCH_TOKEN_BUDGET", 40)
    texts = [*TEXTS, "short", "soldiers fear for their families again and again, and write home"]
    embedder = SentenceTransformerEmbedder(backend="torch")
    lengths = [len(ids) for ids in embedder.model.tokenizer(texts, truncation=True, max_length=256)["input_ids"]]
    assert len({len(batch) for batch in embedding.token_batches(lengths, 40)}) > 1
    budgeted = embedder.encode(texts)
    alone = np.concatenate([embedder.encode([text], batch_size=1) for text in texts])
    np.testing.assert_allclose(budgeted, alone, atol=1e-5)
    np.testing.assert_allclose(budgeted[: len(TEXTS)], torch_vectors, atol=1e-5)


def test_onnx_query_encoder_matches_sentence_transformers_torch(torch_vectors: np.ndarray) -> None:
    embedder = SentenceTransformerEmbedder(backend="torch")
    export_dir = ensure_onnx_model(embedder.model_path, "onnx")
    assert export_dir == onnx_model_dir(embedder.model_path)
    direct = OnnxEncoder(export_dir, "onnx", embedder.max_seq_length).encode(TEXTS)
    assert cosines(direct, torch_vectors).min() >= 0.9999


def test_onnx_backend_through_sentence_transformers_matches_torch(torch_vectors: np.ndarray) -> None:
    onnx_vectors = SentenceTransformerEmbedder(backend="onnx").encode(TEXTS)
    assert cosines(onnx_vectors, torch_vectors).min() >= 0.9999


def test_int8_query_encoder_matches_the_int8_document_encoder(torch_vectors: np.ndarray) -> None:
    embedder = SentenceTransformerEmbedder(backend="onnx-int8")
    documents = embedder.encode(TEXTS)
    queries = embedder.query_encoder.encode(TEXTS)
    assert isinstance(embedder.query_encoder, OnnxEncoder)
    assert cosines(queries, documents).min() >= 0.9999
    # Quantization moves vectors a little, not far.
    assert cosines(documents, torch_vectors).min() >= 0.95


def test_backends_have_distinct_fingerprints() -> None:
    prints = {SentenceTransformerEmbedder(backend=b).fingerprint for b in ("torch", "onnx", "onnx-int8")}
    assert len(prints) == 3


def test_direct_int8_encoder_matches_sentence_transformers_onnx_int8() -> None:
    """The torch-free encoder computes what sentence-transformers computes with the same int8 ONNX file."""
    from sentence_transformers import SentenceTransformer

    embedder = SentenceTransformerEmbedder(backend="onnx-int8")
    export_dir = ensure_onnx_model(embedder.model_path, "onnx-int8")
    reference = SentenceTransformer(
        str(export_dir),
        backend="onnx",
        local_files_only=True,
        model_kwargs={"file_name": onnx_file_name("onnx-int8"), "provider": "CPUExecutionProvider"},
    )
    # One text per batch, as citeline runs it: int8 activation scales are per batch.
    expected = reference.encode(TEXTS, batch_size=1, normalize_embeddings=True)
    assert cosines(embedder.encode(TEXTS), expected).min() >= 0.9999


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_threaded_encoding_is_identical_to_single_threaded_and_in_order(backend: str) -> None:
    embedder = SentenceTransformerEmbedder(backend=backend)
    export_dir = ensure_onnx_model(embedder.model_path, backend)
    texts = [f"{text} ({i})" for i in range(6) for text in TEXTS]
    single = OnnxEncoder(export_dir, backend, embedder.max_seq_length, workers=1).encode(texts)
    threaded = OnnxEncoder(export_dir, backend, embedder.max_seq_length, workers=3)
    assert np.array_equal(single, threaded.encode(texts))
    # Each vector is the text's own, whatever else was encoded with it (queries are encoded alone).
    alone = np.concatenate([threaded.encode([text]) for text in texts[:4]])
    assert np.array_equal(alone, single[:4])


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_the_memory_mapped_and_optimized_copies_give_the_exports_vectors(tmp_path: Path, backend: str) -> None:
    embedder = SentenceTransformerEmbedder(backend=backend)
    embedder.prepare_query_encoder()  # what every ingestion ends with: the export and the copies that start fast
    export_dir = onnx_model_dir(embedder.model_path)
    exported = export_dir / onnx_file_name(backend)
    assert model_file(export_dir, backend) == optimized_file(exported)
    for copy in (mapped_file(exported), optimized_file(exported)):
        assert copy.stat().st_size < exported.stat().st_size // 10  # the graph; weights beside it
    plain = tmp_path / "plain"
    shutil.copytree(export_dir, plain, ignore=shutil.ignore_patterns("*.mapped.onnx*", "*.optimized-*"))
    assert model_file(plain, backend) == plain / onnx_file_name(backend)
    expected = OnnxEncoder(plain, backend, embedder.max_seq_length, workers=1).encode(TEXTS)
    # A crash between the two renames leaves a stray weights file: the next write replaces it.
    (plain / "onnx" / (mapped_file(exported).name + ".data")).write_bytes(b"torn")
    mapped_only = tmp_path / "mapped-only"
    write_mapped_copy(plain, backend)
    assert model_file(plain, backend) == optimized_file(plain / onnx_file_name(backend))
    shutil.copytree(plain, mapped_only, ignore=shutil.ignore_patterns("*.optimized-*"))
    assert model_file(mapped_only, backend) == mapped_file(mapped_only / onnx_file_name(backend))
    for folder in (export_dir, plain, mapped_only):  # the optimized graph, loaded unoptimized: the same vectors
        assert np.array_equal(OnnxEncoder(folder, backend, embedder.max_seq_length, workers=1).encode(TEXTS), expected)
