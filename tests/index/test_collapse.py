"""Near-duplicate collapse: one result per passage, every source listed with exact offsets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from _quote_set import hit
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index, QueryError, SearchResult
from citeline.cli.main import cli
from citeline.query.collapse import collapse

QUOTE = (
    "We were not afraid of the enemy across the river. We were afraid of what was happening to our families "
    "while we sat in the mud."
)
FOOTER = "This article may not be reproduced or distributed without the written permission of the publisher group."


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _check_sources(index: Index, result: SearchResult) -> None:
    """Every source's passage is its document's text at its offsets, and the shared part lies inside it."""
    assert result.sources[0].chunk_id == result.chunk_id
    assert [s.score for s in result.sources] == sorted((s.score for s in result.sources), reverse=True)
    for source in result.sources:
        text = index.document_text(source.doc_id)
        assert text[source.char_start : source.char_end] == source.text
        assert source.shared_start is not None and source.shared_end is not None
        assert source.char_start <= source.shared_start < source.shared_end <= source.char_end


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, Path]:
    """Two roots: a syndicated article (in both, reformatted), two reports quoting one soldier, a shared footer."""
    docs = tmp_path_factory.mktemp("collapse")
    article = "Grain prices rose for the third month as the harbour stayed closed to barges from the north."
    _write(docs / "wire" / "grain.md", f"# Grain\n\n{article}")
    _write(docs / "paper" / "grain-copy.txt", f"GRAIN\n\n{article.upper().replace(' ', '  ')}")
    _write(docs / "wire" / "garrison.md", f"# Garrison\n\nThe morning roll call came up short again. {QUOTE}")
    _write(docs / "paper" / "letters.txt", f"Letters\n\nPost stopped reaching the valley in June. {QUOTE}")
    _write(docs / "wire" / "apples.md", f"# Apples\n\nApples grow in the northern orchards every autumn. {FOOTER}")
    _write(docs / "paper" / "pears.txt", f"Pears\n\nPears from the northern orchards sold well at market. {FOOTER}")
    index = Index.create(docs / "ix", embedder=HashEmbedder())
    index.ingest([docs / "wire", docs / "paper"])
    return index, docs


def test_near_identical_passages_of_different_documents_are_one_result(corpus) -> None:
    index, _ = corpus
    query = "grain prices harbour barges"
    results = index.search(query, k=3)
    top = results[0]
    assert {s.source_id for s in top.sources} == {"grain.md", "grain-copy.txt"}
    assert all(r.chunk_id not in {s.chunk_id for s in top.sources} for r in results[1:])
    _check_sources(index, top)
    # Near-duplicate chunks share all of themselves.
    assert all((s.shared_start, s.shared_end) == (s.char_start, s.char_end) for s in top.sources)
    separate = index.search(query, k=3, collapse=False)
    assert [r.source_id for r in separate[:2]] in (["grain.md", "grain-copy.txt"], ["grain-copy.txt", "grain.md"])
    assert all(len(r.sources) == 1 for r in separate)


def test_documents_quoting_the_same_words_are_one_result_with_the_quote_located_in_each(corpus) -> None:
    index, _ = corpus
    results = index.search(QUOTE, k=3)
    top = results[0]
    assert {s.source_id for s in top.sources} == {"garrison.md", "letters.txt"}
    _check_sources(index, top)
    for source in top.sources:
        shared = index.document_text(source.doc_id)[source.shared_start : source.shared_end]
        assert shared == QUOTE.rstrip(".")  # from the first word to the last, in each document
    assert len(index.search(QUOTE, k=3, collapse=False)[0].sources) == 1


def test_a_shared_footer_does_not_merge_otherwise_different_hits(corpus) -> None:
    index, _ = corpus
    results = index.search("apples pears northern orchards", k=4)
    by_source = {r.source_id: r for r in results}
    assert {"apples.md", "pears.txt"} <= by_source.keys()
    assert len(by_source["apples.md"].sources) == len(by_source["pears.txt"].sources) == 1


def test_the_threshold_is_configurable(corpus) -> None:
    """The threshold gates the vectors; the words must still be the same text: a low threshold never merges two
    different texts (apples and pears share a footer and a topic, not a passage)."""
    index, _ = corpus
    loose = index.search("northern orchards", k=10, collapse_threshold=0.3)
    strict = index.search("northern orchards", k=10, collapse_threshold=1.0)
    assert len(loose) <= len(strict)
    assert sum(len(r.sources) for r in loose) == sum(len(r.sources) for r in strict) == index.status().chunks
    by_source = {r.source_id: r for r in loose}
    assert len(by_source["apples.md"].sources) == len(by_source["pears.txt"].sources) == 1
    grain = index.search("grain prices harbour barges", k=3, collapse_threshold=0.3)[0]
    assert {s.source_id for s in grain.sources} == {"grain.md", "grain-copy.txt"}
    with pytest.raises(QueryError, match="collapse_threshold must be above 0 and at most 1"):
        index.search("x", collapse_threshold=0)
    with pytest.raises(QueryError, match="must be a number"):
        index.search("x", collapse_threshold="high")  # type: ignore[arg-type]


def test_filters_apply_before_collapse(corpus) -> None:
    index, docs = corpus
    results = index.search("grain prices harbour barges", k=2, filters={"source": str(docs / "paper")})
    assert results[0].source_id == "grain-copy.txt"
    assert [s.source_id for s in results[0].sources] == ["grain-copy.txt"]  # the filtered-out copy stays out
    assert all(r.source_path.startswith(str(docs / "paper")) for r in results)
    both = index.search("grain prices harbour barges", k=2, filters={"path_glob": "grain*"})
    assert len(both) == 1 and len(both[0].sources) == 2


def test_k_distinct_results_come_back_after_collapsing_many_copies(tmp_path) -> None:
    copies = tmp_path / "copies"
    for i in range(40):
        _write(copies / f"copy{i:02}.txt", "Soldiers crossed the river at night and walked home to their families.")
    for i in range(6):
        _write(copies / f"other{i}.txt", f"Soldiers and river crossings, report {i}: ration cards and letters {i}.")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([copies])
    results = index.search("soldiers crossed the river at night", k=5)
    assert len(results) == 5
    assert len(results[0].sources) == 40  # every copy, found by ranking deeper than k
    assert len({s.doc_id for r in results for s in r.sources}) == sum(len(r.sources) for r in results)
    assert len(index.search("soldiers crossed the river at night", k=5, collapse=False)) == 5


def test_passages_of_one_document_never_collapse_and_each_joins_the_best_group() -> None:
    same = np.ones((4, 2), np.float32) / np.sqrt(2)
    found = [("a", 1, 0.9), ("a", 2, 0.8), ("b", 3, 0.7), ("b", 4, 0.6)]
    hits = [hit(doc_id, "some words", chunk_id, score) for doc_id, chunk_id, score in found]
    groups = collapse(hits, same, query_vector=same[0], encode=lambda texts: np.zeros((len(texts), 2)))
    # Chunk 3 joins the best group (1); chunk 4 cannot (b is there already), so it joins 2's.
    assert [[s.chunk_id for s in g.sources] for g in groups] == [[1, 3], [2, 4]]


@pytest.fixture
def cli_index(corpus, monkeypatch) -> str:
    index, _ = corpus
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: HashEmbedder())
    return str(index.path)


def test_cli_shows_every_source_of_a_collapsed_result(cli_index) -> None:
    text = CliRunner().invoke(cli, ["search", QUOTE, "--index", cli_index, "-k", "1"])
    assert text.exit_code == 0, text.output
    assert "the same passage is in 2 sources" in text.output
    assert "garrison.md" in text.output and "letters.txt" in text.output
    rows = [
        json.loads(line)
        for line in CliRunner()
        .invoke(cli, ["search", QUOTE, "--index", cli_index, "-k", "1", "--json"])
        .output.splitlines()
    ]
    assert [Path(s["source_path"]).name for s in rows[0]["sources"]] in (
        ["garrison.md", "letters.txt"],
        ["letters.txt", "garrison.md"],
    )
    apart = CliRunner().invoke(cli, ["search", QUOTE, "--index", cli_index, "-k", "2", "--no-collapse", "--json"])
    assert [len(json.loads(line)["sources"]) for line in apart.output.splitlines()] == [1, 1]
    loose = CliRunner().invoke(cli, ["search", "grain barges", "--index", cli_index, "--collapse-threshold", "0.3"])
    assert loose.exit_code == 0 and re.search(r"the same passage is in \d+ sources", loose.output)


# ---------------------------------------------------------------- the real model on the seed articles

GARRISON = "defections-at-the-river-garrison.md"
LETTERS = "a-mothers-letters-and-a-broken-front.md"
SOLDIER = (
    "We were not afraid of the enemy across the river. We were afraid of what was happening to our families "
    "while we sat in the mud"
)


@pytest.mark.slow
def test_the_seed_articles_quote_of_the_soldier_is_one_passage_with_both_sources(tmp_path, seeds_dir) -> None:
    index = Index.create(tmp_path / "ix")
    index.ingest([seeds_dir])
    collapsed = CliRunner().invoke(cli, ["search", SOLDIER, "--index", str(index.path), "-k", "3", "--json"])
    assert collapsed.exit_code == 0, collapsed.output
    rows = [json.loads(line) for line in collapsed.output.splitlines()]
    top = rows[0]
    assert {s["source_id"] for s in top["sources"]} == {GARRISON, LETTERS}
    # JSON carries the passage text once (the result's); each source's offsets say where its own copy is.
    first = top["sources"][0]
    first_text = (seeds_dir / first["source_id"]).read_text(encoding="utf-8")
    assert first_text[first["char_start"] : first["char_end"]] == top["text"]
    for source in top["sources"]:
        text = (seeds_dir / source["source_id"]).read_text(encoding="utf-8")
        assert "text" not in source and source["char_start"] < source["char_end"] <= len(text)
        assert text[source["shared_start"] : source["shared_end"]] == SOLDIER  # the quote, word to word
    # Lower results may merge other statements the two reports share; a result never lists one document twice.
    assert all(len({s["doc_id"] for s in row["sources"]}) == len(row["sources"]) for row in rows)
    apart = CliRunner().invoke(
        cli, ["search", SOLDIER, "--index", str(index.path), "-k", "3", "--json", "--no-collapse"]
    )
    separate = [json.loads(line) for line in apart.output.splitlines()]
    assert {row["source_id"] for row in separate[:2]} == {GARRISON, LETTERS}
    assert all(SOLDIER in row["text"] for row in separate[:2])
    text = CliRunner().invoke(cli, ["search", SOLDIER, "--index", str(index.path), "-k", "3"])
    assert "the same passage is in 2 sources" in text.output


WIRE = "the-night-the-salmor-levee-gave-way.md"
REWRITE = "salmor-counts-the-cost-of-a-levee-it-was-told-would-fail.md"
VOSS = (
    "We told the council in writing, three winters running, that this embankment would not survive a spring like "
    "this one. Nobody wanted to pay for it until the water was in the streets"
)


@pytest.mark.slow
def test_a_rewritten_quote_in_the_seed_reports_is_one_result_with_each_outlets_own_span(tmp_path, seeds_dir) -> None:
    """The rewrite re-punctuates the quote, contracts "would not", splits it with another attribution."""
    from citeline.query.highlight import highlight

    index = Index.create(tmp_path / "ix")
    index.ingest([seeds_dir])
    results = index.search(VOSS, k=3)
    top = results[0]
    assert {s.source_id for s in top.sources} == {WIRE, REWRITE}
    _check_sources(index, top)
    copies = {}
    for source in top.sources:
        shared = index.document_text(source.doc_id)[source.shared_start : source.shared_end]
        assert shared.startswith("We told the council in writing") and "survive a spring like this one" in shared
        copies[source.source_id] = shared
    assert "would not survive" in copies[WIRE] and "wouldn't survive" in copies[REWRITE]
    # Other results may be the two reports' other shared quote (Tomas Ebner's), never a mix with other documents.
    assert all(len(r.sources) == 1 or {s.source_id for s in r.sources} == {WIRE, REWRITE} for r in results[1:])
    apart = index.search(VOSS, k=3, collapse=False)
    assert {r.source_id for r in apart[:2]} == {WIRE, REWRITE}
    # Highlights point at the quote in each outlet's chunk.
    for result in highlight(apart[:2], VOSS):
        best = max(result.highlights, key=lambda h: h.score)
        assert "We told the council in writing" in best.text
        assert index.document_text(result.doc_id)[best.char_start : best.char_end] == best.text


# ---------------------------------------------------------------- copies ranked below the candidate list

MARTEN_WIRE = (
    "# Varno bridge shut\n\nThe Varno bridge was shut on Tuesday, cutting off the valley farms. Sergeant Ilse Marten, "
    'who commands the checkpoint on the eastern bank, said: "The bridge at Varno is the only road out for the farms, '
    'and every week it stays shut another family packs up and leaves the valley for good."'
)
ROUND_UP = (
    "The autumn market in {town} drew fewer traders than last year, and the school board met twice to argue over the "
    "cost of heating the old gymnasium. Rain held off until the last week of October, which let the orchards on the "
    "southern slopes finish picking early. Prices for seed potatoes fell by a third, the cooperative reported, while "
    "the price of diesel climbed again. "
)
MARTEN_REWRITE = (
    "Courier weekly round-up\n\n"
    + ROUND_UP.format(town="Dessel")
    + "'The bridge at Varno is the only road out for the farms,' Marten told reporters. 'Every week it stays shut, "
    "another family packs up and leaves the valley for good.' The council will meet on Thursday. "
    + ROUND_UP.format(town="Orra")
)
VARNO_QUERY = "Varno bridge shut farms family valley"
#: The words of the local notes, besides the query's.
NOTE_WORDS = (
    "market school board heating orchard slope picking seed potato price diesel council meeting harvest barley "
    "rain october ferry truck driver miller teacher grower cooperative road kilometre winter spring repair "
    "engineer pier crack checkpoint bank river mill bakery clinic church bus timetable fuel cattle sheep wool "
    "cheese milk tractor loan mayor budget tax fence well pump storm snow frost petition letter radio"
)


@pytest.fixture(scope="module")
def buried_copy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, Path]:
    """A report quoting Sergeant Marten, a weekly round-up that rewrites the quote inside unrelated news, and 150
    local notes that use the query's words more than the round-up does but share no statement with either."""
    import random

    docs = tmp_path_factory.mktemp("buried")
    _write(docs / "wire" / "varno.md", MARTEN_WIRE)
    _write(docs / "paper" / "courier.txt", MARTEN_REWRITE)
    rng = random.Random(7)
    vocabulary = NOTE_WORDS.split()
    keys = VARNO_QUERY.split()
    for i in range(150):
        words = rng.sample(vocabulary, 30) + rng.sample(keys, 3) + rng.sample(keys, 1)
        rng.shuffle(words)
        note = " ".join(" ".join(words[j : j + 7]).capitalize() + "." for j in range(0, len(words), 7))
        _write(docs / "local" / f"note{i:03}.txt", f"Note {i}\n\n{note}")
    index = Index.create(docs / "ix", embedder=HashEmbedder())
    index.ingest([docs / "wire", docs / "paper", docs / "local"])
    return index, docs


@pytest.mark.parametrize(("mode", "k"), [("hybrid", 10), ("lexical", 10), ("dense", 15)])
def test_a_copy_of_the_quote_ranked_below_the_candidates_is_still_a_source(buried_copy, mode: str, k: int) -> None:
    index, _ = buried_copy
    plain = [r.source_id for r in index.search(VARNO_QUERY, k=300, mode=mode, collapse=False)]
    depth = 4 * k  # below the hits even of a collapsed search that deepens once
    assert plain.index("varno.md") < k and plain.index("courier.txt") >= depth, plain.index("courier.txt")
    results = index.search(VARNO_QUERY, k=k, mode=mode)
    (marten,) = [r for r in results if r.source_id == "varno.md"]
    assert [s.source_id for s in marten.sources] == ["varno.md", "courier.txt"]
    _check_sources(index, marten)
    wire, paper = marten.sources
    shared = [index.document_text(s.doc_id)[s.shared_start : s.shared_end] for s in (wire, paper)]
    # Each outlet's own copy, from the quote's first words to its last (the rewrite's attribution inside).
    for copy in shared:
        assert "bridge at Varno is the only road out for the farms" in copy[:60], copy
        assert copy.endswith("leaves the valley for good")
    assert "Marten told reporters" in shared[1]
    assert paper.score <= min(r.score for r in results)  # ranked below every candidate: at most the last one's
    # No note joins: they share the query's words, not the quote; each is its own result.
    assert all(len(r.sources) == 1 for r in results if r is not marten)
    assert len(results) == k


def test_a_copy_outside_the_filters_is_not_added(buried_copy) -> None:
    index, docs = buried_copy
    results = index.search(VARNO_QUERY, k=10, filters={"source": str(docs / "wire")})
    assert [[s.source_id for s in r.sources] for r in results] == [["varno.md"]]
    both = index.search(VARNO_QUERY, k=10, filters={"path_glob": "*.[mt][dx]*"})
    assert ["varno.md", "courier.txt"] in [[s.source_id for s in r.sources] for r in both]


def test_the_rare_term_lookup_finds_chunks_repeating_a_sentence() -> None:
    from citeline.lexical.segments import SegmentedIndex

    notes = [f"Note {i}: the Varno bridge and the valley farms, report number {i}." for i in range(20)]
    lexical = SegmentedIndex.build(np.arange(22) * 10, [MARTEN_WIRE, MARTEN_REWRITE, *notes])
    sentence = "every week it stays shut another family packs up and leaves the valley for good"
    assert lexical.sharing_rare_terms([sentence], 4) == [[0, 10]]
    assert lexical.sharing_rare_terms([sentence], 4, allowed=np.array([10, 20])) == [[10]]
    # Terms only one chunk holds (the wire's attribution) lead nowhere: too few terms left, nothing found.
    assert lexical.sharing_rare_terms(["Sergeant Ilse commands the eastern checkpoint", sentence], 1) == [[], [0]]
