"""Parsing each supported format, and every kind of bad input, on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _common import minimal_pdf

from citeline import Index, SourceError
from citeline.sources.discovery import discover
from citeline.sources.parsers import SourceFile, parse


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


def test_pdf_pages_are_recorded(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(minimal_pdf(["First page about wages", "Second page about letters"]))
    (doc,) = parse(source(pdf))
    starts = doc.metadata["page_starts"]
    assert len(starts) == 2 and doc.metadata["pages"] == 2
    assert doc.text[starts[1] :].startswith("Second page")


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
    assert doc.text[doc.metadata["page_starts"][1] :].startswith("Second page")
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
    assert first.text[first.metadata["body_start"] :] == "Pay stopped in June."
    assert first.metadata == {"year": 2024, "record_id": "d1", "body_start": 7}
    assert second.source_id == "corpus.jsonl#7" and second.text == "Letters stopped arriving."


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("bad.txt", b"caf\xe9 au lait", "not valid UTF-8 at byte 3"),
        ("blob.md", b"\x00\x01\x02binary", "binary"),
        ("empty.txt", b"", "empty"),
        ("blank.md", b"  \n\t\n", "empty"),
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
    from citeline.sources import parsers as sources

    def lonely(source: SourceFile, data: bytes) -> list[sources.Document]:
        return [sources.Document(source.root, source.source_id, source.path, "t", "bad \udc80 text", "text")]

    monkeypatch.setitem(sources.PARSERS, ".lonely", lonely)
    path = tmp_path / "x.lonely"
    path.write_text("anything")
    with pytest.raises(SourceError, match="text holds a lone surrogate") as info:
        parse(source(path))
    assert info.value.path == str(path)
    parsed = sources.parse_source(source(path))
    assert parsed.documents == [] and not parsed.complete


def test_parse_source_reports_whole_file_problems_without_raising(tmp_path: Path) -> None:
    from citeline.sources.parsers import parse_source

    missing = tmp_path / "gone.md"
    parsed = parse_source(source(missing))
    assert parsed.documents == [] and not parsed.complete
    assert parsed.errors[0].path == str(missing) and "cannot read file" in parsed.errors[0].reason
