"""Every surface's search parameters are :class:`citeline.SearchRequest`'s declared fields: the same names, defaults
and bounds (a surface may bound a number more tightly, never more loosely), so a field a surface forgets fails here.

The surfaces: ``Index.search``, the CLI's ``search``, the HTTP API's ``GET /search``, the search page ``/``, the MCP
``search`` tool and the LangChain and LlamaIndex retrievers.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import pytest
from conftest import HashEmbedder
from fastapi.testclient import TestClient

from citeline import Index, QueryError, SearchRequest
from citeline.cli.main import cli
from citeline.query.plan import MODES, NO_FILTERS, OPTIONS
from citeline.server import LIMITS, create_app
from citeline.store.filters import filters_from
from citeline.util.declared import offered, people_default

#: Each declared field's default, bounds and choices.
DECLARED = {
    spec.name: (
        spec.default,
        spec.metadata["minimum"],
        spec.metadata["maximum"],
        spec.metadata.get("choices"),
    )
    for spec in offered(SearchRequest)
}
#: Each declared field's default on the surfaces people read (the CLI, the page): ``group`` is on there.
PEOPLE_DEFAULTS = {spec.name: people_default(spec) for spec in offered(SearchRequest)}
#: The filter options every surface takes for ``filters`` (:func:`filters_from`'s parameters; the CLI says
#: ``path_glob`` for ``path``).
FILTER_OPTIONS = {name for name in inspect.signature(filters_from).parameters if name != "where_name"}
#: The request's fields a surface may offer beyond the declared ones (the library's tuning knobs).
KNOBS = {spec.name for spec in dataclasses.fields(SearchRequest)} - set(DECLARED)


def _offers(parameters: Mapping[str, Any], text: str, *, expanded: bool) -> dict[str, Any]:
    """A surface's parameters by the request's field names: ``text`` is the query's name there, ``expanded`` a surface
    whose filters are the filter options rather than one ``filters`` argument."""
    named = {("text" if name == text else name): value for name, value in parameters.items()}
    if expanded:
        options = {"path" if name == "path_glob" else name for name in named}
        assert options >= FILTER_OPTIONS, f"filter options missing: {FILTER_OPTIONS - options}"
        named["filters"] = None
    missing = set(DECLARED) - set(named)
    assert not missing, f"the surface does not offer {sorted(missing)}"
    return named


def _same_default(field: str, default: Any, *, people: bool = False) -> None:
    """``default`` is the declared one: the programs' default, or with ``people`` the one of the surfaces people
    read (the CLI and the page)."""
    declared = PEOPLE_DEFAULTS[field] if people else DECLARED[field][0]
    if field == "text":
        assert default in (inspect.Parameter.empty, dataclasses.MISSING, None, ...), default
    elif field == "filters":
        assert default in (None, NO_FILTERS, {}), default
    else:
        default = default.value if isinstance(default, enum.Enum) else default
        assert default == declared, f"{field}: default {default!r}, declared {declared!r}"


def _within(field: str, minimum: Any, maximum: Any, choices: Any = None) -> None:
    _, low, high, allowed = DECLARED[field]
    if low is not None:
        assert minimum is not None and minimum >= low, f"{field}: minimum {minimum}, declared {low}"
    if high is not None:
        assert maximum is not None and maximum <= high, f"{field}: maximum {maximum}, declared {high}"
    if allowed is not None:
        assert tuple(choices) == tuple(allowed), f"{field}: choices {choices}, declared {allowed}"


def test_index_search_takes_the_request_fields() -> None:
    """``Index.search(query, k, **options)``: the options are the request's fields by name, checked by the request
    (an unknown one is a QueryError naming the options there are)."""
    parameters = inspect.signature(Index.search).parameters
    assert list(parameters) == ["self", "query", "k", "options"] and parameters["k"].default == DECLARED["k"][0]
    assert set(OPTIONS) == set(DECLARED) - {"text"} | KNOBS
    with pytest.raises(QueryError, match=r"unknown search option.*higlight"):
        SearchRequest.of("cavalry", 3, higlight=False)


def test_a_request_validates_itself_from_its_declaration() -> None:
    """Built directly or with ``of``, a request checks every declared field (each field's ``validate``)."""
    assert SearchRequest("cavalry").k == DECLARED["k"][0]
    for bad in ({"k": 0}, {"mode": "fuzzy"}, {"offset": -1}, {"collapse_threshold": 0}, {"min_score": 2}):
        with pytest.raises(QueryError):
            SearchRequest("cavalry", **bad)
    with pytest.raises(QueryError, match="unknown filter key"):
        SearchRequest("cavalry", filters={"colour": "red"})  # type: ignore[arg-type]


def test_cli_search_takes_the_request_fields() -> None:
    command = cli.commands["search"]
    params = {param.name: param for param in command.params if param.name is not None}
    offered_ = _offers(params, "query", expanded=True)
    for field in DECLARED:
        if field in ("text", "filters"):
            continue
        param = offered_[field]
        _same_default(field, param.default, people=True)
        kind = param.type
        if DECLARED[field][1] is not None and isinstance(kind, click.FloatRange | click.IntRange):
            _within(field, kind.min, kind.max)
        if DECLARED[field][3] is not None:
            assert isinstance(kind, click.Choice)
            _within(field, None, None, kind.choices)


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("request")
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("# A\n\nCavalry crossed the river at dawn.\n", encoding="utf-8")
    (root / "docs" / "b.md").write_text("# B\n\nThe river froze; the cavalry waited.\n", encoding="utf-8")
    Index.create(root / "ix", embedder=HashEmbedder()).ingest([root / "docs"])
    return root / "ix"


@pytest.fixture(scope="module")
def client(index_path: Path) -> TestClient:
    return TestClient(create_app(index_path, embedder=HashEmbedder()))


def _query_parameters(client: TestClient, path: str) -> dict[str, Any]:
    """A route's query parameters and their defaults, its dependencies' included (as FastAPI reads them)."""
    route = next(route for route in client.app.routes if getattr(route, "path", None) == path)  # type: ignore[attr-defined]
    parameters, pending = [], [route.dependant]
    while pending:
        dependant = pending.pop()
        parameters += dependant.query_params
        pending += dependant.dependencies
    return {field.name: (None if field.field_info.is_required() else field.field_info.default) for field in parameters}


@pytest.mark.parametrize("path", ["/search", "/"])
def test_the_http_api_and_the_page_take_the_request_fields(client: TestClient, path: str) -> None:
    """Names and defaults as FastAPI reads them; bounds and choices by asking just outside them (400)."""
    offered_ = _offers(_query_parameters(client, path), "q", expanded=True)
    for field in DECLARED:
        _same_default(field, offered_[field], people=path == "/")
    base = {"q": "cavalry", "mode": "lexical"}
    for field, (_, low, high, choices) in DECLARED.items():
        outside = [value for value in (low - 1 if low is not None else None, high + 1 if high is not None else None)]
        outside += ["nonsense"] if choices is not None else []
        for value in filter(lambda value: value is not None, outside):
            answer = client.get(path, params={**base, field: value})
            assert answer.status_code == 400, (path, field, value, answer.text[:200])
    assert client.get(path, params={**base, "min_score": 0}).status_code == 200


def test_the_page_takes_a_relevance_floor(client: TestClient) -> None:
    """The page's form carries ``min_score`` (it lacked it before the request was shared): empty is no floor."""
    base = {"q": "cavalry river", "mode": "lexical"}
    counts = {}
    for floor in ("", "0", "1"):
        page = client.get("/", params={**base, "min_score": floor})
        assert page.status_code == 200 and 'name="min_score" min="0" max="1"' in page.text
        counts[floor] = page.text.count('class="result"')
    assert counts[""] == counts["0"] == 2 and counts["1"] < 2
    assert 'value="0.0"' in client.get("/", params={**base, "min_score": "0"}).text


def test_the_mcp_search_tool_takes_the_request_fields() -> None:
    from citeline import mcp_server

    schema = mcp_server.search_arguments(LIMITS, mcp_server._filters_model(LIMITS)).model_json_schema()
    properties = schema["properties"]
    offered_ = _offers(properties, "query", expanded=False)
    for field in DECLARED:
        prop = offered_[field]
        _same_default(field, prop.get("default", dataclasses.MISSING))
        low, high = prop.get("minimum"), prop.get("maximum")
        if low is None and "anyOf" in prop:  # an optional number: the bounds are on its number branch
            number = next((branch for branch in prop["anyOf"] if branch.get("type") == "number"), {})
            low, high = number.get("minimum"), number.get("maximum")
        _within(field, low, high, prop.get("enum"))


def test_the_retrievers_take_the_request_fields() -> None:
    from citeline.integrations import SEARCH_OPTIONS
    from citeline.integrations.langchain import CitelineRetriever as LangChainRetriever
    from citeline.integrations.llamaindex import CitelineRetriever as LlamaIndexRetriever

    assert set(SEARCH_OPTIONS) == set(DECLARED) - {"text"}
    langchain = {name: field.default for name, field in LangChainRetriever.model_fields.items()}
    llamaindex = {name: p.default for name, p in inspect.signature(LlamaIndexRetriever.__init__).parameters.items()}
    for defaults in (langchain, llamaindex):  # the fields they name are the declared defaults; the others by name
        for field in set(DECLARED) & set(defaults):
            _same_default(field, defaults[field])


def test_a_request_is_what_index_search_runs(index_path: Path) -> None:
    """``Index.search(SearchRequest)`` answers as the keyword arguments do; a request with other options is refused."""
    index = Index.open(index_path, embedder=HashEmbedder())
    request = SearchRequest.of("cavalry river", 3, mode="lexical", collapse=False)
    assert index.search(request) == index.search("cavalry river", 3, mode="lexical", collapse=False)
    with pytest.raises(QueryError, match="give a SearchRequest alone"):
        index.search(request, 5)
    assert DECLARED["mode"][3] == MODES
