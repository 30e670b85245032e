"""Plain text (``.txt``), in any encoding (:mod:`citeline.sources.encoding`)."""

from __future__ import annotations

from pathlib import Path

from citeline.sources.document import Document, SourceFile
from citeline.sources.encoding import decode
from citeline.sources.registry import first_line_title, parser


@parser(".txt")
def parse_text(source: SourceFile, data: bytes) -> list[Document]:
    """Plain text: the title is the first non-empty line; the encoding found is the ``encoding`` property."""
    decoded = decode(source, data)
    title = first_line_title(decoded.text, Path(source.path).stem)
    document = Document(source.root, source.source_id, source.path, title, decoded.text, "text")
    document.properties["encoding"] = decoded.encoding
    return [document]
