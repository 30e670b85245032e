"""Query latency: cold CLI wall time and in-process ``Index.search`` p50/p99.

    python bench/search.py [--index DIR] [--queries ../shared/benchmarks/scifact/queries.jsonl] [--cold-runs 10]
    python bench/search.py --index DIR --tree PATH [--tree PATH ...] [--cold-runs 15]   # source trees side by side
    python bench/search.py --index DIR --stages [-n 100]                                # CPU per query stage
    python bench/search.py --index DIR --scoped [--hash-bow] [-n 300]                   # a token's scope, its cost

Without ``--index`` it builds an index of ``seeds/`` in a temporary folder. Cold runs start a new
``citeline search`` process each time (the query path imports no Prefect, torch, transformers, bm25s, scipy or
pandas) and report its wall time, CPU time (user+sys, from wait4) and peak RSS; in-process timings run every query
once per mode after one warm-up query (``--cold-only`` skips them). Where a cold search spends its time:
``python -X importtime -m citeline.cli.main search QUERY --index DIR`` and ``python -m cProfile -s cumtime -m
citeline.cli.main ...``.

``--tree`` (repeatable) compares the cold ``citeline search`` cost of source trees, each put first on ``PYTHONPATH``
(e.g. ``git archive HEAD~3 | tar -x -C /tmp/base`` for a before/after), runs interleaved so the shared machine's
noise falls on every tree alike; it prints each tree's median and min CPU-s (user + sys, from ``wait4``) and wall s.

``--stages`` says where a warm hybrid query's time goes: ``n`` queries (``Index.search(k=10, mode="hybrid",
collapse=True)``, the CLI's default) after 5 warm-up ones, first plain (CPU and wall ms per query), then with
wall-clock timers around each stage's function (``WALL_STAGES``; a nested stage counts in its parent), then under
cProfile with a CPU-time clock, printing each stage's cumulative CPU ms per query. cProfile's own cost inflates every
figure (about 2x); the shares are what count. Stages overlap where one calls another (``hybrid`` holds ``encode``).
The profiled run embeds the query on the main thread (``PARALLEL_HYBRID`` off), so each stage's CPU is its own.

``--scoped`` measures what a scoped token adds to a served search: ``n`` SciFact test queries (those of
``qrels/test.tsv`` beside ``--queries``), each searched through the server's reader (``IndexService.search``, hybrid,
k=10, collapsed: ``GET /search``'s defaults) as the owner and as a token whose scope is ``--scope-glob`` (a path glob
over the records' source ids), the two interleaved query by query (which goes first alternates) so the shared
machine's noise falls on both alike; it prints each side's mean and p50 wall and CPU ms and the overhead of the means.
With ``--hash-bow`` the index is opened with bench/_synthetic.py's model-free embedder, and a missing ``--index`` is
built from SciFact's corpus with it first.

Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_QUERIES = REPO.parent / "shared" / "benchmarks" / "scifact" / "queries.jsonl"


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


#: stage -> (file suffix, function name) of the function whose cumulative time is the stage's (``--stages``)
STAGES = {
    "search (all)": ("citeline/query/plan.py", "search"),
    "hybrid ranking (both legs)": ("citeline/query/plan.py", "hybrid_candidates"),
    "  query encoding": ("citeline/index.py", "encode_query"),
    "    onnxruntime run": ("~", "<built-in method onnxruntime.capi.onnxruntime_pybind11_state.run>"),
    "  lexical leg": ("citeline/lexical/segments.py", "ranked"),
    "passage rows": ("citeline/query/plan.py", "fetch_passages"),
    "highlights": ("citeline/query/highlight.py", "highlight"),
    "  copies lookup": ("citeline/lexical/lookup.py", "find"),
    "  unranked copies": ("citeline/query/collapse.py", "add_unranked_copies"),
    "  grouping": ("citeline/query/collapse.py", "collapse"),
}

#: stage -> (file suffix, function or method name) of the functions ``--stages`` wraps in wall-clock timers (the
#: second table): each row is the wall time inside that function, nested rows included in their parent's.
WALL_STAGES = {
    "search (all)": ("citeline/query/plan.py", "search"),
    "rank (both legs and the stages)": ("citeline/query/plan.py", "rank"),
    "  hybrid candidates (both legs)": ("citeline/query/plan.py", "hybrid_candidates"),
    "    query encoding": ("citeline/index.py", "encode_query"),
    "    dense leg (vector search)": ("citeline/vectors/segments.py", "search"),
    "    lexical leg": ("citeline/lexical/segments.py", "ranked"),
    "  ranking stages (fusion, feedback)": ("citeline/query/stages.py", "ranked"),
    "passage rows": ("citeline/query/plan.py", "fetch_passages"),
    "highlights": ("citeline/query/highlight.py", "highlight"),
    "collapse: grouping": ("citeline/query/collapse.py", "collapse"),
    "collapse: unranked copies": ("citeline/query/collapse.py", "add_unranked_copies"),
    "  copies lookup": ("citeline/lexical/lookup.py", "find"),
    "relevance floor": ("citeline/query/relevance.py", "apply_floor"),
}


def wrap_in_timers(stages: dict[str, tuple[str, str]]) -> dict[str, list[float]]:
    """Replace each stage's function, wherever a loaded citeline module or class holds it, by one that adds its
    wall seconds to the returned ``stage -> [seconds, calls]`` (calls on the pool's threads count too)."""
    import functools

    totals: dict[str, list[float]] = {}
    owners: list[Any] = [m for name, m in list(sys.modules.items()) if name.startswith("citeline") and m is not None]
    owners += [v for m in list(owners) for v in vars(m).values() if isinstance(v, type)]
    for stage, (suffix, name) in stages.items():
        total = totals[stage] = [0.0, 0.0]
        for owner in owners:
            value = vars(owner).get(name)
            code = getattr(value, "__code__", None)
            if code is None or not code.co_filename.endswith(suffix):
                continue

            def timed(*args: Any, _function: Any = value, _total: list[float] = total, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _function(*args, **kwargs)
                finally:
                    _total[0] += time.perf_counter() - start
                    _total[1] += 1

            setattr(owner, name, functools.update_wrapper(timed, value))
    return totals


def compare_trees(index: str, trees: list[Path], runs: int, query: str) -> None:
    """Cold ``citeline search`` CPU and wall seconds of each source tree, runs interleaved."""
    cpu: dict[Path, list[float]] = {tree: [] for tree in trees}
    wall: dict[Path, list[float]] = {tree: [] for tree in trees}
    for _ in range(runs):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
            command = [sys.executable, "-m", "citeline.cli.main", "search", query, "--index", index]
            start = time.perf_counter()
            process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            err = process.stderr.read()  # type: ignore[union-attr]
            _, status, usage = os.wait4(process.pid, 0)
            wall[tree].append(time.perf_counter() - start)
            if status:
                raise SystemExit(f"{tree}: exit status {status}: {err.decode()[-500:]}")
            cpu[tree].append(usage.ru_utime + usage.ru_stime)
    for tree in trees:
        print(
            f"{tree}: CPU-s median {statistics.median(cpu[tree]):.3f} min {min(cpu[tree]):.3f}; "
            f"wall s median {statistics.median(wall[tree]):.3f} ({runs} runs)"
        )


def query_stages(index_path: Path, queries: list[str], n: int) -> None:
    """CPU ms per query of each stage of a warm hybrid search with collapse (see the module docstring)."""
    from citeline import Index

    index = Index.open(index_path)
    for query in queries[:5]:
        index.search(query, k=10, mode="hybrid", collapse=True)
    timed = queries[5 : 5 + n]
    wall, cpu = time.perf_counter(), time.process_time()
    for query in timed:
        index.search(query, k=10, mode="hybrid", collapse=True)
    count = len(timed)
    print(
        f"plain: {1000 * (time.process_time() - cpu) / count:.2f} CPU ms, "
        f"{1000 * (time.perf_counter() - wall) / count:.2f} wall ms per query ({count} queries)"
    )
    totals = wrap_in_timers(WALL_STAGES)
    wall = time.perf_counter()
    for query in timed:
        index.search(query, k=10, mode="hybrid", collapse=True)
    whole = time.perf_counter() - wall
    print(f"\n{'stage (wall-clock timers)':<38} {'wall ms/query':>13} {'calls/query':>11} {'share':>6}")
    for stage, (seconds, calls) in totals.items():
        print(f"{stage:<38} {1000 * seconds / count:>13.2f} {calls / count:>11.1f} {seconds / whole:>6.0%}")
    print(f"{'(the timed loop, per query)':<38} {1000 * whole / count:>13.2f}\n")
    # cProfile sees this thread only, and a CPU clock counts every thread's time: the query's embedding on the
    # pool's thread (plan.PARALLEL_HYBRID) would be charged to whatever this thread runs meanwhile.
    from citeline.query import plan

    plan.PARALLEL_HYBRID = False
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
        print(f"{stage:<30} {1000 * seconds / count:>12.2f} {seconds / total if total else 0:>6.0%}")


def scoped_overhead(index_path: Path, queries_file: Path, n: int, glob: str, hash_bow: bool) -> None:
    """``--scoped``: a scoped search's cost against an unscoped one on the server's read path (see the docstring)."""
    from _synthetic import HashBowEmbedder, open_index

    from citeline import Index, SearchRequest
    from citeline.server import IndexService
    from citeline.server.access import CALLER, OWNER, Caller
    from citeline.store.filters import Filters

    if not index_path.exists():
        if not hash_bow:
            sys.exit("--scoped builds a missing --index only with --hash-bow (the real model: build it yourself)")
        started = time.perf_counter()
        Index.create(index_path, embedder=HashBowEmbedder()).ingest([queries_file.parent / "corpus.jsonl"])
        print(
            f"built {index_path} from SciFact's corpus (model-free embedder) in {time.perf_counter() - started:.0f} s"
        )
    index = open_index(index_path, hash_bow)
    tested = {line.split("\t")[0] for line in (queries_file.parent / "qrels" / "test.tsv").open(encoding="utf-8")}
    queries = [json.loads(line) for line in queries_file.open(encoding="utf-8")]
    texts = [query["text"] for query in queries if query["_id"] in tested][:n]
    scope = Filters.from_value({"path_glob": [glob]})
    visible = len(index.documents(scope))
    reader = IndexService(index, timeout=600)
    callers = {"unscoped": OWNER, "scoped": Caller("bench", scope)}
    wall: dict[str, list[float]] = {name: [] for name in callers}
    cpu: dict[str, list[float]] = {name: [] for name in callers}

    def timed(name: str, text: str) -> None:
        reset = CALLER.set(callers[name])
        try:
            start, started_cpu = time.perf_counter(), time.process_time()
            reader.search(SearchRequest.of(text, 10), time.monotonic() + 600)
            wall[name].append((time.perf_counter() - start) * 1000)
            cpu[name].append((time.process_time() - started_cpu) * 1000)
        finally:
            CALLER.reset(reset)

    for text in texts[:5]:  # warm-up: caches, the view generation
        timed("unscoped", text)
        timed("scoped", text)
    for name in callers:
        wall[name].clear()
        cpu[name].clear()
    for at, text in enumerate(texts):
        order = ("unscoped", "scoped") if at % 2 == 0 else ("scoped", "unscoped")
        for name in order:
            timed(name, text)
    print(
        f"index {index_path}: {index.status().documents} documents, {index.status().chunks} chunks; scope "
        f"path_glob={glob!r} sees {visible} documents; {len(texts)} SciFact test queries, hybrid, k=10, collapsed"
    )
    for name in callers:
        print(
            f"{name:>9}: wall mean {statistics.mean(wall[name]):.2f} ms, p50 {percentile(wall[name], 0.5):.2f} ms; "
            f"CPU mean {statistics.mean(cpu[name]):.2f} ms, p50 {percentile(cpu[name], 0.5):.2f} ms"
        )
    print(
        f"overhead of the scope: wall {statistics.mean(wall['scoped']) / statistics.mean(wall['unscoped']) - 1:+.1%}, "
        f"CPU {statistics.mean(cpu['scoped']) / statistics.mean(cpu['unscoped']) - 1:+.1%} (means); "
        f"load average {os.getloadavg()[0]:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path)
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--cold-only", action="store_true", help="skip the in-process timings")
    parser.add_argument("--tree", action="append", type=Path, help="compare the cold search of these source trees")
    parser.add_argument("--query", default="levee", help="the query of --tree's cold searches")
    parser.add_argument("--stages", action="store_true", help="CPU per query stage of a warm hybrid search")
    parser.add_argument("-n", type=int, default=100, help="--stages, --scoped: queries timed")
    parser.add_argument("--scoped", action="store_true", help="a scoped token's search against the owner's")
    parser.add_argument("--scope-glob", default="*#[0-4]*", help="--scoped: the token's scope (a path glob)")
    parser.add_argument("--hash-bow", action="store_true", help="--scoped: the model-free embedder")
    args = parser.parse_args()
    if args.scoped:
        if args.index is None:
            parser.error("--scoped needs --index")
        scoped_overhead(args.index, args.queries, args.n, args.scope_glob, args.hash_bow)
        return
    if args.tree:
        if args.index is None:
            parser.error("--tree needs --index")
        compare_trees(str(args.index), args.tree, args.cold_runs, args.query)
        return
    if args.stages:
        if args.index is None:
            parser.error("--stages needs --index")
        query_stages(args.index, [json.loads(line)["text"] for line in args.queries.open(encoding="utf-8")], args.n)
        return

    from citeline import Index

    tmp = None
    index_path = args.index
    if index_path is None:
        tmp = tempfile.mkdtemp(prefix="citeline-bench-")
        index_path = Path(tmp) / "index"
        Index.create(index_path).ingest([REPO / "seeds"])
    citeline = shutil.which("citeline") or str(Path(sys.executable).parent / "citeline")
    queries = [json.loads(line)["text"] for line in args.queries.open(encoding="utf-8")]

    cold, cold_cpu, cold_rss = [], [], []
    for i in range(args.cold_runs):
        start = time.perf_counter()
        process = subprocess.Popen(
            [citeline, "search", queries[i % len(queries)], "--index", str(index_path), "-k", str(args.k)],
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        _, status, usage = os.wait4(process.pid, 0)
        cold.append(time.perf_counter() - start)
        if status:
            sys.exit(f"citeline search failed (wait status {status})")
        cold_cpu.append(usage.ru_utime + usage.ru_stime)
        cold_rss.append(usage.ru_maxrss / 1024)  # KiB on Linux
    print(f"index {index_path}: {Index.open(index_path).status().chunks} chunks")
    print(
        f"cold CLI search ({args.cold_runs} runs): median {statistics.median(cold):.3f} s, "
        f"max {max(cold):.3f} s; CPU time (user+sys) median {statistics.median(cold_cpu):.3f} s, "
        f"min {min(cold_cpu):.3f} s; peak RSS median {statistics.median(cold_rss):.0f} MiB; "
        f"load average {os.getloadavg()[0]:.1f}"
    )

    index = Index.open(index_path)
    modes: list[str | None] = [None]
    if "mode" in inspect.signature(index.search).parameters:
        modes = ["dense", "lexical", "hybrid"]
    if args.cold_only:
        modes = []
    for mode in modes:
        kwargs: dict[str, Any] = {} if mode is None else {"mode": mode}
        index.search(queries[0], k=args.k, **kwargs)
        timings, cpu = [], []
        for query in queries:
            start, started_cpu = time.perf_counter(), time.process_time()
            index.search(query, k=args.k, **kwargs)
            timings.append((time.perf_counter() - start) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
        print(
            f"in-process {mode or 'dense'} search, {len(queries)} queries: p50 {percentile(timings, 0.5):.1f} ms, "
            f"p99 {percentile(timings, 0.99):.1f} ms; CPU time p50 {percentile(cpu, 0.5):.1f} ms"
        )
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
