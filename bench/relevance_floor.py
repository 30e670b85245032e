"""Calibrate and measure the relevance floor (``citeline.query.relevance``) on SciFact and off-topic queries.

    citeline ingest $SCIFACT/corpus.jsonl --index /tmp/scifact-int8 --backend onnx-int8
    python bench/relevance_floor.py /tmp/scifact-int8 --beir $SCIFACT [--fit]

Each query is ranked as ``citeline eval`` ranks it (``Index.rank``, 100 chunks; documents by their best chunk) and
every ranked chunk gets its two features (cosine, idf-weighted coverage). Calibration (``--fit``): on SciFact
**train**, each judged document's best-ranked chunk is an on-topic example; on the even-numbered off-topic queries
(bench/data/off_topic_queries.txt), their top-10 chunks are off-topic examples; a logistic regression (classes
weighted equally) fits each model (hybrid/dense: cosine and coverage; lexical: coverage) and the floor is the
largest on a grid (0.01 steps to 0.1, then 0.05) at which no train claim's top 10 is all below it (the default
rule: a search returns nothing when all its hits are below the floor, else all of them). Report (always): with the
shipped coefficients and floor, on SciFact **test** and on the odd-numbered off-topic queries: off-topic queries
whose top 10 is empty, test claims whose top 10 lost every relevant document it held, recall@10 and nDCG@10 with
and without the floor (the default's rule, and the same floor applied per hit as ``min_score``), and
(``Index.search``, k=10, collapse on, default min_score) off-topic queries with no hit. Figures: docs/quality.md.
"""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from citeline import Index
from citeline.eval.beir import CorpusChunks, documents_by_best_chunk, load_beir, ndcg
from citeline.query import relevance

SCIFACT = Path("/work/shared/benchmarks/scifact")
OFF_TOPIC = Path(__file__).resolve().parent / "data" / "off_topic_queries.txt"
DEPTH = 100  #: chunks ranked per query
GRID = [round(0.01 * i, 2) for i in range(10)] + [round(0.05 * i, 2) for i in range(2, 20)]


def off_topic_queries() -> tuple[list[str], list[str]]:
    """The off-topic set's calibration half (even lines) and report half (odd lines)."""
    lines = [line.strip() for line in OFF_TOPIC.read_text().splitlines()]
    queries = [line for line in lines if line and not line.startswith("#")]
    return queries[0::2], queries[1::2]


def features(index: Index, query: str, mode: str, chunks: CorpusChunks) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The query's ranked chunk ids and their cosines (NaN in lexical mode) and coverages."""
    hits = index.rank(query, DEPTH, mode=mode, allowed=chunks.allowed)
    ids = np.array([chunk_id for chunk_id, _ in hits], dtype=np.int64)
    snapshot = index.snapshot()
    covered = relevance.coverage(snapshot.lexical, query, ids)
    assert covered is not None
    if mode == "lexical":
        return list(ids), np.full(len(ids), np.nan), covered
    return list(ids), relevance.cosines(snapshot.vectors, index.encode_query(query), ids), covered


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Logistic regression by Newton's method, both classes weighted equally: ``[intercept, coefficients...]``."""
    design = np.column_stack([np.ones(len(x)), x])
    weights = np.where(y == 1, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1))
    beta = np.zeros(design.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-design @ beta))
        gradient = design.T @ (weights * (y - p))
        hessian = (design * (weights * p * (1 - p))[:, None]).T @ design + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def model_of(mode: str) -> relevance.RelevanceModel:
    return relevance.LEXICAL_MODEL if mode == "lexical" else relevance.DENSE_MODEL


def scored(rows: dict[str, tuple[list[int], np.ndarray, np.ndarray]], model: relevance.RelevanceModel, mode: str):
    """Each query's ranked ids and their relevance under ``model``."""
    return {
        qid: (ids, model.probability(None if mode == "lexical" else cos, cov)) for qid, (ids, cos, cov) in rows.items()
    }


def quality(scores, qrels, record_of, floor: float, *, gate: bool) -> dict[str, float]:
    """nDCG@10, recall@10 and queries losing every relevant top-10 document, with hits below ``floor`` dropped
    (``gate``: the default's rule, every hit dropped when the top 10 chunks are all below it, else none)."""
    ndcgs, recalls, lost, emptied = [], [], 0, 0
    for qid, (ids, rel) in scores.items():
        relevant = {doc for doc, grade in qrels[qid].items() if grade > 0}
        full = documents_by_best_chunk([(c, 0.0) for c in ids], record_of)[:10]
        if gate:
            passed = ids if (np.asarray(rel[:10]) >= floor).any() else []
        else:
            passed = [c for c, r in zip(ids, rel, strict=True) if r >= floor]
        kept = documents_by_best_chunk([(c, 0.0) for c in passed], record_of)[:10]
        ndcgs.append(ndcg(kept, qrels[qid]))
        recalls.append(len(relevant.intersection(kept)) / len(relevant))
        if relevant.intersection(full) and not relevant.intersection(kept):
            lost += 1
        emptied += not kept
    return {
        "ndcg@10": float(np.mean(ndcgs)),
        "recall@10": float(np.mean(recalls)),
        "lost_all": lost,
        "empty": emptied,
        "queries": len(scores),
    }


def off_topic_empty(scores, floor: float) -> int:
    """Off-topic queries whose top 10 chunks are all below ``floor``."""
    return sum(1 for ids, rel in scores.values() if not (np.asarray(rel[:10]) >= floor).any())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index")
    parser.add_argument("--beir", type=Path, default=SCIFACT, help="SciFact in BEIR layout, with qrels/train.tsv")
    parser.add_argument("--fit", action="store_true", help="fit the models and the floor on train (calibration)")
    parser.add_argument("--modes", default="hybrid,lexical,dense")
    args = parser.parse_args()
    index = Index.open(args.index)
    train, test = load_beir(args.beir, "train"), load_beir(args.beir, "test")
    chunks = CorpusChunks(index, train.corpus)
    calibrate_off, report_off = off_topic_queries()
    start, cpu = time.perf_counter(), time.process_time()
    for mode in args.modes.split(","):
        model = model_of(mode)
        floor = model.floor
        if args.fit:
            rows = {qid: features(index, text, mode, chunks) for qid, text in train.queries.items()}
            off = {str(n): features(index, text, mode, chunks) for n, text in enumerate(calibrate_off)}
            positives, negatives = [], []
            for qid, (ids, cos, cov) in rows.items():
                seen: set[str] = set()
                for at, chunk_id in enumerate(ids):
                    doc = chunks.record_of.get(chunk_id)
                    if doc in seen or train.qrels[qid].get(doc or "", 0) <= 0:
                        continue
                    seen.add(doc or "")
                    positives.append((cos[at], cov[at]))
            for _ids, cos, cov in off.values():
                negatives.extend(zip(cos[:10], cov[:10], strict=True))
            x = np.array(positives + negatives)
            y = np.array([1] * len(positives) + [0] * len(negatives))
            beta = fit(x[:, 1:] if mode == "lexical" else x, y)
            if mode == "lexical":
                model = relevance.RelevanceModel(float(beta[0]), 0.0, float(beta[1]), 0.0)
            else:
                model = relevance.RelevanceModel(float(beta[0]), float(beta[1]), float(beta[2]), 0.0)
            print(f"{mode}: fitted on {len(positives)} on-topic and {len(negatives)} off-topic hits: {model}")
            train_scores = scored(rows, model, mode)
            off_scores = scored(off, model, mode)
            floor = 0.0
            for candidate in GRID:
                hit = quality(train_scores, train.qrels, chunks.record_of, candidate, gate=False)
                gated = quality(train_scores, train.qrels, chunks.record_of, candidate, gate=True)
                print(
                    f"  train floor {candidate:.2f}: per hit nDCG@10 {hit['ndcg@10']:.4f} recall@10 "
                    f"{hit['recall@10']:.4f} lost-all {hit['lost_all']}; gate nDCG@10 {gated['ndcg@10']:.4f} empty "
                    f"{gated['empty']}; off-topic (calibration) empty {off_topic_empty(off_scores, candidate)}/"
                    f"{len(off_scores)}"
                )
                if not gated["empty"]:
                    floor = candidate
            model = replace(model, floor=floor)
            print(f"  chosen floor (largest gate that empties no train claim) {floor:.2f}: {model}")
        rows = {qid: features(index, text, mode, chunks) for qid, text in test.queries.items()}
        off = {str(n): features(index, text, mode, chunks) for n, text in enumerate(report_off)}
        test_scores, off_scores = scored(rows, model, mode), scored(off, model, mode)
        before = quality(test_scores, test.qrels, chunks.record_of, 0.0, gate=False)
        for rule in ("gate", "per hit"):
            after = quality(test_scores, test.qrels, chunks.record_of, floor, gate=rule == "gate")
            print(
                f"{mode} test, {rule} at {floor:.2f}: nDCG@10 {before['ndcg@10']:.4f} -> {after['ndcg@10']:.4f}, "
                f"recall@10 {before['recall@10']:.4f} -> {after['recall@10']:.4f}, queries losing every relevant "
                f"top-10 document {after['lost_all']}/{after['queries']}, empty answers {after['empty']}"
            )
        print(
            f"  off-topic (report half) with an empty top 10: {off_topic_empty(off_scores, 0.0)} -> "
            f"{off_topic_empty(off_scores, floor)}/{len(off_scores)}"
        )
        kept = [report_off[int(n)] for n, (_, rel) in off_scores.items() if (np.asarray(rel[:10]) >= floor).any()]
        print(f"  off-topic queries with a hit: {kept}")
        if not args.fit:
            empty = sum(not index.search(text, 10, mode=mode, filters=None, min_score=floor) for text in report_off)
            print(f"  Index.search(k=10, collapse on): off-topic (report half) with no hit {empty}/{len(report_off)}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    print(f"wall {wall:.1f} s, CPU {used:.1f} s, maxrss {usage.ru_maxrss // 1024} MB")


if __name__ == "__main__":
    main()
