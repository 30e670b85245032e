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
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Protocol, get_type_hints
from urllib.parse import quote, urlencode

import jinja2
import markupsafe
from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParameter
from fastapi.responses import HTMLResponse
from pydantic import BeforeValidator, Field

from citeline.errors import CitelineError, QueryError
from citeline.query.plan import MODES, SearchRequest
from citeline.query.results import Passage, SearchResult, Source, shown_pages, shown_relevance
from citeline.store.documents import FACET_VALUES, Facet
from citeline.store.filters import filters_from
from citeline.util.declared import offered, people_default

__all__ = ["PAGE_POLICY", "Limits", "add_pages", "inline_source", "marked"]


class ServedIndex(Protocol):
    """What the pages and the MCP tools need of the index the server serves (:class:`citeline.server.IndexService`)."""

    @property
    def index(self) -> Any: ...  # the index as the request's caller sees it (citeline.server.access)

    async def run(self, work: Callable[..., Any], *args: Any) -> Any: ...

    def search(self, request: SearchRequest, deadline: float) -> tuple[list[SearchResult], int]: ...

    def facets(
        self, filters: Any, within: Sequence[SearchResult] | None, limit: int | None, deadline: float
    ) -> list[Facet]: ...


_STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 0 auto; padding: 0 1rem; color: #1b1b1b; }
header { display: flex; gap: 1rem; align-items: baseline; border-bottom: 1px solid #ddd; padding: .5rem 0; }
header a { font-weight: bold; font-size: 1.3rem; text-decoration: none; color: inherit; }
form.search { margin: 1rem 0; } form.search .line { display: flex; gap: .5rem; }
input[type=search] { flex: 1; font-size: 1.1rem; padding: .4rem; }
fieldset { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: .5rem; }
fieldset { border: 0; padding: 0; }
label { display: flex; flex-direction: column; font-size: .85rem; color: #555; }
ol.results { padding-left: 1.5rem; } li.result { margin-bottom: 1.5rem; }
li.result h2 { font-size: 1.1rem; margin: 0; }
.provenance { font-size: .85rem; color: #555; margin: .1rem 0; }
blockquote { margin: .3rem 0; padding-left: .8rem; border-left: 3px solid #ccc; white-space: pre-wrap; }
mark { background: #fff2a8; } mark.passage { background: #e6f0ff; } mark.sentence { background: #fff2a8; }
details.sources { font-size: .9rem; } details.sources li { margin: .15rem 0; }
span.copy { font-size: .75rem; color: #245; background: #e6f0ff; border-radius: .2rem; padding: 0 .3rem; }
.error { color: #a00; border: 1px solid #a00; padding: .5rem; }
pre.document { white-space: pre-wrap; font: inherit; }
footer { border-top: 1px solid #ddd; margin-top: 2rem; padding: .5rem 0; font-size: .85rem; color: #555; }
nav.pages { display: flex; gap: 1rem; }
dl.metadata { display: flex; flex-wrap: wrap; gap: .1rem 1rem; font-size: .85rem; margin: .1rem 0; }
dl.metadata div { display: flex; gap: .3rem; } dl.metadata dt { color: #555; } dl.metadata dd { margin: 0; }
section.facets { display: flex; flex-wrap: wrap; gap: .5rem 2rem; font-size: .9rem; margin: 1rem 0; }
section.facets h2 { flex-basis: 100%; font-size: .95rem; margin: 0; color: #555; font-weight: normal; }
section.facets div.facet h3 { font-size: .95rem; margin: 0; }
section.facets ul { list-style: none; padding: 0; margin: 0; }
section.facets li.selected { font-weight: bold; } section.facets .count { color: #555; }
"""

_BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{% if q %}{{ q }} · {% endif %}{{ title }}</title><link rel="icon" href="data:,">
<style>{{ style }}</style></head>
<body><header><a href="{{ root }}/">citeline</a><span>{{ subtitle }}</span></header><main>
{% block main %}{% endblock %}
</main><footer>{% if generation is not none %}generation {{ generation }} · {% endif %}
<a href="{{ root }}/docs">API</a> · <a href="{{ root }}/openapi.json">OpenAPI</a></footer></body></html>
"""

_SEARCH = """{% extends "base" %}{% block main %}
<form class="search" method="get" action="{{ root }}/" role="search">
<div class="line"><input type="search" name="q" value="{{ q }}" maxlength="{{ max_query }}" autofocus
 placeholder="What are you looking for?" aria-label="Query">
<select name="mode" aria-label="Mode">{% for m in modes %}
<option value="{{ m }}"{% if m == mode %} selected{% endif %}>{{ m }}</option>{% endfor %}</select>
<button type="submit">Search</button></div>
<details{% if filtered %} open{% endif %}><summary>Filters and options</summary><fieldset>
<label>Source (ingested folder or file)<input name="source" value="{{ form.source }}"></label>
<label>Path glob<input name="path" value="{{ form.path }}" placeholder="*.md"></label>
<label>Metadata KEY=VALUE<input name="where" value="{{ form.where }}" placeholder="author=Mara"></label>
{% include "field_filters" %}
<label>Ingested after<input type="date" name="ingested_after" value="{{ form.ingested_after }}"></label>
<label>Ingested before<input type="date" name="ingested_before" value="{{ form.ingested_before }}"></label>
{% for f in options %}<label>{{ f.label }}{% if f.states %}<select name="{{ f.name }}">{% for value, text in f.states %}
<option value="{{ value }}"{% if value == f.value %} selected{% endif %}>{{ text }}</option>{% endfor %}</select>
{%- else %}<input type="number" name="{{ f.name }}" min="{{ f.min }}" max="{{ f.max }}"
{%- if f.step %} step="{{ f.step }}"{% endif %} value="{{ f.value }}"
{%- if f.placeholder %} placeholder="{{ f.placeholder }}"{% endif %}>{% endif %}</label>
{% endfor %}</fieldset></details></form>
{% if error %}<p class="error" role="alert">{{ error }}</p>{% endif %}
{% include "facets" %}
{% if q and not error %}
{% if results %}<ol class="results" start="{{ offset + 1 }}">
{% for r in results %}<li class="result">
<h2><a href="{{ r.view }}">{{ r.title }}</a></h2>
<p class="provenance"><code>{{ r.source_id }}</code>{% if r.shown_pages %} · {{ r.shown_pages }}{% endif %}
 · characters {{ r.char_start }}–{{ r.char_end }}
{%- if r.record_id is not none %} of the record's text{% endif %} · {{ r.shown_relevance }}
 · ingested {{ r.ingested_at }}
 · run <code>{{ r.run_id }}</code></p>
{% include "hit_metadata" %}
<blockquote class="passage">
{%- for cls, part in r.parts -%}
{%- if cls %}<mark class="{{ cls }}">{{ part }}</mark>{% else %}{{ part }}{% endif -%}
{%- endfor -%}
</blockquote>
{% if r.others %}<details class="sources"{% if r.copies %} open{% endif %}>
<summary>{% if r.copies %}one work: {{ r.copies }} other cop{{ "ies" if r.copies > 1 else "y" }} of this document
{%- if r.others|length > r.copies %}, and {{ r.others|length - r.copies }} other document
{{- "s" if r.others|length - r.copies > 1 }}{% endif %}
{%- else %}also in {{ r.others|length }} other document{{ "s" if r.others|length > 1 }}{% endif %}</summary><ul>
{% for s in r.others %}<li>{% if s.copy %}<span class="copy">copy</span> {% endif -%}
<a href="{{ s.view }}">{{ s.title }}</a> <code>{{ s.source_id }}</code>
{%- if s.shown_pages %} · {{ s.shown_pages }}{% endif %} · characters {{ s.char_start }}–{{ s.char_end }}</li>
{% endfor %}
</ul></details>{% endif %}
{% if r.more %}<details class="more">
<summary>{{ r.more|length }} more passage{{ "s" if r.more|length > 1 }} in this
{{ "record" if r.record_id is not none else "document" }}</summary><ul>
{% for p in r.more %}<li><a href="{{ p.view }}">characters {{ p.char_start }}–{{ p.char_end }}</a>
{%- if p.shown_pages %} · {{ p.shown_pages }}{% endif %} · {{ p.shown_relevance }}
<blockquote>{{ p.quote }}</blockquote></li>
{% endfor %}</ul></details>{% endif %}
</li>{% endfor %}</ol>
<nav class="pages">{% if previous %}<a href="{{ previous }}" rel="prev">← previous</a>{% endif %}
{% if next %}<a href="{{ next }}" rel="next">next →</a>{% endif %}</nav>
{% else %}<p class="empty">No passages match{% if filtered %} with these filters{% endif %}.</p>{% endif %}
{% endif %}
{% endblock %}"""

# The metadata parts of the search page (issue 42.5), each its own template included by "search": a hit's
# metadata, a filter per metadata field the index holds, and the facets of the answer (datasette's facets).
_HIT_METADATA = """{% if r.shown_metadata %}<dl class="metadata">{% for key, value in r.shown_metadata %}
<div><dt>{{ key }}</dt><dd>{{ value }}</dd></div>{% endfor %}</dl>{% endif %}"""

_FIELD_FILTERS = """{% for field in fields %}<label>{{ field.name }} ({{ field.documents }} documents)
<input name="meta.{{ field.name }}" value="{{ field.chosen }}" list="values-{{ loop.index }}"
 placeholder="= value, or !=, >=, <, ~text"><datalist id="values-{{ loop.index }}">
{%- for value in field["values"] %}<option value="{{ value }}">{% endfor %}</datalist></label>
{% endfor %}"""

_FACETS = """{% if facets %}<section class="facets" aria-label="Facets"><h2>{{ facets_scope }}</h2>
{% for facet in facets %}<div class="facet"><h3>{{ facet.field }}</h3><ul>
{% for item in facet["values"] %}<li{% if item.selected %} class="selected"{% endif %}><a href="{{ item.url }}"
{%- if item.selected %} title="remove this filter"{% endif %}>{{ item.value }}</a>
 <span class="count">{{ item.count }}</span>{% if item.selected %} <a href="{{ item.url }}" aria-label="remove">✕</a>
{%- endif %}</li>
{% endfor %}{% if facet.more %}<li class="more">… {{ facet.more }} more</li>{% endif %}</ul></div>
{% endfor %}</section>{% endif %}"""

_DOCUMENT = """{% extends "base" %}{% block main %}
<p>{% if back %}<a href="{{ back }}">← back to the results</a> · {% endif %}<a href="#passage">to the passage</a></p>
<h1>{{ doc.title or doc.source_id }}</h1>
<table class="provenance">
<tr><th>Source</th><td><code>{{ doc.source_path }}</code></td></tr>
<tr><th>Source id</th><td><code>{{ doc.source_id }}</code></td></tr>
<tr><th>Format</th><td>{{ doc.format }}{% if doc.pages %}, {{ doc.pages }} pages{% endif %},
{{ doc.chunks }} chunks</td></tr>
<tr><th>Ingested</th><td>{{ doc.ingested_at }} (run <code>{{ doc.run_id }}</code>)</td></tr>
<tr><th>Content hash</th><td><code>{{ doc.content_hash }}</code></td></tr>
{% if start is not none %}<tr><th>Passage</th><td>characters {{ start }}–{{ end }}</td></tr>{% endif %}
</table>
<pre class="document">
{%- for cls, part in parts -%}
{%- if cls %}<mark class="{{ cls }}"{% if loop.index0 == first_mark %} id="passage"{% endif %}>{{ part }}</mark>
{%- else %}{{ part }}{% endif -%}
{%- endfor -%}
</pre>
{% endblock %}"""

_TEMPLATES = jinja2.Environment(
    loader=jinja2.DictLoader(
        {
            "base": _BASE,
            "search": _SEARCH,
            "document": _DOCUMENT,
            "hit_metadata": _HIT_METADATA,
            "field_filters": _FIELD_FILTERS,
            "facets": _FACETS,
        }
    ),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


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


def _blank_to_none(value: str | None) -> str | None:
    return value if value and value.strip() else None


def request_parameters(
    bounds: Mapping[str, int], *, people: bool = False, kinds: Mapping[str, Any] | None = None
) -> Callable[..., dict[str, Any]]:
    """A FastAPI dependency taking :class:`~citeline.SearchRequest`'s declared fields as query parameters and
    answering them by the request's names (``q`` is the query's text; ``filters`` are left to the caller, as
    ``GET /documents`` takes them too): each one's type, default, bounds, choices and help as declared there, its
    maximum lowered to ``bounds``' (the server's limits, never looser). ``people``: the search page's parameters
    (the defaults of the surfaces people read, ``q`` optional, a form's empty number field none); ``kinds``: a
    field's annotation instead of the declared one (the HTTP API's ``Mode`` enum)."""
    hints, keyword, kinds = get_type_hints(SearchRequest), inspect.Parameter.KEYWORD_ONLY, kinds or {}
    parameters: list[inspect.Parameter] = []
    for spec in offered(SearchRequest):
        if spec.name == "filters":
            continue
        meta, annotation = spec.metadata, hints[spec.name]
        limits: dict[str, Any] = {"ge": meta["minimum"], "le": meta["maximum"]}
        default = people_default(spec) if people else spec.default
        if spec.name in bounds:
            limits["le"] = min(bounds[spec.name], meta["maximum"])
        if spec.name == "text":
            limits, annotation = {"min_length": 1, "max_length": bounds["query_chars"]}, str
            if people:
                annotation, limits["min_length"], default = str | None, 0, None
        if "choices" in meta:  # an enum in the OpenAPI schema
            annotation = kinds.get(spec.name, Literal[tuple(meta["choices"])])
        default = inspect.Parameter.empty if default is dataclasses.MISSING else default
        kind: Any = Annotated[annotation, Query(description=meta["help"], **limits)]
        if people and default is None and spec.name != "text":  # a form's empty field: none
            number = Annotated[float, Field(ge=limits["ge"], le=limits["le"])]  # the bounds on the number itself
            kind = Annotated[number | None, BeforeValidator(_blank_to_none), Query(description=meta["help"])]
        name = "q" if spec.name == "text" else spec.name
        parameters.append(inspect.Parameter(name, keyword, default=default, annotation=kind))

    def values(**given: Any) -> dict[str, Any]:
        return given

    values.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # what FastAPI reads
    return values


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


@dataclasses.dataclass(frozen=True)
class Limits:
    """The server's bounds on a request (``citeline.server``'s ``MAX_`` constants), which the pages keep too."""

    query_chars: int
    k: int
    offset: int
    id_chars: int
    filter_values: int  #: values of one filter (``source``, ``path``, ``where``)


def add_pages(app: FastAPI, reader: ServedIndex, limits: Limits) -> None:
    """Add ``/`` and ``/view/{doc_id}`` to ``app``, reading through ``reader`` (the server's, so they share its
    search slot and timeout) and turning form fields into filters with :func:`citeline.store.filters.filters_from`."""
    MAX_QUERY_CHARS, MAX_K, MAX_OFFSET, MAX_ID_CHARS = limits.query_chars, limits.k, limits.offset, limits.id_chars

    def render(name: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = _TEMPLATES.get_template(name).render(
            root=root, style=_STYLE, title="citeline", subtitle=str(reader.index.path.name), **context
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
        source: Text = None,
        path: Text = None,
        where: Text = None,
        ingested_after: Annotated[str | None, Query(max_length=64)] = None,
        ingested_before: Annotated[str | None, Query(max_length=64)] = None,
    ) -> HTMLResponse:
        q, mode, k, offset = options.pop("q"), options["mode"], options["k"], options["offset"]
        collapse, group, min_score = options["collapse"], options["group"], options["min_score"]
        root = request.scope.get("root_path", "")
        form = {"source": source, "path": path, "where": where}
        form |= {"ingested_after": ingested_after, "ingested_before": ingested_before}
        form = {key: value or "" for key, value in form.items()}
        filled = {key: _blank_to_none(value) for key, value in form.items()}
        chosen = _chosen_fields(request)
        held = await reader.run(reader.facets, None, None, FACET_VALUES)  # the index's fields (kept per generation)
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
            "form": form,
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
            clauses = [filled["where"]] if filled["where"] else []
            filters = filters_from(
                [filled["source"]] if filled["source"] else None,
                [filled["path"]] if filled["path"] else None,
                clauses + [_clause(field, value) for field, value in chosen],
                filled["ingested_after"],
                filled["ingested_before"],
            )
            if not q or not q.strip():  # no query: the facets of the documents the filters select, as datasette's
                counted = await reader.run(reader.facets, filters, None, FACET_VALUES) if filters else held
                scope = "In the documents these filters select" if filters else "In the index"
                context |= {"facets": _shown_facets(counted, params, root), "facets_scope": scope}
                return render("search", request, **context)
            # one more than shown: whether there is a next page
            wanted = SearchRequest.of(q, filters=filters, **{**options, "k": k + 1})
            found, generation = await reader.run(reader.search, wanted)
            shown = found[:k]
            counted = await reader.run(reader.facets, filters, shown, FACET_VALUES) if shown else []
        except CitelineError as exc:
            return render("search", request, status=400, **{**context, "error": " ".join(str(exc).split())})
        documents = len({doc for result in shown for doc in (result.doc_id, *(s.doc_id for s in result.sources))})
        context["facets"] = _shown_facets(counted, params, root)
        context["facets_scope"] = f"In the {documents} document{'s' if documents != 1 else ''} of these results"
        if offset > 0:
            context["previous"] = f"{root}/?{urlencode([*params, ('offset', max(0, offset - k))])}"
        if len(found) > k and offset + k <= MAX_OFFSET:
            context["next"] = f"{root}/?{urlencode([*params, ('offset', offset + k)])}"
        context["generation"] = generation
        context["results"] = [_shown_result(result, root, q, view_url) for result in shown]
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
        doc = (await reader.run(lambda deadline: reader.index.document(doc_id))).to_dict()
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


def _shown_result(result: SearchResult, root: str, q: str, view_url: Callable[..., str]) -> dict[str, Any]:
    """What the results template shows of one result: its fields, its passage cut around the highlighted
    sentence, the other documents it occurs in, and (grouped) the document's other passages."""
    marks = [(h.char_start, h.char_end, "sentence") for h in result.highlights[:1]]
    others = [
        {
            **dataclasses.asdict(source),
            "title": source.title or source.source_id,
            "view": view_url(root, source, q),
            "shown_pages": shown_pages(source.page, source.first_page, source.last_page),
            "copy": result.work_id is not None and source.work_id == result.work_id,  # a copy of the same work
        }
        for source in result.sources[1:]
    ]
    return {
        **{field.name: getattr(result, field.name) for field in dataclasses.fields(result)},
        "title": result.title or result.source_id,
        "parts": marked(result.text, result.char_start, marks),
        "shown_relevance": shown_relevance(result.relevance),
        "shown_pages": shown_pages(result.page, result.first_page, result.last_page),
        "view": view_url(root, result, q),
        "others": others,
        "copies": sum(1 for other in others if other["copy"]),
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
