"""Sharded indexes, one subcommand each (`--help` after a subcommand gives its options).

    python bench/shards.py throughput --documents 400       # ingest and query throughput with 1, 2 and 4 shards
    python bench/shards.py equality --beir ../shared/benchmarks/scifact --out /tmp/shard-eq  # ranks as one index
    python bench/shards.py dask --out /tmp/dask-ingest  # a sharded ingest on a local Dask cluster

Run by hand; not part of CI. Figures are in docs/scale.md and docs/performance.md with their commands.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"
MODES = ("dense", "lexical", "hybrid")
if TYPE_CHECKING:
    from citeline import Index, SearchResult
TOLERANCE = 1e-6
#: Generated text: sentences of 8-20 words drawn from this many made-up words (a realistic share of distinct terms).
VOCABULARY = 20_000
FILE_BYTES = 16_000


# --- throughput ------------------------------------------------------------------------------------------------------

THROUGHPUT_DOC = """\
Sharded indexes: ingest and query throughput with 1, 2 and 4 shards, against a plain index.

    python bench/shards.py throughput [--documents 400] [--queries 100] [--shards 1 2 4] [--parallel processes]
        [--dask-workers N]
        [--dask-search]   # also search each sharded root as Dask tasks on the workers (dask_* columns)
    python bench/shards.py throughput --rerun DIR --before /work/main  # an unchanged re-run, against another checkout

Ingests the first ``--documents`` SciFact abstracts (one JSONL file) with the real model into a plain index and
into a root of each shard count (shard runs in worker processes, or on a local Dask cluster with
``--dask-workers``), then runs ``--queries`` SciFact queries once per mode on each (after one warm-up query).
CPU seconds include worker processes (``RUSAGE_CHILDREN``, counted once they exit); Dask workers run in this
process (``processes=False``) so their CPU is ours. Prints one JSON line per configuration and a table. Run by
hand (a few minutes on 2 cores); not part of CI.
"""


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
        command = [sys.executable, __file__, "throughput", "--rerun", str(root), "--rerun-child", checkout]
        subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": checkout})


def throughput_main() -> None:
    parser = argparse.ArgumentParser(description=THROUGHPUT_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
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


# --- equality --------------------------------------------------------------------------------------------------------

EQUALITY_DOC = """\
A sharded index ranks exactly as one index: every query of a BEIR collection's splits, in every mode.

    python bench/shards.py equality --beir ../shared/benchmarks/scifact --out /tmp/shard-equality [--shards 4]
        [--splits test train] [--dump results.jsonl]

``--dump`` writes every result list of both indexes (per query, mode and index: chunk ids, doc ids, scores as
``repr`` of the float, texts), one JSON line each, so two builds (before and after a change to ingestion or search)
compare byte for byte: ``cmp before.jsonl after.jsonl``.

Ingests the collection's ``corpus.jsonl`` into a plain index and a ``--shards`` root (flat vectors, shard runs in
threads) with the tests' 64-dimension hashing embedder (``tests/conftest.py``): its cosines take few distinct values, so
ties, the hard case for equality, are everywhere (at the 200th dense place among them). Then searches every query
of each split in each mode on both, k = 10, and counts the pairs whose scores differ by more than 1e-6 at any
place (the ids of exactly tied chunks may come in either order). ``tests/system/test_shard_cluster.py`` checks the test
split in CI; this adds the train split and names each differing query. An existing ``--out`` is reused. Run by
hand: about a minute on 2 cores for SciFact.
"""


def build(beir: Path, out: Path, shards: int) -> tuple[Index, Index]:
    """The plain index and the sharded root over ``beir``'s ``corpus.jsonl`` (ingested as it is), built in ``out``
    unless already there."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import HashEmbedder

    from citeline import Index
    from citeline.sharding.index import ShardedIndex

    if not (out / "sharded").exists():
        corpus = beir / "corpus.jsonl"
        Index.create(out / "plain", embedder=HashEmbedder(), vector_index="flat").ingest([corpus])
        sharded = Index.create(out / "sharded", embedder=HashEmbedder(), vector_index="flat", shards=shards)
        assert isinstance(sharded, ShardedIndex)
        sharded.ingest([corpus], parallel="threads")  # threads: the embedder is the tests' (not importable there)
    return Index.open(out / "plain", embedder=HashEmbedder()), Index.open(out / "sharded", embedder=HashEmbedder())


def _listed(result: SearchResult) -> list[Any]:
    # Everything of a result but the run's id and time (two builds differ in those alone).
    sources = [(source.doc_id, source.chunk_id, source.char_start, source.char_end) for source in result.sources]
    return [
        result.chunk_id, result.doc_id, repr(result.score), repr(result.relevance), result.char_start,
        result.char_end, result.text, sources, repr(result.highlights),
    ]  # fmt: skip


def equality_main() -> None:
    parser = argparse.ArgumentParser(description=EQUALITY_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--splits", nargs="+", default=["test", "train"])
    parser.add_argument("--dump", type=Path, help="write every result list here (JSON lines), for a byte-wise diff")
    args = parser.parse_args()
    from citeline.eval.beir import load_beir

    started = time.perf_counter()
    plain, sharded = build(args.beir, args.out, args.shards)
    print(f"built or opened in {time.perf_counter() - started:.1f} s")
    total = differing = 0
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    for split in args.splits:
        queries = list(load_beir(args.beir, split).queries.values())
        for mode in MODES:
            bad = 0
            for query in queries:
                plain_hits, sharded_hits = plain.search(query, k=10, mode=mode), sharded.search(query, k=10, mode=mode)
                if dump is not None:
                    for name, hits in (("plain", plain_hits), ("sharded", sharded_hits)):
                        listed = [_listed(r) for r in hits]
                        dump.write(json.dumps([split, mode, name, query, listed]) + "\n")
                want = [r.score for r in plain_hits]
                got = [r.score for r in sharded_hits]
                gap = max((abs(a - b) for a, b in zip(got, want, strict=False)), default=0.0)
                if len(got) != len(want) or gap > TOLERANCE:
                    bad += 1
                    print(f"  differs: {split} {mode} (by {gap:.6f}): {query[:90]!r}")
            print(f"{split:6} {mode:8} {bad} of {len(queries)} queries differ")
            total += len(queries)
            differing += bad
    if dump is not None:
        dump.close()
    print(f"all: {differing} of {total} query-mode pairs differ; {time.perf_counter() - started:.1f} s in all")


# --- dask ------------------------------------------------------------------------------------------------------------

DASK_DOC = """\
A sharded ingest on a local Dask cluster: the coordinator's memory as the corpus grows, and the workers' throughput.

    python bench/shards.py dask --out /tmp/dask-ingest [--megabytes 16] [--scales 1 2 4] [--workers 2] [--shards 2]
    PYTHONPATH=/path/to/other/checkout python bench/shards.py dask ...   # the same, with another checkout's citeline
    python bench/shards.py dask --remote --out /tmp/dask-remote --megabytes 4 --scales 1 2   # from an S3 server

Writes a corpus of ``--megabytes`` x scale of generated text (``.txt`` files of about 16 KB of sentences drawn from
a fixed vocabulary, the same on every machine) for each scale, then ingests each into a new root of ``--shards``
shards with ``ShardedIndex.ingest(dask_workers=--workers)``, each run in a child process of its own (the
coordinator: it starts the local cluster, whose scheduler runs in it, and whose workers are its child processes).
The vectors are the tests' HashEmbedder (tests/conftest.py): what is measured is where the texts go, not the model.

A thread samples every 0.1 s the coordinator's RSS and each worker's; the line per scale gives the coordinator's
RSS before the run (imports, index open) and its peak (``ru_maxrss``), the workers' peak RSS, the source megabytes
and documents, the run's wall seconds and the source megabytes a second per worker. Run by hand (a few minutes on
2 cores); not part of CI.

``--remote``: the corpus is put into moto's S3 server (the tests' server, tests/_object_store.py: a subprocess on a
loopback port, its own RSS not counted) and the run ingests ``s3://docs/corpus``: no folder is shared, the workers
fetch the objects themselves, with the credentials of the file named by ``CITELINE_STORAGE_OPTIONS`` in their
environment. Then the same run again (unchanged: a second line, ``rerun``); each line adds the object GETs the
server served during the run.
"""


def write_corpus(folder: Path, megabytes: float, seed: int = 7) -> tuple[int, int]:
    """``megabytes`` of generated text as files of about :data:`FILE_BYTES` under ``folder`` (kept if there);
    returns (files, bytes)."""
    done = folder / ".done"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        rng = random.Random(seed)
        letters = "etaoinshrdlucmfwypvbgkqjxz"
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(VOCABULARY)]
        total, number = 0, 0
        while total < megabytes * 1_000_000:
            sentences, size = [], 0
            while size < FILE_BYTES:
                sentence = " ".join(rng.choice(words) for _ in range(rng.randint(8, 20))).capitalize() + "."
                sentences.append(sentence)
                size += len(sentence) + 1
            text = "\n".join(" ".join(sentences[n : n + 5]) for n in range(0, len(sentences), 5)) + "\n"
            (folder / f"doc-{number:06d}.txt").write_text(text)
            total += len(text)
            number += 1
        done.write_text(json.dumps([number, total]))
    files, total = json.loads(done.read_text())
    return int(files), int(total)


class Sampler(threading.Thread):
    """Samples this process's RSS and its children's (the Dask workers) every ``interval`` seconds."""

    def __init__(self, interval: float = 0.1):
        super().__init__(daemon=True)
        import psutil

        self.process, self.interval = psutil.Process(), interval
        self.peak_self = self.peak_worker = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        import psutil

        while not self.stopped.is_set():
            self.peak_self = max(self.peak_self, self.process.memory_info().rss)
            for child in self.process.children(recursive=True):
                try:
                    self.peak_worker = max(self.peak_worker, child.memory_info().rss)
                except psutil.Error:
                    continue
            self.stopped.wait(self.interval)


def coordinator(corpus: str, root: Path, workers: int, shards: int) -> dict[str, Any]:
    """One sharded run of ``corpus`` (a folder or a URL) into ``root`` (made if it is not there; this process is
    its coordinator); its figures."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import HashEmbedder

    import citeline
    from citeline import Index
    from citeline.sharding.index import ShardedIndex

    if root.exists():
        index = Index.open(root, embedder=HashEmbedder())
    else:
        index = Index.create(root, embedder=HashEmbedder(), vector_index="flat", shards=shards)
    assert isinstance(index, ShardedIndex)
    sampler = Sampler()
    before = sampler.process.memory_info().rss
    sampler.start()
    started = time.perf_counter()
    run = index.ingest([corpus], dask_workers=workers, prepare_queries=False)
    seconds = time.perf_counter() - started
    sampler.stopped.set()
    sampler.join()
    return {
        "citeline": str(Path(citeline.__file__).parent),
        "status": run.status,
        "documents": run.added,
        "unchanged": run.unchanged,
        "seconds": round(seconds, 1),
        "coordinator_rss_before_mb": round(before / 1e6),
        "coordinator_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3),
        "worker_peak_mb": round(sampler.peak_worker / 1e6),
    }


def dask_main() -> None:
    parser = argparse.ArgumentParser(description=DASK_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--megabytes", type=float, default=16)
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--remote", action="store_true", help="ingest the corpus from an S3 server (moto)")
    parser.add_argument("--one", nargs=2, metavar=("CORPUS", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(coordinator(args.one[0], Path(args.one[1]), args.workers, args.shards)))
        return
    tag = str(int(time.time()))
    for scale in args.scales:
        corpus = args.out / f"corpus-{scale}x"
        files, size = write_corpus(corpus, args.megabytes * scale)
        root = args.out / f"root-{scale}x-{tag}"
        with contextlib.ExitStack() as stack:
            source, environment, server = str(corpus), dict(os.environ), None
            if args.remote:
                server = stack.enter_context(_served(corpus, args.out))
                source, environment["CITELINE_STORAGE_OPTIONS"] = "s3://docs/corpus", str(args.out / "storage.json")
            for name in ("run", "rerun") if args.remote else ("run",):
                gets = server.object_gets() if server else 0
                command = [sys.executable, __file__, "dask", "--out", str(args.out), "--one", source, str(root)]
                command += ["--workers", str(args.workers), "--shards", str(args.shards)]
                done = subprocess.run(command, check=True, capture_output=True, text=True, env=environment)
                line = json.loads(done.stdout.splitlines()[-1])
                line.update(scale=scale, files=files, source_mb=round(size / 1e6, 1))
                line["mb_per_s_per_worker"] = round(size / 1e6 / line["seconds"] / args.workers, 2)
                if server:
                    line.update(step=name, object_gets=server.object_gets() - gets)
                print(json.dumps(line), flush=True)


@contextlib.contextmanager
def _served(corpus: Path, out: Path) -> Iterator[Any]:
    # moto's S3 server holding the corpus's files under corpus/ of bucket docs, and the storage options file that
    # reaches it (the coordinator's and, through their environment, the Dask workers' credentials)
    sys.path.insert(0, str(REPO / "tests"))
    from _object_store import S3Server

    server = S3Server(out)
    try:
        for path in sorted(corpus.glob("*.txt")):
            server.put(f"corpus/{path.name}", path.read_bytes())
        (out / "storage.json").write_text(json.dumps(server.options()))
        yield server
    finally:
        server.stop()


COMMANDS = {
    "throughput": throughput_main,
    "equality": equality_main,
    "dask": dask_main,
}


if __name__ == "__main__":
    import _subcommands  # bench/ is on sys.path when this file runs as a script

    _subcommands.run(__doc__, COMMANDS)
