"""Issue 18: a title the chunker leaves alone as chunk 0, embedded with the start of its document instead of alone.

    python bench/experiments/title_context.py --beir ../shared/benchmarks/scifact --index /tmp/q18-scifact \\
        > bench/results/scifact-title-context.txt

The chunker keeps a title apart when title and abstract exceed the model's window (3,641 of 5,183 SciFact
documents). That lone chunk is a few words: its vector matches short queries by accident and carries none of the
document's content, which is where dense mode loses to plain whole-document encoding (documents of one or two
chunks). The variant: the title chunk's *vector* is the encoding of ``title + " " + text`` cut at the model's
window (the passage text and its offsets stay the title). That is exactly the whole-document vector
``citeline eval``'s baseline row computes, so this script reads it from the baseline cache (or encodes it once).
Rows as ``bench/tune_q18.py`` prints them (nDCG@10 all, relevant documents of 1, 2, >=3 chunks; Recall@100).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tune_q18 import Split, hybrid_documents, replay_setup

from citeline.eval.baseline import document_texts, document_vectors
from citeline.query.dense_stage import DENSE_DOCUMENT_WEIGHT as STAGE


def main() -> None:
    started, cpu = time.perf_counter(), time.process_time()
    args, index, corpus = replay_setup(__doc__.splitlines()[0])
    ids, texts = document_texts(args.beir / "corpus.jsonl")
    whole = document_vectors(args.beir / "corpus.jsonl", texts, index.embedder).astype(np.float64)
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    whole = whole[[position[d] for d in corpus.doc_ids]]
    shipped = corpus.vectors.astype(np.float64)
    titled = shipped.copy()
    titled[corpus.title_alone] = whole[corpus.doc_of[corpus.title_alone]]
    # every document's chunk 0 gets the whole-document vector (not only a lone title): the bound of the idea
    first = shipped.copy()
    first[corpus.ordinal == 0] = whole[corpus.doc_of[corpus.ordinal == 0]]
    print(f"# index {args.index} (backend {index.meta['backend']}): {len(corpus.chunk_ids)} chunks of")
    print(f"# {len(corpus.doc_ids)} documents; a lone title as chunk 0: {int(corpus.title_alone.sum())}")
    print("# columns: nDCG@10 all, relevant documents of 1 chunk, 2, >=3 chunks; then Recall@100")
    splits = [Split(index, corpus, args.beir, name) for name in ("train", "test")]
    for split in splits:
        q = split.query_vectors.astype(np.float64)
        print(split.row("dense-doc: whole document (baseline row)", q @ whole.T))
        for label, vectors in (("shipped", shipped), ("lone title := whole", titled), ("chunk 0 := whole", first)):
            cos = q @ vectors.T
            best = corpus.reduce_max(cos)
            print(split.row(f"{label}: dense best chunk", best))
            staged = (1 - STAGE) * best + STAGE * (q @ corpus.mean_vectors(corpus.length, vectors).T)
            print(split.row(f"{label}: dense + document stage {STAGE}", staged))
            for weight in (0.4, 0.5):
                print(split.row(f"{label}: hybrid {weight}", hybrid_documents(split, weight, cos)), flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
