"""Parsing each supported format, and every kind of bad input, on real files."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from _common import examples, minimal_pdf
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from citeline import Index, SourceError
from citeline.sources.discovery import discover
from citeline.sources.parsers import SourceFile, parse, parse_source


def source(path: Path) -> SourceFile:
    return SourceFile(str(path.parent), str(path), path.name)


def test_markdown_and_text_keep_the_file_text_verbatim(tmp_path: Path) -> None:
    md = tmp_path / "a.md"
    md.write_text("# Title here\r\n\r\nBody with CRLF.\r\n", encoding="utf-8")
    (doc,) = parse(source(md))
    assert doc.title == "Title here" and doc.text == md.read_bytes().decode()
    txt = tmp_path / "b.txt"
    txt.write_bytes("\ufeffFirst line\nsecond".encode())
    (doc,) = parse(source(txt))
    assert doc.text == "First line\nsecond" and doc.title == "First line"


def test_html_main_text_and_title(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head><title>River report</title><script>var x = 1;</script></head><body>"
        "<nav>Home | About</nav><article><h1>River report</h1>"
        + "".join(
            f"<p>Paragraph {i}: soldiers crossed the river at night to reach their families.</p>" for i in range(6)
        )
        + "</article><footer>Copyright</footer></body></html>",
        encoding="utf-8",
    )
    (doc,) = parse(source(page))
    assert doc.title == "River report" and doc.format == "html"
    assert "soldiers crossed the river" in doc.text and "var x" not in doc.text


def test_a_page_too_large_for_extraction_keeps_its_visible_text_a_block_a_line(tmp_path: Path) -> None:
    """A page of more markup than MAX_EXTRACTED_MARKUP skips trafilatura (whose cost grows with the square of the
    page: a 16 MiB page held a run for minutes) for its visible text, one pass: a line per paragraph, heading, item
    and row; no script, style, head, comment or page furniture; the same words trafilatura keeps of an article."""
    from citeline.sources.formats import html

    def page_of(parts: int) -> str:
        body = "".join(
            f"<h2>Part {i}</h2><p>Paragraph {i}: soldiers <em>crossed</em> the river<!-- note --> at night.</p>"
            f"<ul><li>wages {i}</li><li>letters {i}</li></ul><table><tr><td>cell {i}</td><td>pay {i}</td></tr></table>"
            for i in range(parts)
        )
        return (
            "<html><head><title>Long report</title><style>p {color: red}</style></head><body><nav>Home | About</nav>"
            f"<article>{body}</article><script>var hidden = 1;</script><p>The end.</p></body></html>"
        )

    markup = page_of(9_000)
    assert len(markup) > html.MAX_EXTRACTED_MARKUP
    page = tmp_path / "long.html"
    page.write_text(markup, encoding="utf-8")
    (doc,) = parse(source(page))
    lines = doc.text.splitlines()
    first = ["Part 0", "Paragraph 0: soldiers crossed the river at night.", "wages 0", "letters 0", "cell 0 pay 0"]
    assert lines[:5] == first
    assert lines[-1] == "The end." and len(lines) == 9_000 * 5 + 1
    assert not {"Home", "hidden", "color", "note", "Long report"} & set(doc.text.replace(":", " ").split())
    assert doc.title == "Long report"
    # The same page small enough for trafilatura: the same words (it marks items and cells, "-" and "|"), but for
    # the line after the article, which main-text extraction leaves out and the visible text keeps.
    small = page_of(90)
    page.write_text(small, encoding="utf-8")
    (extracted,) = parse(source(page))
    shown = html.visible_text(html.page_tree(small.replace("<nav>Home | About</nav>", "")))
    assert [*re.findall(r"\w+", extracted.text), "The", "end"] == re.findall(r"\w+", shown)


def test_an_html_page_of_too_many_elements_is_refused_before_its_tree_is_built(tmp_path: Path) -> None:
    page = tmp_path / "huge.html"
    page.write_text("<html><body>" + "<p>w</p>" * 300_000 + "</body></html>", encoding="utf-8")
    with pytest.raises(SourceError, match="more than 250,000 elements, the limit for one source"):
        parse(source(page))


def test_pdf_pages_are_recorded(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(minimal_pdf(["First page about wages", "Second page about letters"]))
    (doc,) = parse(source(pdf))
    starts = doc.page_starts
    assert len(starts) == 2 and doc.properties == {"pages": 2, "page_starts": starts}
    assert doc.text[starts[1] :].startswith("Second page")
    assert doc.metadata == {}  # page offsets and count are citeline's, not the user's metadata


def test_pdf_chunks_carry_page_numbers(tmp_path: Path, fake_embedder) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "report.pdf").write_bytes(
        minimal_pdf(
            [
                "First page about wages that stopped in June for all the soldiers",
                "Second page about letters that never arrived in the villages",
            ]
        )
    )
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=12, overlap_tokens=0)
    index.ingest([docs])
    pages = {r.page for r in index.search("letters wages", k=10)}
    assert pages == {1, 2}


def test_pdf_ligatures_are_written_as_their_letters(tmp_path: Path, fake_embedder) -> None:
    # Helvetica's built-in encoding has the fi and fl glyphs at octal 256 and 257, and pypdf extracts them as the
    # ligature characters U+FB01 and U+FB02 (py-pdf/pypdf#2046), as it does a LaTeX PDF's.
    docs = tmp_path / "docs"
    docs.mkdir()
    pdf = docs / "report.pdf"
    pdf.write_bytes(minimal_pdf([r"A signi\256cant \257ow of of\256ce \256les", r"Second page: the \256nal \257oor"]))
    (doc,) = parse(source(pdf))
    assert doc.text == "A significant flow of office files\n\nSecond page: the final floor"
    assert doc.text[doc.page_starts[1] :].startswith("Second page")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=8, overlap_tokens=0)
    index.ingest([docs])
    hits = index.search("significant office final floor", k=10, mode="lexical")
    assert {hit.page for hit in hits} == {1, 2}
    for hit in hits:
        assert doc.text[hit.char_start : hit.char_end] == hit.text and "\ufb01" not in hit.text
    assert index.verify().ok


def test_jsonl_records_become_documents(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"_id": "d1", "title": "Wages", "text": "Pay stopped in June.", "year": 2024})
        + "\n\n"
        + json.dumps({"id": 7, "text": "Letters stopped arriving."})
        + "\n",
        encoding="utf-8",
    )
    first, second = parse(source(corpus))
    assert first.source_id == "corpus.jsonl#d1" and first.title == "Wages"
    assert first.text == "Wages\n\nPay stopped in June."
    assert first.text[first.properties["body_start"] :] == "Pay stopped in June."
    assert first.metadata == {"year": 2024}  # record_id and body_start are citeline's own: properties
    assert first.properties == {"encoding": "utf-8", "record_id": "d1", "body_start": 7}
    assert second.source_id == "corpus.jsonl#7" and second.text == "Letters stopped arriving."


def test_jsonl_strings_may_hold_unicode_line_separators_and_old_mac_line_ends_still_split(tmp_path: Path) -> None:
    """U+2028, U+2029 and NEL are valid unescaped in a JSON string (``ensure_ascii=False`` writes them so): they
    stay inside the record's text. A lone ``\\r`` (which valid JSON cannot hold raw) still ends a record."""
    texts = ["Tides\u2028rose at dawn.", "Para one\u2029para two.", "Next\x85line."]
    corpus = tmp_path / "corpus.jsonl"
    body = "".join(json.dumps({"_id": f"d{n}", "text": t}, ensure_ascii=False) + "\n" for n, t in enumerate(texts))
    corpus.write_text(
        body + json.dumps({"_id": "r1", "text": "Old Mac"}) + "\r" + '{"_id": "r2", "text": "end"}\r\n', "utf-8"
    )
    parsed = parse_source(source(corpus))
    assert not parsed.errors
    assert [d.text for d in parsed.documents] == [*texts, "Old Mac", "end"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"_id": "a", "text": "ok\u2028"}, ensure_ascii=False) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(SourceError, match="line 2: invalid JSON"):
        parse(source(bad))


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("blob.md", b"\x00\x01\x02binary", "binary"),
        ("broken.pdf", b"%PDF-1.4\nthis is not really a pdf", "PDF"),
        ("notes.jsonl", b'{"_id": "a", "text": "ok"}\n{"_id": "b", "text": ', "line 2: invalid JSON"),
        ("noid.jsonl", b'{"text": "ok"}\n', "line 1: record has no _id or id"),
    ],
)
def test_bad_input_raises_source_error_naming_file_and_problem(
    tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SourceError, match=reason) as info:
        parse(source(path))
    assert info.value.path == str(path)


def test_huge_and_unreadable_files(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("x" * 2000)
    with pytest.raises(SourceError, match="above the 1,000-byte limit"):
        parse(source(big), max_file_bytes=1000)
    folder_named_like_a_file = tmp_path / "dir.txt"
    folder_named_like_a_file.mkdir()
    with pytest.raises(SourceError, match="cannot read file"):
        parse(source(folder_named_like_a_file))


def test_discover_skips_hidden_and_unsupported_and_refuses_missing_roots(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.txt").write_text("hidden")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.md").write_text("# a")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / ".hidden.txt").write_text("hidden")
    assert [f.source_id for f in discover([tmp_path])] == ["sub/a.md"]
    with pytest.raises(SourceError, match="no such file or directory"):
        discover([tmp_path / "missing"])
    with pytest.raises(SourceError, match="unsupported file type"):
        discover([tmp_path / "image.png"])


def test_any_parser_giving_unstorable_text_fails_that_file_alone(tmp_path: Path, monkeypatch) -> None:
    # A library may hand back a lone surrogate (a broken ToUnicode map in a PDF): DuckDB and JSON cannot store
    # it, so the file fails with a SourceError instead of the whole run failing at commit.
    from citeline.sources import parsers

    def lonely(source: SourceFile, data: bytes) -> list[parsers.Document]:
        return [parsers.Document(source.root, source.source_id, source.path, "t", "bad \udc80 text", "text")]

    monkeypatch.setitem(parsers.PARSERS, ".lonely", lonely)
    path = tmp_path / "x.lonely"
    path.write_text("anything")
    with pytest.raises(SourceError, match="text holds a lone surrogate") as info:
        parse(source(path))
    assert info.value.path == str(path)
    parsed = parsers.parse_source(source(path))
    assert parsed.documents == [] and not parsed.complete


def test_parse_source_reports_whole_file_problems_without_raising(tmp_path: Path) -> None:
    from citeline.sources.parsers import parse_source

    missing = tmp_path / "gone.md"
    parsed = parse_source(source(missing))
    assert parsed.documents == [] and not parsed.complete
    assert parsed.errors[0].path == str(missing) and "cannot read file" in parsed.errors[0].reason


# ---------------------------------------------------------------- .docx, .rst, .csv/.tsv


def word_document(path: Path) -> Path:
    """A .docx written by python-docx: core properties, a heading, paragraphs and a table with a merged cell."""
    import datetime

    import docx

    document = docx.Document()
    document.core_properties.title = "Wage ledger"
    document.core_properties.author = "Mara Ilves"
    document.core_properties.created = datetime.datetime(2021, 3, 4, 10, 0)
    document.add_heading("Pay in the winter", level=1)
    document.add_paragraph("Soldiers were paid late that winter, and wrote letters home.")
    table = document.add_table(rows=2, cols=3)
    for column, value in enumerate(("name", "month", "paid")):
        table.cell(0, column).text = value
    table.cell(1, 0).merge(table.cell(1, 1)).text = "Ansel, January"
    table.cell(1, 2).text = "no"
    document.add_paragraph("After the table comes the ferry.")
    path.parent.mkdir(parents=True, exist_ok=True)
    document.save(str(path))
    return path


def test_docx_paragraphs_tables_and_core_properties(tmp_path: Path) -> None:
    (doc,) = parse(source(word_document(tmp_path / "ledger.docx")))
    assert doc.format == "docx" and doc.title == "Wage ledger"
    assert doc.text == (
        "Pay in the winter\n\nSoldiers were paid late that winter, and wrote letters home.\n\n"
        "name | month | paid\n\nAnsel, January | no\n\nAfter the table comes the ferry."
    )
    assert doc.metadata["author"] == "Mara Ilves" and doc.metadata["created"] == "2021-03-04T10:00:00+00:00"
    assert doc.properties == {}


def test_docx_that_is_no_zip_or_a_zip_bomb_fails_alone(tmp_path: Path, monkeypatch) -> None:
    import zipfile

    from citeline.sources.formats import docx

    fake = tmp_path / "fake.docx"
    fake.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(SourceError, match=r"corrupt or unreadable \.docx"):
        parse(source(fake))
    notword = tmp_path / "notword.docx"
    with zipfile.ZipFile(notword, "w") as archive:
        archive.writestr("hello.txt", "a zip, but no Word document in it")
    with pytest.raises(SourceError, match=r"corrupt or unreadable \.docx"):
        parse(source(notword))
    monkeypatch.setattr(docx, "MAX_INFLATED_BYTES", 1000)
    with pytest.raises(SourceError, match=r"inflates past the 1,000 bytes limit for one source \(refused\)"):
        parse(source(word_document(tmp_path / "big.docx")))


def _rst_beside_a_secret(tmp_path: Path, name: str, text: str) -> Path:
    """``text`` as the reStructuredText file ``name``, ``{secret}`` in it the path of a file beside it that a
    reader must never insert (``.. include::``)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-CONTENT", encoding="utf-8")
    rst = tmp_path / name
    rst.write_text(text.replace("{secret}", str(secret)), encoding="utf-8")
    return rst


def test_rst_plain_text_docinfo_and_no_file_insertion(tmp_path: Path) -> None:
    rst = _rst_beside_a_secret(
        tmp_path,
        "report.rst",
        "================\nThe river report\n================\n\n"
        ":author: Mara Ilves\n:date: 2021-03-04\n:year: 2021\n\n"
        ".. a comment\n\n.. include:: {secret}\n\n.. raw:: html\n\n   <b>raw</b>\n\n.. |sub| replace:: substituted\n\n"
        "Soldiers crossed the *river* at night, |sub|.\n\nSection\n=======\n\n- item one\n\n::\n\n    literal block\n",
    )
    (doc,) = parse(source(rst))
    assert doc.format == "rst" and doc.title == "The river report"
    assert doc.text == (
        "The river report\n\nSoldiers crossed the river at night, substituted.\n\nSection\n\nitem one\n\nliteral block"
    )
    assert doc.metadata == {"author": "Mara Ilves", "date": "2021-03-04", "year": 2021}
    assert "SECRET" not in doc.text and "raw" not in doc.text and "comment" not in doc.text


def test_rst_keeps_what_sphinx_directives_and_roles_write(tmp_path: Path) -> None:
    # docutils drops the body of a directive it does not know (Sphinx's, a project's own) and keeps a role's markup.
    rst = _rst_beside_a_secret(
        tmp_path,
        "api.rst",
        "API\n===\n\n.. module:: ferry\n\n.. toctree::\n   :maxdepth: 2\n\n   quickstart\n\n"
        "Call :func:`~ferry.cross` or read :ref:`the crossing guide <guide>`.\n\n"
        ".. function:: cross(river, *, at_night=False)\n\n   Carry the letters across the *river*.\n\n"
        "   .. versionadded:: 2.1\n      The ``at_night`` flag.\n\n"
        "   .. seealso::\n\n      .. deprecated:: 3.0\n\n         Rowing by hand.\n\n"
        ".. code-block:: python\n   :caption: crossing.py\n\n   cross('Daugava', at_night=True)\n\n"
        ".. note-to-self::\n\n   .. include:: {secret}\n\n   .. raw:: html\n\n      <b>raw</b>\n",
    )
    (doc,) = parse(source(rst))
    assert doc.text == (
        "API\n\nCall ferry.cross or read the crossing guide.\n\ncross(river, *, at_night=False)\n\n"
        "Carry the letters across the river.\n\n2.1 The at_night flag.\n\n3.0\n\nRowing by hand.\n\n"
        "cross('Daugava', at_night=True)"
    )
    assert "SECRET" not in doc.text and "raw" not in doc.text  # refused inside an unknown directive too


@pytest.mark.parametrize("name", ["attrs-23.2.0-api.rst", "click-8.1.7-options.rst", "click-8.1.7-testing.rst"])
def test_real_sphinx_sources_keep_every_word_they_write(tmp_path: Path, name: str) -> None:
    # Real Sphinx sources (tests/data/rst-sphinx: autodoc, written-out functions, version notes, code samples,
    # a project's own directives): before, attrs' API page kept 46 % of its words, Click's two pages 83-86 %.
    from citeline.store.works import words

    path = Path(__file__).resolve().parents[1] / "data" / "rst-sphinx" / name
    (doc,) = parse(source(path))
    written = {word for word in words(path.read_text(encoding="utf-8")) if not word.isdigit()}
    kept = written & set(words(doc.text))
    assert len(kept) >= 0.99 * len(written), sorted(written - kept)
    assert not re.search(r":[\w:.-]+:`", doc.text), "a role's markup left in the text"


def test_csv_and_tsv_rows_are_records(tmp_path: Path) -> None:
    table = tmp_path / "letters.csv"
    table.write_text(
        'ID,Title,Text,Year,Author\n1,First,"Soldiers crossed, at night",2021,Mara\n2,,"Line one\nline two",2020,\n'
        "2,dup,dup text,1,x\n3,a,b,c,d,e\n,no id,t,1,2\n",
        encoding="utf-8",
    )
    parsed = parse_source(source(table))
    first, second = parsed.documents
    assert first.source_id == "letters.csv#1" and first.format == "csv" and first.title == "First"
    assert first.text == "First\n\nSoldiers crossed, at night"
    assert first.metadata == {"Year": 2021, "Author": "Mara"}
    assert first.properties["record_id"] == "1" and first.properties["body_start"] == 7
    assert second.text == "Line one\nline two" and second.metadata == {"Year": 2020}
    assert [e.reason for e in parsed.errors] == [
        "line 5: duplicate id '2' (first on line 3); this record is skipped",
        "line 6: row has 6 cells, the header 5",
        "line 7: row has no ID",
    ]
    assert not parsed.complete  # a row whose id is unknown may be a stored one: nothing of the file is removed
    sheet = tmp_path / "people.tsv"
    sheet.write_bytes("name\tcity\tyear\tcode\nMara\tTõrva\t2021\t007\n".encode("cp1252", "replace"))
    (row,) = parse(source(sheet))
    assert row.source_id == "people.tsv#2" and row.format == "tsv"  # no id column: the row's line
    assert row.text.startswith("name: Mara\ncity: T") and row.properties == {"encoding": "cp1252", "record_id": "2"}
    assert row.metadata["year"] == 2021 and row.metadata["code"] == "007"


_HEADER_NAMES = st.text("abcdefghijklmnopqrstuvwxyz ", min_size=1, max_size=8).map(str.strip).filter(
    lambda name: bool(name) and name.casefold() not in {"id", "_id", "title", "text", "body", "content", "abstract",
                                                        "description"}
)  # fmt: skip
_CELLS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=12)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    delimiter=st.sampled_from([",", ";", "\t", "|"]),
    header=st.lists(_HEADER_NAMES, min_size=2, max_size=5, unique_by=str.casefold),
    data=st.data(),
)
def test_a_table_any_spreadsheet_writes_reads_back_cell_for_cell(
    tmp_path: Path, delimiter: str, header: list[str], data: st.DataObject
) -> None:
    """What a spreadsheet program or Python's csv module writes, with any of the delimiters a ``.csv`` may use
    (``;`` where the comma is the decimal separator), reads back as its cells: each row a record whose metadata
    is its non-empty cells. Read with ``,`` alone, a ``;`` table was one column and no filter on a column held."""
    from citeline.sources.metadata import typed_text

    rows = data.draw(st.lists(st.lists(_CELLS, min_size=len(header), max_size=len(header)), min_size=1, max_size=6))
    rows = [row for row in rows if any(cell.strip() for cell in row)]
    assume(rows)  # a table of blank rows holds no record (its own error)
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows(rows)
    table = tmp_path / f"t{abs(hash((delimiter, tuple(header))))}.csv"
    table.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    parsed = parse_source(source(table))
    assert not parsed.errors, parsed.errors
    expected = [
        {name: typed_text(cell) for name, cell in zip(header, row, strict=True) if cell.strip()} for row in rows
    ]
    assert [document.metadata for document in parsed.documents] == expected


def test_jsonl_numbers_json_cannot_hold_stay_text(tmp_path: Path) -> None:
    """``1e999`` is a JSON number no float holds, and Python's json reads ``NaN`` and ``Infinity`` too: as floats
    they were inf and nan, which ``--json`` printed as ``Infinity`` and the HTTP API could not answer with."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1, "text": "t", "big": 1e999, "small": -1e999, "nan": NaN, "inf": Infinity, "ok": 2.5}\n')
    (document,) = parse(source(rows))
    assert document.metadata == {"big": "1e999", "small": "-1e999", "nan": "NaN", "inf": "Infinity", "ok": 2.5}


def test_a_semicolon_table_with_decimal_commas_is_read_by_its_columns(tmp_path: Path) -> None:
    table = tmp_path / "prices.csv"
    table.write_text("id;name;price;note\n1;lamp;12,50;a, b\n2;chair;40,00;\n", encoding="utf-8")
    first, second = parse(source(table))
    # The price column is decimal-comma numbers throughout: numbers, each cell as written kept beside it.
    assert first.source_id == "prices.csv#1"
    assert first.metadata == {"name": "lamp", "price": 12.5, "note": "a, b", "price (as written)": "12,50"}
    assert second.metadata == {"name": "chair", "price": 40, "price (as written)": "40,00"}
    one_column = tmp_path / "words.csv"  # no delimiter splits the header: one column, as before
    one_column.write_text("word\nalpha; beta\ngamma\n", encoding="utf-8")
    assert [d.metadata for d in parse(source(one_column))] == [{"word": "alpha; beta"}, {"word": "gamma"}]


def test_a_csv_cell_may_hold_unicode_line_separators_and_rows_may_end_at_a_lone_cr(tmp_path: Path) -> None:
    """Rows end at \\n, \\r\\n and \\r, never at U+2028, U+2029 or NEL, quoted or not (they once cut an unquoted
    cell, whose rest became a row of its own)."""
    table = tmp_path / "t.csv"
    table.write_text(
        'id,text\n1,"quoted a\u2028b"\n2,unquoted c\u2028d\u2029e\x85f\r3,plain\r\n4,"two\nlines"\n', encoding="utf-8"
    )
    parsed = parse_source(source(table))
    assert not parsed.errors
    assert [(d.source_id, d.text) for d in parsed.documents] == [
        ("t.csv#1", "quoted a\u2028b"),
        ("t.csv#2", "unquoted c\u2028d\u2029e\x85f"),
        ("t.csv#3", "plain"),
        ("t.csv#4", "two\nlines"),
    ]


def test_a_mixed_folder_ingests_and_a_broken_file_of_any_kind_loses_nothing(tmp_path: Path, fake_embedder) -> None:
    from test_metadata import FRONT, pdf_with_info

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "river.md").write_text(FRONT, encoding="utf-8")
    word_document(docs / "ledger.docx")
    (docs / "notes.rst").write_text("Notes\n=====\n\n:year: 2019\n\nThe ferry carried letters.\n", encoding="utf-8")
    (docs / "rows.csv").write_text("id,text,year\nr1,Wages for the garrison,2022\n", encoding="utf-8")
    (docs / "windows.txt").write_bytes("Café letters from the front, “kept”.".encode("cp1252"))
    pdf_with_info(docs / "report.pdf", {"/Author": "Ansel", "/Title": "Report"}, "Report about wages and ferries")
    (docs / "empty.txt").write_bytes(b"")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    run = index.ingest([docs])
    assert run.status == "succeeded" and run.failed == 0 and run.added == 6
    assert {r.source_id for r in index.search("letters", k=10, mode="lexical")} >= {
        "ledger.docx",
        "notes.rst",
        "windows.txt",
    }
    assert {r.source_id for r in index.search("wages", k=10, filters={"meta": {"year": {">=": 2021}}})} == {
        "river.md",
        "rows.csv#r1",
    }
    before = {(r.source_id, r.text) for r in index.search("letters wages ferry", k=50, mode="lexical")}
    for name in ("ledger.docx", "notes.rst", "rows.csv", "windows.txt", "river.md", "report.pdf"):
        (docs / name).write_bytes(b"\x01\x02\x03 broken \xff" * 10)
    run = index.ingest([docs])
    assert run.status == "partial" and run.failed == 6 and run.removed == 0 and run.updated == 0
    assert {(r.source_id, r.text) for r in index.search("letters wages ferry", k=50, mode="lexical")} == before
    assert index.verify().ok
