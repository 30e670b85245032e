"""Filters as people write them: ``price=39`` matches a cell ``39.00``, a column of locale numbers (``1.234,56``) is
numbers, and a numeric or date comparison on a field that never holds one says so instead of answering nothing.

The collection is a small office's folder: a shop's price list (comma CSV, prices written ``39.00``), monthly
revenue saved by a German spreadsheet (semicolon CSV, ``1.234,56``), a French stock sheet (TSV, ``1 234,5`` with
no-break spaces), a US export (comma CSV, quoted ``"1,234.56"``), and notes with front matter.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import HashEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeline import Index, QueryError
from citeline.cli.main import cli
from citeline.sources.formats.delimited import parse_delimited
from citeline.sources.metadata import column_numbers, typed_text
from citeline.sources.parsers import SourceFile

NBSP, NNBSP = "\u00a0", "\u202f"

PRICES = """sku,title,price,text
a1,Coastal road atlas,39.00,A road atlas of the coast with every ferry
b2,Field guide to birds,12.50,Birds of the marsh and the dunes
c3,Tide tables,7,Tide tables for the harbour
d4,Lighthouse poster,39.5,A poster of the old lighthouse
"""
REVENUE = """Monat;Filiale;Umsatz;Kosten;Notiz
Januar;Nord;1.234,56;980,5;Winterverkauf am Hafen war schwach
Februar;Nord;5.600,00;1.020,75;Karneval brachte Kunden an den Hafen
März;Süd;12.480,10;2.500,00;Frühjahrsware kam spät an den Hafen
"""
STOCK = (
    "title\tstock\tweight\ttext\n"
    f"Bouées\t1{NBSP}234,5\t0,75\tBouées de sauvetage pour le port\n"
    f"Cordages\t980\t12,25\tCordages de marine pour le port\n"
    f"Ancres\t2{NNBSP}500,25\t1{NBSP}100,5\tAncres pour les bateaux du port\n"
)
EXPORT = """id,title,amount,code,text
x1,Harbour dues,"1,234.56",007,Harbour dues for the summer season
x2,Ferry tickets,"12,000.5",012,Ferry tickets sold at the harbour
x3,Mooring,980,120,Mooring fees at the harbour
"""
NOTE = """---
title: Price review
price: 39
reviewed: 2024-05-02
---
# Price review

The harbour shop reviewed the atlas price.
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = tmp_path_factory.mktemp("numbers") / "office"
    docs.mkdir()
    (docs / "prices.csv").write_text(PRICES, encoding="utf-8")
    (docs / "umsatz.csv").write_text(REVENUE, encoding="utf-8")
    (docs / "stock.tsv").write_text(STOCK, encoding="utf-8")
    (docs / "export.csv").write_text(EXPORT, encoding="utf-8")
    (docs / "review.md").write_text(NOTE, encoding="utf-8")
    return docs


@pytest.fixture(scope="module")
def index(folder: Path) -> Index:
    index = Index.create(folder.parent / "ix", embedder=HashEmbedder())
    index.ingest([folder])
    return index


def _titles(index: Index, meta: dict[str, object]) -> set[str]:
    return {d.title for d in index.documents({"meta": meta})}


def _found(index: Index, meta: dict[str, object]) -> set[str]:
    hits = index.search(
        "harbour hafen port atlas birds tide poster price", k=50, mode="lexical", min_score=0, filters={"meta": meta}
    )
    return {hit.title for hit in hits}


# ---------------------------------------------------------------- = != in compare numbers as numbers


@pytest.mark.parametrize("written", ["39", "39.0", "39.00", "+39", "3.9e1", " 39 "])
def test_equality_matches_a_number_however_it_is_written(index: Index, written: str) -> None:
    expected = {"Coastal road atlas", "Price review"}  # the cell 39.00 and the front matter's 39
    assert _titles(index, {"price": written}) == expected
    assert _found(index, {"price": written}) == expected
    assert _titles(index, {"price": {"in": [written, "12.5"]}}) == expected | {"Field guide to birds"}
    assert "Coastal road atlas" not in _titles(index, {"price": {"!=": written}})
    assert "Lighthouse poster" in _titles(index, {"price": {"!=": written}})


def test_equality_of_text_stays_text(index: Index) -> None:
    # A code is text (007), and text that reads as a number equals the same number: 7 matches 007 as >= 7 does.
    assert _titles(index, {"code": "007"}) == {"Harbour dues"}
    assert _titles(index, {"code": "7"}) == {"Harbour dues"} == _titles(index, {"code": {">=": 7, "<=": 7}})
    assert _titles(index, {"code": "seven"}) == set()


def test_the_cli_where_matches_as_written(index: Index) -> None:
    result = CliRunner().invoke(cli, ["documents", "--index", str(index.path), "--where", "price=39", "--json"])
    assert result.exit_code == 0, result.output
    assert {json.loads(line)["title"] for line in result.output.splitlines()} == {"Coastal road atlas", "Price review"}


# ---------------------------------------------------------------- locale numbers in tables


def test_a_column_of_decimal_comma_numbers_is_numbers_with_the_text_kept(index: Index) -> None:
    # The sheet has no text column: each row's text is its cells, its title the first ("Monat: Januar").
    (february,) = [d for d in index.documents({"meta": {"Monat": "Februar"}})]
    assert february.metadata["Umsatz"] == 5600 and february.metadata["Umsatz (as written)"] == "5.600,00"
    assert february.metadata["Kosten"] == 1020.75
    assert _found(index, {"Umsatz": {">": 5000}}) == {"Monat: Februar", "Monat: März"}
    assert _titles(index, {"Umsatz": "1234.56"}) == {"Monat: Januar"}
    assert _titles(index, {"Umsatz (as written)": "1.234,56"}) == {"Monat: Januar"}
    assert _titles(index, {"Kosten": {"<": 1000}}) == {"Monat: Januar"}


def test_space_thousands_and_english_columns_are_numbers_too(index: Index) -> None:
    assert _titles(index, {"stock": {">": 1000}}) == {"Bouées", "Ancres"}
    assert _titles(index, {"weight": {">=": 1100.5}}) == {"Ancres"}
    assert _titles(index, {"amount": {">": 10000}}) == {"Ferry tickets"}
    assert _titles(index, {"amount": "1234.56"}) == {"Harbour dues"}


def _column(cells: list[str], delimiter: str = ";") -> list[object]:
    header = delimiter.join(["id", "value", "text"])
    rows = [
        delimiter.join([str(n), f'"{cell}"' if delimiter in cell else cell, "a row"]) for n, cell in enumerate(cells)
    ]
    data = ("\n".join([header, *rows]) + "\n").encode()
    parsed = parse_delimited(SourceFile("/r", "/r/t.csv", "t.csv"), data)
    return [d.metadata.get("value") for d in parsed.documents]


def test_a_column_is_numbers_only_when_every_cell_agrees() -> None:
    assert _column(["1,5", "1.234"]) == [1.5, 1234]  # 1,5 decides: the point groups thousands
    assert _column(["12,000.5", "1.234"], ",") == [12000.5, 1.234]  # 12,000.5 decides the other way
    assert _column(["1.234", "2.500"]) == [1234, 2500]  # a ; table: the comma is the decimal separator
    assert _column(["1.234", "2.500"], "\t") == [1.234, 2.5]  # a tab says nothing: as before
    assert _column(["1.5", "1,5"]) == [1.5, "1,5"]  # no way reads both: each cell as before
    assert _column(["007", "1,5"]) == ["007", "1,5"]  # a code is not a number
    assert _column(["1,5", "about 2"]) == ["1,5", "about 2"]
    assert _column(["39", "4.5"]) == [39, 4.5]


# ---------------------------------------------------------------- a comparison that can match nothing says so


def test_a_numeric_comparison_on_a_text_field_is_an_error_naming_it(index: Index) -> None:
    with pytest.raises(QueryError, match=r"filter Monat>5 compares numbers, but no document's 'Monat' is a number"):
        index.search("Hafen", filters={"meta": {"Monat": {">": 5}}})
    with pytest.raises(QueryError, match=r"'Filiale' is a date \(it holds values such as 'Nord', 'Süd'\)"):
        index.search("Hafen", filters={"meta": {"Filiale": {">=": "2024-01-01"}}})


def test_a_comparison_that_can_match_answers_as_before(index: Index) -> None:
    # The field holds numbers (or dates) somewhere: an empty answer is an answer.
    assert index.search("Hafen", filters={"meta": {"Umsatz": {">": 10**9}}}) == []
    assert _found(index, {"reviewed": {">=": "2024-01-01"}}) == {"Price review"}
    assert index.search("Hafen", filters={"meta": {"reviewed": {">=": "2030-01-01"}}}) == []
    assert index.search("Hafen", filters={"meta": {"nowhere": {">": 5}}}) == []  # no such field: nothing
    assert index.search("Hafen", filters={"meta": {"Monat": {">": "Februar"}}}) != []  # text compares as text


def test_the_cli_says_it_in_one_line(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())
    result = CliRunner().invoke(cli, ["search", "Hafen", "--index", str(index.path), "--where", "Monat>5"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert "'Monat' is a number" in line and "Monat~TEXT" in line


# ---------------------------------------------------------------- properties


def _written(number: float, form: int) -> str:
    """``number`` in one of the ways people write it."""
    if form == 0:
        return repr(number)
    if form == 1:
        return f"{number:.2f}" if round(number, 2) == number else repr(number)
    if form == 2:
        return repr(number) if repr(number).startswith("-") else "+" + repr(number)
    if form == 3:
        return f"{number:e}" if float(f"{number:e}") == number else repr(number)
    return str(int(number)) if number.is_integer() else repr(number)


#: The prices in the price list and the note (39.00, 12.50, 7, 39.5 and 39).
_STORED = {"Coastal road atlas": 39.0, "Field guide to birds": 12.5, "Tide tables": 7.0, "Lighthouse poster": 39.5,
           "Price review": 39.0}  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    numbers=st.lists(
        st.sampled_from([39.0, 12.5, 7.0, 39.5]) | st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: round(x, 2)),
        min_size=1,
        max_size=3,
    ),
    form=st.integers(0, 4),
)
def test_equality_agrees_with_numeric_equality(index: Index, numbers: list[float], form: int) -> None:
    written = [_written(n, form) for n in numbers]
    assert all(math.isclose(float(w), n) for w, n in zip(written, numbers, strict=True))
    equal = {title for title, price in _STORED.items() if price in numbers}
    assert _titles(index, {"price": {"in": written}}) == equal
    others = {"Harbour dues", "Ferry tickets", "Mooring"}  # documents without a price: != keeps them
    assert _titles(index, {"price": {"!=": written}}) & set(_STORED) == set(_STORED) - equal
    assert others <= _titles(index, {"price": {"!=": written}})


def _german(number: float, space: str | None) -> str:
    whole, cents = f"{abs(number):,.2f}".split(".")
    grouped = whole.replace(",", space if space is not None else ".")
    return ("-" if number < 0 else "") + f"{grouped},{cents}"


@settings(max_examples=200, deadline=None)
@given(
    numbers=st.lists(st.integers(-(10**9), 10**9).map(lambda cents: cents / 100), min_size=1, max_size=8),
    style=st.sampled_from([None, " ", NBSP, NNBSP, "english"]),
)
def test_locale_columns_read_back_as_their_numbers(numbers: list[float], style: str | None) -> None:
    if style == "english":
        written, delimiter = [f"{n:,.2f}" for n in numbers], ","
    else:
        written, delimiter = [_german(n, style) for n in numbers], ";"
    read = column_numbers(written, "," if delimiter == ";" else ".") or [typed_text(w) for w in written]
    assert read == pytest.approx(numbers)
    assert _column(written, delimiter) == pytest.approx(numbers)


def test_a_date_comparison_on_a_number_field_names_its_values(index: Index) -> None:
    with pytest.raises(QueryError, match=r"no document's 'price' is a date \(it holds values such as '12.5', "):
        index.search("harbour", filters={"meta": {"price": {"<": "2020-01-01"}}})


def test_the_listing_says_it_too_and_a_sharded_index_judges_all_its_shards(folder: Path, tmp_path: Path) -> None:
    sharded = Index.create(tmp_path / "sharded", embedder=HashEmbedder(), shards=3)
    sharded.ingest([folder])
    with pytest.raises(QueryError, match="no document's 'Monat' is a number"):
        sharded.documents({"meta": {"Monat": {">": 5}}})
    with pytest.raises(QueryError, match="no document's 'Monat' is a number"):
        sharded.search("Hafen", filters={"meta": {"Monat": {">": 5}}})
    # Umsatz is numbers in the shards that hold the revenue rows only: an empty answer, not an error.
    assert sharded.documents({"meta": {"Umsatz": {">": 10**9}}}) == []
    assert sharded.search("Hafen", filters={"meta": {"Umsatz": {">": 10**9}}}) == []
    assert {d.title for d in sharded.documents({"meta": {"price": "39"}})} == {"Coastal road atlas", "Price review"}
    result = CliRunner().invoke(cli, ["documents", "--index", str(tmp_path / "sharded"), "--where", "Monat>5"])
    assert result.exit_code != 0 and "'Monat' is a number" in result.output and "Traceback" not in result.output
