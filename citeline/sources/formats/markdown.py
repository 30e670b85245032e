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
expand to gigabytes), fails the file with a one-line error saying where; what was indexed from it is kept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from citeline.errors import SourceError
from citeline.sources.document import Document, EmptySource, SourceFile
from citeline.sources.encoding import decode
from citeline.sources.metadata import json_value
from citeline.sources.registry import first_line_title, parser

#: ``---`` on the first line, the YAML, then ``---`` or ``...`` on a line of its own (group 1 is the YAML).
_FRONT_MATTER = re.compile(r"---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.DOTALL | re.MULTILINE)
_EMPTY_FRONT_MATTER = re.compile(r"---[ \t]*\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's C loader when PyYAML was built with it


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
    if value is None:
        return {}, found.end()
    if not isinstance(value, dict):
        return {}, 0  # a thematic break, not front matter: the whole file is the body
    return json_value(value), found.end()


@parser(".md", ".markdown")
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
