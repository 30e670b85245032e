"""BEIR evaluation: metrics against ranx, dataset loading, and ``citeline eval`` end to end."""

from __future__ import annotations

import json
import random

import pytest
from _common import make_beir
from click.testing import CliRunner

from citeline.cli.main import cli
from citeline.eval.beir import (
    DatasetError,
    documents_by_best_chunk,
    evaluate_beir,
    load_beir,
    ndcg,
    recall,
    score_rankings,
)


def synthetic_run(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """Graded qrels (0, 1, 2; some judged non-relevant) and rankings of 150 documents for 40 queries."""
    rng = random.Random(seed)
    documents = [f"d{i}" for i in range(300)]
    qrels, rankings = {}, {}
    for q in range(40):
        judged = rng.sample(documents, rng.randint(1, 12))
        qrels[f"q{q}"] = {doc: rng.choice([0, 1, 1, 2]) for doc in judged}
        qrels[f"q{q}"][judged[0]] = rng.choice([1, 2])  # at least one relevant document
        # Rankings put some judged documents early, others late or nowhere.
        pool = rng.sample(documents, 150)
        for doc in judged:
            if rng.random() < 0.7 and doc not in pool[:120]:
                pool.insert(rng.randint(0, 120), doc)
        rankings[f"q{q}"] = list(dict.fromkeys(pool))[:150]
    return qrels, rankings


@pytest.mark.slow  # 30 s: ranx compiles its metrics with numba on first use; our metrics are checked below
def test_metrics_agree_with_ranx_exactly() -> None:
    from ranx import Qrels, Run, evaluate

    qrels, rankings = synthetic_run(7)
    ours = score_rankings("test", rankings, qrels)
    # Distinct, decreasing scores, so ranx sees exactly our order.
    run = Run({qid: {doc: float(len(r) - i) for i, doc in enumerate(r)} for qid, r in rankings.items()})
    reference = Qrels({qid: {doc: rel for doc, rel in judged.items()} for qid, judged in qrels.items()})
    per_query = evaluate(reference, run, ["ndcg@10", "recall@100"], return_mean=False, make_comparable=True)
    for i, qid in enumerate(sorted(rankings, key=list(run.keys()).index)):
        assert ours.per_query[qid]["ndcg_at_10"] == pytest.approx(per_query["ndcg@10"][i], abs=1e-12)
        assert ours.per_query[qid]["recall_at_100"] == pytest.approx(per_query["recall@100"][i], abs=1e-12)
    means = evaluate(reference, run, ["ndcg@10", "recall@100"])
    assert ours.ndcg_at_10 == pytest.approx(means["ndcg@10"], abs=1e-12)
    assert ours.recall_at_100 == pytest.approx(means["recall@100"], abs=1e-12)


def test_metric_edge_cases() -> None:
    relevance = {"a": 2, "b": 1, "c": 0}
    assert ndcg(["a", "b"], relevance) == pytest.approx(1.0)
    assert ndcg(["b", "a"], relevance) < 1.0
    assert ndcg([], relevance) == 0.0
    assert ndcg(["c", "x"], relevance) == 0.0
    assert recall(["x", "b"], relevance) == 0.5  # c is judged but not relevant
    assert documents_by_best_chunk([(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6)], {1: "A", 2: "B", 3: "A"}) == ["A", "B"]


def test_load_beir_reads_queries_with_relevant_documents(tmp_path) -> None:
    dataset = load_beir(make_beir(tmp_path / "beir"))
    assert sorted(dataset.queries) == ["q1", "q2", "q3"]  # q4 has no relevant document
    assert dataset.qrels["q2"] == {"11": 2, "14": 0}
    with pytest.raises(DatasetError, match=r"qrels/dev.tsv not found"):
        load_beir(tmp_path / "beir", split="dev")
    (tmp_path / "beir" / "qrels" / "test.tsv").write_text("q1\t10\n")
    with pytest.raises(DatasetError, match="line 1 is not"):
        load_beir(tmp_path / "beir")


def test_evaluate_beir_end_to_end_and_reuses_the_index(tmp_path, fake_embedder) -> None:
    beir = make_beir(tmp_path / "beir")
    report = evaluate_beir(beir, index_path=tmp_path / "ix", mode="all", embedder=fake_embedder, baseline=False)
    assert (report.documents, report.queries) == (5, 3)
    by_mode = {r.mode: r for r in report.results}
    assert list(by_mode) == ["dense", "lexical", "hybrid"]
    assert by_mode["lexical"].ndcg_at_10 == pytest.approx(1.0)
    assert by_mode["hybrid"].recall_at_100 == pytest.approx(1.0)
    assert report.ingest["chunks_embedded"] == 5
    again = evaluate_beir(beir, index_path=tmp_path / "ix", mode="lexical", embedder=fake_embedder, baseline=False)
    assert again.ingest["unchanged"] == 5 and again.ingest["chunks_embedded"] == 0
    assert again.results[0].ndcg_at_10 == by_mode["lexical"].ndcg_at_10


@pytest.mark.slow
def test_cli_eval_with_the_real_model(tmp_path) -> None:
    beir = make_beir(tmp_path / "beir")
    result = CliRunner().invoke(cli, ["eval", "--beir", str(beir), "--mode", "all", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    modes = ["dense", "lexical", "hybrid", "dense-doc", "lexical-doc", "baseline"]
    assert [r["mode"] for r in report["results"]] == modes
    assert all(r["ndcg_at_10"] > 0.9 and r["queries"] == 3 for r in report["results"])
    result = CliRunner().invoke(cli, ["eval", "--beir", str(tmp_path)])
    assert result.exit_code == 1 and "corpus.jsonl not found" in result.output
