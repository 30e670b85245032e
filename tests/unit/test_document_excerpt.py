"""The excerpts every surface cuts from a document (``citeline show --chunk/--around``, MCP's ``get_passage``):
one rule, so the CLI and the agents' tool cut and refuse alike."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from citeline.errors import QueryError
from citeline.store.documents import ChunkSpan, DocumentDetail


def detail(text: str, spans: tuple[ChunkSpan, ...] = ()) -> DocumentDetail:
    return DocumentDetail(
        doc_id="d1", source_path="/x/a.md", source_id="a.md", source_root="/x", title="A", format="markdown",
        chunks=len(spans), pages=None, encoding="utf-8", size_bytes=len(text), content_hash="h", run_id="r",
        ingested_at=None, text=text, spans=spans,
    )  # fmt: skip


def test_chunk_span_and_its_refusals() -> None:
    doc = detail("one two", (ChunkSpan(7, 0, 0, 3), ChunkSpan(8, 1, 4, 7)))
    assert doc.chunk_span(1) == (4, 7)
    with pytest.raises(QueryError, match="document d1 has chunks 0 to 1, not 2"):
        doc.chunk_span(2)
    with pytest.raises(QueryError, match="document d1 has no chunks, not 0"):
        detail("").chunk_span(0)


def test_excerpt_refusals() -> None:
    with pytest.raises(QueryError, match=r"char_end \(1\) is before char_start \(2\)"):
        detail("abc").excerpt(2, 1)
    with pytest.raises(QueryError, match="character 4 is past the end of document d1 \\(3 characters\\)"):
        detail("abc").excerpt(4, 4)


@given(
    st.text(max_size=60),
    st.integers(0, 70),
    st.integers(0, 20),
    st.integers(0, 30),
    st.none() | st.integers(0, 40),
)
def test_excerpt_stays_in_the_text_and_holds_the_span(
    text: str, char_start: int, width: int, context: int, limit: int | None
) -> None:
    char_end = char_start + width
    if char_start > len(text):
        with pytest.raises(QueryError):
            detail(text).excerpt(char_start, char_end, context, limit)
        return
    start, end = detail(text).excerpt(char_start, char_end, context, limit)
    assert 0 <= start <= end <= len(text)
    assert start == max(0, char_start - context)
    if limit is None:
        assert end == min(len(text), char_end + context)  # the whole span and its context, cut to the text
    else:
        assert end == min(len(text), char_end + context, start + limit)
