"""Word documents (``.docx``) by python-docx: the body's paragraphs and tables in order, and the core properties.

The stored text is the document's text as python-docx reads it: each paragraph on its own line (a blank line
between paragraphs), each table row as its cells joined by `` | `` (a cell merged across columns once), so chunk
offsets index into that text. Headers, footers, footnotes and comments are not read. The core properties
(``title``, ``author``, ``subject``, ``keywords``, ``category``, ``created``, ``modified``, ``last_modified_by``,
``language``) are the metadata, dates as ISO date-times; the title is the ``title`` property, else the first
heading, else the first line.

A ``.docx`` is a zip file, and a hostile one can fill the memory of the run (a small file of tiny paragraphs that
inflate a hundredfold: docs/reliability.md#hostile-files). So before python-docx reads it, :func:`check_parts` inflates
every part in chunks, counting the bytes as they come (a zip's headers may lie about the sizes), and reads each XML part
with
defusedxml's streaming parser, counting elements and characters: a file whose parts inflate past
:data:`~citeline.sources.MAX_INFLATED_BYTES`, hold more than :data:`~citeline.sources.MAX_XML_ELEMENTS` elements or
more than :data:`~citeline.sources.MAX_SOURCE_CHARS` characters of text, or declare a DTD (entity bombs; Word never
writes one) is refused with one line naming the part and the limit, holding one chunk of it at a time.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path
from typing import Any

from citeline.errors import SourceError
from citeline.sources import MAX_INFLATED_BYTES, MAX_SOURCE_CHARS, MAX_XML_ELEMENTS, mib
from citeline.sources.document import Document, SourceFile
from citeline.sources.metadata import present
from citeline.sources.registry import first_line_title, parser

#: Bytes inflated at a time while a part is checked.
_CHUNK = 1024 * 1024

_PROPERTIES = ("title", "author", "subject", "keywords", "category", "created", "modified", "last_modified_by",
               "language")  # fmt: skip


@parser(".docx")
def parse_docx(source: SourceFile, data: bytes) -> list[Document]:
    """A Word document's body text and core properties (see the module docstring)."""
    from xml.etree.ElementTree import ParseError

    import docx
    from docx.opc.exceptions import OpcError
    from lxml.etree import LxmlError

    try:
        check_parts(source, data)
        document = docx.Document(io.BytesIO(data))
        lines, heading = _body(document)
        metadata = _core_properties(document)
    except SourceError:
        raise
    except (zipfile.BadZipFile, zlib.error, OpcError, LxmlError, KeyError, ValueError, TypeError, AttributeError,
            IndexError, EOFError, OSError, RecursionError, NotImplementedError, ParseError) as exc:  # fmt: skip
        raise SourceError(source.path, f"corrupt or unreadable .docx ({type(exc).__name__}: {exc})") from exc
    text = "\n\n".join(lines)
    if not text.strip():
        raise SourceError(source.path, ".docx has no text")
    stated = metadata.get("title")
    title = (stated if isinstance(stated, str) else "") or heading or first_line_title(text, Path(source.path).stem)
    return [Document(source.root, source.source_id, source.path, title.strip()[:200], text, "docx", metadata)]


def check_parts(source: SourceFile, data: bytes) -> None:
    """Refuse a .docx that would cost the run more memory than one source may (see the module docstring): every
    zip member inflated a chunk at a time and counted, every XML part scanned by a streaming parser that forbids a
    DTD and counts elements and characters. Raises :class:`SourceError` naming the part and the limit."""
    from defusedxml import DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden
    from defusedxml.ElementTree import DefusedXMLParser

    inflated = 0
    counts = _Counts(source)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            xml = info.filename.endswith((".xml", ".rels"))
            parser = DefusedXMLParser(target=counts, forbid_dtd=True) if xml else None
            counts.part = info.filename
            with archive.open(info) as member:
                while chunk := member.read(_CHUNK):
                    inflated += len(chunk)
                    if inflated > MAX_INFLATED_BYTES:
                        limit = mib(MAX_INFLATED_BYTES)
                        raise SourceError(
                            source.path, f"{info.filename} inflates past the {limit} limit for one source (refused)"
                        )
                    if parser is not None:
                        try:
                            parser.feed(chunk)
                        except (DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden) as exc:
                            raise SourceError(
                                source.path,
                                f"{info.filename} declares a DTD or entities, which Word never writes "
                                f"(refused: an entity bomb expands a few lines to gigabytes; {type(exc).__name__})",
                            ) from exc
            if parser is not None:
                parser.close()


class _Counts:
    """A streaming XML parser's target that counts elements and characters, refusing past the limits."""

    def __init__(self, source: SourceFile) -> None:
        self.source, self.part, self.elements, self.chars = source, "", 0, 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.elements += 1
        if self.elements > MAX_XML_ELEMENTS:
            raise SourceError(
                self.source.path,
                f"{self.part} holds more than {MAX_XML_ELEMENTS:,} XML elements, the limit for one source (refused)",
            )

    def end(self, tag: str) -> None:
        pass

    def data(self, text: str) -> None:
        self.chars += len(text)
        if self.chars > MAX_SOURCE_CHARS:
            raise SourceError(
                self.source.path,
                f"{self.part} holds more than {MAX_SOURCE_CHARS:,} characters of text, the limit for one source "
                "(refused)",
            )

    def close(self) -> None:
        pass


def _body(document: Any) -> tuple[list[str], str]:
    """The body's paragraphs and table rows, in order, and the text of its first heading ("" if none)."""
    from docx.table import Table

    lines: list[str] = []
    heading = ""
    style_names: dict[str, str] = {}  # style id -> name, each looked up once
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                cells: list[str] = []
                for cell in row.cells:
                    if not cells or cell.text != cells[-1]:  # a merged cell comes back once per column it spans
                        cells.append(cell.text)
                if any(cell.strip() for cell in cells):
                    lines.append(" | ".join(cells))
        elif block.text.strip():
            lines.append(block.text)
            # Only a paragraph with a style of its own can be a heading, and each style is looked up once:
            # python-docx's block.style scans all styles for the default on every call (a document of tens of
            # thousands of paragraphs took minutes: docs/performance.md#choices-measured-in-the-code).
            style_id = block._p.style if not heading else None
            if style_id is not None:
                if style_id not in style_names:
                    style = block.style
                    style_names[style_id] = (style.name or "") if style is not None else ""
                if style_names[style_id].startswith("Heading") or style_names[style_id] == "Title":
                    heading = block.text.strip()
    return lines, heading


def _core_properties(document: Any) -> dict[str, Any]:
    properties = document.core_properties
    return present({name: getattr(properties, name, None) for name in _PROPERTIES})
