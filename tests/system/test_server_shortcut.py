"""``GET /search`` through :class:`citeline.server.shortcut.QueryRoute`'s shortcut answers byte for byte what
FastAPI's own handler of the route answers: the same app with and without the shortcut, asked the same generated
query strings (valid values, values just outside their bounds, repeated and unknown parameters, malformed filters and
dates, odd encodings), give the same status, headers and body."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import hypothesis
import pytest
from _common import examples
from conftest import HashEmbedder
from fastapi import FastAPI
from fastapi.routing import APIRoute, request_response
from fastapi.testclient import TestClient
from hypothesis import strategies as st

from citeline import Index, QueryError
from citeline.server import create_app
from citeline.server.service import ServerBusyError
from citeline.server.shortcut import QueryRoute, _Shortcut

_TEXTS = [
    ("a.md", "---\nyear: 2021\nauthor: Mara\n---\n# River\n\nCavalry crossed the river at dawn. Épée drawn.\n"),
    ("b.md", "---\nyear: 2022\nauthor: Ilse\n---\n# Frost\n\nThe river froze; the cavalry waited for spring.\n"),
    ("notes/c.txt", "A cavalry patrol rode along the river and counted 39.00 in pay.\n"),
    ("notes/d.md", "# Copy\n\nCavalry crossed the river at dawn. Épée drawn.\n"),
]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, TestClient]]:
    """The app with its shortcut and the same app without it, over one index."""
    root = tmp_path_factory.mktemp("shortcut")
    for name, text in _TEXTS:
        (root / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / name).write_text(text, encoding="utf-8")
    Index.create(root / "ix", embedder=HashEmbedder()).ingest([root / "docs"])
    direct = create_app(root / "ix", embedder=HashEmbedder())
    routed = create_app(root / "ix", embedder=HashEmbedder())
    _without_shortcut(routed)
    with TestClient(direct) as fast, TestClient(routed) as slow:
        yield fast, slow


def _without_shortcut(app: FastAPI) -> None:
    """``app`` with FastAPI's own handler on its shortcut routes (the reference the shortcut must answer as)."""
    routes = [route for route in app.router.routes if isinstance(route, QueryRoute)]
    assert [route.path for route in routes] == ["/search"]
    for route in routes:
        route.app = request_response(APIRoute.get_route_handler(route))


def _parameters(app: FastAPI) -> dict[str, Any]:
    """``/search``'s query parameters (its dependencies' included) by name: their FastAPI fields."""
    route = next(r for r in app.routes if isinstance(r, APIRoute) and r.path == "/search")
    return {field.alias: field for field in _Shortcut(route).fields}


def _values() -> st.SearchStrategy[str]:
    # Values of every kind a parameter may be given: numbers around every bound, the choices and near misses,
    # booleans in their spellings, dates good and bad, where clauses good and bad, text of any script, nothing.
    numbers = st.sampled_from(["-1", "0", "0.5", "1", "1.0", "2", "3", "10", "50", "51", "100", "101", "1e3", "nan"])
    words = st.sampled_from(
        ["hybrid", "dense", "lexical", "HYBRID", "true", "false", "yes", "off", "1", "0", "on", "no", "maybe"]
    )
    dates = st.sampled_from(["2020-01-01", "2999-12-31T00:00:00+00:00", "yesterday", "2021-13-01", "2021"])
    clauses = st.sampled_from(
        ["year=2021", "year>=2022", "author=Mara", "price=39", "year", "=x", "year~2", "notes/*.txt", "*.md", "a.md"]
    )
    return st.one_of(numbers, words, dates, clauses, st.text(max_size=12), st.just(""), st.just("x" * 2001))


#: Values a search takes, by parameter (what the generated searches mostly give: most of them are answered 200).
_VALID = {
    "q": ["cavalry river", "épée", "39.00", "spring", "zzz", "price=39", "  padded  "],
    "k": ["1", "2", "3", "10", "50"],
    "offset": ["0", "1", "3", "7"],
    "mode": ["hybrid", "dense", "lexical"],
    "collapse_threshold": ["0.5", "0.9", "0.95", "1"],
    "min_score": ["0", "0.01", "0.5", "1"],
    "source": ["a.md", "notes/c.txt", "zzz"],
    "path": ["notes/*", "*.md", "**"],
    "where": ["year=2021", "year>=2022", "author=Mara", "year<2022"],
    "ingested_after": ["2020-01-01", "2999-12-31"],
    "ingested_before": ["2020-01-01", "2999-12-31T00:00:00+00:00"],
}
_SWITCH = ["true", "false", "1", "0", "yes", "off"]


@st.composite
def _query_strings(draw: st.DrawFn, names: list[str]) -> str:
    keys = st.sampled_from([*names, "unknown", "Q", "k[]"])
    pairs = []
    for _ in range(draw(st.integers(0, 5))):
        key = draw(keys)
        valid = _VALID.get(key, _SWITCH if key in names else [])
        odd = not valid or draw(st.integers(0, 4)) == 0  # a value of any kind, a fifth of the time
        pairs.append((key, draw(_values() if odd else st.sampled_from(valid))))
    if draw(st.integers(0, 5)) > 0:  # most searches name their query; some do not
        pairs.insert(draw(st.integers(0, len(pairs))), ("q", draw(st.sampled_from(_VALID["q"]))))
    text = "&".join(f"{quote(key)}={quote(value)}" for key, value in pairs)
    odd = draw(st.sampled_from(["", "", "", "&", "&&x", "&q", "&%", "&k=%FF", "&q=a+b", "&source"]))
    return text + odd


@hypothesis.settings(max_examples=examples(300), deadline=None)
@hypothesis.given(data=st.data())
def test_the_shortcut_answers_what_the_route_answers(pair: tuple[TestClient, TestClient], data: Any) -> None:
    fast, slow = pair
    query = data.draw(_query_strings(sorted(_parameters(fast.app))))  # type: ignore[arg-type]
    ours, theirs = fast.get(f"/search?{query}"), slow.get(f"/search?{query}")
    hypothesis.event(f"status {ours.status_code}")
    assert ours.status_code == theirs.status_code, query
    assert ours.headers.multi_items() == theirs.headers.multi_items(), query
    assert ours.content == theirs.content, query


def test_every_parameter_and_error_kind_is_answered_alike(pair: tuple[TestClient, TestClient]) -> None:
    """Each parameter with a value that is valid and one that is not, the filters' malformed values (a
    CitelineError the route raises), facets, paging; and the shortcut answers the valid ones itself."""
    fast, slow = pair
    cases = [
        "q=cavalry&k=1",
        "q=cavalry&k=0",
        "q=cavalry&offset=1&k=2",
        "q=cavalry&mode=lexical&facets=true",
        "q=cavalry&where=year%3E%3D2022",
        "q=cavalry&where=nonsense",  # a malformed clause: the route's QueryError, 400
        "q=cavalry&ingested_after=yesterday",  # a bad date
        "q=cavalry&source=a.md&source=notes/c.txt",
        "q=cavalry&path=notes/*",
        "q=39.00&mode=lexical",
        "q=cavalry&min_score=1.5",
        "q=&k=2",
        "k=2",
        *(f"q=cavalry&{name}=" for name in _parameters(fast.app)),
        *(f"q=cavalry&{name}=1" for name in _parameters(fast.app)),
    ]
    answered = 0
    original = _Shortcut.answer

    async def counted(self: _Shortcut, values: dict[str, Any]) -> Any:
        nonlocal answered
        answered += 1
        return await original(self, values)

    _Shortcut.answer = counted  # type: ignore[method-assign]
    try:
        for query in cases:
            ours, theirs = fast.get(f"/search?{query}"), slow.get(f"/search?{query}")
            assert (ours.status_code, ours.headers.multi_items(), ours.content) == (
                theirs.status_code,
                theirs.headers.multi_items(),
                theirs.content,
            ), query
    finally:
        _Shortcut.answer = original  # type: ignore[method-assign]
    assert answered >= 10, "the shortcut answered too few of the valid searches itself"
    statuses = {fast.get(f"/search?{query}").status_code for query in cases}
    assert statuses == {200, 400}


def test_other_methods_paths_and_a_prefix_go_to_the_route(tmp_path: Path) -> None:
    """``HEAD``, ``/search/`` and a proxy's path prefix are answered as FastAPI answers them."""
    Index.create(tmp_path / "ix", embedder=HashEmbedder()).ingest([Path(__file__).parent.parent.parent / "seeds"])
    apps = [create_app(tmp_path / "ix", embedder=HashEmbedder()) for _ in range(2)]
    _without_shortcut(apps[1])
    for root_path, method, path in itertools.product(["", "/api"], ["GET", "HEAD", "POST"], ["/search", "/search/"]):
        answers = []
        for app in apps:
            client = TestClient(app, root_path=root_path)  # no lifespan: the MCP session manager runs once an app
            answer = client.request(method, f"{root_path}{path}?q=river", follow_redirects=False)
            answers.append((answer.status_code, answer.headers.multi_items(), answer.content))
        assert answers[0] == answers[1], (root_path, method, path)


def test_a_route_the_shortcut_cannot_answer_is_refused_when_the_app_starts(tmp_path: Path) -> None:
    """A route with a parameter that is not a query parameter (a path parameter here) is not shortcut silently:
    declaring it as a :class:`QueryRoute` fails."""
    Index.create(tmp_path / "ix", embedder=HashEmbedder())
    app = create_app(tmp_path / "ix", embedder=HashEmbedder())
    route = next(r for r in app.routes if isinstance(r, APIRoute) and r.path == "/documents/{doc_id}")
    with pytest.raises(ValueError, match="coroutines of query parameters"):
        app.router.add_api_route(
            "/documents/{doc_id}",
            route.endpoint,
            methods=["GET"],
            response_model=route.response_model,
            route_class_override=QueryRoute,
        )


def test_a_dependency_overridden_is_honoured(pair: tuple[TestClient, TestClient]) -> None:
    """``app.dependency_overrides`` (how tests and embedding apps replace a dependency) reaches the route: with one
    set, the shortcut leaves every request to FastAPI."""
    fast, _ = pair
    route = next(r for r in fast.app.routes if isinstance(r, APIRoute) and r.path == "/search")  # type: ignore[attr-defined]
    filters = next(part.call for part in route.dependant.dependencies if part.name == "filters")

    async def only_a() -> dict[str, Any]:
        return {"source": ["a.md"]}

    fast.app.dependency_overrides[filters] = only_a  # type: ignore[attr-defined]
    try:
        found = fast.get("/search", params={"q": "cavalry river", "mode": "lexical"}).json()["results"]
    finally:
        fast.app.dependency_overrides.clear()  # type: ignore[attr-defined]
    assert found and {result["source_path"].rsplit("/", 1)[-1] for result in found} == {"a.md"}
    unfiltered = fast.get("/search", params={"q": "cavalry river", "mode": "lexical"}).json()["results"]
    assert len({result["source_path"] for result in unfiltered}) > 1


@pytest.mark.parametrize(
    "raised", [ServerBusyError("the server is busy"), QueryError("no such field"), RuntimeError("a bug")]
)
def test_what_the_route_raises_is_answered_alike(
    pair: tuple[TestClient, TestClient], monkeypatch: pytest.MonkeyPatch, raised: Exception
) -> None:
    """A busy server (503 with Retry-After), a CitelineError with its own status, and a bug (500, Starlette's
    outermost handler): the same answer whichever way the request went."""
    fast, slow = pair

    async def failing(*args: Any, **kwargs: Any) -> Any:
        raise raised

    monkeypatch.setattr("citeline.server.app.search_answer", failing)
    answers = []
    for app in (fast.app, slow.app):
        client = TestClient(app, raise_server_exceptions=False)  # type: ignore[arg-type]
        answer = client.get("/search", params={"q": "cavalry"})
        answers.append((answer.status_code, answer.headers.multi_items(), answer.content))
    assert answers[0] == answers[1]
    assert answers[0][0] == {ServerBusyError: 503, QueryError: 400, RuntimeError: 500}[type(raised)]
