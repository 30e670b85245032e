"""The streamable-HTTP endpoint of the MCP server (:func:`http_app`), which ``citeline serve`` mounts at ``/mcp``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.lowlevel import Server

__all__ = ["http_app"]


class _GoneClients(logging.Filter):
    """The SDK's log of a client that disconnected before its request's body ended, as one line without the
    traceback the SDK logs with it (a client that goes away is not the server's error)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from starlette.requests import ClientDisconnect

        if record.exc_info and isinstance(record.exc_info[1], ClientDisconnect):
            record.msg, record.args = "an MCP client disconnected before its request's body ended", ()
            record.exc_info, record.exc_text, record.levelno, record.levelname = None, None, logging.WARNING, "WARNING"
        return True


def http_app(server: Server[Any]) -> tuple[Any, Callable[[Any], Any]]:
    """The streamable-HTTP endpoint of ``server`` (an ASGI app to route at ``/mcp``) and the lifespan that runs its
    session manager. Stateless JSON answers: each request stands alone, so ``serve --workers N`` may answer a
    client's requests from different processes. The Host and Origin check against DNS rebinding is the server's
    own, on every route (``citeline.server.guard.Guard``), not the SDK's (which knows only loopback names)."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

    sdk_log = logging.getLogger("mcp.server.streamable_http")
    if not any(isinstance(existing, _GoneClients) for existing in sdk_log.filters):
        sdk_log.addFilter(_GoneClients())
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return StreamableHTTPASGIApp(manager), lifespan
