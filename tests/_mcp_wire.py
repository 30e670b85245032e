"""The least MCP client: ``citeline mcp`` (or any MCP server on stdio) in a subprocess, spoken to one JSON line each
way, no SDK, no models, no schema check. Shared by the MCP system tests (tests/system/test_mcp.py,
test_mcp_wire.py, test_hostile_reads.py) and the raw client of bench/search.py's mcp subcommand.

Reads wait at most ``within`` seconds for a line (``select`` on the pipe), so a server that hangs fails the test
in a minute instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: MCP's handshake: the client's initialize request and its notification that it is initialized.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def env() -> dict[str, str]:
    """This environment, with the repository and tests/ importable (``conftest.HashEmbedder`` in the server)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}


def hash_server(index_path: str | Path) -> list[str]:
    """The command of ``citeline mcp`` over ``index_path`` with the tests' fast HashEmbedder."""
    code = (
        "from conftest import HashEmbedder; from citeline.server import serve_mcp_stdio; "
        f"serve_mcp_stdio({str(index_path)!r}, embedder=HashEmbedder())"
    )
    return [sys.executable, "-c", code]


class Wire:
    """An MCP server in a subprocess, a JSON line out and a line back. ``initialize``: shake hands first (as
    ``client_info``)."""

    def __init__(
        self,
        command: list[str],
        environment: dict[str, str] | None = None,
        cwd: Path | None = None,
        *,
        initialize: bool = True,
        client_info: dict[str, str] | None = None,
    ) -> None:
        self.process = subprocess.Popen(
            command, env=env() if environment is None else environment, cwd=cwd, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )  # fmt: skip
        self.pending = b""
        self.ids = iter(range(1, 10**9))
        if initialize:
            params = dict(INITIALIZE["params"])  # type: ignore[call-overload]
            if client_info is not None:
                params["clientInfo"] = client_info
            assert "result" in self.ask("initialize", params)
            self.send(INITIALIZED)

    def send_line(self, line: bytes) -> None:
        """Write one line (a newline is added) and flush it."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        """Write one message as a JSON line."""
        self.send_line(json.dumps(message).encode())

    def answer(self, within: float = 60, what: str = "") -> dict[str, Any]:
        """The next line the server writes, parsed; fails when none comes within ``within`` seconds or the server
        ends."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + within
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, f"no answer{what} within {within:g} s"
            chunk = os.read(self.process.stdout.fileno(), 1 << 20)
            assert chunk, f"the server ended{what}"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its answer (checked to be the answer to it)."""
        request_id = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        answer = self.answer(what=f" to {method} {params!r}")
        assert answer.get("id") == request_id, answer
        return answer

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its result (an error answer fails)."""
        answer = self.ask(method, params)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def close(self, wait: bool = False) -> None:
        """End the server: kill it, or (``wait``) close its stdin and wait for it to end by itself."""
        if wait:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=60)
        else:
            self.process.kill()
            self.process.wait(30)
