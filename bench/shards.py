"""Sharded indexes: ingest and query throughput with 1, 2 and 4 shards, against a plain index.

    python bench/shards.py [--documents 400] [--queries 100] [--shards 1 2 4] [--parallel processes] [--dask-workers N]
        [--dask-search]   # also search each sharded root as Dask tasks on the workers (dask_* columns)
    python bench/shards.py --rerun DIR --before /work/main   # an unchanged re-run, this checkout against another

Ingests the first ``--documents`` SciFact abstracts (one JSONL file) with the real model into a plain index and
into a root of each shard count (shard runs in worker processes, or on a local Dask cluster with
``--dask-workers``), then runs ``--queries`` SciFact queries once per mode on each (after one warm-up query).
CPU seconds include worker processes (``RUSAGE_CHILDREN``, counted once they exit); Dask workers run in this
process (``processes=False``) so their CPU is ours. Prints one JSON line per configuration and a table. Run by
hand (a few minutes on 2 cores); not part of CI.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"
MODES = ("dense", "lexical", "hybrid")


def cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def corpus(folder: Path, documents: int) -> Path:
    """The first ``documents`` SciFact abstracts as one JSONL file in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    with (SCIFACT / "corpus.jsonl").open() as source, (folder / "scifact.jsonl").open("w") as out:
        for line, _ in zip(source, range(documents), strict=False):
            record = json.loads(line)
            out.write(json.dumps({"id": record["_id"], "title": record["title"], "text": record["text"]}) + "\n")
    return folder


def latency(root: Path, build: Path | None, shards: int, count: int) -> dict[str, object]:
    """p50/p99 ms of lexical and hybrid ranking on ``root``: per-shard candidates against whole score arrays."""
    import sys

    import numpy as np

    sys.path.insert(0, str(REPO / "bench"))
    from _synthetic import HashBowEmbedder

    from citeline import Index
    from citeline.lexical.analyzer import LexicalIndex
    from citeline.sharding.index import ShardedIndex
    from citeline.sharding.search import MergedLexical

    per_shard = MergedLexical.ranked
    figures: dict[str, object] = {"root": str(root), "shards": shards}
    if build is not None:
        cpu, wall = cpu_seconds(), time.perf_counter()
        built = Index.create(root, embedder=HashBowEmbedder(), max_tokens=254, overlap_tokens=32, shards=shards)
        assert isinstance(built, ShardedIndex)
        built.ingest([build], parallel="serial")
        figures["build"] = {"wall_s": round(time.perf_counter() - wall, 1), "cpu_s": round(cpu_seconds() - cpu, 1)}
    index = Index.open(root, embedder=HashBowEmbedder())
    figures["chunks"] = index.status().chunks
    with (SCIFACT / "queries.jsonl").open() as handle:
        queries = [json.loads(line)["text"] for line, _ in zip(handle, range(count), strict=False)]
    whole_arrays = {"before (whole arrays)": True, "after (top candidates)": False}
    times: dict[str, list[float]] = {f"{mode} {name}": [] for mode in ("lexical", "hybrid") for name in whole_arrays}
    cpu_used = dict.fromkeys(times, 0.0)
    for query in [queries[0], *queries]:  # the first one warms the snapshot
        for mode in ("lexical", "hybrid"):
            for name, whole in whole_arrays.items():
                if whole:
                    MergedLexical.ranked = LexicalIndex.ranked  # type: ignore[method-assign,assignment]  # its scores, chunk_ids
                else:
                    MergedLexical.ranked = per_shard  # type: ignore[method-assign]
                cpu, wall = time.process_time(), time.perf_counter()
                index.rank(query, 10, mode=mode)
                times[f"{mode} {name}"].append(1000 * (time.perf_counter() - wall))
                cpu_used[f"{mode} {name}"] += time.process_time() - cpu
    MergedLexical.ranked = per_shard  # type: ignore[method-assign]
    figures["ms"] = {
        key: {
            "p50": round(float(np.percentile(values[1:], 50)), 2),
            "p99": round(float(np.percentile(values[1:], 99)), 2),
            "cpu_ms_per_query": round(1000 * cpu_used[key] / len(values), 2),
        }
        for key, values in times.items()
    }
    figures["queries"] = count
    return figures


def rerun_child(root: Path, docs: Path, checkout: str) -> None:
    """One unchanged re-run of ``root`` with the citeline of ``checkout`` (serial: every CPU-s is this process's)."""
    import sys

    sys.path.insert(0, checkout)
    sys.path.insert(0, str(REPO / "bench"))
    from _synthetic import HashBowEmbedder

    from citeline import Index
    from citeline.ingest import pipeline
    from citeline.sharding.index import ShardedIndex

    read: list[str] = []
    real = pipeline.parse_source

    def counted(source, **options):  # type: ignore[no-untyped-def]
        read.append(source.source_id)
        return real(source, **options)

    pipeline.parse_source = counted
    index = Index.open(root / "index", embedder=HashBowEmbedder())
    assert isinstance(index, ShardedIndex)
    cpu, wall = time.process_time(), time.perf_counter()
    run = index.ingest([docs], parallel="serial", prepare_queries=False)
    figures = {"checkout": checkout, "cpu_s": round(time.process_time() - cpu, 2)}
    figures |= {"wall_s": round(time.perf_counter() - wall, 2), "files_read": len(read), "unchanged": run.unchanged}
    print(json.dumps(figures), flush=True)


def rerun(root: Path, before: str, shards: int = 4, per_file: int = 100) -> None:
    """Build (once) a ``shards``-shard root of every SciFact abstract in JSONL files of ``per_file`` records with
    the hash-bow embedder, then time unchanged re-runs with ``before``'s citeline and this one's, alternately."""
    import os
    import subprocess
    import sys

    docs = root / "docs"
    if not (root / "index").exists():
        sys.path.insert(0, str(REPO / "bench"))
        from _synthetic import HashBowEmbedder

        from citeline import Index
        from citeline.sharding.index import ShardedIndex

        docs.mkdir(parents=True)
        with (SCIFACT / "corpus.jsonl").open() as source:
            lines = source.readlines()
        for start in range(0, len(lines), per_file):
            (docs / f"part-{start // per_file:03d}.jsonl").write_text("".join(lines[start : start + per_file]))
        old = time.time() - 60  # settled files (citeline.ingest.freshness.SETTLED_SECONDS)
        for path in docs.iterdir():
            os.utime(path, (old, old))
        index = Index.create(root / "index", embedder=HashBowEmbedder(), shards=shards)
        assert isinstance(index, ShardedIndex)
        index.ingest([docs], parallel="serial", prepare_queries=False)
    for checkout in (before, str(REPO), before, str(REPO)):
        command = [sys.executable, __file__, "--rerun", str(root), "--rerun-child", checkout]
        subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": checkout})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=Path, default=None, help="Time lexical/hybrid ranking on this sharded root.")
    parser.add_argument("--build", type=Path, default=None, help="With --latency: first build ROOT from these docs.")
    parser.add_argument("--documents", type=int, default=400)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--parallel", default="processes", choices=("processes", "threads", "serial"))
    parser.add_argument("--dask-workers", type=int, default=None)
    parser.add_argument("--dask-search", action="store_true", help="With --dask-workers: also search as Dask tasks.")
    parser.add_argument("--rerun", type=Path, default=None, help="Time an unchanged re-run of a 4-shard root here.")
    parser.add_argument("--before", default=None, help="With --rerun: the checkout to compare with (e.g. /work/main).")
    parser.add_argument("--rerun-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rerun is not None:
        if args.rerun_child:
            rerun_child(args.rerun, args.rerun / "docs", args.rerun_child)
        else:
            rerun(args.rerun, args.before or str(REPO))
        return
    if args.latency is not None:
        print(json.dumps(latency(args.latency, args.build, args.shards[-1], args.queries)), flush=True)
        return

    from citeline import Index

    tmp = Path(tempfile.mkdtemp(prefix="citeline-shards-bench-"))
    try:
        docs = corpus(tmp / "docs", args.documents)
        with (SCIFACT / "queries.jsonl").open() as handle:
            queries = [json.loads(line)["text"] for line, _ in zip(handle, range(args.queries), strict=False)]
        cluster = None
        if args.dask_workers:
            from distributed import LocalCluster

            cluster = LocalCluster(n_workers=args.dask_workers, threads_per_worker=1, processes=False)
        rows = []
        for shards in [None, *args.shards]:
            name = "plain" if shards is None else f"{shards} shards"
            index = Index.create(tmp / name.replace(" ", "-"), shards=shards)
            settings: dict[str, Any] = {}
            if shards is not None:
                settings = {"dask_address": cluster.scheduler_address} if cluster else {"parallel": args.parallel}
            cpu, wall = cpu_seconds(), time.perf_counter()
            run = index.ingest([docs], **settings)
            ingest = (time.perf_counter() - wall, cpu_seconds() - cpu)
            row = {
                "config": name,
                "chunks": index.status().chunks,
                "ingest_wall_s": round(ingest[0], 1),
                "ingest_cpu_s": round(ingest[1], 1),
                "chunks_per_wall_s": round(run.chunks_embedded / ingest[0], 1),
            }
            searchers = {"": index}
            if cluster is not None and shards is not None and args.dask_search:
                # the same root searched as tasks on the workers (citeline.sharding.remote)
                searchers["dask_"] = Index.open(
                    index.path, embedder=index.embedder, dask_address=cluster.scheduler_address
                )
            for prefix, searcher in searchers.items():
                searcher.search(queries[0], k=10)  # warm: the query model, the snapshot (the workers' too)
                for mode in MODES:
                    cpu, wall = cpu_seconds(), time.perf_counter()
                    for query in queries:
                        searcher.search(query, k=10, mode=mode)
                    elapsed = time.perf_counter() - wall
                    row[f"{prefix}{mode}_qps"] = round(len(queries) / elapsed, 1)
                    row[f"{prefix}{mode}_cpu_ms_per_query"] = round(1000 * (cpu_seconds() - cpu) / len(queries), 1)
            print(json.dumps(row), flush=True)
            rows.append(row)
        if cluster is not None:
            cluster.close()
        columns = list(dict.fromkeys(column for row in rows for column in row))
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in rows:
            print("| " + " | ".join(str(row.get(column, "")) for column in columns) + " |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
