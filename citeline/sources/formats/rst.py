"""reStructuredText (``.rst``) by docutils, the reference parser: the document's text, and its docinfo as metadata.

The stored text is the plain text of the parsed document (docutils' ``astext()``: the title, sections, paragraphs,
list items, literal blocks and table cells, blocks separated by a blank line, markup gone), so chunk offsets index
into that text, not into the file. Comments, substitution definitions and docutils' own messages about the markup
are left out. The bibliographic fields at the top (``:author: Mara``, ``:date: 2021-03-04``, ``:year: 2021``, any
field) are the metadata, typed (:func:`citeline.sources.metadata.typed_text`), and not part of the text.

docutils runs with file insertion and raw output off (no ``.. include::`` of another file, no ``.. raw::``), no
configuration file read from the working directory and no messages written: a source cannot make a run read
other files. Markup errors never fail the file (docutils recovers and the text is kept).

**Nesting.** docutils parses each indented block (a block quote, a list item's body) by a nested parser over a
copy of the block's lines with the indentation cut, and recurses for each level, so its memory grows with the
lines times their depth, and a file whose every line is indented one space more than the last took gigabytes
before docutils ran out of stack (figures: docs/sources.md#memory-per-source-nested-markup-included). Before
docutils runs, :func:`nesting_problem` walks the lines once and
refuses a file nested deeper than :data:`MAX_RST_DEPTH` levels of indentation, or whose lines, each counted once
for every level it is nested in, pass :data:`MAX_RST_LINE_LEVELS` (what docutils copies), with one line naming the
bound (docs/sources.md#memory-per-source-nested-markup-included).
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


#: The most levels of indentation a reStructuredText file may nest (block quotes in block quotes, lists in lists):
#: a manual nests a handful; docutils' stack runs out past a few hundred, after the memory is spent.
MAX_RST_DEPTH = 64
#: The most lines a file may hold, each counted once more for every level of indentation it sits in: what
#: docutils holds copies of while it parses (figures: docs/sources.md#memory-per-source-nested-markup-included).
#: A document at the text limit, of 80-character lines nested three deep, counts about 150,000.
MAX_RST_LINE_LEVELS = 1_000_000


def nesting_problem(text: str) -> str | None:
    """Why docutils may not be given ``text`` (None: it may): indentation nested deeper than :data:`MAX_RST_DEPTH`
    levels, or more than :data:`MAX_RST_LINE_LEVELS` line-levels. One pass over the lines, a stack of the open
    indentation widths (as Python's tokenizer keeps), no recursion."""
    widths = [0]
    counted = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip(" \t")
        if not stripped:
            continue
        width = len(line[: len(line) - len(stripped)].expandtabs(8))  # docutils reads a tab as up to 8 spaces
        while width < widths[-1]:
            widths.pop()
        if width > widths[-1]:
            widths.append(width)
            if len(widths) - 1 > MAX_RST_DEPTH:
                return f"line {number}: indentation nested deeper than {MAX_RST_DEPTH} levels, the limit for one source"
        counted += len(widths)
        if counted > MAX_RST_LINE_LEVELS:
            return (
                f"line {number}: more than {MAX_RST_LINE_LEVELS:,} lines counted once for each level they are "
                "nested in, the limit for one source (docutils copies each nested block)"
            )
    return None


@parser(".rst")
def parse_rst(source: SourceFile, data: bytes) -> list[Document]:
    """A reStructuredText document's plain text and docinfo (see the module docstring)."""
    from docutils import nodes
    from docutils.core import publish_doctree
    from docutils.utils import SystemMessage

    decoded = decode(source, data)
    problem = nesting_problem(decoded.text)
    if problem is not None:
        raise SourceError(source.path, problem)
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
