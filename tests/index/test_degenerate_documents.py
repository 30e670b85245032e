"""Documents with no searchable word never break a search: the class of issue 40's first finding.

A file of stop words only (``the``), punctuation only, one byte, ... holds chunks whose analysed text is empty. Ingested
after other files it became a lexical segment with no term at all, and every search of every mode ended in an
IndexError (collapse's rare-term lookup read ``indptr[1]`` of a segment whose indptr is ``[0]``) while ``verify``
said consistent. Each degenerate document here is ingested in a first run with the seeds, in a second run after
them (its own segment), and alone; then every search mode, with and without filters and collapse, the server's
``/search`` and ``/``, and ``verify`` must answer.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from conftest import HashEmbedder
from fastapi.testclient import TestClient

from citeline import Index, QueryError
from citeline.server import create_app
from citeline.store import verify

#: name -> file contents: what the analyser keeps nothing of, or next to nothing.
DEGENERATE: dict[str, str | bytes] = {
    "stop-word.txt": "the",
    "stop-words.txt": "The a an of and to in it is was THE the",
    "punctuation.txt": "!!! ???",
    "one-byte.txt": b"x",
    "one-digit.txt": "7",
    "whitespace.txt": " \n\t\n   \n",
    "repeated-token.txt": "levee " * 2000,
    "huge-token.txt": "q" * 200_000,
    "symbols.txt": "→ ★ ☃ ∑ ∞ ≠ © ™ ¶ § • … — – ‹ ›",
    "emoji.txt": "🙂🙃🎉🔥💧 🌊🌊🌊",
    "combining.txt": "\u0301\u0301\u0308 \u200b\u200d\ufeff",
    "heading-only.md": "# the\n\n## !!!\n",
    "empty-paragraph.html": "<html><body><p>the</p><p>  </p></body></html>",
    "stop-record.jsonl": '{"_id": "r1", "text": "the"}\n{"_id": "r2", "text": "?"}\n',
}
SCENARIOS = ("first-run", "second-run", "alone")
QUERIES = ("levee", "the", "salmor levee gave way river garrison")
FILTERS = (None, {"path_glob": ["*odd*"]}, {"path_glob": ["*levee*"]})


def _build(tmp_path: Path, seeds_dir: Path, name: str, scenario: str) -> Index:
    docs = tmp_path / "docs"
    docs.mkdir()
    if scenario != "alone":
        for seed in seeds_dir.iterdir():
            shutil.copy(seed, docs / seed.name)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), max_tokens=64, overlap_tokens=8)
    if scenario == "second-run":
        index.ingest([docs])
    content = DEGENERATE[name]
    target = docs / f"odd-{name}"
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content, encoding="utf-8")
    index.ingest([docs])
    return index


def _search_everything(index: Index) -> None:
    for query in QUERIES:
        for mode in ("dense", "lexical", "hybrid"):
            for collapse in (True, False):
                for filters in FILTERS:
                    try:
                        results = index.search(query, 5, mode=mode, collapse=collapse, filters=filters)
                    except QueryError:
                        continue  # a clear refusal (a query with no searchable word in lexical mode, say)
                    assert all(result.text is not None for result in results)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_a_document_without_searchable_words_breaks_no_search(
    tmp_path: Path, seeds_dir: Path, name: str, scenario: str
) -> None:
    index = _build(tmp_path, seeds_dir, name, scenario)
    _search_everything(index)
    if scenario != "alone":
        assert index.search("levee", 5, mode="lexical"), "the seeds are still found"
    assert verify.check(index.path) == {invariant: [] for invariant in verify.INVARIANTS}


@pytest.mark.parametrize("name", ["stop-word.txt", "punctuation.txt", "one-byte.txt"])
def test_the_server_answers_after_a_document_without_searchable_words(
    tmp_path: Path, seeds_dir: Path, name: str
) -> None:
    index = _build(tmp_path, seeds_dir, name, "second-run")
    with warnings.catch_warnings(), TestClient(create_app(index.path, embedder=HashEmbedder())) as client:
        warnings.simplefilter("ignore", DeprecationWarning)
        for mode in ("dense", "lexical", "hybrid"):
            for params in ({}, {"path": "*levee*"}, {"collapse": "false"}):
                response = client.get("/search", params={"q": "levee", "mode": mode, **params})
                assert response.status_code == 200, response.text
                assert response.json()["results"]
        assert client.get("/", params={"q": "levee"}).status_code == 200


def test_verify_reports_a_lexical_index_that_cannot_answer(
    tmp_path: Path, seeds_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The failure mode the first finding had: every file consistent, and yet no search answered. The probe
    # (``lexical_answers``) asks the index itself.
    index = _build(tmp_path, seeds_dir, "stop-word.txt", "second-run")
    from citeline.lexical.lookup import RareTermLookup

    def broken(*_: object, **__: object) -> list[list[int]]:
        raise IndexError("index 1 is out of bounds for axis 0 with size 1")

    monkeypatch.setattr(RareTermLookup, "find", broken)
    found = verify.check(index.path, ["lexical_answers"])["lexical_answers"]
    assert found and "cannot answer a search (IndexError" in found[0], found
    assert not index.verify().ok


def test_verify_reports_a_segment_whose_postings_name_no_document(tmp_path: Path, seeds_dir: Path) -> None:
    import numpy as np

    index = _build(tmp_path, seeds_dir, "stop-word.txt", "second-run")
    segment = max((index.path).glob("seg.*"), key=lambda path: len(np.load(path / "postings.npy")))
    postings = np.load(segment / "postings.npy")
    postings[-1] = 10**6
    np.save(segment / "postings.npy", postings)
    found = verify.check(index.path)
    assert any("a posting names no document" in problem for problem in found["lexical_answers"]), found


def test_segments_without_terms_merge_and_compact(tmp_path: Path, seeds_dir: Path) -> None:
    # Past MERGE_WIDTH segments of a tier merge (lexical/merge.py): here most of them hold no term at all; then
    # removing most documents compacts everything.
    from citeline.lexical.segments import MERGE_WIDTH

    docs = tmp_path / "docs"
    shutil.copytree(seeds_dir, docs)
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder(), max_tokens=64, overlap_tokens=8)
    index.ingest([docs])
    names = sorted(DEGENERATE)
    for run in range(MERGE_WIDTH + 2):
        name = names[run % len(names)]
        content = DEGENERATE[name]
        target = docs / f"odd-{run}-{name}"
        target.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        index.ingest([docs])
        _search_everything(index)
    assert len(index.snapshot().lexical.parts) < MERGE_WIDTH + 3, "the segments merged"
    for seed in seeds_dir.iterdir():
        (docs / seed.name).unlink()
    index.ingest([docs])
    _search_everything(index)
    assert verify.check(index.path) == {invariant: [] for invariant in verify.INVARIANTS}
