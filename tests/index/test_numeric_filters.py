"""Filters as people write them: ``price=39`` matches a cell ``39.00``, a column of locale numbers (``1.234,56``) is
numbers, and a numeric or date comparison on a field that never holds one says so instead of answering nothing.

The collection is a small office's folder: a shop's price list (comma CSV, prices written ``39.00``), monthly
revenue saved by a German spreadsheet (semicolon CSV, ``1.234,56``), a French stock sheet (TSV, ``1 234,5`` with
no-break spaces), a US export (comma CSV, quoted ``"1,234.56"``), and notes with front matter.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import HashEmbedder
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeline import Index, QueryError
from citeline.cli.main import cli
from citeline.server import create_app
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
    # A code is text (007: ingest keeps it as written), so it is matched by its text only, never as the number 7:
    # 012 and 12 are two codes, and code=7 would show a code the user did not ask for.
    assert _titles(index, {"code": "007"}) == {"Harbour dues"}
    assert _titles(index, {"code": "7"}) == set() == _titles(index, {"code": {">=": 7, "<=": 7}})
    assert _titles(index, {"code": "12"}) == set() and _titles(index, {"code": "012"}) == {"Ferry tickets"}
    assert _titles(index, {"code": "120"}) == {"Mooring"} == _titles(index, {"code": {">": 100}})
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


# ---------------------------------------------------------------- what real exports hold: ids, NaN, codes, booleans

#: Values as real exports store them: tweet and Discord ids past 2**53 (neighbours differ in the last digit), the
#: NaN and Infinity Python's json writes, a pandas "nan", an underscore-grouped number, zip codes with leading zeros,
#: booleans and their text as spreadsheets and pandas write them (TRUE, True), exponent forms, -0, and a hex string
#: DuckDB's cast alone would read as 16.
HOSTILE = [39, 39.0, "39", "39.00", " 39 ", "3.9e1", 7, "7", "007", "0007", 0, -0.0, "-0", "0", float("nan"), "NaN",
           float("inf"), "-Infinity", "1_000", 1000, True, "true", False, 1234567890123456789, 1234567890123456790,
           "1234567890123456788", 803424719128592394, 803424719128592395, 9007199254740992, 9007199254740993,
           -9007199254740993, 1e300, "0x10", 16, 12.5, "12.50", ".5", 0.5, "True", "TRUE", "False", "yes", 1,
           "1"]  # fmt: skip


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Index:
    docs = tmp_path_factory.mktemp("exports") / "exports"
    docs.mkdir()
    lines = [json.dumps({"id": f"r{n}", "text": f"export row {n}", "v": v}) for n, v in enumerate(HOSTILE)]
    (docs / "rows.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")  # json.dumps writes NaN, Infinity
    index = Index.create(docs.parent / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    return index


def _reading(value: object) -> Decimal | float | None:
    """The number a stored or wanted value is, by the rule the filter documents (None: not a number): exact for
    integers and text, a float as the float it is."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    text = str(value).strip()
    if re.fullmatch(r"[+-]?((0|[1-9]\d*)(\.\d*)?|\.\d+)([eE][+-]?\d+)?", text):
        return Decimal(text)
    return None


def _exact(number: Decimal | float) -> bool:
    """Whether a wanted number compares exactly: a whole number from 2**53 to 10**27 (docs/sources.md#metadata)."""
    return number == int(number) and 2**53 <= abs(number) < 10**27 if math.isfinite(number) else False


def _equal(stored: object, wanted: object) -> bool:
    """The oracle of ``key=wanted``: the same text, the same boolean word in any case, or the same number."""
    if isinstance(stored, bool):
        stored = "true" if stored else "false"
    if str(wanted).strip().lower() in ("true", "false") or (
        isinstance(stored, str) and stored.lower() in ("true", "false")
    ):
        return isinstance(stored, str) and stored.strip().lower() == str(wanted).strip().lower()
    if isinstance(stored, str) and stored == wanted:
        return True
    a, b = _reading(stored), _reading(wanted)
    if a is None or b is None:
        return False
    if _exact(b):
        return not isinstance(a, float) and a == b
    return float(a) == float(b)


def _greater(stored: object, wanted: object) -> bool:
    a, b = _reading(stored), _reading(wanted)
    if a is None or b is None:
        return False
    if _exact(b) and float(a) == float(b):
        return Decimal(a) > b
    return float(a) > float(b)


def _stored(index: Index) -> dict[str, object]:
    return {d.source_id: d.metadata.get("v") for d in index.documents()}


_WANTED = st.sampled_from(HOSTILE).map(lambda v: v if isinstance(v, str) else json.dumps(v)) | st.sampled_from(
    ["7", "007", "12", "1000", "39", "+39", "nan", "inf", "9007199254740993", "9007199254740992",
     "1234567890123456789", "1234567890123456789.0", "803424719128592395", "true", "1", "0", "-0", "16", "0.5",
     "TRUE", "False", "false"]
)  # fmt: skip


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(wanted=_WANTED)
def test_equality_on_real_exports_agrees_with_the_rule(hostile: Index, wanted: str) -> None:
    # Silent wrongness is the failure here: a neighbouring tweet id, a NaN or a code shown for a number.
    stored = _stored(hostile)
    expected = {sid for sid, value in stored.items() if _equal(value, wanted)}
    ids = {d.source_id for d in hostile.documents({"meta": {"v": wanted}})}
    assert ids == expected, (wanted, {sid: stored[sid] for sid in ids ^ expected})
    assert {d.source_id for d in hostile.documents({"meta": {"v": {"!=": wanted}}})} == set(stored) - expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(wanted=_WANTED.filter(lambda w: _reading(w) is not None))
def test_ordering_on_real_exports_agrees_with_the_rule(hostile: Index, wanted: str) -> None:
    stored = _stored(hostile)
    expected = {sid for sid, value in stored.items() if _greater(value, wanted)}
    ids = {d.source_id for d in hostile.documents({"meta": {"v": {">": wanted}}})}
    assert ids == expected, (wanted, {sid: stored[sid] for sid in ids ^ expected})


def test_one_tweet_id_on_every_surface(hostile: Index) -> None:
    # The CLI's --where and the HTTP API's where= read the same clause: one record, not its neighbours.
    result = CliRunner().invoke(
        cli, ["documents", "--index", str(hostile.path), "--where", "v=1234567890123456789", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["metadata"]["v"] for line in result.output.splitlines()] == [1234567890123456789]
    with TestClient(create_app(hostile.path, HashEmbedder())) as client:
        answer = client.get("/documents", params={"where": "v=803424719128592395"})
        assert answer.status_code == 200, answer.text
        assert [d["metadata"]["v"] for d in answer.json()] == [803424719128592395]


@settings(max_examples=200, deadline=None)
@given(
    numbers=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=6),
    grouped=st.booleans(),
)
def test_a_column_of_whole_numbers_reads_back_exactly(numbers: list[int], grouped: bool) -> None:
    # An 18-digit id column was read as floats: two rows' ids became one number. Each cell is its exact integer.
    written = [f"{n:,}" if grouped else str(n) for n in numbers]
    read = _column(written, ",")
    assert read == numbers and all(type(n) is int for n in read)
