"""The MCP tools' argument models (their input schemas; ``search``'s generated from
:class:`citeline.query.plan.SearchRequest`'s declared fields, the filters from
:class:`citeline.store.filters.FilterOptions`') and answer models (their output schemas), and the bounds they
keep."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from citeline.query.plan import SearchRequest
from citeline.server.limits import Limits
from citeline.store.filters import FilterOptions
from citeline.util.declared import offered

__all__ = [
    "MAX_SPAN_CHARS",
    "QUOTE_CHARS",
    "Arguments",
    "Citation",
    "DocumentArguments",
    "DocumentsOut",
    "NoArguments",
    "PassageArguments",
    "SearchOut",
    "SpanOut",
    "filters_model",
    "output_schema",
    "search_arguments",
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


# ---------------------------------------------------------------- arguments (input schemas)


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


def filters_model(limits: Limits) -> type[BaseModel]:
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
        __base__=Arguments,
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
    return create_model("SearchArguments", __base__=Arguments, **fields)


class PassageArguments(BaseModel):
    """``get_passage``: the characters ``char_start`` to ``char_end`` of a document's text with context."""

    model_config = ConfigDict(extra="forbid")
    doc_id: str = Field(min_length=1, max_length=200, description="The document's id (a search result's doc_id).")
    char_start: int = Field(ge=0, description="Start offset into the document's text (a search result's).")
    char_end: int = Field(ge=0, description="End offset into the document's text (exclusive).")
    context: int = Field(
        DEFAULT_CONTEXT_CHARS, ge=0, le=MAX_SPAN_CHARS, description="Characters of context on each side."
    )


class DocumentArguments(BaseModel):
    """``get_document``: a document's text a page at a time."""

    model_config = ConfigDict(extra="forbid")
    doc_id: str = Field(min_length=1, max_length=200, description="The document's id (a search result's doc_id).")
    offset: int = Field(0, ge=0, description="First character to return (the previous answer's next_offset).")
    max_chars: int = Field(DEFAULT_SPAN_CHARS, ge=1, le=MAX_SPAN_CHARS, description="At most this many characters.")


class NoArguments(Arguments):
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
