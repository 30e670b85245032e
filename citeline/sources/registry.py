"""The ``@parser`` registry of source formats: a suffix (``.md``) to the function that parses such a file.

A format is one module of :mod:`citeline.sources.formats` holding one function decorated with ``@parser(".ext")``;
:mod:`citeline.sources.parsers` imports them all and reads a file through the registry. The helpers here are what
several formats share (a title from the first line); decoding text is :mod:`citeline.sources.encoding`.
"""

from __future__ import annotations

from collections.abc import Callable

from citeline.sources.document import Document, Parsed, SourceFile

Parser = Callable[[SourceFile, bytes], "list[Document] | Parsed"]
PARSERS: dict[str, Parser] = {}


def parser(*suffixes: str) -> Callable[[Parser], Parser]:
    """Register a parser for file suffixes (lower case, with the dot)."""

    def register(func: Parser) -> Parser:
        for suffix in suffixes:
            PARSERS[suffix] = func
        return func

    return register


def supported_suffixes() -> tuple[str, ...]:
    """The file suffixes citeline can parse."""
    return tuple(sorted(PARSERS))


def first_line_title(text: str, fallback: str) -> str:
    """The first non-empty line of ``text`` (a leading ``#`` dropped), at most 200 characters; else ``fallback``."""
    for line in text.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped[:200]
    return fallback
