"""Markdown (``.md``, ``.markdown``)."""

from __future__ import annotations

from pathlib import Path

from citeline.sources.document import Document, SourceFile
from citeline.sources.registry import decode_text, first_line_title, parser


@parser(".md", ".markdown")
def parse_markdown(source: SourceFile, data: bytes) -> list[Document]:
    """Markdown, kept verbatim so offsets match the file; the title is the first ``#`` heading."""
    text = decode_text(source, data)
    title = next(
        (line.lstrip("#").strip() for line in text.splitlines() if line.startswith("# ")),
        first_line_title(text, Path(source.path).stem),
    )[:200]
    return [Document(source.root, source.source_id, source.path, title, text, "markdown")]
