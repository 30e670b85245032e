"""The ``@parser`` registry of source formats: a suffix (``.md``) to the function that parses such a file.

A format is one module of :mod:`citeline.sources.formats` holding one function decorated with ``@parser(".ext")``;
:mod:`citeline.sources.parsers` imports them all and reads a file through the registry. The helpers here are what
several formats share (decoding text, a title from the first line).
"""

from __future__ import annotations

from collections.abc import Callable

from citeline.errors import SourceError
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


def decode_text(source: SourceFile, data: bytes) -> str:
    """Decode UTF-8 strictly (a leading BOM is dropped); refuse binary and empty content."""
    if b"\0" in data[:8192]:
        raise SourceError(source.path, "looks like a binary file (contains NUL bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(source.path, f"not valid UTF-8 at byte {exc.start} (re-save the file as UTF-8)") from exc
    if not text.strip():
        raise SourceError(source.path, "file is empty or only whitespace")
    return text


def first_line_title(text: str, fallback: str) -> str:
    """The first non-empty line of ``text`` (a leading ``#`` dropped), at most 200 characters; else ``fallback``."""
    for line in text.splitlines():
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped[:200]
    return fallback
