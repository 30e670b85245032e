"""The HTTP API: a real uvicorn server on loopback, queried with httpx."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import numpy as np
import pytest
import schemathesis
import uvicorn
from _common import DAMAGE, examples
from click.testing import CliRunner
from conftest import REPO, HashEmbedder

from citeline import Index, IndexStatus, RunSummary, SearchResult
from citeline.cli.main import cli
from citeline.errors import IndexNotFoundError, QueryError, SettingsError
from citeline.query.results import Source
from citeline.server import DocumentRecord, TimelyH11, check_bind, create_app
from citeline.store.documents import DOCUMENT_FIELDS


@contextmanager
def running(app: object, **config: Any) -> Iterator[str]:
    """Serve ``app`` on a free loopback port in a thread; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # Keep-alive for the whole module: the tests share one client, and at uvicorn's 5 s a pooled connection idle
    # between two tests on a loaded machine was closed by the server just as the client reused it (a CI run: one
    # request reset by peer). The served CLI keeps its own 5 s.
    config.setdefault("timeout_keep_alive", 600)
    config.setdefault("lifespan", "off")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **config))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Index, Path]]:
    root = tmp_path_factory.mktemp("server")
    docs = root / "docs"
    docs.mkdir()
    seeds = REPO / "seeds"
    for seed in seeds.iterdir():
        (docs / seed.name).write_text(seed.read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "records.jsonl").write_text(
        '{"_id": "r1", "title": "Ledger", "text": "Quartermaster ledgers show pay stopped.", "author": "Mara"}\n',
        encoding="utf-8",
    )
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    with running(create_app(index.path, embedder=HashEmbedder())) as url, httpx.Client(base_url=url) as client:
        yield client, index, docs


def test_search_answers_with_provenance(served: tuple[httpx.Client, Index, Path]) -> None:
    client, index, _ = served
    response = client.get("/search", params={"q": "soldiers defect when pay stops", "k": 3, "collapse": "false"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["query"], body["mode"], body["k"]) == ("soldiers defect when pay stops", "hybrid", 3)
    expected = index.search("soldiers defect when pay stops", 3, collapse=False)
    assert [r["chunk_id"] for r in body["results"]] == [r.chunk_id for r in expected]
    assert [r["rank"] for r in body["results"]] == [1, 2, 3]
    first = body["results"][0]
    text = index.document_text(first["doc_id"])
    assert text[first["char_start"] : first["char_end"]] == first["text"]
    assert first["sources"][0]["doc_id"] == first["doc_id"]
    assert first["ingested_at"].endswith("+00:00")


def test_search_passes_mode_and_filters(served: tuple[httpx.Client, Index, Path]) -> None:
    client, _, _ = served
    records = {"path": "records.jsonl*", "mode": "lexical"}  # the seeds have authors too (Mara's among them)
    by_author = client.get("/search", params={"q": "pay", "where": "author=Mara", **records}).json()
    assert [r["source_id"] for r in by_author["results"]] == ["records.jsonl#r1"]
    for where in (["author~mar"], ["author in Ansel,Mara"], ["author!=Ansel", "author~MARA"]):
        found = client.get("/search", params={"q": "pay", "where": where, **records}).json()
        assert [r["source_id"] for r in found["results"]] == ["records.jsonl#r1"], where
    nobody = client.get("/search", params={"q": "pay", "where": "author~ansel", **records}).json()
    assert nobody["results"] == []
    seeds = client.get("/search", params={"q": "pay", "where": "author=Mara", "path": "*.md", "mode": "lexical"}).json()
    assert {r["source_id"] for r in seeds["results"]} == {
        "a-mothers-letters-and-a-broken-front.md",
        "defections-at-the-river-garrison.md",
    }
    by_glob = client.get("/search", params=[("q", "letters"), ("path", "*.md"), ("path", "*.txt")]).json()
    assert by_glob["results"] and all(r["source_id"].endswith(".md") for r in by_glob["results"])
    assert client.get("/search", params={"q": "pay", "ingested_before": "2000-01-01"}).json()["results"] == []


def test_errors_are_one_json_line_with_the_cli_message(served: tuple[httpx.Client, Index, Path]) -> None:
    client, _, _ = served
    cases = [
        ({"q": "pay", "k": 0}, 400, "Invalid value for 'k': Input should be greater than or equal to 1 (got '0')"),
        ({"q": "pay", "k": 101}, 400, "Invalid value for 'k': Input should be less than or equal to 100"),
        ({"q": "pay", "k": 10**23}, 400, "Invalid value for 'k'"),
        ({"q": "pay", "offset": -1}, 400, "Invalid value for 'offset'"),
        ({"q": "pay", "offset": 101}, 400, "Invalid value for 'offset'"),
        ({"q": "x" * 1001}, 400, "Invalid value for 'q': String should have at most 1000 characters (got 'xxx"),
        ({"q": "  "}, 400, "query is empty; say what you are looking for"),
        (
            {"q": "pay", "mode": "fuzzy"},
            400,
            "Invalid value for 'mode': Input should be 'hybrid', 'dense' or 'lexical'",
        ),
        ({"q": "pay", "where": ["a=1"] * 21}, 400, "Invalid value for 'where': List should have at most 20 items"),
        ({"q": "pay", "path": "*" * 1001}, 400, "Invalid value for 'path'"),
        ({"q": "pay", "where": "author"}, 400, "Invalid value for where: 'author' is not key=value"),
        ({"q": "pay", "ingested_after": "soon"}, 400, "filter 'ingested_after' is not an ISO 8601 date"),
        ({"q": "pay", "k": "many"}, 400, "Invalid value for 'k'"),
        ({}, 400, "Missing parameter 'q'"),
    ]
    for params, status, message in cases:
        response = client.get("/search", params=params)
        assert response.status_code == status, (params, response.text)
        assert set(response.json()) == {"error"} and message in response.json()["error"], response.text
        assert "\n" not in response.json()["error"] and len(response.json()["error"]) < 300
    for path in ("/documents?limit=99999999999999999999999", "/documents?limit=0", "/documents?offset=-1"):
        response = client.get(path)
        assert response.status_code == 400 and response.json()["error"].startswith("Invalid value for "), path
        assert "SELECT" not in response.text and "duckdb" not in response.text.lower()
    assert client.get("/runs", params={"limit": 10**30}).status_code == 400
    assert client.get("/documents/" + "x" * 201).status_code == 400
    for name in ("nope", "~0", "~nosuchuser"):  # "~0": a path of a user that does not exist (schemathesis)
        missing = client.get(f"/documents/{name}")
        assert missing.status_code == 404 and missing.json()["error"].startswith(f"no document '{name}' in ")
    assert client.get("/nowhere").json() == {"error": "Not Found"}


def test_status_runs_documents_and_health(served: tuple[httpx.Client, Index, Path]) -> None:
    client, index, docs = served
    status = client.get("/status").json()
    assert status["documents"] == index.status().documents and status["generation"] == index.status().generation
    assert status["last_run"]["started_at"].endswith("+00:00")
    runs = client.get("/runs", params={"limit": 5}).json()
    assert runs[0]["run_id"] == index.runs(1)[0].run_id
    listed = client.get("/documents").json()
    assert sorted(r["source_id"] for r in listed) == sorted(["records.jsonl#r1", *(p.name for p in docs.glob("*.md"))])
    assert all(tuple(r) == DOCUMENT_FIELDS for r in listed)
    mara = client.get("/documents", params={"where": "author=Mara", "path": "records.jsonl*"}).json()
    assert [r["source_id"] for r in mara] == ["records.jsonl#r1"]  # (two seeds are Mara's too)
    assert len(client.get("/documents", params={"limit": 1}).json()) == 1
    one = client.get(f"/documents/{mara[0]['doc_id']}").json()
    assert one["text"] == index.document_text(mara[0]["doc_id"])
    assert len(one["spans"]) == one["chunks"] == mara[0]["chunks"]
    span = one["spans"][0]
    assert one["text"][span["char_start"] : span["char_end"]].endswith("pay stopped.")
    assert client.get("/health").json() == {"status": "ok", "generation": status["generation"]}


def test_openapi_lists_the_fields_of_the_python_objects(served: tuple[httpx.Client, Index, Path]) -> None:
    client, _, _ = served
    schemas = client.get("/openapi.json").json()["components"]["schemas"]

    def names(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    assert set(schemas["SearchResult"]["properties"]) == names(SearchResult) | {"rank"}
    assert set(schemas["Source"]["properties"]) == names(Source)
    assert set(schemas["RunSummary"]["properties"]) == names(RunSummary)
    assert set(schemas["IndexStatus"]["properties"]) == names(IndexStatus)
    assert tuple(schemas["DocumentRecord"]["properties"]) == DOCUMENT_FIELDS == tuple(DocumentRecord.model_fields)
    assert set(schemas["DocumentDetail"]["properties"]) == {*DOCUMENT_FIELDS, "text", "spans"}
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/search", "/status", "/runs", "/documents", "/documents/{doc_id}", "/facets", "/health"} <= set(paths)
    search_params = {p["name"]: p for p in paths["/search"]["get"]["parameters"]}
    assert schemas["Mode"]["enum"] == ["hybrid", "dense", "lexical"]
    assert search_params["mode"]["schema"]["$ref"] == "#/components/schemas/Mode"
    assert search_params["k"]["schema"]["maximum"] == 100 and search_params["q"]["schema"]["maxLength"] == 1000
    assert set(search_params) == {
        "q",
        "k",
        "offset",
        "mode",
        "source",
        "path",
        "where",
        "ingested_after",
        "ingested_before",
        "collapse",
        "collapse_threshold",
        "min_score",
        "group",
        "highlight",
        "facets",
    }


def test_search_min_score(served: tuple[httpx.Client, Index, Path]) -> None:
    client, _, _ = served
    assert client.get("/search", params={"q": "xyzzy plugh", "mode": "lexical"}).json()["results"] == []
    kept = client.get("/search", params={"q": "river", "mode": "lexical", "min_score": 0}).json()["results"]
    assert kept and all(0 <= hit["relevance"] <= 1 for hit in kept)
    assert client.get("/search", params={"q": "river", "min_score": 2}).status_code == 400


def test_a_new_generation_is_served_without_restart(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "one.md").write_text("# One\n\nThe garrison by the river.\n", encoding="utf-8")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    with running(create_app(index.path, embedder=HashEmbedder())) as url, httpx.Client(base_url=url) as client:
        params = {"q": "zeppelin", "mode": "lexical", "collapse": "false"}
        assert client.get("/search", params=params).json()["results"] == []
        (docs / "two.md").write_text("# Two\n\nA zeppelin drifted over the garrison.\n", encoding="utf-8")
        # Another writer (here: another Index object in this process) commits while the server runs.
        Index.open(tmp_path / "ix", embedder=HashEmbedder()).ingest([docs])
        results = client.get("/search", params=params).json()["results"]
        assert [r["source_id"] for r in results] == ["two.md"]
        assert client.get("/status").json()["documents"] == 2


def test_a_missing_index_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match=f"no citeline index at {tmp_path / 'none'}"):
        create_app(tmp_path / "none")
    result = CliRunner().invoke(cli, ["serve", "--index", str(tmp_path / "none")])
    assert result.exit_code == 1 and result.output.startswith("Error: no citeline index at ")
    assert len(result.output.strip().splitlines()) == 1


def test_serve_in_a_subprocess_answers_without_loading_a_model(tmp_path: Path) -> None:
    """``serve()`` as ``citeline serve`` runs it: its own process, the index's own (unloaded) model; a lexical
    search without collapse needs no model, so this stays fast."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nCavalry crossed at dawn.\n", encoding="utf-8")
    Index.create(tmp_path / "ix", embedder=HashEmbedder()).ingest([tmp_path / "docs"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = f"from citeline.server import serve; serve({str(tmp_path / 'ix')!r}, port={port})"  # logging at info
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(
                    f"http://127.0.0.1:{port}/search", params={"q": "cavalry", "mode": "lexical", "collapse": "false"}
                )
                break
            except httpx.TransportError:
                assert process.poll() is None and time.monotonic() < deadline, "citeline serve did not start"
                time.sleep(0.1)
        assert response.status_code == 200, response.text
        assert [r["source_id"] for r in response.json()["results"]] == ["a.md"]
    finally:
        process.terminate()
        logged, _ = process.communicate(timeout=10)
    # The log has the request (citeline's access log: the route) and never what was searched (uvicorn's access
    # log, which printed the query string, is off).
    assert re.search(r"^\S+ \S+ - /search 200 \d+\.\d+$", logged, re.MULTILINE), logged
    assert "cavalry" not in logged.lower(), logged


@pytest.mark.slow
def test_a_sharded_index_is_served_through_its_dask_workers_with_pinned_shards(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(6):
        (docs / f"d{n}.md").write_text(f"# Note {n}\n\nThe harbour mill stood by river {n}.\n")
    index = Index.create(tmp_path / "root", embedder=HashEmbedder(), shards=2)
    index.ingest([docs], parallel="serial")
    want = [(r.chunk_id, round(r.score, 5)) for r in index.search("harbour mill river 3", k=4)]
    with pytest.raises(ValueError, match="shard_workers pins shards to Dask workers: give dask_address too"):
        create_app(index.path, HashEmbedder(), shard_workers="0=w")
    local = {"n_workers": 2, "threads_per_worker": 1, "processes": False, "dashboard_address": None}
    with distributed.LocalCluster(**local) as cluster:
        app = create_app(index.path, HashEmbedder(), dask_address=cluster.scheduler_address, shard_workers="0=1,1=1")
        with running(app) as url, httpx.Client(base_url=url, timeout=60) as client:
            found = client.get("/search", params={"q": "harbour mill river 3", "k": 4}).json()["results"]
            with distributed.Client(cluster.scheduler_address, set_as_default=False) as client_of_cluster:
                held = client_of_cluster.run(lambda dask_worker: sorted(getattr(dask_worker, "_citeline_shards", {})))
                workers = client_of_cluster.scheduler_info()["workers"]
    assert [(r["chunk_id"], round(r["score"], 5)) for r in found] == want
    names = {address: str(info["name"]) for address, info in workers.items()}
    assert {names[address] for address, shards in held.items() if shards} == {"1"}  # both shards on worker 1


# ---------------------------------------------------------------- paging, bounds, encodings, assets (issue 31.3)


def test_search_and_documents_page(served: tuple[httpx.Client, Index, Path]) -> None:
    client, index, _ = served
    params = {"q": "soldiers pay", "mode": "lexical", "collapse": "false"}
    whole = client.get("/search", params={**params, "k": 4}).json()
    page = client.get("/search", params={**params, "k": 2, "offset": 2})
    assert page.status_code == 200 and page.json()["offset"] == 2
    assert [r["chunk_id"] for r in page.json()["results"]] == [r["chunk_id"] for r in whole["results"][2:4]]
    assert [r["rank"] for r in page.json()["results"]] == [3, 4]
    listed = client.get("/documents").json()
    first = client.get("/documents", params={"limit": 2, "where": [], "path": "*"})
    assert [r["doc_id"] for r in first.json()] == [r["doc_id"] for r in listed[:2]]
    following = first.headers["Link"]
    assert following.endswith('>; rel="next"') and "offset=2" in following and "path=%2A" in following
    second = client.get(following[1 : following.index(">")])
    assert [r["doc_id"] for r in second.json()] == [r["doc_id"] for r in listed[2:4]]
    last = client.get("/documents", params={"limit": 2, "offset": len(listed) - 1})
    assert len(last.json()) == 1 and "Link" not in last.headers
    assert client.get("/documents", params={"offset": 10**18}).json() == []
    assert [r.doc_id for r in index.documents(limit=2, offset=1)] == [r["doc_id"] for r in listed[1:3]]


def test_every_search_names_its_generation(served: tuple[httpx.Client, Index, Path]) -> None:
    client, index, _ = served
    response = client.get("/search", params={"q": "pay"})
    generation = index.status().generation
    assert response.headers["X-Citeline-Generation"] == str(generation) == str(response.json()["generation"])
    assert client.get("/health").headers["X-Citeline-Generation"] == str(generation)


def test_the_query_string_and_path_must_be_utf8(served: tuple[httpx.Client, Index, Path]) -> None:
    client, _, _ = served
    for raw in ("/search?q=%ff", "/search?q=pay&where=a%3D%c3", "/documents/%ff%fe", "/search?q=%ED%A0%80"):
        response = client.get(raw)
        assert response.status_code == 400, raw
        assert response.json()["error"].endswith("is not valid UTF-8; percent-encode text as UTF-8")
    assert client.get("/search", params={"q": "café ☕"}).status_code == 200


def test_limits_in_the_library_and_the_cli(served: tuple[httpx.Client, Index, Path]) -> None:
    _, index, _ = served
    with pytest.raises(QueryError, match="limit must be a whole number from 1 to 9223372036854775807"):
        index.documents(limit=10**23)
    with pytest.raises(QueryError, match="offset must be a whole number from 0"):
        index.documents(offset=-1)
    result = CliRunner().invoke(cli, ["documents", "--index", str(index.path), "--limit", str(10**23)])
    assert result.exit_code == 2 and "is not in the range 1<=x<=9223372036854775807" in result.output
    assert "database" not in result.output
    result = CliRunner().invoke(cli, ["documents", "--index", str(index.path), "--offset", "1", "--json"])
    assert result.exit_code == 0, result.output


def test_api_docs_are_served_from_the_server_itself(served: tuple[httpx.Client, Index, Path]) -> None:
    client, _, _ = served
    for page in ("/docs", "/redoc"):
        html = client.get(page).text
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert assets and all(asset.startswith("/") for asset in assets), assets
        assert "cdn" not in html and "fonts.googleapis" not in html
        for asset in assets:
            assert client.get(asset).status_code == 200, asset


def test_cors_is_off_unless_asked_and_root_path_prefixes_the_docs(tmp_path: Path) -> None:
    index = _small_index(tmp_path)
    origin = {"Origin": "https://app.example"}
    with running(create_app(index.path, HashEmbedder())) as url:
        assert "access-control-allow-origin" not in httpx.get(f"{url}/health", headers=origin).headers
    app = create_app(index.path, HashEmbedder(), cors=["https://app.example"])
    with running(app, root_path="/citeline") as url:
        allowed = httpx.get(f"{url}/health", headers=origin)
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        other = httpx.get(f"{url}/health", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        assert httpx.get(f"{url}/openapi.json").json()["servers"] == [{"url": "/citeline"}]
        assert 'src="/citeline/assets/docs/swagger/swagger-ui-bundle.js"' in httpx.get(f"{url}/docs").text


def test_a_request_that_waits_too_long_is_503(tmp_path: Path) -> None:
    index = _small_index(tmp_path)

    class SlowEmbedder(HashEmbedder):
        def encode(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
            time.sleep(0.5)
            return super().encode(texts, batch_size=batch_size)

    with running(create_app(index.path, SlowEmbedder(), timeout=0.2)) as url:
        response = httpx.get(f"{url}/search", params={"q": "river", "mode": "dense"})
        assert response.status_code == 503 and response.headers["Retry-After"] == "1"
        assert response.json()["error"] == "the request took longer than 0.2 s; try a narrower one"
        time.sleep(0.5)  # the abandoned search finishes; the next one is served
        assert httpx.get(f"{url}/search", params={"q": "river", "mode": "lexical"}).status_code == 200


# ---------------------------------------------------------------- security (issue 32.4)


def _small_index(tmp_path: Path) -> Index:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nCavalry crossed the river at dawn.\n", encoding="utf-8")
    index = Index.create(tmp_path / "ix", embedder=HashEmbedder())
    index.ingest([tmp_path / "docs"])
    return index


def test_a_non_loopback_bind_needs_a_token_or_no_auth(tmp_path: Path) -> None:
    for host in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        check_bind(host, None, False)
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.org"):
        with pytest.raises(SettingsError, match=f"--host {re.escape(host)} lets other machines search this index"):
            check_bind(host, None, False)
        check_bind(host, "s3cret", False)
        check_bind(host, None, True)
    with pytest.raises(SettingsError, match="give a token or --no-auth, not both"):
        check_bind("0.0.0.0", "s3cret", True)
    index = _small_index(tmp_path)
    result = CliRunner().invoke(
        cli, ["serve", "--index", str(index.path), "--host", "0.0.0.0"], env={"CITELINE_TOKEN": ""}
    )
    assert (
        result.exit_code == 2 and "set a token (--token, or the CITELINE_TOKEN environment variable)" in result.output
    )


def test_the_token_is_checked_on_every_route(tmp_path: Path) -> None:
    index = _small_index(tmp_path)
    with running(create_app(index.path, HashEmbedder(), token="s3cret")) as url:
        for route in ("/health", "/search?q=river", "/documents", "/openapi.json", "/docs", "/", "/assets/docs/"):
            refused = httpx.get(url + route)
            assert refused.status_code == 401, route
            assert refused.headers["WWW-Authenticate"] == 'Bearer realm="citeline"'
        assert httpx.get(f"{url}/", headers={"Accept": "text/html"}).headers["WWW-Authenticate"].startswith("Basic")
        wrong = {"Authorization": "Bearer s3cre"}
        assert httpx.get(f"{url}/health", headers=wrong).status_code == 401
        assert httpx.get(f"{url}/health", headers={"Authorization": "Basic !!!"}).status_code == 401
        good = {"Authorization": "Bearer s3cret"}
        assert httpx.get(f"{url}/search", params={"q": "river"}, headers=good).status_code == 200
        assert httpx.get(f"{url}/health", auth=("anyone", "s3cret")).status_code == 200


def test_the_token_can_come_from_the_environment_and_stays_out_of_argv(tmp_path: Path) -> None:
    index = _small_index(tmp_path)
    port = _free_port()
    env = {**os.environ, "CITELINE_TOKEN": "from-env", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "citeline.cli.main", "serve", "--index", str(index.path), "--port", str(port)]
    process = subprocess.Popen([*command, "--log-level", "warning"], env=env)
    try:
        response = _when_up(f"http://127.0.0.1:{port}/health", process, headers={"Authorization": "Bearer from-env"})
        assert response.status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 401
        assert "from-env" not in Path(f"/proc/{process.pid}/cmdline").read_text()
    finally:
        process.terminate()
        process.wait(10)


def test_no_path_outside_the_index_is_read(served: tuple[httpx.Client, Index, Path]) -> None:
    client, _, docs = served
    secret = Path("/etc/passwd").read_text()[:20]
    for raw in (
        "/assets/docs/../../../../../../etc/passwd",
        "/assets/docs/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/assets/docs/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
        "/documents/..%2F..%2F..%2Fetc%2Fpasswd",
        "/documents/%2Fetc%2Fpasswd",
        "/view/%2Fetc%2Fpasswd",
        f"/documents/{docs / 'records.jsonl'}",
    ):
        response = client.get(raw)
        assert response.status_code in (400, 404), (raw, response.status_code)
        assert secret not in response.text


# ---------------------------------------------------------------- fuzzing from the OpenAPI schema


#: Examples a generated-request test draws per operation (``CITELINE_API_FUZZ_EXAMPLES=400`` hunts longer by hand).
API_FUZZ_EXAMPLES = int(os.environ.get("CITELINE_API_FUZZ_EXAMPLES", examples(40)))


def test_no_generated_request_is_a_server_error(served: tuple[httpx.Client, Index, Path]) -> None:
    """schemathesis generates requests, valid and not, for every operation of the server's own OpenAPI schema."""
    client, _, _ = served
    logged: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = logged.append  # type: ignore[method-assign]
    logging.getLogger("uvicorn.error").addHandler(handler)
    schema = schemathesis.openapi.from_url(f"{client.base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 7
    for operation in operations:

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=API_FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(hypothesis.HealthCheck)
        )
        def no_server_error(case: schemathesis.Case) -> None:
            response = case.call(timeout=30)
            assert response.status_code < 500, (case.path, case.query, response.text)
            if response.status_code >= 400:
                assert list(response.json()) == ["error"] and "\n" not in response.json()["error"]
                # the index is healthy: a request's mistake is never told as damage
                assert not DAMAGE.search(response.json()["error"]), (case.path, case.query, response.text)

        no_server_error()
    logging.getLogger("uvicorn.error").removeHandler(handler)
    assert [record.getMessage() for record in logged] == []  # no traceback in the log either


def _when_up(url: str, process: subprocess.Popen[bytes], **kwargs: object) -> httpx.Response:
    deadline = time.monotonic() + 180  # two workers each import citeline on a busy machine
    while True:
        try:
            return httpx.get(url, **kwargs)  # type: ignore[arg-type]
        except httpx.TransportError:
            assert process.poll() is None and time.monotonic() < deadline, "citeline serve did not start"
            time.sleep(0.1)


def test_several_workers_serve_one_port(tmp_path: Path) -> None:
    """``citeline serve --workers 2``: uvicorn's processes, each built by ``app_from_environment``."""
    index = _small_index(tmp_path)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "CITELINE_TOKEN": "t0ken"}
    command = [sys.executable, "-m", "citeline.cli.main", "serve", "--index", str(index.path), "--port", str(port)]
    process = subprocess.Popen([*command, "--workers", "2", "--log-level", "warning"], env=env)
    try:
        auth = {"Authorization": "Bearer t0ken"}
        assert _when_up(f"http://127.0.0.1:{port}/health", process, headers=auth).status_code == 200
        params = {"q": "cavalry", "mode": "lexical", "collapse": "false"}
        for _ in range(4):
            response = httpx.get(f"http://127.0.0.1:{port}/search", params=params, headers=auth)
            assert response.status_code == 200 and response.headers["X-Citeline-Generation"] == "1"
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 401
    finally:
        process.terminate()
        process.wait(20)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_client_that_sends_no_request_head_in_time_is_disconnected(tmp_path: Path) -> None:
    index = _small_index(tmp_path)

    class Quick(TimelyH11):
        head_timeout = 0.5

    with running(create_app(index.path, HashEmbedder()), http=Quick, timeout_keep_alive=5) as url:
        port = int(url.rsplit(":", 1)[1])
        for opening in (b"", b"GET /health HTTP/1.1\r\nHost: x\r\n"):  # silent; a head that never ends
            with socket.create_connection(("127.0.0.1", port)) as slow:
                slow.settimeout(10)
                slow.sendall(opening)
                began = time.monotonic()
                assert slow.recv(100) == b""  # closed by the server
                assert time.monotonic() - began < 5
        with httpx.Client(base_url=url) as client:  # a kept-alive client that is not slow is served throughout
            for _ in range(3):
                assert client.get("/health").status_code == 200
                time.sleep(0.3)
