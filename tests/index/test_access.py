"""Scoped access, proved on every surface: nothing of a document outside a token's scope (its id, path, title,
text marker, metadata value, a facet count, its existence) reaches the caller, through the HTTP routes (a real
FastAPI app through its TestClient), the MCP tools and resources (streamable HTTP, the same app) and the page; and a
scoped search still returns k results when k visible passages exist (the scope applies before ranking).

The property test generates the documents (folders, metadata, exact copies of one another), the scope and the
request; the attack cases try to widen a scope through the query string, filters, record ids and names, resource
URIs, paging, grouping and collapse (a hidden copy of a visible document), and check the tokens file's life: hashed,
revoked and rotated under a running server, picked up without a restart.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import HashEmbedder
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from citeline import Index
from citeline.server import create_app
from citeline.store.documents import identifier_fields

FOLDERS = ("handbook", "hr", "tickets/acme", "tickets/globex")
TEAMS = ("public", "hr", "support")
CUSTOMERS = (None, "acme", "globex")
WORDS = ("salary", "holiday", "levee", "invoice", "outage", "refund", "audit", "backup", "contract", "roster")
SENTENCES = [
    f"The {a} review covers the {b} and the {c}."
    for a, b, c in zip(WORDS, WORDS[3:] + WORDS[:3], WORDS[6:] + WORDS[:6], strict=True)
]
#: The served index's own token (``serve --token``): the owner, who sees everything.
OWNER = {"Authorization": "Bearer owner-s3cret"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass(frozen=True)
class Doc:
    """A generated document: its marker (in its id, title and ``ref`` metadata, nowhere else) and where it is."""

    mark: str
    folder: str
    team: str
    customer: str | None
    body: str

    @property
    def source_id(self) -> str:
        return f"{self.folder}/{self.mark}"

    @property
    def metadata(self) -> dict[str, Any]:
        values: dict[str, Any] = {"team": self.team, "ref": f"ref-{self.mark}"}
        if self.customer:
            values["customer"] = self.customer
        return values


@dataclass
class Served:
    """An index with the documents, its app's client, and each document's id."""

    index: Index
    client: TestClient
    docs: list[Doc]
    ids: dict[str, str] = field(default_factory=dict)  # mark -> doc_id


@st.composite
def collections(draw: st.DrawFn) -> list[Doc]:
    """Documents in folders as a team keeps them; some are exact copies of another's text (collapse merges them)."""
    count = draw(st.integers(3, 9))
    docs: list[Doc] = []
    for n in range(count):
        if docs and draw(st.booleans()) and draw(st.booleans()):
            body = draw(st.sampled_from(docs)).body  # an exact copy, perhaps in a folder the scope hides
        else:
            body = " ".join(draw(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=3)))
        docs.append(
            Doc(
                mark=f"m{n:02d}q",
                folder=draw(st.sampled_from(FOLDERS)),
                team=draw(st.sampled_from(TEAMS)),
                customer=draw(st.sampled_from(CUSTOMERS)),
                body=body,
            )
        )
    return docs


SCOPE_GLOBS = ("handbook/*", "tickets/*", "tickets/acme/*", "hr/*", "*/m0*", "*q")
scopes = st.one_of(
    st.fixed_dictionaries({"path_glob": st.lists(st.sampled_from(SCOPE_GLOBS), min_size=1, max_size=2, unique=True)}),
    st.builds(lambda team: {"meta": {"team": team}}, st.sampled_from(TEAMS)),
    st.builds(
        lambda customer: {"meta": {"customer": {"in": list(customer)}}},
        st.lists(st.sampled_from(["acme", "globex"]), min_size=1, max_size=2, unique=True),
    ),
    st.builds(lambda team: {"meta": {"team": {"!=": team}}}, st.sampled_from(TEAMS)),
    st.builds(
        lambda glob, team: {"path_glob": [glob], "meta": {"team": team}},
        st.sampled_from(SCOPE_GLOBS),
        st.sampled_from(TEAMS),
    ),
)
requests = st.fixed_dictionaries(
    {
        "q": st.lists(st.sampled_from(WORDS), min_size=1, max_size=2).map(" ".join),
        "k": st.integers(1, 6),
        "offset": st.integers(0, 3),
        "mode": st.sampled_from(["lexical", "hybrid", "dense"]),
        "collapse": st.booleans(),
        "group": st.booleans(),
        "facets": st.booleans(),
    },
    optional={
        # attempts to widen the scope through the request's own filters
        "path": st.sampled_from(["hr/*", "tickets/globex/*", "*"]),
        "where": st.sampled_from(["team=hr", "team!=public", "customer=globex", "ref~m0"]),
    },
)


def visible(doc: Doc, scope: dict[str, Any]) -> bool:
    """The scope's rule, written again in Python (the oracle; the server runs it as SQL)."""
    globs = scope.get("path_glob")
    if globs and not any(
        fnmatch.fnmatchcase(doc.source_id, glob) or fnmatch.fnmatchcase(f"wiki:{doc.source_id}", glob) for glob in globs
    ):
        return False
    for key, wanted in scope.get("meta", {}).items():
        value = doc.metadata.get(key)
        if isinstance(wanted, dict) and "!=" in wanted:
            if value == wanted["!="]:
                return False
        elif isinstance(wanted, dict):
            if value not in wanted["in"]:
                return False
        elif value != wanted:
            return False
    return True


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="citeline-access-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _serve(root: Path, docs: list[Doc]) -> tuple[Index, dict[str, str]]:
    index = Index.create(root / "index", embedder=HashEmbedder())
    index.add_texts(
        [doc.body for doc in docs],
        ids=[doc.source_id for doc in docs],
        metadata=[doc.metadata for doc in docs],
        titles=[f"Note {doc.mark}" for doc in docs],
        source="wiki",
    )
    ids = {row.source_id.rsplit("/", 1)[1]: row.doc_id for row in index.documents()}
    return index, ids


def _mcp(client: TestClient, headers: dict[str, str], method: str, params: dict[str, Any]) -> dict[str, Any]:
    answer = client.post(
        "/mcp", headers={**headers, **MCP_HEADERS}, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def _tool(client: TestClient, headers: dict[str, str], name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return _mcp(client, headers, "tools/call", {"name": name, "arguments": arguments})


def _leaks(text: str, hidden: list[Doc], ids: dict[str, str]) -> list[str]:
    """The hidden documents' identifying strings found in ``text``."""
    return [mark for doc in hidden for mark in (doc.mark, ids[doc.mark]) if mark in text]


def _every_surface(
    client: TestClient, secret: str, docs: list[Doc], ids: dict[str, str], scope: dict[str, Any], ask: dict[str, Any]
) -> None:
    """Ask ``ask`` on every surface with the scoped token; fail on anything of a hidden document."""
    headers = {"Authorization": f"Bearer {secret}"}
    shown = [doc for doc in docs if visible(doc, scope)]
    hidden = [doc for doc in docs if not visible(doc, scope)]
    texts: list[str] = []

    params = {key: value for key, value in ask.items() if key not in ("path", "where")}
    params.update({key: ask[key] for key in ("path", "where") if key in ask})
    found = client.get("/search", params=params, headers=headers)
    assert found.status_code == 200, found.text
    texts.append(found.text)
    answer = found.json()
    allowed = {ids[doc.mark] for doc in shown}
    for result in answer["results"]:
        assert result["doc_id"] in allowed
        assert {source["doc_id"] for source in result["sources"]} <= allowed
    if ask["facets"]:
        for facet in answer["facets"]:
            assert facet["field"] != "ref" or all(value["value"].split("-")[1] in {d.mark for d in shown}
                                                  for value in facet["values"])  # fmt: skip

    listing = client.get("/documents", params={"limit": 100}, headers=headers)
    assert {row["doc_id"] for row in listing.json()} == allowed
    texts.append(listing.text)
    paged = client.get("/documents", params={"limit": 1, "offset": ask["offset"]}, headers=headers)
    texts.append(paged.text + paged.headers.get("Link", ""))

    facets = {facet["field"]: facet for facet in client.get("/facets", params={"limit": 100}, headers=headers).json()}
    expected = Counter(doc.team for doc in shown)
    counted = {value["value"]: value["count"] for value in facets["team"]["values"]} if "team" in facets else {}
    # No facet for a field whose visible values are nearly all distinct (store.documents.identifier_fields): judged
    # on what the caller sees, so the hidden documents never decide it either.
    held = {("team", team): n for team, n in expected.items()} | {("team", None): len(shown)}
    assert counted == ({} if identifier_fields(held) else dict(expected))

    status = client.get("/status", headers=headers)
    assert status.json()["documents"] == len(shown) and status.json()["last_run"] is None
    texts.append(status.text)

    nowhere = "0123456789abcdef"
    for doc in hidden[:2]:  # (each name costs requests; the examples vary which documents are hidden)
        for name, absent in (
            (ids[doc.mark], nowhere),
            (doc.source_id, f"{doc.folder}/n99q"),
            (f"wiki:{doc.source_id}", f"wiki:{doc.folder}/n99q"),
        ):
            # a hidden document is answered as one of the same shape that does not exist
            for route in ("/documents/", "/view/"):
                refused, missing = (client.get(route + text, headers=headers) for text in (name, absent))
                assert refused.status_code == missing.status_code and refused.status_code in (404,)
                assert refused.text == missing.text.replace(absent, name)

    page = client.get("/", params={k: v for k, v in params.items() if k != "facets"}, headers=headers)
    assert page.status_code == 200
    texts.append(page.text)

    mcp_filters = {key: [ask[key]] for key in ("path", "where") if key in ask}
    tool = _tool(client, headers, "search", {"query": ask["q"], "k": ask["k"], "mode": ask["mode"],
                                              "collapse": ask["collapse"], "group": ask["group"],
                                              **({"filters": mcp_filters} if mcp_filters else {})})  # fmt: skip
    texts.append(json.dumps(tool))
    texts.append(json.dumps(_tool(client, headers, "list_documents", {"limit": 50})))
    texts.append(json.dumps(_mcp(client, headers, "resources/list", {})))
    missing_tool = _tool(client, headers, "get_document", {"doc_id": nowhere})["result"]["content"][0]["text"]
    for doc in hidden[:2]:
        got = _tool(client, headers, "get_document", {"doc_id": ids[doc.mark]})["result"]
        assert got["isError"] and got["content"][0]["text"] == missing_tool.replace(nowhere, ids[doc.mark])
        read = _mcp(client, headers, "resources/read", {"uri": f"citeline://{ids[doc.mark]}/chars/0-5"})
        assert "result" not in read and read["error"]["message"].startswith("no document")

    leaked = [found for text in texts for found in _leaks(text, hidden, ids)]
    assert not leaked, f"hidden documents' marks reached the caller: {leaked}"


@settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # an index per example: shrinking would take minutes
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(docs=collections(), scope=scopes, ask=requests)
def test_nothing_outside_the_scope_reaches_the_caller(
    workdir: Path, docs: list[Doc], scope: dict[str, Any], ask: dict[str, Any]
) -> None:
    root = Path(tempfile.mkdtemp(dir=workdir))
    index, ids = _serve(root, docs)
    secret = index.tokens().add("team", scope)
    with TestClient(create_app(index.path, HashEmbedder(), access_log="off")) as client:
        _every_surface(client, secret, docs, ids, scope, ask)
    shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- one index, many scopes and requests


@pytest.fixture(scope="module")
def served(workdir: Path) -> Iterator[Served]:
    """A team's folder: the handbook (public), HR's files, two customers' tickets; the HR folder holds an exact copy
    of a handbook page, and globex's tickets a copy of an acme ticket."""
    docs = [
        Doc("m00q", "handbook", "public", None, SENTENCES[0] + " " + SENTENCES[1]),
        Doc("m01q", "handbook", "public", None, SENTENCES[2]),
        Doc("m02q", "handbook", "public", None, SENTENCES[3] + " " + SENTENCES[4]),
        Doc("m03q", "hr", "hr", None, SENTENCES[0] + " " + SENTENCES[1]),  # a hidden copy of m00q
        Doc("m04q", "hr", "hr", None, SENTENCES[5]),
        Doc("m05q", "tickets/acme", "support", "acme", SENTENCES[6] + " " + SENTENCES[7]),
        Doc("m06q", "tickets/globex", "support", "globex", SENTENCES[6] + " " + SENTENCES[7]),  # copy of m05q
        Doc("m07q", "tickets/globex", "support", "globex", SENTENCES[8]),
        Doc("m08q", "tickets/acme", "support", "acme", SENTENCES[9] + " " + SENTENCES[0]),
    ]
    root = workdir / "served"
    root.mkdir()
    index, ids = _serve(root, docs)
    with TestClient(create_app(index.path, HashEmbedder(), token=OWNER["Authorization"][7:])) as client:
        yield Served(index, client, docs, ids)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scope=scopes, ask=requests)
def test_many_scopes_on_one_index(served: Served, scope: dict[str, Any], ask: dict[str, Any]) -> None:
    tokens = served.index.tokens()
    for token in tokens.list():
        tokens.revoke(token.name)
    secret = tokens.add("team", scope)  # the running server reads the file again: no restart
    _every_surface(served.client, secret, served.docs, served.ids, scope, ask)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scope=scopes, word=st.sampled_from(WORDS), k=st.integers(1, 8), mode=st.sampled_from(["lexical", "dense"]))
def test_a_scoped_search_returns_the_visible_hits_in_the_order_of_the_whole_ranking(
    served: Served, scope: dict[str, Any], word: str, k: int, mode: str
) -> None:
    """The scope filters before ranking: a scoped search's k hits are the whole ranking's hits of visible
    documents, the first k of them (not fewer because hidden ones ranked higher)."""
    tokens = served.index.tokens()
    for token in tokens.list():
        tokens.revoke(token.name)
    secret = tokens.add("team", scope)
    allowed = {served.ids[doc.mark] for doc in served.docs if visible(doc, scope)}
    common = {"q": word, "mode": mode, "collapse": False, "min_score": 0}
    whole = served.client.get("/search", params={**common, "k": 100}, headers=OWNER).json()["results"]
    expected = [hit["chunk_id"] for hit in whole if hit["doc_id"] in allowed][:k]
    scoped = served.client.get("/search", params={**common, "k": k}, headers={"Authorization": f"Bearer {secret}"})
    assert [hit["chunk_id"] for hit in scoped.json()["results"]] == expected


# ---------------------------------------------------------------- attacks


def _token(served: Served, scope: dict[str, Any], permissions: tuple[str, ...] = ()) -> dict[str, str]:
    tokens = served.index.tokens()
    for token in tokens.list():
        tokens.revoke(token.name)
    secret = tokens.add("contractor", scope, permissions or None)
    return {"Authorization": f"Bearer {secret}"}


def test_request_filters_never_widen_the_scope(served: Served) -> None:
    headers = _token(served, {"path_glob": ["handbook/*"]})
    for params in (
        {"path": "hr/*"},
        {"where": "team=hr"},
        {"source": "wiki"},
        {"path": "*", "where": "ref~m0"},
        {"path": "handbook/*"},
    ):
        found = served.client.get("/search", params={"q": "salary review", "k": 10, **params}, headers=headers)
        assert found.status_code == 200
        assert {hit["doc_id"] for hit in found.json()["results"]} <= {served.ids[m] for m in ("m00q", "m01q", "m02q")}
        assert "m03q" not in found.text and served.ids["m03q"] not in found.text
        listed = served.client.get("/documents", params=params, headers=headers)
        assert {row["source_id"] for row in listed.json()} <= {"handbook/m00q", "handbook/m01q", "handbook/m02q"}


def test_a_hidden_copy_is_never_listed_by_collapse_or_grouping(served: Served) -> None:
    # m05q (acme) and m06q (globex) hold the same text: the owner sees one result listing both
    acme, globex = served.ids["m05q"], served.ids["m06q"]
    ask = {"q": "audit review backup", "k": 5, "mode": "lexical"}
    owner = served.client.get("/search", params=ask, headers=OWNER).json()
    assert any({source["doc_id"] for source in hit["sources"]} >= {acme, globex} for hit in owner["results"])
    headers = _token(served, {"meta": {"customer": "acme"}})
    for group in ("false", "true"):
        for mode in ("lexical", "hybrid"):
            found = served.client.get(
                "/search", params={**ask, "mode": mode, "group": group, "facets": "true"}, headers=headers
            )
            assert globex not in found.text and "m06q" not in found.text and "globex" not in found.text
            assert any([source["doc_id"] for source in hit["sources"]] == [acme] for hit in found.json()["results"])
    tool = _tool(served.client, headers, "search", {"query": ask["q"], "k": 5, "group": True})
    assert globex not in json.dumps(tool) and "m06q" not in json.dumps(tool)


def test_record_ids_names_and_resource_uris_of_hidden_documents_do_not_exist(served: Served) -> None:
    headers = _token(served, {"path_glob": ["handbook/*"]})
    hidden = served.ids["m04q"]
    absent = served.client.get("/documents/ffffffffffffffff", headers=headers).json()["error"]
    for name in (hidden, hidden.upper()):
        answer = served.client.get(f"/documents/{name}", headers=headers)
        assert answer.status_code == 404 and answer.json()["error"] == absent.replace("ffffffffffffffff", name)
    for name in ("hr/m04q", "wiki:hr/m04q", "m04q"):  # names, as search results print them
        refused = _tool(served.client, headers, "get_document", {"doc_id": name})["result"]["content"][0]["text"]
        missing = _tool(served.client, headers, "get_document", {"doc_id": name.replace("m04q", "n99q")})
        assert refused == missing["result"]["content"][0]["text"].replace("n99q", "m04q")
    for uri in (f"citeline://{hidden}", f"citeline://{hidden}/chars/0-10", f"citeline://{hidden}/chars/0-0"):
        read = _mcp(served.client, headers, "resources/read", {"uri": uri})
        assert read["error"]["message"].startswith(f"no document {hidden!r}")
    passage = _tool(served.client, headers, "get_passage", {"doc_id": hidden, "char_start": 0, "char_end": 5})
    assert passage["result"]["isError"] and "m04q" not in json.dumps(passage)


def test_paging_past_the_visible_documents_betrays_nothing(served: Served) -> None:
    headers = _token(served, {"path_glob": ["handbook/*"]})
    for offset in (2, 3, 8, 50):
        page = served.client.get("/documents", params={"limit": 1, "offset": offset}, headers=headers)
        assert page.status_code == 200 and len(page.json()) == (1 if offset < 3 else 0)
        assert ("Link" in page.headers) == (offset < 2)
        found = served.client.get("/search", params={"q": "review", "k": 2, "offset": offset}, headers=headers)
        assert {hit["doc_id"] for hit in found.json()["results"]} <= {served.ids[m] for m in ("m00q", "m01q", "m02q")}
    listing = _tool(served.client, headers, "list_documents", {"limit": 1, "offset": 2})
    assert listing["result"]["structuredContent"]["next_offset"] is None


def test_counts_and_generation_do_not_change_with_hidden_documents(workdir: Path) -> None:
    docs = [Doc("m00q", "handbook", "public", None, SENTENCES[0]), Doc("m01q", "hr", "hr", None, SENTENCES[1])]
    root = workdir / "counts"
    root.mkdir()
    index, _ = _serve(root, docs)
    headers = {"Authorization": f"Bearer {index.tokens().add('team', {'path_glob': ['handbook/*']})}"}
    with TestClient(create_app(index.path, HashEmbedder(), access_log="off")) as client:
        before = client.get("/status", headers=headers).json()
        health = client.get("/health", headers=headers)
        assert before["documents"] == 1 and before["generation"] == health.json()["generation"]
        assert health.headers["X-Citeline-Generation"] == str(before["generation"])
        asked = {"q": SENTENCES[0], "mode": "dense"}  # the hidden document below answers it better than any
        shown = [hit["doc_id"] for hit in client.get("/search", params=asked, headers=headers).json()["results"]]
        index.add_texts([SENTENCES[1]], ids=["hr/m99q"], metadata=[{"team": "hr"}], source="wiki")
        index.add_texts([SENTENCES[0] * 2], ids=["hr/m97q"], metadata=[{"team": "hr"}], source="wiki")
        # the relevance floor is measured within the scope: a better hidden match drops no visible hit
        again = [hit["doc_id"] for hit in client.get("/search", params=asked, headers=headers).json()["results"]]
        assert again == shown and shown
        after = client.get("/status", headers=headers).json()
        assert after == before  # a hidden document came: nothing the caller sees moved
        found = client.get("/search", params={"q": "salary"}, headers=headers)
        assert found.json()["generation"] == before["generation"]
        index.add_texts([SENTENCES[2]], ids=["handbook/m98q"], metadata=[{"team": "public"}], source="wiki")
        moved = client.get("/status", headers=headers).json()
        assert moved["documents"] == 2 and moved["generation"] != before["generation"]


def test_a_scoped_filter_scoped_again_keeps_both(served: Served) -> None:
    from citeline.store.access import scoped
    from citeline.store.filters import Filters

    inner = scoped({"meta": {"team": "support"}}, Filters.from_value({"path_glob": ["tickets/*"]}))
    both = scoped(inner, Filters.from_value({"meta": {"customer": "acme"}}))
    assert {row.source_id for row in served.index.documents(both)} == {"tickets/acme/m05q", "tickets/acme/m08q"}


def test_permissions_the_tokens_file_and_its_life_under_a_running_server(served: Served) -> None:
    client = served.client
    tokens = served.index.tokens()
    for token in tokens.list():
        tokens.revoke(token.name)
    secret = tokens.add("searcher", {"path_glob": ["handbook/*"]}, ["search"])
    stored = tokens.path.read_text()
    assert secret not in stored and secret.startswith("cl_") and oct(tokens.path.stat().st_mode)[-3:] == "600"
    headers = {"Authorization": f"Bearer {secret}"}
    assert client.get("/search", params={"q": "salary"}, headers=headers).status_code == 200
    assert client.get("/documents", headers=headers).status_code == 403
    assert client.get("/metrics", headers=headers).status_code == 403
    assert client.get("/runs", headers=headers).status_code == 403
    assert client.get("/search", params={"q": "salary"}).status_code == 401  # tokens exist: no token, no answer
    fresh = tokens.rotate("searcher")
    assert client.get("/search", params={"q": "salary"}, headers=headers).status_code == 401
    assert (
        client.get("/search", params={"q": "salary"}, headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
    )
    tokens.revoke("searcher")
    assert client.get("/search", params={"q": "s"}, headers={"Authorization": f"Bearer {fresh}"}).status_code == 401
    assert client.get("/search", params={"q": "s"}, headers=OWNER).status_code == 200  # the server's own token
    with pytest.raises(Exception, match="metrics"):
        tokens.add("bad", {"path_glob": ["x/*"]}, ["metrics"])
    with pytest.raises(Exception, match="unknown filter key"):
        tokens.add("bad", {"folder": "x"})
    tokens.path.write_text("{not json")
    answer = client.get("/search", params={"q": "salary"}, headers={"Authorization": f"Bearer {fresh}"})
    assert answer.status_code == 503 and str(tokens.path) not in answer.text  # fails closed, says nothing of the file
    tokens.path.unlink()
    # revoking every token never opens the server: once it held tokens, a request needs one
    assert client.get("/search", params={"q": "salary"}).status_code == 401


def test_metrics_and_the_access_log(served: Served, caplog: pytest.LogCaptureFixture) -> None:
    tokens = served.index.tokens()
    for token in tokens.list():
        tokens.revoke(token.name)
    ops = tokens.add("ops", None, ["search", "read", "metrics"])
    scoped = tokens.add("contractor", {"path_glob": ["handbook/*"]})
    with caplog.at_level(logging.INFO, logger="citeline.access"):
        served.client.get("/search", params={"q": "salary"}, headers={"Authorization": f"Bearer {scoped}"})
        served.client.get("/documents/nope", headers={"Authorization": f"Bearer {scoped}"})
        served.client.get("/search", params={"q": "salary"}, headers={"Authorization": "Bearer wrong"})
    lines = [record.getMessage() for record in caplog.records if record.name == "citeline.access"]
    assert re.fullmatch(r"contractor /search 200 \d+\.\d+", lines[0]), lines
    assert lines[1].startswith("contractor /documents/{doc_id} 404") and "nope" not in lines[1]
    assert lines[2].startswith("? other 401"), lines  # refused before a caller was found: not the owner's "-"
    assert all(scoped not in line and "salary" not in line for line in lines)
    scrape = served.client.get("/metrics", headers={"Authorization": f"Bearer {ops}"})
    assert scrape.status_code == 200
    body = scrape.text
    assert re.search(r'citeline_requests_total\{route="/search",status="200"\} [1-9]', body)
    assert "citeline_search_stage_duration_seconds_bucket{" in body and 'stage="search"' in body
    assert re.search(r"citeline_index_documents \d", body) and "citeline_index_generation" in body
    assert 'citeline_last_run_status{root="wiki",status="succeeded"} 1.0' in body
    assert "citeline_last_run_age_seconds" in body and "citeline_last_run_duration_seconds" in body
    tokens.revoke("ops")
    tokens.revoke("contractor")


def test_the_tokens_commands(workdir: Path) -> None:
    from click.testing import CliRunner

    from citeline.cli.main import cli

    root = workdir / "cli"
    root.mkdir()
    index, _ = _serve(root, [Doc("m00q", "handbook", "public", None, SENTENCES[0])])
    runner = CliRunner()
    where = ["--index", str(index.path)]
    scope = ["--path", "handbook/*", "--where", "team=public"]
    added = runner.invoke(cli, ["tokens", "add", "contractors", *where, *scope])
    assert added.exit_code == 0, added.output
    secret = added.stdout.strip()
    assert secret.startswith("cl_") and secret not in index.tokens().path.read_text()
    listed = runner.invoke(cli, ["tokens", "list", *where, "--json"])
    record = json.loads(listed.stdout)
    assert record["name"] == "contractors" and record["permissions"] == ["search", "read"]
    assert record["scope"] == {"path_glob": ["handbook/*"], "meta": {"team": {"=": ["public"]}}}
    again = runner.invoke(cli, ["tokens", "add", "contractors", *where])
    assert again.exit_code == 2 and "already" in again.output
    bad = runner.invoke(cli, ["tokens", "add", "x", *where, "--path", "a", "--can", "metrics"])
    assert bad.exit_code == 2 and "metrics" in bad.output
    rotated = runner.invoke(cli, ["tokens", "rotate", "contractors", *where])
    assert rotated.exit_code == 0 and rotated.stdout.strip() != secret
    assert index.tokens().find(secret.encode()) is None
    assert index.tokens().find(rotated.stdout.strip().encode()) is not None
    assert runner.invoke(cli, ["tokens", "revoke", "contractors", *where]).exit_code == 0
    assert runner.invoke(cli, ["tokens", "revoke", "contractors", *where]).exit_code == 2
    assert index.tokens().list() == []


def test_a_hidden_copy_of_a_work_is_never_shown_nor_listed(workdir: Path) -> None:
    # A work (citeline.query.works): the Markdown source a contractor may read, and its rendered page in a folder
    # it may not. The owner gets one result listing both; the scoped caller gets the source alone: the published
    # copy is neither shown in its place (the plan's lookup of published copies) nor listed beside it.
    folder = workdir / "work-tree"
    paragraphs = [
        "The levee inspection covers the north embankment, the spillway gates and the pumping station every spring.",
        "Inspectors record cracks, seepage and settlement in the log, with a photograph of each finding and its place.",
        "A finding that threatens the embankment is reported to the district engineer within one working day.",
        "Repairs are planned before the flood season, and the spillway gates are tested again after each repair.",
    ]
    (folder / "handbook").mkdir(parents=True)
    (folder / "hr").mkdir()
    (folder / "handbook" / "levee.md").write_text("# Levee inspection\n\n" + "\n\n".join(paragraphs) + "\n")
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    (folder / "hr" / "levee.html").write_text(
        f"<html><head><title>Levee inspection</title></head><body><h1>Levee inspection</h1>{body}</body></html>"
    )
    index = Index.create(workdir / "work-index", embedder=HashEmbedder())
    index.ingest([folder])
    ids = {Path(row.source_id).name + ":" + Path(row.source_id).parent.name: row.doc_id for row in index.documents()}
    source, page = ids["levee.md:handbook"], ids["levee.html:hr"]
    secret = index.tokens().add("contractor", {"path_glob": ["handbook/*"]})
    scoped = {"Authorization": f"Bearer {secret}"}
    ask = {"q": "district engineer within one working day", "k": 5}
    with TestClient(create_app(index.path, HashEmbedder(), token=OWNER["Authorization"][7:])) as client:
        owner = client.get("/search", params=ask, headers=OWNER).json()["results"]
        assert owner and {s["doc_id"] for s in owner[0]["sources"]} == {source, page}, "the owner sees one work"
        for group in ("false", "true"):
            for mode in ("lexical", "hybrid", "dense"):
                found = client.get("/search", params={**ask, "mode": mode, "group": group}, headers=scoped)
                assert found.status_code == 200
                assert page not in found.text and "levee.html" not in found.text
                assert {hit["doc_id"] for hit in found.json()["results"]} <= {source}
        tool = _tool(client, scoped, "search", {"query": ask["q"], "k": 5, "group": True})
        assert page not in json.dumps(tool) and "levee.html" not in json.dumps(tool)


def test_a_server_restarted_on_a_file_whose_tokens_were_all_revoked_stays_locked(workdir: Path) -> None:
    # Before: a running server stayed locked after the last revoke, but a restart on the emptied file answered
    # everyone as its owner (every document, /metrics) on 127.0.0.1, behind a proxy on the same host too.
    root = workdir / "restart"
    root.mkdir()
    index, _ = _serve(root, [Doc("m00q", "handbook", "public", None, SENTENCES[0])])
    tokens = index.tokens()
    tokens.add("contractors", {"path_glob": ["handbook/*"]})
    tokens.revoke("contractors")
    for restart in range(2):
        with TestClient(create_app(index.path, HashEmbedder(), access_log="off")) as client:
            for route in ("/documents", "/metrics", "/status", "/"):
                assert client.get(route).status_code == 401, (restart, route)
    tokens.path.unlink()  # removing the file (not revoking) returns the server to its single-user default
    with TestClient(create_app(index.path, HashEmbedder(), access_log="off")) as client:
        assert client.get("/documents").status_code == 200


def test_a_name_a_hidden_document_shares_opens_the_visible_one(workdir: Path) -> None:
    # Two roots hold a leave.md each; the token sees the handbook's. Before, the name fit both documents and was
    # answered 404 while /documents listed it: that told the caller a hidden leave.md exists somewhere.
    folder = workdir / "two-roots"
    for team in ("handbook", "hr"):
        (folder / team).mkdir(parents=True)
        (folder / team / "leave.md").write_text(f"# Leave\n\nThe leave policy of {team}.\n")
    (folder / "hr" / "only.md").write_text("# Only\n\nOnly in HR.\n")
    index = Index.create(workdir / "two-roots-index", embedder=HashEmbedder())
    index.ingest([folder / "handbook", folder / "hr"])
    secret = index.tokens().add("contractors", {"source": [str(folder / "handbook")]})
    headers = {"Authorization": f"Bearer {secret}"}
    visible = {row.doc_id for row in index.documents({"source": [str(folder / "handbook")]})}
    with TestClient(create_app(index.path, HashEmbedder(), access_log="off")) as client:
        assert [row["source_id"] for row in client.get("/documents", headers=headers).json()] == ["leave.md"]
        for name in ("leave.md", str(folder / "handbook" / "leave.md")):
            got = _tool(client, headers, "get_document", {"doc_id": name})["result"]
            assert not got.get("isError") and "handbook" in got["content"][0]["text"]
        for name, absent in (("only.md", "none.md"), (str(folder / "hr" / "leave.md"), str(folder / "hr" / "x.md"))):
            refused = _tool(client, headers, "get_document", {"doc_id": name})["result"]["content"][0]["text"]
            missing = _tool(client, headers, "get_document", {"doc_id": absent})["result"]["content"][0]["text"]
            assert refused == missing.replace(absent, name)
        assert index.document("leave.md", within={"source": [str(folder / "handbook")]}).doc_id in visible
        with pytest.raises(Exception, match="names 2 documents"):
            index.document("leave.md")  # the owner: both fit
