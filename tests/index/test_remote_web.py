"""Web URL roots against a local server with hostile behaviours (tests/_web_server.py): each URL fails alone with
the server's status in its own words, a gone URL (404, 410) is removed under the removal guard, an extensionless
URL is read in the format its Content-Type names, the byte limit bounds what is read (a HEAD that lies, a chunked
body, a gzip bomb, a redirect to a big body), the stamp holds ETag and Last-Modified, and a presigned URL's
signature is fetched with but never stored or printed."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _web_server import MiB, Route, WebServer, endless, gzip_bomb, stalled, trickle
from click.testing import CliRunner
from conftest import HashEmbedder

from citeline import Index
from citeline.cli.main import cli
from citeline.errors import RemovalRefusedError
from citeline.sources import remote
from citeline.sources.parsers import SourceFile, parse_source


@pytest.fixture
def web() -> Iterator[WebServer]:
    server = WebServer()
    yield server
    server.stop()


def _index(tmp_path: Path) -> Index:
    return Index.create(tmp_path / "ix", embedder=HashEmbedder())


def _errors(index: Index) -> dict[str, str]:
    return {error["path"]: error["reason"] for error in index.runs(1)[0].errors}


PAGES = {
    "/garrison.md": "# Garrison\n\nThe garrison at the river crossing held for three days.\n",
    "/mill.md": "# Mill\n\nThe mill ground barley for the whole district.\n",
    "/harvest.md": "# Harvest\n\nThe harvest failed in the northern valleys after the late frost.\n",
    "/wells.md": "# Wells\n\nThe survey counted forty wells along the old road.\n",
}


def test_each_url_fails_alone_and_a_gone_one_is_removed(tmp_path: Path, web: WebServer) -> None:
    urls = {path: web.page(path, text, etag=path) for path, text in PAGES.items()}
    index = _index(tmp_path)
    assert index.ingest(list(urls.values())).added == 4
    # garrison edited, mill a server error, harvest gone (404), wells unchanged
    web.page("/garrison.md", PAGES["/garrison.md"].replace("three", "five"), etag="garrison-2")
    web.routes["/mill.md"] = Route(500, {"Content-Type": "text/plain"}, body=b"boom")
    web.routes["/harvest.md"] = Route(404, {"Content-Type": "text/plain"}, body=b"gone")
    run = index.ingest(list(urls.values()))
    assert (run.status, run.updated, run.removed, run.unchanged) == ("partial", 1, 1, 1)  # the 500: kept
    errors = _errors(index)
    assert errors[urls["/mill.md"]] == "500 Internal Server Error"  # http.server's phrase, not "no such bucket"
    assert errors[urls["/harvest.md"]].startswith("404 Not Found")  # the server's own words
    paths = {document.source_path for document in index.documents()}
    assert paths == {urls["/garrison.md"], urls["/mill.md"], urls["/wells.md"]}  # the 500's document is kept
    assert "five" in index.search("garrison crossing", k=1)[0].text
    # 410 Gone removes as 404 does
    web.routes["/mill.md"] = Route(410, {"Content-Type": "text/plain"}, body=b"")
    run = index.ingest([urls["/garrison.md"], urls["/mill.md"], urls["/wells.md"]])
    assert (run.removed, _errors(index)[urls["/mill.md"]].startswith("410 Gone")) == (1, True)


def test_a_lone_gone_url_is_refused_by_the_removal_guard(tmp_path: Path, web: WebServer) -> None:
    # One URL of its site, gone: as the last file of a folder deleted (all of the site's documents would go)
    url = web.page("/wells.md", PAGES["/wells.md"])
    index = _index(tmp_path)
    index.ingest([url])
    web.routes.pop("/wells.md")
    with pytest.raises(RemovalRefusedError, match=r"http://127\.0\.0\.1:\d+ holds no files now"):
        index.ingest([url])
    assert len(index.documents()) == 1
    assert index.ingest([url], allow_removals=True).removed == 1


def test_the_format_of_an_extensionless_url_comes_from_its_content_type(tmp_path: Path, web: WebServer) -> None:
    html = (
        "<html><head><title>Docs</title></head><body><article><p>The ferry crossed at dawn.</p></article></body></html>"
    )
    pdf = (Path(__file__).parents[2] / "seeds").rglob("*.pdf")
    urls = [
        web.page("/docs/", html, "text/html; charset=utf-8"),
        web.page("/notes", "# Notes\n\nThe granary was rebuilt.\n", "text/markdown"),
        web.page("/plain", "The lighthouse keeper logged the storm.\n", "text/plain"),
        web.page("/page.php", html.replace("ferry", "barge"), "text/html"),  # a name no parser reads
        web.page("/logo", b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image/png"),
    ]
    first_pdf = next(iter(pdf), None)
    if first_pdf is not None:
        urls.append(web.page("/paper", first_pdf.read_bytes(), "application/pdf"))
    table = web.page("/table", "id\ttext\n1\tThe ferry crossed.\n2\tThe mill burned.\n", "text/tab-separated-values")
    index = _index(tmp_path)
    run = index.ingest([*urls, table])
    assert run.status == "partial" and run.added == len(urls) - 1 + 2  # the table's two rows
    tables = [document for document in index.documents() if document.source_path.startswith(table)]
    assert [document.format for document in tables] == ["tsv", "tsv"]
    formats = {
        document.source_path.rsplit("/", 1)[-1] or "docs/": document.format
        for document in index.documents()
        if not document.source_path.startswith(table)
    }
    assert formats["notes"] == "markdown" and formats["plain"] == "text" and formats["page.php"] == "html"
    assert formats["docs/"] == "html" and (first_pdf is None or formats["paper"] == "pdf")
    assert _errors(index)[urls[4]].startswith("unsupported Content-Type image/png (the URL names no file type)")


@pytest.mark.parametrize(
    ("name", "route"),
    [
        # HEAD says 100 bytes; GET streams a chunked body without end
        ("lying", Route(200, {"Content-Type": "text/plain"}, head={"Content-Length": "100"}, body=endless())),
        # 2 MiB on the wire inflating to 2 GiB
        (
            "bomb",
            Route(200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, body=gzip_bomb(2048 * MiB)),
        ),
        # HEAD answers for a small page; GET redirects to an endless body
        ("redirect", Route(302, {"Location": "/endless.txt"}, head={"Content-Length": "10"}, body=b"")),
    ],
)
def test_the_byte_limit_bounds_what_is_read_not_what_a_header_says(
    tmp_path: Path, web: WebServer, name: str, route: Route
) -> None:
    if name == "redirect":
        route.head = {}
        web.routes["/endless.txt"] = Route(200, {"Content-Type": "text/plain"}, body=endless())
        # the HEAD follows the redirect too: the endless body's HEAD lies
        web.routes["/endless.txt"].head = {"Content-Length": "10"}
    web.routes[f"/{name}.txt"] = route
    ok = web.page("/wells.md", PAGES["/wells.md"])
    index = _index(tmp_path)
    started = time.monotonic()
    run = index.ingest([f"{web.base}/{name}.txt", ok], max_file_bytes=4 * MiB)
    assert time.monotonic() - started < 30
    assert (run.status, run.added) == ("partial", 1)
    assert _errors(index)[f"{web.base}/{name}.txt"].startswith("more than 4,194,304 bytes read, above the 4,194,304")


def test_a_streamed_web_record_file_reads_in_bounded_pieces(web: WebServer) -> None:
    # A JSONL body without a length (chunked): read line by line through the same reader as a local file, with
    # readline(size) and a seek back to the start after the sniff, in one GET
    lines = b"".join(b'{"id": "r%d", "text": "record %d of the export"}\n' % (n, n) for n in range(50_000))
    web.routes["/export.jsonl"] = Route(200, {"Content-Type": "application/jsonl"}, body=lambda: iter([lines]))
    url = f"{web.base}/export.jsonl"
    source = SourceFile(url, url, "export.jsonl", size=0)
    parsed = parse_source(source)
    assert len(parsed.documents) == 50_000 and not parsed.errors
    assert web.gets == ["/export.jsonl"]


def test_the_stamp_holds_etag_and_last_modified(tmp_path: Path, web: WebServer) -> None:
    url = web.page("/wells.md", PAGES["/wells.md"], etag="same", mtime=time.time() - 7200)
    index = _index(tmp_path)
    index.ingest([url])
    # the same ETag (a cache's, an inode's), the content and its Last-Modified moved: read again
    web.page("/wells.md", PAGES["/wells.md"].replace("forty", "fifty"), etag="same", mtime=time.time() - 3600)
    assert index.ingest([url]).updated == 1
    assert index.ingest([url]).unchanged == 1


def test_a_presigned_urls_signature_is_fetched_with_but_never_stored_or_printed(
    tmp_path: Path, web: WebServer, caplog: pytest.LogCaptureFixture
) -> None:
    web.page("/report.md", "# Report\n\nThe survey counted forty wells.\n")
    web.routes["/report.md"].needs = "X-Amz-Signature=s3cr3tsig"
    signed = (
        f"{web.base}/report.md?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261207"
        "&X-Amz-Date=20261207T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=s3cr3tsig"
    )
    index = _index(tmp_path)
    caplog.set_level(logging.DEBUG)
    run = index.ingest([signed])
    assert run.added == 1
    assert index.documents()[0].source_path == f"{web.base}/report.md"
    web.routes["/report.md"].status = 503  # a failure's line names the URL too
    index.ingest([signed])
    printed = [
        CliRunner().invoke(cli, [command, "--index", str(tmp_path / "ix"), "--format", "json"]).output
        for command in ("documents", "runs")
    ]
    assert f"{web.base}/report.md" in printed[0]
    for text in [*printed, caplog.text, json.dumps([error for summary in index.runs() for error in summary.errors])]:
        assert "s3cr3tsig" not in text and "AKIAEXAMPLE" not in text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"s3cr3tsig" not in path.read_bytes() and b"AKIAEXAMPLE" not in path.read_bytes(), path
    web.routes["/report.md"].status = 200
    # the same object signed again is the same document
    web.routes["/report.md"].needs = "X-Amz-Signature=other"
    assert index.ingest([signed.replace("s3cr3tsig", "other")]).unchanged == 1


def test_without_secrets_keeps_the_rest_of_the_query() -> None:
    assert remote.without_secrets("https://h/a?id=4&sp=2") == "https://h/a?id=4&sp=2"  # no sig: no SAS
    assert remote.without_secrets("https://h/a.md?sv=1&sp=r&sig=X&page=2") == "https://h/a.md?page=2"
    assert remote.without_secrets("https://h/a?token=abc&api_key=k&x=1#top") == "https://h/a?x=1#top"


def test_a_tls_failure_and_no_connection_say_what_they_are(tmp_path: Path, web: WebServer) -> None:
    ok = web.page("/wells.md", PAGES["/wells.md"])
    tls = web.base.replace("http://", "https://") + "/wells.md"  # a plain HTTP server asked for TLS
    index = _index(tmp_path)
    run = index.ingest([ok, tls, "http://127.0.0.1:9/closed.md"])
    assert (run.status, run.added) == ("partial", 1)
    errors = _errors(index)
    assert errors[tls].startswith("TLS failure") or errors[tls].startswith("cannot connect"), errors[tls]
    assert errors["http://127.0.0.1:9/closed.md"].startswith("cannot connect")
    assert not any("no such bucket" in reason for reason in errors.values())


def test_a_dead_url_never_stalls_the_others(tmp_path: Path, web: WebServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The ways a real server dies, each beside honest pages: silent before its headers, silent after them, a
    # Content-Length it never sends, a body trickled forever, a redirect loop, a port with no server. Each fails
    # alone with one line naming its URL, within the bounds (made short here), and the others are indexed.
    monkeypatch.setattr(remote, "WEB_CONNECT_SECONDS", 2.0)
    monkeypatch.setattr(remote, "WEB_SILENCE_SECONDS", 1.0)
    monkeypatch.setattr(remote, "WEB_REQUEST_SECONDS", 4.0)
    honest = [web.page(path, text) for path, text in PAGES.items()]
    md = {"Content-Type": "text/markdown"}
    web.routes["/silent.md"] = Route(200, md, body=b"# Silent\n", silent=60)
    web.routes["/headers-then-nothing.md"] = Route(200, {**md, "Content-Length": "400"}, body=stalled(b"# Half"))
    web.routes["/claims-6-mib.md"] = Route(200, {**md, "Content-Length": str(6 * MiB)}, body=stalled())  # ahead
    web.routes["/claims-40-mib.md"] = Route(200, {**md, "Content-Length": str(40 * MiB)}, body=stalled())  # streamed
    web.routes["/trickle.md"] = Route(200, md, head={"Content-Length": "60"}, body=trickle())
    web.routes["/loop.md"] = Route(302, {"Location": "/loop.md"})
    # Honest about its bytes, not about its size: a HEAD of 100 bytes, a body of 3 MiB (past what is held ahead).
    log = "The ferry log lists every crossing of the year. " * 65_000
    long = ("# Long\n\n" + log + "Last came the storm.\n").encode()
    web.routes["/bigger-than-head.md"] = Route(200, md, head={"Content-Length": "100"}, body=lambda: iter([long]))
    web.routes["/no-length.md"] = Route(200, md, body=endless())  # chunked, past --max-file-bytes
    dead = {
        web.base + "/silent.md": "the server did not answer in time",
        web.base + "/headers-then-nothing.md": "the server did not answer in time",
        web.base + "/claims-6-mib.md": "the server did not answer in time",
        web.base + "/claims-40-mib.md": "the server did not answer in time",
        web.base + "/trickle.md": "slower than the 1,024 bytes a second a download must keep",
        web.base + "/loop.md": "too many redirects",
        "http://127.0.0.1:9/closed.md": "cannot connect",
        web.base + "/no-length.md": "bytes read, above the 50,331,648-byte limit",
    }
    index = _index(tmp_path)
    started = time.monotonic()
    run = index.ingest([*honest[:2], *dead, web.base + "/bigger-than-head.md", *honest[2:]], max_file_bytes=48 * MiB)
    took = time.monotonic() - started
    # Each dead URL costs its bound once (a HEAD, then a GET fetched ahead beside the others), never aiohttp's 300 s.
    assert took < 30, took
    assert (run.status, run.added) == ("partial", len(honest) + 1)
    errors = _errors(index)
    assert set(errors) == set(dead), errors
    for url, reason in dead.items():
        assert reason in errors[url] and "\n" not in errors[url], (url, errors[url])
        if "in time" in reason:  # the server's own words, as a HEAD's failure says them ("cannot read file:" before)
            assert errors[url] == reason, errors[url]
    hits = index.search("the storm came last", k=1, mode="lexical", min_score=0)
    assert hits and hits[0].source_path.endswith("/bigger-than-head.md")  # read whole, past what its HEAD said


def test_a_trickle_fails_by_its_rate_and_a_slow_reader_is_not_a_slow_server(
    tmp_path: Path, web: WebServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A body trickled a few bytes at a time is never silent for the silence bound: it fails by its rate, in about
    # the silence bound, not the request bound. A run that reads a streamed body slowly (its own pauses: a record
    # file parsed and embedded as it streams) is not a slow server: only the time a read waits counts.
    monkeypatch.setattr(remote, "WEB_SILENCE_SECONDS", 0.5)
    monkeypatch.setattr(remote, "WEB_REQUEST_SECONDS", 60.0)
    web.routes["/trickle.jsonl"] = Route(200, {"Content-Type": "application/jsonl"}, body=trickle(b"{} ", 0.05))
    web.routes["/steady.jsonl"] = Route(200, {"Content-Type": "application/jsonl"}, body=endless(total=4 * MiB))
    started = time.monotonic()
    slow = r"the server sent [\d,]+ bytes in \d+ s, slower than the 1,024 bytes a second"
    trickled = SourceFile(web.base, web.base + "/trickle.jsonl", "trickle.jsonl", size=0)
    with pytest.raises(OSError, match=slow), remote.open_object(trickled) as body:
        while body.read(4096):
            pass
    assert time.monotonic() - started < 5
    read = 0
    with remote.open_object(SourceFile(web.base, web.base + "/steady.jsonl", "steady.jsonl", size=0)) as body:
        while piece := body.read(64 * 1024):
            read += len(piece)
            time.sleep(0.02)  # the run's own pace: 64 reads a second, longer than the bound in all
    assert read >= 4 * MiB  # all of it, read over more than the silence bound of waits and pauses


def test_urls_of_a_dead_host_cost_its_bound_once(
    tmp_path: Path, web: WebServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A host whose server accepts connections and never answers (a hung backend): its URLs are asked together, so
    # eight of them cost one silence bound, not eight in a row, and the honest page beside them is indexed.
    monkeypatch.setattr(remote, "WEB_SILENCE_SECONDS", 1.0)
    honest = web.page("/wells.md", PAGES["/wells.md"])
    for number in range(8):
        web.routes[f"/hung-{number}.md"] = Route(200, {"Content-Type": "text/markdown"}, body=b"# Hung\n", silent=30)
    hung = [f"{web.base}/hung-{number}.md" for number in range(8)]
    index = _index(tmp_path)
    started = time.monotonic()
    run = index.ingest([*hung, honest])
    took = time.monotonic() - started
    assert took < 5, took  # one after another: 8 s at least
    assert (run.status, run.added) == ("partial", 1)
    assert all("did not answer in time" in reason for reason in _errors(index).values())
    assert set(_errors(index)) == set(hung)
