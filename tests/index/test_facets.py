"""Facet counts (issue 42.5): documents per value of each metadata field, as datasette shows them for a table.

The counts come from SQL over the mapped passage rows; here they are checked against the same count made in Python
from ``Index.documents``' metadata (what a user sees), on generated metadata that breaks naive code: key names with
``/``, ``~``, quotes, dots and non-ASCII letters, list values (with repeats, numbers, nulls, nested objects), object
values, numbers, booleans, dates, a JSONL record with citeline's reserved key and rows written before properties
were stored apart. Then: filters and a search's answer narrow them, a sharded index adds its shards' counts up to the
same facets, and the server gives them as JSON (``GET /facets``, ``GET /search?facets=true``).
"""

from __future__ import annotations

import contextlib
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import HashEmbedder
from fastapi.testclient import TestClient

from citeline import Facet, Index
from citeline.server import create_app
from citeline.store import catalog
from citeline.store.documents import facets_of, identifier_fields

KEYS = ["author", "tags", "a/b", "til~de", 'quo"te', "dotted.key", "année", "year", "flag", "nested", "when"]
WORDS = ["Mara", "Ansel", "Tomas", "levee", "war", "o'brien", "x/y", "Ünïcode", "  padded  ", "1999"]


def _value(rng: random.Random) -> Any:
    kind = rng.randrange(7)
    if kind == 0:
        return [rng.choice(WORDS) for _ in range(rng.randrange(0, 4))] + rng.choice([[], [7], [None], [{"a": 1}]])
    if kind == 1:
        return {"inner": rng.choice(WORDS)}
    if kind == 2:
        return rng.randrange(1990, 2000)
    if kind == 3:
        return rng.random() < 0.5
    if kind == 4:
        return f"20{rng.randrange(10, 30)}-0{rng.randrange(1, 10)}-1{rng.randrange(0, 10)}"
    return rng.choice(WORDS)


def _front_matter(metadata: dict[str, Any]) -> str:
    return "---\n" + "".join(f"{json.dumps(key)}: {json.dumps(value)}\n" for key, value in metadata.items()) + "---\n"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("facets")
    docs = root / "docs"
    docs.mkdir()
    rng = random.Random(42)
    for number in range(40):
        metadata = {key: _value(rng) for key in rng.sample(KEYS, rng.randrange(0, len(KEYS)))}
        text = f"Document {number} tells of the river and the levee, of letters and of pay."
        (docs / f"d{number:02}.md").write_text(_front_matter(metadata) + f"\n# D{number}\n\n{text}\n", encoding="utf-8")
    records = [
        {"_id": "r1", "text": "A record about the levee.", "author": "Mara", "_citeline": "not citeline's"},
        {"_id": "r2", "text": "A record about pay.", "author": "Ansel", "record_id": "its own", "body_start": 3},
    ]
    (docs / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    return index


def _texts(value: Any) -> set[str]:
    """What a filter can match of one metadata value: a scalar's text, a list's scalar items' (an object: none)."""
    if isinstance(value, dict):
        return set()
    scalars = [item for item in (value if isinstance(value, list) else [value]) if not isinstance(item, dict | list)]
    return {item if isinstance(item, str) else json.dumps(item) for item in scalars if item is not None}


def _expected(index: Index, filters: dict[str, Any] | None = None, within: set[str] | None = None) -> dict:
    """The facet counts made in Python from what ``Index.documents`` shows of each document's metadata, without
    the fields whose values are nearly all distinct across the index (no facet for them)."""
    counts = _all_counts(index, filters, within)
    identifiers = identifier_fields(_all_counts(index))
    return {(key, value): n for (key, value), n in counts.items() if key not in identifiers}


def _all_counts(index: Index, filters: dict[str, Any] | None = None, within: set[str] | None = None) -> dict:
    shown = [d.metadata for d in index.documents(filters) if within is None or d.doc_id in within]
    holders = Counter(key for metadata in shown for key, value in metadata.items() if _texts(value))
    values = Counter((key, text) for metadata in shown for key, value in metadata.items() for text in _texts(value))
    return {**{(key, None): n for key, n in holders.items()}, **values}


def _counts(facets: list[Facet]) -> dict:
    found = {(facet.field, None): facet.documents for facet in facets}
    found |= {(facet.field, item.value): item.count for facet in facets for item in facet.values}
    return found


def test_facets_count_the_documents_per_value_as_the_listing_shows_them(index: Index) -> None:
    facets = index.facets(limit=None)
    assert _counts(facets) == _expected(index)
    # Every key name counts (a random field whose values came out nearly all distinct is no facet, by the rule).
    fields = {f.field for f in facets} | identifier_fields(_all_counts(index))
    assert {"a/b", "til~de", 'quo"te', "dotted.key", "année", "author"} <= fields
    assert "_citeline" not in {f.field for f in facets}  # citeline's own key, not metadata (a record's is dropped)
    # Fields by how much they narrow, then the documents holding them, then name; values by count, then value;
    # `more` counts the rest.
    order = [(f.remaining_share, -f.documents, f.field) for f in facets]
    assert order == sorted(order)
    for facet, cut in zip(facets, index.facets(limit=2), strict=True):
        assert cut.values == facet.values[:2] and cut.more == len(facet.values) - len(cut.values)
        assert [(-v.count, v.value) for v in facet.values] == sorted((-v.count, v.value) for v in facet.values)


def test_facets_follow_the_filters_and_a_search_answer(index: Index) -> None:
    for filters in ({"meta": {"author": "Mara"}}, {"path_glob": "d1*.md"}, {"meta": {"tags": "levee"}}):
        assert _counts(index.facets(filters, limit=None)) == _expected(index, filters)
    hits = index.search("letters pay levee", 5, mode="lexical", filters={"path_glob": "*.md"})
    answer = {hit.doc_id for hit in hits} | {source.doc_id for hit in hits for source in hit.sources}
    assert _counts(index.facets(within=hits, limit=None)) == _expected(index, within=answer)
    assert index.facets(within=[]) == []
    # A value a facet lists is a value a filter matches: the counts are the filtered listing's length.
    for facet in index.facets():
        for item in facet.values[:3]:
            assert len(index.documents({"meta": {facet.field: item.value}})) == item.count, (facet.field, item)


def test_a_legacy_rows_internal_keys_are_not_facets(index: Index, tmp_path: Path) -> None:
    """Rows written before properties were stored apart held ``record_id``/``body_start`` (records) and ``pages``
    (PDF) as metadata: ``metadata.split_metadata`` moves them out, and the facets leave them out the same way."""
    import shutil

    copy = tmp_path / "legacy"
    shutil.copytree(index.path, copy)
    with contextlib.closing(catalog.connect(copy, read_only=False)) as connection:
        connection.execute(
            "UPDATE documents SET metadata = ? WHERE source_id = 'records.jsonl#r1'",
            [json.dumps({"author": "Mara", "record_id": "r1", "body_start": 0})],
        )
    old = Index.open(copy, embedder=HashEmbedder(), repair=False)
    old.rebuild()  # the passage rows the facets read come from the catalog
    fields = {facet.field: facet for facet in old.facets(limit=None)}
    # r1's legacy keys are citeline's; r2's record has fields of those names of its own, which stay its own.
    assert [v.value for v in fields["record_id"].values] == ["its own"]
    assert [v.value for v in fields["body_start"].values] == ["3"]
    assert _counts(old.facets(limit=None)) == _expected(old)


def test_a_sharded_index_adds_its_shards_counts_up(index: Index, tmp_path: Path) -> None:
    docs = Path(index.documents({"path_glob": "*.md"})[0].source_root)
    sharded = Index.create(tmp_path / "sharded", embedder=HashEmbedder(), shards=3)
    sharded.ingest([docs])
    assert sharded.facets(limit=None) == index.facets(limit=None)
    assert sharded.facets({"meta": {"author": "Mara"}}) == index.facets({"meta": {"author": "Mara"}})
    assert facets_of({}, 10) == []


def _json(facets: list[Facet]) -> list[dict[str, Any]]:
    return json.loads(json.dumps([facet.to_dict() for facet in facets]))


def test_the_server_answers_facets_as_json(index: Index) -> None:
    client = TestClient(create_app(index.path, HashEmbedder()))
    whole = client.get("/facets", params={"limit": 1000})
    assert whole.status_code == 200
    assert whole.json() == _json(index.facets(limit=1000))
    narrowed = client.get("/facets", params={"where": "author=Mara"}).json()
    assert narrowed == _json(index.facets({"meta": {"author": "Mara"}}))
    plain = client.get("/search", params={"q": "levee letters", "mode": "lexical", "k": 3}).json()
    assert plain.get("facets") is None  # asked for only: they cost a query
    answer = client.get("/search", params={"q": "levee letters", "mode": "lexical", "k": 3, "facets": "true"}).json()
    hits = index.search("levee letters", 3, mode="lexical")
    assert answer["facets"] == _json(index.facets(within=hits))
    assert client.get("/facets", params={"where": "nonsense"}).status_code == 400


# ---------------------------------------------------------------- facets that narrow


def _office(folder: Path) -> None:
    """A team's folder as it grows: meeting notes and reports with front matter (a title and an id each, an author
    of four, a status of three, a project of two that the reports lack), and a product table (a unique SKU, a
    category of five, a price)."""
    folder.mkdir()
    rng = random.Random(7)
    authors, statuses, projects = ["Mara", "Ansel", "Tomas", "Ines"], ["draft", "final", "review"], ["levee", "ferry"]
    for number in range(36):
        kind = "report" if number % 4 == 0 else "notes"
        metadata: dict[str, Any] = {
            "title": f"{kind.title()} of week {number + 1}: {rng.choice(['pumps', 'gates', 'budget', 'crews'])}",
            "id": f"DOC-{1000 + number}",
            "author": rng.choice(authors),
            "status": rng.choice(statuses),
        }
        if kind == "notes":
            metadata["project"] = rng.choice(projects)
        body = f"The {kind} of week {number + 1} covers the levee pumps, the ferry crews and the budget."
        (folder / f"{kind}-{number:02}.md").write_text(_front_matter(metadata) + f"\n{body}\n", encoding="utf-8")
    categories = ["rope", "buoy", "anchor", "paint", "lamp"]
    rows = ["sku,title,category,price,text"]
    for number in range(24):
        category = categories[number % 5]
        rows.append(f"SKU-{number:04},{category} {number},{category},{5 + number % 7}.50,A {category} for the harbour")
    (folder / "products.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def office(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("office")
    _office(root / "office")
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([root / "office"])
    return index


def test_no_facet_for_a_field_whose_values_are_nearly_all_distinct(office: Index) -> None:
    fields = [facet.field for facet in office.facets()]
    assert "title" not in fields and "id" not in fields  # the notes' titles and ids, each a document's own
    assert {"author", "status", "project", "category", "price"} <= set(fields)
    # Judged on the whole index, so an answer's or a filter's few documents keep the index's facets.
    hits = office.search("levee pumps budget", 5, mode="lexical", filters={"path_glob": "*.md"})
    assert {"author", "status"} <= {facet.field for facet in office.facets(within=hits)}
    assert "title" not in {facet.field for facet in office.facets({"meta": {"author": "Mara"}})}


def test_facets_come_by_how_much_choosing_a_value_narrows(office: Index) -> None:
    facets = office.facets(limit=None)
    total = len(office.documents())
    for facet in facets:  # the expected share left, and all of it for the documents without the field
        counts = [value.count for value in facet.values]
        held = facet.documents / total * sum(n * n for n in counts) / (sum(counts) * total)
        assert facet.remaining_share == pytest.approx(held + (total - facet.documents) / total, abs=1e-4)
    order = [facet.remaining_share for facet in facets]
    assert order == sorted(order)
    by_field = {facet.field: facet for facet in facets}
    # Four authors over all 36 notes and reports narrow more than five categories over the 24 products alone, and
    # a project the reports lack narrows less than a status every document of the notes holds.
    assert by_field["author"].remaining_share < by_field["category"].remaining_share
    assert by_field["status"].remaining_share < by_field["project"].remaining_share
    assert facets[0].field in {"author", "status"}


def test_identifier_fields_by_their_share_of_values_held_once() -> None:
    counts = {("sku", None): 4, **{("sku", f"s{i}"): 1 for i in range(4)}}
    counts |= {("kind", None): 4, ("kind", "a"): 2, ("kind", "b"): 2}
    counts |= {("pair", None): 2, ("pair", "x"): 1, ("pair", "y"): 1}  # two documents say nothing yet
    counts |= {("tags", None): 4, ("tags", "t"): 4, ("tags", "u"): 1, ("tags", "v"): 1}  # a list: shared items
    assert identifier_fields(counts) == {"sku"}
    assert [facet.field for facet in facets_of(counts)] == ["kind", "pair", "tags"]
