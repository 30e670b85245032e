"""Where a warm hybrid query's CPU goes, stage by stage: query encoding, the dense and lexical legs, passage rows,
highlights and collapse (issue 33).

    python bench/query_stages.py --index DIR [--queries .../scifact/queries.jsonl] [-n 100]

Runs ``n`` queries (``Index.search(k=10, mode="hybrid", collapse=True)``, the CLI's default) after 5 warm-up ones,
first plain (CPU ms and wall ms per query), then under cProfile with a CPU-time clock, and prints each stage's
cumulative CPU ms per query. cProfile's own cost inflates every figure (about 2x here); the shares are what count.
Stages overlap where one calls another (``hybrid`` holds ``encode``). Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_QUERIES = REPO.parent / "shared" / "benchmarks" / "scifact" / "queries.jsonl"

#: stage -> (file suffix, function name) of the function whose cumulative time is the stage's
STAGES = {
    "search (all)": ("citeline/query/plan.py", "search"),
    "hybrid ranking (both legs)": ("citeline/query/plan.py", "hybrid_ranking"),
    "  query encoding": ("citeline/index.py", "encode_query"),
    "    onnxruntime run": ("~", "<built-in method onnxruntime.capi.onnxruntime_pybind11_state.run>"),
    "  lexical leg": ("citeline/lexical/segments.py", "ranked"),
    "passage rows": ("citeline/query/plan.py", "fetch_passages"),
    "highlights": ("citeline/query/highlight.py", "highlight"),
    "collapse (all)": ("citeline/query/collapse.py", "collapsed_search"),
    "  copies lookup": ("citeline/lexical/lookup.py", "find"),
    "  unranked copies": ("citeline/query/collapse.py", "add_unranked_copies"),
    "  grouping": ("citeline/query/collapse.py", "collapse"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True)
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument("-n", type=int, default=100)
    args = parser.parse_args()
    from citeline import Index

    index = Index.open(args.index)
    queries = [json.loads(line)["text"] for line in args.queries.open(encoding="utf-8")]
    for query in queries[:5]:
        index.search(query, k=10, mode="hybrid", collapse=True)
    timed = queries[5 : 5 + args.n]
    wall, cpu = time.perf_counter(), time.process_time()
    for query in timed:
        index.search(query, k=10, mode="hybrid", collapse=True)
    n = len(timed)
    print(
        f"plain: {1000 * (time.process_time() - cpu) / n:.2f} CPU ms, {1000 * (time.perf_counter() - wall) / n:.2f}"
        f" wall ms per query ({n} queries)"
    )
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    for query in timed:
        index.search(query, k=10, mode="hybrid", collapse=True)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    cumulative: dict[tuple[str, str], float] = {}
    for (file, _, name), (_, _, _, cum, _) in stats.items():
        for suffix_name in STAGES.values():
            if file.endswith(suffix_name[0]) and name == suffix_name[1]:
                cumulative[suffix_name] = cumulative.get(suffix_name, 0.0) + cum
    total = cumulative.get(STAGES["search (all)"], 0.0)
    print(f"{'stage (profiled)':<30} {'CPU ms/query':>12} {'share':>6}")
    for stage, key in STAGES.items():
        seconds = cumulative.get(key, 0.0)
        print(f"{stage:<30} {1000 * seconds / n:>12.2f} {seconds / total if total else 0:>6.0%}")


if __name__ == "__main__":
    main()
