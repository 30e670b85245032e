"""Vector index kinds compared: build CPU-s and wall-s, file size, p50/p99 search ms on one thread, recall@10
against exact search, with and without filters.

    python bench/ann.py [--sizes 100000 1000000] [--kinds flat ivf hnsw] [--queries 200] [--out FILE]
                        [--nprobe 16 32 64 128] [--ef 32 64 128 256]
    python bench/ann.py --index PATH [--queries 50]     # an ivf index's search variants: see below
    python bench/ann.py --add-codes PATH                # give a copy's ivf base the codes a compaction writes

Vectors: 384-dimensional unit vectors with topic structure (see :func:`clustered`): about one topic per 500
vectors, each vector its topic's centre plus noise in a shared 64-dimensional subspace plus isotropic noise,
calibrated so a vector's nearest neighbour has cosine about 0.75 and a random pair about 0.0-0.1, as for
all-MiniLM-L6-v2 chunk vectors. Queries are fresh draws from the same distribution (not indexed vectors).

Filters: ``random-1%`` and ``random-10%`` allow random ids; ``topics-10%`` allows the vectors of a random 10 % of
the topics (a filter correlated with the geometry, like a source or a folder). The ground truth is an exact scan.

Each kind is built, written, then read back from its file as a reader would (memory-mapped) before searching;
the search figures are from one process on one FAISS thread. Run by hand; not part of CI. Figures from this
machine (2 shared cores, other jobs running) are quoted in ``citeline/vectors/auto.py`` and ``ivf/index.py``.

Figures (``bench/results/ann-100k.jsonl``, ``ann-1m.jsonl``; 200 queries, p50/p99 ms on one thread, recall@10;
filters ran with ``EXACT_FILTER_ROWS`` = 20,000, since lowered to 2,000: see below)::

    n     kind  build CPU-s/wall-s  file MB  p50/p99 ms  recall  random-1%      random-10%     topics-10%
    100k  flat     0.4 /   1.5       147     24.9/52.4   1.000   0.35 ms        14.1 ms        12.0 ms
    100k  ivf     11.8 /  30.7       151      3.2/25.4   1.000   0.42 ms        63.9 ms (*)    40.7 ms (*)
    100k  hnsw    29.4 / 102.3       173      0.31/16.6  0.999   0.69 ms        39.3 ms (*)    51.6 ms (*)
    1M    flat     4.4 /  23.6      1472     445 / 649   1.000   45 ms          164 ms         382 ms
    1M    ivf    138.3 / 426.3      1494     8.4/73.9    1.000   37.0 ms (*)    119 ms         81 ms, 0.766 (**)

(**) before ``ivf.FILTERED_BUDGET``: the selector search probed the unfiltered nprobe's lists, and a filter
correlated with the topics left them nearly empty of allowed vectors. With the budget (2x), at 100k, 100 queries:
topics-10% recall 0.992 p50 8.8 ms, random-10% 1.000 10.3 ms, random-3% 1.000 3.9 ms (1x: topics-10% 0.945).
nprobe sweep at 1M (nlist 4000): 16 -> 2.3 ms, 32 -> 4.4 ms, 64 -> 6.2 ms, 128 -> 9.8 ms, recall 1.000 for all.
HNSW was not built at 1M within this session (about 1,000 CPU-s extrapolating 29 CPU-s at 100k, n log n).

(*) the exact scan of 10k allowed rows, which cost more than the selector search would: hence 2,000.
nprobe sweep at 100k (nlist 1265): 8 -> 0.6 ms, 16 -> 1.1 ms, 32 -> 2.2 ms, 64 -> 3.9 ms, recall 1.000 for all;
efSearch sweep at 100k: 16 -> 0.906, 32 -> 0.973, 64 -> 0.999, 128 -> 1.000 (p50 0.25-0.49 ms).
This synthetic data is easier for IVF than real embeddings (its topics are well separated), so the default nprobe
(``ivf.nprobe_for``: 1/40 of the lists, at least 32) keeps a wide margin over the smallest setting that reached
0.95 here.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from citeline.vectors import kind_of
from citeline.vectors.hnsw import HNSWIndex
from citeline.vectors.ivf import IVFIndex, nlist_for, nprobe_for

DIMENSION = 384
K = 10


def clustered(n: int, seed: int, topics: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors with topic structure, and each one's topic (see the module docstring)."""
    rng = np.random.default_rng(1000)  # the same topics and subspace for the corpus and its queries
    topics = topics or max(50, n // 500)
    centres = rng.standard_normal((topics, DIMENSION)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    basis = np.linalg.qr(rng.standard_normal((DIMENSION, 64)))[0].T.astype(np.float32)  # 64 x 384, orthonormal
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, topics, n)
    out = np.empty((n, DIMENSION), dtype=np.float32)
    for start in range(0, n, 100_000):
        end = min(n, start + 100_000)
        block = centres[topic[start:end]].copy()
        block += 0.9 * (rng.standard_normal((end - start, 64)).astype(np.float32) / 8) @ basis
        block += 0.55 * rng.standard_normal((end - start, DIMENSION)).astype(np.float32) / np.sqrt(DIMENSION)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:end] = block
    return out, topic


def exact(vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, mask: np.ndarray | None) -> list[set[int]]:
    """The exact top-K ids of each query (all FAISS threads)."""
    rows = np.arange(len(ids)) if mask is None else np.flatnonzero(mask)
    flat = faiss.IndexFlatIP(DIMENSION)
    flat.add(vectors[rows])
    _, found = flat.search(queries, K)
    return [set(ids[rows[f[f >= 0]]].tolist()) for f in found]


def timed_searches(index: Any, queries: np.ndarray, truth: list[set[int]], allowed: np.ndarray | None) -> dict:
    """p50 and p99 ms of one query at a time, and mean recall@K against ``truth``."""
    times, recalls = [], []
    for query, expected in zip(queries, truth, strict=True):
        start = time.perf_counter()
        hits = index.search(query, K, allowed)
        times.append((time.perf_counter() - start) * 1000)
        recalls.append(len({h for h, _ in hits} & expected) / max(1, len(expected)))
        assert len(hits) == len(expected), "a search returned fewer than k results"
    return {
        "p50_ms": round(float(np.percentile(times, 50)), 2),
        "p99_ms": round(float(np.percentile(times, 99)), 2),
        "recall": round(float(np.mean(recalls)), 4),
    }


def index_variants(path: Path, count: int) -> None:
    """Search variants on an existing index with an ivf base (bench/scale.py's, hash-bow vectors, SciFact claims
    as queries): CPU ms a query (mean, one FAISS thread) and recall@10 of the base against an exact scan of the
    base's vectors (a result counts when its exact score reaches the 10th best, as bench/scale.py counts).

    1M-chunk scale index after its 1% update (960k base rows, 2,147 lists, nprobe 216, 9,876 tombstones, 21.8k
    delta rows), 50 claims, machine load 9-15 on 2 cores, peak RSS 4.5 GB (CPU ms; recall of the base)::

        base k=10, FAISS's 32 prefetch threads on its memory-mapped lists  62.4 (0.948)
        base k=10, prefetch off (ivf.py since)                             28.6 (0.948)
        k=210 / k=200 + 9,876 tombstones / k=210 IDSelectorNot(Batch(...))  27.7 / 35.3 / 36.7
        SQ8 codes (by residual), the same lists, exact re-rank of the top R:
          nprobe 128: R=10 12.0 (0.900), R=50 12.4 (0.926), R=200 12.6 (0.930)
          nprobe 216: R=10 19.3 (0.920), R=50 17.9 (0.944), R=200 19.0 (0.948)
        a 12k-row delta, faiss.knn k=210: 14.0 on FAISS's 2 OpenMP threads, 2.6 on one

    (The selector's recall is lower only because the exact reference keeps the tombstoned rows.) An earlier run
    (load ~9): prefetch on/off 52.2/24.1, the base in memory 28.1; SQ8 without residual at nprobe 216, R=200 17.3
    (0.932); fp16 codes 20-22 (0.948).

    So SQ8 buys 1.3x at the same recall on these near-uniform vectors (the lists probed are the cost, and this
    data needs 10 % of them), at 25 % more disk (codes beside the exact vectors): not worth a new file format yet.

    4-bit fast-scan PQ codes (``IndexIVFPQFastScan``) are (lat3, the same index, load 13-17; CPU ms, recall of
    the base): PQ 192x4 of the residuals, nprobe 648 (3x), re-rank 1,000 exactly: 10.2 (0.958) against the float
    scan's 22.6 (0.948); 4x deeper 12.7 (0.962); PQ 64x4 without residuals (FAISS's default) 0.60 at best; FAISS's
    fast-scan search past k = 1,024 is 3x slower (re-rank 2,000: 21.9). Hence ``citeline.vectors.ivf.codes``;
    ``--add-codes`` gives a copy's base the codes a compaction would write, to compare on one generation.
    """
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import scale
    from _synthetic import HashBowEmbedder

    from citeline import Index

    index = Index.open(path, embedder=HashBowEmbedder())
    queries = np.ascontiguousarray(HashBowEmbedder().encode(scale.load_queries(count)), dtype=np.float32)
    segmented: Any = index.snapshot().vectors  # a segmented ivf reader: its base, deltas and tombstones
    inner: Any = getattr(segmented.base, "inner", segmented.base)  # an ivf base, under its segments wrapper
    ivf: Any = faiss.extract_index_ivf(inner._index)
    ids = inner.ids()
    data = inner.vectors(ids)
    truth, _ = faiss.knn(queries, data, K, metric=faiss.METRIC_INNER_PRODUCT)
    dead = np.ascontiguousarray(segmented.tombstones)
    faiss.omp_set_num_threads(1)

    def measure(name: str, search: Any, recall: bool = True) -> None:
        cpu, recalls = [], []
        search(queries[0])
        for row, query in enumerate(queries):
            start = time.process_time()
            found = np.asarray(search(query))
            cpu.append((time.process_time() - start) * 1000)
            found = found[found >= 0][:K]
            scores = data[np.searchsorted(ids, found)] @ query
            recalls.append(np.count_nonzero(scores >= truth[row, K - 1] - 1e-5) / K)
        figures = {"variant": name, "cpu_ms": round(float(np.mean(cpu)), 1)}
        print(json.dumps({**figures, "recall": round(float(np.mean(recalls)), 3)} if recall else figures), flush=True)

    def params(nprobe: int, selector: Any = None) -> Any:
        out = faiss.SearchParametersIVF()
        out.nprobe = nprobe
        if selector is not None:
            out.sel = selector
        return out

    nprobe = int(ivf.nprobe)
    lists: Any = faiss.downcast_InvertedLists(ivf.invlists)
    for threads in (32, 0):
        lists.prefetch_nthread = threads
        measure(f"base k=10, {threads} prefetch threads", lambda q: ivf.search(q[None], K, params=params(nprobe))[1][0])
    for depth in (210, 200 + len(dead)):
        measure(f"base k={depth}", lambda q, d=depth: ivf.search(q[None], d, params=params(nprobe))[1][0])
    batch = faiss.IDSelectorBatch(dead)
    excluded = params(nprobe, faiss.IDSelectorNot(batch))
    measure(
        "base k=210, IDSelectorNot(IDSelectorBatch(tombstones))",
        lambda q: ivf.search(q[None], 210, params=excluded)[1][0],
    )
    sample = data[np.sort(np.random.default_rng(0).choice(len(data), min(len(data), 100_000), replace=False))]
    quantizer: Any = faiss.clone_index(ivf.quantizer)
    sq8: Any = faiss.IndexIVFScalarQuantizer(
        quantizer, int(ivf.d), int(ivf.nlist), faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT, True
    )
    sq8.own_fields = True
    quantizer.this.disown()
    sq8.train(sample)
    faiss.omp_set_num_threads(2)
    sq8.add_with_ids(data, ids)
    faiss.omp_set_num_threads(1)

    def reranked(query: np.ndarray, probes: int, depth: int) -> np.ndarray:
        found = sq8.search(query[None], depth, params=params(probes))[1][0]
        found = found[found >= 0]
        return found[np.argsort(-(data[np.searchsorted(ids, found)] @ query), kind="stable")]

    for probes in (128, nprobe):
        for depth in (10, 50, 200):
            measure(f"sq8 nprobe={probes} rerank {depth}", lambda q, p=probes, d=depth: reranked(q, p, d))
    delta = max(segmented.deltas, key=lambda d: len(d.ids))
    for threads in (2, 1):
        faiss.omp_set_num_threads(threads)
        measure(
            f"delta of {len(delta.ids)} rows, faiss.knn k=210, {threads} OpenMP threads",
            lambda q: faiss.knn(q[None], delta.vectors, 210, metric=faiss.METRIC_INNER_PRODUCT)[1][0][:0],
            recall=False,
        )


def add_codes(index_dir: Path) -> None:
    """Give the ivf base of an index (a copy: the file is rewritten in place) the fast-scan codes that a build or a
    compaction now writes (``citeline.vectors.ivf.codes``), keeping its lists, deltas and tombstones, so that a
    search with and without codes can be compared on the same generation; records the file's new size and
    checksum in the catalog. Prints CPU-s, wall-s and peak RSS."""
    import duckdb

    from citeline.store import catalog, files
    from citeline.vectors.ivf import codes, table

    cpu, wall = time.process_time(), time.perf_counter()
    connection = duckdb.connect(str(index_dir / "meta.duckdb"))
    base = index_dir / str(catalog.read_meta(connection)["vector_base"])
    table_at = table.table_offset(base)
    if table_at is None:
        raise SystemExit(f"{base} has no id table")
    with base.open("rb") as handle:
        handle.seek(table_at)
        table_bytes = handle.read()
    old = codes.locate(base, table_at)  # codes written before: replaced
    os.truncate(base, old[0] if old else table_at)
    codes.append(base)
    magic, count, _, residue = table._FOOTER.unpack(table_bytes[-table._FOOTER.size :])
    with base.open("ab") as out:
        moved = out.tell()
        out.write(table_bytes[: -table._FOOTER.size] + table._FOOTER.pack(magic, count, moved, residue))
    catalog.write_meta(
        connection, {"faiss_bytes": files.artifact_bytes(base), "faiss_sha256": files.artifact_checksum(base)}
    )
    connection.close()
    print(
        json.dumps(
            {
                "file": base.name,
                "codes_bytes": codes.locate(base, moved),
                "cpu_s": round(time.process_time() - cpu, 1),
                "wall_s": round(time.perf_counter() - wall, 1),
                "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            }
        )
    )


def main() -> None:
    """Run every kind at every size and print (and optionally write) one JSON object per measurement."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--kinds", nargs="+", default=["flat", "ivf", "hnsw"])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--nprobe", type=int, nargs="*", default=[])
    parser.add_argument("--ef", type=int, nargs="*", default=[])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--index", type=Path, help="an index with an ivf base: its search variants instead")
    parser.add_argument("--add-codes", type=Path, help="an index (a copy) whose ivf base gets codes")
    args = parser.parse_args()
    if args.add_codes:
        add_codes(args.add_codes)
        return
    if args.index:
        index_variants(args.index, args.queries)
        return
    results = []

    def emit(row: dict) -> None:
        row["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
        print(json.dumps(row), flush=True)
        results.append(row)
        if args.out:
            args.out.write_text("".join(json.dumps(r) + "\n" for r in results))

    for n in args.sizes:
        vectors, topic = clustered(n, seed=1)
        queries, _ = clustered(args.queries, seed=2)
        ids = np.random.default_rng(3).choice(2**62, n, replace=False).astype(np.int64)
        rng = np.random.default_rng(4)
        chosen_topics = rng.choice(topic.max() + 1, max(1, (topic.max() + 1) // 10), replace=False)
        masks: dict[str, np.ndarray | None] = {
            "none": None,
            "random-1%": rng.random(n) < 0.01,
            "random-10%": rng.random(n) < 0.10,
            "topics-10%": np.isin(topic, chosen_topics),
        }
        truths = {name: exact(vectors, ids, queries, mask) for name, mask in masks.items()}
        allowed = {name: None if mask is None else np.sort(ids[mask]) for name, mask in masks.items()}
        probe = faiss.IndexFlatIP(DIMENSION)
        probe.add(vectors[: min(n, 200_000)])
        top1 = float(probe.search(queries[:50], 1)[0].mean())
        pairs = float(np.mean(np.sum(vectors[:1000] * vectors[1000:2000], axis=1)))
        print(
            json.dumps(
                {
                    "n": n,
                    "nlist": nlist_for(n),
                    "nprobe": nprobe_for(nlist_for(n)),
                    "query_top1_cos": round(top1, 3),
                    "random_pair_cos": round(pairs, 3),
                }
            ),
            flush=True,
        )
        del probe
        faiss.omp_set_num_threads(2)
        for name in args.kinds:
            kind = kind_of(name)
            cpu, wall = time.process_time(), time.perf_counter()
            built = kind.build(ids, vectors, DIMENSION)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            with tempfile.TemporaryDirectory(dir="/tmp") as folder:
                path = Path(folder) / f"vectors.1.{kind.suffix}"
                built.save(path)
                del built
                start = time.perf_counter()
                index = kind.load(path)
                load_ms = (time.perf_counter() - start) * 1000
                base = {
                    "n": n,
                    "kind": name,
                    "build_cpu_s": round(cpu, 1),
                    "build_wall_s": round(wall, 1),
                    "file_mb": round(path.stat().st_size / 2**20),
                    "load_ms": round(load_ms, 1),
                }
                faiss.omp_set_num_threads(1)
                settings: list[tuple[str, Any]] = [("default", None)]
                if name == "ivf":
                    settings += [("nprobe", p) for p in args.nprobe]
                if name == "hnsw":
                    settings += [("ef", e) for e in args.ef]
                for setting, value in settings:
                    if setting == "nprobe":
                        IVFIndex.nprobe = value
                    if setting == "ef":
                        HNSWIndex.ef_search = value
                    for filter_name, truth in truths.items():
                        if setting != "default" and filter_name != "none":
                            continue
                        row = {
                            **base,
                            "setting": setting if value is None else f"{setting}={value}",
                            "filter": filter_name,
                        }
                        emit({**row, **timed_searches(index, queries, truth, allowed[filter_name])})
                IVFIndex.nprobe = None
                HNSWIndex.ef_search = None
                faiss.omp_set_num_threads(2)
                del index


if __name__ == "__main__":
    main()
