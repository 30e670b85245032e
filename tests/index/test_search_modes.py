"""Dense, lexical and hybrid search; restricting candidates with ``allowed``; BM25 folders per generation."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from _common import examples
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from citeline import Index, IndexRepairedWarning, QueryError
from citeline.cli.main import cli
from citeline.lexical.analyzer import LexicalIndex, analyze
from citeline.lexical.segments import load_folder
from citeline.query.plan import Fusion
from citeline.store import generation

SEEDS = Path(__file__).resolve().parents[2] / "seeds"


@pytest.fixture
def seeded(tmp_path, seeds_dir, fake_embedder) -> Index:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([seeds_dir])
    return index


def test_analyzer_stems_and_drops_stopwords() -> None:
    assert analyze(["The soldiers are walking to their home"]) == [["soldier", "walk", "home"]]


ANALYZER_TEXTS = [
    "",
    "a",
    "The Soldiers' WAGES were paid: ünïcödé, straße, İstanbul, ΣΊΣΥΦΟΣ; 12 x y_z 3.14 e-mail",
    "naïve café résumé — “quoted” words, THE THE the, it's isn't won't",
    "Ｆｕｌｌｗｉｄｔｈ ｌｅｔｔｅｒｓ and 中文字符 and שלום and ١٢٣ digits",
]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.text(), max_size=5))
def test_analyzer_gives_bm25s_tokenizer_terms(texts: list[str]) -> None:
    # analyze() stands in for bm25s.tokenize so that a query never imports bm25s (and scipy.sparse through it);
    # 0.1.0's folders were built by bm25s's tokenizer, so both must give the same terms for any text.
    import bm25s
    from bm25s.stopwords import STOPWORDS_EN

    from citeline.lexical.analyzer import ENGLISH_STOPWORDS, _stemmer

    assert frozenset(STOPWORDS_EN) == ENGLISH_STOPWORDS
    texts = texts + ANALYZER_TEXTS + [path.read_text() for path in sorted(SEEDS.glob("*.md"))]
    expected = bm25s.tokenize(texts, stopwords="en", stemmer=_stemmer(), return_ids=False, show_progress=False)
    assert analyze(texts) == expected


def test_a_new_index_has_generation_0_files_and_searches_empty(tmp_path, fake_embedder) -> None:
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    assert sorted(p.name for p in index.path.glob("*.*") if "lock" not in p.name) == [
        "bm25.0",
        "meta.duckdb",
        "vectors.0.faiss",
    ]
    assert index.verify().ok
    for mode in ("dense", "lexical", "hybrid"):
        assert index.search("anything", mode=mode) == []


def test_lexical_search_returns_only_chunks_with_a_query_term(seeded: Index) -> None:
    results = seeded.search("garrison", k=50, mode="lexical")
    # BM25 indexes each chunk with its document title (see store.catalog.lexical_texts).
    assert results and all("garrison" in (r.title + " " + r.text).lower() for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert seeded.search("zyzzyva", k=5, mode="lexical") == []


def test_every_mode_returns_k_results_with_provenance(seeded: Index) -> None:
    for mode in ("dense", "lexical", "hybrid"):
        results = seeded.search("soldiers letters from home", k=3, mode=mode)
        assert len(results) == 3
        for r in results:
            assert seeded.document_text(r.doc_id)[r.char_start : r.char_end] == r.text
    # Hybrid is the default, and its scores are fused scores in [0, 1] (convex combination of min-max scores).
    default = seeded.search("soldiers letters from home", k=3)
    assert [r.chunk_id for r in default] == [
        r.chunk_id for r in seeded.search("soldiers letters from home", k=3, mode="hybrid")
    ]
    assert all(0.0 <= r.score <= 1.0 for r in default)


def test_hybrid_top_results_do_not_depend_on_k(seeded: Index) -> None:
    query = "why did the soldiers leave the garrison"
    small = seeded.rank(query, 3, mode="hybrid", fusion=Fusion(depth=5))
    large = seeded.rank(query, 40, mode="hybrid", fusion=Fusion(depth=5))
    assert small == large[:3]
    rrf = seeded.rank(query, 5, mode="hybrid", fusion=Fusion(method="rrf", depth=5))
    assert len(rrf) == 5 and rrf[0][1] <= 2 / 61


def test_invalid_mode_is_a_query_error(seeded: Index) -> None:
    with pytest.raises(QueryError, match="mode must be one of hybrid, dense, lexical"):
        seeded.search("soldiers", mode="semantic")
    result = CliRunner().invoke(cli, ["search", "soldiers", "--index", str(seeded.path), "--mode", "semantic"])
    assert result.exit_code == 2 and "semantic" in result.output


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_allowed_restricts_candidates_before_ranking(seeded: Index, mode: str) -> None:
    snapshot = seeded.snapshot()
    garrison = {
        int(chunk_id)
        for ids, rows in snapshot.passages.live_parts()
        for chunk_id, path in zip(ids, rows.column("path").to_pylist(), strict=True)
        if "garrison" in path
    }
    all_ids = np.sort(snapshot.lexical.chunk_ids)
    # Three allowed chunks of the *other* document, which the unrestricted top-3 may not contain at all.
    allowed = np.sort(np.array([c for c in all_ids if c not in garrison][:3], dtype=np.int64))
    query = "soldiers"  # a term of every chunk of both seeds' opening, and of many others
    hits = seeded.rank(query, 3, mode=mode, allowed=allowed)
    assert {c for c, _ in hits} <= set(allowed.tolist())
    if mode != "lexical":  # lexical returns only chunks containing a query term
        assert len(hits) == 3
    assert seeded.rank(query, 3, mode=mode, allowed=np.zeros(0, dtype=np.int64)) == []


def test_lexical_allowed_returns_k_whenever_k_allowed_chunks_match() -> None:
    texts = ["apple pie"] * 50 + ["apple tart", "apple cake", "pear"]
    lexical = LexicalIndex.build(np.arange(100, 153, dtype=np.int64), texts)
    allowed = np.array([150, 151, 152], dtype=np.int64)
    hits = lexical.search("apple", 2, allowed)
    assert sorted(c for c, _ in hits) == [150, 151]  # not crowded out by the 50 "apple pie" chunks
    assert lexical.search("apple", 10, allowed)[-1][0] in (150, 151)
    assert len(lexical.search("apple", 10, None)) == 10


def test_bm25_folder_per_generation_and_old_ones_removed(seeded: Index, seeds_dir, tmp_path) -> None:
    assert sorted(p.name for p in seeded.path.glob("bm25.*")) == ["bm25.1"]
    assert np.array_equal(
        load_folder(generation.bm25_path(seeded.path, 1)).chunk_ids,
        np.sort(seeded.snapshot().lexical.chunk_ids),
    )
    # A changed document publishes generation 2 with a new BM25 folder; a new term becomes searchable.
    copy = tmp_path / "docs"
    shutil.copytree(seeds_dir, copy)
    seeded.ingest([copy])
    (copy / "extra.md").write_text("# Quokka\n\nA quokka census on Rottnest island.\n")
    seeded.ingest([copy])
    assert sorted(p.name for p in seeded.path.glob("bm25.*")) == ["bm25.3"]
    assert seeded.search("quokka", k=1, mode="lexical")[0].source_id == "extra.md"
    assert not any(p.suffix == ".pkl" for p in generation.bm25_path(seeded.path, 3).iterdir())


def test_verify_reports_and_rebuild_restores_a_missing_bm25_folder(seeded: Index) -> None:
    assert seeded.verify().ok
    shutil.rmtree(generation.bm25_path(seeded.path, 1))
    (seeded.path / "bm25.9.tmp").mkdir()  # an orphan of a dead writer
    report = Index.open(seeded.path, repair=False).verify()
    assert not report.ok and not report.bm25_present and "bm25.1/ is missing" in report.problems
    assert report.orphans == ["bm25.9.tmp"]
    result = CliRunner().invoke(cli, ["verify", "--index", str(seeded.path)])
    assert result.exit_code == 1 and "bm25.1/ is missing" in result.output
    report = Index.open(seeded.path, repair=False).rebuild()
    assert report.ok and report.bm25_ids_equal and report.orphans == []
    # A damaged folder is noticed by its checksum and rebuilt when the index is opened.
    np.save(generation.bm25_path(seeded.path, 1) / "chunk_ids.npy", np.arange(3, dtype=np.int64))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reopened = Index.open(seeded.path, embedder=seeded.embedder)
    assert any(issubclass(w.category, IndexRepairedWarning) and "bm25.1" in str(w.message) for w in caught)
    assert reopened.verify().ok
    assert reopened.search("garrison", k=1, mode="lexical")


def test_dense_mode_blends_each_chunk_with_its_documents_length_weighted_centroid(tmp_path, fake_embedder) -> None:
    # A short document split into a lone title chunk and a body chunk: the title alone matches the query best, but
    # dense mode scores it (1 - w) * cosine + w * cosine(query, the document's length-weighted mean chunk vector),
    # so the unrelated body pulls it below a one-chunk document that matches throughout.
    from citeline.query import plan

    docs = tmp_path / "docs"
    docs.mkdir()
    body = (
        "Harvest records from the orchard list apples, pears and plums picked by hand each autumn morning. The cider"
        " press ran late into the night while the barn filled with crates of fruit and the dogs slept."
    )
    (docs / "a.md").write_text(f"# Solar panel efficiency\n\n{body}\n")
    (docs / "b.md").write_text("# Panel notes\n\nSolar panel efficiency, tested.\n")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=42, overlap_tokens=0)
    index.ingest([docs])
    snapshot = index.snapshot()
    ids = snapshot.lexical.chunk_ids.tolist()
    rows = snapshot.passage_rows(ids)
    by_document: dict[str, list[int]] = {}
    for chunk_id in ids:
        by_document.setdefault(rows[chunk_id]["source_id"], []).append(chunk_id)
    title, body_chunk = sorted(by_document["a.md"], key=lambda c: rows[c]["ordinal"])
    assert rows[title]["text"] == "# Solar panel efficiency" and len(by_document["b.md"]) == 1
    (other,) = by_document["b.md"]

    query = "solar panel efficiency"
    q = index.encode_query(query).astype(np.float64)

    def centroid_cosine(chunk_ids: list[int]) -> float:
        lengths = np.array([rows[c]["char_end"] - rows[c]["char_start"] for c in chunk_ids], dtype=np.float64)
        assert lengths.tolist() == [len(rows[c]["text"]) for c in chunk_ids]
        mean = (snapshot.vectors.vectors(chunk_ids).astype(np.float64) * lengths[:, None]).sum(axis=0)
        return float(mean @ q / np.linalg.norm(mean))

    w = plan.DENSE_DOCUMENT_WEIGHT
    assert w == 0.3
    cosine = {c: float(snapshot.vectors.vectors([c])[0].astype(np.float64) @ q) for c in ids}
    expected = {c: (1 - w) * cosine[c] + w * centroid_cosine(by_document[rows[c]["source_id"]]) for c in ids}

    plain = index.rank(query, 3, mode="dense", dense_document_weight=0)
    assert [c for c, _ in plain][:2] == [title, other]  # by cosine alone the lone title wins
    assert [score for _, score in plain] == pytest.approx([cosine[c] for c, _ in plain], abs=1e-6)
    ranked = index.rank(query, 3, mode="dense")
    assert [c for c, _ in ranked] == sorted(ids, key=lambda c: -expected[c]) == [other, title, body_chunk]
    assert [score for _, score in ranked] == pytest.approx([expected[c] for c, _ in ranked], abs=1e-6)
    # The same scores through the query plan, and whatever k or a filter to the title's document lets through.
    assert [hit.chunk_id for hit in index.search(query, k=2, mode="dense", collapse=False)] == [other, title]
    alone = index.rank(query, 1, mode="dense", allowed=np.array(sorted(by_document["a.md"]), dtype=np.int64))
    assert alone == [(title, dict(ranked)[title])]  # bit for bit: a filter does not change a chunk's score
