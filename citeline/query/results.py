"""What a search returns: passages with their provenance (:class:`SearchResult`), and every place a passage occurs
(:class:`Source`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
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

    def to_dict(self) -> dict[str, Any]:
        """The highlight as JSON-ready data."""
        return {"char_start": self.char_start, "char_end": self.char_end, "text": self.text, "score": self.score}


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
    page: int | None = None
    shared_start: int | None = None
    shared_end: int | None = None
    #: the record's id in its file when the document is one record (a JSONL line, a CSV row; the offsets are then
    #: into the record's text, not the file's); None for a whole file
    record_id: str | None = None
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
    page: int | None = None
    relevance: float | None = None
    highlights: tuple[Highlight, ...] = ()
    sources: tuple[Source, ...] = ()

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
        )

    def as_source(self, *, shared_start: int | None = None, shared_end: int | None = None) -> Source:
        """This result's own passage as a :class:`Source`."""
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
            page=self.page,
            shared_start=self.char_start if shared_start is None else shared_start,
            shared_end=self.char_end if shared_end is None else shared_end,
            record_id=self.record_id,
            work_id=self.work_id,
        )


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
