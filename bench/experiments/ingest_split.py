"""Where an ingest's CPU goes: the model's encode calls against everything else (parsing, chunking, DuckDB, BM25
segments, vectors, commits), issue 33.

    python bench/experiments/ingest_split.py CORPUS [real|null] [BACKEND] [PROFILE_OUT]

Ingests CORPUS (a file or folder) into a new temporary index with BACKEND's embedder (default: the default
backend), its model loaded before the clock starts, and prints one JSON line: the process's CPU-s (user + sys,
getrusage) and wall s of ``Index.create`` + ``Index.ingest``, the CPU-s and wall s spent inside the embedder's
``encode`` calls, and the rest. ``null`` replaces the model by random unit vectors (what the rest costs without the
model, on the same chunks). With PROFILE_OUT, cProfile on a CPU clock (``time.process_time``) writes its stats
there. Run by hand, also on older trees (``PYTHONPATH=TREE``); not part of CI.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from citeline import Index
from citeline.model.embedding import SentenceTransformerEmbedder, default_backend


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    corpus = Path(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "real"
    backend = sys.argv[3] if len(sys.argv) > 3 else default_backend()
    profile_out = sys.argv[4] if len(sys.argv) > 4 else None
    embedder = SentenceTransformerEmbedder(backend=backend)
    embedder.encode(["warm up"])
    spent = {"cpu": 0.0, "wall": 0.0, "texts": 0}
    model_encode = embedder.encode

    def encode(texts: Sequence[str], *, batch_size: int | None = None) -> np.ndarray:
        before, wall = cpu(), time.perf_counter()
        if mode == "real":
            vectors = model_encode(texts, batch_size=batch_size)
        else:
            vectors = np.random.default_rng(len(texts)).standard_normal((len(texts), embedder.dimension))
            vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
        spent["cpu"] += cpu() - before
        spent["wall"] += time.perf_counter() - wall
        spent["texts"] += len(texts)
        return vectors

    embedder.encode = encode  # type: ignore[method-assign]
    folder = Path(tempfile.mkdtemp())
    try:
        profile = None
        if profile_out:
            import cProfile

            profile = cProfile.Profile(time.process_time)
            profile.enable()
        before, wall = cpu(), time.perf_counter()
        run = Index.create(folder / "index", embedder=embedder).ingest([corpus])
        total, wall = cpu() - before, time.perf_counter() - wall
        if profile is not None:
            profile.disable()
            profile.dump_stats(profile_out)
    finally:
        shutil.rmtree(folder)
    print(
        json.dumps(
            {
                "mode": mode,
                "backend": backend,
                "chunks": run.chunks_embedded,
                "cpu_s": round(total, 2),
                "wall_s": round(wall, 2),
                "encode_cpu_s": round(spent["cpu"], 2),
                "encode_wall_s": round(spent["wall"], 2),
                "rest_cpu_s": round(total - spent["cpu"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
