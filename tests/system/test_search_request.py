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
from citeline.store.filters import FilterOptions, Filters, filters_from
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


def test_the_filter_options_are_declared_once() -> None:
    """The CLI's filter flags, the HTTP API's filter parameters, the MCP tools' filters and the page form's filter
    fields are FilterOptions' fields, with its help, and filters_from reads them by those names."""
    import inspect

    from citeline.server.mcp import schemas
    from citeline.server.page import filter_fields, form_filters
    from citeline.server.parameters import FILTER_PARAMETERS

    declared = {spec.name: spec.metadata["help"] for spec in offered(FilterOptions)}
    assert set(declared) == FILTER_OPTIONS == set(FILTER_PARAMETERS)
    model = schemas.filters_model(LIMITS)
    assert {name: field.description for name, field in model.model_fields.items()} == declared
    flags = {param.opts[0][2:].replace("-", "_"): param.help for param in cli.commands["search"].params if param.opts}
    for name, text in declared.items():
        assert flags[name] is not None and flags[name].startswith(text), name
    assert [field["name"] for field in filter_fields(dict.fromkeys(declared, ""))] == list(declared)
    assert set(inspect.signature(form_filters(LIMITS.query_chars)).parameters) == set(declared)


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
    (root / "docs" / "a.md").write_text(
        "---\nyear: 2021\n---\n# A\n\nCavalry crossed the river at dawn.\n", encoding="utf-8"
    )
    (root / "docs" / "b.md").write_text(
        "---\nyear: 2022\n---\n# B\n\nThe river froze; the cavalry waited.\n", encoding="utf-8"
    )
    (root / "docs" / "c.md").write_text(
        "---\nyear: 2023\n---\n# C\n\nA cavalry patrol rode along the river.\n", encoding="utf-8"
    )
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
    assert counts[""] == counts["0"] == 3 and counts["1"] < 3
    assert 'value="0.0"' in client.get("/", params={**base, "min_score": "0"}).text


def test_the_mcp_search_tool_takes_the_request_fields() -> None:
    from citeline.server.mcp import schemas

    schema = schemas.search_arguments(LIMITS, schemas.filters_model(LIMITS)).model_json_schema()
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


# ---------------------------------------------------------------- every surface carries every field to the planner

#: A value of every declared field that is not its default on any surface (``group``'s on the surfaces people read
#: is its opposite: PEOPLE_VALUES). A new declared field without a value here fails test_every_field_has_a_value.
VALUES: dict[str, Any] = {
    "text": "cavalry river",
    "k": 3,
    "mode": "lexical",
    "filters": None,  # the filter options below (FILTERS), by their surface names
    "collapse": False,
    "group": True,
    "collapse_threshold": 0.9,
    "min_score": 0.0,
    "offset": 1,
    "highlight": False,
}
PEOPLE_VALUES = {**VALUES, "group": False}
#: Every filter option (filters_from's names) with a value that selects the documents above.
FILTERS = {
    "source": ["docs"],
    "path": ["*.md"],
    "where": ["year>=2020"],
    "ingested_after": "2000-01-01",
    "ingested_before": "2999-01-01",
}


def test_every_field_has_a_value() -> None:
    assert set(VALUES) == set(DECLARED) and set(FILTERS) == FILTER_OPTIONS
    for field, value in VALUES.items():
        if field not in ("text", "filters"):
            assert value != DECLARED[field][0] and PEOPLE_VALUES[field] != PEOPLE_DEFAULTS[field], field


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[SearchRequest]:
    """The requests that reach the planner (``citeline.query.plan.search``), in order; the search runs as usual."""
    from citeline.query import plan

    seen: list[SearchRequest] = []
    run = plan.search

    def spy(snapshot: Any, request: SearchRequest, *args: Any) -> Any:
        seen.append(request)
        return run(snapshot, request, *args)

    monkeypatch.setattr(plan, "search", spy)
    return seen


def _carries(seen: list[SearchRequest], root: Path, *, people: bool = False, k: int | None = None) -> None:
    """The first request the planner saw carries every field's value (``k``: the page asks one more, for paging)."""
    assert seen, "no request reached the planner"
    request, values = seen[0], PEOPLE_VALUES if people else VALUES
    expected = filters_from(**{**FILTERS, "source": [str(root / "docs")]})
    assert request.filters == Filters.from_value(expected)
    for field, value in values.items():
        if field != "filters":
            wanted = k if field == "k" and k is not None else value
            assert getattr(request, field) == wanted, (field, getattr(request, field), wanted)


def _cli_arguments(people_values: Mapping[str, Any], root: Path) -> list[str]:
    """``citeline search``'s arguments for every field's value, by the flags the command declares."""
    params = {param.name: param for param in cli.commands["search"].params}
    arguments = ["search", people_values["text"], "--index", str(root / "ix")]
    for field, value in people_values.items():
        if field in ("text", "filters"):
            continue
        option = params[field]
        assert isinstance(option, click.Option)
        if isinstance(value, bool):
            on, off = option.opts[0], option.secondary_opts[0]
            arguments.append(on if value else off)
        else:
            arguments += [option.opts[0], str(value)]
    for name, value in FILTERS.items():
        for one in [value] if isinstance(value, str) else value:
            arguments += [f"--{name.replace('_', '-')}", str(root / "docs") if name == "source" else one]
    return arguments


def test_every_surface_carries_every_field_to_the_planner(
    index_path: Path, client: TestClient, planned: list[SearchRequest]
) -> None:
    """Python, the CLI, GET /search, the page, the MCP tool and the retrievers, each called with a value of every
    declared field that is not its default: the request the planner receives carries each one."""
    from click.testing import CliRunner

    root = index_path.parent
    filters = filters_from(**{**FILTERS, "source": [str(root / "docs")]})
    options = {field: value for field, value in VALUES.items() if field not in ("text", "filters")}

    Index.open(index_path, embedder=HashEmbedder()).search(VALUES["text"], filters=filters, **options)
    _carries(planned, root)

    planned.clear()
    done = CliRunner().invoke(cli, _cli_arguments(PEOPLE_VALUES, root))
    assert done.exit_code == 0, done.output
    _carries(planned, root, people=True)

    http = {**FILTERS, "source": [str(root / "docs")]}
    for path, people in (("/search", False), ("/", True)):
        planned.clear()
        values = PEOPLE_VALUES if people else VALUES
        params = {("q" if f == "text" else f): v for f, v in values.items() if f != "filters"}
        answer = client.get(path, params={**params, **http})
        assert answer.status_code == 200, answer.text[:300]
        _carries(planned, root, people=people, k=VALUES["k"] + 1 if people else None)

    planned.clear()
    _call_mcp_search(index_path, {"query": VALUES["text"], **options, "filters": http})
    _carries(planned, root)

    from citeline.integrations.langchain import CitelineRetriever as LangChainRetriever
    from citeline.integrations.llamaindex import CitelineRetriever as LlamaIndexRetriever

    index = Index.open(index_path, embedder=HashEmbedder())
    planned.clear()
    LangChainRetriever(index=index).invoke(VALUES["text"], filters=filters, **options)
    _carries(planned, root)
    planned.clear()
    LlamaIndexRetriever(index).retrieve(VALUES["text"], filters=filters, **options)
    _carries(planned, root)


def _call_mcp_search(index_path: Path, arguments: dict[str, Any]) -> None:
    """Call the MCP ``search`` tool in this process (memory streams: the SDK's own client and server)."""
    import anyio
    from mcp import ClientSession
    from mcp.shared.memory import create_client_server_memory_streams

    from citeline.server import IndexService
    from citeline.server.mcp import tools

    async def main() -> None:
        server = tools.build_server(IndexService(Index.open(index_path, embedder=HashEmbedder()), 60.0), LIMITS)
        with anyio.fail_after(60):
            await serve(server)

    async def serve(server: Any) -> None:
        async with create_client_server_memory_streams() as (client, served), anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: server.run(served[0], served[1], server.create_initialization_options()))
            async with ClientSession(client[0], client[1]) as session:
                await session.initialize()
                result = await session.call_tool("search", arguments)
                assert not result.is_error, result.content
            tasks.cancel_scope.cancel()

    anyio.run(main)
