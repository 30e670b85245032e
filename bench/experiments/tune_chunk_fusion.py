"""Issue 18: smaller chunks for the model with BM25 evidence at the document level, on SciFact train and test.

    python bench/experiments/tune_chunk_fusion.py --beir ../shared/benchmarks/scifact \\
        --index /tmp/q18-scifact-int8 /tmp/q18x/int8-192-o32 /tmp/q18x/int8-128 \\
        > bench/results/scifact-quality-chunk-fusion.txt

all-MiniLM-L6-v2 was trained on texts of up to 128 word pieces, and smaller chunks lift dense mode on train
(``bench/results/scifact-quality-chunk-size.txt``: 0.8462 at 254 tokens, 0.8570 at 128) but lower BM25, whose
evidence for one abstract is then split across chunks. The document BM25 signal (``citeline.query.doc_signals``) scores
the whole document's terms, so hybrid might keep the smaller chunks' dense gain without the lexical loss. Each
``--index`` is a SciFact index made with ``citeline ingest ... --max-tokens N --overlap-tokens M`` (onnx-int8);
each row is ``citeline.eval.beir.evaluate_beir``, hybrid, with the fusion named. Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from citeline import Index
from citeline.eval.beir import evaluate_beir
from citeline.query.plan import DEFAULT_FUSION, Fusion

FUSIONS = {
    "DEFAULT_FUSION (shipped)": DEFAULT_FUSION,
    "DOCUMENT_BM25_FUSION (opt-in: 0.3, no feedback)": Fusion(weight=0.4, documents=(("lexical", 0.3),)),
    "DEFAULT_FUSION + document BM25 0.3": dataclasses.replace(DEFAULT_FUSION, documents=(("lexical", 0.3),)),
    "DEFAULT_FUSION + document BM25 0.5": dataclasses.replace(DEFAULT_FUSION, documents=(("lexical", 0.5),)),
    "the same, first dense weight 0.5": dataclasses.replace(DEFAULT_FUSION, weight=0.5, documents=(("lexical", 0.5),)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, nargs="+", required=True)
    args = parser.parse_args()
    started, cpu = time.perf_counter(), time.process_time()
    print("# hybrid nDCG@10, train then test")
    for path in args.index:
        meta = Index.open(path).meta
        print(f"# {path}: {meta['backend']}, max {meta['max_tokens']} / overlap {meta['overlap_tokens']} tokens")
        for label, fusion in FUSIONS.items():
            scores = [
                evaluate_beir(args.beir, index_path=path, split=split, baseline=False, fusion=fusion).results[0]
                for split in ("train", "test")
            ]
            print(f"  {label:50s} train {scores[0].ndcg_at_10:.4f}  test {scores[1].ndcg_at_10:.4f}", flush=True)
    print(f"\n# {time.perf_counter() - started:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
