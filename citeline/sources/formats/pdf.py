"""PDF (``.pdf``): the text of each page by pypdf."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from citeline.errors import SourceError
from citeline.sources.document import Document, SourceFile
from citeline.sources.registry import first_line_title, parser

#: The Latin ligatures of Unicode's alphabetic presentation forms (U+FB00-FB06), each to its letters (its NFKC).
#: A PDF's font often sets ff, fi, fl, ffi and ffl as one glyph (LaTeX does by default), and pypdf extracts the
#: glyph as that one code point (py-pdf/pypdf#2046): "signiﬁcant" is then another word than "significant" to BM25,
#: five word pieces to the model, and not what a reader types or copies. On SciFact with every ff/fi/fl so written,
#: test nDCG@10 fell 0.008-0.011 in hybrid mode and 0.010-0.013 in dense (torch, onnx-int8; train: dense -0.005,
#: hybrid within the noise); expanded, it is SciFact's own again (``bench/normalisation.py``, README "Retrieval
#: quality").
_LIGATURES = str.maketrans({chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)})


def expand_ligatures(text: str) -> str:
    """``text`` with each Latin ligature character (U+FB00-FB06: ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ) written as its letters."""
    return text.translate(_LIGATURES)


@parser(".pdf")
def parse_pdf(source: SourceFile, data: bytes) -> list[Document]:
    """PDF text by pypdf, pages joined by blank lines, ligatures written as their letters (:func:`expand_ligatures`);
    ``metadata["page_starts"]`` maps offsets to pages."""
    import io

    import pypdf
    from pypdf.errors import PyPdfError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise SourceError(source.path, "PDF is encrypted; decrypt it first")
        pages = [expand_ligatures(page.extract_text() or "") for page in reader.pages]
        info_title = expand_ligatures(reader.metadata.title or "") if reader.metadata else None
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
    title = (info_title or "").strip() or first_line_title(text, Path(source.path).stem)
    return [
        Document(
            source.root,
            source.source_id,
            source.path,
            title[:200],
            text,
            "pdf",
            {"page_starts": page_starts, "pages": len(pages)},
        )
    ]
