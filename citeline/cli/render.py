"""How search results look to people and to programs.

:func:`human` prints, per result, the highlighted sentence(s) with a little context and the span emphasised, the
source (a record as ``file#id``) and offsets (a record's: into the record's text), for a collapsed result every
source with its own copy of the shared words, and for a grouped one the document's other passages, one line each;
``full=True`` prints the whole chunk. Colour and bold only reach a terminal: never with ``NO_COLOR`` set or when
the output is not a tty, where the highlighted words stand between ``»`` and ``«`` instead. :func:`json_lines`
gives one JSON object per result with ``rank``, ``highlights`` and ``metadata``, and the passage text once (each
source's offsets say where its copy is; ``citeline show`` prints any of them).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from collections.abc import Iterator, Sequence
from typing import Any

import click

from citeline.query.results import Passage, SearchResult, shown_pages, shown_relevance
from citeline.sources.document import record_name
from citeline.util.output import printable, search_records

#: Characters of context shown on each side of a highlight.
CONTEXT_CHARS = 90
#: Characters shown of a passage that has no highlight.
PREVIEW_CHARS = 300
#: Characters shown of each source's copy of the shared words.
SHARED_CHARS = 160
#: A grouped result's other passages printed, one line each (``full=True``: all of them; JSON always lists all).
MORE_SHOWN = 3
#: Around a highlight when the output has no colour (a pipe, ``NO_COLOR``): guillemets, which passages rarely hold.
HIGHLIGHT_OPEN, HIGHLIGHT_CLOSE = "»", "«"


def use_color(stream: Any = None) -> bool:
    """Whether to style output: a terminal, and no ``NO_COLOR`` (https://no-color.org) in the environment."""
    if os.environ.get("NO_COLOR"):
        return False
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def human(
    results: Sequence[SearchResult], *, full: bool = False, color: bool | None = None, width: int | None = None
) -> str:
    """The results as text for a reader (``color=None``: decide with :func:`use_color`)."""
    color = use_color() if color is None else color
    width = width or min(shutil.get_terminal_size((100, 20)).columns, 110)

    def style(text: str, **kwargs: Any) -> str:
        return click.style(text, **kwargs) if color else text

    def mark(text: str) -> str:  # the highlighted words: bold yellow, or between » « when there is no colour
        return click.style(text, bold=True, fg="yellow") if color else f"{HIGHLIGHT_OPEN}{text}{HIGHLIGHT_CLOSE}"

    lines: list[str] = []
    for rank, result in enumerate(results, 1):
        page = _page(result.page, result.first_page, result.last_page)
        lines.append(
            style(f"{rank:>2}. {shown_relevance(result.relevance)}  ", bold=True)
            + style(printable(result.name), fg="cyan")
            + f"  [chars {result.char_start}-{result.char_end}{_of_record(result.record_id)}, chunk {result.ordinal}"
            f"{page}]"
        )
        if result.title:
            lines.append(f"    {printable(result.title)}")
        for line in _wrap(_passage(result, full, mark), width - 6):
            lines.append(f"    │ {line}")
        if len(result.sources) > 1:
            copies = sum(1 for source in result.sources if result.work_id and source.work_id == result.work_id)
            lines.append(
                f"    one work in {copies} copies, each with its passage"
                + (f", and in {len(result.sources) - copies} other sources:" if copies < len(result.sources) else ":")
                if copies > 1
                else f"    the same passage is in {len(result.sources)} sources:"
            )
            for source in result.sources:
                where_page = _page(source.page, source.first_page, source.last_page)
                copy = "  (copy)" if copies > 1 and source.work_id == result.work_id else ""
                lines.append(
                    "      "
                    + style(printable(record_name(source.source_path, source.record_id)), fg="cyan")
                    + f"  [chars {source.shared_start}-{source.shared_end} in chunk {source.ordinal}"
                    f" (chars {source.char_start}-{source.char_end}){_of_record(source.record_id)}{where_page}]{copy}"
                )
                start, end = source.shared_start, source.shared_end
                if start is not None and end is not None and (start, end) != (source.char_start, source.char_end):
                    shared = " ".join(source.text[start - source.char_start : end - source.char_start].split())
                    if len(shared) > SHARED_CHARS:
                        shared = shared[: SHARED_CHARS - 1].rsplit(" ", 1)[0] + " …"
                    lines.append(f"        “{printable(shared)}”")
        if result.more_passages:
            lines.append(_more_passages(len(result.more_passages), result.record_id))
            shown = result.more_passages if full else result.more_passages[:MORE_SHOWN]
            lines += [f"      {_passage_line(passage, width - 6)}" for passage in shown]
            if len(shown) < len(result.more_passages):
                lines.append(f"      … {len(result.more_passages) - len(shown)} more (--full lists them, --json too)")
        lines.append("")
    return "\n".join(lines)


def _page(page: int | None, first: int | None, last: int | None) -> str:
    """ ", page 2 (passage pages 1-2)" after a hit's offsets (:func:`shown_pages`); nothing without pages."""
    shown = shown_pages(page, first, last)
    return f", {shown}" if shown else ""


def _of_record(record_id: str | None) -> str:
    """What a record's offsets are into (its own text, not the file's); nothing for a whole file."""
    return "" if record_id is None else " of the record's text"


def _more_passages(count: int, record_id: str | None) -> str:
    """The line above a grouped result's other passages: "2 more passages in this document"."""
    where = "record" if record_id is not None else "document"
    return f"    {count} more passage{'s' * (count != 1)} in this {where}:"


def _passage_line(passage: Passage, width: int) -> str:
    """One of a grouped result's other passages on one line: relevance, chunk, offsets and its best sentence."""
    page = _page(passage.page, passage.first_page, passage.last_page)
    offsets = f"[chars {passage.char_start}-{passage.char_end}{page}]"
    head = f"{shown_relevance(passage.relevance)}  chunk {passage.ordinal} {offsets}"
    best = max(passage.highlights, key=lambda h: h.score, default=None)
    text = " ".join((best.text if best else passage.text).split())
    room = max(20, width - len(head) - 4)
    if len(text) > room:
        text = text[: room - 1].rsplit(" ", 1)[0] + " …"
    return f"{head}  “{printable(text)}”"


def _passage(result: SearchResult, full: bool, mark: Any) -> str:
    """The text shown for a result: its highlights in context (or the whole chunk), the highlights ``mark``-ed, its
    control characters escaped (newlines and tabs kept, for :func:`_wrap` to fold)."""
    text = result.text

    def plain(piece: str) -> str:
        return printable(piece, lines=True)

    marks = sorted((h.char_start - result.char_start, h.char_end - result.char_start) for h in result.highlights)
    marks = [(max(0, s), min(len(text), e)) for s, e in marks if e > 0 and s < len(text)]
    if not marks:
        if full or len(text) <= PREVIEW_CHARS:
            return plain(text)
        return plain(text[:PREVIEW_CHARS].rsplit(" ", 1)[0]) + " …"
    pieces: list[str] = []
    cursor = 0 if full else None
    for start, end in marks:
        if cursor is None:  # the first highlight: a little context before it
            cursor = _word_start(text, max(0, start - CONTEXT_CHARS))
            if cursor > 0:
                pieces.append("… ")
        elif not full and start - cursor > 2 * CONTEXT_CHARS:  # a long stretch between two highlights
            pieces.append(plain(text[cursor : _word_end(text, cursor + CONTEXT_CHARS)]) + " … ")
            cursor = _word_start(text, start - CONTEXT_CHARS)
        pieces.append(plain(text[cursor:start]))
        pieces.append(mark(plain(text[start:end])))
        cursor = end
    assert cursor is not None
    stop = len(text) if full else _word_end(text, min(len(text), cursor + CONTEXT_CHARS))
    pieces.append(plain(text[cursor:stop]))
    if stop < len(text):
        pieces.append(" …")
    return "".join(pieces)


def _word_start(text: str, at: int) -> int:
    """``at``, moved forward to the start of a word (so context does not begin mid-word)."""
    if at <= 0:
        return 0
    space = text.find(" ", at)
    return at if space < 0 else space + 1


def _word_end(text: str, at: int) -> int:
    """``at``, moved back to the end of a word."""
    if at >= len(text):
        return len(text)
    space = text.rfind(" ", 0, at)
    return at if space < 0 else space


def _wrap(text: str, width: int) -> list[str]:
    """Wrap ``text`` (whitespace collapsed) to ``width``; ANSI codes count as characters, which only shortens lines."""
    return textwrap.wrap(" ".join(text.split()), max(width, 20)) or [""]


def json_lines(results: Sequence[SearchResult]) -> Iterator[str]:
    """One JSON object per result, one line each (the CLI's ``--json`` format)."""
    for record in search_records(results):
        yield json.dumps(record, ensure_ascii=False)
