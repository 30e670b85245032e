"""The MCP tools and resources (:func:`build_server`): each tool's call over the served index, its structured
answer and the text an LLM reads, the ``citeline://`` resources, and the one-line errors."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field, ValidationError, create_model

from citeline.errors import CitelineError, status_of
from citeline.query.plan import SearchRequest
from citeline.query.results import Passage, SearchResult
from citeline.server import access
from citeline.server.answers import Answer, Record, search_answer
from citeline.server.limits import Limits
from citeline.server.mcp.schemas import (
    DEFAULT_LIST,
    MAX_LIST,
    MAX_RUN_ERRORS,
    MAX_SPAN_CHARS,
    QUOTE_CHARS,
    Arguments,
    DocumentArguments,
    DocumentsOut,
    NoArguments,
    PassageArguments,
    SearchOut,
    SpanOut,
    filters_model,
    output_schema,
    search_arguments,
)
from citeline.server.service import ServedIndex
from citeline.store.filters import filters_from
from citeline.util import paths
from citeline.util.output import normalize

__all__ = [
    "SCHEME",
    "ToolError",
    "allowed_roots",
    "build_server",
    "citation",
    "mcp_answer",
    "parse_uri",
    "render_search",
    "uri_of",
]

SCHEME = "citeline://"
_RANGE = re.compile(r"^(?P<doc>[^/]+)/chars/(?P<start>\d+)-(?P<end>\d+)$")

T = TypeVar("T")
_LOG = logging.getLogger(__name__)


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


def mcp_answer(answer: Answer) -> dict[str, Any]:
    """A search's answer as the ``search`` tool gives it (``SearchOut``): each record cited (:func:`citation`)."""
    request = answer.request
    results = [citation(record) for record in answer.records]
    return {"query": answer.query, "mode": request.mode, "generation": answer.generation, "results": results}


def citation(record: Record) -> dict[str, Any]:
    """A search answer's record as the ``search`` tool cites it."""
    result = record.result
    also = [
        {
            "doc_id": other.source.doc_id,
            "source": other.source.source_path,
            "char_start": other.source.char_start,
            "char_end": other.source.char_end,
            "uri": uri_of(other.source.doc_id, other.source.char_start, other.source.char_end),
            "same_work": other.same_work,  # a copy (query/works.py)
        }
        for other in record.also_in
    ]
    return {
        "rank": record.rank,
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


def _tools(service: ServedIndex, limits: Limits, roots: Sequence[Path]) -> list[_Tool]:
    filters_arguments = filters_model(limits)
    search_model = search_arguments(limits, filters_arguments)

    def filters_of(value: BaseModel | None) -> dict[str, Any]:
        return filters_from(**value.model_dump()) if value is not None else {}

    async def search(args: Any) -> tuple[dict[str, Any], str]:
        filters = filters_of(args.filters)
        options = args.model_dump(exclude={"query", "filters"})  # every declared field: search_arguments' names
        request = SearchRequest.of(args.query, filters=filters, **options)
        answer = mcp_answer(await search_answer(service, args.query, request))
        return answer, render_search(answer)

    async def passage(args: Any) -> tuple[dict[str, Any], str]:
        if args.char_end < args.char_start:  # before reading the document: a request that cannot be answered
            raise ToolError(f"char_end ({args.char_end}) is before char_start ({args.char_start})")
        detail = await service.run(service.document, args.doc_id)
        start, end = detail.excerpt(args.char_start, args.char_end, context=args.context, limit=MAX_SPAN_CHARS)
        span = _span(detail, start, end, None)
        return span, _render_span(span)

    async def document(args: Any) -> tuple[dict[str, Any], str]:
        detail = await service.run(service.document, args.doc_id)
        start = min(args.offset, len(detail.text))
        end = min(len(detail.text), start + args.max_chars)
        span = _span(detail, start, end, end if end < len(detail.text) else None)
        return span, _render_span(span)

    async def documents(args: Any) -> tuple[dict[str, Any], str]:
        filters = filters_of(args.filters)
        rows = await service.run(service.documents, filters, args.limit + 1, args.offset)
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
        answer = dict(normalize((await service.run(service.status)).to_dict()))
        return answer, json.dumps(answer, indent=1, default=str)

    # Any: a union built at run time is a type form mypy cannot see through (pydantic >= 2.14 types create_model's
    # fields as TypeForm)
    optional_filters: Any = filters_arguments | None
    list_model = create_model(
        "ListDocumentsArguments",
        __base__=Arguments,
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
            PassageArguments,
            SpanOut,
            passage,
        ),
        _Tool(
            "get_document",
            f"A document's text, a page of at most max_chars characters (up to {MAX_SPAN_CHARS}) from offset; "
            "next_offset continues it.",
            DocumentArguments,
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
            NoArguments,
            None,
            status,
        ),
    ]
    if roots:
        tools.append(_ingest_tool(service, roots))
    return tools


def _ingest_tool(service: ServedIndex, roots: Sequence[Path]) -> _Tool:
    names = [str(root) for root in roots]
    listed = "; ".join(f"{n}: {name}" for n, name in enumerate(names))
    root_type: Any = Literal[tuple([*names, *range(len(names))])]
    arguments = create_model(
        "IngestArguments",
        __base__=Arguments,
        root=(root_type, Field(description=f"Which configured root to ingest, by its path or its number ({listed}).")),
    )

    async def ingest(args: Any) -> tuple[dict[str, Any], str]:
        root = roots[args.root] if isinstance(args.root, int) else Path(args.root)

        def run() -> dict[str, Any]:
            summary = dict(normalize(service.ingest(root).to_dict()))  # a writer of its own (ServedIndex.ingest)
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


def rpc_code_of(exc: BaseException) -> int:
    """The JSON-RPC error code of a resource read that failed with ``exc``, from its HTTP status (``status_of``):
    a request the caller can correct (4xx but 409) is ``INVALID_PARAMS``, which the protocol (SEP-2164) names for a
    resource that does not exist too; a request past the server's timeout (503) is ``REQUEST_TIMEOUT``, worth
    asking again; an index a writer held too long (409) or a failure of the server's (5xx) is ``INTERNAL_ERROR``."""
    status = status_of(exc)
    if status == 503:
        return types.REQUEST_TIMEOUT
    return types.INVALID_PARAMS if 400 <= status < 500 and status != 409 else types.INTERNAL_ERROR


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


def build_server(service: ServedIndex, limits: Limits, *, ingest_roots: Sequence[Path] = ()) -> Server[Any]:
    """The MCP server over ``service`` (the tools and resources of the module docstring); the filter arguments (the
    HTTP API's names) become ``Index.search``'s filters by :func:`citeline.store.filters.filters_from`.
    ``ingest_roots``: the roots the ``ingest`` tool may ingest (none: no ``ingest`` tool). ``service`` is the server's
    :class:`citeline.server.IndexService` (its index, the one search slot, and ``run``, work on a thread within the
    timeout)."""
    tools = {tool.name: tool for tool in _tools(service, limits, ingest_roots)}
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
                raise MCPError(rpc_code_of(exc), _one_line(exc)) from None

        return answer

    @resource_errors
    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        cursor = (params.cursor if params is not None else None) or "0"
        if not cursor.isdigit() or len(cursor) > 18:
            raise ValueError(f"invalid cursor {cursor[:40]!r}")
        offset = int(cursor)
        rows = await service.run(service.documents, None, MAX_LIST + 1, offset)
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
        detail = await service.run(service.document, doc_id)
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
