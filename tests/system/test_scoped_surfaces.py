"""Every surface of a real ``citeline serve`` (uvicorn on a loopback port, a real HTTP client, the MCP SDK's own
streamable-HTTP client), walked with a scoped token: the routes are enumerated from the app and the tools, resources
and templates from the MCP server, so a surface added later is walked too. Nothing of a document outside the scope
(its id, file name, title, a word only it holds, a metadata value only it carries, a file that failed in its folder)
may reach the caller, and asking for a hidden document by id or name must answer exactly as for one that does not
exist (no existence oracle).

The folder is a team's as it sits on disk: a handbook the token may read, and beside it HR's files (one an exact
copy of a handbook page, one a PDF that fails to parse) and a customer's tickets, all ingested in one run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import pytest
from conftest import HashEmbedder
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from prometheus_client.parser import text_string_to_metric_families
from test_server import running

from citeline import Index
from citeline.server import create_app

#: Every identifying string of the hidden documents holds this (file names, titles, one word of their text, a
#: metadata value): no visible document, path or word does.
HIDDEN = "zq"
SHARED = (
    "The levee inspection covers the north embankment, the spillway gates and the pumping station every spring.\n\n"
    "Inspectors record cracks, seepage and settlement in the log, with a photograph of each finding."
)
FILES = {
    "handbook/levee.md": f"# Levee inspection\n\n{SHARED}\n",
    "handbook/leave.md": "# Leave\n\nStaff take leave in spring or autumn; the roster shows who covers the gates.\n",
    "handbook/audit.md": "---\nteam: public\n---\n# Audit\n\nThe yearly audit reads the log and the roster.\n",
    "hr/zq-levee-copy.md": f"# Zq levee copy\n\n{SHARED}\n",  # an exact copy of a visible page
    "hr/zq-salaries.md": "---\nteam: zqhr\n---\n# Zq salaries\n\nThe zqwombat salary table and the roster of leave.\n",
    "hr/zq-broken.pdf": "%PDF-1.7 not really a pdf",  # fails: the run's errors name it
    "tickets/zq-acme-outage.md": "# Zq outage\n\nThe pumping station outage in spring; the levee log was checked.\n",
}
QUERIES = ("levee inspection spring", "zqwombat salary", "roster leave", "pumping station outage")


@dataclass
class Site:
    url: str
    app: Any
    index: Index
    hidden: dict[str, str]  # doc_id -> source_id
    visible: set[str]
    headers: dict[str, str]
    owner: dict[str, str]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("scoped")
    folder = root / "company"
    for name, text in FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    index = Index.create(root / "index", embedder=HashEmbedder())
    index.ingest([folder])
    rows = index.documents()
    hidden = {row.doc_id: row.source_id for row in rows if not row.source_id.startswith("handbook/")}
    visible = {row.doc_id for row in rows} - set(hidden)
    assert len(hidden) == 3 and len(visible) == 3
    secret = index.tokens().add("contractors", {"path_glob": ["handbook/*"]})
    ops = index.tokens().add("ops", None, ["search", "read", "metrics"])
    app = create_app(index.path, HashEmbedder(), access_log="off")
    with running(app, lifespan="on") as url:
        yield Site(url, app, index, hidden, visible, {"Authorization": f"Bearer {secret}"},
                   {"Authorization": f"Bearer {ops}"})  # fmt: skip


def _leaks(site: Site, text: str, sent: Any = ()) -> list[str]:
    """The hidden documents' ids and marked strings in ``text``, but for what the caller ``sent`` (echoed back: the
    query box holds the query, a filter field its value)."""
    for value in sorted((str(v) for v in sent), key=len, reverse=True):
        for form in (
            value,
            quote(value, safe=""),
            quote(value),
            quote(value).replace("%20", "+"),
            value.replace(" ", "+"),
        ):
            text = text.replace(form, "")
    found = [doc_id for doc_id in site.hidden if doc_id in text]
    return found + sorted(set(re.findall(rf"\w*{HIDDEN}\w*", text, flags=re.IGNORECASE)))


def _names(site: Site) -> list[tuple[str, str]]:
    """(a hidden document's id or name, a name of the same shape that no document has)."""
    pairs = []
    for doc_id, source_id in site.hidden.items():
        pairs += [(doc_id, "f" * len(doc_id)), (source_id, source_id.replace(HIDDEN, "xx"))]
    return pairs


def _get_routes(app: Any) -> list[str]:
    # Every GET route of the app but /mcp (a GET there opens the protocol's event stream: the MCP test walks it) and
    # the static assets of the API docs.
    return sorted(
        route.path
        for route in app.routes
        if "GET" in getattr(route, "methods", ()) and route.path != "/mcp" and not route.path.startswith("/assets")
    )


def test_every_route_hides_what_the_scope_hides(site: Site) -> None:
    routes = _get_routes(site.app)
    assert {"/search", "/documents/{doc_id}", "/view/{doc_id}", "/metrics", "/runs"} <= set(routes)
    options = {"facets": "true", "group": "true", "collapse": "true", "highlight": "true", "k": "20",
               "limit": "200", "min_score": "0"}  # fmt: skip
    widening = [{}, {"path": "hr/*"}, {"path": "*"}, {"where": f"team={HIDDEN}hr"}, {"source": "company"},
                {"offset": "1", "k": "1", "limit": "1"}]  # fmt: skip
    walked = set()
    with httpx.Client(base_url=site.url, headers=site.headers, timeout=60) as client:
        for route in routes:
            if "{doc_id}" in route:
                for name, absent in _names(site):
                    refused = client.get(route.replace("{doc_id}", quote(name, safe="")))
                    missing = client.get(route.replace("{doc_id}", quote(absent, safe="")))
                    assert refused.status_code == missing.status_code == 404, (route, name, refused.text)
                    # the same answer as for a document that does not exist (the name given echoed, nothing more)
                    expected = missing.text.replace(absent, name).replace(quote(absent, safe=""), quote(name, safe=""))
                    assert refused.text == expected
                    assert not _leaks(site, missing.text)
                for doc_id in site.visible:
                    shown = client.get(route.replace("{doc_id}", doc_id))
                    assert shown.status_code == 200 and not _leaks(site, shown.text), route
                walked.add(route)
                continue
            for q in QUERIES:
                for extra in widening:
                    answer = client.get(route, params={"q": q, **options, **extra})
                    headers = json.dumps(dict(answer.headers))
                    sent = [q, *extra.values()]
                    leaked = _leaks(site, answer.text, sent) + _leaks(site, headers, sent)
                    assert not leaked, (route, q, extra, leaked, answer.status_code)
                    assert answer.status_code in (200, 403), (route, answer.status_code, answer.text)
            walked.add(route)
    assert walked == set(routes)


def test_the_search_answers_only_visible_documents_and_copies(site: Site) -> None:
    with httpx.Client(base_url=site.url, timeout=60) as client:
        owner = client.get("/search", params={"q": QUERIES[0], "k": 10}, headers=site.owner).json()["results"]
        assert any(len(hit["sources"]) > 1 for hit in owner), "the owner sees the copy in HR"
        for mode in ("lexical", "dense", "hybrid"):
            scoped = client.get("/search", params={"q": QUERIES[0], "k": 10, "mode": mode}, headers=site.headers)
            for hit in scoped.json()["results"]:
                assert hit["doc_id"] in site.visible
                assert {source["doc_id"] for source in hit["sources"]} <= site.visible
        status = client.get("/status", headers=site.headers).json()
        assert status["documents"] == len(site.visible) and status["last_run"] is None
        assert client.get("/runs", headers=site.headers).status_code == 403
        assert client.get("/metrics", headers=site.headers).status_code == 403


def _arguments(schema: dict[str, Any], doc_id: str, query: str) -> dict[str, Any]:
    """Arguments for a tool from its input schema: every string a document is named by gets ``doc_id``, a query
    ``query``, every required number a small one."""
    arguments: dict[str, Any] = {}
    for name, spec in schema.get("properties", {}).items():
        if name in ("doc_id", "document"):
            arguments[name] = doc_id
        elif name in ("query", "q"):
            arguments[name] = query
        elif name == "char_end":
            arguments[name] = 20
        elif name in schema.get("required", ()) and spec.get("type") == "integer":
            arguments[name] = 0
    return arguments


def test_every_mcp_tool_resource_and_template_hides_what_the_scope_hides(site: Site) -> None:
    async def main() -> None:
        async with (
            create_mcp_http_client(headers=site.headers) as http,
            streamable_http_client(f"{site.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = (await session.list_tools()).tools
            assert {"search", "get_document", "get_passage", "list_documents", "index_status"} <= {
                t.name for t in tools
            }
            texts: list[tuple[str, list[str]]] = []  # (an answer, what its request sent)
            for tool in tools:
                names = _names(site) if "doc_id" in tool.input_schema.get("properties", {}) else [("", "")]
                for name, absent in names:
                    for query in QUERIES:
                        arguments = _arguments(tool.input_schema, name, query)
                        got = await session.call_tool(tool.name, arguments)
                        texts.append((got.model_dump_json(), [str(value) for value in arguments.values()]))
                        if name:
                            nothing = await session.call_tool(tool.name, _arguments(tool.input_schema, absent, query))
                            assert got.is_error and nothing.is_error, (tool.name, name)
                            shown = got.content[0].text  # type: ignore[union-attr]
                            assert shown == nothing.content[0].text.replace(absent, name)  # type: ignore[union-attr]
                            break  # (the query does not matter to a lookup)
            listed = await session.list_resources()
            texts.append((listed.model_dump_json(), []))
            assert {str(resource.uri).split("//")[1] for resource in listed.resources} == site.visible
            templates = (await session.list_resource_templates()).resource_templates
            assert templates
            uris = ["citeline://{doc_id}"] + [template.uri_template for template in templates]
            for uri in uris:
                for name, absent in _names(site)[::2]:  # resources are named by id
                    errors = []
                    for which in (name, absent):
                        filled = uri.replace("{doc_id}", which).replace("{start}", "0").replace("{end}", "10")
                        with pytest.raises(MCPError) as raised:
                            await session.read_resource(filled)
                        errors.append(raised.value.error)
                    assert errors[0].code == errors[1].code
                    assert errors[0].message == errors[1].message.replace(absent, name), (uri, name)
            leaked = [found for text, sent in texts for found in _leaks(site, text, sent)]
            assert not leaked, leaked

    anyio.run(main)


def test_metrics_stay_bounded_under_hostile_traffic_and_parse(site: Site) -> None:
    """Hundreds of distinct paths, bogus tokens and odd methods: the series stay a handful (route patterns and statuses,
    never a path, query or token), and the scrape parses as Prometheus text."""
    with httpx.Client(base_url=site.url, timeout=60) as client:
        before = client.get("/metrics", headers=site.owner)
        assert before.status_code == 200
        series_before = {s.name + json.dumps(s.labels, sort_keys=True)
                         for family in text_string_to_metric_families(before.text) for s in family.samples}  # fmt: skip
        for n in range(150):
            token = {"Authorization": f"Bearer cl_bogus{n}"} if n % 2 else site.headers
            client.get(f"/{HIDDEN}path{n}/x?q={HIDDEN}query{n}", headers=token)
            client.get(f"/documents/{HIDDEN}{n}", headers=token)
            if n % 25 == 0:
                client.request("PATCH", f"/search?q={HIDDEN}{n}", headers=token)
                client.get("/metrics", headers={"Authorization": f"Bearer {HIDDEN}{n}"})
        scrape = client.get("/metrics", headers=site.owner)
    families = list(text_string_to_metric_families(scrape.text))
    series = {s.name + json.dumps(s.labels, sort_keys=True) for family in families for s in family.samples}
    assert not _leaks(site, scrape.text) and "cl_" not in scrape.text and "bogus" not in scrape.text
    labels = {(key, value) for family in families for s in family.samples for key, value in s.labels.items()}
    routes = {value for key, value in labels if key == "route"}
    assert routes <= {*_get_routes(site.app), "/mcp", "/assets/docs", "other"}, routes
    assert len(series - series_before) < 120, sorted(series - series_before)
    statuses = {
        s.labels["status"] for family in families for s in family.samples if s.name == "citeline_requests_total"
    }
    assert all(re.fullmatch(r"[1-5]\d\d", status) for status in statuses), statuses
