"""The relevance floor (``citeline.query.relevance``): each hit's absolute relevance, ``min_score``, and the
calibrated default that answers a query matching nothing with no hits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from citeline import Index, QueryError
from citeline.cli.main import cli
from citeline.query import relevance


@pytest.fixture
def seeded(tmp_path: Path, seeds_dir: Path, fake_embedder) -> Index:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([seeds_dir])
    return index


def test_lexical_hits_carry_relevance_and_min_score_drops_below_it(seeded: Index) -> None:
    hits = seeded.search("soldiers defect river garrison", k=5, mode="lexical", min_score=0)
    assert hits and all(hit.relevance is not None and 0 <= hit.relevance <= 1 for hit in hits)
    floor = sorted(hit.relevance for hit in hits if hit.relevance is not None)[len(hits) // 2]
    kept = seeded.search("soldiers defect river garrison", k=5, mode="lexical", min_score=floor)
    assert [hit.chunk_id for hit in kept] == [hit.chunk_id for hit in hits if (hit.relevance or 0) >= floor]
    assert seeded.search("soldiers defect river garrison", k=5, mode="lexical", min_score=1.0) == []


def test_coverage_weighs_rare_terms_and_counts_unknown_words(seeded: Index) -> None:
    snapshot = seeded.snapshot()
    hit = seeded.search("garrison", k=1, mode="lexical", min_score=0)[0]
    ids = np.array([hit.chunk_id])
    assert relevance.coverage(snapshot.lexical, "garrison", ids)[0] == pytest.approx(1.0)
    # a word the index has never seen takes the largest idf: half or more of the query is not covered
    assert relevance.coverage(snapshot.lexical, "garrison xyzzyplugh", ids)[0] <= 0.5
    assert relevance.coverage(snapshot.lexical, "xyzzy plugh", ids)[0] == 0.0
    assert relevance.coverage(snapshot.lexical, "the and of", ids)[0] == 0.0  # stopwords only


def test_gibberish_gets_no_lexical_hits_by_default(seeded: Index) -> None:
    assert seeded.search("xyzzy plugh", k=5, mode="lexical") == []


def test_an_uncalibrated_embedding_model_never_drops_dense_hits(seeded: Index) -> None:
    # the fake embedder's cosines are on another scale than all-MiniLM-L6-v2's: no dense or hybrid floor for it
    hits = seeded.search("xyzzy plugh", k=3, mode="hybrid")
    assert len(hits) == 3 and all(hit.relevance is None for hit in hits)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high", True, float("nan")])
def test_bad_min_score_is_one_clear_error(seeded: Index, bad: object) -> None:
    with pytest.raises(QueryError, match="min_score must"):
        seeded.search("river", k=3, min_score=bad)  # type: ignore[arg-type]


def test_cli_min_score_and_its_message(seeded: Index) -> None:
    runner = CliRunner()
    empty = runner.invoke(cli, ["search", "xyzzy plugh", "--index", str(seeded.path), "--mode", "lexical"])
    assert empty.exit_code == 0 and "--min-score 0 shows the best matches anyway" in empty.output
    bad = runner.invoke(cli, ["search", "river", "--index", str(seeded.path), "--min-score", "2"])
    assert bad.exit_code == 2 and "--min-score" in bad.output


@pytest.mark.slow
def test_the_real_model_answers_gibberish_with_nothing_and_keeps_a_real_match(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "fever.txt").write_text(
        "Aspirin lowers fever in children with influenza, a randomised trial of 400 patients found.", encoding="utf-8"
    )
    (docs / "levee.txt").write_text(
        "The river levee failed after three days of rain and the town flooded.", encoding="utf-8"
    )
    index = Index.create(tmp_path / "ix", backend="onnx-int8")
    index.ingest([docs])
    for mode in ("hybrid", "dense", "lexical"):
        assert index.search("xyzzy plugh", k=5, mode=mode) == [], mode
        assert index.search("best pizza in Naples", k=5, mode=mode) == [], mode
    hits = index.search("does aspirin reduce fever in children", k=5)
    assert hits and hits[0].source_id == "fever.txt" and hits[0].relevance is not None
    assert hits[0].relevance >= relevance.DENSE_RULE.keep
    assert len(index.search("xyzzy plugh", k=5, min_score=0)) == 2  # 0 keeps every hit
