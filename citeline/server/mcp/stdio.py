"""``citeline mcp``'s transport: MCP over this process's stdin and stdout (:func:`run_stdio`).

Coupled to the ``mcp`` SDK 2.3 (2.3.0 installed and tested; ``pyproject.toml`` allows ``>=2.3,<3``): it hands
``mcp.server.stdio.stdio_server`` its own ``stdin`` and ``stdout`` (typed there as ``anyio.AsyncFile``, of which the
SDK only iterates the lines and awaits ``write`` and ``flush``), wraps the SDK's memory streams (the read stream's
``last_context``, which the server loop reads, and the items it yields: a ``SessionMessage`` or the exception its
parser raised for a line, never saying which), and relies on the SDK taking a message with a bad ``id`` for a
notification and cancelling what is left unanswered when the read stream ends. A new SDK release that changes
any of these is checked against tests/system/test_mcp.py and test_mcp_wire.py before the pin moves.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import io
import json
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Self

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["MAX_REQUEST_BYTES", "run_stdio"]

_LOG = logging.getLogger(__name__)


async def run_stdio(server: Server[Any], *, drain: float = 30.0) -> None:
    """Serve MCP over this process's stdin and stdout until the client closes them (``citeline mcp``).

    The SDK's ``stdio_server`` speaks the protocol; the event loop itself reads the requests (:func:`_stdin_pipe`)
    and writes the answers (:func:`_stdout_pipe`), where the SDK's default files read each line, and write then
    flush each answer, on worker threads: three thread hand-offs a call
    (docs/performance.md#mcp-over-stdio-what-the-protocol-adds).

    When stdin ends, the requests already read are answered before the server stops (for up to ``drain`` seconds;
    the SDK answers what is left "Connection closed"): left to itself the SDK cancels them at once, and an answer
    cancelled while being written is never sent, so ``citeline mcp < requests > answers`` lost answers. When the
    client closes our stdout (or dies), the server stops at once and quietly: there is nobody left to answer."""
    from mcp.server.stdio import stdio_server

    unanswered = _Unanswered(drain)
    try:
        async with (
            _stdin_pipe() as stdin,
            _stdout_pipe() as stdout,
            stdio_server(stdin=unanswered.lines(stdin), stdout=stdout) as (read_stream, write_stream),  # type: ignore[arg-type]
        ):
            await server.run(
                unanswered.reading(read_stream),
                unanswered.writing(write_stream),
                server.create_initialization_options(),
            )
    except* (BrokenPipeError, ConnectionResetError):
        # The client went away (closed our stdout, or died): nobody is left to answer; stop quietly, as on EOF.
        _LOG.debug("citeline mcp: the client closed its end of the pipe; stopping")


def _id_in_notification(item: Any, line: str | None) -> bool:
    """Whether ``item`` is a notification (no id, as the SDK read it) whose ``line`` has an ``id`` nonetheless, one
    JSON-RPC does not allow (null, an object, a list, a boolean): an invalid request, not a notification."""
    if not (isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCNotification)):
        return False
    if line is None or '"id"' not in line:  # a cheap test first: most notifications have no such key at all
        return False
    with contextlib.suppress(ValueError, RecursionError):
        message = json.loads(line)
        return isinstance(message, dict) and "id" in message
    return False


def _problem(problem: Exception, message: Any) -> tuple[int, str]:
    """The JSON-RPC error code and one-line message for JSON (``message``) the SDK refused with ``problem``."""
    first = problem.errors()[0] if isinstance(problem, ValidationError) and problem.errors() else None
    if first is not None and first["type"] == "json_invalid":
        return types.PARSE_ERROR, f"Parse error: {first['msg']}"
    if not isinstance(message, dict):
        return types.INVALID_REQUEST, f"Invalid Request: a JSON-RPC message is an object, not {type(message).__name__}"
    if first is None:
        return types.INVALID_REQUEST, f"Invalid Request: {problem}"
    where = ".".join(str(part) for part in first["loc"][1:]) or "message"
    return types.INVALID_REQUEST, f"Invalid Request: {where}: {first['msg']}"


class _Unanswered:
    """The ids of the requests read and not yet answered, between the SDK's stdio streams and its server loop: the
    read stream ends (the server's cue to stop) only once none is left, or ``drain`` seconds after stdin ended."""

    def __init__(self, drain: float) -> None:
        self.drain = drain
        self.ids: set[Any] = set()
        self._settled = anyio.Event()
        self._answers: Any = None  # the SDK's write stream, for the answers to lines it could not parse
        self._read: collections.deque[str | None] = collections.deque()  # lines read, their verdicts not yet seen

    async def lines(self, source: AsyncIterator[str | None]) -> AsyncIterator[str]:
        """``source``'s lines as the SDK reads them, each kept until the SDK's verdict on it comes out of the read
        stream (:meth:`verdict`): the SDK answers one item a line, a message or the exception its parser raised,
        and never says which line an exception came from. An over-long line (None) reaches the SDK empty."""
        async for line in source:
            self._read.append(line)
            yield "" if line is None else line

    def verdict(self) -> str | None:
        """The line whose item the read stream gives now (None: an over-long line)."""
        return self._read.popleft() if self._read else ""

    async def refuse(self, problem: Exception, line: str | None) -> None:
        """Answer ``line``, which the SDK could not read as a JSON-RPC message (``problem``), as JSON-RPC asks: a
        parse error (-32700) for a line that is not JSON, or not JSON the SDK reads (a lone surrogate escape,
        ``"\\udcff"``, which Python's ``json.dumps`` writes for a file name that is not UTF-8; nesting deeper than
        its parser goes), an invalid request (-32600) for JSON that is not a message (not an object, no method, a
        bad field; a line longer than :data:`MAX_REQUEST_BYTES`); for the request's id when the line has one, else
        for id null. A notification (a method, no id) is not answered, even a bad one. Left to the SDK, such a line
        was only logged, and the client waited for an answer that never came."""
        code, request_id = types.INVALID_REQUEST, None
        if line is None:
            text = f"Invalid Request: a line longer than {MAX_REQUEST_BYTES} bytes (skipped)"
        else:
            try:
                message = json.loads(line)
            except RecursionError:
                message, code, text = None, types.PARSE_ERROR, "Parse error: nested too deeply"
            except ValueError as exc:
                message, code, text = None, types.PARSE_ERROR, f"Parse error: {exc}"
            else:
                if isinstance(message, dict) and isinstance(message.get("method"), str) and "id" not in message:
                    return  # a notification: nothing to answer
                request_id = message.get("id") if isinstance(message, dict) else None
                if isinstance(request_id, bool) or not isinstance(request_id, int | str):
                    request_id = None
                code, text = _problem(problem, message)
        error = types.ErrorData(code=code, message=" ".join(text.split())[:500])
        await self._answers.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))

    def settle(self, request_id: Any) -> None:
        """``request_id`` is answered (or cancelled by the client, which then expects no answer)."""
        self.ids.discard(request_id)
        if not self.ids:
            self._settled.set()

    async def wait(self) -> None:
        """Until every request read is answered, for at most ``drain`` seconds."""
        with anyio.move_on_after(self.drain):
            while self.ids:
                self._settled = anyio.Event()  # one set while ids were empty earlier would not wait
                await self._settled.wait()

    def reading(self, stream: Any) -> _Reading:
        return _Reading(stream, self)

    def writing(self, stream: Any) -> _Writing:
        self._answers = stream
        return _Writing(stream, self)


class _Wrapped:
    """One of the SDK's memory streams, entered, left and closed as itself."""

    def __init__(self, stream: Any, unanswered: _Unanswered) -> None:
        self.stream = stream
        self.unanswered = unanswered

    async def __aenter__(self) -> Self:
        await self.stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return bool(await self.stream.__aexit__(*exc))

    async def aclose(self) -> None:
        await self.stream.aclose()


class _Reading(_Wrapped):
    """The read stream: notes each request read, ends only once they are answered (:meth:`_Unanswered.wait`), and
    answers the lines that are not JSON itself (:meth:`_Unanswered.refuse`)."""

    @property
    def last_context(self) -> Any:
        """The context the SDK's stream carried with the last message (the SDK reads it from here)."""
        return self.stream.last_context

    def __aiter__(self) -> Self:
        return self

    async def receive(self) -> Any:
        return await self.__anext__()

    async def __anext__(self) -> Any:
        while True:
            try:
                item = await self.stream.__anext__()
            except StopAsyncIteration:
                await self.unanswered.wait()
                raise
            line = self.unanswered.verdict()
            if isinstance(item, Exception):
                await self.unanswered.refuse(item, line)
            elif _id_in_notification(item, line):  # the SDK takes a bad id for no id: a notification
                await self.unanswered.refuse(ValueError("id: must be a string or a number"), line)
            else:
                break
        message = item.message if isinstance(item, SessionMessage) else None  # else a line that is not JSON-RPC
        if isinstance(message, types.JSONRPCRequest):
            self.unanswered.ids.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            self.unanswered.settle((message.params or {}).get("requestId"))  # a cancelled request is not answered
        return item


class _Writing(_Wrapped):
    """The write stream: settles each request as its answer goes out."""

    async def send(self, item: SessionMessage, /) -> None:
        await self.stream.send(item)
        if isinstance(item.message, (types.JSONRPCResponse, types.JSONRPCError)):
            self.unanswered.settle(item.message.id)


class _Writer(asyncio.Protocol):
    """A pipe as ``stdio_server`` writes its ``stdout``: ``write`` hands the bytes to the loop's pipe transport
    (written at once while the pipe takes them, queued when it is full), ``flush`` waits only while the client is
    behind (the transport paused us), and both raise ``BrokenPipeError`` once the client's end is closed."""

    def __init__(self) -> None:
        self.transport: asyncio.WriteTransport | None = None
        self._writable = asyncio.Event()
        self._writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._writable.set()

    async def write(self, text: str) -> None:
        if self.transport is None or self.transport.is_closing():
            raise BrokenPipeError("the client closed stdout")
        self.transport.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writable.wait()
        if self.transport is None or self.transport.is_closing():
            raise BrokenPipeError("the client closed stdout")

    async def drained(self) -> None:
        """Once the client has read what is queued (or closed its end)."""
        while self.transport is not None and not self.transport.is_closing() and self.transport.get_write_buffer_size():
            await asyncio.sleep(0.01)


#: The longest request line ``citeline mcp`` reads from a pipe: the largest request its tools take (a 1,000-character
#: query and 5 filters of 20 values of 1,000 characters, JSON-escaped) is under 1 MiB. A longer line is skipped with
#: a line on stderr rather than held in memory whole, and answered as an invalid request for id null (its id is not
#: read).
MAX_REQUEST_BYTES = 4 * 2**20


class _Lines:
    """stdin as ``stdio_server`` iterates it: its lines, decoded as the SDK's own reader decodes them (UTF-8, bad
    bytes replaced), each at most :data:`MAX_REQUEST_BYTES`."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str | None:
        while True:
            try:
                line = await self.stream.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the end: a last line without its newline, or none
                if not exc.partial:
                    raise StopAsyncIteration from None
                line = exc.partial
            except asyncio.LimitOverrunError as exc:
                await self._skip(exc.consumed)
                _LOG.warning("citeline mcp: skipped a request line longer than %d bytes", MAX_REQUEST_BYTES)
                return None  # answered as an invalid request (_Unanswered.refuse)
            return line.decode("utf-8", errors="replace")

    async def _skip(self, consumed: int) -> None:
        # The rest of an over-long line, a limit's worth at a time: its first ``consumed`` bytes are buffered and
        # hold no newline (a newline right after them ends it).
        while True:
            await self.stream.readexactly(consumed)
            try:
                await self.stream.readuntil(b"\n")
                return
            except asyncio.IncompleteReadError:
                return
            except asyncio.LimitOverrunError as exc:
                consumed = exc.consumed


class _FileLines:
    """stdin as ``stdio_server`` iterates it where the event loop cannot watch it (a regular file, a terminal): its
    lines read on a worker thread, decoded and bounded as :class:`_Lines` does (None for an over-long line)."""

    def __init__(self, file: io.BufferedReader) -> None:
        self.file = file

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> str | None:
        line = await anyio.to_thread.run_sync(self._line, abandon_on_cancel=True)
        if line == b"":
            raise StopAsyncIteration
        return None if line is None else line.decode("utf-8", errors="replace")

    def _line(self) -> bytes | None:
        line = self.file.readline(MAX_REQUEST_BYTES + 1)
        if len(line) <= MAX_REQUEST_BYTES or line.endswith(b"\n"):
            return line
        while line and not line.endswith(b"\n"):  # the rest of the over-long line
            line = self.file.readline(MAX_REQUEST_BYTES)
        _LOG.warning("citeline mcp: skipped a request line longer than %d bytes", MAX_REQUEST_BYTES)
        return None


def _is_pipe(fd: int, *, terminal: bool = False) -> bool:
    """Whether ``fd`` is a pipe or a socket (or, with ``terminal``, a character device): what the event loop's pipe
    transports take. Never on Windows, whose loop has none for the standard streams."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return sys.platform != "win32" and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (terminal and stat.S_ISCHR(mode)))


@asynccontextmanager
async def _stdin_pipe() -> AsyncIterator[Any]:
    """stdin as a pipe the event loop reads (no thread), for ``stdio_server``'s ``stdin`` (typed there as
    ``anyio.AsyncFile``, of which it only iterates the lines); its lines read on a worker thread (:class:`_FileLines`)
    where stdin is not a pipe or socket (a regular file, which the loop cannot watch, or a terminal, which it would
    leave non-blocking for the shell) or on Windows. While serving, fd 0 reads the null device, as under the SDK's
    own claim of it, so neither a library nor a child process can take the client's requests; the wire comes back
    on fd 0 at the end."""
    if sys.platform == "win32":
        yield _FileLines(sys.stdin.buffer)  # type: ignore[arg-type]
        return
    null = os.open(os.devnull, os.O_RDONLY)
    if not _is_pipe(0):
        with _claimed(0, "rb", null) as file:
            os.close(null)
            yield _FileLines(io.BufferedReader(file))
        file.close()  # once fd 0 is the wire again
        return
    with _claimed(0, "rb", null) as pipe:
        os.close(null)
        transport: asyncio.BaseTransport | None = None
        try:
            stream = asyncio.StreamReader(limit=MAX_REQUEST_BYTES)
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(stream), pipe
            )
            yield _Lines(stream)
        finally:
            _close(transport, pipe)


@asynccontextmanager
async def _stdout_pipe() -> AsyncIterator[Any]:
    """stdout as a pipe the event loop writes (no thread), for ``stdio_server``'s ``stdout`` (typed there as
    ``anyio.AsyncFile``, of which it awaits only ``write`` and ``flush``); None (the SDK's own file) where stdout is
    not a pipe, socket or terminal (a regular file: the loop cannot watch it) or on Windows. While serving, fd 1
    writes to stderr, as the SDK's own claim of it does, so a library's stray ``print`` cannot corrupt the
    protocol; the wire comes back on fd 1 at the end."""
    if not _is_pipe(1, terminal=True):
        yield None
        return
    with _claimed(1, "wb", 2) as pipe:
        transport: asyncio.BaseTransport | None = None
        try:
            transport, writer = await asyncio.get_running_loop().connect_write_pipe(_Writer, pipe)
            yield writer
            with anyio.move_on_after(5):  # what is still queued, for a client that reads it
                await writer.drained()
        finally:
            _close(transport, pipe)


@contextlib.contextmanager
def _claimed(fd: int, mode: str, diversion: int) -> Iterator[Any]:
    """A standard stream's wire as a private file (close-on-exec, above the standard range) while ``fd`` itself
    points at ``diversion``, as the SDK's own claim of stdin and stdout does; at the end the wire is back on
    ``fd``, blocking again (the flag belongs to the pipe end, which the loop's transport made non-blocking)."""
    import fcntl

    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    pipe = os.fdopen(wire, mode, buffering=0)
    os.dup2(diversion, fd)
    try:
        yield pipe
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire, fd)
            os.set_blocking(fd, True)


def _close(transport: asyncio.BaseTransport | None, pipe: Any) -> None:
    if transport is not None:
        transport.close()  # closes the pipe too
    else:
        pipe.close()
