"""Markdown (``.md``, ``.markdown``), with YAML front matter read as the document's metadata.

Front matter is a YAML mapping between a first line ``---`` and a line ``---`` (or ``...``), as Jekyll, Hugo,
MkDocs and Obsidian write it. It is parsed with PyYAML's safe loader: ``year: 2021`` stays the number 2021,
``date: 2021-03-04`` becomes the ISO date ``"2021-03-04"`` (see :mod:`citeline.sources.metadata`), lists stay lists.

Where the front matter goes (the choice, and why): the document's text is the file's text, front matter included,
and :attr:`~citeline.sources.document.Document.chunks_from` marks where the body begins; no chunk covers the front
matter, so it is never embedded, never matched by BM25 and never returned as a passage, while every offset (a
chunk's, a highlight's, a quote's) is the offset in the file as the user opens it. Editing only the front matter
changes the document's text, so the next run stores the new metadata (a body-only text would hash the same and
keep the old metadata). ``citeline show`` prints the whole text, front matter first.

A block that is not a YAML mapping (a thematic break ``---`` opening a plain document) is no front matter: the
whole file is indexed. A block that is invalid YAML, or that uses YAML aliases (``*name``: a few lines of them
expand to gigabytes), fails the file with a one-line error saying where; so does a value YAML reads as a date or
a number that is none (``date: 2024-13-45``: the error names the value and its line and says to quote it); what
was indexed from the file is kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import yaml

from citeline.errors import SourceError
from citeline.sources.document import Document, EmptySource, SourceFile
from citeline.sources.encoding import decode
from citeline.sources.metadata import json_value
from citeline.sources.registry import first_line_title, parser

#: ``---`` on the first line, the YAML, then ``---`` or ``...`` on a line of its own (group 1 is the YAML).
_FRONT_MATTER = re.compile(r"---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)
_EMPTY_FRONT_MATTER = re.compile(r"---[ \t]*\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)")
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's C loader when PyYAML was built with it

_BOOL, _INT, _FLOAT = (f"tag:yaml.org,2002:{kind}" for kind in ("bool", "int", "float"))


class _Loader(_SafeLoader):
    """PyYAML's safe loader with YAML 1.2's booleans and numbers instead of YAML 1.1's, which PyYAML follows and
    which changed what a note said: ``zip: 02134`` was the octal number 1116, ``code: 007`` the number 7,
    ``country: NO`` false, ``time: 12:30`` the number 750 (base 60), ``n: 1_000`` 1000 and ``t: 0x10`` 16. Now a
    boolean is ``true``/``false`` (any case), a number is written in decimal without a leading zero (``39``,
    ``-0``, ``39.00``, ``.5``, ``3.9e1``, ``.inf``), as a CSV cell is read (``metadata.typed_text``), and anything
    else is the text as written (a code ``007``, ``NO``, ``12:30``). Dates, nulls and the rest are as before."""

    yaml_implicit_resolvers: ClassVar[dict[Any, list[tuple[str, Any]]]] = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_BOOL, _INT, _FLOAT)]
        for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
    }


_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_implicit_resolver(_INT, re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"), list("-+0123456789"))
_Loader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?(?:(?:0|[1-9][0-9]*)\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:0|[1-9][0-9]*)[eE][-+]?[0-9]+"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


#: What PyYAML's constructors raise for a scalar they cannot build: ``ValueError`` for ``2024-13-45``, and for an
#: explicitly tagged one (``!!bool ""``, ``!!timestamp x``, ``!!int ""``) a ``KeyError``, ``AttributeError`` or
#: ``IndexError`` (found by tests/unit/test_fuzz.py's front matter scalars).
_BUILD_ERRORS = (ValueError, OverflowError, KeyError, AttributeError, IndexError, TypeError)
#: What a YAML tag's value is, for the error naming a value that is not one.
_KINDS = {"timestamp": "date or time", "float": "number", "int": "whole number", "bool": "true or false"}


def _unbuildable(block: str, error: Exception) -> str:
    """The one-line reason for front matter YAML parsed but could not build (``date: 2024-13-45`` is a timestamp
    by its form and no date), naming the value and its line: PyYAML raises a bare ``ValueError`` for it, which
    reached the user as ``ValueError: month must be in 1..12`` with no word of where."""
    loader = _Loader(block)
    try:
        pending = [loader.get_single_node()]
        while pending:
            node = pending.pop()
            if isinstance(node, yaml.ScalarNode):
                try:
                    loader.construct_object(node, deep=True)
                except _BUILD_ERRORS as exc:
                    tag = node.tag.rsplit(":", 1)[-1]  # tag:yaml.org,2002:timestamp -> timestamp
                    kind = _KINDS.get(tag, tag)
                    line = node.start_mark.line + 2  # + 1 for 1-based, + 1 for the "---" line
                    return (
                        f"front matter value {node.value!r} at line {line} is not a valid {kind} ({exc}); "
                        "quote it to keep it as text, or fix it"
                    )
            elif isinstance(node, yaml.MappingNode):
                pending.extend(part for pair in reversed(node.value) for part in reversed(pair))
            elif isinstance(node, yaml.SequenceNode):
                pending.extend(reversed(node.value))
    finally:
        loader.dispose()
    return f"front matter could not be read ({error}); fix it"


def front_matter(source: SourceFile, text: str) -> tuple[dict[str, Any], int]:
    """The front matter of ``text`` as metadata, and the offset where the body begins (0 without front matter)."""
    found = _EMPTY_FRONT_MATTER.match(text) or _FRONT_MATTER.match(text)
    if found is None:
        return {}, 0
    block = found.group(1) if found.re is _FRONT_MATTER else ""
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(block, Loader=_Loader)):
            raise SourceError(source.path, "front matter uses YAML aliases (*name); write the values out instead")
        value = yaml.load(block, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""  # + 1 for 1-based, + 1 for the "---" line
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise SourceError(source.path, f"front matter is not valid YAML{where} ({problem}); fix it") from exc
    except RecursionError as exc:
        raise SourceError(source.path, "front matter is nested too deeply") from exc
    except _BUILD_ERRORS as exc:  # a scalar YAML types but cannot build: "date: 2024-13-45"
        raise SourceError(source.path, _unbuildable(block, exc)) from exc
    if value is None:
        return {}, found.end()
    if not isinstance(value, dict):
        return {}, 0  # a thematic break, not front matter: the whole file is the body
    return json_value(value), found.end()


#: Reader version 2: front matter's booleans and numbers are YAML 1.2's (a zip code 02134 is text, not 1116).
@parser(".md", ".markdown", reader=2)
def parse_markdown(source: SourceFile, data: bytes) -> list[Document]:
    """Markdown, kept verbatim so offsets match the file; front matter becomes metadata and is not indexed.

    The title is the front matter's ``title``, else the body's first ``#`` heading, else its first line.
    """
    decoded = decode(source, data)
    text = decoded.text
    metadata, body_start = front_matter(source, text)
    body = text[body_start:]
    if not body.strip():
        raise EmptySource(source.path, "file has front matter but no text")
    stated = metadata.get("title")
    title = str(stated).strip() if isinstance(stated, str | int | float) and str(stated).strip() else ""
    title = title or next(
        (line.lstrip("#").strip() for line in body.splitlines() if line.startswith("# ")),
        first_line_title(body, Path(source.path).stem),
    )
    document = Document(source.root, source.source_id, source.path, title[:200], text, "markdown", metadata)
    document.chunks_from = body_start
    document.properties["encoding"] = decoded.encoding
    return [document]
