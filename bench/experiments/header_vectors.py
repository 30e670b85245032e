"""Chunk vectors of an index re-made with contextual chunk headers, without re-ingesting (for bench/tune_quality.py).

    python bench/experiments/header_vectors.py --index /tmp/quality/base \
        --out /tmp/quality/header-vectors.npy [--backend onnx]

Reads every chunk of an index built with ``embed_text = "chunk"`` and its document's title, and encodes
``citeline.model.chunking.embed_text(title, chunk)`` only where that differs from the chunk text (on SciFact the first
chunk of a document already starts with its title, so only later chunks change); the other vectors are the index's
own. Writes the vectors in chunk-id order (``catalog.lexical_texts``' order). ``--backend onnx`` encodes with the
fp32 ONNX export of the model (vectors within cosine 0.9999 of torch's, tested in tests/test_embedding.py) at
about a third of torch's CPU time; the shipped figures are checked with ``citeline eval`` on a real index.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path

import numpy as np

from citeline import Index
from citeline.model.chunking import embed_text
from citeline.model.embedding import SentenceTransformerEmbedder
from citeline.store import catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--backend", default="onnx")
    args = parser.parse_args()
    index = Index.open(args.index)
    with contextlib.closing(catalog.connect(args.index, read_only=True)) as connection:
        rows = connection.execute(
            "SELECT c.chunk_id, c.text, coalesce(d.title, '') FROM chunks c JOIN documents d USING (doc_id) "
            "ORDER BY c.chunk_id"
        ).fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    vectors = index.snapshot().vectors.vectors(ids).copy()
    changed = [i for i, (_, text, title) in enumerate(rows) if embed_text(title.strip(), text) != text]
    texts = [embed_text(rows[i][2].strip(), rows[i][1]) for i in changed]
    print(f"{len(rows)} chunks, {len(changed)} get a header; encoding with {args.backend}", flush=True)
    wall, cpu = time.perf_counter(), time.process_time()
    embedder = SentenceTransformerEmbedder(index.meta["model"], backend=args.backend)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    encoded = embedder.encode([texts[i] for i in order])
    for slot, i in enumerate(order):
        vectors[changed[i]] = encoded[slot]
    np.save(args.out, vectors, allow_pickle=False)
    print(f"encoded in {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s", flush=True)


if __name__ == "__main__":
    main()
