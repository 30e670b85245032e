"""Relevance per hit (issue 42.1): each hit kept or dropped on its own merit, the same rule with and without
filters, rare query terms held verbatim never dropped in lexical mode, and one 0-1 relevance shown to people on
every surface (never the ranking score, which can be negative)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import SEEDS, HashEmbedder
from fastapi.testclient import TestClient

from citeline import Index
from citeline.cli.main import cli
from citeline.query import relevance
from citeline.server import create_app

#: Filler prose: the common words every test document shares, so that the rare ones are rare.
FILLER = [
    "The committee met on a grey morning to read the reports about roads, bridges and the budget for the year.",
    "Members asked about the schedule, the contractors and the weather, and the chair promised an answer soon.",
    "A long discussion of the budget followed, with questions about schools, parks and the library opening hours.",
    "The minutes record that the meeting ended late and that the next one will be held in the town hall.",
]


def write_corpus(folder: Path, documents: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in documents.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def filler(number: int) -> str:
    return " ".join(FILLER[(number + at) % len(FILLER)] for at in range(3))


@pytest.fixture
def rare_words_index(tmp_path: Path, fake_embedder: HashEmbedder) -> Index:
    """Five records each holding one rare word, among twenty-five of common prose."""
    records = [
        "The museum's inventory lists a stuffed quokka in the storeroom.",
        "A postcard of a zeppelin over the harbour was sold at auction.",
        "The bakery's window showed marzipan fruit all through December.",
        "An obsidian blade was found near the old quarry road.",
        "The band closed the festival with a tarantella at midnight.",
    ]
    documents = {f"minutes-{n:02d}.txt": filler(n) for n in range(20)}
    documents |= {f"record-{n}.txt": text for n, text in enumerate(records)}
    index = Index.create(tmp_path / "ix", embedder=fake_embedder)
    index.ingest([write_corpus(tmp_path / "docs", documents)])
    return index


def test_five_rare_words_each_in_one_record_are_all_found_lexically(rare_words_index: Index) -> None:
    """Each hit covers a fifth of the query's terms (relevance below the lexical floor), yet each holds a word the
    user typed, verbatim, that only it holds: a lexical search shows all five (before: nothing)."""
    hits = rare_words_index.search("quokka zeppelin marzipan obsidian tarantella", k=10, mode="lexical")
    assert sorted(hit.source_id for hit in hits) == [f"record-{n}.txt" for n in range(5)]
    ids = np.array([hit.chunk_id for hit in hits])
    covered = relevance.coverage(
        rare_words_index.snapshot().lexical, "quokka zeppelin marzipan obsidian tarantella", ids
    )
    assert covered is not None and (covered < 0.25).all()  # each hit alone looks like a poor match
    assert (relevance.LEXICAL_TOPIC.probability(None, covered) < relevance.LEXICAL_TOPIC.floor).all()
    # one rare word in a question of common ones: the record holding it is still shown
    one = rare_words_index.search("the budget meeting of the committee and the zeppelin", k=30, mode="lexical")
    assert "record-1.txt" in {hit.source_id for hit in one}
    # min_score keeps its meaning: a number drops what lies below it, rare words or not
    assert rare_words_index.search("quokka zeppelin", k=10, mode="lexical", min_score=0.9) == []


def test_a_word_held_only_in_another_form_is_not_verbatim(rare_words_index: Index) -> None:
    """``quokkas`` analyses to the term ``quokka`` holds, but the record does not hold the word typed: the rule for
    rare words needs the word itself, so gibberish around a stem match is still answered with nothing."""
    assert rare_words_index.search("quokkas xyzzy plugh frobnicate", k=10, mode="lexical") == []


NUMBER = re.compile(r"(?<![\w.])-\d*\.?\d+")


class SignedEmbedder(HashEmbedder):
    """The hashed bag of words, centred: unrelated texts get negative cosines, as real models' can."""

    model_name = "hash-bow-64-signed"
    fingerprint = "hash-bow-64-signed-v1"

    def encode(self, texts: Sequence[str], *, batch_size: int | None = 64) -> np.ndarray:
        vectors = super().encode(texts, batch_size=batch_size)
        vectors -= vectors.mean(axis=1, keepdims=True)  # off the all-ones direction every bag of words leans on
        return (vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)).astype(np.float32)


@pytest.fixture
def negative_index(tmp_path: Path) -> Index:
    """Prose without a negative number in it, searched in dense mode with an embedder whose cosines go below 0."""
    words = [
        "apple",
        "brick",
        "cloud",
        "drum",
        "eagle",
        "fern",
        "grape",
        "harp",
        "iris",
        "jade",
        "kite",
        "lemon",
        "maple",
        "nest",
        "olive",
        "pearl",
        "quill",
    ]
    documents = {f"note-{n:02d}.txt": " ".join(words[(n + at) % len(words)] for at in range(6)) for n in range(12)}
    index = Index.create(tmp_path / "ix", embedder=SignedEmbedder())
    index.ingest([write_corpus(tmp_path / "docs", documents)])
    return index


def test_no_negative_score_is_shown_on_any_surface(negative_index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI (text and table) and the page show each hit's relevance, 0-1, never the ranking score, which a
    dense or hybrid ranking puts below 0 (the page showed ``score -0.031``)."""
    monkeypatch.setattr("citeline.index.SentenceTransformerEmbedder", lambda *args, **kwargs: SignedEmbedder())
    query = "schools parks library budget"
    hits = negative_index.search(query, k=20, mode="dense", min_score=0, collapse=False)
    assert any(hit.score < 0 for hit in hits), "the case needs a negative ranking score"
    assert not any(NUMBER.search(hit.text) for hit in hits)
    runner = CliRunner()
    base = ["search", query, "--index", str(negative_index.path), "--mode", "dense", "-k", "20", "--no-collapse"]
    for extra in ([], ["--format", "table"]):
        shown = runner.invoke(cli, [*base, "--min-score", "0", *extra], env={"NO_COLOR": "1", "COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        assert not NUMBER.search(shown.output), shown.output
        assert "relevance" in shown.output
    client = TestClient(create_app(negative_index.path, embedder=SignedEmbedder()))
    page = client.get("/", params={"q": query, "mode": "dense", "k": 20, "collapse": "false", "min_score": 0})
    assert page.status_code == 200 and '<ol class="results"' in page.text
    results = page.text.split('<ol class="results"', 1)[1]
    assert "relevance" in results and "score" not in results and not NUMBER.search(results), results


@pytest.fixture(scope="module")
def seeds_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    """The seed documents with the real model (onnx-int8); of them only the garrison report is tagged
    ``desertion`` (the seeds' front matter), or ``history`` where a seed has no front matter."""
    root = tmp_path_factory.mktemp("seeds")
    docs = root / "docs"
    docs.mkdir()
    for path in SEEDS.glob("*.md"):
        text = path.read_text(encoding="utf-8")
        if path.name == "defections-at-the-river-garrison.md" and not text.startswith("---"):
            text = "---\ntags: history\n---\n" + text
        (docs / path.name).write_text(text, encoding="utf-8")
    index = Index.create(root / "ix", backend="onnx-int8")
    index.ingest([docs])
    return index


#: The tag only the garrison report holds.
TAG = "desertion" if SEEDS.joinpath("defections-at-the-river-garrison.md").read_text().startswith("---") else "history"


def shown(hits: Sequence[Any]) -> list[tuple[str, int]]:
    return [(hit.source_id, hit.ordinal) for hit in hits]


@pytest.mark.slow
def test_a_filter_never_hides_a_hit_the_unfiltered_answer_shows(seeds_index: Index) -> None:
    """The garrison report ranks 2nd (as a document) for a question about the letters; its best passage is too weak
    for the topic floor alone, so ``--where tags=desertion`` answered with nothing. Each hit is now measured against
    the unfiltered ranking's best, so the filtered answer is the unfiltered one less what the filter removes."""
    query = "mothers writing letters to sons at the front"
    unfiltered = seeds_index.search(query, k=10)
    documents = list(dict.fromkeys(hit.source_id for hit in unfiltered))
    assert documents[:2] == ["a-mothers-letters-and-a-broken-front.md", "defections-at-the-river-garrison.md"]
    filtered = seeds_index.search(query, k=10, filters={"meta": {"tags": TAG}})
    assert filtered and shown(filtered) == [at for at in shown(unfiltered) if at[0] == documents[1]]
    for mode in ("hybrid", "dense", "lexical"):  # the same rule in every mode
        every = shown(seeds_index.search(query, k=10, mode=mode))
        only = shown(seeds_index.search(query, k=10, mode=mode, filters={"meta": {"tags": TAG}}))
        assert only == [at for at in every if at[0] == documents[1]], mode


@pytest.mark.slow
def test_padding_passages_of_near_zero_relevance_are_not_shown(seeds_index: Index) -> None:
    """A question about the garrison matched six passages of the two war reports; the default filled k with the
    levee reports' passages (relevance under 0.01). They are dropped; ``min_score=0`` still lists them."""
    query = "why are soldiers deserting the garrison"
    everything = seeds_index.search(query, k=10, min_score=0)
    assert any("levee" in hit.source_id for hit in everything)
    hits = seeds_index.search(query, k=10)
    assert hits and not any("levee" in hit.source_id for hit in hits)
    assert all(hit.relevance is not None and 0 <= hit.relevance <= 1 for hit in hits)
    assert min(hit.relevance or 0 for hit in hits) >= relevance.DENSE_RULE.keep
    # nothing matches nothing, as before
    assert seeds_index.search("best pizza in Naples", k=10) == []
