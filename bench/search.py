"""Query latency: cold CLI wall time and in-process ``Index.search`` p50/p99.

    python bench/search.py [--index DIR] [--queries ../shared/benchmarks/scifact/queries.jsonl] [--cold-runs 10]

Without ``--index`` it builds an index of ``seeds/`` in a temporary folder. Cold runs start a new
``citeline search`` process each time (the query path imports no Prefect, torch, transformers, bm25s, scipy or
pandas) and report its wall time, CPU time (user+sys, from wait4) and peak RSS; in-process timings run every query
once per mode after one warm-up query (``--cold-only`` skips them). Where a cold search spends its time:
``python -X importtime -m citeline.cli.main search QUERY --index DIR`` and ``python -m cProfile -s cumtime -m
citeline.cli.main ...``. Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path)
    parser.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    parser.add_argument("--cold-runs", type=int, default=10)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--cold-only", action="store_true", help="skip the in-process timings")
    args = parser.parse_args()

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
