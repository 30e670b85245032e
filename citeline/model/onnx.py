"""The model's files on disk and the torch-free encoder that runs them: the fingerprint of a model folder, the
ONNX export cache (exported, quantized, and the copies that start fast: weights memory-mapped, graph optimized
offline) and :class:`OnnxEncoder` (onnxruntime and tokenizers alone). ``citeline.model.embedding`` builds on it.
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
from typing import Any, TypeVar

import numpy as np

from citeline.errors import CitelineError

T = TypeVar("T")


def model_fingerprint(model_path: str, backend: str) -> str:
    """A short hash that changes when the model's configuration, tokenizer, weights or backend change.

    The weights are identified by size and their first and last megabyte rather than a full hash, so that
    opening an index to search it does not read the whole weights file.
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
    """Where exported ONNX models are kept, one export per model shared by every index of the user:
    ``$CITELINE_CACHE``, else ``$XDG_CACHE_HOME/citeline``, else ``~/.cache/citeline`` (the XDG default)."""
    if os.environ.get("CITELINE_CACHE"):
        return Path(os.environ["CITELINE_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec: a relative path is invalid and is ignored.
    return (Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "citeline"


def quantization_target() -> str:
    """The instruction set int8 kernels are quantized for, read from this CPU's flags."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    for flag, instruction_set in (("avx512_vnni", "avx512_vnni"), ("avx512f", "avx512"), ("avx2", "avx2")):
        if flag in flags:
            return instruction_set
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
    instead of parsing them out of the protobuf: a cold session costs a third of the CPU and less memory (figures:
    docs/performance.md#choices-measured-in-the-code). Outputs are bit-identical."""
    return model_file.with_name(model_file.stem + ".mapped.onnx")


def optimized_file(model_file: Path) -> Path:
    """The copy of an exported ONNX file whose graph onnxruntime optimized once (``ORT_ENABLE_EXTENDED``, the
    portable fusions) and saved with its weights in ``<copy>.data``, the MatMul weights already packed for this
    CPU's kernels: a session then skips the optimizer (``ORT_DISABLE_ALL``) and the packing, for a cheaper cold
    session (docs/performance.md#choices-measured-in-the-code). Outputs bit-identical to the memory-mapped copy's
    (tested). Packing depends on the CPU's instruction set, so it is in the name (a cache moved to another CPU
    writes its own copy)."""
    return model_file.with_name(f"{model_file.stem}.optimized-{quantization_target()}.onnx")


def model_file(export_dir: Path, backend: str) -> Path:
    """The ONNX file an :class:`OnnxEncoder` loads: the optimized copy once written, else the memory-mapped copy,
    else the export itself."""
    exported = export_dir / onnx_file_name(backend)
    for copy in (optimized_file(exported), mapped_file(exported)):
        if copy.exists():
            return copy
    return exported


def write_mapped_copy(export_dir: Path, backend: str) -> None:
    """Write :func:`mapped_file` and :func:`optimized_file` of a backend's export unless they exist, under the
    export's lock. The weights are fsynced and renamed into place before the graph naming them: a graph in place
    always has its weights."""
    exported = export_dir / onnx_file_name(backend)
    mapped, optimized = mapped_file(exported), optimized_file(exported)
    with open(export_dir.parent / f"{export_dir.name}.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if not exported.exists():
            return
        if not mapped.exists():
            _write_copy(exported, mapped, _save_mapped)
        if not optimized.exists():
            _write_copy(exported, optimized, lambda _, destination: _save_optimized(mapped, destination))
        # Releases before the instruction set was in the name wrote ``<stem>.optimized.onnx``: unused since.
        stale = exported.with_name(f"{exported.stem}.optimized.onnx")
        for path in (stale, stale.with_name(stale.name + ".data")):
            path.unlink(missing_ok=True)


def _save_mapped(exported: Path, destination: Path) -> None:
    import onnx

    graph = onnx.load(str(exported))
    onnx.save_model(graph, str(destination), save_as_external_data=True, location=destination.name + ".data")


def _save_optimized(source: Path, output: Path) -> None:
    import onnxruntime

    options = _session_options(onnxruntime)
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(output)
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", output.name + ".data")
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    options.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    onnxruntime.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])


def _write_copy(exported: Path, final: Path, save: Callable[[Path, Path], None]) -> None:
    """``save(exported, staged)`` in a staging folder beside ``final``, then the weights and the graph fsynced and
    renamed into place, weights first."""
    staging = Path(tempfile.mkdtemp(prefix=".copy-", dir=final.parent))
    try:
        staged = staging / final.name
        save(exported, staged)
        for name in (final.name + ".data", final.name):
            with open(staging / name, "rb") as handle:
                os.fsync(handle.fileno())
            shutil.copymode(exported, staging / name)  # onnx writes the weights 0600
            os.replace(staging / name, final.parent / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _session_options(onnxruntime: Any) -> Any:
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return options


def ensure_onnx_model(model_path: str, backend: str, *, damaged: bool = False) -> Path:
    """Export the model to ONNX (and quantize it for int8) on first use; returns the export folder.

    Uses sentence-transformers' own ONNX export (optimum) from the local model files, under a file lock so two
    processes do not export at once; the export is written to a temporary folder and renamed into place.
    ``damaged=True`` (the cached export would not load) throws the cached export away and exports again.
    """
    export_dir = onnx_model_dir(model_path)
    if not damaged and (export_dir / onnx_file_name(backend)).exists():
        return export_dir
    export_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(export_dir.parent / f"{export_dir.name}.lock", "a+") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if damaged and export_dir.exists():
            shutil.rmtree(export_dir)  # another process may have re-exported meanwhile: once more costs only time
        if (export_dir / onnx_file_name(backend)).exists():
            return export_dir
        quiet_transformers()
        if not damaged:
            # Said once: the export is cached for every index of this user (measured in docs/performance.md). A
            # re-export of a damaged cache is said by load_onnx's one warning line instead.
            logging.getLogger("citeline.model").warning(
                "citeline: exporting the model %s to ONNX%s, once for every index of this user (cached in %s)",
                model_path,
                f" and quantizing it to int8 for {quantization_target()}" if backend == "onnx-int8" else "",
                export_dir.parent,
            )
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=export_dir.parent))
        st_logger = logging.getLogger("sentence_transformers")
        level = st_logger.level
        # The exporter's tracer warnings and "save the export" advice are noise here: citeline saves it.
        st_logger.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _export(model_path, backend, export_dir, staging)
            if export_dir.exists():
                shutil.rmtree(export_dir)
            os.replace(staging, export_dir)
        finally:
            st_logger.setLevel(level)
            shutil.rmtree(staging, ignore_errors=True)
    return export_dir


def load_onnx(model_path: str, backend: str, export_dir: Path, load: Callable[[Path], T]) -> T:
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


def _export(model_path: str, backend: str, export_dir: Path, staging: Path) -> None:
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    if (export_dir / "onnx" / "model.onnx").exists():
        # The fp32 export exists: quantize it rather than exporting again.
        shutil.copytree(export_dir, staging, dirs_exist_ok=True)
        model = SentenceTransformer(
            str(staging), backend="onnx", local_files_only=True, model_kwargs={"file_name": "onnx/model.onnx"}
        )
    else:
        model = SentenceTransformer(model_path, backend="onnx", local_files_only=True)
        model.save_pretrained(str(staging))
    if backend == "onnx-int8":
        # The file name is citeline's, not the exporter's default: that default is named after the weights' dtype,
        # which optimum releases change (qint8 in some, quint8 in others), and onnx_file_name must find the file.
        cpu = quantization_target()
        export_dynamic_quantized_onnx_model(model, cpu, str(staging), file_suffix=f"qint8_{cpu}")


def quiet_transformers() -> None:
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
    on two single-threaded workers embeds nearly twice the chunks a second of one worker with two intra-op
    threads (docs/performance.md#choices-measured-in-the-code): a single
    short sequence is too small a job to split across cores. A text's vector is computed by the same
    single-threaded kernels whichever worker runs it, so vectors do not depend on ``workers`` (tested).
    """

    def __init__(self, export_dir: Path, backend: str, max_seq_length: int, *, workers: int | None = None):
        import onnxruntime
        from tokenizers import Tokenizer

        options = _session_options(onnxruntime)
        path = model_file(export_dir, backend)
        if path == optimized_file(export_dir / onnx_file_name(backend)):
            # Optimized when it was written: the same graph, without optimizing it again at every start.
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
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
