"""Which sentence answers the claim? Highlight accuracy and cost on 40 hand-labelled SciFact claims.

    python bench/highlight_eval.py [--labels bench/data/scifact_highlights.jsonl] [--backend onnx]

``bench/data/scifact_highlights.jsonl`` holds 40 SciFact test claims, each with the sentence(s) of its relevant
abstract that support or refute it, chosen by hand by reading the abstract (the original SciFact release's
evidence sentences are not in our copy). Each claim is highlighted among 10 hits: its abstract and the abstracts of
the next 9 labelled claims, as a k=10 search would hand them over. Reported per scorer:

- top-1 accuracy: the best highlight of the relevant abstract is a labelled sentence;
- any: one of its highlights (at most two) is;
- ms per query (wall and CPU) to highlight all 10 hits, the model's sentence encoding included.

Baselines: the abstract's first sentence, and its last (abstracts often conclude with the claim). Run by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from citeline.query.highlight import highlight, sentences
from citeline.query.plan import SearchResult

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "shared" / "benchmarks" / "scifact" / "corpus.jsonl"


def _hit(doc_id: str, text: str) -> SearchResult:
    return SearchResult(
        text=text,
        score=1.0,
        doc_id=doc_id,
        source_path=doc_id,
        source_id=doc_id,
        title=doc_id,
        ordinal=0,
        char_start=0,
        char_end=len(text),
        content_hash="",
        run_id="",
        ingested_at="",
        model="",
        chunk_id=0,
    )


def main() -> None:
    """Print highlight accuracy and latency for term overlap, the model, and blends of both."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=Path, default=HERE / "data" / "scifact_highlights.jsonl")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--weights", default="0,0.3,0.5,0.7,1")
    args = parser.parse_args()
    labels = [json.loads(line) for line in args.labels.read_text(encoding="utf-8").splitlines()]
    wanted = {row["doc_id"] for row in labels}
    texts = {}
    with args.corpus.open(encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            if doc["_id"] in wanted:
                texts[doc["_id"]] = doc["text"]

    from citeline.model.embedding import SentenceTransformerEmbedder

    encoder = SentenceTransformerEmbedder().query_encoder
    encoder.encode(["warm up"])

    def encode(batch: list[str]) -> np.ndarray:
        return encoder.encode(batch)

    first = sum(
        any(texts[r["doc_id"]][slice(*sentences(texts[r["doc_id"]])[0])] == e for e in r["evidence"]) for r in labels
    )
    last = sum(
        any(texts[r["doc_id"]][slice(*sentences(texts[r["doc_id"]])[-1])] == e for e in r["evidence"]) for r in labels
    )
    print(f"{len(labels)} claims; baselines: first sentence {first}/{len(labels)}, last sentence {last}/{len(labels)}")
    sentence_counts = [len(sentences(t)) for t in texts.values()]
    print(f"sentences per abstract: mean {np.mean(sentence_counts):.1f}")
    for weight in (float(w) for w in args.weights.split(",")):
        top1 = anyhit = 0
        wall = cpu = 0.0
        for at, row in enumerate(labels):
            others = [labels[(at + j) % len(labels)]["doc_id"] for j in range(1, 10)]
            hits = [_hit(d, texts[d]) for d in [row["doc_id"], *others]]
            start, start_cpu = time.perf_counter(), time.process_time()
            query_vector = encoder.encode([row["claim"]])[0] if weight > 0 else None  # the search has it already
            if weight > 0:
                start, start_cpu = time.perf_counter(), time.process_time()
            found = highlight(hits, row["claim"], query_vector=query_vector, encode=encode, model_weight=weight)
            wall += time.perf_counter() - start
            cpu += time.process_time() - start_cpu
            marks = found[0].highlights
            best = max(marks, key=lambda h: h.score)
            top1 += best.text in row["evidence"]
            anyhit += any(h.text in row["evidence"] for h in marks)
        n = len(labels)
        print(
            f"model weight {weight:.1f}: top-1 {top1}/{n} ({top1 / n:.0%}), any highlight {anyhit}/{n} "
            f"({anyhit / n:.0%}); {wall / n * 1000:.1f} ms wall, {cpu / n * 1000:.1f} ms CPU per query (10 hits)"
        )


if __name__ == "__main__":
    main()
