"""What ``document_vectors`` costs at ingest and at search, before/after in one run:

    python bench/experiments/tune_document_vectors_cost.py --beir ../shared/benchmarks/scifact --documents 300 \\
        --backend onnx-int8 --work /tmp/qual3/cost

Ingest: the first N records of the corpus into two new indexes with the same (already loaded) model, one
without and one with document vectors, alternating which goes first; CPU seconds of the process (every thread)
and wall seconds, and how many texts were encoded. Search p50 is timed by bench/tune_library.py --p50.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from citeline import Index
from citeline.model.embedding import SentenceTransformerEmbedder


class Counting:
    """The embedder, counting texts and their characters (what an encode call costs grows with both)."""

    def __init__(self, inner: SentenceTransformerEmbedder):
        self.inner, self.texts, self.chars = inner, 0, 0

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)

    def __dir__(self):  # type: ignore[no-untyped-def]
        # the delegated names too: an index checks an embedder's members by name (citeline.util.protocols)
        return [*super().__dir__(), *dir(self.inner)]

    def encode(self, texts, **kwargs):  # type: ignore[no-untyped-def]
        self.texts += len(texts)
        self.chars += sum(len(t) for t in texts)
        return self.inner.encode(texts, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--backend", default="onnx-int8")
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    corpus = args.work / "corpus.jsonl"
    with (args.beir / "corpus.jsonl").open(encoding="utf-8") as source:
        corpus.write_text("".join(line for _, line in zip(range(args.documents), source, strict=False)))
    embedder = Counting(SentenceTransformerEmbedder(backend=args.backend))
    embedder.encode(["warm up the model"])
    for order, whole in enumerate((False, True, True, False)):
        embedder.texts = embedder.chars = 0
        path = args.work / f"ix-{order}-{'whole' if whole else 'chunks'}"
        index = Index.create(path, embedder=embedder, document_vectors=whole)  # type: ignore[arg-type]
        wall, cpu = time.perf_counter(), time.process_time()
        run = index.ingest([corpus])
        print(
            f"document_vectors={whole!s:<5} {run.added} documents, {index.status().chunks} chunks: "
            f"{embedder.texts} texts encoded ({embedder.chars} characters), "
            f"{time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} CPU-s",
            flush=True,
        )


if __name__ == "__main__":
    main()
