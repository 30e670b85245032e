"""What a one-document commit costs on a large index (incremental commits), with a near-free embedder.

    python bench/incremental.py --chunks 100000 [--dimension 384] [--batch 50000] [--vector-index auto]
    python bench/incremental.py --chunks 1000000 --workdir W --build-only   # build once ...
    python bench/incremental.py --workdir COPY --skip-build                  # ... and time copies with any code

Builds an index of N synthetic chunks (two chunks a document, words drawn from SciFact's corpus vocabulary when
it is there) by committing catalog rows in batches straight through ``store.generation.commit`` (no chunker: its
cost is not what this measures), then times ``Index.ingest`` of a separate one-file root three times: the
document added, changed, removed (with ``allow_removals``). The build draws words and vectors with numpy (the
one-document edits go through the embedder). Each line: CPU seconds (this process) and wall seconds. Peak RSS is the
process's maximum. Run one size per process, so peak RSS is that size's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from conftest import HashEmbedder  # noqa: E402

from citeline import Index  # noqa: E402
from citeline.sources.parsers import text_hash  # noqa: E402
from citeline.store import generation, ledger  # noqa: E402
from citeline.store.locks import writer_lock  # noqa: E402
from citeline.store.rows import ChunkRows  # noqa: E402
from citeline.util.ids import chunk_id_for  # noqa: E402

SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact" / "corpus.jsonl"


class FastEmbedder(HashEmbedder):
    """Deterministic unit vectors seeded by the text's hash: about 10 µs a text."""

    model_name = "fast-random"
    fingerprint = "fast-random-v1"

    def __init__(self, dimension: int) -> None:
        super().__init__()
        self.dimension = dimension

    def encode(self, texts: Sequence[str], *, batch_size: int | None = 64) -> np.ndarray:
        rows = [np.random.default_rng(int(text_hash(t)[:15], 16)).standard_normal(self.dimension) for t in texts]
        vectors = np.array(rows, dtype=np.float32).reshape(-1, self.dimension)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-9)


def vocabulary() -> list[str]:
    if SCIFACT.exists():
        words: list[str] = []
        with SCIFACT.open() as handle:
            for line in handle:
                words.extend(json.loads(line)["text"].split())
                if len(words) > 400_000:
                    break
        return words  # repeated words keep their corpus frequencies
    return [f"w{n}" for n in range(30_000)]


def batch_changes(start: int, count: int, words: list[str], embedder: FastEmbedder, run_id: str) -> generation.Changes:
    rng = random.Random(start)
    picks = np.random.default_rng(start)
    vocabulary_array = np.asarray(words, dtype=object)
    now = ledger.utc_now()
    docs: dict[str, list] = {name: [] for name in ("doc_id", "source_id", "title", "text", "content_hash")}
    chunks: dict[str, list] = {
        name: [] for name in ("chunk_id", "doc_id", "ordinal", "char_start", "char_end", "text", "text_hash")
    }
    for number in range(start, start + count):
        parts = [" ".join(vocabulary_array[picks.integers(0, len(words), rng.randint(60, 140))]) for _ in range(2)]
        text = parts[0] + " " + parts[1]
        doc_id = hashlib.sha256(f"synthetic\0{number}".encode()).hexdigest()[:32]
        content_hash = text_hash(text)
        docs["doc_id"].append(doc_id)
        docs["source_id"].append(f"record-{number}")
        docs["title"].append(f"Record {number}")
        docs["text"].append(text)
        docs["content_hash"].append(content_hash)
        offset = 0
        for ordinal, part in enumerate(parts):
            chunks["chunk_id"].append(chunk_id_for(doc_id, content_hash, ordinal))
            chunks["doc_id"].append(doc_id)
            chunks["ordinal"].append(ordinal)
            chunks["char_start"].append(offset)
            chunks["char_end"].append(offset + len(part))
            chunks["text"].append(part)
            chunks["text_hash"].append(text_hash(part))
            offset += len(part) + 1
    n = len(docs["doc_id"])
    documents = pa.table(
        {
            "doc_id": docs["doc_id"],
            "source_root": ["/synthetic"] * n,
            "source_id": docs["source_id"],
            "source_file": ["corpus.jsonl"] * n,
            "path": ["/synthetic/corpus.jsonl"] * n,
            "title": docs["title"],
            "format": ["jsonl"] * n,
            "content_hash": docs["content_hash"],
            "text": docs["text"],
            "metadata": ["{}"] * n,
            "size_bytes": pa.array([0] * n, pa.int64()),
            "mtime": pa.array([0.0] * n, pa.float64()),
            "run_id": [run_id] * n,
            "ingested_at": pa.array([datetime.fromisoformat(now)] * n, type=pa.timestamp("ms", tz="UTC")),
        }
    )
    rows = ChunkRows(
        chunks["chunk_id"],
        chunks["doc_id"],
        chunks["ordinal"],
        chunks["char_start"],
        chunks["char_end"],
        chunks["text"],
        chunks["text_hash"],
        [None] * len(chunks["text"]),
        _unit(picks.standard_normal((len(chunks["text"]), embedder.dimension), dtype=np.float32)),
    )
    return generation.Changes([], documents, rows.to_arrow(run_id))


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-9)


def timed(label: str, action) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    cpu, wall = time.process_time(), time.perf_counter()
    action()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{label:<34} {cpu:8.2f} CPU-s {wall:8.2f} wall-s", flush=True)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--batch", type=int, default=50_000, help="chunks per build commit")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--vector-index", default="auto", help="the kind of a new index")
    parser.add_argument("--build-only", action="store_true", help="build the index and stop")
    parser.add_argument("--skip-build", action="store_true", help="time the edits on the index in --workdir")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="citeline-incremental-"))
    embedder = FastEmbedder(args.dimension)
    if args.skip_build:
        index = Index.open(workdir / "ix", embedder=embedder)
        time_edits(index, workdir)
        return
    index = Index.create(workdir / "ix", embedder=embedder, vector_index=args.vector_index)
    words = vocabulary()

    def build() -> None:
        for start in range(0, args.chunks // 2, args.batch // 2):
            run = ledger.RunSummary(ledger.new_run_id(), ledger.utc_now(), None, "succeeded", ["/synthetic"], None)
            changes = batch_changes(start, min(args.batch, args.chunks - 2 * start) // 2, words, embedder, run.run_id)
            with writer_lock(index.path):
                generation.commit(index.path, changes, run)

    print(f"{args.chunks:,} chunks, dimension {args.dimension}, index at {index.path}", flush=True)
    timed(f"build ({args.batch:,} chunks a commit)", build)
    if args.build_only:
        return
    time_edits(index, workdir)


def time_edits(index: Index, workdir: Path) -> None:
    """Time a one-document add, change and removal, and verify; print peak RSS."""
    print(f"{len(index.snapshot().vectors):,} vectors at {index.path}", flush=True)
    root = workdir / "one"
    root.mkdir(exist_ok=True)
    note = root / "note.md"
    note.write_text("# A note\n\nThe garrison left the river bridge at dawn.\n")
    timed("one document added", lambda: index.ingest([root]))
    note.write_text("# A note\n\nThe garrison left the river bridge at dusk, and the harvest failed.\n")
    timed("one document changed", lambda: index.ingest([root]))
    note.unlink()
    timed("one document removed", lambda: index.ingest([root], allow_removals=True))
    timed("verify", lambda: index.verify())
    segments = sorted(p.name for p in index.path.glob("seg.*")) + sorted(p.name for p in index.path.glob("v*.*"))
    print(f"segments {segments}; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    main()
