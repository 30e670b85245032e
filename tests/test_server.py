"""The HTTP API: a real uvicorn server on loopback, queried with httpx."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from conftest import REPO, HashEmbedder

from citeline import Index, IndexStatus, RunSummary, SearchResult
from citeline.query.results import Source
from citeline.server import DocumentRecord, create_app, filters_from_params
from citeline.store.documents import DOCUMENT_FIELDS


@contextmanager
def running(app: object) -> Iterator[str]:
    """Serve ``app`` on a free loopback port in a thread; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))  # type: ignore[arg-type]
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
    by_author = client.get("/search", params={"q": "pay", "where": "author=Mara", "mode": "lexical"}).json()
    assert [r["source_id"] for r in by_author["results"]] == ["records.jsonl#r1"]
    for where in (["author~mar"], ["author in Ansel,Mara"], ["author!=Ansel", "author~MARA"]):
        found = client.get("/search", params={"q": "pay", "where": where, "mode": "lexical"}).json()
        assert [r["source_id"] for r in found["results"]] == ["records.jsonl#r1"], where
    nobody = client.get("/search", params={"q": "pay", "where": "author~ansel", "mode": "lexical"}).json()
    assert nobody["results"] == []
    by_glob = client.get("/search", params=[("q", "letters"), ("path", "*.md"), ("path", "*.txt")]).json()
    assert by_glob["results"] and all(r["source_id"].endswith(".md") for r in by_glob["results"])
    assert client.get("/search", params={"q": "pay", "ingested_before": "2000-01-01"}).json()["results"] == []


def test_errors_are_one_json_line_with_the_cli_message(served: tuple[httpx.Client, Index, Path]) -> None:
    client, _, _ = served
    cases = [
        ({"q": "pay", "k": 0}, 400, "k must be at least 1, got 0"),
        ({"q": "  "}, 400, "query is empty; say what you are looking for"),
        ({"q": "pay", "mode": "fuzzy"}, 400, "mode must be one of hybrid, dense, lexical; got 'fuzzy'"),
        ({"q": "pay", "where": "author"}, 400, "Invalid value for where: 'author' is not key=value"),
        ({"q": "pay", "ingested_after": "soon"}, 400, "filter 'ingested_after' is not an ISO 8601 date"),
        ({"q": "pay", "k": "many"}, 400, "Invalid value for 'k'"),
        ({}, 400, "Missing parameter 'q'"),
    ]
    for params, status, message in cases:
        response = client.get("/search", params=params)
        assert response.status_code == status, (params, response.text)
        assert set(response.json()) == {"error"} and message in response.json()["error"], response.text
        assert "\n" not in response.json()["error"]
    missing = client.get("/documents/nope")
    assert missing.status_code == 404 and missing.json()["error"].startswith("no document 'nope' in ")
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
    mara = client.get("/documents", params={"where": "author=Mara"}).json()
    assert [r["source_id"] for r in mara] == ["records.jsonl#r1"]
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
    assert {"/search", "/status", "/runs", "/documents", "/documents/{doc_id}", "/health"} <= set(paths)
    search_params = {p["name"] for p in paths["/search"]["get"]["parameters"]}
    assert search_params == {
        "q",
        "k",
        "mode",
        "source",
        "path",
        "where",
        "ingested_after",
        "ingested_before",
        "collapse",
        "min_score",
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


def test_missing_index_is_404_and_server_starts_anyway(tmp_path: Path) -> None:
    with running(create_app(tmp_path / "none")) as url, httpx.Client(base_url=url) as client:
        response = client.get("/health")
        assert response.status_code == 404
        assert response.json()["error"].startswith(f"no citeline index at {tmp_path / 'none'}")


def test_filters_from_params() -> None:
    assert filters_from_params() == {}
    assert filters_from_params(["a"], ["*.md"], ["x=1", "x=2", "y=3"], "2026-01-01") == {
        "source": ["a"],
        "path_glob": ["*.md"],
        "meta": {"x": {"=": ["1", "2"]}, "y": {"=": ["3"]}},
        "ingested_after": "2026-01-01",
    }
    assert filters_from_params(where=["year>=2021", "author~mara", "tag in a,b"]) == {
        "meta": {"year": {">=": "2021"}, "author": {"~": ["mara"]}, "tag": {"=": ["a", "b"]}}
    }


def test_serve_in_a_subprocess_answers_without_loading_a_model(tmp_path: Path) -> None:
    """``serve()`` as ``citeline serve`` runs it: its own process, the index's own (unloaded) model; a lexical
    search without collapse needs no model, so this stays fast."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nCavalry crossed at dawn.\n", encoding="utf-8")
    Index.create(tmp_path / "ix", embedder=HashEmbedder()).ingest([tmp_path / "docs"])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = f"from citeline.server import serve; serve({str(tmp_path / 'ix')!r}, port={port}, log_level='warning')"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
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
        process.wait(10)


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
