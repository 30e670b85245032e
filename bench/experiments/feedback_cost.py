"""What hybrid search's feedback stage costs: p50/p90 of a whole search (collapse on, k=10) with the stage on (the
default) and off, interleaved in one process on one index.

    python bench/experiments/feedback_cost.py --index /tmp/q18-scifact-int8 --scifact ../shared/benchmarks/scifact
    python bench/experiments/feedback_cost.py --index /tmp/scale1m/1M/index --hash-bow --queries 50  # scale.py's

Queries: SciFact's test claims (the first ``--queries``). Each search runs ``--repeat`` times in a row and the least
time counts (the neighbours' load only ever adds). Times are CPU (``time.process_time``) and wall, in ms; the
query's encoding is printed apart (each query is encoded once, outside the timing, and both settings search with
that vector: the model call is the same with the stage on or off).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/: the kept modules this builds on
from _synthetic import open_index  # type: ignore[import-not-found]
from collapse_cost import test_queries  # type: ignore[import-not-found]

from citeline.query import plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument(
        "--scifact", type=Path, default=Path(__file__).resolve().parents[2] / "shared/benchmarks/scifact"
    )
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--hash-bow", action="store_true", help="bench/scale.py's model-free embedder")
    args = parser.parse_args()
    index = open_index(args.index, args.hash_bow)
    texts = test_queries(args.scifact, args.queries)
    snapshot = index.snapshot()
    started = time.process_time()
    vectors = {text: index.encode_query(text) for text in texts}
    encode_ms = (time.process_time() - started) * 1000 / len(texts)
    settings = {"on": plan.DEFAULT_FUSION, "off": replace(plan.DEFAULT_FUSION, feedback=0.0)}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
    same = 0
    for i, text in enumerate(texts):
        order = list(settings.items()) if i % 2 == 0 else list(reversed(settings.items()))
        tops = {}
        for name, fusion in order:
            request = replace(plan.Query.of(text, 10), fusion=fusion)
            best = (float("inf"), float("inf"))
            for _ in range(args.repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                hits = plan.search(snapshot, request, vectors.__getitem__, index.meta["model"])
                best = min(best, ((time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000))
            times[name].append(best)
            tops[name] = [h.chunk_id for h in hits]
        same += tops["on"] == tops["off"]
    print(f"# {args.index}: {len(texts)} claims, k=10, collapse on, best of {args.repeat}")
    print(f"# query encoding (not in the times below): {encode_ms:.1f} CPU-ms a query")
    for name, rows in times.items():
        cpu = sorted(c for c, _ in rows)
        wall = sorted(w for _, w in rows)
        print(
            f"feedback {name:3s}  CPU p50 {statistics.median(cpu):6.2f} p90 {cpu[int(0.9 * len(cpu))]:6.2f}   "
            f"wall p50 {statistics.median(wall):6.2f} p90 {wall[int(0.9 * len(wall))]:6.2f}  ms"
        )
    added = [on[0] - off[0] for on, off in zip(times["on"], times["off"], strict=True)]
    print(f"added CPU-ms a search: median {statistics.median(added):.2f}; same top 10 for {same} of {len(texts)}")


if __name__ == "__main__":
    main()
