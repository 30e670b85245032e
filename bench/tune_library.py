"""Score fusion settings through the library itself (``citeline.evaluate.evaluate_index``), train and test.

    python bench/tune_library.py --beir ../shared/benchmarks/scifact --index /tmp/qual2/base

bench/tune_doclevel.py chooses weights from cached scores; this checks the chosen ones end to end (the library's
candidates, rescaling, document grouping and depth), and compares them with the settings shipped before.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from citeline import Index
from citeline.evaluate import evaluate_index, load_beir
from citeline.search import DEFAULT_FUSION, Fusion

SETTINGS = {
    "shipped before (convex 0.5, chunks only)": Fusion(weight=0.5, documents=()),
    "convex 0.4, chunks only": Fusion(weight=0.4, documents=()),
    "default: convex 0.4, documents dense 0.3 + lexical 0.2": DEFAULT_FUSION,
    "convex 0.4, document lexical 0.2 only": Fusion(documents=(("lexical", 0.2),)),
    "convex 0.5, documents dense 0.2 + lexical 0.2": Fusion(weight=0.5, documents=(("dense", 0.2), ("lexical", 0.2))),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--modes", nargs="*", default=["hybrid"])
    args = parser.parse_args()
    index = Index.open(args.index)
    splits = {name: load_beir(args.beir, name) for name in ("train", "test")}
    for label, fusion in SETTINGS.items():
        figures = []
        for name, split in splits.items():
            wall, cpu = time.perf_counter(), time.process_time()
            (result,) = evaluate_index(index, split, ["hybrid"], fusion=fusion)
            figures.append(
                f"{name} {result.ndcg_at_10:.4f} R@100 {result.recall_at_100:.4f} "
                f"({time.perf_counter() - wall:.0f} s, {time.process_time() - cpu:.0f} CPU-s)"
            )
        print(f"  {label:<58} " + "  ".join(figures), flush=True)


if __name__ == "__main__":
    main()
