"""PDF (``.pdf``): the text of each page by pypdf."""

from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Any

from citeline.errors import SourceError
from citeline.sources import MAX_SOURCE_CHARS
from citeline.sources.document import Document, SourceFile
from citeline.sources.metadata import present
from citeline.sources.registry import first_line_title, parser

#: The Latin ligatures of Unicode's alphabetic presentation forms (U+FB00-FB06), each to its letters (its NFKC).
#: A PDF's font often sets ff, fi, fl, ffi and ffl as one glyph (LaTeX does by default), and pypdf extracts the
#: glyph as that one code point (py-pdf/pypdf#2046): "signiﬁcant" is then another word than "significant" to BM25,
#: five word pieces to the model, and not what a reader types or copies. On SciFact with every ff/fi/fl so written,
#: test nDCG@10 fell; expanded, it is SciFact's own again (docs/decisions/unicode-normalisation.md; figures:
#: docs/quality.md#normalisation-unicode-pdf-ligatures-word-forms).
_LIGATURES = str.maketrans({chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)})


def expand_ligatures(text: str) -> str:
    """``text`` with each Latin ligature character (U+FB00-FB06: ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ) written as its letters."""
    return text.translate(_LIGATURES)


#: Reader version 2: ligature glyphs written as their letters (version 1 stored "signiﬁcant", which "significant"
#: misses). Version 3: where each page begins is stored (the ``page_starts`` property), so a hit names the page of its
#: highlighted sentence and its passage's page span, not only its chunk's first page.
@parser(".pdf", reader=3)
def parse_pdf(source: SourceFile, data: bytes) -> list[Document]:
    """PDF text by pypdf, pages joined by blank lines, ligatures written as their letters (:func:`expand_ligatures`).

    ``page_starts`` maps offsets to pages (while chunking, and stored as the ``page_starts`` property: a search
    result's highlights name their pages by it); the page count is the ``pages`` property; the document
    info (title, author, subject, keywords, creator, producer, creation and modification dates) is the metadata
    (:func:`document_info`).
    """
    import io

    import pypdf
    from pypdf.errors import PyPdfError

    try:
        pdf = pypdf.PdfReader(io.BytesIO(data))
        if pdf.is_encrypted:
            raise SourceError(source.path, "PDF is encrypted; decrypt it first")
        pages: list[str] = []
        extracted = 0
        for page in pdf.pages:
            pages.append(expand_ligatures(page.extract_text() or ""))
            extracted += len(pages[-1]) + 2
            if extracted > MAX_SOURCE_CHARS:  # stop reading at once: a bomb's pages would each add as much
                raise SourceError(
                    source.path,
                    f"pages 1-{len(pages)} give more than {MAX_SOURCE_CHARS:,} characters of text, the limit for one "
                    "source (refused)",
                )
        metadata = document_info(pdf)
    except SourceError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError, OSError) as exc:
        # PyPdfError covers pypdf's own refusals, LimitReachedError included (a declared size past its safety
        # limit, found by fuzzing); the others are what its parser raises on malformed structures.
        raise SourceError(source.path, f"corrupt or unreadable PDF ({type(exc).__name__}: {exc})") from exc
    page_starts, parts, offset = [], [], 0
    for page_text in pages:
        page_starts.append(offset)
        parts.append(page_text)
        offset += len(page_text) + 2
    text = "\n\n".join(parts)
    if not text.strip():
        raise SourceError(source.path, "PDF has no extractable text (scanned images need OCR first)")
    title = str(metadata.get("title") or "").strip() or first_line_title(text, Path(source.path).stem)
    document = Document(source.root, source.source_id, source.path, title[:200], text, "pdf", metadata)
    document.page_starts = page_starts
    document.properties["pages"] = len(pages)
    document.properties["page_starts"] = page_starts
    return [document]


#: The document info entries kept, by the name the metadata gives them.
_INFO = {"title": "/Title", "author": "/Author", "subject": "/Subject", "keywords": "/Keywords",
         "creator": "/Creator", "producer": "/Producer"}  # fmt: skip


def document_info(pdf: Any) -> dict[str, Any]:
    """A PDF's document info as metadata: its text entries (ligatures expanded), ``created`` and ``modified`` as
    ISO date-times. A date pypdf cannot read is left out rather than failing the file."""
    info = pdf.metadata
    if info is None:
        return {}
    fields: dict[str, Any] = {}
    for name, key in _INFO.items():
        value = info[key] if key in info else None  # noqa: SIM401  ([] resolves an indirect object; get() does not)
        fields[name] = expand_ligatures(str(value)).strip() if isinstance(value, str) else None
    for name, attribute in (("created", "creation_date"), ("modified", "modification_date")):
        try:
            fields[name] = getattr(info, attribute)
        except (ValueError, TypeError, AttributeError, OverflowError):  # "D:2021" typos, out-of-range fields
            fields[name] = None
    return present(fields)
