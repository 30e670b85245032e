"""Issue 18: a vector for each sentence beside each chunk's, on SciFact train (choose) and test (report).

    python bench/experiments/sentence_vectors.py --beir ../shared/benchmarks/scifact --index /tmp/q18-scifact \\
        --cache /tmp/sentences-torch.npy > bench/results/scifact-sentence-vectors.txt    # and the onnx-int8 index

A chunk's vector averages up to 254 tokens; a claim often matches one sentence of it. This splits every chunk's
text into sentences (after ``.``, ``!`` or ``?`` and a space, before a capital, digit or bracket), embeds each with
the index's own model (the vectors are kept in ``--cache``: embedding SciFact's 51k sentences costs about 1,000
CPU-s on torch), and scores each chunk by ``(1 - a) * its cosine + a * its best sentence's cosine``:

- dense: documents ranked by their best chunk so scored;
- hybrid: the shipped ranking (``DEFAULT_FUSION``: the first fusion at dense weight ``w1``, the feedback stage at
  beta 0.25, the second fusion at ``w2``) replayed as ``bench/tune_prf.py`` does, with the blended cosines in both
  passes (the moved query scores the sentences again). Paired bootstrap intervals against the shipped ranking.

Nothing here is in the library: it measures what storing sentence vectors would give, before building it.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_prf import best_chunks, compared, moved_queries, moved_scaled
from tune_q18 import Corpus, Split, replay_setup, scaled_chunks

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


class Sentences:
    """Every chunk's sentences, embedded, and which chunk each belongs to (chunks in the corpus's order)."""

    def __init__(self, corpus: Corpus, embed: Callable[[list[str]], np.ndarray], cache: Path | None):
        texts: list[str] = []
        owner: list[int] = []
        for position, text in enumerate(corpus.texts):
            parts = [s for s in SENTENCE_END.split(text) if s.strip()]
            texts += parts
            owner += [position] * len(parts)
        self.count = len(texts)
        self.per_chunk = np.bincount(np.array(owner), minlength=len(corpus.chunk_ids))
        self.starts = np.r_[0, np.cumsum(self.per_chunk)][:-1]  # sentences are in chunk order already
        started, cpu = time.perf_counter(), time.process_time()
        if cache is not None and cache.exists():
            self.vectors = np.load(cache)
            self.cost = f"read from {cache}"
        else:
            self.vectors = np.asarray(embed(texts), dtype=np.float32)
            if cache is not None:
                np.save(cache, self.vectors)
            self.cost = f"embedded in {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s"
        if len(self.vectors) != self.count:
            raise SystemExit(f"{cache} holds {len(self.vectors)} vectors for {self.count} sentences: remove it")

    def best(self, queries: np.ndarray) -> np.ndarray:
        """Each chunk's best sentence cosine (queries x chunks)."""
        cosines = queries.astype(np.float32) @ self.vectors.T
        return np.maximum.reduceat(cosines, self.starts, axis=1).astype(np.float64)


def hybrid(
    split: Split,
    corpus: Corpus,
    sentences: Sentences,
    vectors: np.ndarray,
    centroids: np.ndarray,
    a: float,
    w1: float,
    w2: float,
) -> np.ndarray:
    """Document scores of the shipped two-pass ranking with chunk cosines blended with best-sentence cosines
    (``vectors``: the chunk vectors as float64)."""
    cosines = (1 - a) * split.cosines + a * sentences.best(split.query_vectors) if a else split.cosines
    d, lex, candidates = scaled_chunks(split, cosines)
    first = np.where(candidates, w1 * d + (1 - w1) * lex, -1e9)
    moved_query = moved_queries(split, best_chunks(corpus, first, 1), 0.25, vectors, centroids)
    moved = moved_query @ vectors.T
    if a:
        moved = (1 - a) * moved + a * sentences.best(moved_query)
    return corpus.reduce_max(np.where(candidates, w2 * moved_scaled(cosines, moved) + (1 - w2) * lex, -1e9))


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    args, index, corpus = replay_setup(
        __doc__.splitlines()[0], lambda parser: parser.add_argument("--cache", type=Path, help="sentence vectors")
    )
    sentences = Sentences(corpus, index.embedder.encode, args.cache)
    one = int((sentences.per_chunk == 1).sum())
    print(f"# index {args.index} (backend {index.meta['backend']}): {len(corpus.chunk_ids)} chunks")
    print(f"# {sentences.count} sentences ({one} chunks of one sentence); vectors {sentences.cost}")
    print("# columns: nDCG@10 all, relevant documents of 1 chunk, 2, >=3 chunks; then Recall@100; d: against shipped")
    vectors, centroids = corpus.vectors.astype(np.float64), corpus.mean_vectors(corpus.length)
    for name in ("train", "test"):
        split = Split(index, corpus, args.beir, name)
        print(split.row("dense: best chunk", corpus.reduce_max(split.cosines)))
        best = sentences.best(split.query_vectors)
        for a in (0.25, 0.5, 0.75, 1.0):
            print(
                split.row(
                    f"dense: chunk and best sentence, a={a}", corpus.reduce_max((1 - a) * split.cosines + a * best)
                )
            )
        shipped = hybrid(split, corpus, sentences, vectors, centroids, 0.0, 0.4, 0.5)
        shipped_nd, _ = split.score_documents(shipped)
        print(split.row("hybrid: shipped (DEFAULT_FUSION)", shipped))
        for a in (0.15, 0.25, 0.35, 0.5):
            for w1, w2 in ((0.4, 0.5), (0.4, 0.6), (0.5, 0.5), (0.5, 0.6)):
                docs = hybrid(split, corpus, sentences, vectors, centroids, a, w1, w2)
                print(compared(split, f"hybrid: a={a} w={w1}/{w2}", docs, shipped_nd), flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
