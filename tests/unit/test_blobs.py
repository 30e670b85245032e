"""Blobs are left out of chunks (issue 50): a 2 MB base64 attachment in a Markdown file became 9,447 chunks of
noise. A blob (base64, a data URI, a hex dump, MIME-wrapped or not) is covered by no chunk; the text around it
chunks as it would alone, offsets exact into the whole text; prose, identifiers and hashes are untouched."""

from __future__ import annotations

import base64
import random
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from citeline.model.chunking import BLOB_RUN, Chunker, blob_spans
from citeline.model.embedding import resolve_model_path

TOKENIZER = str(Path(resolve_model_path("all-MiniLM-L6-v2")) / "tokenizer.json")
PROSE = "The harbour master counted forty salt barges before the winter storms closed the river."


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(TOKENIZER, max_tokens=40, overlap_tokens=8, model_max_tokens=256)


def _blob(size: int, seed: int = 0) -> str:
    return base64.b64encode(random.Random(seed).randbytes(size)).decode()


def _blobs() -> dict[str, str]:
    data = _blob(3000)
    return {
        "base64 run": data,
        "mime wrapped": "\n".join(textwrap.wrap(data, 76)),
        "pem wrapped": "-----BEGIN CERTIFICATE-----\n" + "\n".join(textwrap.wrap(data, 64)) + "\n-----END",
        "data uri": f'<img src="data:image/png;base64,{data}">',
        "hex dump": random.Random(1).randbytes(400).hex(),
    }


@pytest.mark.parametrize("kind", sorted(_blobs()))
def test_no_chunk_covers_a_blob(chunker: Chunker, kind: str) -> None:
    blob = _blobs()[kind]
    text = f"{PROSE}\n\n{blob}\n\n{PROSE} The quay flooded."
    chunks = chunker.split(text, markdown=True)
    for chunk in chunks:
        assert text[chunk.char_start : chunk.char_end] == chunk.text
        assert _blob(3000)[100:140] not in chunk.text and "a1b2" * 10 not in chunk.text
        assert len(max(chunk.text.split(), key=len)) < BLOB_RUN, chunk.text[:200]
    assert [chunk.ordinal for chunk in chunks] == list(range(len(chunks)))
    assert chunks[0].text.startswith("The harbour") and chunks[-1].text.endswith("quay flooded.")
    assert len(chunks) <= 2 * len(chunker.split(f"{PROSE}\n\n{PROSE} The quay flooded."))


def test_a_2_mb_attachment_is_not_thousands_of_chunks(chunker: Chunker) -> None:
    text = f"# Report\n\n{PROSE}\n\n" + "\n".join(textwrap.wrap(_blob(1_500_000), 76)) + f"\n\n{PROSE}\n"
    assert len(chunker.split(text, markdown=True)) <= 4


@pytest.mark.parametrize(
    "text",
    [
        "sha256 " + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" + " of the file",  # 64 hex
        "https://example.org/" + "path/segment-" * 12 + "?q=1&page=2",
        "2-[(4-chlorophenyl)(phenyl)methoxy]-N,N-dimethylethanamine" * 2,
        "-" * 200 + "\n" + "=" * 200,
        "Pneumonoultramicroscopicsilicovolcanoconiosis " * 20,
        "abc123 " * 50,
    ],
)
def test_prose_identifiers_and_hashes_are_no_blobs(text: str) -> None:
    assert blob_spans(text) == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(
        st.one_of(
            st.sampled_from([PROSE, "\n\n", " ", "# Heading\n", "Short line.\n"]),
            st.integers(50, 2000).map(lambda size: _blob(size, size)),
            st.integers(50, 2000).map(lambda size: "\n".join(textwrap.wrap(_blob(size, size), 76))),
        ),
        max_size=12,
    )
)
def test_offsets_stay_exact_around_blobs(chunker: Chunker, parts: list[str]) -> None:
    text = "".join(parts)
    spans = blob_spans(text)
    for chunk in chunker.split(text, markdown=True):
        assert text[chunk.char_start : chunk.char_end] == chunk.text
        assert not any(start < chunk.char_end and chunk.char_start < end for start, end in spans)
