"""Filtered exact search: FAISS's IDSelectorBatch against numpy over the allowed rows, by filter size.

    python bench/experiments/filtered_search.py [--n 100000] [--dim 384]

Builds a flat index of ``--n`` random unit vectors (as ``store.build_faiss`` does), then times
``search.dense_search`` with allowed sets of several sizes, forcing each of its two paths in turn (best of 5, in
one process, so the two sides share the machine's load). ``search.NUMPY_FILTER_FRACTION`` is chosen from this.
Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from citeline.query import plan as search
from citeline.store import build_faiss


def best_ms(func: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` calls, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main() -> None:
    """Print one line per allowed-set size: selector ms, numpy ms, and whether both returned the same hits."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(args.n, dtype=np.int64) * 3 + 7
    index = build_faiss(ids, vectors, args.dim)
    query = vectors[5].copy()
    print(f"unfiltered: {best_ms(lambda: search.dense_search(index, query, 10)):.1f} ms  (n={args.n}, d={args.dim})")
    for size in (100, 1_000, 10_000, 30_000, args.n):
        allowed = np.sort(rng.choice(ids, min(size, args.n), replace=False))
        timings, answers = {}, {}
        for name, fraction in (("selector", 0.0), ("numpy", 1.0)):
            search.NUMPY_FILTER_FRACTION = fraction
            answers[name] = search.dense_search(index, query, 10, allowed)
            timings[name] = best_ms(lambda chosen=allowed: search.dense_search(index, query, 10, chosen))
        same = [i for i, _ in answers["selector"]] == [i for i, _ in answers["numpy"]]
        print(
            f"allowed={size:>7,} ({size / args.n:6.1%}): selector {timings['selector']:6.1f} ms   "
            f"numpy {timings['numpy']:6.1f} ms   same hits: {same}"
        )


if __name__ == "__main__":
    main()
