"""Plain text (``.txt``)."""

from __future__ import annotations

from pathlib import Path

from citeline.sources.document import Document, SourceFile
from citeline.sources.registry import decode_text, first_line_title, parser


@parser(".txt")
def parse_text(source: SourceFile, data: bytes) -> list[Document]:
    """Plain text: the title is the first non-empty line."""
    text = decode_text(source, data)
    title = first_line_title(text, Path(source.path).stem)
    return [Document(source.root, source.source_id, source.path, title, text, "text")]
