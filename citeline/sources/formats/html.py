"""HTML (``.html``, ``.htm``): the main text, as trafilatura extracts it, and the page's meta tags as metadata."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from citeline.errors import SourceError
from citeline.sources.document import Document, SourceFile
from citeline.sources.encoding import decode
from citeline.sources.metadata import present
from citeline.sources.registry import first_line_title, parser


@parser(".html", ".htm")
def parse_html(source: SourceFile, data: bytes) -> list[Document]:
    """HTML: the main text as trafilatura extracts it (boilerplate, menus and scripts dropped).

    The stored text is the extracted text, so chunk offsets index into it, not into the markup. A page where
    trafilatura finds no main content falls back to all of its visible text. The meta tags become metadata
    (:func:`page_metadata`); the title is ``og:title``, else ``<title>``, else the first line of text.
    """
    import trafilatura

    decoded = decode(source, data)
    markup = decoded.text
    text = trafilatura.extract(markup, include_comments=False, include_tables=True, favor_recall=True)
    if not text or not text.strip():
        text = trafilatura.html2txt(markup) or ""
    if not text.strip():
        raise SourceError(source.path, "HTML page has no text")
    metadata = page_metadata(markup)
    title = metadata.get("title") or first_line_title(text, Path(source.path).stem)
    document = Document(source.root, source.source_id, source.path, title[:200], text, "html", metadata)
    document.properties["encoding"] = decoded.encoding
    return [document]


def page_metadata(markup: str) -> dict[str, Any]:
    """A page's meta tags by trafilatura (and htmldate, which it uses for dates): ``title`` (``og:title`` first),
    ``author``, ``description``, ``keywords`` (a list), ``date`` (published) and ``modified`` as ISO dates,
    ``sitename``, ``language``; the tags a page does not have are left out."""
    import htmldate
    import trafilatura

    found = trafilatura.extract_metadata(markup)
    if found is None:
        return {}
    keywords = [word.strip() for tag in found.tags or [] for word in tag.split(",") if word.strip()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lxml's FutureWarning about element truth from inside htmldate
        try:
            modified = htmldate.find_date(markup, original_date=False, extensive_search=False)
        except Exception:
            modified = None
    return present(
        {
            "title": found.title,
            "author": found.author,
            "description": found.description,
            "keywords": keywords,
            "date": found.date,
            "modified": modified if modified != found.date else None,
            "sitename": found.sitename,
            "language": found.language,
        }
    )
