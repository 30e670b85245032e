"""``citeline mcp``'s wire as a hostile or careless client writes it (issue 50): every line that is not a JSON-RPC
message the server takes is answered with JSON-RPC's own error (parse error -32700, invalid request -32600; id null
when the line's id cannot be read), one answer a line, and the server lives on; a client that goes away (its end
of either pipe closed) ends the server quietly with status 0; ``citeline serve`` logs one line, no traceback, for
an ``/mcp`` client that disconnects in the middle of its request's body."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _mcp_wire import Wire, env, hash_server
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_mcp import _HANDSHAKE, _index, mcp_process
from test_server import _free_port, _when_up

from citeline import Index
from citeline.server.mcp.stdio import MAX_REQUEST_BYTES

FUZZ_EXAMPLES = int(os.environ.get("CITELINE_FUZZ_EXAMPLES", "60"))


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return _index(tmp_path_factory.mktemp("wire"))


class _Lines(Wire):
    """``citeline mcp`` in a subprocess, spoken to one raw line at a time."""

    def __init__(self, index: Index) -> None:
        super().__init__(hash_server(index.path))
        self.pings = 0

    def answers_to(self, line: bytes) -> list[dict[str, Any]]:
        """The answers to ``line``: what comes back before the answer to a ping sent right after it."""
        self.pings += 1
        ping = f"ping-{self.pings}"
        self.send_line(line)
        self.send({"jsonrpc": "2.0", "id": ping, "method": "ping"})
        answers = []
        while (answer := self.answer()).get("id") != ping:
            answers.append(answer)
        assert answer == {"jsonrpc": "2.0", "id": ping, "result": {}}, answer
        return answers


@pytest.fixture(scope="module")
def wire(index: Index) -> Iterator[_Lines]:
    client = _Lines(index)
    yield client
    client.close()


def _deep(depth: int, inner: str = "1") -> str:
    return '{"a":' * depth + inner + "}" * depth


# The kinds of line a client can send: any JSON value, JSON-RPC-shaped objects with any field right or wrong, nesting
# far deeper than any parser recurses, bytes that are not UTF-8 (nor JSON), blank lines.
KEYS = st.text(max_size=6).filter(lambda key: key not in ("result", "error", "method", "id", "jsonrpc"))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
IDS = st.one_of(st.integers(-(2**63), 2**63), st.text(max_size=8).filter(lambda s: not s.startswith("ping")), JSON)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {}
    if draw(st.booleans()):
        message["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "1.0", 2, None]))
    message["id"] = draw(IDS)  # always an id: a message without one is a notification, which is never answered
    if draw(st.booleans()) or True:
        message["method"] = draw(st.sampled_from(["ping", "tools/list", "tools/call", "resources/read", "nosuch", 5]))
    if draw(st.booleans()):
        message["params"] = draw(JSON)
    return message


DEPTHS = st.integers(min_value=1, max_value=5000)
LINES = st.one_of(
    JSON.map(lambda value: json.dumps(value).encode()),
    messages().map(lambda message: json.dumps(message).encode()),
    DEPTHS.map(lambda depth: ("[" * depth + "]" * depth).encode()),
    DEPTHS.map(lambda depth: _deep(depth).encode()),
    DEPTHS.map(lambda depth: b'{"jsonrpc":"2.0","id":7,"method":"ping","params":' + _deep(depth).encode() + b"}"),
    st.binary(max_size=40).map(lambda raw: raw.replace(b"\n", b"")),
    st.sampled_from([b"", b" ", b"\r", b"\t\t"]),
)


def _expected_id(line: bytes) -> Any:
    """The id an answer to ``line`` must carry: the line's own when it is a string or a number, else null."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, int | str) and not isinstance(request_id, bool) else None


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("CITELINE_FUZZ_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(line=LINES)
@example(line=b"[" * 1000 + b"]" * 1000)
@example(line=b'{"jsonrpc":"2.0","id":9,"method":"ping","params":' + _deep(1000).encode() + b"}")
@example(line=b'{"jsonrpc":"2.0","id":{},"method":"ping"}')
@example(line=b'{"jsonrpc":"2.0","id":null,"method":"ping"}')
@example(line=b'{"jsonrpc":"2.0","id":8,"method":"ping","params":5}')
@example(line=b"\xff\xfe\x80")
def test_every_line_gets_one_answer_and_the_server_lives_on(wire: _Lines, line: bytes) -> None:
    answers = wire.answers_to(line)
    assert len(answers) == 1, (line[:200], answers)
    answer = answers[0]
    assert answer["jsonrpc"] == "2.0" and ("result" in answer) != ("error" in answer), answer
    # a parse error may not know the id (JSON-RPC: null then): nesting deeper than the server's JSON reader goes
    unknown = answer.get("error", {}).get("code") == -32700 and answer["id"] is None
    assert unknown or answer["id"] == _expected_id(line), (line[:200], answer)
    if "error" in answer:
        error = answer["error"]
        assert isinstance(error["code"], int) and "\n" not in error["message"] and len(error["message"]) <= 500
        if error["code"] not in (-32700, -32600):  # the SDK's own: an unknown method, bad params of a known one
            assert error["code"] in (-32601, -32602, -32603) and _expected_id(line) is not None, answer


def test_a_huge_line_within_the_limit_is_answered(wire: _Lines) -> None:
    """A search whose line is just under :data:`MAX_REQUEST_BYTES`, and one just over (skipped, answered invalid)."""
    for size, code, request_id in ((MAX_REQUEST_BYTES - 1000, -32601, 5), (MAX_REQUEST_BYTES + 1000, -32600, None)):
        filler = "x" * (size - 200)
        line = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "nosuch", "params": {"x": filler}}).encode()
        answers = wire.answers_to(line)
        assert len(answers) == 1 and answers[0]["error"]["code"] == code, (size, str(answers)[:300])
        assert answers[0]["id"] == request_id


def _started(index: Index) -> subprocess.Popen[bytes]:
    server = mcp_process(index)
    assert server.stdin is not None
    requests = [*_HANDSHAKE[:2], *({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/list"} for n in range(300))]
    server.stdin.write(b"".join(json.dumps(request).encode() + b"\n" for request in requests))
    server.stdin.flush()
    return server


@pytest.mark.parametrize("closed", ["stdout", "stdout-then-stdin", "stdin-then-stdout", "killed-client"])
def test_a_client_that_goes_away_ends_the_server_quietly(index: Index, closed: str) -> None:
    """The client closes the pipe the server answers on (with answers pending: 300 listings are far more than a
    pipe holds), then or before the pipe it writes on; or dies (both at once): exit 0, nothing on stderr but
    logging, never a traceback."""
    server = _started(index)
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    time.sleep(1)
    if closed == "stdin-then-stdout":
        server.stdin.close()
        server.stdout.close()
    elif closed == "killed-client":
        server.stdout.close()
        server.stdin.close()
    else:
        server.stdout.close()
        time.sleep(2)
        if closed == "stdout-then-stdin":
            server.stdin.close()
    errors = server.stderr.read()
    server.wait(60)
    assert server.returncode == 0 and b"Traceback" not in errors and b"Error" not in errors, errors.decode()[-3000:]


def test_an_http_client_that_disconnects_mid_body_is_one_log_line_and_bad_bodies_are_answered(
    index: Index, tmp_path: Path
) -> None:
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [sys.executable, "-m", "citeline.cli.main", "serve", "--index", str(index.path), "--port", str(port)],
            env=env(),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            _when_up(f"{url}/health", server)
            head = (
                f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n"
            )
            for _ in range(3):
                with socket.create_connection(("127.0.0.1", port)) as client:
                    client.sendall(head.encode() + b'{"jsonrpc":"2.0",')
                    time.sleep(0.3)
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            # bodies that are not a message: a JSON-RPC error each (the SDK's), never a 500, the server alive
            for body in (b"[" * 1000 + b"]" * 1000, _deep(1000).encode(), b"\xff", b"42", b"{}", b""):
                refused = httpx.post(f"{url}/mcp", content=body, headers=accept, timeout=30)
                assert 400 <= refused.status_code < 500 and "error" in refused.json(), (body[:20], refused.text)
            assert httpx.post(f"{url}/mcp", json=ping, headers=accept, timeout=30).json()["result"] == {}
        finally:
            server.terminate()
            server.wait(60)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    assert text.count("an MCP client disconnected before its request's body ended") == 3, text[-3000:]
