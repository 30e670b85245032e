"""Collapse precision on a real index: templated records stay apart, every version of one text is one result, the
seed reports' shared quotes still merge, highlights are sentences, and stored HTML text has no page furniture."""

from __future__ import annotations

from pathlib import Path

import pytest
from _collapse_sets import (
    ARTEFACTS,
    markdown_page,
    rst_page,
    same_family,
    seed_articles,
    templated_records,
    to_rst,
    write_copies,
    write_records,
)
from conftest import HashEmbedder

from citeline import Index
from citeline.query.collapse import text_words

VERSIONS = 5  # Markdown, a syndicated copy, an MkDocs page, an .rst source, its Sphinx-like page


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, Path, dict[str, str]]:
    """One index of 60 templated records (JSON Lines) and of every seed article in five versions."""
    docs = tmp_path_factory.mktemp("precision")
    family = write_copies(docs)
    write_records(docs / "records", templated_records(60))
    index = Index.create(docs / "ix", embedder=HashEmbedder())
    index.ingest([docs / "wire", docs / "paper", docs / "site", docs / "rst", docs / "rst-site", docs / "records"])
    return index, docs, family


def test_templated_records_are_never_one_result(sets) -> None:
    index, _, _ = sets
    for record in templated_records(60)[:20]:
        for result in index.search(record.answer, k=10):
            records = [s.source_id for s in result.sources if "#" in s.source_id]
            assert len(records) <= 1, (record.answer, records)
        top = index.search(record.answer, k=1)[0]
        assert top.source_id.endswith(f"#{record.id}") and len(top.sources) == 1


def _holds(text: str, sentence: str) -> bool:
    wanted = set(text_words(sentence)[1])
    return len(wanted & set(text_words(text)[1])) >= 0.8 * len(wanted)


def test_every_version_of_a_text_is_one_result_and_no_other_text_joins(sets) -> None:
    index, docs, family = sets
    for stem, text in seed_articles().items():
        paragraphs = [p for p in text.split("\n\n") if len(p.split()) > 20 and not p.startswith("*A citeline")]
        for paragraph in paragraphs:
            sentence = paragraph.split(". ")[0]
            holding = [r for r in index.search(sentence, k=10) if _holds(r.text, sentence)]
            assert holding, sentence
            sources = [str(Path(s.source_path).relative_to(docs)) for s in holding[0].sources]
            assert sum(family[s] == stem for s in sources) == VERSIONS, (sentence, sources)
            assert all(same_family(family[s], stem) for s in sources), (sentence, sources)


def test_the_seed_reports_shared_quote_is_still_one_result(sets) -> None:
    index, docs, family = sets
    voss = (
        "We told the council in writing, three winters running, that this embankment would not survive a spring "
        "like this one. Nobody wanted to pay for it until the water was in the streets"
    )
    top = index.search(voss, k=3)[0]
    families = {family[str(Path(s.source_path).relative_to(docs))] for s in top.sources}
    assert families == {
        "the-night-the-salmor-levee-gave-way",
        "salmor-counts-the-cost-of-a-levee-it-was-told-would-fail",
    }


def test_a_templated_records_highlight_is_its_sentence_not_its_title(sets) -> None:
    index, docs, _ = sets
    # Words of no record: the records come back by their vectors alone, and no sentence holds a query word.
    results = index.search(
        "a fire destroyed the old building long ago",
        k=10,
        mode="dense",
        filters={"source": str(docs / "records")},
        min_score=0,
    )
    records = [r for r in results if "#" in r.source_id]
    assert len(records) == 10
    for result in records:
        assert result.highlights, result.source_id
        assert not any(h.text.startswith("Record ") for h in result.highlights), result.highlights
        assert result.highlights[0].text.startswith("In 19")


def test_stored_html_text_has_no_permalink_anchors_or_navigation(sets) -> None:
    index, _, _ = sets
    pages = [d for d in index.documents() if d.source_path.endswith(".html")]
    assert len(pages) == 2 * len(seed_articles())
    for page in pages:
        text = index.document_text(page.doc_id)
        assert not [a for a in ARTEFACTS if a in text], (page.source_path, [a for a in ARTEFACTS if a in text])
        assert "Previous: The garrison" not in text and "Salmor Gazette 1.0 documentation" not in text


def test_a_short_page_keeps_its_words_and_loses_its_furniture(tmp_path) -> None:
    """A page with little text, where the extractor falls back to all visible text (menus and all)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "api.html").write_text(markdown_page("# Levee API\n\nReturns the crest height."), encoding="utf-8")
    (site / "ref.html").write_text(rst_page(to_rst("# Flood office\n\nSee the budget.")), encoding="utf-8")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([site])
    for document in index.documents():
        text = index.document_text(document.doc_id)
        assert "Returns the crest height" in text or "See the budget" in text
        assert not [a for a in ARTEFACTS if a in text], text
