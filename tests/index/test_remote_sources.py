"""Remote roots (citeline.sources.remote) against a REAL S3-compatible server (moto's server mode in a subprocess on
a loopback port, IAM authentication on: tests/_object_store.py) and a real local web server: first ingest, an
unchanged re-run that fetches no object (GETs counted in the server's own request log), one object changed, one
deleted, an empty listing refused, wrong credentials, the server stopped mid-run, include/exclude and a
.citelineignore object, credentials never written anywhere under the index or to the logs."""

from __future__ import annotations

import http.server
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.main import cli
from citeline.errors import RemovalRefusedError, SourceError, SourceUnavailable
from citeline.ingest import pipeline
from citeline.ingest.options import IngestOptions
from citeline.sources import remote
from citeline.sources.discovery import resolve_roots

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from _object_store import S3Server  # after the skips: boto3 comes with moto

NOTES = {
    "corpus/garrison.md": "# Garrison\n\nThe garrison at the river crossing held for three days.\n",
    "corpus/letters/harvest.txt": "The harvest failed in the northern valleys after the late frost.\n",
    "corpus/records.jsonl": (
        '{"id": "r1", "text": "Soldiers defected when their pay was six months late."}\n'
        '{"id": "r2", "text": "The bridge was rebuilt in stone the following spring."}\n'
    ),
    "corpus/mill.md": "# Mill\n\nThe mill ground barley for the whole district.\n",
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[S3Server]:
    """A fresh S3 server holding :data:`NOTES` in bucket ``docs``."""
    store = S3Server(tmp_path)
    for key, text in NOTES.items():
        store.put(key, text)
    yield store
    store.stop()


def _index(tmp_path: Path) -> Index:
    return Index.create(tmp_path / "ix", embedder=HashEmbedder())


ROOT = "s3://docs/corpus"


def test_first_ingest_then_an_unchanged_run_fetches_no_object(tmp_path: Path, server: S3Server) -> None:
    index = _index(tmp_path)
    first = index.ingest([ROOT], storage_options=server.options())
    assert (first.status, first.added, first.failed) == ("succeeded", 5, 0)
    fetched = server.object_gets()
    assert fetched == 4  # each object once (the JSONL's records are planned from the one read)
    # provenance keeps the URL: the documents' paths and a search's sources
    paths = {document.source_path for document in index.documents()}
    assert paths == {f"s3://docs/{key}" for key in NOTES}
    assert {document.source_root for document in index.documents()} == {ROOT}
    hit = index.search("why did soldiers defect", k=1)[0]
    assert hit.sources[0].source_path == "s3://docs/corpus/records.jsonl"
    again = index.ingest([ROOT], storage_options=server.options())
    assert (again.status, again.added, again.updated, again.unchanged, again.removed) == ("succeeded", 0, 0, 5, 0)
    assert server.object_gets() == fetched  # listed, compared by ETag: not one object fetched


def test_a_changed_object_is_fetched_alone_and_a_deleted_one_removed(tmp_path: Path, server: S3Server) -> None:
    index = _index(tmp_path)
    index.ingest([ROOT], storage_options=server.options())
    before = server.object_gets()
    server.put("corpus/mill.md", "# Mill\n\nThe mill burned down in the dry summer.\n")
    changed = index.ingest([ROOT], storage_options=server.options())
    assert (changed.updated, changed.unchanged, changed.added, changed.removed) == (1, 4, 0, 0)
    assert server.object_gets() == before + 1
    assert "burned" in index.search("mill burned", k=1)[0].text
    server.delete("corpus/letters/harvest.txt")
    deleted = index.ingest([ROOT], storage_options=server.options())
    assert (deleted.removed, deleted.unchanged) == (1, 4)
    assert "s3://docs/corpus/letters/harvest.txt" not in {d.source_path for d in index.documents()}
    assert server.object_gets() == before + 1
    # removed on purpose by URL, as a folder's files are by path: the object, then everything below a prefix
    assert index.remove(["s3://docs/corpus/mill.md"]).removed == 1
    assert index.remove(["s3://docs/corpus/"]).removed == 3


def test_a_versioned_bucket_stamps_each_version_and_fetches_the_one_listed(tmp_path: Path) -> None:
    # An overwrite with the same bytes keeps the ETag; only the version id says the object was written again. The
    # stamp holds it (the files table, the run's provenance of what was read), the object is fetched again at that
    # version, and a delete (a delete marker over the versions) removes the documents as in an unversioned bucket.
    store = S3Server(tmp_path)
    try:
        store.keep_versions()
        versions = {key: store.put(key, text) for key, text in NOTES.items()}
        index = _index(tmp_path)
        assert index.ingest([ROOT], storage_options=store.options()).added == 5
        assert _stamps(tmp_path)["corpus/mill.md"].endswith(f"@{versions['corpus/mill.md']}")
        first = versions["corpus/mill.md"]
        assert store.object_gets_of("corpus/mill.md") == [f"GET /docs/corpus/mill.md?versionId={first}"]
        fetched = store.object_gets()
        assert index.ingest([ROOT], storage_options=store.options()).unchanged == 5
        assert store.object_gets() == fetched  # unchanged: listed, not one object fetched
        rewritten = store.put("corpus/mill.md", NOTES["corpus/mill.md"])  # the same bytes: the same ETag
        assert rewritten != versions["corpus/mill.md"]
        run = index.ingest([ROOT], storage_options=store.options())
        assert (run.status, run.updated, run.unchanged, run.failed) == ("succeeded", 0, 5, 0)  # same text: no re-embed
        assert store.object_gets() == fetched + 1
        assert store.object_gets_of("corpus/mill.md")[-1].endswith(f"?versionId={rewritten}")
        assert _stamps(tmp_path)["corpus/mill.md"].endswith(f"@{rewritten}")
        store.delete("corpus/letters/harvest.txt")
        gone = index.ingest([ROOT], storage_options=store.options())
        assert (gone.removed, gone.unchanged) == (1, 4)
        assert store.object_gets() == fetched + 1
    finally:
        store.stop()


def _stamps(tmp_path: Path) -> dict[str, str]:
    # The stamp each object was read at, as the catalog's files table holds it (keyed by the object's key).
    import duckdb

    with duckdb.connect(str(tmp_path / "ix" / "meta.duckdb"), read_only=True) as connection:
        rows = connection.execute("SELECT source_file, stamp FROM files").fetchall()
    return {f"corpus/{source_file}": stamp for source_file, stamp in rows}


def test_an_object_gone_between_listing_and_fetch_fails_alone(
    tmp_path: Path, server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # objects are fetched several at a time (remote.fetch_ahead); each keeps its own outcome: the one deleted after
    # the listing fails alone, one line naming its URL, and the others of its batch are indexed
    listed = remote.list_root

    def then_deleted(root: str) -> remote.Listing:
        listing = listed(root)
        server.delete("corpus/mill.md")
        return listing

    monkeypatch.setattr(remote, "list_root", then_deleted)
    run = _index(tmp_path).ingest([ROOT], storage_options=server.options())
    assert (run.status, run.added, run.failed) == ("partial", 4, 1)
    assert [error["path"] for error in run.errors] == ["s3://docs/corpus/mill.md"]
    assert len(run.errors[0]["reason"].splitlines()) == 1


def test_an_empty_listing_is_refused_and_removes_nothing(tmp_path: Path, server: S3Server) -> None:
    index = _index(tmp_path)
    index.ingest([ROOT], storage_options=server.options())
    for key in NOTES:
        server.delete(key)
    with pytest.raises(RemovalRefusedError, match="holds no files now"):
        index.ingest([ROOT], storage_options=server.options())
    assert len(index.documents()) == 5


def test_wrong_credentials_are_one_line_and_remove_nothing(tmp_path: Path, server: S3Server) -> None:
    index = _index(tmp_path)
    index.ingest([ROOT], storage_options=server.options())
    options = tmp_path / "wrong.yaml"
    options.write_text(json.dumps(server.options(secret="not-the-secret-0123456789")), encoding="utf-8")
    command = ["ingest", ROOT, "--index", str(tmp_path / "ix"), "--storage-options", str(options)]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {ROOT}: access denied ("), result.output
    # how to fix it: the client's environment variables, or storage options and where they are given
    assert "AWS_ACCESS_KEY_ID" in lines[0] and "--storage-options FILE" in lines[0], lines[0]
    assert "nothing was indexed or removed" in lines[0]
    assert "not-the-secret" not in result.output
    assert len(Index.open(tmp_path / "ix", embedder=HashEmbedder()).documents()) == 5


def test_no_credentials_at_all_is_one_line_saying_where_to_set_them(
    tmp_path: Path, server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # botocore finds no credentials anywhere (no environment, no profile files, no instance metadata): its
    # NoCredentialsError is one line naming the root and the ways to give them, and nothing is removed
    index = _index(tmp_path)
    index.ingest([ROOT], storage_options=server.options())
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    options = {key: value for key, value in server.options().items() if key not in ("key", "secret")}
    with pytest.raises(SourceError) as refused:
        index.ingest([ROOT], storage_options=options)
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and message.startswith(f"{ROOT}: no credentials found ("), message
    assert "AWS_ACCESS_KEY_ID" in message and "storage_options" in message and "CITELINE_STORAGE_OPTIONS" in message
    assert len(index.documents()) == 5


@pytest.mark.parametrize("ahead", [1, 2])
def test_the_server_stopped_mid_run_fails_in_one_line_and_loses_nothing(
    tmp_path: Path, server: S3Server, monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    # fetched one at a time (the store stops before the second GET), or two at a time (the second object was
    # fetched with the first, the third's GET finds the store gone)
    monkeypatch.setattr(remote, "AHEAD_OBJECTS", ahead)
    index = _index(tmp_path)
    index.ingest([ROOT], storage_options=server.options())
    for key in ("corpus/garrison.md", "corpus/mill.md", "corpus/letters/harvest.txt"):
        server.put(key, NOTES[key] + "\nAmended after the survey.\n")
    real = pipeline.parse_source
    calls: list[str] = []

    def stop_after_first(source: Any, **kwargs: Any) -> Any:
        if calls:
            server.stop()  # the store goes away between two objects of the run
        calls.append(source.path)
        return real(source, **kwargs)

    monkeypatch.setattr(pipeline, "parse_source", stop_after_first)
    started = time.monotonic()
    with pytest.raises(SourceUnavailable) as stopped:
        index.ingest([ROOT], storage_options=server.options())
    assert time.monotonic() - started < 60
    assert len(str(stopped.value).splitlines()) == 1
    assert "stopped answering" in str(stopped.value) and "nothing was removed" in str(stopped.value)
    reopened = Index.open(tmp_path / "ix", embedder=HashEmbedder())
    assert len(reopened.documents()) == 5  # nothing lost
    assert not any("Amended" in reopened.document_text(d.doc_id) for d in reopened.documents())
    assert reopened.runs()[0].status == "failed"


def test_include_exclude_and_a_citelineignore_object(tmp_path: Path, server: S3Server) -> None:
    server.put("corpus/.citelineignore", "letters/\n# drafts stay out\n")
    server.put("corpus/drafts.md", "# Draft\n\nNot ready.\n")
    server.put("corpus/.hidden.md", "# Hidden\n\nA hidden object.\n")
    index = _index(tmp_path)
    run = index.ingest([ROOT], storage_options=server.options(), exclude=["drafts.md"], include=["*.md", "*.jsonl"])
    found = {document.source_id.split("#")[0] for document in index.documents()}
    assert found == {"garrison.md", "mill.md", "records.jsonl"}
    assert run.excluded == 3  # letters/harvest.txt (.citelineignore), drafts.md (exclude), .hidden.md (defaults)
    server.delete("corpus/.citelineignore")  # letters/ comes back; what was excluded before was never removed
    again = index.ingest([ROOT], storage_options=server.options(), exclude=["drafts.md"])
    assert (again.added, again.removed) == (1, 0)


def test_a_single_object_root_and_an_unsupported_one(tmp_path: Path, server: S3Server) -> None:
    index = _index(tmp_path)
    run = index.ingest(["s3://docs/corpus/mill.md"], storage_options=server.options())
    assert run.added == 1
    assert index.documents()[0].source_path == "s3://docs/corpus/mill.md"
    server.put("corpus/image.bin", b"\x00\x01")
    with pytest.raises(SourceError, match=r"unsupported file type \.bin"):
        index.ingest(["s3://docs/corpus/image.bin"], storage_options=server.options())
    with pytest.raises(SourceError, match="no such bucket"):
        index.ingest(["s3://no-such-bucket/corpus"], storage_options=server.options())


def test_credentials_are_never_written_under_the_index_or_logged(
    tmp_path: Path, server: S3Server, caplog: pytest.LogCaptureFixture
) -> None:
    options = server.options()
    index_dir = tmp_path / "ix"
    pairs = [
        f"--storage-option=key={options['key']}",
        f"--storage-option=secret={options['secret']}",
        f"--storage-option=client_kwargs.endpoint_url={server.endpoint}",
        "--storage-option=client_kwargs.region_name=us-east-1",
    ]
    caplog.set_level(logging.DEBUG)
    runner = CliRunner()
    outputs = []
    for extra in ([], ["--json"], ["--dry-run"]):
        result = runner.invoke(cli, ["ingest", ROOT, "--index", str(index_dir), "-v", *pairs, *extra])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    server.put("corpus/mill.md", "changed")
    assert runner.invoke(cli, ["ingest", ROOT, "--index", str(index_dir), *pairs]).exit_code == 0
    secret = options["secret"].encode()
    written = [path for path in index_dir.rglob("*") if path.is_file() and secret in path.read_bytes()]
    assert written == []
    assert options["secret"] not in "".join(outputs) + caplog.text
    assert "secret" not in repr(IngestOptions(storage_options=options))


def test_storage_options_from_the_environment_file(
    tmp_path: Path, server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the flow's and the workers' way: a file named by CITELINE_STORAGE_OPTIONS (never a Prefect parameter)
    file = tmp_path / "storage.yaml"
    file.write_text(json.dumps({"s3": server.options()}), encoding="utf-8")
    monkeypatch.setenv(remote.OPTIONS_ENV, str(file))
    run = _index(tmp_path).ingest([ROOT])
    assert run.added == 5


def test_a_schedule_keeps_the_url_and_no_credential(tmp_path: Path) -> None:
    from citeline.orchestration.serve import build_deployment

    deployment = build_deployment([ROOT], cron="0 * * * *", index_path=str(tmp_path / "ix"))
    assert deployment.parameters["paths"] == [ROOT]
    # a Prefect Secret block's name is a parameter (`citeline schedule --storage-block NAME`), its value never
    named = build_deployment([ROOT], cron="0 * * * *", index_path=str(tmp_path / "ix"), storage_block="docs-store")
    assert named.parameters["storage_block"] == "docs-store"


def test_storage_option_pairs() -> None:
    parsed = remote.parse_pairs(["anon=true", "client_kwargs.endpoint_url=http://h:9000", "secret=a:b{c"])
    assert parsed == {"anon": True, "client_kwargs": {"endpoint_url": "http://h:9000"}, "secret": "a:b{c"}
    assert remote.is_remote("s3://b/p") and remote.is_remote("https://h/a.md") and not remote.is_remote("c://x")
    assert not remote.is_remote("file:///tmp/x") and not remote.is_remote("docs/s3://x")
    with pytest.raises(SourceError, match="holds credentials") as refused:
        resolve_roots(["https://reader:hunter2@example.org/a.md"])
    assert "hunter2" not in str(refused.value)


# ---------------------------------------------------------------- a web server


class _Handler(http.server.SimpleHTTPRequestHandler):
    gets: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).gets.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A local http.server serving ``tmp_path/site``; its handler counts GETs."""
    site = tmp_path / "site"
    site.mkdir()
    _Handler.gets = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: _Handler(*a, directory=str(site), **k))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield site, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class _SlowHandler(_Handler):
    # Each GET takes 0.3 s; the most GETs in flight at once is kept (what fetching ahead overlaps). A GET counts as
    # done before its response is written: counted after, the client could have read the whole answer and asked its
    # next GET while this thread had not yet taken itself off the count, two "in flight" one after the other on a
    # loaded machine (the one-at-a-time case failed so about once in ten runs of the default tier).
    lock = threading.Lock()
    in_flight = 0
    most: ClassVar[list[int]] = [0]

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.most[0] = max(cls.most[0], cls.in_flight)
        try:
            time.sleep(0.3)
        finally:
            with cls.lock:
                cls.in_flight -= 1
        super().do_GET()


@pytest.mark.parametrize(("objects", "budget", "expected"), [(16, None, 16), (3, None, 3), (None, 60, 1)])
def test_objects_are_fetched_concurrently_within_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, objects: int | None, budget: int | None, expected: int
) -> None:
    # 20 web pages: fetched AHEAD_OBJECTS at a time (never more in flight), or one at a time when each is past
    # the byte budget (AHEAD_BYTES: never more held than it, one object at least)
    site = tmp_path / "site"
    site.mkdir()
    for number in range(20):
        (site / f"page{number}.md").write_text(f"# Page {number}\n\nThe well at site {number} ran dry.\n")
    if objects is not None:
        monkeypatch.setattr(remote, "AHEAD_OBJECTS", objects)
    if budget is not None:
        monkeypatch.setattr(remote, "AHEAD_BYTES", budget)
    # a class of this test's own: an earlier test's handler may still be finishing (its counts are not this test's)
    handler = type("Slow", (_SlowHandler,), {"gets": [], "most": [0], "in_flight": 0, "lock": threading.Lock()})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: handler(*a, directory=str(site), **k))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        run = _index(tmp_path).ingest([f"{base}/page{number}.md" for number in range(20)])
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert (run.added, run.failed) == (20, 0)
    assert len(handler.gets) == 20  # each page fetched once
    # never more in flight than the bound; more than one when the bound allows it (all of them on an idle machine)
    assert handler.most[0] <= expected and (handler.most[0] > 1) == (expected > 1)


def test_a_web_url_is_one_document_read_again_only_when_it_changes(tmp_path: Path, web: tuple[Path, str]) -> None:
    site, base = web
    page = site / "report.md"
    page.write_text("# Report\n\nThe survey counted forty wells.\n", encoding="utf-8")
    old = time.time() - 3600
    os.utime(page, (old, old))  # settled: the server's Last-Modified vouches for it (no ETag from http.server)
    index = _index(tmp_path)
    url = f"{base}/report.md"
    assert index.ingest([url]).added == 1
    assert index.documents()[0].source_path == url
    assert _Handler.gets == ["/report.md"]
    assert index.ingest([url]).unchanged == 1
    assert _Handler.gets == ["/report.md"]  # a HEAD, no GET
    page.write_text("# Report\n\nThe survey counted fifty wells.\n", encoding="utf-8")
    os.utime(page, (old + 60, old + 60))
    assert index.ingest([url]).updated == 1
    assert len(_Handler.gets) == 2
    # a URL answering 404 fails alone, in the server's words (tests/index/test_remote_web.py: each URL alone)
    missing = index.ingest([f"{base}/missing.md"])
    assert missing.status == "partial"
    assert index.runs(1)[0].errors[0]["reason"].startswith("404 File not found")


def test_an_index_written_before_stamps_gets_the_column(tmp_path: Path) -> None:
    # the catalog's files table of an index written before remote roots has no stamp column: a read-only plan
    # still answers, and the next commit adds the column
    import duckdb

    docs = tmp_path / "docs"
    docs.mkdir()
    note = docs / "note.md"
    note.write_text("# Note\n\nThe garrison held.\n", encoding="utf-8")
    old = time.time() - 3600
    os.utime(note, (old, old))
    index = _index(tmp_path)
    index.ingest([docs])
    with duckdb.connect(str(tmp_path / "ix" / "meta.duckdb")) as connection:
        connection.execute("ALTER TABLE files DROP COLUMN stamp")
    assert index.ingest([docs], dry_run=True).unchanged == 1
    assert index.ingest([docs]).unchanged == 1
    with duckdb.connect(str(tmp_path / "ix" / "meta.duckdb")) as connection:
        columns = {row[0] for row in connection.execute("DESCRIBE files").fetchall()}
    assert "stamp" in columns
