"""reStructuredText (``.rst``) by docutils, the reference parser: the document's text, and its docinfo as metadata.

The stored text is the plain text of the parsed document (docutils' ``astext()``: the title, sections, paragraphs,
list items, literal blocks and table cells, blocks separated by a blank line, markup gone), so chunk offsets index
into that text, not into the file. Comments, substitution definitions and docutils' own messages about the markup
are left out. The bibliographic fields at the top (``:author: Mara``, ``:date: 2021-03-04``, ``:year: 2021``, any
field) are the metadata, typed (:func:`citeline.sources.metadata.typed_text`), and not part of the text.

docutils runs with file insertion and raw output off (no ``.. include::`` of another file, no ``.. raw::``), no
configuration file read from the working directory and no messages written: a source cannot make a run read
other files. Markup errors never fail the file (docutils recovers and the text is kept).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from citeline.errors import SourceError
from citeline.sources.document import Document, SourceFile
from citeline.sources.encoding import decode
from citeline.sources.metadata import typed_text
from citeline.sources.registry import first_line_title, parser

_SETTINGS = {
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "_disable_config": True,
    "report_level": 5,  # no system messages reported ...
    "halt_level": 5,  # ... and none stops the parse
    "syntax_highlight": "none",
    "input_encoding": "unicode",
}


@parser(".rst")
def parse_rst(source: SourceFile, data: bytes) -> list[Document]:
    """A reStructuredText document's plain text and docinfo (see the module docstring)."""
    from docutils import nodes
    from docutils.core import publish_doctree
    from docutils.utils import SystemMessage

    decoded = decode(source, data)
    try:
        tree = publish_doctree(
            decoded.text,
            source_path=source.path,
            settings_overrides={**_SETTINGS, "warning_stream": io.StringIO()},
        )
        metadata = _docinfo(tree, nodes)
        for kind in (nodes.docinfo, nodes.comment, nodes.substitution_definition, nodes.system_message):
            for node in list(tree.findall(kind)):
                node.parent.remove(node)
        text = tree.astext()
    except (SystemMessage, ValueError, KeyError, IndexError, AttributeError, TypeError, AssertionError,
            NotImplementedError, RecursionError, UnicodeError) as exc:  # fmt: skip
        raise SourceError(source.path, f"reStructuredText docutils cannot read ({type(exc).__name__}: {exc})") from exc
    if not text.strip():
        raise SourceError(source.path, "reStructuredText document has no text")
    title = str(tree.get("title") or "").strip() or first_line_title(text, Path(source.path).stem)
    document = Document(source.root, source.source_id, source.path, title[:200], text, "rst", metadata)
    document.properties["encoding"] = decoded.encoding
    return [document]


def _docinfo(tree: Any, nodes: Any) -> dict[str, Any]:
    """The bibliographic fields as metadata: ``author``, ``date``, ``version``, ... and any ``:name: value``."""
    info = tree.next_node(nodes.docinfo)
    if info is None:
        return {}
    metadata: dict[str, Any] = {}
    for child in info.children:
        if isinstance(child, nodes.field) and len(child.children) == 2:
            name, value = child[0].astext(), child[1].astext()
        else:
            name, value = child.tagname, child.astext()
        if name.strip() and value.strip():
            metadata[name.strip()] = typed_text(value)
    return metadata
