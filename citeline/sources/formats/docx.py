"""Word documents (``.docx``) by python-docx: the body's paragraphs and tables in order, and the core properties.

The stored text is the document's text as python-docx reads it: each paragraph on its own line (a blank line
between paragraphs), each table row as its cells joined by `` | `` (a cell merged across columns once), so chunk
offsets index into that text. Headers, footers, footnotes and comments are not read. The core properties
(``title``, ``author``, ``subject``, ``keywords``, ``category``, ``created``, ``modified``, ``last_modified_by``,
``language``) are the metadata, dates as ISO date-times; the title is the ``title`` property, else the first
heading, else the first line.

A ``.docx`` is a zip file: one whose parts would inflate past :data:`MAX_INFLATED_BYTES` is refused before
python-docx reads it (a zip bomb would otherwise fill the memory of the run).
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path
from typing import Any

from citeline.errors import SourceError
from citeline.sources.document import Document, SourceFile
from citeline.sources.metadata import present
from citeline.sources.registry import first_line_title, parser

#: The most a .docx may inflate to: 50 times the 64 MiB file limit's share of text would still be a book shelf.
MAX_INFLATED_BYTES = 512 * 1024 * 1024

_PROPERTIES = ("title", "author", "subject", "keywords", "category", "created", "modified", "last_modified_by",
               "language")  # fmt: skip


@parser(".docx")
def parse_docx(source: SourceFile, data: bytes) -> list[Document]:
    """A Word document's body text and core properties (see the module docstring)."""
    import docx
    from docx.opc.exceptions import OpcError
    from lxml.etree import LxmlError

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            inflated = sum(info.file_size for info in archive.infolist())
        if inflated > MAX_INFLATED_BYTES:
            raise SourceError(
                source.path, f"inflates to {inflated:,} bytes, above the {MAX_INFLATED_BYTES:,}-byte limit"
            )
        document = docx.Document(io.BytesIO(data))
        lines, heading = _body(document)
        metadata = _core_properties(document)
    except SourceError:
        raise
    except (zipfile.BadZipFile, zlib.error, OpcError, LxmlError, KeyError, ValueError, TypeError, AttributeError,
            IndexError, EOFError, OSError, RecursionError, NotImplementedError) as exc:  # fmt: skip
        raise SourceError(source.path, f"corrupt or unreadable .docx ({type(exc).__name__}: {exc})") from exc
    text = "\n\n".join(lines)
    if not text.strip():
        raise SourceError(source.path, ".docx has no text")
    stated = metadata.get("title")
    title = (stated if isinstance(stated, str) else "") or heading or first_line_title(text, Path(source.path).stem)
    return [Document(source.root, source.source_id, source.path, title.strip()[:200], text, "docx", metadata)]


def _body(document: Any) -> tuple[list[str], str]:
    """The body's paragraphs and table rows, in order, and the text of its first heading ("" if none)."""
    from docx.table import Table

    lines: list[str] = []
    heading = ""
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
            style = block.style.name if block.style is not None else ""
            if not heading and (style.startswith("Heading") or style == "Title"):
                heading = block.text.strip()
    return lines, heading


def _core_properties(document: Any) -> dict[str, Any]:
    properties = document.core_properties
    return present({name: getattr(properties, name, None) for name in _PROPERTIES})
