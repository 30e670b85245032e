"""GET /search, the search page and MCP's ``search`` tool give one answer (``citeline.server.answers``): for the
same request, the same passages at the same ranks, each with the same other documents it is also in, copies of its
work marked alike. A folder as people keep one: three articles, one saved twice (a copy of the same work), and a
JSONL file of records with metadata."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
from conftest import SEEDS, HashEmbedder
from fastapi.testclient import TestClient

from citeline import Index
from citeline.server import create_app

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("answers")
    docs = root / "docs"
    docs.mkdir()
    for seed in SEEDS.iterdir():
        (docs / seed.name).write_text(seed.read_text(encoding="utf-8"), encoding="utf-8")
    saved = sorted(SEEDS.iterdir())[1]
    (docs / "saved-copy.txt").write_text(saved.read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "records.jsonl").write_text(
        '{"_id": "r1", "title": "Ledger", "text": "Quartermaster ledgers show pay stopped.", "author": "Mara"}\n'
        '{"_id": "r2", "title": "Roll", "text": "The muster roll lists soldiers who left when pay stopped."}\n',
        encoding="utf-8",
    )
    Index.create(root / "ix", embedder=HashEmbedder()).ingest([docs])
    with TestClient(create_app(root / "ix", embedder=HashEmbedder()), base_url="http://127.0.0.1:8000") as client:
        yield client


def _json(client: TestClient, params: dict[str, str]) -> list[tuple[Any, ...]]:
    body = client.get("/search", params=params).json()
    return [
        (
            r["rank"],
            r["doc_id"],
            r["char_start"],
            r["char_end"],
            [
                (s["doc_id"], s["char_start"], r["work_id"] is not None and s["work_id"] == r["work_id"])
                for s in r["sources"]
                if (s["doc_id"], s["char_start"]) != (r["doc_id"], r["char_start"])
            ],
        )
        for r in body["results"]
    ]


def _mcp(client: TestClient, params: dict[str, str]) -> list[tuple[Any, ...]]:
    arguments: dict[str, Any] = {"query": params["q"], "mode": params["mode"]}
    arguments |= {name: params[name] == "true" for name in ("collapse", "group") if name in params}
    arguments |= {name: int(params[name]) for name in ("k", "offset") if name in params}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", "arguments": arguments}}
    answer = client.post("/mcp", json=call, headers=MCP_HEADERS).json()["result"]
    assert not answer.get("isError"), answer
    return [
        (
            c["rank"],
            c["doc_id"],
            c["char_start"],
            c["char_end"],
            [(a["doc_id"], a["char_start"], a["same_work"]) for a in c["also_in"]],
        )
        for c in answer["structuredContent"]["results"]
    ]


def _view(href: str) -> tuple[str, int]:
    url = urlsplit(unescape(href))
    return unquote(url.path.rsplit("/", 1)[1]), int(parse_qs(url.query)["start"][0])


def _page(client: TestClient, params: dict[str, str]) -> list[tuple[Any, ...]]:
    html = client.get("/", params=params).text
    start = re.search(r'<ol class="results" start="(\d+)">', html)
    if start is None:
        return []
    found = []
    for rank, item in enumerate(html.split('<li class="result">')[1:], int(start[1])):
        doc_id, char_start = _view(re.search(r'<h2><a href="([^"]+)"', item)[1])  # type: ignore[index]
        char_end = int(re.search(r"characters \d+–(\d+)", item)[1])  # type: ignore[index]
        sources = item.split('<details class="sources"', 1)[1].split("</details>", 1)[0] if "sources" in item else ""
        others = [
            (*_view(href), bool(copy))
            for copy, href in re.findall(r'<li>(<span class="copy">copy</span> )?<a href="([^"]+)"', sources)
        ]
        found.append((rank, doc_id, char_start, char_end, others))
    return found


REQUESTS = [
    {"q": "soldiers defect when pay stops", "mode": "hybrid", "group": "false"},
    {"q": "soldiers defect when pay stops", "mode": "lexical", "group": "true"},
    {"q": "pay stopped", "mode": "lexical", "collapse": "false", "group": "false", "k": "3", "offset": "1"},
    {"q": "letters from home", "mode": "dense", "group": "false", "k": "5"},
]


@pytest.mark.parametrize("params", REQUESTS, ids=lambda p: "-".join(f"{k}={v}" for k, v in p.items() if k != "q"))
def test_the_three_surfaces_answer_alike(client: TestClient, params: dict[str, str]) -> None:
    api, mcp, page = _json(client, params), _mcp(client, params), _page(client, params)
    assert api, "the request finds passages"
    assert api == mcp == page


def test_a_copy_of_the_same_work_is_marked_on_every_surface(client: TestClient) -> None:
    params = {"q": "soldiers defect when pay stops", "mode": "hybrid", "group": "false"}
    marked = [also for *_, others in _json(client, params) for also in others if also[2]]
    assert marked, "the saved copy is listed as a copy of its work"
    assert marked == [also for *_, others in _mcp(client, params) for also in others if also[2]]
    assert marked == [also for *_, others in _page(client, params) for also in others if also[2]]


def test_each_surface_builds_its_answer_with_search_answer() -> None:
    # The surfaces build no answer of their own: each calls citeline.server.answers.search_answer.
    server = Path(__file__).resolve().parents[2] / "citeline" / "server"
    for module in ("app.py", "page.py", "mcp/tools.py"):
        source = (server / module).read_text(encoding="utf-8")
        assert "search_answer(" in source and "service.search" not in source, module
