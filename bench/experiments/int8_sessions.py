"""Variants of the int8 ONNX encoder's session and calling code, each encoding the same SciFact chunks one text at
a time (so a vector still depends on its text alone), alternating over rounds in one process (issue 33).

    python bench/experiments/int8_sessions.py [RECORDS] [TEXTS] [ROUNDS]

Chunks the first RECORDS SciFact abstracts (default 1,000), keeps TEXTS of the chunks (default 600, evenly
spaced) and encodes them with each variant ROUNDS times (default 2). Prints, per variant, the largest difference of
its vectors from the shipped encoder's, the smallest cosine, CPU-s and wall s of each round, and chunks per
CPU-second. Run by hand; not part of CI.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import onnxruntime as ort
from embed_window import alternate, print_times, scifact_chunks  # run as a script: bench/experiments is on sys.path
from tokenizers import Tokenizer

from citeline.model import onnx as ox
from citeline.model.embedding import SentenceTransformerEmbedder


def main() -> None:
    limit, count, rounds = (int(a) for a in (sys.argv[1:] + ["1000", "600", "2"][len(sys.argv) - 1 :])[:3])
    embedder = SentenceTransformerEmbedder(backend="onnx-int8")
    chunks = scifact_chunks(limit, embedder)
    texts = chunks[:: max(1, len(chunks) // count)][:count]
    export = ox.onnx_model_dir(embedder.model_path)
    embedder.prepare_query_encoder()
    mapped = ox.mapped_file(export / ox.onnx_file_name("onnx-int8"))
    level = ort.GraphOptimizationLevel

    def encoder(path: Any = None, opt: Any = level.ORT_DISABLE_ALL, tweak: Any = None, **kw: Any) -> ox.OnnxEncoder:
        """The shipped encoder, its session replaced when a variant asks for another file, level or option."""
        workers, intra = kw.pop("workers", None), kw.pop("intra", 1)
        enc = ox.OnnxEncoder(export, "onnx-int8", embedder.max_seq_length, workers=workers)
        if path is not None or tweak or intra != 1 or kw:
            options = ox._session_options(ort)
            options.intra_op_num_threads, options.graph_optimization_level = intra, opt
            if tweak:
                tweak(options)
            file = str(path or ox.model_file(export, "onnx-int8"))
            enc.session = ort.InferenceSession(file, options, providers=["CPUExecutionProvider"], **kw)
        return enc

    def single_tokenizer(enc: ox.OnnxEncoder) -> Callable[[list[str]], np.ndarray]:
        """``Tokenizer.encode`` of one text, no padding or batch arrays: the calling code at its leanest."""
        tokenizer = Tokenizer.from_file(str(export / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=embedder.max_seq_length)
        tokenizer.no_padding()  # tokenizer.json pads to 128 by itself

        def one(text: str) -> np.ndarray:
            ids = np.array(tokenizer.encode(text).ids, dtype=np.int64)[None]
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            pooled = enc.session.run(None, feeds)[0][0].mean(axis=0)
            return pooled / np.linalg.norm(pooled)

        pool = ThreadPoolExecutor(enc.workers)
        return lambda batch: np.stack(list(pool.map(one, batch)))

    extended = level.ORT_ENABLE_EXTENDED
    variants: dict[str, Callable[[list[str]], np.ndarray]] = {
        "shipped": encoder().encode,
        "Tokenizer.encode, no padding": single_tokenizer(encoder()),
        "no memory pattern": encoder(tweak=lambda o: setattr(o, "enable_mem_pattern", False)).encode,
        "no arena": encoder(tweak=lambda o: setattr(o, "enable_cpu_mem_arena", False)).encode,
        "mapped copy, ORT_ENABLE_ALL": encoder(mapped, level.ORT_ENABLE_ALL).encode,
        "1 worker x 2 threads": encoder(workers=1, intra=2).encode,
        "no SkipLayerNorm fusion": encoder(mapped, extended, disabled_optimizers=["SkipLayerNormFusion"]).encode,
    }
    reference = variants["shipped"](texts[:100])
    for name, encode in variants.items():
        vectors = encode(texts[:100])
        print(
            f"{name:30s} max |dv| {float(np.abs(vectors - reference).max()):.1e}, "
            f"min cosine {float((vectors * reference).sum(axis=1).min()):.5f}",
            flush=True,
        )
    times = alternate({name: (lambda encode=encode: encode(texts)) for name, encode in variants.items()}, rounds)
    print(f"{len(texts)} texts, load {os.getloadavg()[0]:.1f}")
    print_times(times, len(texts))


if __name__ == "__main__":
    main()
