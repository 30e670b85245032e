"""Choose every ranking setting on a BEIR dataset's TRAIN split; report train and test separately.

    python bench/tune_quality.py --beir ../shared/benchmarks/scifact --index /tmp/quality/title \\
        [--compare /tmp/quality/base] > bench/results/scifact-quality-train.txt

The index must hold the dataset's corpus (``citeline eval --beir DIR --index DIR`` builds it). Settings that need
no re-embedding are varied in-process over that one index: query vectors (the index's own query encoder), every
chunk's cosine and each BM25 variant's chunk scores are computed once per query, and each setting re-ranks them
with numpy exactly as ``citeline.query.stages`` (the hybrid stages) does (checked: the shipped setting's figures equal
``citeline eval``'s). Every choice is the best mean nDCG@10 on ``train``; ``test`` is printed beside it and never
used to choose. ``--compare`` scores a second index (e.g. one built without contextual chunk headers) with the
chosen settings. Run by hand; not part of CI.

The relevance floor: ``python bench/tune_quality.py relevance-floor INDEX --beir DIR [--fit]`` calibrates it on
train and reports it on test and off-topic queries (see ``RELEVANCE_FLOOR_DOC``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from citeline import Index
from citeline.eval.beir import CorpusChunks, baseline_results, documents_by_best_chunk, load_beir, ndcg, recall
from citeline.lexical.analyzer import LexicalIndex, analyze
from citeline.query import relevance
from citeline.query.plan import DEFAULT_FUSION, Fusion
from citeline.store import catalog

CHUNK_DEPTH = 400  #: chunks ranked per query: enough for 100 documents on SciFact (about 2.5 chunks a document)


@dataclass(frozen=True)
class Setting:
    """One point of the grid: BM25 variant, fusion and how documents are scored from their chunks."""

    bm25: tuple[str, float, float] = ("lucene", 1.2, 0.5)
    fusion: Fusion = DEFAULT_FUSION
    #: A document's score: its best chunk's plus ``second`` times its second best chunk's (0: best chunk only).
    second: float = 0.0
    #: Per-query fusion weights: each list's weight times its peakedness to this power (0: fixed weights).
    adaptive: float = 0.0


class Data:
    """Everything per query that settings re-rank: chunk cosines and BM25 scores, judgments of both splits."""

    def __init__(self, beir: Path, index_path: Path, vectors_file: Path | None = None):
        self.train = load_beir(beir, "train")
        self.test = load_beir(beir, "test")
        self.index = Index.open(index_path)
        snapshot = self.index.snapshot()
        chunks = CorpusChunks(self.index, self.train.corpus)
        assert chunks.allowed is None, "the index must hold the dataset's corpus alone"
        with catalog_connection(index_path) as connection:
            self.ids, self.lexical_texts = catalog.lexical_texts(connection)
        self.doc_of = np.array([chunks.record_of[int(c)] for c in self.ids])
        self.vectors = snapshot.vectors.vectors(self.ids)
        self.queries = {**self.train.queries, **self.test.queries}
        self.qrels = {**self.train.qrels, **self.test.qrels}
        start = time.perf_counter()
        # The query vectors do not change between runs over one index: kept beside it in the temporary directory.
        cached = Path(tempfile.gettempdir()) / f"citeline-tune-queries-{index_path.resolve().name}.npz"
        if cached.is_file():
            stored = np.load(cached, allow_pickle=False)
            self.query_vectors = dict(zip(stored["ids"].tolist(), stored["vectors"], strict=True))
        else:
            self.query_vectors = {qid: self.index.encode_query(text) for qid, text in self.queries.items()}
            vectors = np.stack(list(self.query_vectors.values()))
            np.savez(cached, ids=np.array(list(self.query_vectors)), vectors=vectors)
        print(f"encoded {len(self.queries)} queries in {time.perf_counter() - start:.1f} s", flush=True)
        self.cosines = {qid: self.vectors @ vector for qid, vector in self.query_vectors.items()}
        self.own_cosines = self.cosines
        if (
            vectors_file is not None
        ):  # chunk vectors made otherwise (docs/decisions/contextual-chunk-headers.md), in chunk-id order
            vectors = np.load(vectors_file, allow_pickle=False)
            assert vectors.shape == self.vectors.shape, (vectors.shape, self.vectors.shape)
            self.cosines = {qid: vectors @ vector for qid, vector in self.query_vectors.items()}
        self._tokens = analyze(self.lexical_texts)
        self._bm25: dict[tuple[str, float, float], dict[str, np.ndarray]] = {}

    def bm25(self, variant: tuple[str, float, float]) -> dict[str, np.ndarray]:
        """Each query's BM25 score of every chunk under one variant (cached)."""
        if variant not in self._bm25:
            bm25s = __import__("bm25s")
            method, k1, b = variant
            retriever = bm25s.BM25(method=method, k1=k1, b=b)
            retriever.index(self._tokens, show_progress=False)
            lexical = LexicalIndex(retriever, self.ids)
            self._bm25[variant] = {qid: lexical.scores(text).astype(np.float64) for qid, text in self.queries.items()}
        return self._bm25[variant]


def catalog_connection(index_path: Path) -> contextlib.closing[Any]:
    """A read-only connection to an index's catalog, closed on leaving the ``with`` block."""
    return contextlib.closing(catalog.connect(index_path, read_only=True))


def top(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k best scores, best first (ties by position, as the library breaks them)."""
    k = min(k, len(scores))
    keep = np.argpartition(-scores, k - 1)[:k]
    return keep[np.lexsort((keep, -scores[keep]))]


def peakedness(normalized_top: np.ndarray) -> float:
    """How much a ranking's best result stands out: 1 minus the mean rescaled score of its ranks 2-10."""
    return float(1.0 - normalized_top[1:10].mean()) if len(normalized_top) > 1 else 1.0


def chunk_ranking(
    mode: str, cos: np.ndarray, lex: np.ndarray, fusion: Fusion, adaptive: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Positions and scores of the best ``CHUNK_DEPTH`` chunks, as ``citeline.query.plan.rank_chunks`` ranks them."""
    if mode == "dense":
        positions = top(cos, CHUNK_DEPTH)
        return positions, cos[positions]
    if mode == "lexical":
        positions = top(lex, CHUNK_DEPTH)
        positions = positions[lex[positions] > 0]
        return positions, lex[positions]
    depth = max(CHUNK_DEPTH, fusion.depth)
    dense_top = top(cos, depth)
    lexical_top = top(lex, depth)
    lexical_top = lexical_top[lex[lexical_top] > 0]
    if fusion.method == "rrf":
        fused = np.zeros(len(cos))
        fused[dense_top] += 1.0 / (fusion.rrf_k + np.arange(1, len(dense_top) + 1))
        fused[lexical_top] += 1.0 / (fusion.rrf_k + np.arange(1, len(lexical_top) + 1))
        candidates = np.union1d(dense_top, lexical_top)
        values = fused[candidates]
    else:
        candidates = np.union1d(dense_top, lexical_top)
        d_ref, l_ref = cos[dense_top[: fusion.depth]], lex[lexical_top[: fusion.depth]]
        weight = fusion.weight
        if fusion.normalization == "zscore":
            d = (cos[candidates] - d_ref.mean()) / (d_ref.std() or 1.0)
            lx = (lex[candidates] - l_ref.mean()) / (l_ref.std() or 1.0)
        else:
            d_low, d_high = float(d_ref.min()), float(d_ref.max())
            l_high = float(l_ref.max()) if len(l_ref) else 0.0
            d = (cos[candidates] - d_low) / (d_high - d_low) if d_high > d_low else cos[candidates] - d_low
            lx = lex[candidates] / l_high if l_high > 0 else lex[candidates]
            if adaptive and l_high > 0 and d_high > d_low:
                d_peak = peakedness((cos[dense_top[:10]] - d_low) / (d_high - d_low)) ** adaptive
                l_peak = peakedness(lex[lexical_top[:10]] / l_high) ** adaptive
                weight = weight * d_peak / (weight * d_peak + (1 - weight) * l_peak)
        values = weight * d + (1 - weight) * lx
    order = np.lexsort((candidates, -values))[:CHUNK_DEPTH]
    return candidates[order], values[order]


def document_ranking(doc_of: np.ndarray, positions: np.ndarray, scores: np.ndarray, second: float) -> list[str]:
    """Documents ranked by their best chunk's score plus ``second`` times their second best chunk's."""
    best: dict[str, float] = {}
    runner_up: dict[str, float] = {}
    for position, score in zip(positions, scores, strict=True):
        doc = doc_of[position]
        if doc not in best:
            best[doc] = float(score)
        elif doc not in runner_up:
            runner_up[doc] = float(score)
    if second == 0:
        return list(best)
    total = {doc: value + second * runner_up.get(doc, 0.0) for doc, value in best.items()}
    return sorted(total, key=lambda doc: -total[doc])


class Scorer:
    """Mean nDCG@10 and Recall@100 of a mode and setting, on train and on test."""

    def __init__(self, data: Data):
        self.data = data

    def rankings(self, mode: str, setting: Setting, query_ids: Sequence[str]) -> dict[str, list[str]]:
        """Document rankings of ``query_ids``."""
        data = self.data
        lexical = data.bm25(setting.bm25) if mode != "dense" else None
        out = {}
        for qid in query_ids:
            lex = lexical[qid] if lexical is not None else np.zeros(0)
            positions, scores = chunk_ranking(mode, data.cosines[qid], lex, setting.fusion, setting.adaptive)
            # Scores must be non-negative for "best + second" to favour documents with two good chunks.
            if setting.second and mode == "dense":
                scores = np.maximum(scores, 0.0)
            out[qid] = document_ranking(data.doc_of, positions, scores, setting.second)
        return out

    def score(self, mode: str, setting: Setting) -> dict[str, float]:
        """nDCG@10 on train and test, Recall@100 on test."""
        figures = {}
        for name, split in (("train", self.data.train), ("test", self.data.test)):
            rankings = self.rankings(mode, setting, list(split.queries))
            figures[name] = float(np.mean([ndcg(rankings[q], split.qrels[q]) for q in rankings]))
            figures[f"{name}_recall"] = float(np.mean([recall(rankings[q], split.qrels[q]) for q in rankings]))
        return figures


def line(label: str, figures: dict[str, float]) -> None:
    """One result line."""
    print(
        f"  {label:<72} train {figures['train']:.4f}  test {figures['test']:.4f}  "
        f"test R@100 {figures['test_recall']:.4f}",
        flush=True,
    )


def best_of(
    scorer: Scorer, mode: str, settings: Sequence[Setting], label: Callable[[Setting], str], show: bool = True
) -> Setting:
    """The setting with the best train nDCG@10 (every one printed when ``show``)."""
    results = {}
    for setting in settings:
        results[setting] = scorer.score(mode, setting)
        if show:
            line(label(setting), results[setting])
    chosen = max(results, key=lambda s: results[s]["train"])
    line(f"CHOSEN ON TRAIN: {label(chosen)}", results[chosen])
    return chosen


def fusion_label(setting: Setting) -> str:
    """A fusion setting in a few words."""
    f = setting.fusion
    if f.method == "rrf":
        return f"rrf k={f.rrf_k:g} depth={f.depth} second={setting.second}"
    return (
        f"convex {f.normalization} w_dense={f.weight:.2f} depth={f.depth} second={setting.second} "
        f"adaptive={setting.adaptive}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--beir", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="another index to score with the chosen settings")
    parser.add_argument("--vectors", type=Path, help="chunk vectors to use instead of the index's (.npy)")
    parser.add_argument("--quick", action="store_true", help="a smaller grid")
    parser.add_argument("--no-baseline", action="store_true", help="skip the whole-document baseline rows")
    parser.add_argument(
        "--bm25", help="method,k1,b: skip the BM25 grid and use this (e.g. chosen by an earlier run on the same texts)"
    )
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()

    data = Data(args.beir, args.index, args.vectors)
    scorer = Scorer(data)
    print(
        f"index {args.index} (embed_text: {data.index.meta.get('embed_text', 'chunk')}; vectors: "
        f"{args.vectors or 'its own'}): {len(data.ids)} chunks; "
        f"train {len(data.train.queries)} queries, test {len(data.test.queries)} queries"
    )

    print("baselines (whole documents, the index's model; citeline.eval.baseline):")
    for split_name, split in () if args.no_baseline else (("train", data.train), ("test", data.test)):
        for result in baseline_results(split, list(split.queries), data.index.embedder):
            figures = f"nDCG@10 {result.ndcg_at_10:.4f}  R@100 {result.recall_at_100:.4f}"
            print(f"  {split_name:<5} {result.mode:<12} {figures}")

    shipped = Setting()
    print("shipped before this tuning (lucene k1=1.2 b=0.5, convex minmax 0.5 depth 200, best chunk):")
    for mode in ("dense", "lexical", "hybrid"):
        line(mode, scorer.score(mode, shipped))

    print("dense: how documents are scored from their chunks (best + second x second best):")
    dense_second = best_of(
        scorer,
        "dense",
        [Setting(second=s) for s in ((0.0, 0.1) if args.quick else (0.0, 0.05, 0.1, 0.2, 0.3))],
        lambda s: f"second={s.second}",
    ).second

    bm25, lexical_second = Setting().bm25, 0.0
    if args.bm25:
        method, k1, b = args.bm25.split(",")
        bm25 = (method, float(k1), float(b))
        line(f"lexical {bm25} (given)", scorer.score("lexical", Setting(bm25=bm25)))
    else:
        print("lexical: BM25 variant and parameters over title + chunk text (stemmed, English stopwords):")
        grid = itertools.product(
            ("lucene", "bm25+", "bm25l") if not args.quick else ("lucene",), (0.9, 1.2, 1.5), (0.3, 0.5, 0.75)
        )
        bm25 = best_of(
            scorer, "lexical", [Setting(bm25=(m, k1, b)) for m, k1, b in grid], lambda s: f"{s.bm25}", show=True
        ).bm25
        lexical_second = best_of(
            scorer,
            "lexical",
            [Setting(bm25=bm25, second=s) for s in (0.0, 0.05, 0.1, 0.2, 0.3)],
            lambda s: f"{s.bm25} second={s.second}",
        ).second

    print("hybrid: fusion method, weights, candidate depth (with the chosen BM25):")
    fusions = [Fusion(method="rrf", rrf_k=k, depth=d) for k in (20, 60) for d in ((100,) if args.quick else (100, 200))]
    weights = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65) if not args.quick else (0.4, 0.5, 0.6)
    fusions += [Fusion(weight=w, depth=d) for d in (100, 200) for w in weights]
    fusions += [Fusion(weight=w, normalization="zscore") for w in weights if not args.quick]
    chosen = best_of(scorer, "hybrid", [Setting(bm25=bm25, fusion=f) for f in fusions], fusion_label)
    print("hybrid: how documents are scored from their chunks:")
    chosen = best_of(
        scorer,
        "hybrid",
        [replace(chosen, second=s) for s in ((0.0, 0.1) if args.quick else (0.0, 0.05, 0.1, 0.2, 0.3))],
        fusion_label,
    )

    print("hybrid: per-query weights from how peaked each list is (weight x peakedness^a, renormalised):")
    chosen = best_of(
        scorer,
        "hybrid",
        [replace(chosen, adaptive=a) for a in ((0.0, 1.0) if args.quick else (0.0, 0.5, 1.0, 2.0))],
        fusion_label,
    )

    print("chosen on train, all modes:")
    results = {}
    for mode, setting in (
        ("dense", Setting(second=dense_second)),
        ("lexical", Setting(bm25=bm25, second=lexical_second)),
        ("hybrid", chosen),
    ):
        results[mode] = scorer.score(mode, setting)
        line(f"{mode}: {setting}", results[mode])

    if args.vectors:
        own = Scorer(data)
        print(f"the same settings with the index's own vectors instead of {args.vectors}:")
        data.cosines = data.own_cosines
        for mode, setting in (("dense", Setting(second=dense_second)), ("hybrid", chosen)):
            line(f"{mode}", own.score(mode, setting))
            line(f"{mode}, shipped before", own.score(mode, shipped))
    if args.compare:
        other = Scorer(Data(args.beir, args.compare))
        print(f"the same settings on {args.compare} (embed_text: {other.data.index.meta.get('embed_text', 'chunk')}):")
        for mode, setting in (("dense", Setting(second=dense_second)), ("hybrid", chosen)):
            line(f"{mode}", other.score(mode, setting))
            line(f"{mode}, shipped before", other.score(mode, shipped))
    print(f"took {time.perf_counter() - wall:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s")


# ---------------------------------------------------------------- the relevance floor

RELEVANCE_FLOOR_DOC = """Calibrate and measure the relevance floor (``citeline.query.relevance``) on SciFact and
off-topic queries.

    citeline ingest $SCIFACT/corpus.jsonl --index /tmp/scifact-int8 --backend onnx-int8
    python bench/tune_quality.py relevance-floor /tmp/scifact-int8 --beir $SCIFACT [--fit]

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

SCIFACT = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "scifact"
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
    return list(ids), relevance.cosines(snapshot.vectors.vectors, index.encode_query(query), ids), covered


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
    """The floor's model: since relevance per hit (bench/relevance_per_hit.py), the topic gate's."""
    return relevance.LEXICAL_TOPIC if mode == "lexical" else relevance.DENSE_TOPIC


def scored(
    rows: dict[str, tuple[list[int], np.ndarray, np.ndarray]], model: relevance.RelevanceModel, mode: str
) -> dict[str, Any]:
    """Each query's ranked ids and their relevance under ``model``."""
    return {
        qid: (ids, model.probability(None if mode == "lexical" else cos, cov)) for qid, (ids, cos, cov) in rows.items()
    }


def quality(scores: Any, qrels: Any, record_of: Any, floor: float, *, gate: bool) -> dict[str, float]:
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


def off_topic_empty(scores: Any, floor: float) -> int:
    """Off-topic queries whose top 10 chunks are all below ``floor``."""
    return sum(1 for ids, rel in scores.values() if not (np.asarray(rel[:10]) >= floor).any())


def relevance_floor_main(argv: list[str]) -> None:
    """``python bench/tune_quality.py relevance-floor ...`` (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="tune_quality.py relevance-floor",
        description=RELEVANCE_FLOOR_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("index")
    parser.add_argument("--beir", type=Path, default=SCIFACT, help="SciFact in BEIR layout, with qrels/train.tsv")
    parser.add_argument("--fit", action="store_true", help="fit the models and the floor on train (calibration)")
    parser.add_argument("--modes", default="hybrid,lexical,dense")
    args = parser.parse_args(argv)
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
            positives: list[tuple[float, float]] = []
            negatives: list[tuple[float, float]] = []
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
            x: np.ndarray = np.array(positives + negatives)
            y: np.ndarray = np.array([1] * len(positives) + [0] * len(negatives), dtype=np.float64)
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
            empty = sum(not index.search(text, 10, mode=mode, filters=None) for text in report_off)
            print(f"  Index.search(k=10, collapse on): off-topic (report half) with no hit {empty}/{len(report_off)}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    wall, used = time.perf_counter() - start, time.process_time() - cpu
    print(f"wall {wall:.1f} s, CPU {used:.1f} s, maxrss {usage.ru_maxrss // 1024} MB")


if __name__ == "__main__":
    if sys.argv[1:2] == ["relevance-floor"]:
        relevance_floor_main(sys.argv[2:])
    else:
        main()
