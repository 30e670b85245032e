"""What a search returns: passages with their provenance (:class:`SearchResult`), and every place a passage occurs
(:class:`Source`)."""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from citeline.sources.document import record_name

T = TypeVar("T", "Highlight", "Source", "Passage", "SearchResult")


@dataclass(frozen=True)
class Highlight:
    """A span of the document that answers the query: ``document_text[char_start:char_end] == text``."""

    char_start: int
    char_end: int
    text: str
    score: float
    #: the page the highlight begins on, and the page it ends on (a sentence across a page break: two pages); None
    #: for a document without pages (all but PDF)
    page: int | None = None
    last_page: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The highlight as JSON-ready data."""
        return asdict(self)


@dataclass(frozen=True)
class Source:
    """One place a passage occurs: ``document_text[char_start:char_end] == text`` in document ``doc_id``.

    ``shared_start:shared_end`` is the part of this source's chunk that the other sources of the result share:
    the whole chunk for near-duplicate chunks, the quoted passage when documents quote the same words.
    """

    doc_id: str
    source_path: str
    source_id: str
    title: str
    chunk_id: int
    ordinal: int
    char_start: int
    char_end: int
    text: str
    score: float
    content_hash: str
    run_id: str
    ingested_at: str
    #: the page where the shared text begins (a PDF's; None without pages), and the first and last page of the chunk
    page: int | None = None
    shared_start: int | None = None
    shared_end: int | None = None
    #: the record's id in its file when the document is one record (a JSONL line, a CSV row; the offsets are then
    #: into the record's text, not the file's); None for a whole file
    record_id: str | None = None
    first_page: int | None = None
    last_page: int | None = None
    #: the work this source's document is a copy of (``citeline.query.works``: the smallest doc id among the work's
    #: copies); None when the document is the only copy of its text
    work_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The source as JSON-ready data."""
        return asdict(self)


@dataclass(frozen=True)
class Passage:
    """Another passage of a grouped result's document (``SearchResult.more_passages``): where it is in the
    document's text (``document_text[char_start:char_end] == text``), its score and relevance in this answer, its
    highlights and, when it was collapsed with copies in other documents, every source of it (its own first)."""

    chunk_id: int
    ordinal: int
    char_start: int
    char_end: int
    text: str
    score: float
    #: the page of its first highlight, and its first and last page (see :attr:`SearchResult.page`)
    page: int | None = None
    relevance: float | None = None
    highlights: tuple[Highlight, ...] = ()
    sources: tuple[Source, ...] = ()
    first_page: int | None = None
    last_page: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The passage as JSON-ready data."""
        return asdict(self)


@dataclass(frozen=True)
class SearchResult:
    """One passage and where it comes from: ``document_text[char_start:char_end] == text``.

    The offsets are into the document's text as citeline stores it (``citeline show`` prints it): a record's own
    text when the document is one record of a file (``record_id`` set: a JSONL line, a CSV row), the text
    extracted from an HTML, .docx or PDF file; for plain text and Markdown, the decoded file.

    ``sources`` lists every document the passage occurs in, this result's own first: one entry, or several when
    near-duplicate passages of different documents were collapsed into this result (see ``citeline.query.collapse``).
    ``more_passages`` lists the document's other passages that answered, best first, when the search grouped its
    results by document (``SearchRequest.group``).
    """

    text: str
    score: float
    doc_id: str
    source_path: str
    source_id: str
    title: str
    ordinal: int
    char_start: int
    char_end: int
    content_hash: str
    run_id: str
    ingested_at: str
    model: str
    chunk_id: int
    #: the page a citation names (a PDF's; None for a document without pages): the page its first highlight begins
    #: on (the sentence that answers), else the passage's first page; the passage spans ``first_page``-``last_page``
    page: int | None = None
    sources: tuple[Source, ...] = field(default=())
    #: the sentence(s) of ``text`` that best answer the query, in document offsets (see ``citeline.query.highlight``)
    highlights: tuple[Highlight, ...] = field(default=())
    #: the document's metadata (front matter, PDF document info, HTML meta tags, JSONL and CSV record fields, ...)
    metadata: dict[str, Any] = field(default_factory=dict)
    #: absolute relevance in [0, 1], comparable across queries (``score`` only ranks this query's hits); searches
    #: drop hits below ``min_score`` by it (see ``citeline.query.relevance``); None: the index cannot tell
    relevance: float | None = None
    #: the record's id in its file when the document is one record (``source_id`` is then ``file#record_id``, the
    #: record's name: ``records.jsonl#rec1786``); None for a whole file
    record_id: str | None = None
    #: the document's other passages that answered, best first (a grouped search's; see ``citeline.query.grouping``)
    more_passages: tuple[Passage, ...] = field(default=())
    #: the first and last page of the passage (a PDF's; None for a document without pages)
    first_page: int | None = None
    last_page: int | None = None
    #: the work this result's document is a copy of (a rendered page and its source, one report in several formats:
    #: ``citeline.query.works``); its other copies are in ``sources`` with the same ``work_id``. None: no other copy
    work_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return asdict(self)

    @property
    def name(self) -> str:
        """What to call the passage's document for people: its file's path, with ``#record_id`` for a record
        (``/data/records.jsonl#rec1786``; ``citeline show`` accepts it)."""
        return record_name(self.source_path, self.record_id)

    def as_passage(self) -> Passage:
        """This result as another passage of its document (a grouped result's ``more_passages``)."""
        return Passage(
            chunk_id=self.chunk_id,
            ordinal=self.ordinal,
            char_start=self.char_start,
            char_end=self.char_end,
            text=self.text,
            score=self.score,
            page=self.page,
            relevance=self.relevance,
            highlights=self.highlights,
            sources=self.sources,
            first_page=self.first_page,
            last_page=self.last_page,
        )

    def as_source(self, *, shared_start: int | None = None, shared_end: int | None = None) -> Source:
        """This result's own passage as a :class:`Source`."""
        shared_start = self.char_start if shared_start is None else shared_start
        return Source(
            doc_id=self.doc_id,
            source_path=self.source_path,
            source_id=self.source_id,
            title=self.title,
            chunk_id=self.chunk_id,
            ordinal=self.ordinal,
            char_start=self.char_start,
            char_end=self.char_end,
            text=self.text,
            score=self.score,
            content_hash=self.content_hash,
            run_id=self.run_id,
            ingested_at=self.ingested_at,
            page=self.page_at(shared_start),
            shared_start=shared_start,
            shared_end=self.char_end if shared_end is None else shared_end,
            record_id=self.record_id,
            first_page=self.first_page,
            last_page=self.last_page,
            work_id=self.work_id,
        )

    def page_at(self, offset: int) -> int | None:
        """The page of the document offset ``offset`` within this passage (a PDF's; None without pages): its first
        page plus the page breaks of the passage (:func:`with_pages`) before ``offset``."""
        if self.first_page is None:
            return self.page
        return self.first_page + bisect.bisect_right(self.__dict__.get(_BREAKS, ()), offset)


#: The attribute a result keeps its passage's page breaks in: not a field (no surface shows it; ``evolve`` and
#: pickling keep it), read by :meth:`SearchResult.page_at`.
_BREAKS = "_page_breaks"


def with_pages(result: SearchResult, page_breaks: Sequence[int] | None) -> SearchResult:
    """``result`` with its pages: ``page_breaks`` are where the pages that begin inside the passage (after its first
    character) begin, a PDF's (its passage row's ``page_starts`` property: ``store.catalog``), and ``result.page``
    the chunk's first page. Sets ``first_page`` and ``last_page`` of the passage, and keeps the breaks, which
    :meth:`SearchResult.page_at` reads for its highlights. Without them (a document without pages, or a PDF
    indexed before they were stored) the chunk's stored ``page`` is both its first and last page."""
    if page_breaks is None or result.page is None:
        return evolve(result, first_page=result.page, last_page=result.page)
    breaks = tuple(sorted(offset for offset in page_breaks if result.char_start < offset < result.char_end))
    paged = evolve(result, first_page=result.page, last_page=result.page + len(breaks))
    paged.__dict__[_BREAKS] = breaks
    return paged


def highlight_pages(result: SearchResult, highlights: Sequence[Highlight]) -> SearchResult:
    """``result`` with ``highlights`` (in text order), each naming its pages, and ``page`` the page its first
    highlight begins on: where the answer begins, the sentence the search page marks."""
    if result.first_page is None:
        return evolve(result, highlights=tuple(highlights))
    paged = tuple(
        evolve(h, page=result.page_at(h.char_start), last_page=result.page_at(max(h.char_start, h.char_end - 1)))
        for h in highlights
    )
    page = min(paged, key=_start).page if paged else result.first_page
    return evolve(result, highlights=paged, page=page)


def _start(highlight: Highlight) -> int:
    return highlight.char_start


def shown_pages(page: int | None, first: int | None, last: int | None) -> str:
    """Where a passage is in its document's pages, as people read it on every surface: ``page 2`` when the passage
    is on one page, ``page 2 (passage pages 1-2)`` when it spans several; nothing without pages."""
    if page is None:
        return ""
    if first is None or last is None or first == last:
        return f"page {page}"
    return f"page {page} (passage pages {first}-{last})"


def shown_relevance(value: float | None) -> str:
    """A hit's relevance as people read it on every surface: ``relevance 0.87`` (calibrated, 0-1, comparable across
    queries: ``citeline.query.relevance``), or ``relevance n/a`` for an index whose embedding model has no
    calibration (its hits are never dropped). The ranking ``score`` is not shown: its scale depends on the mode
    (fused, cosine, BM25) and it can be negative."""
    return "relevance n/a" if value is None else f"relevance {value:.2f}"


def result_json(result: SearchResult) -> str:
    """One JSON object on one line (the CLI's ``--json`` format)."""
    return json.dumps(result.to_dict(), ensure_ascii=False)


def evolve(value: T, **changes: Any) -> T:
    """A copy of ``value`` (a :class:`SearchResult`, :class:`Source` or :class:`Highlight`) with ``changes``:
    ``dataclasses.replace`` without running ``__init__`` again (a collapsed search copies dozens of results and
    sources, each a quarter of ``replace``'s cost: docs/performance.md#choices-measured-in-the-code), for these
    classes, which check nothing in ``__init__``."""
    unknown = changes.keys() - value.__dataclass_fields__.keys()
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field {', '.join(sorted(unknown))}")
    copy = object.__new__(type(value))
    copy.__dict__.update(value.__dict__, **changes)
    return copy


def answer_documents(answer: Iterable[SearchResult | str]) -> list[str]:
    """The documents of a search's answer, each once in order: every result's own and its other sources' (a
    collapsed result stands for each document it lists); a doc id given as text is taken as it is. What
    ``Index.facets(within=...)`` counts over."""
    ids: dict[str, None] = {}
    for item in answer:
        if isinstance(item, str):
            ids[item] = None
        else:
            ids[item.doc_id] = None
            ids.update(dict.fromkeys(source.doc_id for source in item.sources))
    return list(ids)
