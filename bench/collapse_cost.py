"""What collapse adds to a search: p50/p99 time with collapse on and off, per mode, on one index, and by stage.

    python bench/collapse_cost.py [--index /tmp/scifact-int8] [--scifact ../shared/benchmarks/scifact] [-k 10]
                                  [--queries 300] [--profile hybrid] [--repeat 3]
    python bench/collapse_cost.py --index /tmp/1M-index --hash-bow --claims --queries 50   # bench/scale.py's index
    python bench/collapse_cost.py --feedback [--index ...] [--repeat 3]   # hybrid's feedback stage on and off

``--hash-bow`` opens the index with bench/scale.py's model-free embedder and ``--claims`` takes the first SciFact
claims (bench/scale.py's latency queries) instead of the judged test queries.

One process, one index, SciFact's test queries (the 300 of qrels/test.tsv). Each query's vector is encoded once
before timing and served from a cache: the model call is the same with collapse on or off (and collapse no longer
needs it in lexical mode), and it would add only noise; its own cost is printed once. Every query is then searched
with collapse on and with it off, in alternating order, after one warm-up search per setting; with ``--repeat N``
each of those searches runs N times in a row and the least time counts (the neighbours' load only ever adds).
Figures are CPU time (``time.process_time``: the machine is shared, so wall time mostly measures the neighbours)
and wall time, in ms. "added" is the per-query difference on - off.

By stage: the collapsed searches' time inside ranking, passages, highlights, :func:`citeline.query.collapse.collapse`
and :func:`citeline.query.collapse.add_unranked_copies` (and its lexical lookups), against the same stages with collapse
off. ``--profile MODE`` prints cProfile's top functions of that mode's collapsed searches.

``--feedback`` times hybrid's feedback stage instead (formerly a script of its own): whole searches (collapse on, k=10)
with ``DEFAULT_FUSION`` and with its feedback stage off, interleaved, p50/p90 CPU and wall ms, the per-query
difference, and how many top 10s are the same (``bench/results/feedback-cost.txt``).
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import json
import pstats
import resource
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

import citeline.query.collapse
import citeline.query.plan as plan
from citeline import Index

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"

#: CPU seconds spent in each stage, by stage name (filled while :func:`stages` is active).
SPENT: dict[str, float] = defaultdict(float)


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def test_queries(scifact: Path, limit: int) -> list[str]:
    """The texts of SciFact's test queries (those qrels/test.tsv judges), in file order, at most ``limit``."""
    with (scifact / "qrels" / "test.tsv").open(encoding="utf-8") as rows:
        judged = {row["query-id"] for row in csv.DictReader(rows, delimiter="\t")}
    queries = [json.loads(line) for line in (scifact / "queries.jsonl").open(encoding="utf-8")]
    return [q["text"] for q in queries if str(q["_id"]) in judged][:limit]


def first_claims(scifact: Path, limit: int) -> list[str]:
    """The first ``limit`` SciFact claims, as bench/scale.py's latency step searches them."""
    with (scifact / "queries.jsonl").open(encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line, _ in zip(lines, range(limit), strict=False)]


def _timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[name] += time.process_time() - start

    return wrapper


def _timed_lookup(find: Callable[..., Any], passages: Callable[..., Any], *more: Any) -> citeline.query.collapse.Lookup:
    timed = [_timed("lookup: documents", function) for function in more]
    return citeline.query.collapse.Lookup(_timed("lookup: lexical", find), _timed("lookup: passages", passages), *timed)


@contextmanager
def stages() -> Iterator[None]:
    """Time the query plan's stages (module attributes are looked up at call time, so wrapping them works)."""
    patched = [
        (plan, "rank"),
        (plan, "fetch_passages"),
        (plan, "highlight"),
        (plan, "collapse"),  # the plan's loop calls collapse's functions by the names it imported
        (plan, "add_unranked_copies"),
    ]
    saved = [(module, name, getattr(module, name)) for module, name in patched if hasattr(module, name)]
    for module, name, function in saved:
        setattr(module, name, _timed(name, function))
    saved_lookup = getattr(plan, "Lookup", None)
    if saved_lookup is not None:
        plan.Lookup = _timed_lookup  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        for module, name, function in saved:
            setattr(module, name, function)
        if saved_lookup is not None:
            plan.Lookup = saved_lookup  # type: ignore[misc]


def run(index: Index, queries: list[str], vectors: dict[str, np.ndarray], mode: str, k: int) -> dict[str, Any]:
    """Search every query with collapse on and off; CPU and wall ms per search, and CPU ms by stage."""
    snapshot, model = index.snapshot(), index.meta["model"]

    def encode(text: str) -> np.ndarray:
        return vectors[text]

    def once(query: str, collapse: bool, repeat: int = 1) -> tuple[float, float]:
        request = plan.SearchRequest.of(query, k, mode=mode, collapse=collapse)
        best = (float("inf"), float("inf"))
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            plan.search(snapshot, request, encode, model)
            took = (time.process_time() - start_cpu) * 1000, (time.perf_counter() - start) * 1000
            best = (min(best[0], took[0]), min(best[1], took[1]))
        return best

    for collapse in (True, False):
        once(queries[0], collapse)
    timings: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    by_stage: dict[bool, dict[str, float]] = {}
    for collapse in (True, False):
        SPENT.clear()
        with stages():
            for query in queries:
                once(query, collapse)
        by_stage[collapse] = {name: seconds * 1000 / len(queries) for name, seconds in SPENT.items()}
    for n, query in enumerate(queries):
        for collapse in (True, False) if n % 2 else (False, True):
            timings[collapse].append(once(query, collapse, ARGS.repeat))
    return {"timings": timings, "stages": by_stage}


def report(mode: str, figures: dict[str, Any]) -> None:
    """Print one mode's figures."""
    on, off = figures["timings"][True], figures["timings"][False]
    print(f"\n{mode} (k={ARGS.k}, {len(on)} queries), ms per search:")
    for label, values in (("collapse on", on), ("collapse off", off)):
        cpu, wall = [v[0] for v in values], [v[1] for v in values]
        print(
            f"  {label:<13} CPU p50 {percentile(cpu, 0.5):6.2f}  p99 {percentile(cpu, 0.99):6.2f}  "
            f"mean {statistics.fmean(cpu):6.2f}   wall p50 {percentile(wall, 0.5):6.2f}  "
            f"p99 {percentile(wall, 0.99):6.2f}"
        )
    added_cpu = [a[0] - b[0] for a, b in zip(on, off, strict=True)]
    added_wall = [a[1] - b[1] for a, b in zip(on, off, strict=True)]
    print(
        f"  {'added':<13} CPU p50 {percentile(added_cpu, 0.5):6.2f}  p99 {percentile(added_cpu, 0.99):6.2f}  "
        f"mean {statistics.fmean(added_cpu):6.2f}   wall p50 {percentile(added_wall, 0.5):6.2f}  "
        f"p99 {percentile(added_wall, 0.99):6.2f}"
    )
    print(f"  p50(on) - p50(off): CPU {percentile([v[0] for v in on], 0.5) - percentile([v[0] for v in off], 0.5):.2f}")
    stage_on, stage_off = figures["stages"][True], figures["stages"][False]
    print("  CPU ms per search by stage (collapse on / off):")
    for name in sorted(set(stage_on) | set(stage_off), key=lambda n: -stage_on.get(n, 0.0)):
        print(f"    {name:<22} {stage_on.get(name, 0.0):6.2f} / {stage_off.get(name, 0.0):6.2f}")


def feedback(index: Index, queries: list[str], vectors: dict[str, np.ndarray], repeat: int) -> None:
    """Hybrid searches with the feedback stage on (``DEFAULT_FUSION``) and off, interleaved; print the figures."""
    snapshot = index.snapshot()
    settings = {"on": plan.DEFAULT_FUSION, "off": replace(plan.DEFAULT_FUSION, feedback=0.0)}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in settings}
    same = 0
    for i, text in enumerate(queries):
        order = list(settings.items()) if i % 2 == 0 else list(reversed(settings.items()))
        tops = {}
        for name, fusion in order:
            request = replace(plan.SearchRequest.of(text, 10), fusion=fusion)
            best = (float("inf"), float("inf"))
            for _ in range(repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                hits = plan.search(snapshot, request, vectors.__getitem__, index.meta["model"])
                best = min(best, ((time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000))
            times[name].append(best)
            tops[name] = [h.chunk_id for h in hits]
        same += tops["on"] == tops["off"]
    print(f"# {len(queries)} claims, k=10, collapse on, best of {repeat}")
    for name, rows in times.items():
        cpu_ms = sorted(c for c, _ in rows)
        wall_ms = sorted(w for _, w in rows)
        print(
            f"feedback {name:3s}  CPU p50 {statistics.median(cpu_ms):6.2f} p90 {cpu_ms[int(0.9 * len(cpu_ms))]:6.2f}   "
            f"wall p50 {statistics.median(wall_ms):6.2f} p90 {wall_ms[int(0.9 * len(wall_ms))]:6.2f}  ms"
        )
    added = [on[0] - off[0] for on, off in zip(times["on"], times["off"], strict=True)]
    print(f"added CPU-ms a search: median {statistics.median(added):.2f}; same top 10 for {same} of {len(queries)}")


def main() -> None:
    """Time every mode, print the figures; profile one mode if asked."""
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=Path("/tmp/scifact-int8"))
    parser.add_argument("--scifact", type=Path, default=SCIFACT)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--modes", default=",".join(plan.MODES))
    parser.add_argument("--profile", choices=plan.MODES)
    parser.add_argument(
        "--repeat", type=int, default=1, help="time each search this many times, keep the least (a loaded machine)"
    )
    parser.add_argument("--hash-bow", action="store_true", help="bench/scale.py's embedder (for its indexes)")
    parser.add_argument("--claims", action="store_true", help="the first SciFact claims, as bench/scale.py")
    parser.add_argument("--feedback", action="store_true", help="time hybrid's feedback stage on and off instead")
    ARGS = parser.parse_args()
    from _synthetic import open_index  # bench/ is on sys.path when this file runs as a script

    index = open_index(ARGS.index, ARGS.hash_bow)
    queries = (first_claims if ARGS.claims else test_queries)(ARGS.scifact, ARGS.queries)
    start, start_cpu = time.perf_counter(), time.process_time()
    vectors = {query: index.encode_query(query) for query in queries}
    encode_cpu = (time.process_time() - start_cpu) * 1000 / len(queries)
    encode_wall = (time.perf_counter() - start) * 1000 / len(queries)
    status = index.status()
    print(f"index {ARGS.index}: {status.chunks} chunks, backend {index.meta.get('backend')}; {len(queries)} queries")
    print(f"query encoding (not in the figures below): {encode_cpu:.2f} ms CPU, {encode_wall:.2f} ms wall per query")
    if ARGS.feedback:
        feedback(index, queries, vectors, ARGS.repeat)
        return
    for mode in ARGS.modes.split(","):
        report(mode, run(index, queries, vectors, mode, ARGS.k))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"\nprocess: {usage.ru_utime + usage.ru_stime:.1f} CPU-s, peak RSS {usage.ru_maxrss / 1e6:.2f} GB")
    if ARGS.profile:
        snapshot, model = index.snapshot(), index.meta["model"]
        profile = cProfile.Profile()
        profile.enable()
        for query in queries:
            plan.search(snapshot, plan.SearchRequest.of(query, ARGS.k, mode=ARGS.profile), vectors.__getitem__, model)
        profile.disable()
        pstats.Stats(profile).sort_stats("cumulative").print_stats(45)


ARGS = argparse.Namespace()

if __name__ == "__main__":
    main()
