"""Document metadata (YAML front matter, PDF document info, HTML meta tags), typed filters over it (``--where`` with
operators, in Python, the CLI and the HTTP API's parsing), legacy encodings and empty files, on real files."""

from __future__ import annotations

import io
import json
import os
import time
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from _common import examples
from click.testing import CliRunner
from conftest import HashEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st

from citeline import Index, SourceError
from citeline.cli.main import cli
from citeline.sources.parsers import SourceFile, parse, parse_source
from citeline.store.filters import filters_from, where_meta
from citeline.store.metadata import split_metadata, stored_metadata

FRONT = """---
title: The river crossing
author: Mara
year: 2021
date: 2021-03-04
tags: [war, letters]
rating: 4.5
draft: false
---
# Heading below the front matter

Soldiers crossed the river at night to reach their families.
"""


def source(path: Path) -> SourceFile:
    return SourceFile(str(path.parent), str(path), path.name)


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def pdf_with_info(path: Path, info: dict[str, str], text: str = "Wages stopped in June for the soldiers") -> Path:
    """A one-page PDF with ``text`` and the document info ``info``, written by pypdf's own writer."""
    import pypdf
    from test_formats import minimal_pdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(minimal_pdf([text]))))
    writer.add_metadata(info)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        writer.write(handle)
    return path


# ---------------------------------------------------------------- front matter


def test_front_matter_is_typed_metadata_and_no_chunk_covers_it(tmp_path: Path, fake_embedder) -> None:
    md = write(tmp_path / "docs" / "river.md", FRONT)
    (doc,) = parse(source(md))
    assert doc.text == FRONT  # the file's text: offsets are the file's
    assert doc.metadata == {
        "title": "The river crossing",
        "author": "Mara",
        "year": 2021,
        "date": "2021-03-04",
        "tags": ["war", "letters"],
        "rating": 4.5,
        "draft": False,
    }
    assert doc.title == "The river crossing" and doc.text[doc.chunks_from :].startswith("# Heading below")
    assert doc.properties == {"encoding": "utf-8"}
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=8, overlap_tokens=0)
    index.ingest([tmp_path / "docs"])
    record = index.document(doc.doc_id).to_dict()
    assert record["text"] == FRONT and record["encoding"] == "utf-8" and record["metadata"] == doc.metadata
    assert min(span["char_start"] for span in record["spans"]) >= doc.chunks_from
    for span in record["spans"]:
        assert FRONT[span["char_start"] : span["char_end"]]  # offsets into the file's text
    assert index.search("Mara 2021 letters war", k=10, mode="lexical") == []  # front matter is not searchable
    hits = index.search("soldiers river", k=10, mode="lexical")
    assert hits and all(FRONT[h.char_start : h.char_end] == h.text for h in hits)
    assert hits[0].metadata == doc.metadata  # no citeline field in a result's metadata
    assert index.verify().ok


def test_editing_only_the_front_matter_updates_the_metadata(tmp_path: Path, fake_embedder) -> None:
    md = write(tmp_path / "docs" / "river.md", FRONT)
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([tmp_path / "docs"])
    md.write_text(FRONT.replace("year: 2021", "year: 2022"), encoding="utf-8")
    run = index.ingest([tmp_path / "docs"])
    assert run.updated == 1
    assert index.search("soldiers", k=5, filters={"meta": {"year": 2022}})
    assert not index.search("soldiers", k=5, filters={"meta": {"year": 2021}})


_PAGE = (
    '<html><head><title>Crossing</title><meta name="author" content="{author}"></head><body><article>'
    + "<p>Soldiers crossed the river at night to reach their families, and wrote letters home.</p>" * 3
    + "</article></body></html>"
)


@pytest.mark.parametrize(
    ("name", "before", "after", "changed"),
    [
        ("rows.jsonl", '{"id": "1", "text": "Soldiers crossed the river.", "year": 2021}\n', None, {"year": 2022}),
        ("rows.csv", "id,text,year\n1,Soldiers crossed the river.,2021\n", None, {"year": 2022}),
        (
            "page.html",
            _PAGE.format(author="Mara Ilves"),
            _PAGE.format(author="Juhan Liiv"),
            {"author": "Juhan Liiv"},
        ),
    ],
)
def test_editing_only_metadata_updates_it_in_every_format(
    tmp_path: Path, fake_embedder, name: str, before: str, after: str | None, changed: dict
) -> None:
    """A record's field or a page's meta tag edited, its text untouched: the run updates the document (a plan that
    compared texts alone called it unchanged and kept the old values, which filters then answered from), and its
    chunks' vectors come from the cache."""
    path = write(tmp_path / "docs" / name, before)
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([tmp_path / "docs"])
    path.write_text(after or before.replace("2021", "2022"), encoding="utf-8")
    run = index.ingest([tmp_path / "docs"])
    assert (run.updated, run.unchanged, run.chunks_embedded) == (1, 0, 0), run
    (document,) = index.documents()
    assert {key: document.metadata.get(key) for key in changed} == changed
    key, value = next(iter(changed.items()))
    assert index.search("soldiers", k=5, filters={"meta": {key: value}})
    os.utime(path)  # read again, the same: unchanged
    time.sleep(0.01)
    assert index.ingest([tmp_path / "docs"]).unchanged == 1


@pytest.mark.parametrize(
    ("content", "metadata", "chunks_from_zero"),
    [
        ("---\n---\nBody only.\n", {}, False),  # empty front matter
        ("---\nJust a thematic break, then text\n---\nMore.\n", {}, True),  # not a mapping: no front matter
        ("No front matter\n---\nkey: value\n", {}, True),
        ("---\r\nauthor: Mara\r\n...\r\nBody with CRLF.\r\n", {"author": "Mara"}, False),
        ("---\n1999: numeric key\nwhen: 2021-03-04 10:30:00\n---\nBody.\n", None, False),
    ],
)
def test_front_matter_shapes(tmp_path: Path, content: str, metadata: dict | None, chunks_from_zero: bool) -> None:
    (doc,) = parse(source(write(tmp_path / "a.md", content)))
    assert doc.text == content
    if metadata is not None:
        assert doc.metadata == metadata
    else:
        assert doc.metadata == {"1999": "numeric key", "when": "2021-03-04T10:30:00"}
    assert (doc.chunks_from == 0) == chunks_from_zero


def test_bad_front_matter_fails_the_file_with_its_line_and_keeps_what_was_indexed(
    tmp_path: Path, fake_embedder
) -> None:
    md = write(tmp_path / "docs" / "river.md", FRONT)
    write(tmp_path / "docs" / "other.txt", "Another document about ferries.")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([tmp_path / "docs"])
    before = index.search("soldiers river", k=5, mode="lexical")
    md.write_text("---\nauthor: [Mara\nyear: 2021\n---\nBody.\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"front matter is not valid YAML at line \d") as info:
        parse(source(md))
    assert info.value.path == str(md)
    run = index.ingest([tmp_path / "docs"])
    assert run.status == "partial" and run.failed == 1 and run.removed == 0
    assert index.search("soldiers river", k=5, mode="lexical") == before
    bad_date = "---\nauthor: Mara\ndate: 2024-13-45\n---\nBody.\n"  # a date by its form, and no date
    with pytest.raises(SourceError, match=r"value '2024-13-45' at line 3 is not a valid date or time \(month"):
        parse(source(write(tmp_path / "date.md", bad_date)))
    assert parse(source(write(tmp_path / "quoted.md", bad_date.replace("2024-13-45", "'2024-13-45'"))))
    aliases = "---\na: &a [x, x, x]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n---\nBody.\n"
    with pytest.raises(SourceError, match="YAML aliases"):
        parse(source(write(tmp_path / "alias.md", aliases)))


def test_a_file_of_only_front_matter_is_skipped_as_empty(tmp_path: Path) -> None:
    parsed = parse_source(source(write(tmp_path / "a.md", "---\nauthor: Mara\n---\n\n  \n")))
    assert parsed.documents == [] and parsed.errors == [] and parsed.skipped


# ---------------------------------------------------------------- filters: the README's example and operators


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, Path]:
    root = tmp_path_factory.mktemp("meta") / "docs"
    write(root / "river.md", FRONT)
    write(root / "ilves.md", "---\nauthor: Mara Ilves\nyear: 2019\ndate: 2019-11-02\n---\nSoldiers wrote letters.\n")
    write(root / "plain.md", "# No metadata\n\nSoldiers and letters without any front matter.\n")
    write(root / "notes.txt", "Soldiers crossed rivers; a plain text note.\n")
    records = [
        {"_id": "r1", "text": "Soldiers by the river.", "author": "Ansel", "year": "2023", "tag": "a"},
        {"_id": "r2", "text": "Soldiers in letters.", "author": "Ansel", "year": 2020.5, "tag": ["b", "c"]},
    ]
    write(root / "records.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")
    index = Index.create(root.parent / "ix", embedder=HashEmbedder())
    index.ingest([root])
    return index, root


def _ids(index: Index, meta: dict) -> set[str]:
    return {r.source_id for r in index.search("soldiers", k=50, filters={"meta": meta}, collapse=False)}


def test_python_filters_with_operators(library) -> None:
    index, _ = library
    assert _ids(index, {"author": "Mara", "year": 2021}) == {"river.md"}
    assert _ids(index, {"year": {">=": 2021}}) == {"river.md", "records.jsonl#r1"}  # "2023" read as a number
    assert _ids(index, {"year": {">=": 2020, "<": 2021}}) == {"records.jsonl#r2"}
    assert _ids(index, {"year": {">": "2020"}}) == {"river.md", "records.jsonl#r1", "records.jsonl#r2"}
    assert _ids(index, {"author": {"~": "mara"}}) == {"river.md", "ilves.md"}
    assert _ids(index, {"author": {"~": "ILVES"}}) == {"ilves.md"}
    assert _ids(index, {"author": {"!=": "Ansel"}}) == {"river.md", "ilves.md", "plain.md", "notes.txt"}
    assert _ids(index, {"author": {"in": ["Mara", "Ansel"]}}) == {"river.md", "records.jsonl#r1", "records.jsonl#r2"}
    assert _ids(index, {"tag": "b"}) == {"records.jsonl#r2"}  # an item of a list value
    assert _ids(index, {"tags": "war"}) == {"river.md"}
    assert _ids(index, {"date": {">=": date(2021, 1, 1)}}) == {"river.md"}
    assert _ids(index, {"date": {"<": "2021-01-01"}}) == {"ilves.md"}
    assert _ids(index, {"date": date(2019, 11, 2)}) == {"ilves.md"}
    assert _ids(index, {"date": {"<": datetime(2019, 11, 2, 12, tzinfo=UTC)}}) == {"ilves.md"}
    assert _ids(index, {"rating": {">": 4}}) == {"river.md"}
    assert _ids(index, {"draft": False}) == {"river.md"}


def test_filters_narrow_candidates_before_ranking(library) -> None:
    index, _ = library
    # k=1: the one matching document comes back however it ranks among all.
    for meta in ({"author": {"~": "ilves"}}, {"year": {"<": 2020}}, {"tag": {"in": ["c"]}}):
        (hit,) = index.search("soldiers river", k=1, filters={"meta": meta}, collapse=False)
        assert hit.source_id in {"ilves.md", "records.jsonl#r2"}


def test_where_clauses_parse_to_the_python_shape() -> None:
    assert where_meta(["author=Mara", "year>=2021", "year < 2023", "tag in a, b", "author~ilves", "x!=y"]) == {
        "author": {"=": ["Mara"], "~": ["ilves"]},
        "year": {">=": "2021", "<": "2023"},
        "tag": {"=": ["a", "b"]},
        "x": {"!=": ["y"]},
    }
    assert where_meta(["title=Thin in places"]) == {"title": {"=": ["Thin in places"]}}
    assert where_meta(["author=Mara", "author=Ansel"]) == {"author": {"=": ["Mara", "Ansel"]}}
    assert filters_from(where=["year>=2021"]) == {"meta": {"year": {">=": "2021"}}}


def test_cli_where_examples_from_the_readme(library, monkeypatch) -> None:
    index, _ = library
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())

    def found(*where: str) -> set[str]:
        flags = [flag for clause in where for flag in ("--where", clause)]
        result = CliRunner().invoke(
            cli, ["search", "soldiers", "--index", str(index.path), "-k", "50", *flags, "--json"]
        )
        assert result.exit_code == 0, result.output
        return {json.loads(line)["source_id"] for line in result.output.splitlines()}

    assert found("author=Mara", "year=2021") == {"river.md"}
    assert found("year>=2021") == {"river.md", "records.jsonl#r1"}
    assert found("author~mara") == {"river.md", "ilves.md"}
    assert found("tag in a,c") == {"records.jsonl#r1", "records.jsonl#r2"}
    assert found("date<2020-01-01") == {"ilves.md"}
    bad = CliRunner().invoke(cli, ["search", "x", "--index", str(index.path), "--where", "year>1", "--where", "year>2"])
    assert bad.exit_code != 0 and "given twice" in bad.output and "Traceback" not in bad.output


# ---------------------------------------------------------------- PDF and HTML metadata


def test_pdf_document_info_is_metadata_and_pages_a_property(tmp_path: Path, fake_embedder) -> None:
    pdf = pdf_with_info(
        tmp_path / "docs" / "report.pdf",
        {
            "/Title": "Wage report",
            "/Author": "Mara Ilves",
            "/Keywords": "wages, army",
            "/CreationDate": "D:20210304101500+01'00'",
            "/ModDate": "D:2022",  # malformed: left out, the file still indexes
        },
    )
    (doc,) = parse(source(pdf))
    assert doc.title == "Wage report" and doc.properties == {"pages": 1, "page_starts": [0]} and doc.page_starts == [0]
    assert doc.metadata["author"] == "Mara Ilves" and doc.metadata["keywords"] == "wages, army"
    assert doc.metadata["created"].startswith("2021-03-04T10:15:00")
    assert "page_starts" not in doc.metadata and "pages" not in doc.metadata
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([tmp_path / "docs"])
    (listed,) = index.documents()
    assert listed.pages == 1 and listed.encoding is None and listed.metadata == doc.metadata
    assert index.search("wages", k=5, filters={"meta": {"created": {">=": "2021-03-01"}, "author": {"~": "mara"}}})


def test_rows_written_before_properties_keep_their_page_count() -> None:
    legacy = json.dumps({"page_starts": [0, 40], "pages": 2})
    assert split_metadata(legacy, "pdf") == ({}, {"pages": 2, "page_starts": [0, 40]})
    assert split_metadata(json.dumps({"pages": 7}), "jsonl") == ({"pages": 7}, {})  # a record's own field
    assert split_metadata(stored_metadata({"_citeline": "mine", "a": 1}, {})) == ({"a": 1}, {})
    assert split_metadata(stored_metadata({"a": 1}, {"encoding": "cp1252"})) == (
        {"a": 1},
        {"encoding": "cp1252"},
    )


def test_an_author_meta_tag_is_kept_whatever_trafilatura_thinks_of_it(tmp_path: Path) -> None:
    """trafilatura drops an author its heuristics doubt, a one-word name among them: the page states it, so it is
    kept (``<meta name="author" content="Plato">`` gave no author)."""
    for author in ("Plato", "Mara Ilves", "UNESCO"):
        page = write(
            tmp_path / "p.html",
            f'<html><head><title>T</title><meta name="author" content="{author}"></head><body><article>'
            "<p>Soldiers crossed the river at night.</p></article></body></html>",
        )
        (doc,) = parse(source(page))
        assert doc.metadata.get("author") == author


def test_html_meta_tags_are_metadata(tmp_path: Path) -> None:
    page = write(
        tmp_path / "page.html",
        '<html lang="en"><head><title>Plain title</title><meta name="author" content="Mara Ilves">'
        '<meta name="description" content="A river report"><meta name="keywords" content="river, war, letters">'
        '<meta property="og:title" content="River report">'
        '<meta property="article:published_time" content="2021-03-04T10:00:00Z">'
        '<meta property="article:modified_time" content="2022-05-06T10:00:00Z"></head><body><article>'
        + "<p>Soldiers crossed the river at night to reach their families, and wrote letters home.</p>" * 3
        + "</article></body></html>",
    )
    (doc,) = parse(source(page))
    assert doc.title == "River report"
    assert doc.metadata["author"] == "Mara Ilves" and doc.metadata["description"] == "A river report"
    assert doc.metadata["keywords"] == ["river", "war", "letters"]
    assert doc.metadata["date"] == "2021-03-04" and doc.metadata["modified"] == "2022-05-06"
    assert doc.properties == {"encoding": "utf-8"}


# ---------------------------------------------------------------- encodings and empty files


def test_legacy_encodings_are_detected_and_offsets_stay_exact(tmp_path: Path, fake_embedder) -> None:
    text = "Café “crème” for the soldiers — déjà vu at the river, naïve and œuvre.\n" * 3
    write(tmp_path / "docs" / "windows.txt", text.encode("cp1252"))
    write(tmp_path / "docs" / "russian.txt", ("Солдаты переправились через реку ночью. " * 4).encode("cp1251"))
    write(tmp_path / "docs" / "bom16.md", "# Notepad\n\nUnicode text with a byte-order mark: ferry.".encode("utf-16"))
    (windows,) = parse(source(tmp_path / "docs" / "windows.txt"))
    assert windows.text == text and windows.properties == {"encoding": "cp1252"}
    (russian,) = parse(source(tmp_path / "docs" / "russian.txt"))
    assert russian.text.startswith("Солдаты") and russian.properties == {"encoding": "cp1251"}
    (bom16,) = parse(source(tmp_path / "docs" / "bom16.md"))
    assert bom16.text.startswith("# Notepad") and bom16.properties == {"encoding": "utf-16"}
    index = Index.create(tmp_path / "ix", embedder=fake_embedder, max_tokens=12, overlap_tokens=0)
    run = index.ingest([tmp_path / "docs"])
    assert run.status == "succeeded" and run.added == 3
    hits = index.search("crème déjà", k=5, mode="lexical")
    assert hits and hits[0].source_id == "windows.txt"
    for hit in hits:
        assert text[hit.char_start : hit.char_end] == hit.text
    assert {d.source_id: d.encoding for d in index.documents()} == {
        "windows.txt": "cp1252",
        "russian.txt": "cp1251",
        "bom16.md": "utf-16",
    }
    shown = CliRunner().invoke(cli, ["show", windows.doc_id, "--index", str(index.path)])
    assert shown.exit_code == 0 and "read as cp1252" in shown.output


def test_empty_files_are_skipped_and_counted_not_failures(tmp_path: Path, fake_embedder, caplog) -> None:
    docs = tmp_path / "docs"
    write(docs / "good.txt", "Ferries cross the river.")
    write(docs / "empty.txt", b"")
    write(docs / "blank.md", b"  \n\t\r\n")
    write(docs / "blank.jsonl", b"\n\n")
    write(docs / "bom-only.txt", b"\xef\xbb\xbf  \n")
    for name in ("empty.txt", "blank.md", "blank.jsonl", "bom-only.txt"):
        parsed = parse_source(source(docs / name))
        assert parsed.documents == [] and parsed.errors == [] and parsed.complete and parsed.skipped == "empty file"
        assert parse(source(docs / name)) == []
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    with caplog.at_level("INFO", logger="citeline.ingest"):
        run = index.ingest([docs])
    assert run.status == "succeeded" and run.failed == 0 and run.added == 1
    assert "1 documents, 0 failed, 4 skipped (empty)" in caplog.text
    assert f"skipped {docs / 'blank.md'}: empty file" in caplog.text
    # A file that held text and is emptied: its text is gone from the file, so from the index (not a failure).
    (docs / "good.txt").write_bytes(b"")
    run = index.ingest([docs], allow_removals=True)
    assert run.status == "succeeded" and run.failed == 0 and run.removed == 1


def test_records_without_text_are_counted_in_the_log(tmp_path: Path, fake_embedder, caplog) -> None:
    # A record whose text is empty or blank is no document and no failure, but the log accounts for it: a file of
    # 4 rows that indexes 2 says which 2 it left out, rather than looking complete.
    docs = tmp_path / "docs"
    write(docs / "rows.csv", "id,title,text\n1,A,Ferries cross the river.\n2,B,\n3,C,   \n4,D,Levees hold.\n")
    write(docs / "records.jsonl", '{"id": "x", "text": "A record."}\n{"id": "y", "text": ""}\n')
    parsed = parse_source(source(docs / "rows.csv"))
    assert len(parsed.documents) == 2 and parsed.errors == [] and parsed.complete
    assert parsed.empty_records == 2 and parsed.empty_lines == [3, 4]
    # A large export's empty records are counted; only the first lines are kept, for the log.
    empty = "".join(f'{{"id": {i}, "text": ""}}\n' for i in range(1, 13))
    write(docs / "many.jsonl", empty + '{"id": 13, "text": "x"}\n')
    many = parse_source(source(docs / "many.jsonl"))
    assert len(many.documents) == 1 and many.empty_records == 12 and many.empty_lines == list(range(1, 11))
    (docs / "many.jsonl").unlink()
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    with caplog.at_level("INFO", logger="citeline.ingest"):
        run = index.ingest([docs])
    assert run.status == "succeeded" and run.failed == 0 and run.added == 3
    assert "3 documents, 0 failed, 3 records with no text left out" in caplog.text
    assert f"left out 2 records of {docs / 'rows.csv'} with no text (lines 3, 4)" in caplog.text
    assert f"left out 1 record of {docs / 'records.jsonl'} with no text (line 2)" in caplog.text
    # A record whose text is emptied is removed, as a deleted record is.
    write(docs / "records.jsonl", '{"id": "x", "text": " "}\n{"id": "y", "text": "Now it has text."}\n')
    run = index.ingest([docs], allow_removals=True)
    assert run.status == "succeeded" and run.removed == 1 and run.added == 1
    assert sorted(d.source_id for d in index.documents()) == ["records.jsonl#y", "rows.csv#1", "rows.csv#4"]


def test_bytes_no_encoding_fits_fail_the_file_alone(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.txt", b"Letters " + bytes(range(1, 256)))
    with pytest.raises(SourceError, match="no other text encoding fits it") as info:
        parse(source(bad))
    assert info.value.path == str(bad) and "re-save the file as UTF-8" in info.value.reason


# ---------------------------------------------------------------- citeline's own fields are not user metadata

#: What citeline records for itself about a record or an added text (issue 40: they showed as metadata and filters).
INTERNAL_FIELDS = ("record_id", "body_start", "_citeline", "encoding", "pages")


def test_internal_fields_are_not_user_metadata_anywhere(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write(
        docs / "records.jsonl",
        json.dumps({"_id": "d1", "title": "Wages", "text": "Soldiers' pay stopped in June.", "year": 2024})
        + "\n"
        + json.dumps({"_id": "d2", "text": "Letters from the river stopped.", "record_id": "mine", "body_start": 3})
        + "\n",
    )
    write(docs / "rows.csv", "ID,Title,Text,Year\n7,Levee,The levee held the river,2021\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    index.add_texts(["The garrison counted soldiers by the river."], ids=["t1"], titles=["Garrison"])
    expected = {
        "records.jsonl#d1": {"year": 2024},
        "records.jsonl#d2": {"record_id": "mine", "body_start": 3},  # the record's own fields stay its own
        "rows.csv#7": {"Year": 2021},
        "t1": {},
    }
    assert {d.source_id: d.metadata for d in index.documents()} == expected
    for listed in index.documents():
        assert index.document(listed.doc_id).metadata == expected[listed.source_id]
    results = index.search("soldiers river levee letters garrison", 10, collapse=False)
    assert {r.source_id: r.metadata for r in results} == expected
    rows = [
        json.loads(line)
        for line in CliRunner().invoke(cli, ["documents", "--index", str(index.path), "--json"]).output.splitlines()
    ]
    assert {row["source_id"]: row["metadata"] for row in rows} == expected
    shown = CliRunner().invoke(cli, ["show", "--index", str(index.path), "--json", index.documents()[0].doc_id])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["metadata"] == expected[index.documents()[0].source_id]
    # A filter on an internal field is one on any field a document does not have: it matches nothing (but d2's own).
    query = "soldiers river levee letters garrison"
    assert {r.source_id for r in index.search(query, 10, filters={"meta": {"body_start": 7}})} == set()
    assert {r.source_id for r in index.search(query, 10, filters={"meta": {"record_id": "d1"}})} == set()
    assert {r.source_id for r in index.search(query, 10, filters={"meta": {"record_id": "mine"}})} == {
        "records.jsonl#d2"
    }
    assert {r.source_id for r in index.search(query, 10, filters={"meta": {"record_id": {"!=": "d1"}}})} == set(
        expected
    )


def test_rows_written_before_hold_record_fields_in_metadata_and_readers_move_them_out() -> None:
    legacy = json.dumps({"year": 2024, "record_id": "d1", "body_start": 7, "_citeline": {"encoding": "utf-8"}})
    assert split_metadata(legacy, "jsonl") == (
        {"year": 2024},
        {"encoding": "utf-8", "record_id": "d1", "body_start": 7},
    )
    assert split_metadata(json.dumps({"body_start": 7, "a": 1}), "text") == ({"a": 1}, {"body_start": 7})
    # A whole file's front matter may name a field so: that is the user's.
    assert split_metadata(json.dumps({"record_id": "x"}), "markdown") == ({"record_id": "x"}, {})
    new = stored_metadata({"record_id": "mine"}, {"encoding": "utf-8", "record_id": "d2"})
    assert split_metadata(new, "jsonl") == ({"record_id": "mine"}, {"encoding": "utf-8", "record_id": "d2"})


# ---------------------------------------------------------------- an HTML page's date: stated, never guessed

#: Where a page states its date in markup meant for dates (each gives the day as its first argument).
DATE_SOURCES = {
    "meta": lambda day: f'<meta property="article:published_time" content="{day}T08:00:00Z">',
    "meta-name": lambda day: f'<meta name="date" content="{day}">',
    "time": lambda day: f'<time datetime="{day}">published</time>',
    "json-ld": lambda day: (
        '<script type="application/ld+json">{"@context": "https://schema.org", "@graph": [{"@type": "NewsArticle", '
        f'"headline": "River report", "datePublished": "{day}T10:00:00+02:00"}}]}}</script>'
    ),
}
#: Text that only looks like a date: a footer's copyright year, a date the article mentions, a link's path.
GUESSES = (
    lambda year: f"<footer>Copyright {year} Example Ltd. All rights reserved.</footer>",
    lambda year: f"<footer><p>&copy; {year} River News</p></footer>",
    lambda year: f"<footer>(c) 2001-{year} River News</footer>",
    lambda year: f"<p>The levee failed on March 4, {year}, after days of rain.</p>",
    lambda year: f'<p>See <a href="/{year}/03/04/levee">the earlier story</a>.</p>',
    lambda year: f"<p>Updated: {year}-03-04</p>",
    lambda year: f"<p>Posted 04/03/{year} by the desk; the river rose on {year}-05-06.</p>",
    lambda year: f'<div class="byline"><span class="date">{year}-07-08</span></div>',
)


def _page(guesses: list[int], stated: tuple[str, str] | None, year: int) -> str:
    head, article_top = "", ""
    if stated is not None:
        kind, day = stated
        if kind == "time":
            article_top = DATE_SOURCES[kind](day)
        else:
            head = DATE_SOURCES[kind](day)
    body = "<p>Soldiers crossed the river at night to reach their families, and wrote letters home.</p>" * 4
    extra = "".join(GUESSES[number](year) for number in guesses)
    return (
        f"<html><head><title>River report</title>{head}</head><body><article>{article_top}{body}"
        f"</article>{extra}</body></html>"
    )


@settings(max_examples=examples(60), deadline=None)
@given(
    guesses=st.lists(st.integers(0, len(GUESSES) - 1), min_size=1, max_size=3, unique=True),
    stated=st.none() | st.tuples(st.sampled_from(sorted(DATE_SOURCES)), st.dates(date(1995, 1, 1), date(2030, 12, 28))),
    year=st.integers(1990, 2035),
)
def test_an_html_page_has_the_date_it_states_and_never_a_guessed_one(guesses, stated, year) -> None:
    from citeline.sources.formats.html import page_metadata

    metadata = page_metadata(_page(guesses, None if stated is None else (stated[0], stated[1].isoformat()), year))
    if stated is None:
        assert "date" not in metadata and "modified" not in metadata, metadata
    else:
        assert metadata.get("date") == stated[1].isoformat(), metadata


def test_a_date_filter_does_not_select_a_page_by_its_copyright_year(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write(docs / "undated.html", _page([0], None, 2024))
    write(docs / "dated.html", _page([0], ("meta", "2021-03-04"), 2024))
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    assert {d.source_id: d.metadata.get("date") for d in index.documents()} == {
        "dated.html": "2021-03-04",
        "undated.html": None,
    }
    found = index.search("soldiers river", 10, filters={"meta": where_meta(["date>=2024-01-01"])}, collapse=False)
    assert found == []
    found = index.search("soldiers river", 10, filters={"meta": where_meta(["date<2022-01-01"])}, collapse=False)
    assert {r.source_id for r in found} == {"dated.html"}
