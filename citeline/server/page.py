"""The search page of ``citeline serve``: ``/`` (a query box, mode and filters, the results) and ``/view/{doc_id}``
(a document with the passage marked in context).

Plain HTML rendered on the server with Jinja2 (autoescaped), styled by one inline stylesheet: no script, no font or
stylesheet from elsewhere, so it works offline and behind a strict Content-Security-Policy. Collapsed sources fold
into a ``<details>`` element, which browsers open without script.
"""

import base64
import dataclasses
import hashlib
import inspect
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from importlib import resources
from typing import Annotated, Any
from urllib.parse import quote, urlencode

import jinja2
import markupsafe
from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParameter
from fastapi.responses import HTMLResponse

from citeline.errors import CitelineError, QueryError
from citeline.query.plan import MODES, SearchRequest
from citeline.query.results import Passage, SearchResult, Source, shown_pages, shown_relevance
from citeline.server.answers import Record, search_answer
from citeline.server.limits import Limits
from citeline.server.parameters import blank_to_none, dependency, request_parameters
from citeline.server.service import ServedIndex
from citeline.store.documents import FACET_VALUES, Facet
from citeline.store.filters import FilterOptions, filters_from
from citeline.util.declared import offered

__all__ = ["PAGE_POLICY", "add_pages", "inline_source", "marked"]


#: The page's templates (``citeline/server/templates/``, package data): ``base.html`` (the frame), ``search.html``
#: and ``document.html`` (the two pages), and the search page's metadata parts (issue 42.5), each its own template
#: included by ``search.html``: a hit's metadata (``hit_metadata.html``), a filter per metadata field the index holds
#: (``field_filters.html``), and the facets of the answer (``facets.html``, datasette's facets).
_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("citeline.server", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
#: The pages' one stylesheet (``templates/page.css``), inline in each page (after a newline: ``<style>`` then the
#: rules on their own lines); its hash is :data:`PAGE_POLICY`'s.
_STYLE = "\n" + resources.files("citeline.server").joinpath("templates", "page.css").read_text(encoding="utf-8")


def inline_source(text: str) -> str:
    """The Content-Security-Policy source that allows the inline ``<script>`` or ``<style>`` whose text is ``text``
    and nothing else (``'sha256-...'``)."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


#: The pages' Content-Security-Policy: their one stylesheet (as rendered) and nothing else; no script at all; the
#: form submits to the server itself; no site may frame them.
PAGE_POLICY = (
    f"default-src 'none'; style-src {inline_source(str(markupsafe.escape(_STYLE)))}; img-src data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def marked(text: str, start: int, marks: list[tuple[int, int, str]]) -> list[tuple[str, str]]:
    """``text`` (which begins at offset ``start`` of its document) cut into ``(css_class, part)`` pieces, the
    parts inside each ``(char_start, char_end, css_class)`` of ``marks`` (document offsets; later marks win where
    they overlap) with that class and the rest with ``""``."""
    cuts = sorted({0, len(text), *(min(len(text), max(0, edge - start)) for m in marks for edge in m[:2])})
    parts: list[tuple[str, str]] = []
    for left, right in itertools.pairwise(cuts):
        css = ""
        for mark_start, mark_end, mark_css in marks:
            if mark_start - start <= left and right <= mark_end - start:
                css = mark_css
        if parts and parts[-1][0] == css:
            parts[-1] = (css, parts[-1][1] + text[left:right])
        else:
            parts.append((css, text[left:right]))
    return parts


def option_fields(values: Mapping[str, Any], bounds: Mapping[str, int]) -> list[dict[str, Any]]:
    """The search page form's option fields, generated from :class:`~citeline.SearchRequest`'s declared fields (those
    whose ``form`` is not False): an on/off option a choice of its ``on`` and ``off`` wording, a number an input with
    its declared bounds (the maximum lowered to ``bounds``, the server's limits), each holding ``values``' value."""
    shown = []
    for spec in offered(SearchRequest):
        form, meta = spec.metadata["form"], spec.metadata
        if form is False:
            continue
        form = form if isinstance(form, Mapping) else {}
        value = values[spec.name]
        field: dict[str, Any] = {"name": spec.name, "label": form.get("label", meta["help"]), "states": None}
        if isinstance(spec.default, bool):
            on, off = form.get("on", "on"), form.get("off", "off")
            field |= {"states": [("true", on), ("false", off)], "value": "true" if value else "false"}
        else:
            high = min(bounds.get(spec.name, meta["maximum"]), meta["maximum"])
            field |= {"min": f"{meta['minimum']:g}", "max": f"{high:g}", "value": "" if value is None else value}
            field |= {"step": form.get("step"), "placeholder": form.get("placeholder")}
        shown.append(field)
    return shown


def form_filters(query_chars: int) -> Callable[..., Awaitable[dict[str, Any]]]:
    """A FastAPI dependency taking the search page form's filter fields, one a declared field of
    :class:`~citeline.store.filters.FilterOptions` under its name (the HTTP API's): each one text (a list option's
    one value), at most its declared ``maximum`` characters (a list option's: ``query_chars``, the server's limit);
    it answers each by name, ``""`` when not given."""
    parameters = []
    for spec in offered(FilterOptions):
        longest = spec.metadata["maximum"] or query_chars
        kind = Annotated[str | None, Query(max_length=int(longest), description=spec.metadata["help"])]
        parameters.append(inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=kind))
    return dependency(parameters, lambda **given: {name: value or "" for name, value in given.items()})


def filter_fields(values: Mapping[str, str]) -> list[dict[str, Any]]:
    """The search page form's filter fields, generated from :class:`~citeline.store.filters.FilterOptions`' declared
    fields (those whose ``form`` is not False): each its ``form``'s label (else its help), placeholder and input
    type (none: text), holding ``values``' value. The page shows the text ones, then a filter per metadata field
    the index holds, then the typed ones (the dates)."""
    shown = []
    for spec in offered(FilterOptions):
        form = spec.metadata["form"]
        if form is False:
            continue
        form = form if isinstance(form, Mapping) else {}
        shown.append(
            {
                "name": spec.name,
                "label": form.get("label", spec.metadata["help"]),
                "placeholder": form.get("placeholder"),
                "type": form.get("type"),
                "value": values[spec.name],
            }
        )
    return shown


def _form_filters(filled: Mapping[str, str | None], clauses: Sequence[str]) -> dict[str, Any]:
    """The filters of the form's filter fields (``filled``: each one value or None) and the per-field ``where``
    ``clauses``, by :func:`citeline.store.filters.filters_from`."""
    given: dict[str, Any] = {}
    for spec in offered(FilterOptions):
        value = filled[spec.name]
        given[spec.name] = ([value] if value else []) if isinstance(spec.default, tuple) else value
    given["where"] = [*given["where"], *clauses]
    return filters_from(**given)


def add_pages(app: FastAPI, service: ServedIndex, limits: Limits) -> None:
    """Add ``/`` and ``/view/{doc_id}`` to ``app``, reading through ``service`` (the server's, so they share its
    search slot and timeout) and turning form fields into filters with :func:`citeline.store.filters.filters_from`."""
    MAX_QUERY_CHARS, MAX_K, MAX_OFFSET, MAX_ID_CHARS = limits.query_chars, limits.k, limits.offset, limits.id_chars

    def render(name: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = _TEMPLATES.get_template(f"{name}.html").render(
            root=root, style=_STYLE, title="citeline", subtitle=service.name, **context
        )
        return HTMLResponse(page, status_code=status, headers={"Content-Security-Policy": PAGE_POLICY})

    def view_url(root: str, item: SearchResult | Source | Passage, q: str, doc_id: str | None = None) -> str:
        highlight = item.highlights[0] if not isinstance(item, Source) and item.highlights else None
        params: dict[str, Any] = {"start": item.char_start, "end": item.char_end, "q": q}
        if highlight is not None:
            params |= {"hs": highlight.char_start, "he": highlight.char_end}
        if doc_id is None:  # a Passage names no document: its result's is given
            assert not isinstance(item, Passage)
            doc_id = item.doc_id
        return f"{root}/view/{quote(doc_id, safe='')}?{urlencode(params)}#passage"

    Text = Annotated[str | None, Query(max_length=MAX_QUERY_CHARS)]
    bounds = {"k": MAX_K, "offset": MAX_OFFSET, "query_chars": MAX_QUERY_CHARS}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def search_page(
        request: Request,
        options: Annotated[dict[str, Any], Depends(request_parameters(bounds, people=True))],
        form: Annotated[dict[str, str], Depends(form_filters(MAX_QUERY_CHARS))],
    ) -> HTMLResponse:
        q, mode, k, offset = options.pop("q"), options["mode"], options["k"], options["offset"]
        collapse, group, min_score = options["collapse"], options["group"], options["min_score"]
        root = request.scope.get("root_path", "")
        filled = {key: blank_to_none(value) for key, value in form.items()}
        chosen = _chosen_fields(request)
        held = await service.run(service.facets, None, None, FACET_VALUES)  # the index's fields (kept per generation)
        context: dict[str, Any] = {
            "q": q or "",
            "mode": mode,
            "modes": MODES,
            "k": k,
            "offset": offset,
            "collapse": collapse,
            "group": group,
            "min_score": min_score,
            "options": option_fields(options, bounds),
            "filters": filter_fields(form),
            "filtered": any(filled.values()) or min_score is not None or bool(chosen),
            "fields": _field_filters(held, chosen),
            "facets": [],
            "facets_scope": "",
            "max_query": MAX_QUERY_CHARS,
            "max_k": MAX_K,
            "results": [],
            "error": None,
            "previous": None,
            "next": None,
            "generation": None,
        }
        params = [(key, value) for key, value in request.query_params.multi_items() if key != "offset"]
        try:
            if len(chosen) > limits.filter_values:
                raise QueryError(f"at most {limits.filter_values} metadata fields a search; got {len(chosen)}")
            filters = _form_filters(filled, [_clause(field, value) for field, value in chosen])
            if not q or not q.strip():  # no query: the facets of the documents the filters select, as datasette's
                counted = await service.run(service.facets, filters, None, FACET_VALUES) if filters else held
                scope = "In the documents these filters select" if filters else "In the index"
                context |= {"facets": _shown_facets(counted, params, root), "facets_scope": scope}
                return render("search", request, **context)
            wanted = SearchRequest.of(q, filters=filters, **options)
            # one more than shown: whether there is a next page
            answer = await search_answer(service, q, wanted, facets=True, look_ahead=True)
        except CitelineError as exc:
            return render("search", request, status=400, **{**context, "error": " ".join(str(exc).split())})
        documents = answer.documents
        context["facets"] = _shown_facets(answer.facets or (), params, root)
        context["facets_scope"] = f"In the {documents} document{'s' if documents != 1 else ''} of these results"
        if offset > 0:
            context["previous"] = f"{root}/?{urlencode([*params, ('offset', max(0, offset - k))])}"
        if answer.more and offset + k <= MAX_OFFSET:
            context["next"] = f"{root}/?{urlencode([*params, ('offset', offset + k)])}"
        context["generation"] = answer.generation
        context["results"] = [_shown_result(record, root, q, view_url) for record in answer.records]
        return render("search", request, **context)

    @app.get("/view/{doc_id}", response_class=HTMLResponse, include_in_schema=False)
    async def document_page(
        request: Request,
        doc_id: Annotated[str, PathParameter(max_length=MAX_ID_CHARS)],
        start: Annotated[int | None, Query(ge=0)] = None,
        end: Annotated[int | None, Query(ge=0)] = None,
        hs: Annotated[int | None, Query(ge=0)] = None,
        he: Annotated[int | None, Query(ge=0)] = None,
        q: Text = None,
    ) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        doc = (await service.run(service.document, doc_id)).to_dict()
        marks = []
        if start is not None and end is not None:
            marks.append((start, end, "passage"))
        if hs is not None and he is not None:
            marks.append((hs, he, "sentence"))
        parts = marked(doc["text"], 0, marks)
        first_mark = next((i for i, (cls, _) in enumerate(parts) if cls), -1)
        back = f"{root}/?{urlencode({'q': q})}" if q else None
        return render(
            "document",
            request,
            q=None,
            doc=doc,
            parts=parts,
            first_mark=first_mark,
            start=start,
            end=end,
            back=back,
            generation=None,
        )


#: The operators a per-field filter's value may begin with (``--where``'s); any other value means ``=``.
_LEADING_OPERATORS = ("!=", ">=", "<=", ">", "<", "~", "=")
#: Characters of a metadata value the page shows (a hit's metadata, a facet's value).
_VALUE_CHARS = 120


def _chosen_fields(request: Request) -> list[tuple[str, str]]:
    """The per-field filters of the form: ``(field, value)`` of every non-blank ``meta.FIELD`` parameter."""
    return [
        (key.removeprefix("meta."), value.strip())
        for key, value in request.query_params.multi_items()
        if key.startswith("meta.") and len(key) > len("meta.") and value.strip()
    ]


def _clause(field: str, value: str) -> str:
    """A per-field filter as a ``where`` clause: ``value`` may begin with an operator (``>=2021``, ``~mara``)."""
    if value.startswith(_LEADING_OPERATORS):
        return f"{field}{value}"
    return f"{field} {value}" if value.startswith("in ") else f"{field}={value}"


def _field_filters(held: Sequence[Facet], chosen: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """A filter per metadata field the index holds (and per field already chosen): its name, the documents
    holding it, its most frequent values (the input's suggestions) and the value chosen."""
    picked = dict(reversed(chosen))  # the first value given for a field is the one its input shows
    fields: list[dict[str, Any]] = [
        {"name": f.field, "documents": f.documents, "values": [v.value for v in f.values], "chosen": ""} for f in held
    ]
    names = {field["name"] for field in fields}
    fields += [{"name": name, "documents": 0, "values": [], "chosen": ""} for name in picked if name not in names]
    for field in fields:
        field["chosen"] = picked.get(field["name"], "")
    return fields


def _shown_facets(facets: Sequence[Facet], params: list[tuple[str, str]], root: str) -> list[dict[str, Any]]:
    """The facets as the page lists them: each value a link that adds ``meta.FIELD=VALUE`` to the current search,
    or, for a value already chosen, removes it (datasette's facet links)."""
    shown = []
    for facet in facets:
        items = []
        for item in facet.values:
            pair = (f"meta.{facet.field}", item.value)
            selected = pair in params
            following = [p for p in params if p != pair] if selected else [*params, pair]
            value = item.value if len(item.value) <= _VALUE_CHARS else item.value[: _VALUE_CHARS - 1] + "…"
            items.append(
                {"value": value, "count": item.count, "selected": selected, "url": f"{root}/?{urlencode(following)}"}
            )
        shown.append({"field": facet.field, "values": items, "more": facet.more})
    return shown


def _shown_value(value: Any) -> str:
    """A metadata value as one line of text: a list's items joined, an object as JSON, cut at ``_VALUE_CHARS``."""
    if isinstance(value, list):
        text = ", ".join(item if isinstance(item, str) else json.dumps(item, ensure_ascii=False) for item in value)
    else:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _shown_result(record: Record, root: str, q: str, view_url: Callable[..., str]) -> dict[str, Any]:
    """What the results template shows of one record of the answer: its result's fields, its passage cut around
    the highlighted sentence, the other documents it occurs in, and (grouped) the document's other passages."""
    result = record.result
    marks = [(h.char_start, h.char_end, "sentence") for h in result.highlights[:1]]
    others = [
        {
            **dataclasses.asdict(other.source),
            "title": other.source.title or other.source.source_id,
            "view": view_url(root, other.source, q),
            "shown_pages": shown_pages(other.source.page, other.source.first_page, other.source.last_page),
            "copy": other.same_work,  # a copy of the same work
        }
        for other in record.also_in
    ]
    return {
        **{field.name: getattr(result, field.name) for field in dataclasses.fields(result)},
        "title": result.title or result.source_id,
        "parts": marked(result.text, result.char_start, marks),
        "shown_relevance": shown_relevance(result.relevance),
        "shown_pages": shown_pages(result.page, result.first_page, result.last_page),
        "view": view_url(root, result, q),
        "others": others,
        "copies": record.copies,
        "more": [
            {
                **dataclasses.asdict(passage),
                "view": view_url(root, passage, q, result.doc_id),
                "quote": _quote(passage),
                "shown_relevance": shown_relevance(passage.relevance),
                "shown_pages": shown_pages(passage.page, passage.first_page, passage.last_page),
            }
            for passage in result.more_passages
        ],
        "shown_metadata": [(key, _shown_value(value)) for key, value in result.metadata.items()],
    }


#: Characters shown of each of a grouped result's other passages.
MORE_CHARS = 240


def _quote(passage: Passage) -> str:
    """A grouped result's other passage in one short line: its best sentence, else its beginning."""
    best = max(passage.highlights, key=lambda h: h.score, default=None)
    text = " ".join((best.text if best else passage.text).split())
    return text if len(text) <= MORE_CHARS else text[: MORE_CHARS - 1].rsplit(" ", 1)[0] + " …"
