"""reStructuredText (``.rst``) by docutils, the reference parser: the document's text, and its docinfo as metadata.

The stored text is the plain text of the parsed document (docutils' ``astext()``: the title, sections, paragraphs,
list items, literal blocks and table cells, blocks separated by a blank line, markup gone), so chunk offsets index
into that text, not into the file. Comments, substitution definitions and docutils' own messages about the markup
are left out; the directives and roles docutils does not know (Sphinx's) keep their text (:func:`_parsed`). The
bibliographic fields at the top (``:author: Mara``, ``:date: 2021-03-04``, ``:year: 2021``, any field) are the
metadata, typed (:func:`citeline.sources.metadata.typed_text`), and not part of the text.

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
import re
import secrets
import textwrap
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


#: Directives whose body is code: kept as it is written, not read as reStructuredText.
CODE_DIRECTIVES = frozenset(
    {"code-block", "sourcecode", "doctest", "testcode", "testoutput", "testsetup", "testcleanup", "ipython",
     "jupyter-execute", "prompt", "console"}
)  # fmt: skip
#: Directives whose body and argument are navigation or file names, not text: left out.
NAVIGATION_DIRECTIVES = frozenset(
    {"toctree", "index", "highlight", "literalinclude", "tabularcolumns", "module", "currentmodule", "py:module",
     "py:currentmodule"}
)  # fmt: skip
#: A directive's lines as docutils quotes them in the error it answers a directive it could not run with.
_DIRECTIVE = re.compile(r"\.\. +(?P<name>[\w.:+-]+)::")
_ROLE = re.compile(r":[\w.:+-]+:`(?P<text>.*)`", re.DOTALL)
_TITLED = re.compile(r"(?P<title>.*?)\s*<[^<>]*>", re.DOTALL)


def _publish(text: str, source_path: str) -> Any:
    from docutils.core import publish_doctree

    return publish_doctree(
        text, source_path=source_path, settings_overrides={**_SETTINGS, "warning_stream": io.StringIO()}
    )


#: Directive bodies read in one parse: few parses for a page of many, without a second doctree as large as the
#: file's beside it.
_BODIES_AT_ONCE = 500
#: A file with more unknown directives than this at one level of nesting is read as docutils reads it, their
#: bodies out of the text: reading tens of thousands of bodies again, beside the tree of the messages docutils
#: answered them with, took a file at the text limit past the memory bound for one source (docs/sources.md#formats).
#: A real page holds dozens (Click's and attrs' API pages: about 70).
MAX_READ_BODIES = 2000


def _parsed(text: str, source_path: str) -> Any:
    """docutils' doctree of ``text``, keeping the text docutils leaves out for the directives and roles it does not
    know (Sphinx's and other tools': ``versionadded``, ``function``, ``seealso``, ``:func:``, ``:ref:``, ...) or
    cannot run (its own ``code-block`` given Sphinx's ``:caption:``; those it refuses on purpose, ``include`` and
    ``raw``, stay out).

    docutils answers such a directive with an error message quoting its lines, and an unknown role with its raw
    markup: the file's text lost the directive's body (a function's description, a version note, a code sample)
    and kept the role's markup. Each body is now read as reStructuredText in the directive's place, its argument (a
    signature, a heading, a version) first; code as it is written (:data:`CODE_DIRECTIVES`); navigation not at all
    (:data:`NAVIGATION_DIRECTIVES`). The bodies of one round are read in one parse (each in a ``container`` of
    its own), and the directives they hold in the next: as many parses as unknown directives nest, not one a
    directive. A role becomes the text it shows (``title`` of ``title <target>``)."""
    from docutils import nodes

    tree = _publish(text, source_path)
    for _ in range(MAX_RST_DEPTH + 1):  # each round reads one level deeper; nesting_problem bounds the levels
        found = _unknown_directives(tree)
        if not found:
            break
        # Every message out of the tree at once (each holds the directive's lines, the file's size again): a body to
        # read leaves an empty container in its place until its batch is read.
        prose: list[tuple[Any, str]] = []
        changes: list[tuple[Any, list[Any]]] = []
        for message, body in found:
            if isinstance(body, str):
                place = nodes.container()
                prose.append((place, body))
                changes.append((message, [place]))
            else:
                changes.append((message, [] if body is None else [body]))
        notes = [message for message in tree.findall(nodes.system_message) if message["level"] < 2]  # INFO
        splice(changes + [(message, []) for message in notes])
        del found, changes, notes
        if len(prose) > MAX_READ_BODIES:  # as docutils leaves them: out of the text
            splice([(place, []) for place, _ in prose])
            continue
        for start in range(0, len(prose), _BODIES_AT_ONCE):
            batch = prose[start : start + _BODIES_AT_ONCE]
            mark = f"citeline-body-{secrets.token_hex(8)}-"  # no container the file writes has this class
            together = "\n".join(
                f".. container:: {mark}{number}\n\n{textwrap.indent(body, '   ')}\n"
                for number, (_, body) in enumerate(batch)
            )
            read = {
                str(box["classes"][0]): box
                for box in _publish(together, source_path).findall(nodes.container)
                if box["classes"] and str(box["classes"][0]).startswith(mark)
            }
            splice(
                [
                    (place, list(read[f"{mark}{n}"].children) if f"{mark}{n}" in read else [])
                    for n, (place, _) in enumerate(batch)
                ]
            )
    shown: list[tuple[Any, list[Any]]] = []
    for problem in tree.findall(nodes.problematic):
        role = _ROLE.fullmatch(problem.rawsource or "")
        if role is not None and problem.parent is not None:
            text = role["text"]
            titled = _TITLED.fullmatch(text)
            text = titled["title"] if titled and titled["title"] else text
            shown.append((problem, [nodes.Text(text.lstrip("~!"))]))
    splice(shown)
    return tree


def splice(changes: list[tuple[Any, list[Any]]]) -> None:
    """Put each node of ``changes`` out of its parent, the nodes paired with it in its place (none: it is removed):
    one pass over each parent's children. docutils' ``replace`` and ``remove`` look the node up in its parent's
    list each time, quadratic for a page of many directives or messages under one parent (docs/sources.md#formats)."""
    parents: dict[int, Any] = {}
    swaps: dict[int, list[Any]] = {}
    for node, replacement in changes:
        if node.parent is not None:
            parents[id(node.parent)] = node.parent
            swaps[id(node)] = replacement
    for parent in parents.values():
        children: list[Any] = []
        for child in parent.children:
            swap = swaps.get(id(child))
            if swap is None:
                children.append(child)
                continue
            for node in swap:
                parent.setup_child(node)
                for inner in node.findall(include_self=False):  # else each keeps the doctree it was read in alive
                    inner.document = parent.document
                children.append(node)
            child.parent = None
        parent.children = children


def _unknown_directives(tree: Any) -> list[tuple[Any, Any]]:
    """The error messages in ``tree`` that stand for a directive docutils did not run, each with what stands for
    it: the reStructuredText to read in its place (its argument, then its body, options left out), a literal block
    (code), or None (nothing: navigation, or a body that is empty)."""
    from docutils import nodes

    found: list[tuple[Any, Any]] = []
    for message in tree.findall(nodes.system_message):
        block = message.next_node(nodes.literal_block)
        quoted = block.astext() if block is not None else ""
        written = _DIRECTIVE.match(quoted)
        if written is None or message.parent is None:
            continue
        name = written["name"].lower()
        unknown = message.children[0].astext().startswith("Unknown directive type")
        if not unknown and name not in CODE_DIRECTIVES:  # one docutils knows and refused (include, raw): gone
            continue
        first, _, rest = quoted.partition("\n")
        argument = first.split("::", 1)[1].strip()
        lines = rest.split("\n")
        while lines and lines[0].strip():  # the argument's continuation and the options, up to the first blank line
            line = lines.pop(0).strip()
            if not line.startswith(":"):
                argument = f"{argument} {line}".strip()
        body = textwrap.dedent("\n".join(lines)).strip("\n")
        if name in NAVIGATION_DIRECTIVES:
            found.append((message, None))
        elif name in CODE_DIRECTIVES:  # the argument is the code's language
            found.append((message, nodes.literal_block(body, body) if body else None))
        elif name.split(":")[-1].startswith("auto"):  # autodoc: the argument names code whose docstring the build reads
            found.append((message, body or None))
        else:
            found.append((message, "\n\n".join(part for part in (argument, body) if part) or None))
    return found


@parser(".rst", reader=2)
def parse_rst(source: SourceFile, data: bytes) -> list[Document]:
    """A reStructuredText document's plain text and docinfo (see the module docstring)."""
    from docutils import nodes
    from docutils.utils import SystemMessage

    decoded = decode(source, data)
    problem = nesting_problem(decoded.text)
    if problem is not None:
        raise SourceError(source.path, problem)
    try:
        tree = _parsed(decoded.text, source.path)
        metadata = _docinfo(tree, nodes)
        left_out = (nodes.docinfo, nodes.comment, nodes.substitution_definition, nodes.system_message)
        splice([(node, []) for kind in left_out for node in tree.findall(kind)])
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
