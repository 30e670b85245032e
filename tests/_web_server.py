"""A local web server with hostile behaviours, for remote roots' tests: ``http.server`` in a thread on 127.0.0.1.

Each path is a :class:`Route`: a status and headers for HEAD and GET (a HEAD may lie about the size), and a body
that is bytes or a stream of chunks sent with ``Transfer-Encoding: chunked`` (endless, until the client hangs up).
:meth:`WebServer.serve_folder` serves a folder's files as they are (the hostile corpus over HTTP).
"""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

MiB = 1024 * 1024


@dataclass
class Route:
    """What one path answers: ``status``, ``headers`` (both methods), ``head`` (HEAD's own headers, overriding:
    a lie), ``body`` (bytes, or a callable giving chunks: sent chunked), ``location`` (a redirect), ``needs``
    (a query the request must carry, else 403: a presigned URL), ``silent`` (seconds before any answer)."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    head: dict[str, str] = field(default_factory=dict)
    body: bytes | Callable[[], Iterable[bytes]] = b""
    needs: str | None = None
    #: seconds the server waits, the connection open, before it answers at all (a server that says nothing)
    silent: float = 0.0


def endless(line: bytes = b"word " * 200 + b"\n", total: int = 64 * 1024 * MiB) -> Callable[[], Iterator[bytes]]:
    """A chunked body of ``line`` repeated in 64 KiB chunks up to ``total`` bytes (the client hangs up first)."""
    chunk = line * max(1, 65536 // len(line))

    def chunks() -> Iterator[bytes]:
        sent = 0
        while sent < total:
            yield chunk
            sent += len(chunk)

    return chunks


def stalled(first: bytes = b"", seconds: float = 120.0) -> Callable[[], Iterator[bytes]]:
    """A body that sends ``first`` and then nothing for ``seconds``, the connection held open (a dead backend behind
    a proxy that already sent the headers)."""

    def chunks() -> Iterator[bytes]:
        if first:
            yield first
        time.sleep(seconds)

    return chunks


def trickle(piece: bytes = b"word ", every: float = 0.2, seconds: float = 120.0) -> Callable[[], Iterator[bytes]]:
    """A body of ``piece`` every ``every`` seconds for ``seconds``: never silent for long, never done."""

    def chunks() -> Iterator[bytes]:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            yield piece
            time.sleep(every)

    return chunks


def gzip_bomb(inflated: int) -> bytes:
    """A gzip member of ``inflated`` bytes of one repeated line: about a thousandth of that on the wire."""
    line = b"the same line again and again\n"
    block = line * (MiB // len(line))
    out = gzip.GzipFile(fileobj=(buffer := _Buffer()), mode="wb", compresslevel=9, mtime=0)
    for _ in range(inflated // len(block)):
        out.write(block)
    out.close()
    return buffer.value()


class _Buffer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def value(self) -> bytes:
        return b"".join(self.parts)


class WebServer:
    """The server: :attr:`routes` by path (changed freely while it runs), :attr:`gets` the paths GET asked."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.gets: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def do_GET(self) -> None:
                server.gets.append(urlsplit(self.path).path)
                self._answer(head=False)

            def _answer(self, head: bool) -> None:
                parts = urlsplit(self.path)
                route = server.routes.get(parts.path)
                if route is None:
                    route = Route(404, {"Content-Type": "text/plain"}, body=b"not found")
                elif route.needs is not None and route.needs not in parts.query:
                    route = Route(403, {"Content-Type": "text/plain"}, body=b"signature required")
                if route.silent:
                    time.sleep(route.silent)
                self.send_response(route.status)
                headers = {**route.headers, **(route.head if head else {})}
                chunked = callable(route.body) and "Content-Length" not in headers
                if not callable(route.body) and "Content-Length" not in headers:
                    headers["Content-Length"] = str(len(route.body))
                if chunked:
                    headers["Transfer-Encoding"] = "chunked"
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if head:
                    return
                try:
                    if not callable(route.body):
                        self.wfile.write(route.body)
                        return
                    for chunk in route.body():
                        if chunked:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        else:
                            self.wfile.write(chunk)
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client hanging up mid-body is what the hostile bodies are for

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def page(
        self, path: str, body: str | bytes, media_type: str = "text/markdown", etag: str | None = None, mtime: float = 0
    ) -> str:
        """Serve ``body`` at ``path`` (an honest page: its length, type, ETag and Last-Modified); its URL."""
        headers = {"Content-Type": media_type}
        if etag is not None:
            headers["ETag"] = f'"{etag}"'
        headers["Last-Modified"] = formatdate(mtime or time.time() - 3600, usegmt=True)
        self.routes[path] = Route(200, headers, body=body.encode() if isinstance(body, str) else body)
        return self.base + path

    def serve_folder(self, folder: Path) -> list[str]:
        """Serve every file under ``folder`` at its relative path, streamed from disk; their URLs."""
        urls = []
        for path in sorted(folder.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            relative = "/" + path.relative_to(folder).as_posix()
            size = path.stat().st_size

            def chunks(path: Path = path) -> Iterator[bytes]:
                with path.open("rb") as handle:
                    while block := handle.read(MiB):
                        yield block

            headers = {"Content-Length": str(size), "Last-Modified": formatdate(time.time() - 3600, usegmt=True)}
            self.routes[relative] = Route(200, headers, body=chunks)
            urls.append(self.base + relative)
        return urls

    def stop(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()
