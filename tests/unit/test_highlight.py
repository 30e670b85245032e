"""Highlights: sentences with exact offsets, and the one that answers the query."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from citeline import SearchResult
from citeline.query.highlight import _BOUNDARY, _LAST_WORD, Highlight, _last_word, highlight, pick, sentences

LABELS = Path(__file__).resolve().parents[2] / "bench" / "data" / "scifact_highlights.jsonl"


def _hit(text: str, char_start: int = 0, doc_id: str = "d") -> SearchResult:
    return SearchResult(
        text=text,
        score=1.0,
        doc_id=doc_id,
        source_path=doc_id,
        source_id=doc_id,
        title=doc_id,
        ordinal=0,
        char_start=char_start,
        char_end=char_start + len(text),
        content_hash="h",
        run_id="r",
        ingested_at="2026-01-31T08:00:00.000+00:00",
        model="m",
        chunk_id=1,
    )


def test_sentences_know_quotes_abbreviations_and_initials() -> None:
    text = (
        'Dr. Ana Ruiz met J. Smith in St. Ives, e.g. at the port. "We left at night," he said. '
        "Figures (Fig. 2) agree.\n\nA new paragraph? Yes!"
    )
    found = [text[s:e] for s, e in sentences(text)]
    assert found == [
        "Dr. Ana Ruiz met J. Smith in St. Ives, e.g. at the port.",
        '"We left at night," he said.',
        "Figures (Fig. 2) agree.",
        "A new paragraph?",
        "Yes!",
    ]


def test_highlights_have_exact_document_offsets_and_point_at_the_answer() -> None:
    document = "# Title\n\nPrelude text. The harbour closed in March. Barges wait at the bar. Grain prices rose."
    start = document.index("The harbour")
    hit = _hit(document[start:], char_start=start)
    [result] = highlight([hit], "why did grain prices rise")
    assert result.highlights
    for mark in result.highlights:
        assert document[mark.char_start : mark.char_end] == mark.text
    best = max(result.highlights, key=lambda h: h.score)
    assert best.text == "Grain prices rose."
    assert Highlight(1, 2, "x", 0.5).to_dict() == {
        "char_start": 1,
        "char_end": 2,
        "text": "x",
        "score": 0.5,
        "page": None,
        "last_page": None,
    }


def test_the_model_blend_uses_one_encode_call_for_all_hits() -> None:
    calls = []

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return np.tile(np.array([1.0, 0.0], np.float32), (len(texts), 1))

    hits = [_hit("One sentence here. Another one there."), _hit("Third sentence. Fourth.", doc_id="e")]
    out = highlight(hits, "sentence", query_vector=np.array([1.0, 0.0]), encode=encode, model_weight=0.5)
    assert calls == [4] and all(r.highlights for r in out)


def test_pick_keeps_a_close_runner_up_only() -> None:
    assert pick(np.array([0.1, 0.9, 0.85])) == [1, 2]
    assert pick(np.array([0.1, 0.9, 0.3])) == [1]
    assert pick(np.array([])) == []


def test_the_labelled_set_has_forty_claims() -> None:
    rows = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 40 and all(row["evidence"] for row in rows)


# ---------------------------------------------------------------- rendering (citeline.cli.render)

LONG = (
    "The ferry left the harbour at dawn with two hundred passengers on board and a crew of twelve. "
    "Captain Erik Lund turned the ferry away from the rocks with thirty seconds to spare. "
    "Passengers said the crew kept everyone calm while the ship listed to one side for almost an hour. "
    "The ministry has opened an inquiry into how the vessel came so close to the shore in clear weather."
)


def _rendered_hit() -> SearchResult:
    [result] = highlight([_hit(LONG, char_start=100)], "captain turned the ferry away from the rocks")
    return result


def test_human_output_shows_the_highlight_in_context_not_the_whole_chunk() -> None:
    from citeline.cli.render import human

    result = _rendered_hit()
    text = human([result], color=False, width=200)
    assert "Captain Erik Lund turned the ferry away from the rocks" in text
    assert "\x1b[" not in text
    assert "inquiry into how the vessel" not in text  # beyond the context
    assert "… " in text and "[chars 100-" in text
    whole = human([result], full=True, color=False, width=200)
    assert "inquiry into how the vessel came so close to the shore in clear weather." in whole


def test_human_output_emphasises_the_span_in_colour_only_when_asked(monkeypatch) -> None:
    from citeline.cli.render import human, use_color

    result = _rendered_hit()
    styled = human([result], color=True, width=200)
    assert "\x1b[1m" in styled or "\x1b[33m" in styled
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color()
    assert "\x1b[" not in human([result])
    monkeypatch.delenv("NO_COLOR")

    class Tty:
        def isatty(self) -> bool:
            return True

    assert use_color(Tty()) and not use_color(object())


def test_json_lines_carry_rank_and_highlights_and_the_passage_text_once() -> None:
    from citeline.cli.render import json_lines

    result = _rendered_hit()
    merged = SearchResult(**{**result.__dict__, "sources": (result.as_source(),)})
    [line] = list(json_lines([merged]))
    row = json.loads(line)
    assert row["rank"] == 1
    assert row["text"] == merged.text and all("text" not in source for source in row["sources"])
    [mark] = [h for h in row["highlights"] if "Captain" in h["text"]]
    assert LONG[mark["char_start"] - 100 : mark["char_end"] - 100] == mark["text"]
    assert set(mark) == {"char_start", "char_end", "text", "score", "page", "last_page"}


def test_sentences_find_the_word_before_a_full_stop_however_long_it_is() -> None:
    """The word before a full stop is searched in a window first (``_last_word``): a word cut by the window, or a
    run of dots and word characters longer than it, must give the same split as a search of the whole sentence."""
    long_abbreviation = "x" * 60 + ".e.g"
    cases = [
        f"See {long_abbreviation}. Then more.",
        "A " + "b." * 40 + " Next sentence.",
        "An initial J" + "." * 70 + " Smith wrote.",
        "The value was" + " " * 60 + "(Fig. 2). Next one here.",
        "Tiny. Also tiny! And e.g. this. Or " + "word" * 20 + ". End.",
    ]
    for text in cases:
        start = 0
        for match in _BOUNDARY.finditer(text):
            windowed = _last_word(text, start, match.start())
            whole = _LAST_WORD.search(text, start, match.start())
            assert (windowed and windowed.span()) == (whole and whole.span()), (text, start, match.start())
            start = match.end()


def test_highlights_are_the_same_with_the_per_search_analysis_cache() -> None:
    """A collapsed search highlights with each chunk's sentences analysed once (``analysis_cache``): the same
    highlights as without it, though scores depend on the other hits highlighted with it."""
    from citeline.query.highlight import analysis_cache

    hits = [
        _hit("Troops crossed the river at dawn. The bridge was shelled. Supplies ran short.", 0, "a"),
        _hit("Supplies ran short at the bridge. Letters reached home late.", 100, "b"),
        _hit("The river rose. Troops waited for supplies at the bridge!", 300, "c"),
    ]
    plain = [highlight(hits, "supplies at the bridge"), highlight(hits[1:], "supplies at the bridge")]
    with analysis_cache():
        cached = [highlight(hits, "supplies at the bridge"), highlight(hits[1:], "supplies at the bridge")]
    assert cached == plain


RECORD = (
    "Record 1942\n\nIn 1922 the hospital near the harbour collapsed. Witnesses recall the sirens sounding across "
    "the whole district for most of that night, and the council rebuilt it within 3 years."
)


def test_a_title_line_is_not_the_highlight_when_no_sentence_holds_a_query_word() -> None:
    # The record came back by its vector ("building fell" ~ "hospital collapsed"): no sentence holds a query word,
    # and the first sentence, the title, used to be chosen.
    (lit,) = highlight([_hit(RECORD)], "which building fell down")
    assert [h.text for h in lit.highlights] == ["In 1922 the hospital near the harbour collapsed."]


def test_a_title_line_loses_a_tie_with_the_sentence_under_it() -> None:
    (lit,) = highlight([_hit(RECORD)], "record of the harbour")  # "record" in the title, "harbour" in the sentence
    assert lit.highlights[0].text == "In 1922 the hospital near the harbour collapsed."
    assert all(not h.text.startswith("Record") for h in lit.highlights)


def test_a_title_line_that_holds_the_query_is_still_highlighted() -> None:
    (lit,) = highlight([_hit(RECORD)], "record 1942")
    assert lit.highlights[0].text == "Record 1942"


def test_headings_are_whole_short_lines_without_a_full_stop() -> None:
    from citeline.query.highlight import is_heading

    text = "# Installing\n\nRun the installer. It takes a minute.\n\nNotes\n\nA line that ends with a stop.\n"
    spans = sentences(text)
    assert [text[s:e] for s, e in spans if is_heading(text, s, e)] == ["# Installing", "Notes"]
