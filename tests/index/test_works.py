"""Works: a rendered page and its markup source, one text in four formats, a lightly edited copy are one work, and
one result on every surface; templated records, policy versions and pages sharing only a site's frame stay apart;
recognition is incremental (tests/_works_sets.py builds the collections: a real mkdocs build, a real Sphinx build);
and the same holds on excerpts of real third-party documentation trees, sources beside their build
(tests/data/realdocs)."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import duckdb
import pytest
from _collapse_sets import seed_articles, syndicated, templated_records, write_records
from _works_sets import boilerplate_pages, four_formats, mkdocs_pairs, policy_versions, sphinx_pairs, tree_families
from conftest import HashEmbedder
from hypothesis import given, settings
from hypothesis import strategies as st

from citeline import Index, SearchRequest
from citeline.store import generation, works


def _indexed(tmp: Path, build, roots: tuple[str, ...] = ("",)) -> tuple[Index, dict[str, str], dict[str, str]]:
    """An index of what ``build`` writes under ``tmp/c``: the index, each file's family, each file's work (or
    itself), by path relative to ``tmp/c``."""
    family = build(tmp / "c")
    index = Index.create(tmp / "ix", embedder=HashEmbedder())
    index.ingest([tmp / "c" / root for root in roots])
    return index, family, _works_by_path(index, tmp / "c")


def _works_by_path(index: Index, root: Path) -> dict[str, str]:
    by_doc = generation.read_meta(index.path).get(works.META_KEY, {})
    return {str(Path(d.source_path).relative_to(root)): by_doc.get(d.doc_id, d.doc_id) for d in index.documents()}


def _misses_and_false(family: dict[str, str], work: dict[str, str]) -> tuple[list, list]:
    """Pairs of one family in different works (missed), pairs of different families in one work (false)."""
    missed, false = [], []
    for a, b in itertools.combinations(sorted(family), 2):
        same_family, same_work = family[a] == family[b], work.get(a, a) == work.get(b, b)
        if same_family and not same_work:
            missed.append((a, b))
        if same_work and not same_family:
            false.append((a, b))
    return missed, false


def test_mkdocs_pages_and_their_markdown_sources_are_one_work_each(tmp_path: Path) -> None:
    index, family, work = _indexed(tmp_path, mkdocs_pairs, ("docs", "site"))
    assert set(family) <= set(work), set(family) - set(work)
    missed, false = _misses_and_false(family, work)
    assert (missed, false) == ([], [])
    assert index.verify().ok


def test_sphinx_pages_and_their_rst_txt_sources_are_one_work_each(tmp_path: Path) -> None:
    _, family, work = _indexed(tmp_path, sphinx_pairs, ("build",))
    missed, false = _misses_and_false(family, work)
    # The index page's text is its toctree expanded (titles and sections of the other pages) where its source
    # holds only the page names: not the same words, a known miss (docs/quality.md#works).
    assert missed == [("build/_sources/index.rst.txt", "build/index.html")]
    assert false == []


REALDOCS = Path(__file__).resolve().parents[1] / "data" / "realdocs"
_SPHINX_ROOTS = ("", "_build/html", "_build/html/_sources")
#: Each vendored tree (tests/data/realdocs/README.md): the folders its page names are taken relative to, the copies
#: its names do not tell (path -> page), and the pairs of one page the rule leaves apart.
REAL_TREES: dict[str, tuple[tuple[str, ...], dict[str, str], list[tuple[str, str]]]] = {
    # parameters.html holds the API reference autodoc generates from click's docstrings, which its source names in
    # six directives: the source lies 97 % inside the page, but the page's words are mostly not the source's
    # (Jaccard 0.43, docs/quality.md#works).
    "click-8.1.7": (
        _SPHINX_ROOTS,
        {},
        [
            ("_build/html/_sources/parameters.rst.txt", "_build/html/parameters.html"),
            ("_build/html/parameters.html", "parameters.rst"),
        ],
    ),
    # MyST Markdown: its roles, directives and toctree are markup the rendered index does not hold.
    "attrs-23.2.0": (_SPHINX_ROOTS, {}, []),
    # README.md is the index page's text with its badges in Markdown; applications.md's page holds the API reference
    # mkautodoc generates (Jaccard 0.44), as Click's parameters page.
    "starlette-0.37.2": (
        ("docs", "site"),
        {"README.md": "index"},
        [("docs/applications.md", "site/applications/index.html")],
    ),
}


@pytest.mark.parametrize("tree", sorted(REAL_TREES))
def test_real_documentation_trees_pages_and_their_sources_are_one_work_each(tmp_path: Path, tree: str) -> None:
    """A real project's docs as a user's folder holds them after a build (the sources, the rendered pages, Sphinx's
    _sources/ copies, generated pages such as search.html and a 404 page): a page and its sources are one work,
    different pages are not, but for the named misses."""
    roots, same, known = REAL_TREES[tree]

    def build(root: Path) -> dict[str, str]:
        shutil.copytree(REALDOCS / tree, root)
        return tree_families(root, roots, same)

    index, family, work = _indexed(tmp_path, build)
    assert set(family) - set(work) <= {"LICENSE", "LICENSE.rst", "LICENSE.md"}, set(family) - set(work)
    missed, false = _misses_and_false(family, work)
    assert false == []
    assert missed == known
    assert len(set(work.values())) < len(work)  # pairs merged, not only nothing merged wrongly
    assert index.verify().ok


def test_one_text_in_four_formats_is_one_work(tmp_path: Path) -> None:
    _, family, work = _indexed(tmp_path, four_formats)
    assert _misses_and_false(family, work) == ([], [])
    assert len(set(work.values())) == 4


def _precision_sets(root: Path) -> dict[str, str]:
    family = {f"policy/{k}": v for k, v in policy_versions(root / "policy").items()}
    family.update({f"notices/{k}": v for k, v in boilerplate_pages(root / "notices").items()})
    write_records(root / "records", templated_records(60))
    return family


def test_policy_versions_notices_in_one_frame_and_templated_records_stay_apart(tmp_path: Path) -> None:
    index, family, work = _indexed(tmp_path, _precision_sets)
    assert _misses_and_false(family, work) == ([], [])
    assert generation.read_meta(index.path).get(works.META_KEY) == {}


def test_a_merged_work_is_one_result_listing_each_copy_page_shown_first(tmp_path: Path) -> None:
    index, _, _ = _indexed(tmp_path, four_formats)
    query = "why did soldiers defect from the river garrison"
    for group in (False, True):
        results = index.search(SearchRequest.of(query, 4, group=group))
        top = results[0]
        assert top.source_path.endswith(".html"), top.source_path  # the rendered page over its sources
        copies = {Path(s.source_path).suffix for s in top.sources if "defections" in s.source_path}
        assert copies == {".html", ".md", ".docx", ".pdf"}, (group, [s.source_path for s in top.sources])
        for source in top.sources:  # each copy's own passage, at its own offsets
            text = index.document_text(source.doc_id)
            assert text is not None and text[source.char_start : source.char_end] == source.text
        paths = [Path(r.source_path).stem for r in results]
        if group:
            assert len(paths) == len(set(paths))  # one result per work: no article twice
        for result in results:  # a passage listed under a result is in the document the result names
            text = index.document_text(result.doc_id)
            assert text is not None
            for passage in result.more_passages:
                assert text[passage.char_start : passage.char_end] == passage.text


def test_editing_one_document_hashes_only_it_and_removing_a_copy_splits_the_work(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    four_formats(docs)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    meta = generation.read_meta(index.path)
    assert meta[works.CHECKED_KEY]["hashed"] == 16
    page = docs / "md" / "defections-at-the-river-garrison.md"
    page.write_text(syndicated(page.read_text(encoding="utf-8")), encoding="utf-8")  # a light edit
    index.ingest([docs])
    meta = generation.read_meta(index.path)
    assert meta[works.CHECKED_KEY]["hashed"] == 1
    assert meta[works.CHECKED_KEY]["compared"] <= 3  # its copies, no other document
    work = _works_by_path(index, docs)
    assert len({work[f"{form}/defections-at-the-river-garrison.{form}"] for form in ("md", "html", "docx", "pdf")}) == 1
    for form in ("html", "docx", "pdf"):
        (docs / form / f"defections-at-the-river-garrison.{form}").unlink()
    index.ingest([docs])
    work = _works_by_path(index, docs)
    assert work["md/defections-at-the-river-garrison.md"] not in generation.read_meta(index.path)[works.META_KEY]
    assert generation.read_meta(index.path)[works.CHECKED_KEY]["hashed"] == 0
    assert index.verify().ok


def test_an_index_written_before_works_gets_them_with_its_next_commit(legacy: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    four_formats(docs)
    shutil.rmtree(docs / "pdf")
    index = Index.open(legacy, embedder=HashEmbedder())
    assert works.META_KEY not in generation.read_meta(legacy)
    index.ingest([docs])
    meta = generation.read_meta(legacy)
    # four works; the seed articles 0.1.0 indexed (hashed once by this commit) join the copies of their text
    assert len(set(meta[works.META_KEY].values())) == 4 and len(meta[works.META_KEY]) > 12
    assert meta[works.CHECKED_KEY]["hashed"] > 12
    assert index.verify().ok


def test_rebuild_recognises_works_of_an_index_that_had_none(legacy: Path) -> None:
    index = Index.open(legacy, embedder=HashEmbedder())
    index.rebuild()
    assert works.META_KEY in generation.read_meta(legacy)
    assert index.verify().ok


SOLDIER = (
    "We were not afraid of the enemy across the river. We were afraid of what was happening to our families "
    "while we sat in the mud"
)


def test_the_seed_reports_sharing_a_quote_are_not_one_work_and_their_quote_is_still_one_result(
    tmp_path: Path, seeds_dir: Path
) -> None:
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([seeds_dir])
    assert generation.read_meta(index.path)[works.META_KEY] == {}  # two reports quoting one soldier: two works
    top = index.search(SearchRequest.of(SOLDIER, 3, group=True))[0]
    assert {Path(s.source_path).name for s in top.sources} == {
        "defections-at-the-river-garrison.md",
        "a-mothers-letters-and-a-broken-front.md",
    }
    assert top.work_id is None and all(source.work_id is None for source in top.sources)


def test_the_cli_and_json_name_a_works_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from citeline.cli.main import cli

    index, _, _ = _indexed(tmp_path, four_formats)
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())
    query = "why did soldiers defect from the river garrison"
    shown = CliRunner().invoke(cli, ["search", query, "--index", str(index.path), "-k", "2"])
    assert shown.exit_code == 0, shown.output
    assert "one work in 4 copies, each with its passage" in shown.output
    assert shown.output.count("(copy)") >= 4
    rows = CliRunner().invoke(cli, ["search", query, "--index", str(index.path), "-k", "2", "--json"])
    top = json.loads(rows.output.splitlines()[0])
    assert top["work_id"] and sum(s["work_id"] == top["work_id"] for s in top["sources"]) == 4


# ---------------------------------------------------------------- incremental = from scratch (a property)

_BASES = list(seed_articles().values())


def _variant(base: int, kind: int) -> str:
    """A document: one of the seed articles as it is (0), lightly edited (1), its first half (2), or another
    article's first half joined to it (3)."""
    text = _BASES[base]
    if kind == 1:
        return syndicated(text, seed=base)
    if kind == 2:
        return text[: len(text) // 2]
    if kind == 3:
        other = _BASES[(base + 1) % len(_BASES)]
        return other[: len(other) // 2] + "\n\n" + text
    return text


def _catalog(texts: dict[str, str]) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect()
    connection.execute("CREATE TABLE documents (doc_id VARCHAR PRIMARY KEY, text VARCHAR)")
    for row in texts.items():
        connection.execute("INSERT INTO documents VALUES (?, ?)", list(row))
    return connection


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.none() | st.tuples(st.integers(0, 3), st.integers(0, 3))),
        min_size=1,
        max_size=8,
    )
)
def test_works_updated_commit_by_commit_are_the_works_of_the_final_documents(steps) -> None:
    """Each step puts a document (a variant of a seed article) or removes it (None), as a commit does; the works
    then are exactly those recognised from scratch over the documents left."""
    texts: dict[str, str] = {}
    incremental = _catalog({})
    for doc_id, change in steps:
        removed = [doc_id] if doc_id in texts else []
        incremental.execute("DELETE FROM documents WHERE doc_id = ?", [doc_id])
        texts.pop(doc_id, None)
        added = []
        if change is not None:
            texts[doc_id] = _variant(*change)
            incremental.execute("INSERT INTO documents VALUES (?, ?)", [doc_id, texts[doc_id]])
            added = [doc_id]
        update = works.refresh(incremental, removed, added)
        if works.exists(incremental) and update.hashed != len(added):  # the first commit hashes every document
            assert update.hashed == len(texts)
    scratch = _catalog(texts)
    works.refresh(scratch, [], [])
    assert works.work_map(incremental) == works.work_map(scratch)
    assert works.problems(incremental, {works.META_KEY: works.work_map(incremental)}) == []


def test_works_hashed_and_compared_in_small_batches_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = {f"{base}{kind}": _variant(base, kind) for base in range(len(_BASES)) for kind in range(4)}
    whole = _catalog(texts)
    works.refresh(whole, [], [])
    monkeypatch.setattr(works, "BATCH", 3)
    batched = _catalog(texts)
    update = works.refresh(batched, [], [])
    assert update.hashed == len(texts)
    assert works.work_map(batched) == works.work_map(whole) != {}
