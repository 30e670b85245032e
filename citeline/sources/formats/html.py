"""HTML (``.html``, ``.htm``): the main text, as trafilatura extracts it."""

from __future__ import annotations

from pathlib import Path

from citeline.errors import SourceError
from citeline.sources.document import Document, SourceFile
from citeline.sources.registry import decode_text, first_line_title, parser


@parser(".html", ".htm")
def parse_html(source: SourceFile, data: bytes) -> list[Document]:
    """HTML: the main text as trafilatura extracts it (boilerplate, menus and scripts dropped).

    The stored text is the extracted text, so chunk offsets index into it, not into the markup. A page where
    trafilatura finds no main content falls back to all of its visible text.
    """
    import trafilatura

    markup = decode_text(source, data)
    text = trafilatura.extract(markup, include_comments=False, include_tables=True, favor_recall=True)
    if not text or not text.strip():
        text = trafilatura.html2txt(markup) or ""
    if not text.strip():
        raise SourceError(source.path, "HTML page has no text")
    metadata = trafilatura.extract_metadata(markup)
    title = (metadata.title if metadata and metadata.title else None) or first_line_title(text, Path(source.path).stem)
    extra = {"author": metadata.author, "date": metadata.date} if metadata else {}
    return [
        Document(
            source.root, source.source_id, source.path, title[:200], text, "html", {k: v for k, v in extra.items() if v}
        )
    ]
