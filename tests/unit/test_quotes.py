"""Quote-level collapse on the evaluation set (tests/data/quotes): precision >= 0.95 and recall >= 0.9."""

from __future__ import annotations

from pathlib import Path

from _quote_set import collapsed_pair, evaluate, load, mangled

from citeline.query.collapse import shared_statement, word_spans, words_of

DATA = Path(__file__).resolve().parents[1] / "data" / "quotes"


def test_the_evaluation_set_is_large_enough_and_its_quotes_are_exact_substrings() -> None:
    positives, negatives = load(DATA / "shared.txt"), load(DATA / "topic.txt")
    assert len(positives) >= 30 and len(negatives) >= 30
    for a, b, quote_a, quote_b in positives:
        assert quote_a in a and quote_b in b


def test_collapse_meets_the_precision_and_recall_targets() -> None:
    figures = evaluate(DATA)
    assert figures["precision"] >= 0.95, figures
    assert figures["recall"] >= 0.9, figures
    assert figures["recall_unicode_variant"] >= 0.9, figures
    assert figures["quote_coverage_mean"] >= 0.9, figures


def test_each_source_gets_its_own_copy_of_the_shared_words() -> None:
    a, b, quote_a, quote_b = load(DATA / "shared.txt")[0]  # "We cannot keep ..." against 'We can't keep ...'
    merged = collapsed_pair(a, b)
    assert merged is not None
    first, second = merged.sources
    assert (first.doc_id, second.doc_id) == ("a", "b")
    assert a[first.shared_start : first.shared_end] == quote_a
    assert b[second.shared_start : second.shared_end] == quote_b


def test_unicode_forms_quote_marks_and_case_do_not_matter() -> None:
    text = 'She said: "Café owners were never consulted about the new licence fees, not one of them."'
    other = mangled(text).upper()
    assert other != text
    found = shared_statement(*words_of(text, other))
    assert found is not None
    (a0, a1), (b0, b1) = found
    assert text[a0:a1].startswith("She said") and other[b0:b1].endswith("THEM")


def test_stock_phrases_do_not_make_a_shared_statement() -> None:
    a = "The defence ministry said on Monday that the garrison was fully capable of its mission."
    b = "Soldiers said on Monday that the garrison had not been paid, and the defence ministry did not reply."
    assert shared_statement(*words_of(a, b)) is None
    assert collapsed_pair(a, b) is None


ASCII_SAMPLES = [
    "".join(chr(c) for c in range(128)) * 2,
    "He said: \"We can't keep going -- not now,\" (Cpl. O'Neil, 3rd_batch) x1 1x _ __init__ A.B.C",
    "Tabs\tand\nnewlines\r\nand\x0bvertical\x0cfeeds",
]


def test_ascii_words_are_the_regex_words() -> None:
    # text_words splits ASCII text with str.translate: the same words as the regex that finds their spans.
    from citeline.query.quotes import _WORD, text_words

    for text in ASCII_SAMPLES:
        assert text_words(text)[1] == [hash(word) for word in _WORD.findall(text.lower())]
        assert len(text_words(text)[1]) == len(word_spans(text))
    folded = text_words("Café “Straße” ÉCOLE naïve")[1]
    assert folded == [hash(word) for word in ("cafe", "strasse", "ecole", "naive")]
