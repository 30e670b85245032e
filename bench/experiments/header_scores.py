"""Contextual chunk headers: scores the vectors bench/experiments/header_vectors.py made against the index's own.

    python bench/experiments/header_scores.py --beir ../shared/benchmarks/scifact --index /tmp/quality/base \
        --vectors /tmp/quality/header-vectors.npy >> bench/results/scifact-quality-headers.txt

Was /tmp/quality/minimal.py (then a script beside the results file, with a developer's absolute paths):
bench/tune_quality.py's ``Data`` and ``Scorer`` over a torch SciFact index, with the shipped ranking settings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: the kept modules this builds on

from tune_quality import Data, Scorer, Setting, line

from citeline.query.plan import Fusion


def main() -> None:
    """Score dense and hybrid with the header vectors, then with the index's own vectors."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, default=Path("../shared/benchmarks/scifact"))
    parser.add_argument("--index", type=Path, default=Path("/tmp/quality/base"))
    parser.add_argument("--vectors", type=Path, default=Path("/tmp/quality/header-vectors.npy"))
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    data = Data(args.beir, args.index, args.vectors)
    scorer = Scorer(data)
    print("contextual chunk headers (title + chunk), shipped ranking settings:")
    for mode in ("dense", "hybrid"):
        line(mode, scorer.score(mode, Setting()))
    for weight in (0.55, 0.6):
        line(f"hybrid w_dense={weight}", scorer.score("hybrid", Setting(fusion=Fusion(weight=weight))))
    data.cosines = data.own_cosines
    print("the index's own vectors (chunk text alone), same settings:")
    for mode in ("dense", "hybrid"):
        line(mode, scorer.score(mode, Setting()))
    print(f"took {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
