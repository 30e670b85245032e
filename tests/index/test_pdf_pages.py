"""A PDF hit names the page of its highlighted sentence and the page span of its passage, on every surface.

The PDFs are real (written page by page, read back by pypdf), shaped as reports are: a chunk begins on one page and
the sentence that answers is on the next, or a sentence runs over a page break.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _common import minimal_pdf
from click.testing import CliRunner
from conftest import HashEmbedder
from fastapi.testclient import TestClient

from citeline import Index
from citeline.cli.main import cli
from citeline.query.plan import SearchRequest
from citeline.query.results import Highlight, SearchResult, highlight_pages, with_pages
from citeline.server import create_app
from citeline.server.answers import Answer, records_of
from citeline.server.mcp.tools import mcp_answer, render_search

#: A flood report of three pages: the answer to "pump station capacity" is on page 2, in a chunk that begins on
#: page 1; the sentence about the sluice runs from page 2 onto page 3.
REPORT = [
    "Flood report for the lower valley\n"
    "The winter rains came early this year.\n"
    "Farmers moved their herds to the high fields.",
    "The pump station capacity was doubled in March.\n"
    "Engineers tested every gate before the spring tide.\n"
    "The old sluice on the north bank was replaced",
    "with a steel gate that closes in four minutes.\nThe council thanked the volunteers.",
]

QUERY_PUMP = "pump station capacity doubled"
QUERY_SLUICE = "steel gate closes in four minutes"


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pdf_pages")
    docs = root / "reports"
    docs.mkdir()
    (docs / "flood-report.pdf").write_bytes(minimal_pdf(REPORT))
    (docs / "notes.md").write_text("# Notes\n\nThe bakery opens at seven.\n", encoding="utf-8")
    # The report is one chunk (a short PDF, as many are): it begins on page 1, and the answers are on pages 2 and 3.
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    return root / "ix"


@pytest.fixture(scope="module")
def index(index_path: Path) -> Index:
    return Index.open(index_path, embedder=HashEmbedder())


def _hit(index: Index, query: str) -> SearchResult:
    (hit, *_) = index.search(query, k=1, mode="lexical", min_score=0)
    return hit


def test_the_answer_on_a_later_page_than_its_chunk_cites_that_page(index: Index) -> None:
    hit = _hit(index, QUERY_PUMP)
    assert hit.first_page == 1 and hit.last_page >= 2  # the chunk begins on page 1
    (first, *_) = hit.highlights
    assert "pump station capacity" in first.text
    assert first.page == first.last_page == 2 and hit.page == 2
    # The page each names is the page its text is on, read back from the PDF.
    text = index.document(hit.doc_id).text
    assert text[first.char_start : first.char_end] == first.text


def test_the_end_of_a_sentence_run_onto_the_next_page_cites_that_page(index: Index) -> None:
    # Pages are joined by a blank line, which ends a sentence for the highlighter: of the sentence that runs from
    # page 2 onto page 3, the part that answers is on page 3, and so is the page the hit names.
    hit = _hit(index, QUERY_SLUICE)
    assert [(h.text, h.page, h.last_page) for h in hit.highlights] == [
        ("with a steel gate that closes in four minutes.", 3, 3)
    ]
    assert (hit.page, hit.first_page, hit.last_page) == (3, 1, 3)


def test_a_highlight_across_a_page_break_names_the_page_it_begins_and_ends_on() -> None:
    # The pages of any span in a passage, a highlight running over a break included (a reader that does not end
    # sentences at a page's end would give one).
    text = "one two three\n\nfour five six\n\nseven eight"
    starts = [0, text.index("four"), text.index("seven")]
    bare = SearchResult(
        text=text[4:], score=1.0, doc_id="d", source_path="/r.pdf", source_id="r.pdf", title="r", ordinal=0,
        char_start=4, char_end=len(text), content_hash="h", run_id="r", ingested_at="t", model="m", chunk_id=1, page=1,
    )  # fmt: skip
    paged = with_pages(bare, starts)
    assert (paged.first_page, paged.last_page) == (1, 3)
    across = Highlight(text.index("three"), text.index("five") + 4, "three\n\nfour five", 1.0)
    lit = highlight_pages(paged, [across])
    assert (lit.highlights[0].page, lit.highlights[0].last_page, lit.page) == (1, 2, 1)
    later = Highlight(text.index("six"), text.index("eight") + 5, "six\n\nseven eight", 1.0)
    assert highlight_pages(paged, [later]).page == 2
    # An index written before pages were stored: the chunk's page is its first and last, and every highlight's.
    legacy = highlight_pages(with_pages(bare, None), [later])
    assert (legacy.page, legacy.first_page, legacy.last_page, legacy.highlights[0].page) == (1, 1, 1, 1)


def test_every_page_a_passage_spans_is_its_own(index: Index) -> None:
    # The passages of the whole document: each one's span is exactly the pages its characters are on.
    document = index.document(_hit(index, QUERY_PUMP).doc_id)
    starts = [0]
    for page_text in REPORT[:-1]:
        starts.append(starts[-1] + len(page_text) + 2)  # pypdf's text of a page, joined by blank lines
    query = "pump sluice rains council engineers farmers"
    results = index.search(query, k=20, mode="lexical", min_score=0, group=False)
    pdf = [r for r in results if r.doc_id == document.doc_id]
    assert pdf
    for r in pdf:
        assert r.first_page == sum(s <= r.char_start for s in starts)
        assert r.last_page == sum(s <= r.char_end - 1 for s in starts)
        for h in r.highlights:
            assert h.page == sum(s <= h.char_start for s in starts)


def test_a_document_without_pages_names_none(index: Index) -> None:
    hit = _hit(index, "bakery opens seven")
    assert hit.page is None and hit.first_page is None and hit.last_page is None
    assert all(h.page is None for h in hit.highlights)


def test_the_cli_text_and_json_name_the_pages(index_path: Path) -> None:
    args = ["search", QUERY_PUMP, "--index", str(index_path), "--mode", "lexical", "--min-score", "0", "-k", "1"]
    env = {"COLUMNS": "160", "NO_COLOR": "1"}
    text = CliRunner().invoke(cli, args, env=env)
    assert text.exit_code == 0, text.output
    assert re.search(r"page 2 \(passage pages 1-[23]\)\]", text.output)
    as_json = CliRunner().invoke(cli, [*args, "--json"], env=env)
    (record,) = [json.loads(line) for line in as_json.output.splitlines()]
    assert (record["page"], record["first_page"]) == (2, 1)
    assert record["highlights"][0]["page"] == 2


def test_the_http_api_the_page_and_mcp_name_the_pages(index_path: Path, index: Index) -> None:
    client = TestClient(create_app(index_path, embedder=HashEmbedder()))
    params = {"q": QUERY_PUMP, "mode": "lexical", "min_score": "0", "k": "1"}
    (result,) = client.get("/search", params=params).json()["results"]
    assert (result["page"], result["first_page"]) == (2, 1) and result["highlights"][0]["page"] == 2
    page = client.get("/", params=params).text
    assert re.search(r"page 2 \(passage pages 1-[23]\)", page)
    (cited,) = mcp_answer(Answer(QUERY_PUMP, SearchRequest.of(QUERY_PUMP), 1, records_of([_hit(index, QUERY_PUMP)])))[
        "results"
    ]
    assert (cited["page"], cited["first_page"]) == (2, 1) and cited["highlights"][0]["page"] == 2
    rendered = render_search({"query": QUERY_PUMP, "generation": 1, "results": [cited]})
    assert re.search(r"flood-report\.pdf, p\. 2, passage pp\. 1-[23]", rendered)


def test_a_long_pdfs_passage_rows_hold_only_their_own_page_breaks(tmp_path: Path) -> None:
    # A report of 30 pages in chunks of a few lines: every passage names the pages its characters are on, each row
    # holds only the page starts inside its chunk (not the document's 30), and the index verifies.
    pages = [
        "\n".join(
            f"Section {n} line {line}: the gauge at the weir read {n * 10 + line} centimetres." for line in range(4)
        )
        for n in range(1, 31)
    ]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "gauges.pdf").write_bytes(minimal_pdf(pages))
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), max_tokens=64, overlap_tokens=0)
    index.ingest([docs])
    (document,) = index.documents()
    text = index.document(document.doc_id).text
    starts = [0]
    for page_text in pages[:-1]:
        starts.append(starts[-1] + len(page_text) + 2)
    assert [text[s : s + 10] for s in starts] == [p[:10] for p in pages]
    snapshot = index.snapshot()
    spans = index.document(document.doc_id).spans
    rows = snapshot.passage_rows([span.chunk_id for span in spans])
    for row in rows.values():
        breaks = json.loads(row["metadata"])["_citeline"]["page_starts"]
        assert breaks == [s for s in starts if row["char_start"] < s < row["char_end"]]
    results = index.search("gauge weir centimetres section", k=50, mode="lexical", min_score=0, group=False)
    assert len(results) > 10 and max(r.last_page for r in results) == 30
    for r in results:
        assert (r.first_page, r.last_page) == (
            sum(s <= r.char_start for s in starts),
            sum(s <= r.char_end - 1 for s in starts),
        )
        for h in r.highlights:
            assert h.page == sum(s <= h.char_start for s in starts)
    assert index.verify().ok


def _report_pdf(folder: Path) -> bytes:
    """A report as a word processor writes one (fpdf2): a running header and a "Page n/N" footer on every page,
    roman-numbered front matter (page labels i, ii), a paragraph that runs over a page break, a page holding only a
    figure and its caption, a blank page, and a page of two columns."""
    from fpdf import FPDF
    from PIL import Image

    class Report(FPDF):
        def header(self) -> None:
            if self.page_no() > 1:
                self.set_font("Helvetica", "I", 8)
                self.cell(0, 8, "Lower Valley Flood Authority - Annual Report 2025", align="C", new_x="LMARGIN",
                          new_y="NEXT")  # fmt: skip

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 10, f"Page {self.page_no()}/{{nb}}", align="C")

    Image.new("RGB", (200, 100), (120, 80, 40)).save(figure := folder / "figure.png")
    pdf = Report()
    pdf.set_auto_page_break(True, margin=20)
    pdf.add_page()
    pdf.set_page_label(label_style="r")
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, "Foreword. The authority thanks the volunteers of the riverbank patrol for their service.")
    pdf.add_page()
    pdf.multi_cell(0, 6, "Contents\n1 Rainfall ... 1\n2 Pumps ... 2\n3 Figures ... 3")
    pdf.add_page()
    pdf.set_page_label(label_style="D", label_start=1)
    filler = "The rainfall gauges along the upper river recorded a wet autumn and a wetter winter. " * 40
    heron = "The heron colony at Marsh End nested in the alder grove beside the old mill race and raised forty chicks. "
    pdf.multi_cell(0, 6, filler + heron * 8 + filler)
    pdf.add_page()
    pdf.image(str(figure), x=30, y=40, w=120)
    pdf.set_y(170)
    pdf.multi_cell(0, 6, "Figure 3: Sediment deposits at the Kettle Weir after the February surge.")
    pdf.add_page()  # intentionally left blank: only the header and the footer
    pdf.add_page()
    top = pdf.get_y()
    pdf.set_xy(10, top)
    pdf.multi_cell(90, 5, "The eastern pumping station runs four diesel pumps. " * 6)
    pdf.set_xy(110, top)
    pdf.multi_cell(90, 5, "The cormorant roost on Gull Island was counted by drone in March. " * 6)
    return bytes(pdf.output())


def test_a_real_reports_hits_cite_the_page_their_text_is_on(tmp_path: Path) -> None:
    # Pages are the PDF's own, counted from 1 as a viewer counts them (not its printed labels: the heron paragraph is
    # on the third page, labelled "1"). Each hit's page, first and last page hold the text they cite.
    import pypdf

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "annual-report.pdf").write_bytes(_report_pdf(tmp_path))
    pages = [page.extract_text() for page in pypdf.PdfReader(docs / "annual-report.pdf").pages]
    assert len(pages) == 7 and pypdf.PdfReader(docs / "annual-report.pdf").page_labels[:3] == ["i", "ii", "1"]
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), max_tokens=96, overlap_tokens=16)
    index.ingest([docs])

    def on(page: int | None, text: str) -> bool:
        return page is not None and " ".join(text.split()[:6]) in " ".join(pages[page - 1].split())

    queries = ["heron colony alder grove forty chicks", "sediment deposits Kettle Weir February surge",
               "cormorant roost Gull Island drone", "eastern pumping station diesel pumps",
               "volunteers riverbank patrol", "rainfall gauges wet autumn", "Lower Valley Flood Authority"]  # fmt: skip
    checked = 0
    for query in queries:
        for hit in index.search(query, k=10, mode="lexical", min_score=0, group=False):
            assert on(hit.first_page, hit.text.strip()), (query, hit.first_page, hit.text[:60])
            tail = " ".join(hit.text.split()[-6:])
            assert tail in " ".join(pages[hit.last_page - 1].split()), (query, hit.last_page, tail)
            for highlight in hit.highlights:
                assert on(highlight.page, highlight.text.strip()), (query, highlight.page, highlight.text[:60])
                checked += 1
    assert checked > 20
    (caption,) = [
        h for h in index.search("Kettle Weir sediment", k=1, mode="lexical")[0].highlights if "Kettle" in h.text
    ]
    assert caption.page == next(n for n, text in enumerate(pages, 1) if "Kettle Weir" in text)
