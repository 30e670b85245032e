"""The MCP server (Model Context Protocol): an index's search, documents and status as tools and resources for AI
assistants and agents, with the citation of every passage (``citeline mcp`` over stdio; ``citeline serve`` at
``/mcp`` over streamable HTTP). Built on the official ``mcp`` SDK's low-level server, so the protocol is the SDK's.

Tools: ``search`` (its input schema is generated from the fields of :class:`citeline.query.plan.SearchRequest`:
names, types, bounds and help are declared there once), ``get_passage`` and ``get_document`` (a bounded span of a
document's text, paged), ``list_documents`` (filters, paged), ``index_status``, and ``ingest`` only when roots were
allowed (``--allow-ingest ROOT``): the model names one of those roots, never a path. Every answer is bounded (see the
``MAX_`` constants and the server's :class:`citeline.web.Limits`); a bad argument, a query the index refuses or an
unknown document is a tool error (``isError``) with one line, never a crash of the server.

Resources: ``citeline://DOC_ID`` is a document's text, ``citeline://DOC_ID/chars/START-END`` the characters
``START`` to ``END`` of it (the offsets a search result cites), listed a page at a time.

Reads go through the server's :class:`citeline.server.IndexService` (the kept-open index whose search snapshot
reloads itself after a commit, one search at a time), so a search while ``citeline ingest`` commits answers from the
generation before or after the commit, never a mix.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import io
import json
import logging
import os
import re
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar, get_type_hints

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from citeline.errors import CitelineError
from citeline.index import Index
from citeline.query.plan import SearchRequest
from citeline.query.results import Passage, SearchResult
from citeline.server import access
from citeline.store.filters import FilterOptions, filters_from
from citeline.util import paths
from citeline.util.declared import offered
from citeline.util.output import normalize
from citeline.web import Limits, ServedIndex

__all__ = [
    "MAX_SPAN_CHARS",
    "allowed_roots",
    "build_server",
    "citation",
    "http_app",
    "output_schema",
    "parse_uri",
    "render_search",
    "run_stdio",
    "uri_of",
]

#: The longest span of text a tool or resource returns at once (a bigger document is read in pages).
MAX_SPAN_CHARS = 20_000
DEFAULT_SPAN_CHARS = 4_000
#: Characters of context around a cited passage that ``get_passage`` adds by default on each side.
DEFAULT_CONTEXT_CHARS = 500
#: A search hit's quote: its best highlighted sentences (or the passage) cut to this many characters.
QUOTE_CHARS = 300
#: Documents (or resources) in one page of ``list_documents`` (or ``resources/list``).
MAX_LIST = 100
DEFAULT_LIST = 20
#: The errors of an ingest run its summary lists (``citeline runs`` shows them all).
MAX_RUN_ERRORS = 20
SCHEME = "citeline://"
_RANGE = re.compile(r"^(?P<doc>[^/]+)/chars/(?P<start>\d+)-(?P<end>\d+)$")

T = TypeVar("T")
_LOG = logging.getLogger(__name__)


# ---------------------------------------------------------------- arguments (input schemas)


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _filters_model(limits: Limits) -> type[BaseModel]:
    """The filters of ``search`` and ``list_documents``: :class:`citeline.store.filters.FilterOptions`' fields (the
    HTTP API's filter parameters, same names), as bounded."""
    values: Any = list[Annotated[str, Field(max_length=limits.query_chars)]] | None
    fields: dict[str, Any] = {}
    for spec in offered(FilterOptions):
        meta = spec.metadata
        if isinstance(spec.default, tuple):
            fields[spec.name] = values, Field(None, max_length=limits.filter_values, description=meta["help"])
        else:
            fields[spec.name] = str | None, Field(None, max_length=meta["maximum"], description=meta["help"])
    return create_model(
        "Filters",
        __base__=_Arguments,
        __doc__="Only the documents these select (several keys AND; several values of one key OR).",
        **fields,
    )


def search_arguments(limits: Limits, filters: type[BaseModel]) -> type[BaseModel]:
    """The ``search`` tool's arguments, from the declared fields of :class:`~citeline.query.plan.SearchRequest`
    (their type, default, bounds and choices: ``citeline.util.declared``), kept within the server's ``limits``; the
    query's text is named ``query``."""
    hints = get_type_hints(SearchRequest)
    fields: dict[str, Any] = {}
    for spec in offered(SearchRequest):
        meta = spec.metadata
        name = "query" if spec.name == "text" else spec.name
        annotation: Any = hints[spec.name]
        bounds: dict[str, Any] = {}
        if spec.name == "text":
            bounds = {"min_length": 1, "max_length": limits.query_chars}
        if meta.get("minimum") is not None:
            bounds["ge"] = meta["minimum"]
        if meta.get("maximum") is not None:
            served = {"k": limits.k, "offset": limits.offset}  # the server's own bounds, never looser
            bounds["le"] = min(meta["maximum"], served.get(spec.name, meta["maximum"]))
        if "choices" in meta:
            annotation = Literal[tuple(meta["choices"])]
        default = ... if spec.default is dataclasses.MISSING else spec.default
        if spec.name == "filters":
            annotation, default = filters | None, None
        fields[name] = (annotation, Field(default, description=meta["help"], **bounds))
    return create_model("SearchArguments", __base__=_Arguments, **fields)


class _Passage(BaseModel):
    """``get_passage``: the characters ``char_start`` to ``char_end`` of a document's text with context."""

    model_config = ConfigDict(extra="forbid")
    doc_id: str = Field(min_length=1, max_length=200, description="The document's id (a search result's doc_id).")
    char_start: int = Field(ge=0, description="Start offset into the document's text (a search result's).")
    char_end: int = Field(ge=0, description="End offset into the document's text (exclusive).")
    context: int = Field(
        DEFAULT_CONTEXT_CHARS, ge=0, le=MAX_SPAN_CHARS, description="Characters of context on each side."
    )


class _Document(BaseModel):
    """``get_document``: a document's text a page at a time."""

    model_config = ConfigDict(extra="forbid")
    doc_id: str = Field(min_length=1, max_length=200, description="The document's id (a search result's doc_id).")
    offset: int = Field(0, ge=0, description="First character to return (the previous answer's next_offset).")
    max_chars: int = Field(DEFAULT_SPAN_CHARS, ge=1, le=MAX_SPAN_CHARS, description="At most this many characters.")


class _NoArguments(_Arguments):
    pass


# ---------------------------------------------------------------- answers (output schemas)


class HighlightOut(BaseModel):
    """A sentence of the passage that answers the query."""

    text: str
    char_start: int = Field(description="Offset into the document's text.")
    char_end: int = Field(description="End offset into the document's text (exclusive).")
    page: int | None = Field(description="The page the sentence begins on (a PDF's; null without pages).")


class MorePassage(BaseModel):
    """Another passage of the same document (a grouped search's), best first."""

    uri: str
    char_start: int
    char_end: int
    page: int | None
    first_page: int | None
    last_page: int | None
    quote: str
    score: float


class AlsoIn(BaseModel):
    """Another document that holds the same passage (collapsed into this result)."""

    doc_id: str
    source: str
    char_start: int
    char_end: int
    uri: str


class Citation(BaseModel):
    """One passage and where it is: ``uri`` opens it (a ``citeline://DOC_ID/chars/START-END`` resource)."""

    rank: int
    uri: str
    doc_id: str
    source: str = Field(description="The source file's path (or the document's URL when its metadata has one).")
    source_id: str = Field(description="The source relative to its ingested root (file#record for a record).")
    record_id: str | None = Field(description="The record's id when the document is one record of a JSONL/CSV file.")
    title: str
    page: int | None = Field(
        description="The page to cite (a PDF's; null without pages): where the first highlighted sentence begins."
    )
    first_page: int | None = Field(description="The passage's first page (a PDF's; null without pages).")
    last_page: int | None = Field(description="The passage's last page (a PDF's; null without pages).")
    char_start: int = Field(
        description="Start of the passage: an offset into the document's text (a record's own text, not its file)."
    )
    char_end: int = Field(description="End of the passage (exclusive): an offset into the document's text.")
    quote: str = Field(description=f"The best highlighted sentences, at most {QUOTE_CHARS} characters.")
    highlights: list[HighlightOut]
    score: float = Field(description="Orders this answer's passages only: its scale depends on the mode; can be < 0.")
    relevance: float | None = Field(
        description="The passage's relevance, 0-1, comparable across queries (null: the model is not calibrated)."
    )
    also_in: list[AlsoIn]
    more_passages: list[MorePassage] = Field(
        description="The document's other passages that answered, best first (a search with group on; else empty)."
    )


class SearchOut(BaseModel):
    """The passages most relevant to the query, best first, each with its citation."""

    query: str
    mode: str
    generation: int = Field(description="The committed generation of the index the answer was read from.")
    results: list[Citation]


class SpanOut(BaseModel):
    """A span of a document's text: ``text == document_text[char_start:char_end]``."""

    doc_id: str
    uri: str
    title: str
    source: str
    length: int = Field(description="The document's text length in characters.")
    char_start: int
    char_end: int
    text: str
    next_offset: int | None = Field(description="Where the next page starts (get_document), None at the end.")


class DocumentOut(BaseModel):
    """One indexed document."""

    doc_id: str
    uri: str
    source: str
    source_id: str
    title: str
    format: str
    chunks: int
    pages: int | None
    ingested_at: str | None


class DocumentsOut(BaseModel):
    """A page of the documents the filters select."""

    documents: list[DocumentOut]
    next_offset: int | None = Field(description="Pass as offset for the next page; None at the end.")


# ---------------------------------------------------------------- the tools


class ToolError(Exception):
    """A tool's one-line error (``isError``)."""


@dataclasses.dataclass(frozen=True)
class _Tool:
    name: str
    description: str
    arguments: type[BaseModel]
    output: type[BaseModel] | None
    call: Callable[[Any], Awaitable[tuple[dict[str, Any], str]]]
    read_only: bool = True

    def declaration(self) -> types.Tool:
        schema = self.arguments.model_json_schema()
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=schema,
            output_schema=output_schema(self.output) if self.output else None,
            annotations=types.ToolAnnotations(read_only_hint=self.read_only, open_world_hint=False),
        )


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema in the form a client validates fastest, the same constraints: nested models inlined
    (no ``$ref`` to resolve) and ``anyOf`` of plain types as a type list (``X | None``). The SDK's client checks
    every structured answer against it, faster against this form than against pydantic's schema
    (docs/performance.md#mcp-over-stdio-what-the-protocol-adds)."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def simplified(node: Any) -> Any:
        if isinstance(node, list):
            return [simplified(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return simplified(definitions[node["$ref"].rsplit("/", 1)[-1]])
        out = {key: simplified(value) for key, value in node.items()}
        alternatives = out.get("anyOf")
        if alternatives and all(set(item) == {"type"} and isinstance(item["type"], str) for item in alternatives):
            del out["anyOf"]
            out["type"] = [item["type"] for item in alternatives]
        return out

    return dict(simplified(schema))


def uri_of(doc_id: str, start: int | None = None, end: int | None = None) -> str:
    """A document's resource URI, or a range's (``citeline://DOC_ID/chars/START-END``)."""
    return f"{SCHEME}{doc_id}" if start is None else f"{SCHEME}{doc_id}/chars/{start}-{end}"


def parse_uri(uri: str) -> tuple[str, tuple[int, int] | None]:
    """The document id and the character range (or None) of a ``citeline://`` URI; ValueError if it is not one."""
    if not uri.startswith(SCHEME) or len(uri) == len(SCHEME):
        raise ValueError(f"not a citeline resource: {uri[:80]!r} (expected citeline://DOC_ID[/chars/START-END])")
    rest = uri[len(SCHEME) :]
    match = _RANGE.match(rest)
    if match:
        return match["doc"], (int(match["start"]), int(match["end"]))
    if "/" in rest:
        raise ValueError(f"not a citeline resource: {uri[:80]!r} (expected citeline://DOC_ID[/chars/START-END])")
    return rest, None


def _source(metadata: dict[str, Any], source_path: str) -> str:
    url = metadata.get("url") if isinstance(metadata, dict) else None
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else source_path


def _quote(result: SearchResult | Passage) -> str:
    best = sorted(result.highlights, key=lambda h: h.char_start)
    text = " … ".join(h.text.strip() for h in best) if best else result.text.strip()
    text = " ".join(text.split())
    return text if len(text) <= QUOTE_CHARS else text[: QUOTE_CHARS - 1].rstrip() + "…"


def citation(rank: int, result: SearchResult) -> dict[str, Any]:
    """A search result as the ``search`` tool cites it."""
    also = [
        {
            "doc_id": s.doc_id,
            "source": s.source_path,
            "char_start": s.char_start,
            "char_end": s.char_end,
            "uri": uri_of(s.doc_id, s.char_start, s.char_end),
            "same_work": result.work_id is not None and s.work_id == result.work_id,  # a copy (query/works.py)
        }
        for s in result.sources
        if (s.doc_id, s.char_start) != (result.doc_id, result.char_start)
    ]
    return {
        "rank": rank,
        "uri": uri_of(result.doc_id, result.char_start, result.char_end),
        "doc_id": result.doc_id,
        "source": _source(result.metadata, result.source_path),
        "source_id": result.source_id,
        "record_id": result.record_id,
        "title": result.title,
        "page": result.page,
        "first_page": result.first_page,
        "last_page": result.last_page,
        "char_start": result.char_start,
        "char_end": result.char_end,
        "quote": _quote(result),
        "highlights": [
            {"text": h.text, "char_start": h.char_start, "char_end": h.char_end, "page": h.page}
            for h in result.highlights
        ],
        "score": float(result.score),
        "relevance": None if result.relevance is None else float(result.relevance),
        "work_id": result.work_id,
        "also_in": also,
        "more_passages": [
            {
                "uri": uri_of(result.doc_id, p.char_start, p.char_end),
                "char_start": p.char_start,
                "char_end": p.char_end,
                "page": p.page,
                "first_page": p.first_page,
                "last_page": p.last_page,
                "quote": _quote(p),
                "score": float(p.score),
            }
            for p in result.more_passages
        ],
    }


def _pages(hit: dict[str, Any]) -> str:
    """ ", p. 2" (", p. 2, passage pp. 1-2" across pages) after a citation's source; nothing without pages."""
    page, first, last = hit["page"], hit.get("first_page"), hit.get("last_page")
    if not page:
        return ""
    return f", p. {page}" + (f", passage pp. {first}-{last}" if first and last and first != last else "")


def render_search(answer: dict[str, Any]) -> str:
    """A search answer as text an LLM reads well: each passage's quote under its citation."""
    if not answer["results"]:
        return f"No passage matches {answer['query']!r}."
    lines = [f"{len(answer['results'])} passages for {answer['query']!r} (index generation {answer['generation']}):"]
    for hit in answer["results"]:
        where = hit["source"] + _pages(hit)
        lines.append(f"\n[{hit['rank']}] {hit['title'] or hit['source_id']} — {where}")
        lines.append(
            f"    doc {hit['doc_id']}, characters {hit['char_start']}-{hit['char_end']} of its text; {hit['uri']}"
        )
        lines.append(f"    > {hit['quote']}")
        for other in hit["also_in"]:
            lines.append(f"    also in {other['source']} ({other['uri']})")
    return "\n".join(lines)


def _render_span(span: dict[str, Any]) -> str:
    more = f"\n[more: offset {span['next_offset']}]" if span["next_offset"] is not None else ""
    head = f"{span['title'] or span['doc_id']} — {span['source']}, characters {span['char_start']}-{span['char_end']}"
    return f"{head} of {span['length']} ({span['uri']}):\n\n{span['text']}{more}"


def _render_documents(answer: dict[str, Any]) -> str:
    lines = [f"{d['doc_id']}  {d['source']}  {d['title']!r}  ({d['chunks']} chunks)" for d in answer["documents"]]
    if answer["next_offset"] is not None:
        lines.append(f"[more: offset {answer['next_offset']}]")
    return "\n".join(lines) or "No documents."


def _span(detail: Any, start: int, end: int, next_offset: int | None) -> dict[str, Any]:
    return {
        "doc_id": detail.doc_id,
        "uri": uri_of(detail.doc_id, start, end),
        "title": detail.title,
        "source": _source(detail.metadata, detail.source_path),
        "length": len(detail.text),
        "char_start": start,
        "char_end": end,
        "text": detail.text[start:end],
        "next_offset": next_offset,
    }


def allowed_roots(roots: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The roots ``--allow-ingest`` names, resolved; a missing one is a :class:`SettingsError` at startup."""
    from citeline.errors import SettingsError

    resolved = []
    for root in roots:
        try:
            path = paths.resolved(root)
        except paths.UnresolvablePath as exc:
            raise SettingsError(f"--allow-ingest {root}: cannot be resolved: {exc}") from None
        if not path.exists():
            raise SettingsError(f"--allow-ingest {root}: no such file or folder")
        resolved.append(path)
    return resolved


def _tools(reader: ServedIndex, limits: Limits, roots: Sequence[Path]) -> list[_Tool]:
    filters_model = _filters_model(limits)
    search_model = search_arguments(limits, filters_model)

    def filters_of(value: BaseModel | None) -> dict[str, Any]:
        return filters_from(**value.model_dump()) if value is not None else {}

    async def search(args: Any) -> tuple[dict[str, Any], str]:
        filters = filters_of(args.filters)
        options = args.model_dump(exclude={"query", "filters"})  # every declared field: search_arguments' names
        request = SearchRequest.of(args.query, filters=filters, **options)
        found, generation = await reader.run(reader.search, request)
        answer = {
            "query": args.query,
            "mode": args.mode,
            "generation": generation,
            "results": [citation(rank, hit) for rank, hit in enumerate(found, request.offset + 1)],
        }
        return answer, render_search(answer)

    async def passage(args: Any) -> tuple[dict[str, Any], str]:
        if args.char_end < args.char_start:  # before reading the document: a request that cannot be answered
            raise ToolError(f"char_end ({args.char_end}) is before char_start ({args.char_start})")
        detail = await reader.run(lambda deadline: reader.index.document(args.doc_id))
        start, end = detail.excerpt(args.char_start, args.char_end, context=args.context, limit=MAX_SPAN_CHARS)
        span = _span(detail, start, end, None)
        return span, _render_span(span)

    async def document(args: Any) -> tuple[dict[str, Any], str]:
        detail = await reader.run(lambda deadline: reader.index.document(args.doc_id))
        start = min(args.offset, len(detail.text))
        end = min(len(detail.text), start + args.max_chars)
        span = _span(detail, start, end, end if end < len(detail.text) else None)
        return span, _render_span(span)

    async def documents(args: Any) -> tuple[dict[str, Any], str]:
        filters = filters_of(args.filters)
        rows = await reader.run(lambda deadline: reader.index.documents(filters, args.limit + 1, args.offset))
        listed = [
            {
                "doc_id": row.doc_id,
                "uri": uri_of(row.doc_id),
                "source": _source(row.metadata, row.source_path),
                "source_id": row.source_id,
                "title": row.title,
                "format": row.format,
                "chunks": row.chunks,
                "pages": row.pages,
                "ingested_at": normalize(row.ingested_at, "ingested_at"),
            }
            for row in rows[: args.limit]
        ]
        answer = {"documents": listed, "next_offset": args.offset + args.limit if len(rows) > args.limit else None}
        return answer, _render_documents(answer)

    async def status(args: Any) -> tuple[dict[str, Any], str]:
        answer = await reader.run(lambda deadline: dict(normalize(reader.index.status().to_dict())))
        return answer, json.dumps(answer, indent=1, default=str)

    # Any: a union built at run time is a type form mypy cannot see through (pydantic >= 2.14 types create_model's
    # fields as TypeForm)
    optional_filters: Any = filters_model | None
    list_model = create_model(
        "ListDocumentsArguments",
        __base__=_Arguments,
        filters=(optional_filters, Field(None, description="Only the documents these select.")),
        limit=(int, Field(DEFAULT_LIST, ge=1, le=MAX_LIST, description="At most this many documents.")),
        offset=(int, Field(0, ge=0, le=2**62, description="Skip this many (the previous page's next_offset).")),
    )
    tools = [
        _Tool(
            "search",
            "Search the index: the passages most relevant to a query, best first, each with its citation (source "
            "path or URL, record id, document id, character offsets into the document's text, the highlighted "
            "sentences and a short quote). Open a citation's uri (or call get_passage) to read around it.",
            search_model,
            SearchOut,
            search,
        ),
        _Tool(
            "get_passage",
            "The text around a cited passage: characters char_start to char_end of a document's text (a search "
            f"result's offsets) with context on each side, at most {MAX_SPAN_CHARS} characters.",
            _Passage,
            SpanOut,
            passage,
        ),
        _Tool(
            "get_document",
            f"A document's text, a page of at most max_chars characters (up to {MAX_SPAN_CHARS}) from offset; "
            "next_offset continues it.",
            _Document,
            SpanOut,
            document,
        ),
        _Tool(
            "list_documents",
            "The indexed documents the filters select (id, source, title, format, chunks), a page at a time.",
            list_model,
            DocumentsOut,
            documents,
        ),
        _Tool(
            "index_status",
            "The index: documents, chunks, model, generation and its last ingestion run.",
            _NoArguments,
            None,
            status,
        ),
    ]
    if roots:
        tools.append(_ingest_tool(reader, roots))
    return tools


def _ingest_tool(reader: ServedIndex, roots: Sequence[Path]) -> _Tool:
    names = [str(root) for root in roots]
    listed = "; ".join(f"{n}: {name}" for n, name in enumerate(names))
    root_type: Any = Literal[tuple([*names, *range(len(names))])]
    arguments = create_model(
        "IngestArguments",
        __base__=_Arguments,
        root=(root_type, Field(description=f"Which configured root to ingest, by its path or its number ({listed}).")),
    )

    async def ingest(args: Any) -> tuple[dict[str, Any], str]:
        root = roots[args.root] if isinstance(args.root, int) else Path(args.root)

        def run() -> dict[str, Any]:
            # A writer of its own (the server's index object only reads); the index's writer lock orders it with
            # any other writer, and the reader's snapshot picks the commits up at its next search.
            access.CALLER.get().require("ingest")
            writer = Index.open(reader.index.path, embedder=reader.index.embedder)
            summary = dict(normalize(writer.ingest([root]).to_dict()))
            errors = summary.get("errors") or []
            if len(errors) > MAX_RUN_ERRORS:  # bounded: the first ones, and how many there were
                summary["errors"] = errors[:MAX_RUN_ERRORS]
                summary["errors_not_shown"] = len(errors) - MAX_RUN_ERRORS
            return summary

        summary = await anyio.to_thread.run_sync(run)
        return summary, json.dumps(summary, indent=1, default=str)

    return _Tool(
        "ingest",
        f"Bring the index up to date with one of the configured roots ({listed}): new and changed files are "
        "indexed, vanished ones removed. Returns the run's summary.",
        arguments,
        None,
        ingest,
        read_only=False,
    )


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        problem = exc.errors()[0]
        name = ".".join(str(part) for part in problem["loc"]) or "arguments"
        if problem["type"] == "missing":
            return f"Missing argument {name!r}"
        shown = repr(problem.get("input"))
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return f"Invalid value for {name!r}: {problem['msg']} (got {shown})"
    if isinstance(exc, CitelineError | ToolError | ValueError):
        return " ".join(str(exc).split())
    return f"internal error ({type(exc).__name__})"


def build_server(reader: ServedIndex, limits: Limits, *, ingest_roots: Sequence[Path] = ()) -> Server[Any]:
    """The MCP server over ``reader`` (the tools and resources of the module docstring); the filter arguments (the
    HTTP API's names) become ``Index.search``'s filters by :func:`citeline.store.filters.filters_from`.
    ``ingest_roots``: the roots the ``ingest`` tool may ingest (none: no ``ingest`` tool). ``reader`` is the server's
    :class:`citeline.server.IndexService` (its index, the one search slot, and ``run``, work on a thread within the
    timeout)."""
    tools = {tool.name: tool for tool in _tools(reader, limits, ingest_roots)}
    declarations = [tool.declaration() for tool in tools.values()]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=declarations)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        tool = tools.get(params.name)
        try:
            if tool is None:
                raise ToolError(f"unknown tool {params.name!r}; the tools are {', '.join(tools)}")
            args = tool.arguments.model_validate(params.arguments or {})
            with access.acting(ctx.request):  # the HTTP request's caller (its token's scope); stdio: the owner
                structured, text = await tool.call(args)
        except Exception as exc:  # every failure is the tool's one-line error; the server goes on
            if not isinstance(exc, ValidationError | CitelineError | ToolError | ValueError):
                _LOG.exception("tool %s failed", params.name)  # a bug: the traceback goes to stderr, not the model
            return types.CallToolResult(content=[types.TextContent(type="text", text=_one_line(exc))], is_error=True)
        # The wire form itself, a dict (a handler result the SDK takes: mcp.server.context.HandlerResult), which
        # the SDK validates against CallToolResult once on the way out: a CallToolResult built here would be
        # validated, then dumped back to this dict first (docs/performance.md#mcp-over-stdio-what-the-protocol-adds).
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured}

    def resource_errors(handler: Callable[[Any, Any], Awaitable[T]]) -> Callable[[Any, Any], Awaitable[T]]:
        # A resource that cannot be read is the protocol's error with the one line (not the SDK's logged traceback).
        async def answer(ctx: Any, params: Any) -> T:
            try:
                with access.acting(ctx.request):
                    return await handler(ctx, params)
            except (CitelineError, ValueError) as exc:
                raise MCPError(types.INVALID_PARAMS, _one_line(exc)) from None

        return answer

    @resource_errors
    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        cursor = (params.cursor if params is not None else None) or "0"
        if not cursor.isdigit() or len(cursor) > 18:
            raise ValueError(f"invalid cursor {cursor[:40]!r}")
        offset = int(cursor)
        rows = await reader.run(lambda deadline: reader.index.documents(None, MAX_LIST + 1, offset))
        resources = [
            types.Resource(
                uri=uri_of(row.doc_id),
                name=row.source_id,
                title=row.title or None,
                description=f"{row.source_path} ({row.format}, {row.chunks} chunks)",
                mime_type="text/plain",
            )
            for row in rows[:MAX_LIST]
        ]
        following = str(offset + MAX_LIST) if len(rows) > MAX_LIST else None
        return types.ListResourcesResult(resources=resources, next_cursor=following)

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            name="passage",
            uri_template=SCHEME + "{doc_id}/chars/{start}-{end}",
            description="Characters start to end of a document's text (a search result's offsets).",
            mime_type="text/plain",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    @resource_errors
    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        doc_id, span = parse_uri(uri)
        detail = await reader.run(lambda deadline: reader.index.document(doc_id))
        start, end = span if span is not None else (0, len(detail.text))
        if end < start or start > len(detail.text):
            raise ValueError(f"{uri}: the range is not within the document's {len(detail.text)} characters")
        if end - start > MAX_SPAN_CHARS:
            raise ValueError(
                f"{uri}: {end - start} characters is more than {MAX_SPAN_CHARS}; read it in ranges "
                f"({uri_of(doc_id, start, start + MAX_SPAN_CHARS)}) or with get_document"
            )
        text = detail.text[start:end]
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)]
        )

    from citeline import __version__

    return Server(
        "citeline",
        version=__version__,
        instructions="Search this citeline index with `search`; cite each passage by its source and offsets, and "
        "open its uri (or call get_passage) to read around it.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


async def run_stdio(server: Server[Any], *, drain: float = 30.0) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes them (``citeline mcp``).

    The SDK's ``stdio_server`` speaks the protocol; the event loop itself reads the requests (:func:`_stdin_pipe`)
    and writes the answers (:func:`_stdout_pipe`), where the SDK's default files read each line, and write then
    flush each answer, on worker threads: three thread hand-offs a call
    (docs/performance.md#mcp-over-stdio-what-the-protocol-adds).

    When stdin ends, the requests already read are answered before the server stops (for up to ``drain`` seconds;
    the SDK answers what is left "Connection closed"): left to itself the SDK cancels them at once, and an answer
    cancelled while being written is never sent, so ``citeline mcp < requests > answers`` lost answers. When the
    client closes our stdout (or dies), the server stops at once and quietly: there is nobody left to answer."""
    from mcp.server.stdio import stdio_server

    unanswered = _Unanswered(drain)
    try:
        async with (
            _stdin_pipe() as stdin,
            _stdout_pipe() as stdout,
            stdio_server(stdin=unanswered.lines(stdin), stdout=stdout) as (read_stream, write_stream),  # type: ignore[arg-type]
        ):
            await server.run(
                unanswered.reading(read_stream),
                unanswered.writing(write_stream),
                server.create_initialization_options(),
            )
    except* (BrokenPipeError, ConnectionResetError):
        # The client went away (closed our stdout, or died): nobody is left to answer; stop quietly, as on EOF.
        _LOG.debug("citeline mcp: the client closed its end of the pipe; stopping")


def _id_in_notification(item: Any, line: str | None) -> bool:
    """Whether ``item`` is a notification (no id, as the SDK read it) whose ``line`` has an ``id`` nonetheless, one
    JSON-RPC does not allow (null, an object, a list, a boolean): an invalid request, not a notification."""
    if not (isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCNotification)):
        return False
    if line is None or '"id"' not in line:  # a cheap test first: most notifications have no such key at all
        return False
    with contextlib.suppress(ValueError, RecursionError):
        message = json.loads(line)
        return isinstance(message, dict) and "id" in message
    return False


def _problem(problem: Exception, message: Any) -> tuple[int, str]:
    """The JSON-RPC error code and one-line message for JSON (``message``) the SDK refused with ``problem``."""
    first = problem.errors()[0] if isinstance(problem, ValidationError) and problem.errors() else None
    if first is not None and first["type"] == "json_invalid":
        return types.PARSE_ERROR, f"Parse error: {first['msg']}"
    if not isinstance(message, dict):
        return types.INVALID_REQUEST, f"Invalid Request: a JSON-RPC message is an object, not {type(message).__name__}"
    if first is None:
        return types.INVALID_REQUEST, f"Invalid Request: {problem}"
    where = ".".join(str(part) for part in first["loc"][1:]) or "message"
    return types.INVALID_REQUEST, f"Invalid Request: {where}: {first['msg']}"


class _Unanswered:
    """The ids of the requests read and not yet answered, between the SDK's stdio streams and its server loop: the
    read stream ends (the server's cue to stop) only once none is left, or ``drain`` seconds after stdin ended."""

    def __init__(self, drain: float) -> None:
        self.drain = drain
        self.ids: set[Any] = set()
        self._settled = anyio.Event()
        self._answers: Any = None  # the SDK's write stream, for the answers to lines it could not parse
        self._read: collections.deque[str | None] = collections.deque()  # lines read, their verdicts not yet seen

    async def lines(self, source: AsyncIterator[str | None]) -> AsyncIterator[str]:
        """``source``'s lines as the SDK reads them, each kept until the SDK's verdict on it comes out of the read
        stream (:meth:`verdict`): the SDK answers one item a line, a message or the exception its parser raised,
        and never says which line an exception came from. An over-long line (None) reaches the SDK empty."""
        async for line in source:
            self._read.append(line)
            yield "" if line is None else line

    def verdict(self) -> str | None:
        """The line whose item the read stream gives now (None: an over-long line)."""
        return self._read.popleft() if self._read else ""

    async def refuse(self, problem: Exception, line: str | None) -> None:
        """Answer ``line``, which the SDK could not read as a JSON-RPC message (``problem``), as JSON-RPC asks: a
        parse error (-32700) for a line that is not JSON, or not JSON the SDK reads (a lone surrogate escape,
        ``"\\udcff"``, which Python's ``json.dumps`` writes for a file name that is not UTF-8; nesting deeper than
        its parser goes), an invalid request (-32600) for JSON that is not a message (not an object, no method, a
        bad field; a line longer than :data:`MAX_REQUEST_BYTES`); for the request's id when the line has one, else
        for id null. A notification (a method, no id) is not answered, even a bad one. Left to the SDK, such a line
        was only logged, and the client waited for an answer that never came."""
        code, request_id = types.INVALID_REQUEST, None
        if line is None:
            text = f"Invalid Request: a line longer than {MAX_REQUEST_BYTES} bytes (skipped)"
        else:
            try:
                message = json.loads(line)
            except RecursionError:
                message, code, text = None, types.PARSE_ERROR, "Parse error: nested too deeply"
            except ValueError as exc:
                message, code, text = None, types.PARSE_ERROR, f"Parse error: {exc}"
            else:
                if isinstance(message, dict) and isinstance(message.get("method"), str) and "id" not in message:
                    return  # a notification: nothing to answer
                request_id = message.get("id") if isinstance(message, dict) else None
                if isinstance(request_id, bool) or not isinstance(request_id, int | str):
                    request_id = None
                code, text = _problem(problem, message)
        error = types.ErrorData(code=code, message=" ".join(text.split())[:500])
        await self._answers.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))

    def settle(self, request_id: Any) -> None:
        """``request_id`` is answered (or cancelled by the client, which then expects no answer)."""
        self.ids.discard(request_id)
        if not self.ids:
            self._settled.set()

    async def wait(self) -> None:
        """Until every request read is answered, for at most ``drain`` seconds."""
        with anyio.move_on_after(self.drain):
            while self.ids:
                self._settled = anyio.Event()  # one set while ids were empty earlier would not wait
                await self._settled.wait()

    def reading(self, stream: Any) -> _Reading:
        return _Reading(stream, self)

    def writing(self, stream: Any) -> _Writing:
        self._answers = stream
        return _Writing(stream, self)


class _Wrapped:
    """One of the SDK's memory streams, entered, left and closed as itself."""

    def __init__(self, stream: Any, unanswered: _Unanswered) -> None:
        self.stream = stream
        self.unanswered = unanswered

    async def __aenter__(self) -> Self:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self.stream.__aexit__(*exc))

    async def aclose(self) -> None:
        await self.stream.aclose()


class _Reading(_Wrapped):
    """The read stream: notes each request read, ends only once they are answered (:meth:`_Unanswered.wait`), and
    answers the lines that are not JSON itself (:meth:`_Unanswered.refuse`)."""

    @property
    def last_context(self) -> Any:
        """The context the SDK's stream carried with the last message (the SDK reads it from here)."""
        return self.stream.last_context

    def __aiter__(self) -> Self:
        return self

    async def receive(self) -> Any:
        return await self.__anext__()

    async def __anext__(self) -> Any:
        while True:
            try:
                item = await self.stream.__anext__()
            except StopAsyncIteration:
                await self.unanswered.wait()
                raise
            line = self.unanswered.verdict()
            if isinstance(item, Exception):
                await self.unanswered.refuse(item, line)
            elif _id_in_notification(item, line):  # the SDK takes a bad id for no id: a notification
                await self.unanswered.refuse(ValueError("id: must be a string or a number"), line)
            else:
                break
        message = item.message if isinstance(item, SessionMessage) else None  # else a line that is not JSON-RPC
        if isinstance(message, types.JSONRPCRequest):
            self.unanswered.ids.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self.unanswered.settle((message.params or {}).get("requestId"))  # a cancelled request is not answered
        return item


class _Writing(_Wrapped):
    """The write stream: settles each request as its answer goes out."""

    async def send(self, item: SessionMessage, /) -> None:
        await self.stream.send(item)
        if isinstance(item.message, (types.JSONRPCResponse, types.JSONRPCError)):
            self.unanswered.settle(item.message.id)


class _Writer(asyncio.Protocol):
    """A pipe as ``stdio_server`` writes its ``stdout``: ``write`` hands the bytes to the loop's pipe transport
    (written at once while the pipe takes them, queued when it is full), ``flush`` waits only while the client is
    behind (the transport paused us), and both raise ``BrokenPipeError`` once the client's end is closed."""

    def __init__(self) -> None:
        self.transport: asyncio.WriteTransport | None = None
        self._writable = asyncio.Event()
        self._writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._writable.set()

    async def write(self, text: str) -> None:
        if self.transport is None or self.transport.is_closing():
            raise BrokenPipeError("the client closed stdout")
        self.transport.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writable.wait()
        if self.transport is None or self.transport.is_closing():
            raise BrokenPipeError("the client closed stdout")

    async def drained(self) -> None:
        """Once the client has read what is queued (or closed its end)."""
        while self.transport is not None and not self.transport.is_closing() and self.transport.get_write_buffer_size():
            await asyncio.sleep(0.01)


#: The longest request line ``citeline mcp`` reads from a pipe: the largest request its tools take (a 1,000-character
#: query and 5 filters of 20 values of 1,000 characters, JSON-escaped) is under 1 MiB. A longer line is skipped with
#: a line on stderr rather than held in memory whole, and answered as an invalid request for id null (its id is not
#: read).
MAX_REQUEST_BYTES = 4 * 2**20


class _Lines:
    """stdin as ``stdio_server`` iterates it: its lines, decoded as the SDK's own reader decodes them (UTF-8, bad
    bytes replaced), each at most :data:`MAX_REQUEST_BYTES`."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str | None:
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the end: a last line without its newline, or none
                if not exc.partial:
                    raise StopAsyncIteration from None
                line = exc.partial
            except asyncio.LimitOverrunError as exc:
                await self._skip(exc.consumed)
                _LOG.warning("citeline mcp: skipped a request line longer than %d bytes", MAX_REQUEST_BYTES)
                return None  # answered as an invalid request (_Unanswered.refuse)
            return line.decode("utf-8", errors="replace")

    async def _skip(self, consumed: int) -> None:
        # The rest of an over-long line, a limit's worth at a time: its first ``consumed`` bytes are buffered and
        # hold no newline (a newline right after them ends it).
        while True:
            await self.reader.readexactly(consumed)
            try:
                await self.reader.readuntil(b"\n")
                return
            except asyncio.IncompleteReadError:
                return
            except asyncio.LimitOverrunError as exc:
                consumed = exc.consumed


class _FileLines:
    """stdin as ``stdio_server`` iterates it where the event loop cannot watch it (a regular file, a terminal): its
    lines read on a worker thread, decoded and bounded as :class:`_Lines` does (None for an over-long line)."""

    def __init__(self, file: io.BufferedReader) -> None:
        self.file = file

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str | None:
        line = await anyio.to_thread.run_sync(self._line, abandon_on_cancel=True)
        if line == b"":
            raise StopAsyncIteration
        return None if line is None else line.decode("utf-8", errors="replace")

    def _line(self) -> bytes | None:
        line = self.file.readline(MAX_REQUEST_BYTES + 1)
        if len(line) <= MAX_REQUEST_BYTES or line.endswith(b"\n"):
            return line
        while line and not line.endswith(b"\n"):  # the rest of the over-long line
            line = self.file.readline(MAX_REQUEST_BYTES)
        _LOG.warning("citeline mcp: skipped a request line longer than %d bytes", MAX_REQUEST_BYTES)
        return None


def _is_pipe(fd: int, *, terminal: bool = False) -> bool:
    """Whether ``fd`` is a pipe or a socket (or, with ``terminal``, a character device): what the event loop's pipe
    transports take. Never on Windows, whose loop has none for the standard streams."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return sys.platform != "win32" and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (terminal and stat.S_ISCHR(mode)))


@asynccontextmanager
async def _stdin_pipe() -> AsyncIterator[Any]:
    """stdin as a pipe the event loop reads (no thread), for ``stdio_server``'s ``stdin`` (typed there as
    ``anyio.AsyncFile``, of which it only iterates the lines); its lines read on a worker thread (:class:`_FileLines`)
    where stdin is not a pipe or socket (a regular file, which the loop cannot watch, or a terminal, which it would
    leave non-blocking for the shell) or on Windows. While serving, fd 0 reads the null device, as under the SDK's
    own claim of it, so neither a library nor a child process can take the client's requests; the wire comes back
    on fd 0 at the end."""
    if sys.platform == "win32":
        yield _FileLines(sys.stdin.buffer)  # type: ignore[arg-type]
        return
    null = os.open(os.devnull, os.O_RDONLY)
    if not _is_pipe(0):
        with _claimed(0, "rb", null) as file:
            os.close(null)
            yield _FileLines(io.BufferedReader(file))
        file.close()  # once fd 0 is the wire again
        return
    with _claimed(0, "rb", null) as pipe:
        os.close(null)
        transport: asyncio.BaseTransport | None = None
        try:
            reader = asyncio.StreamReader(limit=MAX_REQUEST_BYTES)
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
            yield _Lines(reader)
        finally:
            _close(transport, pipe)


@asynccontextmanager
async def _stdout_pipe() -> AsyncIterator[Any]:
    """stdout as a pipe the event loop writes (no thread), for ``stdio_server``'s ``stdout`` (typed there as
    ``anyio.AsyncFile``, of which it awaits only ``write`` and ``flush``); None (the SDK's own file) where stdout is
    not a pipe, socket or terminal (a regular file: the loop cannot watch it) or on Windows. While serving, fd 1
    writes to stderr, as the SDK's own claim of it does, so a library's stray ``print`` cannot corrupt the
    protocol; the wire comes back on fd 1 at the end."""
    if not _is_pipe(1, terminal=True):
        yield None
        return
    with _claimed(1, "wb", 2) as pipe:
        transport: asyncio.BaseTransport | None = None
        try:
            transport, writer = await asyncio.get_running_loop().connect_write_pipe(_Writer, pipe)
            yield writer
            with anyio.move_on_after(5):  # what is still queued, for a client that reads it
                await writer.drained()
        finally:
            _close(transport, pipe)


@contextlib.contextmanager
def _claimed(fd: int, mode: str, diversion: int) -> Iterator[Any]:
    """A standard stream's wire as a private file (close-on-exec, above the standard range) while ``fd`` itself
    points at ``diversion``, as the SDK's own claim of stdin and stdout does; at the end the wire is back on
    ``fd``, blocking again (the flag belongs to the pipe end, which the loop's transport made non-blocking)."""
    import fcntl

    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    pipe = os.fdopen(wire, mode, buffering=0)
    os.dup2(diversion, fd)
    try:
        yield pipe
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire, fd)
            os.set_blocking(fd, True)


def _close(transport: asyncio.BaseTransport | None, pipe: Any) -> None:
    if transport is not None:
        transport.close()  # closes the pipe too
    else:
        pipe.close()


class _GoneClients(logging.Filter):
    """The SDK's log of a client that disconnected before its request's body ended, as one line without the
    traceback the SDK logs with it (a client that goes away is not the server's error)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from starlette.requests import ClientDisconnect

        if record.exc_info and isinstance(record.exc_info[1], ClientDisconnect):
            record.msg, record.args = "an MCP client disconnected before its request's body ended", ()
            record.exc_info, record.exc_text, record.levelno, record.levelname = None, None, logging.WARNING, "WARNING"
        return True


def http_app(server: Server[Any]) -> tuple[Any, Callable[[Any], Any]]:
    """The streamable-HTTP endpoint of ``server`` (an ASGI app to route at ``/mcp``) and the lifespan that runs its
    session manager. Stateless JSON answers: each request stands alone, so ``serve --workers N`` may answer a
    client's requests from different processes. The Host and Origin check against DNS rebinding is the server's
    own, on every route (``citeline.server.guard.Guard``), not the SDK's (which knows only loopback names)."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

    sdk_log = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(existing, _GoneClients) for existing in sdk_log.filters):
        sdk_log.addFilter(_GoneClients())
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return StreamableHTTPASGIApp(manager), lifespan
