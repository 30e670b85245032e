"""What every request passes first: the bearer token (when set) and a UTF-8 query string and path; and the
refusal to listen where other machines reach the index without a token."""

from __future__ import annotations

import ipaddress
import logging
from urllib.parse import unquote_to_bytes

from fastapi import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from citeline.errors import SettingsError
from citeline.server.access import CALLER, CALLER_KEY, OWNER, authenticate
from citeline.server.limits import TOKEN_ENV
from citeline.server.models import error_response
from citeline.store.access import TokenFile

_LOG = logging.getLogger("citeline.server")


class Guard:
    """ASGI middleware in front of every route: the bearer token (when set), then a UTF-8 query string and path.

    A browser asking for HTML is challenged with Basic authentication (the token as the password, any user
    name), so the search page works with a token and no script; programs send ``Authorization: Bearer TOKEN``.
    """

    def __init__(self, app: ASGIApp, token: str | None, tokens: TokenFile | None = None):
        self.app = app
        self.token = token.encode("utf-8") if token else None
        self.tokens = tokens  # named tokens with scopes (citeline.server.access), re-read when the file changes
        # Once the file has held a token, every request needs one, even after the last is revoked: revoking
        # tokens must never open the server to everyone.
        self.locked = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        reset = CALLER.set(scope.get(CALLER_KEY, OWNER))  # the caller every read of this request is scoped to
        try:
            await self.app(scope, receive, send)
        finally:
            CALLER.reset(reset)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        try:
            self.locked = self.locked or bool(self.tokens is not None and self.tokens.tokens())
            named = self.tokens if self.locked else None
            caller = authenticate(headers.get(b"authorization", b""), self.token, named)
        except SettingsError as exc:  # fail closed; the file's path and problem go to the log, not the caller
            _LOG.error("%s", exc)
            return error_response(503, "the server cannot read its tokens file; its log says why")
        if caller is None:
            wants_page = b"text/html" in headers.get(b"accept", b"")
            challenge = 'Basic realm="citeline"' if wants_page else 'Bearer realm="citeline"'
            return error_response(
                401,
                "this server needs its token: send the header `Authorization: Bearer TOKEN`",
                {"WWW-Authenticate": challenge},
            )
        scope[CALLER_KEY] = caller
        for part, raw in (("query string", scope.get("query_string", b"")), ("path", scope.get("raw_path") or b"")):
            try:
                unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
            except UnicodeDecodeError:
                return error_response(400, f"the {part} is not valid UTF-8; percent-encode text as UTF-8")
        return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): only this machine can connect."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, no_auth: bool) -> None:
    """Refuse (:class:`SettingsError`) to listen on an address other machines reach without a token, unless
    ``no_auth`` says so explicitly, and a token together with ``no_auth``."""
    if token and no_auth:
        raise SettingsError("give a token or --no-auth, not both")
    if not is_loopback(host) and not token and not no_auth:
        raise SettingsError(
            f"--host {host} lets other machines search this index: set a token (--token, or the {TOKEN_ENV} "
            "environment variable) or pass --no-auth if it is meant to be open"
        )
