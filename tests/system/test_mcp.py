"""The MCP server (issue 44): the official SDK's own client over stdio (``citeline mcp`` as a subprocess) and over
streamable HTTP (a real ``citeline serve`` on a loopback port). The index is built with the HashEmbedder; the server
processes search lexically without collapse, which needs no model, unless they are given the HashEmbedder too."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import _mcp_wire
import anyio
import httpx
import pytest
from _common import DAMAGE, examples
from _mcp_wire import Wire, hash_server
from conftest import REPO, SEEDS, HashEmbedder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from test_server import _free_port, _when_up

from citeline import Index
from citeline.errors import SettingsError
from citeline.query.plan import MODES, SearchRequest
from citeline.server import LIMITS
from citeline.server.mcp.schemas import MAX_SPAN_CHARS, QUOTE_CHARS
from citeline.server.mcp.stdio import MAX_REQUEST_BYTES
from citeline.server.mcp.tools import allowed_roots, parse_uri, uri_of

LEXICAL = {"mode": "lexical", "collapse": False}  # no model needed in the server process
TOOLS = {"search", "get_passage", "get_document", "list_documents", "index_status"}


def _index(root: Path) -> Index:
    docs = root / "docs"
    docs.mkdir()
    for seed in SEEDS.iterdir():
        (docs / seed.name).write_text(seed.read_text(encoding="utf-8"), encoding="utf-8")
    (docs / "records.jsonl").write_text(
        '{"_id": "r1", "title": "Ledger", "text": "Quartermaster ledgers show the pay stopped in May.", '
        '"url": "https://example.org/ledger"}\n',
        encoding="utf-8",
    )
    index = Index.create(root / "ix", embedder=HashEmbedder())
    index.ingest([docs])
    return index


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return _index(tmp_path_factory.mktemp("mcp"))


def _env() -> dict[str, str]:
    return _mcp_wire.env()


def _cli(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "citeline.cli.main", *args], env=_env())


def _python(code: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-c", code], env=_env())


@asynccontextmanager
async def _stdio(params: StdioServerParameters) -> AsyncIterator[ClientSession]:
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def _run(params: StdioServerParameters, test: Callable[[ClientSession], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(120):
            async with _stdio(params) as session:
                await test(session)

    anyio.run(main)


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def _error(session: ClientSession, tool: str, arguments: dict[str, Any]) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, (tool, arguments, result)
    message = _text(result)
    assert "\n" not in message and "Traceback" not in message
    return message


# ---------------------------------------------------------------- stdio


def test_stdio_tools_cite_and_open_what_they_cite(index: Index) -> None:
    async def test(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLS  # read-only by default: no ingest tool
        # The search tool's parameters are SearchRequest's declared options: names, help, bounds, choices.
        schema = tools["search"].input_schema
        declared = {f.name: f.metadata for f in dataclasses.fields(SearchRequest) if "help" in f.metadata}
        names = {"query" if name == "text" else name for name in declared}
        assert set(schema["properties"]) == names and schema["required"] == ["query"]
        for name, meta in declared.items():
            assert schema["properties"]["query" if name == "text" else name]["description"] == meta["help"]
        assert schema["properties"]["k"]["maximum"] == LIMITS.k and schema["properties"]["k"]["minimum"] == 1
        assert schema["properties"]["mode"]["enum"] == list(MODES)
        assert tools["search"].output_schema is not None and tools["search"].annotations.read_only_hint

        found = await session.call_tool("search", {"query": "quartermaster ledgers pay", "k": 3, **LEXICAL})
        assert not found.is_error and found.structured_content is not None
        hits = found.structured_content["results"]
        assert hits and found.structured_content["generation"] == index.status().generation
        record = next(hit for hit in hits if hit["record_id"] == "r1")
        assert record["source"] == "https://example.org/ledger" and record["source_id"].endswith("records.jsonl#r1")
        text = index.document(record["doc_id"]).text
        for hit in hits:  # offsets are into the document's text; highlights and quote come from it
            body = index.document(hit["doc_id"]).text
            assert hit["uri"] == uri_of(hit["doc_id"], hit["char_start"], hit["char_end"])
            for light in hit["highlights"]:
                assert body[light["char_start"] : light["char_end"]] == light["text"]
            assert 0 < len(hit["quote"]) <= QUOTE_CHARS
        assert "records.jsonl#r1" in _text(found) or "example.org/ledger" in _text(found)

        # Open the citation: the resource, the passage tool and the document tool agree with the stored text.
        read = await session.read_resource(record["uri"])
        assert read.contents[0].text == text[record["char_start"] : record["char_end"]]  # type: ignore[union-attr]
        whole = await session.read_resource(uri_of(record["doc_id"]))
        assert whole.contents[0].text == text  # type: ignore[union-attr]
        arguments = {"doc_id": record["doc_id"], "char_start": 5, "char_end": 10, "context": 3}
        passage = (await session.call_tool("get_passage", arguments)).structured_content
        assert passage is not None and (passage["char_start"], passage["text"]) == (2, text[2:13])
        seed = index.documents({"path_glob": ["*.md"]}, 1)[0]
        body = index.document(seed.doc_id).text
        pages, offset = [], 0
        while offset is not None:
            page = await session.call_tool("get_document", {"doc_id": seed.doc_id, "offset": offset, "max_chars": 700})
            assert page.structured_content is not None and len(page.structured_content["text"]) <= 700
            pages.append(page.structured_content["text"])
            offset = page.structured_content["next_offset"]
        assert "".join(pages) == body and len(pages) > 1

        listed = (await session.call_tool("list_documents", {"limit": 2})).structured_content
        assert listed is not None and len(listed["documents"]) == 2 and listed["next_offset"] == 2
        rest = await session.call_tool("list_documents", {"limit": 100, "offset": 2})
        assert rest.structured_content is not None and rest.structured_content["next_offset"] is None
        assert len(rest.structured_content["documents"]) == index.status().documents - 2
        filtered = await session.call_tool("list_documents", {"filters": {"path": ["*.jsonl"]}})
        assert [d["source_id"] for d in filtered.structured_content["documents"]] == [record["source_id"]]  # type: ignore[index]
        status = await session.call_tool("index_status", {})
        assert status.structured_content is not None and status.structured_content["documents"] == 5

        resources = await session.list_resources()
        assert {r.uri for r in resources.resources} == {uri_of(d.doc_id) for d in index.documents()}
        templates = await session.list_resource_templates()
        assert templates.resource_templates[0].uri_template == "citeline://{doc_id}/chars/{start}-{end}"

    _run(_cli("mcp", "--index", str(index.path)), test)


def test_bad_arguments_are_tool_errors_and_the_server_goes_on(index: Index) -> None:
    async def test(session: ClientSession) -> None:
        assert "'k'" in await _error(session, "search", {"query": "pay", "k": 0})
        assert "'k'" in await _error(session, "search", {"query": "pay", "k": LIMITS.k + 1})
        assert "mode" in await _error(session, "search", {"query": "pay", "mode": "fuzzy"})
        assert await _error(session, "search", {"k": 3}) == "Missing argument 'query'"
        assert "query" in await _error(session, "search", {"query": "   ", **LEXICAL})  # QueryError: empty
        extra = await _error(session, "search", {"query": "pay", "path": "/etc/passwd"})
        assert "Extra inputs are not permitted" in extra
        assert "where" in await _error(session, "search", {"query": "pay", "filters": {"where": ["nonsense"]}})
        assert "no document 'nope'" in await _error(session, "get_document", {"doc_id": "nope"})
        assert "before" in await _error(session, "get_passage", {"doc_id": "x", "char_start": 9, "char_end": 2})
        big = MAX_SPAN_CHARS + 1
        assert "max_chars" in await _error(session, "get_document", {"doc_id": "x", "max_chars": big})
        assert "unknown tool 'ingest'" in await _error(session, "ingest", {"root": 0})
        for uri in ("citeline://nope", "file:///etc/passwd", "citeline://a/b", "citeline://a/chars/9-2"):
            with pytest.raises(MCPError) as caught:
                await session.read_resource(uri)
            assert "\n" not in str(caught.value.error.message)
            assert caught.value.error.code == -32602  # the caller's to correct: invalid params (SEP-2164)
        found = await session.call_tool("search", {"query": "pay", **LEXICAL})  # still serving
        assert not found.is_error and found.structured_content["results"]  # type: ignore[index]

    _run(_cli("mcp", "--index", str(index.path)), test)


def test_a_missing_index_is_one_line_and_exit_1(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "citeline.cli.main", "mcp", "--index", str(tmp_path / "none")],
        env=_env(),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: no citeline index at")


_HANDSHAKE = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "ledger", **LEXICAL}},
    },
]


def _lines(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


def _answered(output: bytes) -> dict[Any, dict[str, Any]]:
    answers = [json.loads(line) for line in output.splitlines()]
    assert all(answer["jsonrpc"] == "2.0" for answer in answers)
    return {answer.get("id"): answer for answer in answers}


def _searched(answers: dict[Any, dict[str, Any]]) -> None:
    assert {1, 2, 3} <= set(answers) and "error" not in answers[3], answers.get(3)
    hits = answers[3]["result"]["structuredContent"]["results"]
    assert hits and hits[0]["source_id"] == "records.jsonl#r1"


def mcp_process(index: Index) -> subprocess.Popen[bytes]:
    """``citeline mcp`` on ``index`` in a subprocess, its three standard streams pipes."""
    return subprocess.Popen(
        [sys.executable, "-m", "citeline.cli.main", "mcp", "--index", str(index.path)],
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_stdio_takes_lines_as_a_client_writes_them(index: Index) -> None:
    """The wire as clients really write it: a line in pieces, several lines in one write, a line that is not JSON
    (nor UTF-8) among them, a line longer than the server reads (skipped, said on stderr, answered as an invalid
    request for id null); a client that reads its
    answers late; then the client closes stdin in the middle of another over-long line and the server ends cleanly
    (exit 0, nothing on stderr but logging)."""
    server = mcp_process(index)
    assert server.stdin is not None and server.stdout is not None
    try:
        first = _lines(_HANDSHAKE[0])
        for piece in (first[:25], first[25:60], first[60:]):
            server.stdin.write(piece)
            server.stdin.flush()
            time.sleep(0.2)
        lone = {"name": "search", "arguments": {"query": "caf\udce9 ledger"}}  # json.dumps writes "caf\\udce9"
        unparsable = _lines({"jsonrpc": "2.0", "id": 79, "method": "tools/call", "params": lone})
        server.stdin.write(b"\xff\xfe not json\n" + _too_long(77) + b"\n" + unparsable + _lines(*_HANDSHAKE[1:]))
        server.stdin.flush()
        output = b""
        while b'"id":3' not in output:  # every answer is one line; the search's is the last
            line = server.stdout.readline()
            assert line, "the server ended before answering"
            output += line
        # A client slow to read: 300 answers of 5 kB (far more than a pipe holds) queue in the server until read.
        listings = [{"jsonrpc": "2.0", "id": 100 + n, "method": "tools/list"} for n in range(300)]
        server.stdin.write(_lines(*listings))
        server.stdin.flush()
        time.sleep(1)
        listed = [json.loads(server.stdout.readline()) for _ in listings]
        assert sorted(answer["id"] for answer in listed) == [listing["id"] for listing in listings]
        assert all(len(answer["result"]["tools"]) == len(TOOLS) for answer in listed)
        server.stdin.write(_too_long(78))
        rest, errors = server.communicate(timeout=60)  # closes stdin: the client is done
    finally:
        server.kill()
    answered = _answered(output + rest)
    _searched(answered)
    assert 77 not in answered and 78 not in answered
    # JSON the SDK cannot parse is answered with JSON-RPC's parse error: for the request's id when Python's JSON
    # reader finds one (a lone surrogate), else for id null; never left to the client's timeout
    assert answered[79]["error"]["code"] == -32700 and "surrogate" in answered[79]["error"]["message"], answered[79]
    # ... and the lines whose id cannot be read for id null: the one that is not JSON, the two over-long ones
    unknown = [answer for answer in map(json.loads, (output + rest).splitlines()) if answer.get("id") is None]
    assert sorted(answer["error"]["code"] for answer in unknown) == [-32700, -32600, -32600], unknown
    assert errors.count(b"skipped a request line longer than") == 2, errors.decode(errors="replace")[-2000:]
    assert server.returncode == 0 and b"Traceback" not in errors, errors.decode(errors="replace")[-2000:]


def _too_long(request_id: int) -> bytes:
    """A search whose line is longer than ``citeline mcp`` reads (``MAX_REQUEST_BYTES``), without its newline."""
    query = "ledger " * (MAX_REQUEST_BYTES // 7 + 1000)
    call = {"name": "search", "arguments": {"query": query}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}).encode()


_READ_STDIN = """
import asyncio, os
from citeline.server.mcp.stdio import _stdin_pipe

async def main():
    async with _stdin_pipe() as lines:
        if lines is None:
            print("not a pipe")
            return
        stray = os.read(0, 10)  # a library or a child reading fd 0 while the server serves
        got = [line async for line in lines]
    print(repr(stray), got, os.get_blocking(0), os.read(0, 10))

asyncio.run(main())
"""


@pytest.mark.parametrize("wire", ["pipe", "socket"])
def test_the_loop_reads_a_pipe_and_nothing_else_reads_the_wire(tmp_path: Path, wire: str) -> None:
    """``citeline mcp`` reads a pipe (or a socket: Node's child processes get socket pairs) on its event loop: while
    it serves, fd 0 reads the null device (so nothing else can take the client's requests), the lines arrive whole,
    bad UTF-8 replaced as the SDK's reader does, the last one without its newline too, and at the end fd 0 is the
    wire again, blocking as it was. A regular file is read the same way, on a worker thread (so that each line's
    answer is ours to give, citeline.server.mcp.stdio._FileLines)."""
    sent = b"one\ntw\xffo\nthree"
    if wire == "pipe":
        run = subprocess.run(
            [sys.executable, "-c", _READ_STDIN], input=sent, capture_output=True, env=_env(), timeout=60
        )
    else:
        ours, theirs = socket.socketpair()
        with ours, theirs:
            ours.sendall(sent)
            ours.shutdown(socket.SHUT_WR)
            run = subprocess.run(
                [sys.executable, "-c", _READ_STDIN], stdin=theirs, capture_output=True, env=_env(), timeout=60
            )
    assert run.stdout.decode().split("\n")[0] == "b'' ['one\\n', 'tw\ufffdo\\n', 'three'] True b''", run.stderr
    (tmp_path / "requests").write_bytes(b"one\n")
    with (tmp_path / "requests").open("rb") as requests:
        run = subprocess.run([sys.executable, "-c", _READ_STDIN], stdin=requests, capture_output=True, env=_env())
    assert run.stdout.decode().strip() == "b'' ['one\\n'] True b''", run.stderr  # read on a thread, claimed too


def _batch() -> bytes:
    """The handshake, then 40 searches and 40 listings interleaved: a client that writes all it asks at once."""
    asks: list[dict[str, Any]] = []
    for n in range(40):
        search = {"name": "search", "arguments": {"query": "ledger", **LEXICAL}}
        asks.append({"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call", "params": search})
        asks.append({"jsonrpc": "2.0", "id": 200 + n, "method": "tools/list"})
    return _lines(*_HANDSHAKE, *asks)


def _all_answered(output: bytes) -> None:
    answered = _answered(output)
    assert set(answered) == {1, 2, 3} | set(range(100, 140)) | set(range(200, 240))
    assert all("result" in answer for answer in answered.values()), [a for a in answered.values() if "error" in a][:2]
    _searched(answered)
    assert all(answered[100 + n]["result"]["structuredContent"]["results"] for n in range(40))
    assert {tool["name"] for tool in answered[2]["result"]["tools"]} == TOOLS


def test_stdio_from_and_to_regular_files(index: Index, tmp_path: Path) -> None:
    """stdin and stdout redirected to files, not pipes (the event loop cannot watch a regular file: the SDK's own
    file writes stdout then): stdin ends at once, and yet every request read is answered before the server stops
    (the SDK alone cancels them at stdin's end, and an answer cancelled while being written was lost: CI saw
    ``tools/list`` go unanswered)."""
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_batch())
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "citeline.cli.main", "mcp", "--index", str(index.path)],
            env=_env(),
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    _all_answered(answers.read_bytes())


def test_stdio_pipe_closed_as_soon_as_written(index: Index) -> None:
    """The same batch through pipes, stdin closed right after the last request (``cat requests | citeline mcp``):
    every request answered, then the server ends by itself."""
    done = subprocess.run(
        [sys.executable, "-m", "citeline.cli.main", "mcp", "--index", str(index.path)],
        env=_env(),
        input=_batch(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr[-2000:]
    _all_answered(done.stdout)


def test_stdio_stops_drain_seconds_after_stdin_ends(index: Index) -> None:
    """Answering what was asked before stdin ended is bounded: a search that would take 30 s is answered
    "Connection closed" ``drain`` seconds after stdin ended, and the server ends."""
    code = (
        "import time; from citeline.index import Index\n"
        "Index.search = lambda self, *args, **kwargs: time.sleep(30)\n"
        "import anyio; from citeline.server import LIMITS, IndexService, mcp\n"
        f"service = IndexService(Index.open({str(index.path)!r}), 120.0)\n"
        "anyio.run(lambda: mcp.run_stdio(mcp.build_server(service, LIMITS), drain=1.0))\n"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", code], env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(_lines(*_HANDSHAKE))
        server.stdin.close()
        started = time.monotonic()
        output = b""
        while b'"id":3' not in output:  # the search's answer, the last one
            line = server.stdout.readline()
            assert line, "the server ended before answering"
            output += line
        answered = _answered(output)
        waited = time.monotonic() - started
        # The abandoned search's thread still runs out its 30 s before the process exits, as any search would.
        assert server.stderr is not None and server.wait(timeout=120) == 0
        errors = server.stderr.read()
    finally:
        server.kill()
    assert waited < 20, f"the server waited {waited:.0f} s for the search instead of its 1 s drain"
    assert b"Traceback" not in errors, errors[-2000:]
    assert "result" in answered[2] and answered[3]["error"]["message"] == "Connection closed"


def test_stray_output_while_serving_goes_to_stderr_not_the_wire(index: Index, tmp_path: Path) -> None:
    """A library that prints (to sys.stdout or straight to fd 1) during a search must not corrupt the protocol:
    fd 1 writes to stderr while the server holds the wire."""
    code = (
        "import os, sys; from citeline.index import Index; search = Index.search\n"
        "def noisy(self, *args, **kwargs):\n"
        "    print('stray print'); sys.stdout.flush(); os.write(1, b'stray write\\n')\n"
        "    return search(self, *args, **kwargs)\n"
        "Index.search = noisy\n"
        "from citeline.server import serve_mcp_stdio\n"
        f"serve_mcp_stdio({str(index.path)!r})\n"
    )
    errors = tmp_path / "stderr.txt"

    async def main() -> None:
        params = _python(code)
        with anyio.fail_after(120), errors.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for _ in range(2):
                    result = await session.call_tool("search", {"query": "ledger", **LEXICAL})
                    assert not result.is_error and result.structured_content is not None
                    assert result.structured_content["results"][0]["source_id"] == "records.jsonl#r1"

    anyio.run(main)
    assert errors.read_text().count("stray print") == 2 and errors.read_text().count("stray write") == 2


def test_allowed_roots_that_cannot_be_used_are_one_line_settings_errors(tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for root, says in [(tmp_path / "missing", "no such file"), ("~nosuchuser/x", "cannot be resolved"), (loop, "")]:
        with pytest.raises(SettingsError, match=f"--allow-ingest .*{says}"):
            allowed_roots([root])


def test_uris_round_trip() -> None:
    assert parse_uri(uri_of("abc")) == ("abc", None)
    assert parse_uri(uri_of("abc", 3, 40)) == ("abc", (3, 40))
    for bad in ("citeline://", "http://x", "citeline://a/chars/x-1", "citeline://a/b/c"):
        with pytest.raises(ValueError, match="not a citeline resource"):
            parse_uri(bad)


# ---------------------------------------------------------------- ingest: only when enabled, only configured roots


def test_the_ingest_tool_needs_the_flag_and_takes_only_configured_roots(tmp_path: Path) -> None:
    index = _index(tmp_path)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "new.md").write_text("# Ferry\n\nThe ferryman counted forty carts at dusk.\n", encoding="utf-8")

    async def listed(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == TOOLS | {"ingest"} and not tools["ingest"].annotations.read_only_hint
        assert tools["ingest"].input_schema["properties"]["root"]["enum"] == [str(extra.resolve()), 0]

    _run(_cli("mcp", "--index", str(index.path), "--allow-ingest", str(extra)), listed)

    code = (
        "from conftest import HashEmbedder; from citeline.server import serve_mcp_stdio; "
        f"serve_mcp_stdio({str(index.path)!r}, embedder=HashEmbedder(), ingest_roots=[{str(extra)!r}])"
    )

    async def ingest(session: ClientSession) -> None:
        for root in ("/etc", str(tmp_path / "docs"), 1, "../extra"):
            assert "'root'" in await _error(session, "ingest", {"root": root})
        before = index.status().documents
        run = await session.call_tool("ingest", {"root": 0})
        assert not run.is_error, _text(run)
        summary = run.structured_content
        assert summary is not None and summary["status"] == "succeeded" and summary["added"] == 1
        assert summary["roots"] == [str(extra.resolve())]
        found = await session.call_tool("search", {"query": "ferryman carts", **LEXICAL})
        assert found.structured_content["results"][0]["source_id"] == "new.md"  # type: ignore[index]
        assert index.status().documents == before + 1

    _run(_python(code), ingest)


# ---------------------------------------------------------------- a search while a commit lands


def test_searches_while_commits_land_see_one_generation_each(tmp_path: Path) -> None:
    index = _index(tmp_path)
    more = tmp_path / "more"
    more.mkdir()
    stop = threading.Event()
    commits: list[int] = []

    def writer() -> None:
        writer_index = Index.open(index.path, embedder=HashEmbedder())
        n = 0
        while not stop.is_set() and n < 12:
            (more / f"m{n}.md").write_text(f"# M{n}\n\nThe drover paid toll number {n} at the bridge.\n", "utf-8")
            commits.append(writer_index.ingest([more]).generation)
            n += 1

    async def test(session: ClientSession) -> None:
        thread = threading.Thread(target=writer)
        thread.start()
        seen: list[int] = []
        try:
            deadline = time.monotonic() + 60
            while thread.is_alive() and time.monotonic() < deadline:
                found = await session.call_tool("search", {"query": "drover toll bridge", "k": 20, **LEXICAL})
                assert not found.is_error, _text(found)
                answer = found.structured_content
                assert answer is not None
                seen.append(answer["generation"])
                for hit in answer["results"]:  # every cited span is the stored text of that generation or later
                    assert hit["source_id"].startswith("m") or hit["doc_id"]
        finally:
            stop.set()
            thread.join(60)
        assert seen == sorted(seen) and len(set(seen)) > 1, seen
        final = await session.call_tool("search", {"query": "drover toll bridge", "k": 20, **LEXICAL})
        assert final.structured_content["generation"] == commits[-1]  # type: ignore[index]
        assert len(final.structured_content["results"]) == len(commits)  # type: ignore[index]

    _run(_cli("mcp", "--index", str(index.path)), test)


# ---------------------------------------------------------------- streamable HTTP behind serve's token


def test_http_mcp_behind_the_token(index: Index) -> None:
    port = _free_port()
    env = {**_env(), "CITELINE_TOKEN": "s3cret"}
    command = [sys.executable, "-m", "citeline.cli.main", "serve", "--index", str(index.path), "--port", str(port)]
    process = subprocess.Popen([*command, "--log-level", "warning"], env=env)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        _when_up(f"http://127.0.0.1:{port}/health", process)
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic !!!"}):
            refused = httpx.post(url, json=initialize, headers=headers)
            assert refused.status_code == 401 and "token" in refused.json()["error"]

        async def main() -> None:
            headers = {"Authorization": "Bearer s3cret"}
            async with (
                create_mcp_http_client(headers=headers) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
                found = await session.call_tool("search", {"query": "levee", "k": 2, **LEXICAL})
                assert not found.is_error and found.structured_content is not None
                hit = found.structured_content["results"][0]
                read_back = await session.read_resource(hit["uri"])
                text = index.document(hit["doc_id"]).text[hit["char_start"] : hit["char_end"]]
                assert read_back.contents[0].text == text  # type: ignore[union-attr]
                assert "'k'" in await _error(session, "search", {"query": "levee", "k": -1})
                status = await session.call_tool("index_status", {})
                assert json.loads(_text(status))["documents"] == 5

        anyio.run(main)
    finally:
        process.terminate()
        process.wait(20)


def test_output_schemas_keep_every_field_inlined() -> None:
    from citeline.server.mcp.schemas import Citation, SearchOut, output_schema

    schema = output_schema(SearchOut)
    item = schema["properties"]["results"]["items"]
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    assert set(item["properties"]) == set(Citation.model_fields) and item["required"] == list(Citation.model_fields)
    assert item["properties"]["record_id"]["type"] == ["string", "null"]


# ---------------------------------------------------------------- the documented configuration


def _documented(heading: str) -> str:
    """The first fenced block after ``heading`` in docs/integrations.md."""
    text = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    after = text[text.index(heading) :]
    start = after.index("```")
    body_start = after.index("\n", start) + 1
    return after[body_start : after.index("```", body_start)]


def test_the_documented_stdio_configuration_cites_seeds(tmp_path: Path) -> None:
    """Issue 44's "done when": a stdio client configured as docs/integrations.md says (its `mcpServers` block, with
    the index path filled in) lists the tools and gets cited answers from seeds/, on an index `citeline ingest`
    built with the default model; the worked example's client code, run as printed, prints its cited answer."""
    server = json.loads(_documented("### Client configuration"))["mcpServers"]["citeline"]
    assert "type" not in server  # a stdio server: a command and its arguments
    bin_dir = Path(sys.executable).parent  # the docs: `which citeline`, or a virtualenv's bin/citeline
    command = str(bin_dir / server["command"])
    assert Path(command).exists(), f"{server['command']} is not installed beside {sys.executable}"
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for seed in SEEDS.iterdir():
        (seeds / seed.name).write_bytes(seed.read_bytes())
    ix = tmp_path / "seeds-ix"
    built = subprocess.run([command, "ingest", str(seeds), "--index", str(ix)], capture_output=True, timeout=600)
    assert built.returncode == 0, built.stderr.decode(errors="replace")[-2000:]
    args = [str(ix) if arg == "/home/me/notes-index" else arg for arg in server["args"]]
    assert str(ix) in args

    async def test(session: ClientSession) -> None:
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS
        found = await session.call_tool("search", {"query": "why did soldiers leave the garrison", "k": 3})
        assert not found.is_error and found.structured_content is not None, _text(found)
        hits = found.structured_content["results"]
        assert hits and all(Path(hit["source"]).parent == seeds for hit in hits)
        for hit in hits:  # the citation opens what it cites
            opened = await session.read_resource(hit["uri"])
            assert isinstance(opened, types.ReadResourceResult)
            content = opened.contents[0]
            assert isinstance(content, types.TextResourceContents)
            assert len(content.text) == hit["char_end"] - hit["char_start"]
            assert all(light["text"] in content.text for light in hit["highlights"])
        assert "garrison" in _text(found)

    env = {**_env(), "PATH": os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])}
    _run(StdioServerParameters(command=command, args=args, env=env), test)

    example = _documented("### A worked example\n\n`citeline ingest seeds")
    example = example.replace("/tmp/seeds-ix", str(ix))
    printed = subprocess.run([sys.executable, "-c", example], capture_output=True, env=env, timeout=300)
    assert printed.returncode == 0, printed.stderr.decode(errors="replace")[-2000:]
    out = printed.stdout.decode()
    assert "passages for 'why did soldiers leave the garrison'" in out and "citeline://" in out, out


# ---------------------------------------------------------------- fuzzing the tools' arguments

FUZZ_EXAMPLES = int(os.environ.get("CITELINE_FUZZ_EXAMPLES", examples(60)))
#: Values that have broken argument handling somewhere (as in tests/index/test_cli_fuzz.py), as an agent may send
#: them: huge and negative numbers, text that is not UTF-8 (a lone surrogate), paths that cannot be resolved, globs.
TRICKY = st.sampled_from(
    ["", " ", "\udcff", "caf\udce9.md", "~nosuchuser/x", "a\0b", "*", "[", "[[a]", "x=", "k=v", "author=Mara",
     "2026-13-45", "99999999999999999999", "ledger", "records.jsonl#r1", "citeline://x/chars/1-0", "hybrid"]
)  # fmt: skip
VALUES = st.one_of(
    TRICKY,
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.lists(TRICKY, max_size=3),
)
FILTERS = st.dictionaries(st.sampled_from(["source", "path", "where", "ingested_after", "ingested_before"]), VALUES)
CALLS = {
    "search": ["query", "k", "mode", "filters", "collapse", "min_score", "group"],
    "get_passage": ["doc_id", "char_start", "char_end", "context"],
    "get_document": ["doc_id", "offset", "max_chars"],
    "list_documents": ["filters", "limit", "offset"],
    "index_status": [],
}


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(CALLS)))
    arguments: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from([*CALLS[name], "extra"]), max_size=4, unique=True)):
        arguments[key] = draw(FILTERS if key == "filters" else VALUES)
    if name == "search" and "mode" not in arguments:
        arguments["mode"] = "lexical"
    return name, arguments


@pytest.fixture(scope="module")
def wire(index: Index) -> Iterator[Wire]:
    client = Wire(hash_server(index.path))
    yield client
    client.close()


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("CITELINE_FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(call=tool_calls())
def test_any_arguments_get_an_answer_never_a_crash(wire: Wire, call: tuple[str, dict[str, Any]]) -> None:
    """Random arguments to every tool, as a confused agent may send them, each answered: a result, a tool error of
    one line (never a traceback, never damage on this healthy index), or JSON-RPC's own error for arguments that
    are not an object of text (a lone surrogate escape is a parse error for the request's id); the server lives on."""
    name, arguments = call
    answer = wire.ask("tools/call", {"name": name, "arguments": arguments})
    if "error" in answer:
        assert answer["error"]["code"] in (-32700, -32602), answer
        assert "\n" not in answer["error"]["message"]
        return
    result = answer["result"]
    text = result["content"][0]["text"]
    if result.get("isError"):
        assert "\n" not in text and "Traceback" not in text and "internal error" not in text, (call, text)
        assert not DAMAGE.search(text), (call, text)
    else:
        assert result.get("structuredContent") is not None, (call, result)
