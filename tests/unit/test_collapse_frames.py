"""Collapse precision on generated sets: records of one frame never merge, copies with light edits always do."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from _collapse_sets import seed_articles, syndicated, templated_records
from _quote_set import hit

from citeline.query.collapse import collapse
from citeline.query.highlight import highlight
from citeline.query.quotes import gap_kind, same_text, shared_statement, words_of


def _merged(a: str, b: str, query: str, *, same_vector: bool) -> bool:
    """Do two hits of two documents, searched for ``query``, become one result?"""
    hits = highlight([hit("a", a, 1, 1.0), hit("b", b, 2, 0.9)], query)
    # Equal vectors (a cosine of 1, as the real model nearly gives records of one frame) or orthogonal ones (only
    # the words can merge them).
    vectors = np.ones((2, 2), np.float32) / np.sqrt(2) if same_vector else np.eye(2, dtype=np.float32)
    return len(collapse(hits, vectors, query_vector=vectors[0], encode=lambda t: np.zeros((len(t), 2)))) == 1


@pytest.mark.parametrize("same_vector", [True, False])
def test_records_of_one_frame_never_merge(same_vector: bool) -> None:
    records = templated_records(40)
    merged = [
        (a.id, b.id)
        for a, b in itertools.combinations(records, 2)
        if _merged(a.text, b.text, a.answer, same_vector=same_vector)
    ]
    assert merged == []


FRAMES = [
    # Only names differ, in the middle of the frame.
    (
        "The permit that {} filed for the old mill on the Varn was approved by the district office on Monday, and "
        "work on the weir may start in spring once the river falls.",
        ["Marta Keller", "Jonas Berg", "Ilse Brandt"],
    ),
    # Only numbers differ.
    (
        "Invoice {}: crates of apples delivered to the market hall on the morning of the autumn fair, paid in full "
        "by the cooperative and signed for by the hall keeper.",
        ["1042", "1043", "2210"],
    ),
    # Only content words differ (no number, no name): a product page.
    (
        "This {} jacket is cut from {} wool, lined with cotton, and has two deep pockets and a hood that folds "
        "into the collar; wash it cold and dry it flat.",
        [("green", "felted"), ("grey", "boiled"), ("navy", "merino")],
    ),
]


@pytest.mark.parametrize(("frame", "fills"), FRAMES)
def test_a_frame_filled_with_other_names_numbers_or_words_is_not_one_passage(frame: str, fills: list) -> None:
    texts = [frame.format(*(fill if isinstance(fill, tuple) else (fill,))) for fill in fills]
    for a, b in itertools.combinations(texts, 2):
        assert not same_text(*words_of(a, b)), (a, b)
        assert shared_statement(*words_of(a, b)) is None, (a, b)
        assert not _merged(a, b, a, same_vector=True)


def _paragraph_pairs() -> list[tuple[str, str]]:
    pairs = []
    for number, text in enumerate(seed_articles().values()):
        keep = [p for p in text.split("\n\n") if len(p.split()) > 20 and not p.startswith("*A citeline seed")]
        copies = [p for p in syndicated(text, seed=number).split("\n\n") if len(p.split()) > 20]
        pairs += list(zip(keep, copies, strict=True))
    return pairs


@pytest.mark.parametrize("same_vector", [True, False])
def test_syndicated_copies_with_light_edits_merge(same_vector: bool) -> None:
    pairs = _paragraph_pairs()
    assert len(pairs) >= 30
    assert any("harbor" in copy or "neighbors" in copy for _, copy in pairs)  # the edits are there
    missed = [a[:60] for a, b in pairs if not _merged(a, b, a.split(". ")[0], same_vector=same_vector)]
    assert missed == []
    assert all(same_text(*words_of(a, b)) for a, b in pairs)


def test_edits_are_not_slots_and_differing_numbers_are() -> None:
    assert (
        gap_kind(
            (
                "did",
                "not",
            ),
            (
                "didn",
                "t",
            ),
        )
        == "edit"
    )
    assert gap_kind(("harbour",), ("harbor",)) == "edit"
    assert gap_kind(("losing",), ("lose",)) == "edit"
    assert (
        gap_kind(
            (
                "two",
                "thousand",
            ),
            (
                "2",
                "000",
            ),
        )
        == "edit"
    )
    assert gap_kind(("eighteen",), ("18",)) == "edit"
    assert gap_kind(("1922",), ("1923",)) == "number"
    assert (
        gap_kind(
            (
                "3",
                "weeks",
            ),
            (
                "8",
                "months",
            ),
        )
        == "number"
    )
    assert gap_kind(("hospital",), ("school",)) == "content"
    a = "We planned for two thousand people and now we have more than four thousand, with winter three weeks away."
    b = "We planned for 2,000 people and we now have more than 4,000 with winter three weeks away."
    assert shared_statement(*words_of(a, b)) is not None
    c = b.replace("4,000", "6,000")
    assert not same_text(*words_of(b, c))


def test_a_pair_whose_boilerplate_differs_in_a_word_still_shares_its_quote() -> None:
    """The seed levee reports: their notes are one frame ("report" / "analysis"), and they quote Irena Voss."""
    note = "A citeline seed document: an original, fictional news {} written for this project's examples and tests."
    quote = (
        '"We told the council in writing, three winters running, that this embankment would not survive a spring '
        'like this one," said Irena Voss.'
    )
    a = f"{note.format('report')} The water rose after two o'clock. {quote}"
    b = f"{note.format('analysis')} Two days later the town counted the cost. {quote.replace('would not', 'wouldn’t')}"
    found = shared_statement(*words_of(a, b))
    assert found is not None
    (a0, a1), _ = found
    assert a[a0:a1].startswith("We told the council") and "seed document" not in a[a0:a1]
