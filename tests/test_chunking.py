"""Chunking: exact offsets over arbitrary text, and no chunk above the model's token budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeline.chunking import Chunker
from citeline.embedding import resolve_model_path

TOKENIZER = str(Path(resolve_model_path("all-MiniLM-L6-v2")) / "tokenizer.json")


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(TOKENIZER, max_tokens=40, overlap_tokens=8, model_max_tokens=256)


# Words, punctuation, whitespace of every kind, accents, CJK, emoji and stray surrogate-free code points:
# the text users actually feed in, plus the characters that break byte/char offset arithmetic.
text_strategy = st.lists(
    st.one_of(
        st.sampled_from(
            ["The", "soldiers", "fled.", "Why?", "\n\n", "\n", " ", "  ", "\t", "—", "é", "日本語。", "🙂"]
        ),
        st.text(min_size=1, max_size=30),
    ),
    max_size=120,
).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_strategy, markdown=st.booleans())
def test_offsets_are_exact_and_chunks_fit(chunker: Chunker, text: str, markdown: bool) -> None:
    spans = chunker.split(text, markdown=markdown)
    previous_start = -1
    for ordinal, span in enumerate(spans):
        assert span.ordinal == ordinal
        assert text[span.char_start : span.char_end] == span.text
        assert span.char_start >= previous_start  # document order
        previous_start = span.char_start
        assert span.text.strip()
        assert chunker.count_tokens(span.text) <= chunker.max_tokens
    if text.strip():
        assert spans, "non-blank text must produce at least one chunk"


def test_long_text_is_split_within_budget_with_overlap() -> None:
    chunker = Chunker(TOKENIZER, max_tokens=30, overlap_tokens=10, model_max_tokens=256)
    text = " ".join(f"Sentence number {i} talks about soldiers and their families." for i in range(40))
    spans = chunker.split(text)
    assert len(spans) > 5
    assert all(chunker.count_tokens(s.text) <= 30 for s in spans)
    # Overlap: consecutive chunks share text.
    assert any(spans[i + 1].char_start < spans[i].char_end for i in range(len(spans) - 1))


def test_default_budget_counts_past_the_tokenizer_truncation() -> None:
    # tokenizer.json truncates at 128 tokens; a 254-token budget must still be measured in full.
    chunker = Chunker(TOKENIZER, max_tokens=254, overlap_tokens=0, model_max_tokens=256)
    text = "word " * 2000
    spans = chunker.split(text)
    assert max(chunker.count_tokens(s.text) for s in spans) > 128
    assert all(chunker.count_tokens(s.text) <= 254 for s in spans)


@pytest.mark.parametrize(
    ("max_tokens", "overlap"), [(255, 0), (4, 0), (100, 60), (100, -1)]
)
def test_invalid_settings_are_refused(max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        Chunker(TOKENIZER, max_tokens=max_tokens, overlap_tokens=overlap, model_max_tokens=256)


def test_split_many_equals_split_in_order(chunker: Chunker) -> None:
    texts = [
        (f"# Part {i}\n\n" + "The soldiers fled. Why? " * (i * 7) + "日本語。🙂", i % 2 == 0) for i in range(1, 25)
    ]
    expected = [chunker.split(text, markdown=markdown) for text, markdown in texts]
    assert chunker.split_many(texts) == expected
    assert chunker.split_many(texts[:1]) == expected[:1]
    assert chunker.split_many([]) == []
