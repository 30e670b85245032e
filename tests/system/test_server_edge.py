"""What a web page the user visits must not do to ``citeline serve`` on the loopback (DNS rebinding: its own name
pointed at 127.0.0.1), and the security headers of every answer; on every route of the app, enumerated from the app
itself so that a new route is covered the day it is added."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import HashEmbedder
from fastapi.routing import APIRoute
from starlette.routing import Mount, Route
from test_server import _small_index, running

from citeline import Index
from citeline.server import create_app

HOSTILE_HOSTS = ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}", "localhost:1", "[::2]:{port}",
                 "localhost:{port}@evil.example", "", "127.0.0.1:{port}.", "xn--80ak6aa92e.com:{port}"]  # fmt: skip
HOSTILE_ORIGINS = ["http://evil.example", "http://evil.example:{port}", "null", "http://localhost:1",
                   "https://127.0.0.1.evil.example", "http://127.0.0.1:{port}/x", "file://"]  # fmt: skip


def _paths(app: object, doc_id: str) -> list[str]:
    """One concrete path for each route of ``app`` (and each method it takes), with a real document where the
    route takes one; a mount by one of its files."""
    found: list[str] = []
    for route in app.routes:  # type: ignore[attr-defined]
        if isinstance(route, Mount):
            found.append(f"{route.path}/swagger/swagger-ui.css")
        elif isinstance(route, APIRoute | Route):
            found.append(route.path.replace("{doc_id}", doc_id) + ("?q=river" if route.path == "/search" else ""))
    assert {"/", "/search?q=river", f"/documents/{doc_id}", "/mcp", "/docs", "/redoc"} <= set(found), found
    return found


@pytest.fixture(scope="module")
def app_and_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, Index, str]]:
    index = _small_index(tmp_path_factory.mktemp("edge"))
    app = create_app(index.path, HashEmbedder())
    with running(app, lifespan="on") as url:  # /mcp's session manager runs in the lifespan
        yield app, index, url


_CLIENT = httpx.Client(timeout=30)  # one connection pool: a client each request costs more than the request


def _get(url: str, path: str, **headers: str) -> httpx.Response:
    if path == "/mcp":  # a real MCP request, so that an allowed one is answered 200
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        return _CLIENT.post(url + path, json=body, headers={**accept, **headers})
    return _CLIENT.get(url + path, headers=headers)


def test_a_hostile_host_or_origin_is_refused_on_every_route(app_and_index: tuple[object, Index, str]) -> None:
    app, index, url = app_and_index
    port = int(url.rsplit(":", 1)[1])
    doc_id = index.documents()[0].doc_id
    for path in _paths(app, doc_id):
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            allowed = _get(url, path, Host=host)
            assert allowed.status_code == 200, (path, host, allowed.text[:300])
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            assert _get(url, path, Origin=origin).status_code == 200, (path, origin)
        for host in HOSTILE_HOSTS:
            refused = _get(url, path, Host=host.format(port=port))
            assert refused.status_code in (400, 421), (path, host, refused.status_code)  # 400: h11 refuses it first
            assert "Cavalry" not in refused.text
            if refused.status_code == 421:
                assert list(refused.json()) == ["error"]
        for origin in HOSTILE_ORIGINS:
            refused = _get(url, path, Origin=origin.format(port=port))
            assert refused.status_code == 403, (path, origin, refused.status_code)
            assert "Cavalry" not in refused.text


def test_allowed_hosts_and_cors_origins_are_answered(tmp_path: Path) -> None:
    index = _small_index(tmp_path)
    app = create_app(
        index.path, HashEmbedder(), allowed_hosts=["search.example", "Box.Local:8443"], cors=["https://app.example"]
    )
    with running(app) as url:
        port = int(url.rsplit(":", 1)[1])
        for host in ("search.example", f"search.example:{port}", "box.local:8443"):
            assert httpx.get(f"{url}/health", headers={"Host": host}).status_code == 200, host
        for host in ("box.local", f"box.local:{port}", "other.example"):
            assert httpx.get(f"{url}/health", headers={"Host": host}).status_code == 421, host
        assert httpx.get(f"{url}/health", headers={"Origin": "https://app.example"}).status_code == 200
        assert httpx.get(f"{url}/health", headers={"Origin": "https://search.example"}).status_code == 200
        assert httpx.get(f"{url}/health", headers={"Origin": "https://evil.example"}).status_code == 403
    with running(create_app(index.path, HashEmbedder(), allowed_hosts=["*"])) as url:
        assert httpx.get(f"{url}/health", headers={"Host": "anything.example"}).status_code == 200
    # With a token the token is the check: a proxy's Host passes, a request without the token does not.
    with running(create_app(index.path, HashEmbedder(), token="s3cret")) as url:
        good = {"Authorization": "Bearer s3cret", "Host": "search.example"}
        assert httpx.get(f"{url}/health", headers=good).status_code == 200
        assert httpx.get(f"{url}/health", headers={"Host": "search.example"}).status_code == 401


def _security_headers(response: httpx.Response, what: str) -> str:
    headers = response.headers
    assert headers["X-Content-Type-Options"] == "nosniff", what
    assert headers["X-Frame-Options"] == "DENY", what
    assert headers["Referrer-Policy"] == "no-referrer", what
    assert len(headers.get_list("Content-Security-Policy")) == 1, what
    policy = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy, what
    assert "unsafe-eval" not in policy, what
    return policy


def test_every_answer_carries_the_security_headers(app_and_index: tuple[object, Index, str]) -> None:
    app, index, url = app_and_index
    doc_id = index.documents()[0].doc_id
    port = int(url.rsplit(":", 1)[1])
    for path in _paths(app, doc_id):
        for headers in ({}, {"Host": "evil.example"}, {"Origin": "http://evil.example"}):
            _security_headers(_get(url, path, **headers), f"{path} {headers}")
    errors = ["/search", "/search?k=0&q=x", "/documents/nosuch", "/nosuch", "/assets/docs/nosuch.js", "/search?q=%ff"]
    for path in errors:
        response = httpx.get(url + path)
        assert response.status_code >= 400, path
        _security_headers(response, path)
    assert httpx.post(f"{url}/health").status_code == 405
    _security_headers(httpx.post(f"{url}/health"), "POST /health")
    # JSON, the assets and errors may load nothing at all; the page no script.
    assert _security_headers(httpx.get(f"{url}/health"), "json").startswith("default-src 'none'; base-uri 'none'")
    page = httpx.get(f"{url}/?q=river", headers={"Host": f"localhost:{port}"})
    policy = _security_headers(page, "page")
    assert "script-src" not in policy and "unsafe-inline" not in policy
    styles = re.findall(r"<style>(.*?)</style>", page.text, re.DOTALL)
    assert styles and all(_sha256(style) in policy for style in styles)


def _sha256(text: str) -> str:
    import base64
    import hashlib

    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_load_everything_their_policy_allows(app_and_index: tuple[object, Index, str], page: str) -> None:
    """No browser here: what the docs page loads is read from its HTML, each asset must be the server's own (and be
    served), each inline script allowed by its hash; a script injected elsewhere would not be."""
    _, _, url = app_and_index
    response = httpx.get(url + page)
    policy = _security_headers(response, page)
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    html = response.text
    for src in re.findall(r'<script src="([^"]+)"', html) + re.findall(r'<link[^>]+href="([^"]+)"', html):
        assert src.startswith("/assets/docs/"), src  # 'self'
        assert httpx.get(url + src).status_code == 200, src
    inline = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    assert (page == "/docs") == bool(inline)
    for script in inline:
        assert _sha256(script) in directives["script-src"]
    assert "'unsafe-inline'" not in directives["script-src"] and "'self'" in directives["script-src"]
    assert directives["connect-src"] == "'self'"  # the schema, and "Try it out", from this server only
    assert "http" not in policy
