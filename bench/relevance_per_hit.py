"""Relevance per hit (issue 42.1): calibrate the relevance model and the default rule on train splits, then compare
today's rule with the per-hit rule on test splits, both computed from the same candidate lists.

    citeline ingest $SCIFACT/corpus.jsonl --index /tmp/scifact-int8 --backend onnx-int8
    python bench/_judged_docs.py /tmp/judged-docs
    citeline ingest /tmp/judged-docs/corpus.jsonl --index /tmp/judged-docs-int8 --backend onnx-int8
    python bench/relevance_per_hit.py /tmp/scifact-int8 /tmp/judged-docs-int8 --docs /tmp/judged-docs [--fit]
    python bench/_judged_news.py /tmp/judged-news         # reporting collections (never fitted on)
    citeline ingest /tmp/judged-news/corpus.jsonl --index /tmp/judged-news-int8 --backend onnx-int8
    python bench/relevance_per_hit.py --collection news /tmp/judged-news-int8 /tmp/judged-news   # (and records)

Collections: SciFact (train claims calibrate, test claims report), the off-topic queries of
bench/data/off_topic_queries.txt against SciFact (even lines calibrate, odd lines report; none has a relevant
document) and the generated documentation collection of bench/_judged_docs.py (even topics calibrate, odd report).
``--collection NAME INDEX FOLDER`` adds a reporting collection, its test queries only (news: bench/_judged_news.py;
templated records: bench/_judged_records.py); without SciFact's index only those are reported. Beside the shown
relevance's distribution, its separation: the median of the shown hits judged relevant and of the others, and the
AUC over all of them (one scale across queries).

For every query, two candidate lists are read once with every hit's features (cosine, coverage, rare terms held):

- **shown**: what a user sees, ``Index.search(q, k=10, min_score=0)`` (collapse on, the default): the 10 passages
  before any floor; a rule then drops some. nDCG@10 and recall@10 are of the documents of the passages kept, in
  order (a document counted at its first passage), and the share relevant is of the passages kept (micro: over all
  queries' kept passages), a passage being relevant when its document is judged relevant;
- **ranked**: what ``citeline eval`` scores, ``Index.rank(q, 100)`` chunks, documents by their best kept chunk.

Rules: **today** (the relevance model shipped before issue 42 and its gate: every hit dropped when the best of the
first 10 is below the floor, else none) and **per hit** (``RelevanceModel.kept`` with the shipped model: each hit
kept when the best hit of the unfiltered ranking's first 10 reaches ``floor``, its own relevance reaches ``keep``
and lies at most ``spread`` log-odds below the best's; in lexical mode a hit holding a rare query term verbatim is
kept too). ``--fit`` fits the model (logistic regression, cosine and coverage; lexical: coverage) on the train
lists' shown hits (relevant: judged relevant; off-topic hits: not) and chooses floor, keep and spread on train: the
floor is the largest on a grid that empties no train answer holding a relevant passage, then (keep, spread) the
pair of highest share relevant whose nDCG@10 and recall@10 on each train collection fall by at most
``--budget``. Figures: docs/quality.md#relevance-per-hit.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import resource
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from citeline import Index
from citeline.eval.beir import CorpusChunks, load_beir, ndcg, recall
from citeline.query import relevance
from citeline.query.relevance import RelevanceModel, Rule

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "benchmarks" / "scifact"
OFF_TOPIC = REPO / "bench" / "data" / "off_topic_queries.txt"
#: The models and floors shipped before issue 42 (the gate rule): the comparison's "today".
TODAY = {
    "hybrid": Rule(relevance.DENSE_TOPIC, relevance.DENSE_TOPIC),
    "dense": Rule(relevance.DENSE_TOPIC, relevance.DENSE_TOPIC),
    "lexical": Rule(relevance.LEXICAL_TOPIC, relevance.LEXICAL_TOPIC),
}
KEEPS = [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.1, 0.15, 0.2, 0.3]
SPREADS = [float("inf"), 8.0, 6.0, 5.0, 4.0, 3.5, 3.0, 2.5, 2.0, 1.5, 1.0]


@dataclass
class Hits:
    """One candidate list of one query: each hit's document and features."""

    docs: list[str | None]
    cosine: np.ndarray  # NaN in lexical mode
    coverage: np.ndarray
    rare: np.ndarray  # holds a rare query term verbatim (lexical rule)
    score: np.ndarray | None = None  # the ranking's score


@dataclass
class Query:
    """A query's two lists and judgements."""

    qrels: dict[str, int]
    shown: Hits
    ranked: Hits


def features(index: Index, text: str, mode: str, ids: list[int], results: Any, record_of: dict[int, str]) -> Hits:
    """The features of hits ``ids`` (``results``: their SearchResults, for the rare-term test; None: read)."""
    snapshot = index.snapshot()
    array = np.array(ids, dtype=np.int64)
    if not len(ids):
        return Hits([], np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool))
    covered = relevance.coverage(snapshot.lexical, text, array)
    assert covered is not None
    if mode == "lexical":
        cos = np.full(len(ids), np.nan)
        if results is None:
            results = [row for row in index.search(text, len(ids), mode=mode, min_score=0, collapse=False)]
            by_id = {row.chunk_id: row for row in results}
            results = [by_id[i] for i in ids if i in by_id]
        held = relevance.rare_terms_held(snapshot.lexical, text, results)
        rare = np.zeros(len(ids), dtype=bool) if held is None else held
        if len(rare) != len(ids):
            rare = np.zeros(len(ids), dtype=bool)
    else:
        cos = relevance.cosines(snapshot.vectors.vectors, index.encode_query(text), array)
        rare = np.zeros(len(ids), dtype=bool)
    return Hits([record_of.get(i) for i in ids], cos, covered, rare)


CACHE: dict[str, Any] = {}


def read(index: Index, corpus: Path, queries: dict[str, str], qrels: dict[str, dict[str, int]], mode: str) -> dict:
    """Each query's two candidate lists with their features (kept in ``--cache`` between runs)."""
    key = f"{index.path}:{mode}:{sorted(queries.items())}"
    if key not in CACHE:
        CACHE[key] = read_lists(index, corpus, queries, qrels, mode)
    return CACHE[key]


def read_lists(
    index: Index, corpus: Path, queries: dict[str, str], qrels: dict[str, dict[str, int]], mode: str
) -> dict[str, Query]:
    """:func:`read`, uncached."""
    record_of = CorpusChunks(index, corpus).record_of
    found = {}
    for qid, text in queries.items():
        shown = index.search(text, 10, mode=mode, min_score=0)
        pairs = index.rank(text, 100, mode=mode)
        found[qid] = Query(
            qrels.get(qid, {}),
            replace(
                features(index, text, mode, [hit.chunk_id for hit in shown], shown, record_of),
                score=np.array([hit.score for hit in shown]),
            ),
            replace(
                features(index, text, mode, [chunk_id for chunk_id, _ in pairs], None, record_of),
                score=np.array([score for _, score in pairs]),
            ),
        )
    return found


def probability(model: RelevanceModel, hits: Hits, mode: str) -> np.ndarray:
    return model.probability(None if mode == "lexical" else hits.cosine, hits.coverage)


def kept_today(rule: Rule, query: Query, hits: Hits, mode: str) -> np.ndarray:
    """Today's gate: all or nothing, by the best of the first 10 of the list (the topic model, today's only one)."""
    values = probability(rule.topic, hits, mode)
    passed = len(values) and float(values[:10].max()) >= rule.topic.floor
    return np.full(len(values), bool(passed))


def kept_per_hit(rule: Rule, query: Query, hits: Hits, mode: str) -> np.ndarray:
    """The per-hit rule, measured against the unfiltered ranking's first 10 (as the plan does)."""
    first = Hits(query.ranked.docs[: relevance.BEST_OF], *(a[: relevance.BEST_OF] for a in (
        query.ranked.cosine, query.ranked.coverage, query.ranked.rare)))  # fmt: skip
    if not first.docs:
        return np.zeros(len(hits.docs), dtype=bool)
    best = float(probability(rule.hit, first, mode).max())
    on_topic = float(probability(rule.topic, first, mode).max()) >= rule.topic.floor
    keep = rule.kept(probability(rule.hit, hits, mode), best, on_topic)
    return keep | hits.rare if mode == "lexical" else keep


def measure(queries: dict[str, Query], rule: Any, model: Rule, mode: str, which: str) -> dict[str, Any]:
    """nDCG@10, recall@10, share relevant of the hits kept, empty answers, kept relevance values (each rule's own
    shown relevance: today's topic model, the per-hit rule's hit model) and whether each is judged relevant."""
    shown_model = model.topic if rule is kept_today else model.hit
    ndcgs, recalls, shown, relevant, empty, values = [], [], 0, 0, 0, []
    labels: list[bool] = []  # whether each kept value's hit is judged relevant
    for query in queries.values():
        hits = getattr(query, which)
        keep = rule(model, query, hits, mode)
        docs = [doc for doc, kept in zip(hits.docs, keep, strict=True) if kept and doc is not None]
        ranking = list(dict.fromkeys(docs))
        if which == "ranked":
            ranking = ranking[:10]
            docs = ranking
        ndcgs.append(ndcg(ranking, query.qrels))
        recalls.append(recall(ranking, query.qrels, 10))
        shown += len(docs)
        relevant += sum(query.qrels.get(doc, 0) > 0 for doc in docs)
        empty += not docs
        if which == "shown":
            values.extend(probability(shown_model, hits, mode)[keep].tolist())
            labels.extend(query.qrels.get(doc or "", 0) > 0 for doc, kept in zip(hits.docs, keep, strict=True) if kept)
    return {
        "ndcg": float(np.mean(ndcgs)) if ndcgs else 0.0,
        "recall": float(np.mean(recalls)) if recalls else 0.0,
        "share": relevant / shown if shown else 0.0,
        "shown": shown / max(len(queries), 1),
        "empty": empty,
        "queries": len(queries),
        "values": np.array(values),
        "labels": np.array(labels, dtype=bool),
    }


def distribution(values: np.ndarray, labels: np.ndarray) -> str:
    """p10 / median / p90 of the shown relevance, the share >= 0.99 and < 0.5, and how well it separates the shown
    hits judged relevant from the others: their medians and the AUC (the chance that a relevant shown hit, of any
    query, has a higher relevance than an other shown hit, of any query: one scale across queries)."""
    if not len(values):
        return "none shown"
    q = np.quantile(values, [0.1, 0.5, 0.9])
    text = (
        f"p10 {q[0]:.3f} median {q[1]:.3f} p90 {q[2]:.3f}, >= 0.99: {np.mean(values >= 0.99):.0%}, "
        f"< 0.5: {np.mean(values < 0.5):.0%}"
    )
    good, other = values[labels], values[~labels]
    if len(good) and len(other):
        ordered = np.sort(other)
        below = np.searchsorted(ordered, good, "left") + np.searchsorted(ordered, good, "right")
        auc = float(below.sum()) / (2 * len(good) * len(other))
        text += f"; median relevant {np.median(good):.3f}, other {np.median(other):.3f}, AUC {auc:.3f}"
    return text


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Logistic regression by Newton's method (each example weighted alike): ``[intercept, coefficients...]``."""
    design = np.column_stack([np.ones(len(x)), x])
    beta = np.zeros(design.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-design @ beta))
        gradient = design.T @ (y - p)
        hessian = (design * (p * (1 - p))[:, None]).T @ design + 1e-6 * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.abs(step).max() < 1e-9:
            break
    return beta


def calibrate(train: dict[str, dict[str, Query]], off: dict[str, Query], mode: str, budget: float) -> Rule:
    """Fit the hit model and choose keep and spread on the train lists (see the module docstring)."""
    rows, labels = [], []
    for queries in [*train.values(), off]:
        for query in queries.values():
            for at, doc in enumerate(query.shown.docs):
                rows.append((query.shown.cosine[at], query.shown.coverage[at]))
                labels.append(float(query.qrels.get(doc or "", 0) > 0))
    x, y = np.array(rows), np.array(labels)
    beta = fit(x[:, 1:] if mode == "lexical" else x, y)
    if mode == "lexical":
        model = RelevanceModel(float(beta[0]), 0.0, float(beta[1]))
    else:
        model = RelevanceModel(float(beta[0]), float(beta[1]), float(beta[2]))
    print(f"{mode}: fitted on {int(y.sum())} relevant and {int(len(y) - y.sum())} other shown hits: {model}")
    today = TODAY[mode]
    base = {name: measure(queries, kept_today, today, mode, "shown") for name, queries in train.items()}
    best: tuple[float, Rule] | None = None
    for keep, spread in itertools.product(KEEPS, SPREADS):
        trial = Rule(model, today.topic, keep, spread)
        got = {name: measure(queries, kept_per_hit, trial, mode, "shown") for name, queries in train.items()}
        ok = all(
            got[n]["ndcg"] >= base[n]["ndcg"] - budget and got[n]["recall"] >= base[n]["recall"] - budget for n in got
        )
        share = float(np.mean([got[n]["share"] for n in got]))
        if ok and (best is None or share > best[0]):
            best = (share, trial)
    assert best is not None
    print(f"  chosen on train (highest mean share relevant within the budget): {best[1]}")
    return best[1]


def report(name: str, queries: dict[str, Query], mode: str, model: Rule) -> None:
    for which in ("shown", "ranked"):
        old = measure(queries, kept_today, TODAY[mode], mode, which)
        new = measure(queries, kept_per_hit, model, mode, which)
        print(
            f"{mode:7} {name:17} {which:6} nDCG@10 {old['ndcg']:.4f} -> {new['ndcg']:.4f}"
            f" ({new['ndcg'] - old['ndcg']:+.4f})"
            f"  recall@10 {old['recall']:.4f} -> {new['recall']:.4f} ({new['recall'] - old['recall']:+.4f})"
            f"  share relevant {old['share']:.3f} -> {new['share']:.3f} ({new['share'] - old['share']:+.3f})"
            f"  shown/query {old['shown']:.2f} -> {new['shown']:.2f}  empty {old['empty']} -> {new['empty']}"
            f" of {old['queries']}"
        )
        if which == "shown":
            print(f"        shown relevance today:   {distribution(old['values'], old['labels'])}")
            print(f"        shown relevance per hit: {distribution(new['values'], new['labels'])}")


def off_topic() -> tuple[dict[str, str], dict[str, str]]:
    lines = [line.strip() for line in OFF_TOPIC.read_text().splitlines()]
    texts = [line for line in lines if line and not line.startswith("#")]
    return {f"off{n}": t for n, t in enumerate(texts[0::2])}, {f"off{n}": t for n, t in enumerate(texts[1::2])}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scifact_index", nargs="?", help="omitted: only the --collection ones are reported")
    parser.add_argument("docs_index", nargs="?")
    parser.add_argument("--beir", type=Path, default=SCIFACT)
    parser.add_argument("--docs", type=Path, help="bench/_judged_docs.py's folder")
    parser.add_argument(
        "--collection",
        nargs=3,
        action="append",
        default=[],
        metavar=("NAME", "INDEX", "FOLDER"),
        help="a reporting collection (a BEIR folder, e.g. bench/_judged_news.py's, and its index): its test queries "
        "are reported, never fitted on; repeatable",
    )
    parser.add_argument("--modes", default="hybrid,lexical")
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--cache", type=Path, help="a pickle of the candidate lists, read when it exists, else written")
    parser.add_argument("--budget", type=float, default=0.002, help="nDCG@10/recall@10 fall allowed on train")
    args = parser.parse_args(argv)
    if args.scifact_index and not (args.docs_index and args.docs):
        parser.error("with SciFact's index, the documentation collection's index and --docs are needed too")
    if not args.scifact_index and (args.fit or not args.collection):
        parser.error("--fit needs SciFact's and the documentation collection's indexes; else name a --collection")
    start, cpu = time.perf_counter(), time.process_time()
    if args.cache and args.cache.exists():
        CACHE.update(pickle.loads(args.cache.read_bytes()))
    extra = [(name, Index.open(at), Path(folder), load_beir(folder, "test")) for name, at, folder in args.collection]
    for mode in args.modes.split(","):
        model = relevance.LEXICAL_RULE if mode == "lexical" else relevance.DENSE_RULE
        if args.scifact_index:
            model = scifact_and_docs(args, mode, model)
        for name, index, folder, data in extra:
            report(f"{name} test", read(index, folder / "corpus.jsonl", data.queries, data.qrels, mode), mode, model)
    if args.cache:
        args.cache.write_bytes(pickle.dumps(CACHE))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"wall {time.perf_counter() - start:.0f} s, CPU {time.process_time() - cpu:.0f} s, "
        f"maxrss {usage.ru_maxrss // 1024} MB"
    )


def scifact_and_docs(args: argparse.Namespace, mode: str, model: Rule) -> Rule:
    """SciFact, the documentation collection and the off-topic queries: fit on train (``--fit``), report test;
    returns the rule reported (the shipped one, or the one fitted)."""
    scifact, docs = Index.open(args.scifact_index), Index.open(args.docs_index)
    data = {split: load_beir(args.beir, split) for split in ("train", "test")}
    judged = {split: load_beir(args.docs, split) for split in ("train", "test")}
    calibration_off, report_off = off_topic()

    def lists(split: str) -> dict[str, dict[str, Query]]:
        return {
            "scifact": read(scifact, args.beir / "corpus.jsonl", data[split].queries, data[split].qrels, mode),
            "judged-docs": read(docs, args.docs / "corpus.jsonl", judged[split].queries, judged[split].qrels, mode),
        }

    if args.fit:
        off = read(scifact, args.beir / "corpus.jsonl", calibration_off, {}, mode)
        train = lists("train")
        model = calibrate(train, off, mode, args.budget)
        for name, queries in train.items():
            report(f"{name} train", queries, mode, model)
        report("off-topic cal", off, mode, model)
    if args.cache:
        args.cache.write_bytes(pickle.dumps(CACHE))
    for name, queries in lists("test").items():
        report(f"{name} test", queries, mode, model)
    report("off-topic", read(scifact, args.beir / "corpus.jsonl", report_off, {}, mode), mode, model)
    return model


if __name__ == "__main__":
    main(sys.argv[1:])
