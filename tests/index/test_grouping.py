"""One result per document (``SearchRequest.group``, issue 42.3) and records named on every surface (42.4).

A long report whose every section answers the query fills a flat top k; grouped, each document shows once, under its
best passage, its other passages listed (text, JSON, the page's ``<details>``), and k counts documents. The CLI and
the page group by default; ``Index.search``, ``GET /search`` and the retrievers return passages unless asked. A
JSONL or CSV record is named ``file#id`` with its offsets said to be into the record's text, ``citeline show`` takes
that name or a path, and ``citeline remove`` names the record it removed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import HashEmbedder
from fastapi.testclient import TestClient

from citeline import Index, QueryError, SearchRequest
from citeline.cli.main import cli
from citeline.server import create_app

QUERY = "levee seepage engineers"
#: Documents that answer QUERY: the long report, four notes, two JSONL records and two CSV rows.
ANSWERING = 9


def _corpus(folder: Path) -> Path:
    folder.mkdir()
    sections = [
        f"## Section {i}\n\nThe engineers measured levee seepage at station {i} again; seepage under the levee rose "
        f"after the rain of week {i}, and the engineers logged it. " * 4
        for i in range(10)
    ]
    (folder / "report.md").write_text("# Levee report\n\n" + "\n\n".join(sections), encoding="utf-8")
    for name in "abcd":
        (folder / f"note-{name}.md").write_text(
            f"# Note {name}\n\nThe engineers saw levee seepage once near farm {name}.\n", encoding="utf-8"
        )
    records = [
        {"_id": "rec1", "title": "Record one", "text": "Levee seepage at the mill: the engineers were called."},
        {"_id": "rec2", "title": "Record two", "text": "Seepage through the old levee; engineers sandbagged it."},
    ]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (folder / "table.csv").write_text(
        "name,text\nmill,Engineers found levee seepage by the mill race.\nford,Levee seepage at the ford alarmed "
        "the engineers.\n",
        encoding="utf-8",
    )
    (folder / "other.md").write_text("# Bread\n\nFlour, water and salt make bread.\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("grouping")
    Index.create(root / "ix", embedder=HashEmbedder()).ingest([_corpus(root / "docs")])
    return root / "ix"


@pytest.fixture(scope="module")
def index(index_path: Path) -> Index:
    return Index.open(index_path, embedder=HashEmbedder())


@pytest.fixture(scope="module")
def client(index_path: Path) -> TestClient:
    return TestClient(create_app(index_path, embedder=HashEmbedder()))


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={"COLUMNS": "120", "NO_COLOR": "1"})


def search(index_path: Path, *args: str) -> Result:
    return run("search", QUERY, "--index", str(index_path), "--mode", "lexical", "--min-score", "0", *args)


# ---------------------------------------------------------------- grouping


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
@pytest.mark.parametrize("collapse", [True, False])
def test_index_search_is_flat_by_default_and_groups_when_asked(index: Index, mode: str, collapse: bool) -> None:
    options = {"mode": mode, "collapse": collapse, "min_score": 0}
    flat = index.search(QUERY, 5, **options)
    assert len(flat) == 5 and len({hit.doc_id for hit in flat}) < 5  # the report fills the flat top 5
    assert all(not hit.more_passages for hit in flat)
    grouped = index.search(QUERY, 5, group=True, **options)
    assert len(grouped) == 5 and len({hit.doc_id for hit in grouped}) == 5  # k counts documents
    report = next(hit for hit in grouped if hit.source_path.endswith("report.md"))
    assert grouped[0] is report and len(report.more_passages) >= 3
    scores = [report.score] + [passage.score for passage in report.more_passages]
    assert scores == sorted(scores, reverse=True)
    text = index.document(report.doc_id).text
    for passage in report.more_passages:
        assert text[passage.char_start : passage.char_end] == passage.text
        assert (passage.relevance is None) == (report.relevance is None)  # the hash model has no calibration
    # Every passage of a shown document in the flat top k is the result or one of its passages.
    shown = {(hit.doc_id, hit.chunk_id) for hit in grouped}
    shown |= {(hit.doc_id, passage.chunk_id) for hit in grouped for passage in hit.more_passages}
    assert {(hit.doc_id, hit.chunk_id) for hit in flat if hit.doc_id in {h.doc_id for h in grouped}} <= shown
    # A request with group is what Index.search runs.
    assert index.search(SearchRequest.of(QUERY, 5, group=True, **options)) == grouped


def test_k_counts_documents_and_never_more_than_exist(index: Index) -> None:
    for k in (1, 3, ANSWERING, 50):
        grouped = index.search(QUERY, k, mode="lexical", group=True, min_score=0)
        assert len(grouped) == len({hit.doc_id for hit in grouped}) == min(k, ANSWERING)
    (only,) = index.search(QUERY, 1, mode="lexical", group=True, min_score=0)
    assert only.source_path.endswith("report.md") and only.more_passages


def test_cli_groups_by_default_and_flat_lists_passages(index_path: Path) -> None:
    grouped = search(index_path, "-k", "4")
    assert grouped.exit_code == 0, grouped.output
    ranks = re.findall(r"^ ?(\d+)\. relevance (?:[\d.]+|n/a)  (\S+)", grouped.output, flags=re.M)
    assert [rank for rank, _ in ranks] == ["1", "2", "3", "4"] and len({name for _, name in ranks}) == 4
    assert re.search(r"^    \d+ more passages in this document:$", grouped.output, flags=re.M)
    flat = search(index_path, "-k", "4", "--flat")
    names = re.findall(r"^ ?\d+\. relevance (?:[\d.]+|n/a)  (\S+)", flat.output, flags=re.M)
    assert len(names) == 4 and len(set(names)) < 4 and "more passage" not in flat.output


def test_cli_json_lists_the_other_passages(index_path: Path) -> None:
    records = [json.loads(line) for line in search(index_path, "-k", "3", "--json").output.splitlines()]
    assert [record["rank"] for record in records] == [1, 2, 3] and len({r["doc_id"] for r in records}) == 3
    more = records[0]["more_passages"]
    assert more and all({"chunk_id", "char_start", "char_end", "text", "score", "highlights"} <= set(p) for p in more)
    assert all("text" not in source for passage in more for source in passage["sources"])
    flat = [json.loads(line) for line in search(index_path, "-k", "3", "--json", "--flat").output.splitlines()]
    assert all(record["more_passages"] == [] for record in flat)


def test_the_page_groups_by_default_with_details(client: TestClient) -> None:
    base = {"q": QUERY, "mode": "lexical", "min_score": "0", "k": "4"}
    page = client.get("/", params=base).text
    assert page.count('class="result"') == 4 and '<details class="more">' in page
    assert re.search(r"\d+ more passages in this\s+document</summary>", page)
    assert 'name="group"' in page
    flat = client.get("/", params={**base, "group": "false"}).text
    assert flat.count('class="result"') == 4 and '<details class="more">' not in flat


def test_the_http_api_is_flat_by_default_and_groups_when_asked(client: TestClient) -> None:
    base = {"q": QUERY, "mode": "lexical", "min_score": 0, "k": 4}
    flat = client.get("/search", params=base).json()["results"]
    assert len(flat) == 4 and len({r["doc_id"] for r in flat}) < 4 and all(not r["more_passages"] for r in flat)
    grouped = client.get("/search", params={**base, "group": "true"}).json()["results"]
    assert len({r["doc_id"] for r in grouped}) == 4 and grouped[0]["more_passages"]
    assert grouped[0]["more_passages"][0]["text"]


def test_the_retrievers_are_flat_by_default_and_group_when_asked(index: Index) -> None:
    from citeline.integrations.langchain import CitelineRetriever as LangChainRetriever
    from citeline.integrations.llamaindex import CitelineRetriever as LlamaIndexRetriever

    options = {"k": 4, "mode": "lexical", "min_score": 0}
    docs = LangChainRetriever(index=index, **options).invoke(QUERY)
    assert len(docs) == 4 and len({d.metadata["doc_id"] for d in docs}) < 4
    docs = LangChainRetriever(index=index, **options).invoke(QUERY, group=True)
    assert len({d.metadata["doc_id"] for d in docs}) == 4 and docs[0].metadata["more_passages"]
    nodes = LlamaIndexRetriever(index, **options).retrieve(QUERY)
    assert len({n.node.metadata["doc_id"] for n in nodes}) < 4
    nodes = LlamaIndexRetriever(index, group=True, **options).retrieve(QUERY)
    assert len({n.node.metadata["doc_id"] for n in nodes}) == 4 and nodes[0].node.metadata["more_passages"]


def test_a_grouped_request_is_checked_like_the_others() -> None:
    assert SearchRequest.of("x").group is False and SearchRequest.of("x", group=True).group is True
    with pytest.raises(QueryError, match="give a SearchRequest alone"):
        Index.search(None, SearchRequest.of("x"), group=True)  # type: ignore[arg-type]


# ---------------------------------------------------------------- record names


def _record_hits(index: Index) -> dict[str, object]:
    hits = index.search(QUERY, 20, mode="lexical", min_score=0, collapse=False)
    return {hit.source_id: hit for hit in hits}


def test_results_name_their_record(index: Index) -> None:
    hits = _record_hits(index)
    record, row, report = hits["records.jsonl#rec2"], hits["table.csv#3"], hits["report.md"]
    assert record.record_id == "rec2" and record.name.endswith("records.jsonl#rec2")  # type: ignore[attr-defined]
    assert row.record_id == "3" and row.name.endswith("table.csv#3")  # type: ignore[attr-defined]
    assert report.record_id is None and report.name == report.source_path  # type: ignore[attr-defined]
    assert record.sources[0].record_id == "rec2"  # type: ignore[attr-defined]


@pytest.mark.parametrize("flat", [[], ["--flat"]])
def test_cli_names_records_and_says_offsets_are_into_their_text(index_path: Path, flat: list[str]) -> None:
    out = search(index_path, "-k", "20", "--no-collapse", *flat).output
    jsonl = re.search(r"  (\S*records\.jsonl#rec1)  \[chars \d+-\d+ of the record's text, chunk 0\]", out)
    csv = re.search(r"  (\S*table\.csv#2)  \[chars \d+-\d+ of the record's text, chunk 0\]", out)
    assert jsonl and csv, out
    assert re.search(r"  \S*report\.md  \[chars \d+-\d+, chunk \d+\]", out)  # a whole file: as before
    records = [json.loads(line) for line in search(index_path, "-k", "20", "--json", *flat).output.splitlines()]
    by_source = {record["source_id"]: record for record in records}
    assert by_source["records.jsonl#rec1"]["record_id"] == "rec1" and by_source["table.csv#2"]["record_id"] == "2"
    table = search(index_path, "-k", "20", "--format", "table", *flat).output
    assert "records.jsonl#rec1" in table
    # the documents listing too: a table row per record, each named (not the same file path on every row)
    listing = run("documents", "--index", str(index_path), "--format", "table").output
    assert "records.jsonl#rec1" in listing and "table.csv#2" in listing, listing
    assert "#" not in next(line for line in listing.splitlines() if "report.md" in line)
    rows = [json.loads(line) for line in run("documents", "--index", str(index_path), "--json").output.splitlines()]
    assert {row["source_path"].rsplit("/", 1)[-1] for row in rows if row["record_id"]} == {"records.jsonl", "table.csv"}


def test_the_page_and_the_api_name_records(client: TestClient) -> None:
    params = {"q": "mill seepage", "mode": "lexical", "min_score": 0, "k": 20}
    page = client.get("/", params=params).text
    assert "<code>records.jsonl#rec1</code>" in page and "<code>table.csv#2</code>" in page
    assert "of the record&#39;s text" in page or "of the record's text" in page
    found = {r["source_id"]: r for r in client.get("/search", params=params).json()["results"]}
    assert found["records.jsonl#rec1"]["record_id"] == "rec1" and found["table.csv#2"]["record_id"] == "2"
    assert found["records.jsonl#rec1"]["sources"][0]["record_id"] == "rec1"


def test_show_takes_an_id_a_path_or_a_record_name(index_path: Path, index: Index) -> None:
    docs = index_path.parent / "docs"
    by_id = index.search("mill race", 1, mode="lexical", min_score=0)[0]
    assert by_id.source_id == "table.csv#2"
    for name in (by_id.doc_id, "table.csv#2", f"{docs}/table.csv#2", by_id.name):
        assert index.document(name).doc_id == by_id.doc_id, name
        shown = run("show", name, "--index", str(index_path))
        assert shown.exit_code == 0, shown.output
        first = shown.output.splitlines()[0]
        assert first.endswith("table.csv#2  [chars 0-47 of 47 in the record's text (not the file's)]"), first
    report = index.document(str(docs / "report.md"))
    assert report.source_id == "report.md" and report.record_id is None
    assert index.document("report.md").doc_id == report.doc_id
    assert index.document("records.jsonl#rec1").record_id == "rec1"
    many = run("show", str(docs / "records.jsonl"), "--index", str(index_path))
    assert many.exit_code == 1 and len(many.output.splitlines()) == 1
    assert "names 2 documents" in many.output and "records.jsonl#rec1" in many.output
    unknown = run("show", "nope.md", "--index", str(index_path))
    assert unknown.exit_code == 1 and "no document 'nope.md'" in unknown.output
    with pytest.raises(QueryError, match="names 2 documents"):
        index.document(str(docs / "table.csv"))


def test_remove_names_the_record_it_removed(tmp_path: Path) -> None:
    Index.create(tmp_path / "ix", embedder=HashEmbedder()).ingest([_corpus(tmp_path / "docs")])
    index = Index.open(tmp_path / "ix", embedder=HashEmbedder())
    row = index.document("table.csv#3")
    removed = run("remove", "--doc", row.doc_id, "--index", str(tmp_path / "ix"))
    assert removed.exit_code == 0, removed.output
    assert f"removed {row.doc_id}  {tmp_path / 'docs' / 'table.csv'}#3" in removed.output
    whole = run("remove", str(tmp_path / "docs" / "note-a.md"), "--index", str(tmp_path / "ix"), "--json")
    assert json.loads(whole.output)["documents"][0]["name"] == str(tmp_path / "docs" / "note-a.md")


def test_a_sharded_index_finds_a_record_by_name_and_groups(tmp_path: Path) -> None:
    """A name is looked for in every shard (an id routes to one); grouping runs on the merged ranking."""
    sharded = Index.create(tmp_path / "ix", embedder=HashEmbedder(), shards=3)
    sharded.ingest([_corpus(tmp_path / "docs")])
    assert sharded.document("records.jsonl#rec2").record_id == "rec2"
    assert sharded.document(str(tmp_path / "docs" / "table.csv") + "#3").source_id == "table.csv#3"
    grouped = sharded.search(QUERY, 5, mode="lexical", min_score=0, group=True)
    assert len({hit.doc_id for hit in grouped}) == 5 and grouped[0].more_passages
