"""Structured filters: validated, parameterized SQL over the read snapshot, applied before ranking."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pytest
from _common import examples
from click.testing import CliRunner
from conftest import HashEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeline import Index, QueryError, SearchResult
from citeline.cli.main import cli
from citeline.store.filters import META_OPERATORS, Filters, filters_from, where_meta
from citeline.store.passages import Passages
from citeline.vectors import flat
from citeline.vectors.flat import FlatIndex

QUERY = "soldiers river families letters"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, Path, datetime]:
    """Two roots ingested in two runs, with Markdown, text, a subfolder and JSONL records with metadata.

    Returns the index, the folder holding the roots, and a moment between the two runs. Shared by the module's
    tests, which only read it (the malicious-value tests check that it stays intact).
    """
    tmp_path = tmp_path_factory.mktemp("filters")
    root_a, root_b = tmp_path / "docs" / "alpha", tmp_path / "docs" / "beta"
    _write(root_a / "a1.md", "# Alpha one\n\nSoldiers crossed the river at night to reach their families.")
    _write(root_a / "sub" / "a2.txt", "Alpha two\n\nLetters from home stopped; soldiers worried about families.")
    records = [
        {
            "_id": "r1",
            "title": "Record one",
            "text": "Soldiers by the river wrote letters.",
            "author": "Mara",
            "year": 2020,
            "verified": True,
            "a/b~c": "odd key",
        },
        {
            "_id": "r2",
            "title": "Record two",
            "text": "Families waited for soldiers and letters.",
            "author": "Ansel",
            "year": 2021,
            "verified": False,
        },
        {
            "_id": "r3",
            "title": "Record three",
            "text": "The river garrison lost soldiers; families fled.",
            "author": "Mara",
            "year": 2021,
        },
    ]
    _write(root_a / "records.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([root_a])
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    _write(root_b / "b1.md", "# Beta one\n\nThe soldiers' families by the river got no letters.")
    index.ingest([root_b])
    return index, tmp_path / "docs", between


def _ids(results: list[SearchResult]) -> set[str]:
    return {r.source_id for r in results}


def _everything(index: Index, filters: dict[str, object]) -> set[str]:
    return _ids(index.search(QUERY, k=100, filters=filters, collapse=False))


def test_no_filter_sees_every_document(corpus) -> None:
    index, _, _ = corpus
    assert _everything(index, {}) == {
        "a1.md",
        "sub/a2.txt",
        "records.jsonl#r1",
        "records.jsonl#r2",
        "records.jsonl#r3",
        "b1.md",
    }


def test_source_is_a_root_as_given_or_resolved_a_folder_below_it_a_file_or_a_source_id(corpus, monkeypatch) -> None:
    index, docs, _ = corpus
    beta = {"b1.md"}
    alpha = {"a1.md", "sub/a2.txt", "records.jsonl#r1", "records.jsonl#r2", "records.jsonl#r3"}
    assert _everything(index, {"source": str(docs / "beta")}) == beta
    monkeypatch.chdir(docs)
    assert _everything(index, {"source": "beta"}) == beta  # relative, as it was given to `citeline ingest`
    assert _everything(index, {"source": "./alpha/../beta/"}) == beta
    assert _everything(index, {"source": docs / "alpha"}) == alpha  # a Path works too
    assert _everything(index, {"source": "alpha/sub"}) == {"sub/a2.txt"}
    assert _everything(index, {"source": "alpha/records.jsonl"}) == {f"records.jsonl#r{i}" for i in (1, 2, 3)}
    assert _everything(index, {"source": "sub/a2.txt"}) == {"sub/a2.txt"}  # a source id, as results show it
    assert _everything(index, {"source": ["beta", "sub/a2.txt"]}) == beta | {"sub/a2.txt"}
    # A prefix of a folder name is not that folder.
    assert _everything(index, {"source": str(docs / "alp")}) == set()


def test_path_glob_matches_the_source_id_or_the_absolute_path(corpus) -> None:
    index, docs, _ = corpus
    assert _everything(index, {"path_glob": "*.md"}) == {"a1.md", "b1.md"}
    assert _everything(index, {"path_glob": "sub/*"}) == {"sub/a2.txt"}
    assert _everything(index, {"path_glob": f"{docs}/beta/*"}) == {"b1.md"}
    assert _everything(index, {"path_glob": "records.jsonl#r[12]"}) == {"records.jsonl#r1", "records.jsonl#r2"}
    assert _everything(index, {"path_glob": ["*.txt", "*b1*"]}) == {"sub/a2.txt", "b1.md"}


def test_meta_matches_text_numbers_and_booleans_and_keys_and_together(corpus) -> None:
    index, _, _ = corpus
    assert _everything(index, {"meta": {"author": "Mara"}}) == {"records.jsonl#r1", "records.jsonl#r3"}
    assert _everything(index, {"meta": {"year": 2021}}) == {"records.jsonl#r2", "records.jsonl#r3"}
    assert _everything(index, {"meta": {"year": "2021"}}) == {"records.jsonl#r2", "records.jsonl#r3"}
    assert _everything(index, {"meta": {"year": 2020.0}}) == {"records.jsonl#r1"}
    assert _everything(index, {"meta": {"verified": False}}) == {"records.jsonl#r2"}
    assert _everything(index, {"meta": {"a/b~c": "odd key"}}) == {"records.jsonl#r1"}
    assert _everything(index, {"meta": {"author": ["Ansel", "Nobody"]}}) == {"records.jsonl#r2"}
    assert _everything(index, {"meta": {"author": "Mara", "year": 2021}}) == {"records.jsonl#r3"}
    assert _everything(index, {"meta": {"author": "Mara"}, "path_glob": "*r1"}) == {"records.jsonl#r1"}
    assert _everything(index, {"meta": {"author": "Mara"}, "source": "b1.md"}) == set()


def test_ingested_after_and_before_split_the_two_runs(corpus) -> None:
    index, _, between = corpus
    assert _everything(index, {"ingested_after": between}) == {"b1.md"}
    assert len(_everything(index, {"ingested_before": between.isoformat()})) == 5
    day = between.date().isoformat()
    assert len(_everything(index, {"ingested_after": day})) == 6  # a date means midnight UTC
    assert _everything(index, {"ingested_before": day}) == set()
    assert _everything(index, {"ingested_after": between.replace(tzinfo=None)}) == {"b1.md"}  # naive is UTC


def test_filtered_results_are_the_exact_top_k_of_the_matching_chunks(corpus) -> None:
    index, _, _ = corpus
    filters = {"path_glob": ["*.md", "*.jsonl#*"], "meta": {}}
    results = index.search(QUERY, k=3, mode="dense", filters=filters, collapse=False)
    connection = duckdb.connect(str(index.path / "meta.duckdb"), read_only=True)
    rows = connection.execute(
        "SELECT c.chunk_id, c.vector FROM chunks c JOIN documents d USING (doc_id) "
        "WHERE d.source_id GLOB '*.md' OR d.source_id GLOB '*.jsonl#*'"
    ).fetchall()
    connection.close()
    query = index.encode_query(QUERY)
    expected = sorted(((float(np.dot(vector, query)), chunk_id) for chunk_id, vector in rows), reverse=True)[:3]
    assert [r.chunk_id for r in results] == [chunk_id for _, chunk_id in expected]
    assert [r.score for r in results] == pytest.approx([score for score, _ in expected], abs=1e-5)


@pytest.mark.parametrize(
    "filters",
    [
        {"source": "' OR 1=1 --"},
        {"source": '"; DROP TABLE chunks; --'},
        {"path_glob": "' OR '1'='1"},
        {"path_glob": "*'; DROP TABLE documents; --"},
        {"meta": {"author": "' OR 1=1 --"}},
        {"meta": {"author') OR 1=1 --": "x"}},
        {"meta": {"$.author": "Mara"}},  # a JSON path is not a key name
        {"meta": {'"; DROP TABLE chunks; --': '"; DROP TABLE chunks; --'}},
    ],
)
def test_malicious_values_are_plain_values_that_match_nothing(corpus, filters) -> None:
    index, _, _ = corpus
    before = index.status()
    assert index.search(QUERY, k=10, filters=filters) == []
    after = index.status()
    assert (after.documents, after.chunks) == (before.documents, before.chunks) == (6, 6)
    snapshot = index.snapshot()
    assert sum(len(ids) for ids, _ in snapshot.passages.live_parts()) == 6
    assert len(index.search(QUERY, k=10)) == 6


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"sauce": "x"}, "unknown filter key 'sauce'; filters take source, path_glob"),
        ({"source": 5}, "filter 'source' must be text"),
        ({"source": ""}, "filter 'source' is empty"),
        ({"path_glob": ["*.md", None]}, "filter 'path_glob' must be text"),
        ({"ingested_after": "yesterday"}, "'ingested_after' is not an ISO 8601 date"),
        ({"ingested_before": "2026-13-01"}, "'ingested_before' is not an ISO 8601 date"),
        ({"ingested_after": 20260101}, "'ingested_after' must be an ISO 8601 date"),
        ({"ingested_after": "2026-02-01", "ingested_before": "2026-01-01"}, "must be earlier than"),
        ({"meta": "author=Mara"}, "filter 'meta' must be a dict"),
        ({"meta": {"author": None}}, "values must be text, numbers, dates or true/false"),
        ({"meta": {"author": {"nested": 1}}}, "unknown operator 'nested'; use one of =, !=, ~"),
        ({"meta": {"author": {"=": {"nested": 1}}}}, "values must be text, numbers, dates or true/false"),
        ({"meta": {"year": {">": [2020, 2021]}}}, "'>' takes one value, not a list"),
        ({"meta": {"author": {"~": ""}}}, "'~' needs some text"),
        ({"meta": {"_citeline": {"~": "utf"}}}, "citeline's own"),
        ({"meta": {"author": []}}, "empty list"),
        ({"meta": {"": "x"}}, "keys must be non-empty text"),
        ("source=seeds", "filters must be a dict"),
    ],
)
def test_invalid_filters_raise_query_error_naming_the_key(filters, message) -> None:
    with pytest.raises(QueryError, match=message):
        Filters.from_value(filters)


def test_search_validates_filters_before_anything_else(corpus) -> None:
    index, _, _ = corpus
    with pytest.raises(QueryError, match="unknown filter key 'path'; filters take source, path_glob"):
        index.search(QUERY, filters={"path": "*.md"})


def test_filters_become_parameterized_sql_with_no_user_text_in_it() -> None:
    evil = "x' OR 1=1 --"
    filters = Filters.from_value(
        {"source": evil, "path_glob": evil, "meta": {evil: evil}, "ingested_after": "2026-01-01"}
    )
    sql, params = filters.to_sql()
    assert "OR 1=1" not in sql and "x'" not in sql
    assert evil in params and "/" + evil in params
    assert Filters.from_value(None).to_sql() == ("TRUE", [])
    assert Passages([]).allowed(Filters()) is None


def _big_corpus(tmp_path: Path, fake_embedder: HashEmbedder) -> tuple[Index, Path]:
    """3000 records that match the query well, and 12 quiet documents (in their own folder) that match it badly."""
    loud = tmp_path / "loud"
    words = ["soldiers", "river", "families", "letters"]
    records = [
        {"_id": str(i), "text": " ".join(words[: 2 + i % 3]) + f" report {i}", "parity": i % 2} for i in range(3000)
    ]
    _write(loud / "reports.jsonl", "\n".join(json.dumps(r) for r in records) + "\n")
    quiet = tmp_path / "quiet"
    # Twelve different notes (near-identical ones would rightly collapse into one result).
    subjects = [
        "budget tables",
        "harbour weather",
        "ferry timetable",
        "grain prices",
        "school roof",
        "bridge tolls",
        "market stalls",
        "library hours",
        "well water",
        "road repairs",
        "choir practice",
        "tide charts",
    ]
    for i, subject in enumerate(subjects):
        _write(quiet / f"q{i:02}.txt", f"Quiet note {i}\n\nThe {subject} for item {i} were filed on day {i * 7}.")
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([loud, quiet])
    return index, quiet


def test_k_results_come_back_when_the_filter_excludes_the_best_thousands(tmp_path, fake_embedder) -> None:
    index, quiet = _big_corpus(tmp_path, fake_embedder)
    unfiltered = index.search("soldiers river families", k=3012, collapse=False)
    quiet_ranks = [rank for rank, r in enumerate(unfiltered) if r.source_path.startswith(str(quiet))]
    assert min(quiet_ranks) >= 3000  # every loud record outranks every quiet note
    for collapse in (False, True):
        results = index.search("soldiers river families", k=10, filters={"source": str(quiet)}, collapse=collapse)
        assert len(results) == 10
        assert all(r.source_path.startswith(str(quiet)) for r in results)
    assert len(index.search("soldiers river families", k=50, filters={"source": str(quiet)}, collapse=False)) == 12
    # A filter that lets through half the index takes FAISS's ID-selector path: still exact and complete.
    half = index.search("soldiers river families", k=20, filters={"meta": {"parity": 1}}, collapse=False)
    assert len(half) == 20 and all(int(r.source_id[14:]) % 2 for r in half)
    # Exact: the chunk fusion's scores (without the feedback stage, whose first document a filter may change) are
    # the unfiltered ones of the odd records.
    from dataclasses import replace

    from citeline.query.plan import DEFAULT_FUSION

    chunk_fusion = replace(DEFAULT_FUSION, feedback=0.0)
    allowed = index.snapshot().allowed_chunk_ids(Filters.from_value({"meta": {"parity": 1}}))
    filtered = index.rank("soldiers river families", 20, mode="hybrid", fusion=chunk_fusion, allowed=allowed)
    every = dict(index.rank("soldiers river families", 3012, mode="hybrid", fusion=chunk_fusion))
    assert [score for _, score in filtered] == pytest.approx(
        sorted((every[c] for c in allowed.tolist() if c in every), reverse=True)[:20], abs=1e-6
    )


@pytest.mark.parametrize("fraction", [0.0, 1.0])
def test_both_filtered_search_paths_are_exact(monkeypatch, fraction) -> None:
    # fraction 0 forces FAISS's IDSelectorBatch, 1 forces numpy over the allowed rows.
    monkeypatch.setattr(flat, "NUMPY_FILTER_FRACTION", fraction)
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((500, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(500, dtype=np.int64) * 5 + 3
    index = FlatIndex.build(ids, vectors, 16)
    query = vectors[0]
    allowed = np.sort(rng.choice(ids, 60, replace=False))
    hits = index.search(query, 10, allowed)
    scores = vectors @ query
    mask = np.isin(ids, allowed)
    expected = ids[mask][np.argsort(-scores[mask])][:10]
    assert [chunk_id for chunk_id, _ in hits] == expected.tolist()
    assert index.search(query, 100, allowed)[-1][0] in allowed
    assert len(index.search(query, 100, allowed)) == 60
    assert index.search(query, 5, np.zeros(0, np.int64)) == []


@pytest.fixture
def cli_index(corpus, monkeypatch) -> tuple[str, Path]:
    """The corpus index, searchable from the CLI (the CLI loads the index's model; here the hashing embedder)."""
    index, docs, _ = corpus
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())
    return str(index.path), docs


def _cli_rows(args: list[str]) -> list[dict[str, object]]:
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def test_cli_filter_flags_mirror_the_python_filters(cli_index) -> None:
    index_path, docs = cli_index
    base = ["search", QUERY, "--index", index_path, "-k", "50"]
    assert {r["source_id"] for r in _cli_rows([*base, "--source", str(docs / "beta")])} == {"b1.md"}
    assert {r["source_id"] for r in _cli_rows([*base, "--path", "*.md"])} == {"a1.md", "b1.md"}
    assert {r["source_id"] for r in _cli_rows([*base, "--path", "*.md", "--path", "*.txt"])} == {
        "a1.md",
        "b1.md",
        "sub/a2.txt",
    }
    rows = _cli_rows([*base, "--where", "author=Mara", "--where", "year=2021"])
    assert {r["source_id"] for r in rows} == {"records.jsonl#r3"}
    rows = _cli_rows([*base, "--where", "author=Mara", "--where", "author=Ansel"])
    assert {r["source_id"] for r in rows} == {f"records.jsonl#r{i}" for i in (1, 2, 3)}
    assert _cli_rows([*base, "--ingested-after", "2999-01-01"]) == []
    assert len(_cli_rows([*base, "--ingested-before", "2999-01-01", "--no-collapse"])) == 6
    assert _cli_rows([*base, "--where", "author=' OR 1=1 --"]) == []
    text = CliRunner().invoke(cli, [*base, "--source", "nowhere"])
    assert text.exit_code == 0 and "no passages found matching the filters" in text.output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--where", "author"], "'author' is not key=value"),
        (["--ingested-after", "last week"], "'ingested_after' is not an ISO 8601 date"),
        (["--collapse-threshold", "1.5"], "1.5 is not in the range 0.0<=x<=1.0"),  # declared bounds: a usage error
        (["--collapse-threshold", "0"], "collapse_threshold must be above 0 and at most 1"),
    ],
)
def test_cli_bad_filters_are_one_line_errors(cli_index, flags, message) -> None:
    index_path, _ = cli_index
    result = CliRunner().invoke(cli, ["search", QUERY, "--index", index_path, *flags])
    assert result.exit_code != 0
    assert message in result.output and "Traceback" not in result.output


def test_document_signals_keep_a_filtered_chunks_fused_score(tmp_path, fake_embedder) -> None:
    """With document signals on (the BM25 one over the query's idf bound and the corpus's mean document length, the
    cosine ones as the chunks' cosines), a filter that keeps half the documents gives each kept chunk the fused
    score it has unfiltered: no signal is rescaled over the candidate set."""
    from citeline.query.plan import Fusion

    index, _ = _big_corpus(tmp_path, fake_embedder)
    query = "soldiers river families"
    fusion = Fusion(weight=0.4, documents=(("lexical", 0.3), ("whole", 0.2), ("dense", 0.1)))
    allowed = index.snapshot().allowed_chunk_ids(Filters.from_value({"meta": {"parity": 1}}))
    assert allowed is not None and 0 < len(allowed) < len(index.snapshot().vectors)
    unfiltered = dict(index.rank(query, 400, mode="hybrid", fusion=fusion))
    filtered = index.rank(query, 20, mode="hybrid", fusion=fusion, allowed=allowed)
    assert len(filtered) == 20
    assert [score for _, score in filtered] == pytest.approx([unfiltered[c] for c, _ in filtered], abs=1e-6)


# ---------------------------------------------------------------- huge lists, huge and odd values (issue 40)


def test_a_list_of_many_values_matches_as_a_short_one(corpus) -> None:
    index, _, _ = corpus
    many = [f"nobody-{i}" for i in range(20_000)]
    assert _everything(index, {"meta": {"author": [*many, "Ansel"]}}) == {"records.jsonl#r2"}
    assert _everything(index, {"meta": {"year": {"in": [*range(3000, 23_000), 2020]}}}) == {"records.jsonl#r1"}
    assert _everything(index, {"meta": {"year": {"in": [*many, 2020, "2021"]}}}) == {
        f"records.jsonl#r{i}" for i in (1, 2, 3)
    }
    assert _everything(index, {"meta": {"author": {"!=": [*many, "Mara"]}}}) == {
        "a1.md",
        "sub/a2.txt",
        "records.jsonl#r2",
        "b1.md",
    }
    assert _everything(index, {"meta": {"verified": [True, *many]}}) == {"records.jsonl#r1"}


#: A child that opens the index, searches once without a filter (so that DuckDB and the snapshot are loaded), then
#: with an ``in`` filter of each size, the CLI's way (``--where "year in v1,v2,..."``), printing the peak RSS growth.
_MANY_VALUES_CHILD = """
import json, sys, time
def rss(field):  # MiB
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":")) / 1024
sys.path.insert(0, sys.argv[2])
from conftest import HashEmbedder
from citeline import Index
from citeline.store.filters import where_meta
index = Index.open(sys.argv[1], embedder=HashEmbedder())
index.search("soldiers river", 5)
for count in (20_000, 200_000):
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak (VmHWM) starts again from the resident size now
    base = rss("VmHWM")
    started = time.perf_counter()
    meta = where_meta(["year in " + ",".join(str(3000 + i) for i in range(count)) + ",2020"])
    found = index.search("soldiers river", 5, filters={"meta": meta})
    grown = rss("VmHWM") - base
    print(json.dumps({"count": count, "found": len(found), "mib": grown, "seconds": time.perf_counter() - started}))
    sys.stdout.flush()
    if grown > BOUND_MIB:
        break  # (the old statement for 200,000 values took over 6 GiB)
"""

#: Peak RSS growth an ``in`` filter may cost, in MiB.
BOUND_MIB = 256


def test_an_in_filter_of_200000_values_answers_in_bounded_memory(corpus) -> None:
    # Each value was an OR of two comparisons with four parameters: 20,000 values cost 41 s and 1.27 GiB, 200,000
    # over 6 GiB. Measured in a child process (peak RSS is per process); the bound is memory, not time.
    import subprocess
    import sys

    index, _, _ = corpus
    tests = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", f"BOUND_MIB = {BOUND_MIB}\n{_MANY_VALUES_CHILD}", str(index.path), str(tests)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    for line in lines:
        assert line["found"] == 1, line
        assert line["mib"] < BOUND_MIB, line
    assert [line["count"] for line in lines] == [20_000, 200_000], run.stderr[-2000:]


@pytest.mark.parametrize(
    "value",
    [10**5000, -(10**5000), 10**400, [1, 10**5000]],
    ids=["5000-digits", "minus-5000-digits", "400-digits", "in-a-list"],
)
def test_a_number_too_large_to_compare_is_a_query_error_naming_the_key(value) -> None:
    for operator in ("=", ">", "!="):
        if operator == ">" and isinstance(value, list):
            continue
        with pytest.raises(QueryError, match=r"filter 'meta' key 'year': a number of about \d+ digits is too large"):
            Filters.from_value({"meta": {"year": {operator: value}}})


_FILTER_VALUES = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**6000), max_value=10**6000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.dates(),
    st.datetimes(timezones=st.none() | st.timezones()),
    st.booleans(),
    st.text(max_size=50),
    st.text(alphabet="0123456789-:T.+eE ", max_size=40),  # odd dates and numbers as text
    st.sampled_from(["2021-02-30", "0000-01-01", "9999-12-31T23:59:59+14:00", "1e999", "-1e999", "NaN", "inf"]),
    st.builds(lambda n: "9" * n, st.integers(1, 20_000)),
    st.builds(lambda n: "x" * n, st.integers(100_000, 300_000)),  # huge strings
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(["year", "author", "verified", "missing"]),
    operator=st.sampled_from(META_OPERATORS),
    values=st.lists(_FILTER_VALUES, min_size=1, max_size=3),
    where=st.text(max_size=60),
)
def test_any_filter_value_gives_results_or_a_query_error(corpus, key, operator, values, where) -> None:
    index, _, _ = corpus
    operand = values if operator in ("in", "=", "!=", "~") else values[0]
    for filters in ({"meta": {key: {operator: operand}}}, {"ingested_after": values[0]}, None):
        try:
            if filters is None:
                filters = {"meta": where_meta([where])}
            index.search(QUERY, k=3, mode="lexical", filters=filters)
        except QueryError as exc:
            assert "\n" not in str(exc).strip(), str(exc)[:200]


def test_filters_from_the_surfaces_options() -> None:
    """The one converter every surface calls (the CLI's flags, the HTTP API's and the page's parameters, the MCP
    tools' filters): keys not given are left out, ``where`` clauses read as the CLI reads them, a bad clause one
    line naming the option."""
    assert filters_from() == {}
    assert filters_from(["a"], ["*.md"], ["x=1", "x=2", "y=3"], "2026-01-01") == {
        "source": ["a"],
        "path_glob": ["*.md"],
        "meta": {"x": {"=": ["1", "2"]}, "y": {"=": ["3"]}},
        "ingested_after": "2026-01-01",
    }
    assert filters_from(where=["year>=2021", "author~mara", "tag in a,b"]) == {
        "meta": {"year": {">=": "2021"}, "author": {"~": ["mara"]}, "tag": {"=": ["a", "b"]}}
    }
    assert filters_from(ingested_before="2026-02-01") == {"ingested_before": "2026-02-01"}
    with pytest.raises(QueryError, match=r"^Invalid value for where: 'author' is not key=value"):
        filters_from(where=["author"])
    with pytest.raises(QueryError, match=r"^Invalid value for '--where': "):
        filters_from(where=["=x"], where_name="'--where'")
